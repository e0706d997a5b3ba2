//! The embed step: a document's chunks become vectors under one model version.
//!
//! Resumable: each batch of vectors is upserted as soon as the provider returns it, and a
//! (re)started job embeds only the chunks that have no vector yet under this version. The set
//! row, the document's `ready` status and this job's completion commit together at the end.
//! Every vector is written only onto a chunk whose content hash is still that of the text it was
//! made from, so a job overtaken by a reprocess writes nothing stale (and a reprocess or delete
//! also cancels it: it stops at its next heartbeat).
//!
//! Text is never paid for twice under one version: each batch takes the vectors the embedding
//! cache holds for its texts ([`crate::embed::cache`], keyed by version and the text's SHA-256,
//! the chunk's content hash) and sends only the misses, repeated text within one request once;
//! what it paid for goes into the cache in the same transaction. The batch's transaction holds
//! the cache's locks on its texts, so two documents sharing a chunk at once send it once. The
//! job may name any registered version this process can build an embedder for
//! ([`Pipeline::embedder_for`]).

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use pgvector::Vector;

use super::Pipeline;
use super::jobs::EmbedJob;
use crate::documents::{self, DocumentId, Step};
use crate::embed::{EmbedError, Embedder, cache};
use crate::queue;
use crate::worker::{Job, JobError, Outcome, ResultExt};

/// How long to wait when a provider says "slow down" without saying for how long.
const DEFAULT_RATE_LIMIT_WAIT: Duration = Duration::from_secs(20);

/// A chunk that has no vector yet under the job's version.
struct Missing {
    chunk_index: i32,
    text: String,
    token_count: i32,
    content_hash: Vec<u8>,
}

pub(super) async fn run(
    pipeline: Arc<Pipeline>,
    job: Job,
    EmbedJob {
        document_id,
        model_version,
    }: EmbedJob,
) -> Result<Outcome, JobError> {
    let pool = &pipeline.pool;
    let Some(version) = crate::models::get(pool, &model_version).await.retryable()? else {
        return Err(JobError::Fatal(anyhow::anyhow!(
            "model version {model_version} is not registered"
        )));
    };
    // A process embeds its own version and the versions it can build from its configuration
    // (see Pipeline::embedder_for), and claims only those; one it claimed all the same (a version
    // registered since its last claim, or an older binary's claim filter) goes back for a process
    // that can, without spending an attempt. During a model switch mixed fleets are normal.
    let embedder = pipeline
        .embedder_for(&version)
        .map_err(|reason| JobError::Elsewhere { reason })?;

    let missing = sqlx::query_as!(
        Missing,
        "select c.chunk_index, c.text, c.token_count, c.content_hash
         from chunks c
         where c.document_id = $1
           and not exists (
               select 1 from embeddings e
               where e.document_id = c.document_id
                 and e.model_version = $2
                 and e.chunk_index = c.chunk_index)
         order by c.chunk_index",
        document_id.0,
        &model_version,
    )
    .fetch_all(pool)
    .await
    .retryable()?;

    let mut cached = 0;
    for batch in missing.chunks(embedder.max_batch().max(1)) {
        cached += embed_through_cache(
            &pipeline,
            &job,
            &embedder,
            document_id,
            &model_version,
            batch,
        )
        .await?;
    }

    let outcome = complete_set(&pipeline, &job, document_id, &model_version).await?;
    if let Some(chunks) = outcome {
        let sent = missing.len() - cached;
        tracing::info!(document = %document_id, chunks, sent, cached, %model_version, "embedded");
        return Ok(Outcome::CompletedInTransaction);
    }
    Ok(Outcome::Complete)
}

