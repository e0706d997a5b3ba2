//! The rescuer and retention: the two loops that keep the table honest and small. Both work in
//! short batches so they never hold many row locks or bloat one transaction.

use std::time::Duration;

use super::claim::killed;
use super::{JobId, JobStatus, Queue, QueueError};

/// What one rescue pass did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Rescued {
    /// Expired jobs put back to `ready`.
    pub requeued: u64,
    /// Expired jobs that had used their last attempt, now `dead` (and settled by the queue's
    /// hook in the same transaction).
    pub dead: u64,
}

impl Queue {
    /// Returns up to `batch` running jobs whose lease expired to `ready`, or to `dead` when that
    /// was their last attempt (`sql/rescue.sql`: a compare-and-set on the lease it saw, so a
    /// completion that lands first always wins). The jobs that die are handed to the queue's
    /// hook in the same transaction.
    pub async fn rescue_expired(&self, batch: usize) -> Result<Rescued, QueueError> {
        let batch = i64::try_from(batch).unwrap_or(i64::MAX);
        let mut tx = self.pool.begin().await?;
        let rows = sqlx::query_file!("src/queue/sql/rescue.sql", batch, self.now)
            .fetch_all(&mut *tx)
            .await?;
        let total = rows.len() as u64;
        let dead: Vec<_> = rows
            .into_iter()
            .filter(|row| row.status == JobStatus::Dead)
            .map(|row| killed(row.id, row.kind, row.payload, &row.last_error))
            .collect();
        self.settle(&mut tx, &dead).await?;
        tx.commit().await?;
        let dead = dead.len() as u64;
        Ok(Rescued {
            requeued: total - dead,
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
                   and finished_at < coalesce($3::timestamptz, now()) - $1 * interval '1 millisecond'
                 order by finished_at
                 limit $2
                 for update skip locked))",
            older_than.as_secs_f64() * 1000.0,
            batch,
            self.now,
        )
        .execute(&self.pool)
        .await?
        .rows_affected();
        Ok(deleted)
    }
}
