//! Claims and everything a lease holder may do afterwards. Each statement after the claim is
//! fenced by `id`, `status = 'running'` and the lease token; each is a plain SQL file in
//! `sql/`, checked at compile time, and takes the time as its last parameter (null for the
//! database's clock, see [`Queue::at`]).

use std::time::Duration;

use chrono::{DateTime, Utc};
use sqlx::{PgConnection, PgExecutor};
use uuid::Uuid;

use super::{EndedJob, JobId, JobStatus, Lease, MAX_ERROR_CHARS, Queue, QueueError, ends::End};

/// A job handed to a worker, with the lease that lets it report the outcome.
#[derive(Debug, Clone)]
pub struct ClaimedJob {
    pub lease: Lease,
    pub kind: String,
    pub payload: serde_json::Value,
    /// This attempt's number, from 1.
    pub attempt: i32,
    pub max_attempts: i32,
    pub lease_until: DateTime<Utc>,
    /// When the job was due; pickup latency is measured from here.
    pub run_at: DateTime<Utc>,
}

/// One claimed row, as [`CLAIM_SQL`] returns it.
struct ClaimRow {
    id: JobId,
    kind: String,
    payload: serde_json::Value,
    attempts: i32,
    max_attempts: i32,
    lease_token: Uuid,
    lease_until: DateTime<Utc>,
    run_at: DateTime<Utc>,
}

/// The claim statement, `sql/claim.sql`: its parameters are described at its top. Public so
/// tests and benchmarks can EXPLAIN exactly what runs. It changes no setting: its asynchronous
/// commit comes from the connections [`Queue::claim`] runs it on (see `claim_pool`).
pub const CLAIM_SQL: &str = include_str!("sql/claim.sql");

/// Skips jobs whose payload field `key` is one of `skipped`: a worker that can run some jobs of
/// a kind but not others (an embedder for some model versions) leaves those to workers that
/// can. A list of what to skip rather than what to take, so that a value nobody can serve (an
/// unknown model version) is still claimed and fails with its reason instead of waiting forever.
/// The queue still knows no kinds; the filter is the caller's.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PayloadFilter {
    pub key: String,
    pub skipped: Vec<String>,
}

impl Queue {
    /// Claims up to `limit` due `ready` jobs of `kind` for `worker` ([`CLAIM_SQL`]), in one
    /// round trip on the claims' own connections, committed asynchronously.
    pub async fn claim(
        &self,
        kind: &str,
        limit: usize,
        worker: &str,
    ) -> Result<Vec<ClaimedJob>, QueueError> {
        self.claim_filtered(kind, limit, worker, None).await
    }

    /// [`Queue::claim`], taking only jobs that pass `filter` when there is one.
    pub async fn claim_filtered(
        &self,
        kind: &str,
        limit: usize,
        worker: &str,
        filter: Option<&PayloadFilter>,
    ) -> Result<Vec<ClaimedJob>, QueueError> {
        if limit == 0 {
            return Ok(Vec::new());
        }
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        let rows = sqlx::query_file_as!(
            ClaimRow,
            "src/queue/sql/claim.sql",
            kind,
            limit,
            self.lease_millis(),
            worker,
            filter.map(|f| f.key.as_str()),
            filter.map(|f| f.skipped.as_slice()),
            self.now,
        )
        .fetch_all(&self.claims)
        .await?;

        Ok(rows
            .into_iter()
            .map(|row| ClaimedJob {
                lease: Lease {
                    job_id: row.id,
                    token: row.lease_token,
                },
                kind: row.kind,
                payload: row.payload,
                attempt: row.attempts,
                max_attempts: row.max_attempts,
                lease_until: row.lease_until,
                run_at: row.run_at,
            })
            .collect())
    }

    /// Extends every lease in `leases` by the queue's lease length, in one statement.
    /// Returns the leases that were lost (their jobs must stop).
    pub async fn extend(&self, leases: &[Lease]) -> Result<Vec<Lease>, QueueError> {
        if leases.is_empty() {
            return Ok(Vec::new());
        }
        let (ids, tokens) = split(leases);
        let kept = sqlx::query_file_scalar!(
            "src/queue/sql/extend.sql",
            &ids,
            &tokens,
            self.lease_millis(),
            self.now,
        )
        .fetch_all(&self.pool)
        .await?;
        Ok(lost(leases, &kept))
    }

    /// Marks one job done. [`QueueError::LeaseLost`] if the lease is no longer held.
    pub async fn complete(&self, lease: &Lease) -> Result<(), QueueError> {
        let mut conn = self.pool.acquire().await?;
        complete_in(&mut conn, lease).await
    }

    /// Marks many jobs done in one statement. Returns the leases that were lost; those jobs
    /// were not changed.
    pub async fn complete_many(&self, leases: &[Lease]) -> Result<Vec<Lease>, QueueError> {
        complete_on(&self.pool, leases).await
    }

