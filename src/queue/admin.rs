//! What people do with jobs: look at them, count them, cancel them, and give dead ones another
//! chance. None of this is on the hot path.

use chrono::{DateTime, Utc};
use serde::Serialize;
use sqlx::PgConnection;
use uuid::Uuid;

use super::{End, EndedJob, JobId, JobStatus, Queue, QueueError};

/// A job as people see it.
#[derive(utoipa::ToSchema, Debug, Clone, Serialize)]
pub struct JobRecord {
    pub id: JobId,
    pub kind: String,
    pub payload: serde_json::Value,
    pub status: JobStatus,
    pub run_at: DateTime<Utc>,
    pub attempts: i32,
    pub max_attempts: i32,
    #[serde(skip)]
    pub lease_token: Option<Uuid>,
    pub lease_until: Option<DateTime<Utc>>,
    pub leased_by: Option<String>,
    pub idempotency_key: Option<String>,
    pub last_error: Option<String>,
    /// Past failures, oldest first: `[{ "attempt", "at", "error" }]`, across every run (a
    /// person's retry starts a new run at attempt 1; the entries before `retried_at` are older
    /// runs').
    pub errors: serde_json::Value,
    /// How many times a person retried it ([`retry_dead_in`]).
    pub retries: i32,
    /// When a person last retried it.
    pub retried_at: Option<DateTime<Utc>>,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
    pub finished_at: Option<DateTime<Utc>>,
}

/// Which jobs to list: newest first, keyset-paginated by id.
#[derive(Debug, Clone, Default)]
pub struct JobFilter {
    pub status: Option<JobStatus>,
    pub kind: Option<String>,
    /// Only jobs with a smaller id (the `next` cursor of the previous page).
    pub before: Option<JobId>,
    pub limit: i64,
}

/// Counts of one kind, by status.
#[derive(utoipa::ToSchema, Debug, Clone, Default, Serialize)]
pub struct KindStats {
    pub kind: String,
    pub ready: i64,
    pub running: i64,
    pub done: i64,
    pub dead: i64,
    pub cancelled: i64,
}

/// The queue at a glance.
#[derive(utoipa::ToSchema, Debug, Clone, Serialize)]
pub struct QueueStats {
    pub kinds: Vec<KindStats>,
    /// Age in seconds of the oldest `ready` job that is due; future `run_at` does not count.
    pub oldest_due_age_seconds: Option<f64>,
    /// Running jobs whose lease has run out and that the rescuer has not handled yet.
    pub expired_leases: i64,
}

impl Queue {
    /// One job.
    pub async fn get(&self, id: JobId) -> Result<JobRecord, QueueError> {
        sqlx::query_as!(
            JobRecord,
            r#"select id as "id: JobId", kind, payload, status as "status: JobStatus", run_at,
                attempts, max_attempts, lease_token, lease_until, leased_by, idempotency_key,
                last_error, errors, retries, retried_at, created_at, updated_at, finished_at
            from jobs
            where id = $1"#,
            id.0,
        )
        .fetch_optional(&self.pool)
        .await?
        .ok_or(QueueError::NotFound(id))
    }

    /// A page of jobs, newest first.
    pub async fn list(&self, filter: &JobFilter) -> Result<Vec<JobRecord>, QueueError> {
        let rows = sqlx::query_as!(
            JobRecord,
            r#"select id as "id: JobId", kind, payload, status as "status: JobStatus", run_at,
                attempts, max_attempts, lease_token, lease_until, leased_by, idempotency_key,
                last_error, errors, retries, retried_at, created_at, updated_at, finished_at
            from jobs
            where ($1::text is null or status = $1)
              and ($2::text is null or kind = $2)
              and ($3::bigint is null or id < $3)
            order by id desc
            limit $4"#,
            filter.status.map(JobStatus::as_str),
            filter.kind.as_deref(),
            filter.before.map(|id| id.0),
            filter.limit.clamp(1, 1000),
        )
        .fetch_all(&self.pool)
        .await?;
        Ok(rows)
    }

    /// Counts per kind and status, the oldest due job's age, and unhandled expired leases.
    pub async fn stats(&self) -> Result<QueueStats, QueueError> {
        let counts = sqlx::query!(
            r#"select kind, status as "status: JobStatus", count(*) as "count!"
            from jobs
            group by kind, status
            order by kind"#
        )
        .fetch_all(&self.pool)
        .await?;
        let mut kinds: Vec<KindStats> = Vec::new();
        for row in counts {
            if kinds.last().is_none_or(|k| k.kind != row.kind) {
                kinds.push(KindStats {
                    kind: row.kind.clone(),
                    ..KindStats::default()
                });
            }
            if let Some(entry) = kinds.last_mut() {
                let n = row.count;
                match row.status {
                    JobStatus::Ready => entry.ready = n,
                    JobStatus::Running => entry.running = n,
                    JobStatus::Done => entry.done = n,
                    JobStatus::Dead => entry.dead = n,
                    JobStatus::Cancelled => entry.cancelled = n,
                }
            }
        }
        let ages = sqlx::query!(
            r#"select
                (select extract(epoch from now() - min(run_at))::float8
                 from jobs
                 where status = 'ready' and run_at <= now()) as oldest_due_age_seconds,
                (select count(*)
                 from jobs
                 where status = 'running' and lease_until < now()) as "expired_leases!""#
        )
        .fetch_one(&self.pool)
        .await?;
        Ok(QueueStats {
            kinds,
            oldest_due_age_seconds: ages.oldest_due_age_seconds,
            expired_leases: ages.expired_leases,
        })
    }

