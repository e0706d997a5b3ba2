//! The worker runtime: runs registered handlers on jobs from the [`crate::queue`].
//!
//! Parts, each in its own file:
//! - a **producer** per job kind claims, one statement at a time, only as many jobs as the kind
//!   has free **slots** (its concurrency), at most the claim batch per statement; woken by
//!   NOTIFY, by a freed slot after a full claim, or by the poll interval when notifications
//!   are lost;
//! - an **executor** per job runs the handler in its own task and records the outcome under
//!   the job's lease;
//! - the **completer** acknowledges finished jobs in batches, each still fenced by its token;
//! - the **heartbeat** extends every held lease and stops handlers whose lease was lost;
//! - the **listener** holds the LISTEN connection and reconnects when it drops.
//!
//! A job's [`slot`] goes with it from the claim until its outcome is written and is freed by
//! being dropped there, so a kind never has more jobs `running` than its concurrency.
//!
//! Shutdown ([`Worker::run`]'s `shutdown` future) stops claiming, lets running handlers finish
//! within the grace period, and hands the rest back to `ready` without spending an attempt
//! (only jobs whose handler did not finish: a finished one is acknowledged). Completions still
//! waiting get one more grace period; what they cannot record then (the database is away) is
//! left to the rescuer, so a stop never hangs.
//! A database outage never ends the process: every loop logs, backs off and tries again.

pub mod builtin;
mod completer;
mod executor;
mod heartbeat;
mod job;
mod kind;
mod listener;
mod producer;
mod registry;
mod slot;

pub use job::{Job, JobError, Outcome, ResultExt};
pub use kind::{Declare, Handlers, JobKind, Kinds};
pub use registry::Registry;

use std::collections::BTreeMap;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::queue::Queue;
use executor::{Acker, execute};
use heartbeat::Inflight;
use producer::Producer;
use slot::Slots;

/// How a worker process behaves.
#[derive(Debug, Clone)]
pub struct WorkerConfig {
    /// Shown in `leased_by`, so people can tell which process holds a job.
    pub worker_id: String,
    /// Most jobs claimed in one statement, per kind; never more than the kind's free slots.
    pub claim_batch: usize,
    /// The safety net when notifications are lost.
    pub poll_interval: Duration,
    /// LISTEN for new-job notifications; off, the worker relies on polling alone.
    pub listen: bool,
    /// How often held leases are extended; well under the lease length.
    pub heartbeat: Duration,
    /// How long running handlers may take to finish after shutdown is asked.
    pub shutdown_grace: Duration,
}

impl WorkerConfig {
    /// Defaults for a queue whose leases last `lease`.
    pub fn for_lease(lease: Duration) -> Self {
        Self {
            worker_id: format!(
                "worker-{}-{}",
                std::process::id(),
                &uuid::Uuid::new_v4().simple().to_string()[..6]
            ),
            claim_batch: 10,
            poll_interval: Duration::from_secs(2),
            listen: true,
            heartbeat: lease / 3,
            shutdown_grace: Duration::from_secs(20),
        }
    }
}

/// What the parts of one worker share.
pub(crate) struct Shared {
    /// Settles the jobs it kills with the registry's table (unless it came with a hook).
    pub queue: Queue,
    /// The registered kinds: their concurrency and retry policies.
    pub kinds: Kinds,
    pub config: WorkerConfig,
    pub inflight: Inflight,
    /// Cancelled when shutdown's grace period is over: executors stop their handlers and hand
    /// the jobs back.
    pub hand_back: CancellationToken,
}

impl Shared {
    /// How many jobs of `kind` this process runs at once (its slots).
    fn concurrency(&self, kind: &str) -> usize {
        self.kinds.concurrency(kind).unwrap_or(1)
    }
}

/// A worker: a queue, the handlers it runs, and how.
pub struct Worker {
    shared: Arc<Shared>,
    registry: Registry,
}

impl Worker {
    /// A worker running `registry`'s handlers on `queue`. The jobs it kills are settled by
    /// `queue`'s hook, or by the registry's kinds when `queue` has none.
    pub fn new(queue: Queue, registry: Registry, config: WorkerConfig) -> Self {
        let queue = queue.or_ends(|| Arc::new(registry.table().clone()));
        Self {
            shared: Arc::new(Shared {
                queue,
                kinds: registry.table().clone(),
                config,
                inflight: Inflight::default(),
                hand_back: CancellationToken::new(),
            }),
            registry,
        }
    }