    /// Records a transient failure and schedules the job again after `delay` (or moves it to
    /// `dead` when this was its last attempt, settled by the queue's hook in the same
    /// transaction). With `spend_attempt` false the attempt is given back and the error history
    /// is left alone: being rate limited is waiting, not failing (`last_error` still says why
    /// the job waits). Returns the job's new status.
    pub async fn retry(
        &self,
        lease: &Lease,
        error: &str,
        delay: Duration,
        spend_attempt: bool,
    ) -> Result<JobStatus, QueueError> {
        let error = truncate(error);
        let mut tx = self.pool.begin().await?;
        let row = sqlx::query_file!(
            "src/queue/sql/retry.sql",
            lease.job_id.0,
            lease.token,
            delay.as_secs_f64() * 1000.0,
            error,
            spend_attempt,
            self.now,
        )
        .fetch_optional(&mut *tx)
        .await?
        .ok_or(QueueError::LeaseLost(lease.job_id))?;
        if row.status == JobStatus::Dead {
            let ended = killed(lease.job_id, row.kind, row.payload, error);
            self.settle(&mut tx, &[ended]).await?;
        }
        tx.commit().await?;
        Ok(row.status)
    }

    /// Moves the job to `dead` at once: a permanent failure that no retry can fix. The job
    /// keeps its payload and error history so a person can decide what to do; the queue's hook
    /// settles it in the same transaction.
    pub async fn fail(&self, lease: &Lease, error: &str) -> Result<(), QueueError> {
        let error = truncate(error);
        let mut tx = self.pool.begin().await?;
        let row = sqlx::query_file!("src/queue/sql/fail.sql", lease.job_id.0, lease.token, error,)
            .fetch_optional(&mut *tx)
            .await?
            .ok_or(QueueError::LeaseLost(lease.job_id))?;
        let ended = killed(lease.job_id, row.kind, row.payload, error);
        self.settle(&mut tx, &[ended]).await?;
        tx.commit().await?;
        Ok(())
    }

    /// Hands running jobs back to `ready` without spending their attempt: used at shutdown for
    /// handlers that did not finish within the grace period. Returns the leases already lost.
    pub async fn release(&self, leases: &[Lease]) -> Result<Vec<Lease>, QueueError> {
        if leases.is_empty() {
            return Ok(Vec::new());
        }
        let (ids, tokens) = split(leases);
        let matched =
            sqlx::query_file_scalar!("src/queue/sql/release.sql", &ids, &tokens, self.now)
                .fetch_all(&self.pool)
                .await?;
        Ok(lost(leases, &matched))
    }
}

/// A job that died with `error`.
pub(super) fn killed(id: JobId, kind: String, payload: serde_json::Value, error: &str) -> EndedJob {
    EndedJob {
        id,
        kind,
        payload,
        end: End::Killed {
            error: error.to_owned(),
        },
    }
}

/// Marks the jobs of `leases` done, fenced by each lease's token, in one statement on `conn`;
/// returns the leases it did not match.
async fn complete_on<'c>(
    conn: impl PgExecutor<'c>,
    leases: &[Lease],
) -> Result<Vec<Lease>, QueueError> {
    if leases.is_empty() {
        return Ok(Vec::new());
    }
    let (ids, tokens) = split(leases);
    let matched = sqlx::query_file_scalar!("src/queue/sql/complete.sql", &ids, &tokens)
        .fetch_all(conn)
        .await?;
    Ok(lost(leases, &matched))
}

/// Marks a job done on `conn`, typically inside the transaction that writes the job's result
/// and enqueues the next step: then the result, the next job and the completion commit
/// together, and a worker whose lease was lost writes none of them.
pub async fn complete_in(conn: &mut PgConnection, lease: &Lease) -> Result<(), QueueError> {
    if complete_on(conn, std::slice::from_ref(lease))
        .await?
        .is_empty()
    {
        Ok(())
    } else {
        Err(QueueError::LeaseLost(lease.job_id))
    }
}

/// The ids and tokens of `leases`, as the two arrays the fenced statements unnest.
fn split(leases: &[Lease]) -> (Vec<i64>, Vec<Uuid>) {
    leases.iter().map(|l| (l.job_id.0, l.token)).unzip()
}

/// The leases whose job is not in `kept`.
fn lost(leases: &[Lease], kept: &[JobId]) -> Vec<Lease> {
    if kept.len() == leases.len() {
        return Vec::new();
    }
    let kept: std::collections::HashSet<JobId> = kept.iter().copied().collect();
    leases
        .iter()
        .filter(|l| !kept.contains(&l.job_id))
        .copied()
        .collect()
}

/// `error` cut to [`MAX_ERROR_CHARS`] characters, on a character boundary.
pub(super) fn truncate(error: &str) -> &str {
    match error.char_indices().nth(MAX_ERROR_CHARS) {
        Some((cut, _)) => &error[..cut],
        None => error,
    }
}
