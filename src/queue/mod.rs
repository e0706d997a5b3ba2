//! The job queue, in PostgreSQL only.
//!
//! The queue knows no job kinds: a job is a `kind`, a small JSON `payload` of references and an
//! optional idempotency key. What it guarantees:
//!
//! - **Transactional enqueue** ([`enqueue()`], [`enqueue_many()`]): jobs are written on the caller's
//!   connection, inside the caller's transaction, with a `NOTIFY` on [`CHANNEL`] that PostgreSQL
//!   delivers only at commit. An idempotency key turns a second enqueue of the same work into a
//!   no-op that returns the existing job.
//! - **Leased claims** ([`Queue::claim`]): one short statement ([`CLAIM_SQL`]) picks due `ready`
//!   rows with `for update skip locked`, marks them `running` and gives each a fresh lease token
//!   and expiry. No row lock is held while a handler runs.
//! - **Fenced outcomes** ([`Queue::complete`], [`Queue::retry`], [`Queue::fail`], [`Queue::extend`],
//!   [`Queue::release`]): every write after the claim matches id, `running` and the lease token.
//!   Zero rows matched means the lease was lost; the caller is told so through
//!   [`QueueError::LeaseLost`] (or the list of lost leases for batch calls), never silently.
//! - **Rescue and retention** ([`Queue::rescue_expired`], [`Queue::prune_done`]): expired leases
//!   go back to `ready` (or `dead` past their attempts) and old `done` rows are deleted, both in
//!   short batches so they never hold many locks.
//! - **Ends settled with the job** ([`ends`]): a job that dies or is cancelled is handed to the
//!   queue's [`JobEnds`] hook in the same transaction, so what it worked for (a document) never
//!   shows it still running.
//!
//! The statements that claim and write under a lease are plain SQL files in `src/queue/sql/`,
//! checked at compile time. Each takes the time as a parameter (null for the database's clock):
//! [`Queue::at`] gives a handle that runs them at a chosen instant, so tests move time by
//! passing it rather than by rewriting rows.
//!
//! It does not promise that a job runs once: leases expire, workers die. Handlers make their
//! effects idempotent (unique keys and upserts), which is what makes at-least-once safe.

mod admin;
pub mod by_payload;
mod claim;
pub mod ends;
mod enqueue;
mod maintenance;
pub mod payload;
mod retry_policy;
pub mod stats;

pub use admin::{JobFilter, JobRecord, KindStats, QueueStats, retry_dead_in};
pub use claim::{CLAIM_SQL, ClaimedJob, PayloadFilter, complete_in};
pub use ends::{End, EndedJob, JobEnds};
pub use enqueue::{enqueue, enqueue_many};
pub use maintenance::Rescued;
pub use retry_policy::RetryPolicy;

use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use uuid::Uuid;

/// The LISTEN/NOTIFY channel on which enqueues announce the kind of the new job.
pub const CHANNEL: &str = "docket_jobs";

/// The longest error message stored; longer ones are cut (on a character boundary).
pub const MAX_ERROR_CHARS: usize = 4000;

/// The attempts a job gets unless its kind or its enqueuer says otherwise. Every enqueue names
/// the budget; the `jobs` column's default, which only SQL-side inserts use (a pg_cron firing),
/// is this same number, as a test checks.
pub const DEFAULT_MAX_ATTEMPTS: i32 = 10;

/// The largest payload the queue accepts. Payloads carry references, not content.
pub const MAX_PAYLOAD_BYTES: usize = 64 * 1024;

/// A job's identity: the `jobs.id` bigint, in JSON as that number.
#[derive(
    utoipa::ToSchema,
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    Hash,
    PartialOrd,
    Ord,
    Serialize,
    Deserialize,
    sqlx::Type,
)]
#[serde(transparent)]
#[sqlx(transparent)]
pub struct JobId(pub i64);

impl std::fmt::Display for JobId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.0.fmt(f)
    }
}

/// The right to change a running job: its id and the token of the claim that took it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Lease {
    pub job_id: JobId,
    pub token: Uuid,
}

/// A job to enqueue.
#[derive(Debug, Clone, PartialEq)]
pub struct NewJob {
    pub kind: String,
    pub payload: serde_json::Value,
    /// Work with the same key is enqueued once; the second enqueue returns the first job.
    pub idempotency_key: Option<String>,
    /// Not before this instant; `None` means now.
    pub run_at: Option<chrono::DateTime<chrono::Utc>>,
    /// `None` takes [`DEFAULT_MAX_ATTEMPTS`].
    pub max_attempts: Option<i32>,
    /// Claims give each key with due work its turn (fewest running first, then round-robin);
    /// empty, the default, is one shared key, so unkeyed jobs are claimed oldest first.
    pub fair_key: String,
}