    /// Runs until `shutdown` resolves, then shuts down gracefully (see the module doc).
    pub async fn run(self, shutdown: impl Future<Output = ()>) {
        let stop_claiming = CancellationToken::new();
        let stop_background = CancellationToken::new();
        let tasks = TaskTracker::new();
        let (acks, ack_rx) = tokio::sync::mpsc::unbounded_channel();
        let mut completer = tokio::spawn(completer::run(self.shared.clone(), ack_rx));
        let heartbeat = tokio::spawn(heartbeat::run(
            self.shared.clone(),
            self.shared.config.heartbeat,
            stop_background.clone(),
        ));

        let wakers: BTreeMap<String, Arc<Notify>> = self
            .registry
            .kinds()
            .map(|kind| (kind.to_owned(), Arc::new(Notify::new())))
            .collect();
        let listener = self.shared.config.listen.then(|| {
            tokio::spawn(listener::run(
                self.shared.queue.pool().clone(),
                wakers.clone(),
                stop_background.clone(),
            ))
        });
        let mut producers = Vec::new();
        for (kind, config) in &self.registry.kinds {
            let producer = Producer {
                shared: self.shared.clone(),
                kind: kind.clone(),
                config: config.clone(),
                wake: wakers[kind].clone(),
                acker: Acker::Batched(acks.clone()),
                tasks: tasks.clone(),
            };
            producers.push(tokio::spawn(producer.run(stop_claiming.clone())));
        }
        drop(acks);
        tracing::info!(worker = %self.shared.config.worker_id, kinds = ?self.registry, "worker started");

        shutdown.await;
        tracing::info!("stopping: no new claims; waiting for running jobs");
        stop_claiming.cancel();
        for producer in producers {
            let _ = producer.await;
        }
        tasks.close();
        let grace = self.shared.config.shutdown_grace;
        if tokio::time::timeout(grace, tasks.wait()).await.is_err() {
            tracing::warn!(
                jobs = self.shared.inflight.leases().len(),
                "grace period over; handing unfinished jobs back"
            );
            // Each executor stops its own handler and hands its job back (bounded); one whose
            // handler finished meanwhile acknowledges it instead.
            self.shared.hand_back.cancel();
            tasks.wait().await;
        }
        // Every executor has ended, so every sender is gone and the completer drains and exits;
        // during a database outage it would retry forever, so it gets one more grace period.
        if tokio::time::timeout(grace, &mut completer).await.is_err() {
            completer.abort();
            tracing::error!(
                "could not record every completion before shutdown; the rescuer will hand those jobs out again"
            );
        }
        stop_background.cancel();
        let _ = heartbeat.await;
        if let Some(listener) = listener {
            let _ = listener.await;
        }
        tracing::info!("worker stopped");
    }

    /// Claims and runs due jobs of every registered kind until none is left, then returns how
    /// many ran. For tests and one-shot tools: it drives the same executor as [`Worker::run`],
    /// step by step, with no sleeping and no background loops.
    pub async fn run_until_idle(&self) -> Result<usize, crate::queue::QueueError> {
        let mut total = 0;
        loop {
            let mut ran = 0;
            for (kind, config) in &self.registry.kinds {
                let concurrency = self.shared.concurrency(kind);
                let slots = Slots::new(concurrency);
                let taken = slots.take_free(concurrency);
                let filter = config
                    .claim_filter()
                    .await
                    .map_err(|err| crate::queue::QueueError::Invalid(format!("{err:#}")))?;
                let claimed = self
                    .shared
                    .queue
                    .claim_filtered(
                        kind,
                        taken.len(),
                        &self.shared.config.worker_id,
                        filter.as_ref(),
                    )
                    .await?;
                ran += claimed.len();
                let runs = claimed.into_iter().zip(taken).map(|(job, slot)| {
                    let handler = config.handler.clone();
                    execute(self.shared.clone(), handler, job, Acker::Direct, slot)
                });
                futures::future::join_all(runs).await;
            }
            if ran == 0 {
                return Ok(total);
            }
            total += ran;
        }
    }
}