/// One batch: its cached vectors taken, its misses sent, both written, in one transaction that
/// holds the cache's locks on its texts. Returns how many chunks the cache served.
async fn embed_through_cache(
    pipeline: &Pipeline,
    job: &Job,
    embedder: &Embedder,
    document_id: DocumentId,
    model_version: &str,
    batch: &[Missing],
) -> Result<usize, JobError> {
    let keys: Vec<&[u8]> = batch.iter().map(|c| c.content_hash.as_slice()).collect();
    let started = std::time::Instant::now();
    let mut tx = pipeline.pool.begin().await.retryable()?;
    cache::lock(&mut tx, model_version, &keys)
        .await
        .retryable()?;
    let hits = cache::take(&mut tx, model_version, &keys)
        .await
        .retryable()?;
    let known: HashMap<&[u8], &cache::Hit> =
        hits.iter().map(|h| (h.text_sha256.as_slice(), h)).collect();
    let misses: Vec<&Missing> = batch
        .iter()
        .filter(|c| !known.contains_key(c.content_hash.as_slice()))
        .collect();
    let mut database = started.elapsed();
    let sent = if misses.is_empty() {
        Vec::new()
    } else {
        match embed_batch(embedder, model_version, &misses).await {
            Ok(vectors) => vectors,
            Err(err) => {
                drop(tx);
                return Err(embedding_failed(pipeline, job, document_id, err).await);
            }
        }
    };
    let mut fresh: HashMap<&[u8], &Vector> = HashMap::new();
    let mut entries = Vec::new();
    for (chunk, vector) in misses.iter().zip(&sent) {
        if fresh
            .insert(chunk.content_hash.as_slice(), vector)
            .is_none()
        {
            entries.push(cache::Entry {
                text_sha256: &chunk.content_hash,
                embedding: vector,
                token_count: chunk.token_count,
            });
        }
    }
    let started = std::time::Instant::now();
    cache::put(&mut tx, model_version, &entries)
        .await
        .retryable()?;
    let vectors: Vec<Vector> = batch
        .iter()
        .filter_map(|c| {
            let key = c.content_hash.as_slice();
            known
                .get(key)
                .map(|h| h.embedding.clone())
                .or_else(|| fresh.get(key).map(|v| (*v).clone()))
        })
        .collect();
    let served = batch.len() - misses.len();
    let saved: i64 = batch
        .iter()
        .filter(|c| known.contains_key(c.content_hash.as_slice()))
        .map(|c| i64::from(c.token_count))
        .sum();
    let written = write_batch(&mut tx, document_id, model_version, batch, &vectors).await;
    // The vectors paid for are kept even when the chunks changed meanwhile: their text's
    // vector is still that.
    tx.commit().await.retryable()?;
    database += started.elapsed();
    crate::metrics::global().step_time("writes", database);
    crate::metrics::global().embedding_cache(
        model_version,
        served as u64,
        entries.len() as u64,
        u64::try_from(saved).unwrap_or(0),
    );
    written?;
    Ok(served)
}

/// One provider call for a batch of chunks, repeated text sent once; the vectors come back in
/// the batch's order. Every call is counted in the metrics with its outcome.
async fn embed_batch(
    embedder: &Embedder,
    model_version: &str,
    batch: &[&Missing],
) -> Result<Vec<Vector>, EmbedError> {
    let mut texts: Vec<String> = Vec::with_capacity(batch.len());
    let mut slots: Vec<usize> = Vec::with_capacity(batch.len());
    for chunk in batch {
        let slot = match texts.iter().position(|t| *t == chunk.text) {
            Some(slot) => slot,
            None => {
                texts.push(chunk.text.clone());
                texts.len() - 1
            }
        };
        slots.push(slot);
    }
    let started = std::time::Instant::now();
    let result = embedder.embed(&texts).await;
    let outcome = match &result {
        Ok(_) => "ok",
        Err(err) if err.is_rate_limited() => "rate_limited",
        Err(err) => err.code(),
    };
    crate::metrics::global().embedding_call(model_version, outcome, started.elapsed());
    crate::metrics::global().step_time("embedding", started.elapsed());
    let unique = result?;
    Ok(slots
        .iter()
        .filter_map(|slot| unique.get(*slot))
        .map(|v| Vector::from(v.clone()))
        .collect())
}