impl NewJob {
    /// A job of `kind` with `payload`, due now, with the default attempt budget
    /// ([`DEFAULT_MAX_ATTEMPTS`]).
    pub fn new(kind: impl Into<String>, payload: serde_json::Value) -> Self {
        Self {
            kind: kind.into(),
            payload,
            idempotency_key: None,
            run_at: None,
            max_attempts: None,
            fair_key: String::new(),
        }
    }

    /// Shares the workers fairly between this job's `key` and the others (see `fair_key`).
    pub fn fair_key(mut self, key: impl Into<String>) -> Self {
        self.fair_key = key.into();
        self
    }

    /// Makes the job idempotent under `key`.
    pub fn idempotency_key(mut self, key: impl Into<String>) -> Self {
        self.idempotency_key = Some(key.into());
        self
    }

    /// Delays the job until `at`.
    pub fn run_at(mut self, at: chrono::DateTime<chrono::Utc>) -> Self {
        self.run_at = Some(at);
        self
    }

    /// Sets the attempt budget.
    pub fn max_attempts(mut self, n: i32) -> Self {
        self.max_attempts = Some(n);
        self
    }

    fn validate(&self) -> Result<(), QueueError> {
        if self.kind.is_empty() || self.kind.len() > 100 {
            return Err(QueueError::Invalid(
                "a job kind is 1 to 100 characters".into(),
            ));
        }
        let size = self.payload.to_string().len();
        if size > MAX_PAYLOAD_BYTES {
            return Err(QueueError::PayloadTooLarge {
                size,
                max: MAX_PAYLOAD_BYTES,
            });
        }
        if self.max_attempts.is_some_and(|n| n < 1) {
            return Err(QueueError::Invalid(
                "max_attempts must be at least 1".into(),
            ));
        }
        Ok(())
    }
}

/// The result of an enqueue.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Enqueued {
    pub id: JobId,
    /// False when an idempotency key matched an existing job, which is returned instead.
    pub created: bool,
}

/// A job's state, stored in the `text` column `jobs.status` (its check constraint lists the same
/// five values) and written in JSON as the same lowercase word.
#[derive(
    utoipa::ToSchema, Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, sqlx::Type,
)]
#[serde(rename_all = "snake_case")]
#[sqlx(type_name = "text", rename_all = "lowercase")]
pub enum JobStatus {
    Ready,
    Running,
    Done,
    Dead,
    Cancelled,
}

impl JobStatus {
    /// Every status, in the order people read them.
    pub const ALL: [JobStatus; 5] = [
        JobStatus::Ready,
        JobStatus::Running,
        JobStatus::Done,
        JobStatus::Dead,
        JobStatus::Cancelled,
    ];

    /// The status as stored.
    pub fn as_str(self) -> &'static str {
        match self {
            JobStatus::Ready => "ready",
            JobStatus::Running => "running",
            JobStatus::Done => "done",
            JobStatus::Dead => "dead",
            JobStatus::Cancelled => "cancelled",
        }
    }
}

impl std::fmt::Display for JobStatus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // `pad`, so that widths and alignment in format strings apply as they do to text.
        f.pad(self.as_str())
    }
}

/// A status equals its stored word: `job.status == "dead"` reads as it did when rows carried
/// text.
impl PartialEq<str> for JobStatus {
    fn eq(&self, other: &str) -> bool {
        self.as_str() == other
    }
}

impl PartialEq<&str> for JobStatus {
    fn eq(&self, other: &&str) -> bool {
        self.as_str() == *other
    }
}

impl std::str::FromStr for JobStatus {
    type Err = QueueError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        JobStatus::ALL
            .into_iter()
            .find(|status| status.as_str() == s)
            .ok_or_else(|| {
                QueueError::Invalid(format!(
                    "unknown job status {s:?}; expected one of ready, running, done, dead, cancelled"
                ))
            })
    }
}

