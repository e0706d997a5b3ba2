//! Search while the same process embeds documents: what a search costs during ingestion under
//! `docket serve`, whose in-process workers embed chunks with the embedder that also embeds each
//! search's query (`--semantic` only: the hashing embedder costs nothing worth measuring).
//!
//! A task embeds batches of passages (corpus windows of a chunk's length, as many as the embed
//! step sends at once: [`Embedder::max_batch`]) back to back on the bench's embedder, while
//! vector phrases and hybrid questions are timed through the API as in the idle phase. Beside
//! the idle figures it reports their p50/p95, and the passages a second the task embedded alone
//! (two calls before the searches) and while searched.

use std::sync::Arc;
use std::time::Instant;

use rand::SeedableRng;
use rand::rngs::StdRng;
use tokio_util::sync::CancellationToken;

use docket::embed::{Embedder, Purpose};
use docket::search::Searcher;

use super::{Row, Words, time_modes};

/// What the busy phase measured.
pub(super) struct Busy {
    /// Vector phrases and hybrid questions, as [`time_modes`] reports them.
    pub(super) table: Vec<Row>,
    /// Passages per embedding call.
    pub(super) batch: usize,
    /// Passages a second with nothing else running, and while searched.
    pub(super) alone_per_s: f64,
    pub(super) searched_per_s: f64,
}

/// Times `timed` vector phrases and hybrid questions while `embedder` embeds passages.
pub(super) async fn measure(
    pool: &sqlx::PgPool,
    searcher: Arc<Searcher>,
    embedder: &Embedder,
    words: &Words<'_>,
    queries: &[String],
    questions: &[String],
    timed: usize,
) -> anyhow::Result<Busy> {
    // Its own seed, so the other phases draw what they drew before it existed; 150 to 250
    // words are about the 300 tokens of a default chunk.
    let mut rng = StdRng::seed_from_u64(7);
    let batch: Vec<String> = (0..embedder.max_batch())
        .map(|_| words.window(&mut rng, 150..250))
        .collect();
    let started = Instant::now();
    for _ in 0..2 {
        embedder.embed_as(&batch, Purpose::Passage).await?;
    }
    let alone_per_s = (2 * batch.len()) as f64 / started.elapsed().as_secs_f64();

    let size = batch.len();
    let stop = CancellationToken::new();
    let background = tokio::spawn({
        let (embedder, stop) = (embedder.clone(), stop.clone());
        async move {
            let started = Instant::now();
            let mut embedded = 0usize;
            while !stop.is_cancelled() {
                embedder.embed_as(&batch, Purpose::Passage).await?;
                embedded += batch.len();
            }
            anyhow::Ok(embedded as f64 / started.elapsed().as_secs_f64())
        }
    });
    let modes = [("vector", queries), ("hybrid/questions", questions)];
    let timing = time_modes(pool, searcher, &modes, timed).await;
    stop.cancel();
    let searched_per_s = background.await??;
    Ok(Busy {
        table: timing?.0,
        batch: size,
        alone_per_s,
        searched_per_s,
    })
}
