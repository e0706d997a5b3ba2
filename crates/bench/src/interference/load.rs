//! The background loads of `docket bench interference`: the queue draining at full speed, and
//! documents ingested through the real pipeline; each runs until told to stop and reports its
//! rate.

use std::sync::Arc;
use std::time::{Duration, Instant};

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use tokio_util::sync::CancellationToken;

use super::{DRAIN, INGEST_BACKLOG, window};
use crate::queue::drain::{EnqueueTally, worker_round};
use docket::chunk::ChunkConfig;
use docket::embed::Embedder;

pub(super) async fn sleep(time: Duration) -> anyhow::Result<()> {
    tokio::time::sleep(time).await;
    Ok(())
}

/// A background load: runs until its token is cancelled, then returns its rate (units per s).
pub(super) type Load =
    Box<dyn FnOnce(CancellationToken) -> tokio::task::JoinHandle<anyhow::Result<f64>>>;

/// Runs `foreground` while `load` runs; returns the load's rate and the foreground's result.
pub(super) async fn with_load<T>(
    load: Load,
    foreground: impl std::future::Future<Output = anyhow::Result<T>>,
) -> anyhow::Result<(f64, T)> {
    let stop = CancellationToken::new();
    let running = load(stop.clone());
    // Let the load reach full speed before anything is timed.
    tokio::time::sleep(Duration::from_millis(500)).await;
    let result = foreground.await;
    stop.cancel();
    let rate = running.await??;
    Ok((rate, result?))
}

/// The queue draining rounds of `jobs` no-op jobs, back to back; its rate in jobs/s.
pub(super) fn drain(pool: &sqlx::PgPool, jobs: usize) -> Load {
    let pool = pool.clone();
    Box::new(move |stop| {
        tokio::spawn(async move {
            let mut tally = EnqueueTally::default();
            let started = Instant::now();
            let mut drained = 0;
            while !stop.is_cancelled() {
                worker_round(&pool, DRAIN, jobs, &mut tally).await?;
                drained += jobs;
            }
            Ok(drained as f64 / started.elapsed().as_secs_f64())
        })
    })
}

/// The real pipeline with the hashing embedder, its version the corpus's (already active).
pub(super) async fn pipeline(
    pool: &sqlx::PgPool,
    embedder: Embedder,
) -> anyhow::Result<Arc<docket::pipeline::Pipeline>> {
    let exe = std::env::current_exe()?;
    let pipeline = docket::pipeline::Pipeline::new(
        pool.clone(),
        embedder,
        ChunkConfig::default(),
        docket::extract::ExtractSettings::new(exe),
    );
    pipeline.prepare().await?;
    Ok(Arc::new(pipeline))
}

/// Uploads text documents (about four chunks each) as fast as the pipeline keeps up, with a
/// worker running the pipeline; its rate in documents made ready per second.
pub(super) fn ingest(
    pool: &sqlx::PgPool,
    pipeline: &Arc<docket::pipeline::Pipeline>,
    words: &[String],
) -> Load {
    let (pool, pipeline, words) = (pool.clone(), pipeline.clone(), words.to_vec());
    Box::new(move |stop| {
        tokio::spawn(async move {
            let mut registry = docket::worker::Registry::new();
            pipeline.register(&mut registry);
            registry
                .set_concurrency("extract", 2)
                .set_concurrency("embed", 4);
            let mut config = docket::worker::WorkerConfig::for_lease(Duration::from_secs(300));
            config.poll_interval = Duration::from_millis(200);
            let queue = docket::queue::Queue::new(pool.clone(), Duration::from_secs(300));
            let worker = docket::worker::Worker::new(queue, registry, config);
            let worker_stop = CancellationToken::new();
            let worker = tokio::spawn(worker.run(worker_stop.clone().cancelled_owned()));
            let ready_before = ready_documents(&pool).await?;
            let started = Instant::now();
            let mut rng = StdRng::seed_from_u64(rand::random());
            while !stop.is_cancelled() {
                let waiting: i64 = sqlx::query_scalar(
                    "select count(*) from documents where status not in ('ready', 'failed')",
                )
                .fetch_one(&pool)
                .await?;
                if waiting >= INGEST_BACKLOG {
                    tokio::time::sleep(Duration::from_millis(10)).await;
                    continue;
                }
                for _ in 0..10 {
                    let text = format!(
                        "{} {}",
                        rng.random::<u64>(),
                        window(&words, &mut rng, 500, 700)
                    );
                    let upload = docket::documents::NewDocument {
                        collection: docket::collections::DEFAULT,
                        filename: "ingest.txt",
                        content_type: "text/plain",
                        bytes: text.as_bytes(),
                        upload: None,
                    };
                    docket::pipeline::create_with_extract_job(&pool, &upload).await?;
                }
            }
            let ready = ready_documents(&pool).await? - ready_before;
            let rate = ready as f64 / started.elapsed().as_secs_f64();
            worker_stop.cancel();
            worker.await?;
            Ok(rate)
        })
    })
}

async fn ready_documents(pool: &sqlx::PgPool) -> anyhow::Result<i64> {
    Ok(sqlx::query_scalar(
        "select count(*) from documents where status = 'ready' and filename = 'ingest.txt'",
    )
    .fetch_one(pool)
    .await?)
}
