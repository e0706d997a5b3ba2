//! The rescuer and retention: the two loops that keep the table honest and small. Both work in
//! short batches so they never hold many row locks or bloat one transaction.

use std::time::Duration;

use super::{JobStatus, Queue, QueueError};

/// What one rescue pass did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Rescued {
    /// Expired jobs put back to `ready`.
    pub requeued: u64,
    /// Expired jobs that had used their last attempt, now `dead`.
    pub dead: u64,
}

impl Queue {
    /// Returns up to `batch` running jobs whose lease expired to `ready`, or to `dead` when that
    /// was their last attempt.
    ///
    /// A compare-and-set: the rows are locked with `skip locked` (a worker completing one right
    /// now keeps it) and re-checked against the lease token and expiry that were seen, so a
    /// completion that lands first always wins.
    pub async fn rescue_expired(&self, batch: usize) -> Result<Rescued, QueueError> {
        let batch = i64::try_from(batch).unwrap_or(i64::MAX);
        let statuses = sqlx::query_scalar!(
            r#"with expired as (
                 select id, lease_token, lease_until
                 from jobs
                 where status = 'running'
                   and lease_until < clock_timestamp()
                 order by lease_until
                 limit $1
                 for update skip locked
             )
             update jobs
             set status = case when jobs.attempts >= jobs.max_attempts then 'dead' else 'ready' end,
                 run_at = now(),
                 lease_token = null,
                 lease_until = null,
                 last_error = 'the lease expired: the worker stopped or lost its connection',
                 errors = jobs_push_error(jobs.errors, jobs.attempts,
                     'the lease expired: the worker stopped or lost its connection'),
                 finished_at = case when jobs.attempts >= jobs.max_attempts then now() end,
                 updated_at = now()
             from expired
             where jobs.id = expired.id
               and jobs.status = 'running'
               and jobs.lease_token = expired.lease_token
               and jobs.lease_until = expired.lease_until
             returning jobs.status as "status: JobStatus""#,
            batch,
        )
        .fetch_all(&self.pool)
        .await?;
        let dead = statuses.iter().filter(|s| **s == JobStatus::Dead).count() as u64;
        Ok(Rescued {
            requeued: statuses.len() as u64 - dead,
            dead,
        })
    }

    /// Deletes up to `batch` `done` jobs that finished more than `older_than` ago. Dead and
    /// cancelled jobs are kept until a person retries or deletes them.
    pub async fn prune_done(&self, older_than: Duration, batch: usize) -> Result<u64, QueueError> {
        let batch = i64::try_from(batch).unwrap_or(i64::MAX);
        let deleted = sqlx::query!(
            "delete from jobs
             where id = any(array(
                 select id
                 from jobs
                 where status = 'done'
                   and finished_at < now() - $1 * interval '1 millisecond'
                 order by finished_at
                 limit $2
                 for update skip locked))",
            older_than.as_secs_f64() * 1000.0,
            batch,
        )
        .execute(&self.pool)
        .await?
        .rows_affected();
        Ok(deleted)
    }
}