/// What went wrong in the queue.
#[derive(Debug, thiserror::Error)]
pub enum QueueError {
    /// The job is no longer running under this lease: it was rescued, cancelled or finished by
    /// someone else. The caller's result must be discarded.
    #[error("the lease on job {0} was lost")]
    LeaseLost(JobId),
    #[error("job {0} not found")]
    NotFound(JobId),
    /// The job exists but is in a state that does not allow the change.
    #[error("job {id} is {status}; {action} needs it to be {needed}")]
    WrongState {
        id: JobId,
        status: JobStatus,
        action: &'static str,
        needed: &'static str,
    },
    #[error("the payload is {size} bytes; the limit is {max}")]
    PayloadTooLarge { size: usize, max: usize },
    #[error("{0}")]
    Invalid(String),
    #[error(transparent)]
    Database(#[from] sqlx::Error),
}

/// The queue's handle: a pool, the lease length, the hook that settles ended jobs, and the time
/// its statements run at. Cheap to clone.
#[derive(Clone)]
pub struct Queue {
    pool: sqlx::PgPool,
    /// Where claims run: see [`claim_pool`].
    claims: sqlx::PgPool,
    lease: Duration,
    ends: Option<Arc<dyn JobEnds>>,
    /// `None`: the database's clock; `Some`: a fixed instant ([`Queue::at`]).
    now: Option<DateTime<Utc>>,
}

/// The connections claims run on: to the same database as `pool`, as many at most as `pool`
/// allows (opened only as claims need them: one per claim in flight, which is one per claiming
/// kind in a worker), whose sessions commit asynchronously (`synchronous_commit = off`, set when
/// they connect). A claim then does not wait for the WAL flush, in one round trip. A claim lost
/// to a server crash leaves its jobs `ready`, as if never claimed, and the fence refuses
/// whatever the worker writes under the lost lease, so at-least-once holds; any later
/// synchronous commit (a completion) flushes the claim with it. Only the queue's claims use
/// these connections, so the setting reaches nothing else: every other statement, and every
/// caller's transaction, commits synchronously.
fn claim_pool(pool: &sqlx::PgPool) -> sqlx::PgPool {
    let options = pool
        .connect_options()
        .as_ref()
        .clone()
        .options([("synchronous_commit", "off")]);
    sqlx::postgres::PgPoolOptions::new()
        .max_connections(pool.options().get_max_connections())
        .connect_lazy_with(options)
}

impl std::fmt::Debug for Queue {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Queue")
            .field("lease", &self.lease)
            .field("ends", &self.ends.is_some())
            .field("now", &self.now)
            .finish_non_exhaustive()
    }
}

impl Queue {
    /// A queue on `pool` whose claims last `lease` unless extended, with no hook for ended jobs
    /// (see [`Queue::with_ends`]) and the database's clock. Call it inside a Tokio runtime: the
    /// claims' own pool (see `claim_pool`) starts its upkeep task.
    pub fn new(pool: sqlx::PgPool, lease: Duration) -> Self {
        Self {
            claims: claim_pool(&pool),
            pool,
            lease,
            ends: None,
            now: None,
        }
    }

    /// Hands every job this queue kills or cancels to `ends`, in the transaction that ends it.
    pub fn with_ends(mut self, ends: Arc<dyn JobEnds>) -> Self {
        self.ends = Some(ends);
        self
    }

    /// This queue with `ends()` as its hook when it has none yet.
    pub fn or_ends(self, ends: impl FnOnce() -> Arc<dyn JobEnds>) -> Self {
        match self.ends {
            Some(_) => self,
            None => self.with_ends(ends()),
        }
    }

    /// This queue, with its statements run as if it were `now`: due times, lease expiry and
    /// backoff are measured from it. For tests and tools that must not wait for time to pass.
    pub fn at(&self, now: DateTime<Utc>) -> Self {
        Self {
            now: Some(now),
            ..self.clone()
        }
    }

    /// The pool the queue runs on.
    pub fn pool(&self) -> &sqlx::PgPool {
        &self.pool
    }

    /// How long a claim or an extension lasts.
    pub fn lease(&self) -> Duration {
        self.lease
    }

    fn lease_millis(&self) -> f64 {
        self.lease.as_secs_f64() * 1000.0
    }

    /// Hands `ended` to the hook, on `conn` (the transaction that ended them).
    async fn settle(
        &self,
        conn: &mut sqlx::PgConnection,
        ended: &[EndedJob],
    ) -> Result<(), QueueError> {
        if let Some(ends) = &self.ends {
            for job in ended {
                ends.ended(conn, job).await?;
            }
        }
        Ok(())
    }
}