    /// Cancels a `ready` or `running` job; the queue's hook settles it in the same
    /// transaction. A running job's worker loses its lease: its next heartbeat or completion is
    /// refused and its result discarded.
    pub async fn cancel(&self, id: JobId) -> Result<JobRecord, QueueError> {
        let mut tx = self.pool.begin().await?;
        let row = sqlx::query_as!(
            JobRecord,
            r#"update jobs
            set status = 'cancelled',
                lease_token = null,
                lease_until = null,
                finished_at = now(),
                updated_at = now()
            where id = $1
              and status in ('ready', 'running')
            returning id as "id: JobId", kind, payload, status as "status: JobStatus", run_at,
                attempts, max_attempts, lease_token, lease_until, leased_by, idempotency_key,
                last_error, errors, retries, retried_at, created_at, updated_at, finished_at"#,
            id.0,
        )
        .fetch_optional(&mut *tx)
        .await?;
        let Some(row) = row else {
            drop(tx);
            return Err(self.wrong_state(id, "cancel", "ready or running").await);
        };
        let ended = EndedJob {
            id,
            kind: row.kind.clone(),
            payload: row.payload.clone(),
            end: End::Cancelled { reason: None },
        };
        self.settle(&mut tx, &[ended]).await?;
        tx.commit().await?;
        Ok(row)
    }

    /// A person's retry of a `dead` or `cancelled` job, in a transaction of its own (see
    /// [`retry_dead_in`]).
    pub async fn retry_dead(&self, id: JobId) -> Result<JobRecord, QueueError> {
        let mut tx = self.pool.begin().await?;
        let row = retry_dead_in(&mut tx, id).await?;
        tx.commit().await?;
        Ok(row)
    }

    async fn wrong_state(
        &self,
        id: JobId,
        action: &'static str,
        needed: &'static str,
    ) -> QueueError {
        match self.get(id).await {
            Ok(job) => QueueError::WrongState {
                id,
                status: job.status,
                action,
                needed,
            },
            Err(err) => err,
        }
    }
}

/// A person's retry of a `dead` or `cancelled` job, on `conn` (the caller's transaction, so
/// that what the retry means for the job's owner commits with it): a fresh run, due now.
///
/// Fresh means `attempts` back to 0 and `max_attempts` back to the budget it was enqueued with
/// (recorded in `attempt_budget` at the first retry), `last_error` and `finished_at` cleared:
/// the attempt number drives the backoff, so a run that kept its count would wait after its
/// first failure as long as after its last (hours, for a webhook delivery), and "12 of 14"
/// reads as if the budget grew. What happened before is kept: the error history, and
/// `retries`/`retried_at` say how often a person retried it and when last. The kind's workers
/// are woken at commit.
pub async fn retry_dead_in(conn: &mut PgConnection, id: JobId) -> Result<JobRecord, QueueError> {
    let row = sqlx::query_as!(
        JobRecord,
        r#"update jobs
        set status = 'ready',
            run_at = now(),
            attempts = 0,
            attempt_budget = coalesce(attempt_budget, max_attempts),
            max_attempts = coalesce(attempt_budget, max_attempts),
            last_error = null,
            retries = retries + 1,
            retried_at = now(),
            finished_at = null,
            updated_at = now()
        where id = $1
          and status in ('dead', 'cancelled')
        returning id as "id: JobId", kind, payload, status as "status: JobStatus", run_at,
            attempts, max_attempts, lease_token, lease_until, leased_by, idempotency_key,
            last_error, errors, retries, retried_at, created_at, updated_at, finished_at"#,
        id.0,
    )
    .fetch_optional(&mut *conn)
    .await?;
    let Some(row) = row else {
        let status = sqlx::query_scalar!(
            r#"select status as "status: JobStatus" from jobs where id = $1"#,
            id.0
        )
        .fetch_optional(&mut *conn)
        .await?;
        return Err(match status {
            Some(status) => QueueError::WrongState {
                id,
                status,
                action: "retry",
                needed: "dead or cancelled",
            },
            None => QueueError::NotFound(id),
        });
    };
    sqlx::query!("select pg_notify($1, $2)", super::CHANNEL, row.kind)
        .execute(&mut *conn)
        .await?;
    Ok(row)
}
