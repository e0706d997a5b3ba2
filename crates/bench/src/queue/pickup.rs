//! Pickup latency: the time from an enqueue's commit (as the enqueuer sees it return) to the
//! start of the handler that runs the job, on an idle worker. Jobs are enqueued one at a time,
//! a few milliseconds apart, each in its own transaction, as an application would.
//!
//! With NOTIFY the poll interval is long (5 s), so only the notification can explain a fast
//! pickup; poll-only turns LISTEN off, and the latency is then about half the poll interval.

use std::time::{Duration, Instant};

use anyhow::Context;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use super::report::Latency;
use docket::queue::{NewJob, Queue, enqueue};
use docket::worker::{Outcome, Registry, Worker, WorkerConfig};

/// A kind of its own, so that nothing left from the drain rounds is picked up.
const KIND: &str = "bench_pickup";

/// The gap between two enqueues: jobs arrive one by one, not in a burst.
const GAP: Duration = Duration::from_millis(5);

/// How the idle worker learns about new jobs.
#[derive(Debug, Clone, Copy)]
pub(super) enum Mode {
    /// LISTEN/NOTIFY, with a 5 s poll as the (unused) safety net.
    Notify,
    /// No LISTEN: polling every interval.
    Poll(Duration),
}

/// Measures `samples` pickups in `mode`.
pub(super) async fn measure(
    pool: &sqlx::PgPool,
    mode: Mode,
    samples: usize,
) -> anyhow::Result<Latency> {
    let (started_tx, mut started_rx) = mpsc::unbounded_channel::<(usize, Instant)>();
    let mut registry = Registry::new();
    registry.register(KIND, 4, move |job| {
        let at = Instant::now();
        let sample = job.payload["i"].as_u64().map(|i| (i as usize, at));
        let started_tx = started_tx.clone();
        async move {
            if let Some(sample) = sample {
                // The receiver is gone only when the measurement gave up; nothing to report to.
                let _ = started_tx.send(sample);
            }
            Ok(Outcome::Complete)
        }
    });
    let lease = Duration::from_secs(300);
    let mut config = WorkerConfig::for_lease(lease);
    config.worker_id = "bench-pickup".to_owned();
    (config.listen, config.poll_interval) = match mode {
        Mode::Notify => (true, Duration::from_secs(5)),
        Mode::Poll(every) => (false, every),
    };
    let worker = Worker::new(Queue::new(pool.clone(), lease), registry, config);
    let stop = CancellationToken::new();
    let running = tokio::spawn(worker.run(stop.clone().cancelled_owned()));
    // Let the listener connect and the producer make its first, empty claim: the worker is
    // idle and waiting when the first job arrives.
    tokio::time::sleep(Duration::from_millis(300)).await;

    let measured = async {
        let mut committed = Vec::with_capacity(samples);
        for i in 0..samples {
            let mut tx = pool.begin().await.context("starting an enqueue")?;
            enqueue(&mut tx, &NewJob::new(KIND, serde_json::json!({ "i": i })))
                .await
                .context("enqueueing a pickup sample")?;
            tx.commit().await.context("committing a pickup sample")?;
            committed.push(Instant::now());
            tokio::time::sleep(GAP).await;
        }
        let mut started: Vec<Option<Instant>> = vec![None; samples];
        let mut received = 0;
        while received < samples {
            let (i, at) = tokio::time::timeout(Duration::from_secs(30), started_rx.recv())
                .await
                .map_err(|_| anyhow::anyhow!("{received} of {samples} pickups in 30 s"))?
                .context("the pickup handler is gone")?;
            if let Some(slot) = started.get_mut(i).filter(|slot| slot.is_none()) {
                *slot = Some(at);
                received += 1;
            }
        }
        // A handler can start a hair before the enqueuer sees its commit return; that counts
        // as zero, not as a negative latency.
        let latencies: Vec<Duration> = committed
            .iter()
            .zip(&started)
            .filter_map(|(committed, started)| {
                started.map(|started| started.saturating_duration_since(*committed))
            })
            .collect();
        anyhow::Ok(Latency::from_samples(latencies))
    };
    let latency = measured.await;
    stop.cancel();
    running.await.context("the pickup worker task failed")?;
    latency
}