/// A checkpoint per batch: a crash after this point does not pay for these again. Fenced by
/// content hash: a vector lands only on a chunk that still holds the text it was made from, so
/// a reprocess that replaced the chunks meanwhile never receives the old text's vectors under
/// the new chunks' indexes; then the job stops paying for stale text and starts over.
async fn write_batch(
    conn: &mut sqlx::PgConnection,
    document_id: DocumentId,
    model_version: &str,
    batch: &[Missing],
    vectors: &[Vector],
) -> Result<(), JobError> {
    let indexes: Vec<i32> = batch.iter().map(|chunk| chunk.chunk_index).collect();
    let hashes: Vec<&[u8]> = batch
        .iter()
        .map(|chunk| chunk.content_hash.as_slice())
        .collect();
    let written = sqlx::query!(
        "insert into embeddings (document_id, model_version, chunk_index, embedding)
         select $1, $2, input.chunk_index, input.embedding
         from unnest($3::int[], $4::vector[], $5::bytea[])
              as input(chunk_index, embedding, content_hash)
         join chunks c
           on c.document_id = $1
          and c.chunk_index = input.chunk_index
          and c.content_hash = input.content_hash
         on conflict (document_id, model_version, chunk_index)
         do update set embedding = excluded.embedding",
        document_id.0,
        model_version,
        &indexes,
        // pgvector's type is not one the query macros know: bound as it is, unchecked.
        vectors as _,
        &hashes as &[&[u8]],
    )
    .execute(conn)
    .await
    .retryable()?
    .rows_affected();
    if written < indexes.len() as u64 {
        return Err(JobError::Retry {
            error: anyhow::anyhow!(
                "the chunks changed while embedding ({written} of {} vectors still matched their text)",
                indexes.len()
            ),
            after: Some(Duration::from_secs(1)),
        });
    }
    Ok(())
}

/// Ends the job once every chunk has a vector: the set row, the document's `ready` status and
/// this job's completion, in one transaction. Returns the chunk count, or `None` when the
/// document was deleted meanwhile (nothing to do).
async fn complete_set(
    pipeline: &Pipeline,
    job: &Job,
    document_id: DocumentId,
    model_version: &str,
) -> Result<Option<i64>, JobError> {
    let mut tx = pipeline.pool.begin().await.retryable()?;
    let counts = sqlx::query!(
        r#"select
               (select count(*) from chunks where document_id = $1) as "chunks!",
               (select count(*) from embeddings where document_id = $1 and model_version = $2)
                   as "embedded!"
           from documents
           where id = $1"#,
        document_id.0,
        model_version,
    )
    .fetch_optional(&mut *tx)
    .await
    .retryable()?;
    let Some(counts) = counts else {
        return Ok(None);
    };
    let (chunks, embedded) = (counts.chunks, counts.embedded);
    if chunks != embedded {
        // The chunks changed under us (a reprocess); this job's view is stale, try again.
        return Err(JobError::Retry {
            error: anyhow::anyhow!(
                "{embedded} of {chunks} chunks have vectors; the chunks changed while embedding"
            ),
            after: Some(Duration::from_secs(1)),
        });
    }
    sqlx::query!(
        "insert into embedding_sets (document_id, model_version, chunk_count, completed_at)
         values ($1, $2, $3, now())
         on conflict (document_id, model_version)
         do update set chunk_count = excluded.chunk_count, completed_at = excluded.completed_at",
        document_id.0,
        model_version,
        i32::try_from(chunks).unwrap_or(i32::MAX),
    )
    .execute(&mut *tx)
    .await
    .retryable()?;
    if let Some(ready) = documents::mark_ready(&mut tx, document_id)
        .await
        .retryable()?
    {
        crate::webhooks::document_changed(&mut tx, &ready)
            .await
            .retryable()?;
    }
    queue::complete_in(&mut tx, &job.lease).await.retryable()?;
    tx.commit().await.retryable()?;
    Ok(Some(chunks))
}

/// Maps a provider failure to the job's fate; permanent ones also fail the document.
async fn embedding_failed(
    pipeline: &Pipeline,
    job: &Job,
    id: DocumentId,
    err: EmbedError,
) -> JobError {
    if err.is_rate_limited() {
        return JobError::RateLimited {
            reason: err.to_string(),
            after: err.retry_after().unwrap_or(DEFAULT_RATE_LIMIT_WAIT),
        };
    }
    if !err.is_permanent() {
        return JobError::Retry {
            after: err.retry_after(),
            error: anyhow::Error::new(err),
        };
    }
    let settled = match pipeline.pool.acquire().await {
        Ok(mut conn) => {
            let (code, message) = (err.code(), err.to_string());
            let failure = (code, message.as_str());
            let permanent = err.is_permanent();
            super::settle::failed_step(&mut conn, id, job.id, Step::Embed, failure, permanent).await
        }
        Err(err) => Err(err),
    };
    if let Err(db) = settled {
        return JobError::Retry {
            error: anyhow::Error::new(db).context("recording the embedding failure"),
            after: None,
        };
    }
    JobError::Fatal(anyhow::Error::new(err))
}
