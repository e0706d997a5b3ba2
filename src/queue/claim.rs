//! Claims and everything a lease holder may do afterwards. Each statement after the claim is
//! fenced by `id`, `status = 'running'` and the lease token.

use std::time::Duration;

use chrono::{DateTime, Utc};
use sqlx::{PgConnection, query_as};
use uuid::Uuid;

use super::{JobId, JobStatus, Lease, MAX_ERROR_CHARS, Queue, QueueError};

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

/// Hands the claim statement's text, as one string literal, to the macro `$callback` together
/// with the tokens around it: `claim_sql!(concat!())` is the text itself ([`CLAIM_SQL`]),
/// `claim_sql!(query_as!(Row,), args…)` the compile-checked claim. A literal written once, so
/// what EXPLAIN sees and what runs cannot drift apart (the query macros take only literals).
///
/// The `!` on the lease columns states what `jobs_lease_check` guarantees for a running row.
macro_rules! claim_sql {
    ($callback:ident!($($before:tt)*) $(, $($after:tt)*)?) => {
        $callback!(
            $($before)*
            r#"update jobs
    set status = 'running',
        attempts = attempts + 1,
        lease_token = gen_random_uuid(),
        lease_until = clock_timestamp() + $3 * interval '1 millisecond',
        leased_by = $4,
        updated_at = now()
    where id = any(array(
        select id
        from jobs
        where status = 'ready'
          and kind = $1
          and run_at <= now()
          and ($5::text is null or not coalesce(payload ->> $5, '') = any($6::text[]))
        order by run_at, id
        limit $2
        for update skip locked))
      and (select set_config('synchronous_commit', 'off', true)) = 'off'
    returning id as "id: JobId", kind, payload, attempts, max_attempts,
        lease_token as "lease_token!", lease_until as "lease_until!", run_at"#
            $(, $($after)*)?
        )
    };
}

/// The claim statement. Parameters: `$1` kind, `$2` how many, `$3` lease in milliseconds,
/// `$4` worker id, `$5`/`$6` an optional [`PayloadFilter`] (key and skipped values, both null
/// for none). Public so tests and benchmarks can EXPLAIN exactly what runs.
///
/// The ids are picked in a subquery under `for update skip locked` and updated by
/// `id = any(array(...))`: with that shape PostgreSQL keeps the plan on `jobs_ready_idx` even
/// under a generic plan, where a CTE or join with `limit $2` was measured to fall back to
/// scanning the whole table.
///
/// The claim commits asynchronously (`synchronous_commit = off` for its own transaction, set by
/// the one-time filter, an init plan evaluated once): it does not wait for the WAL flush. A
/// claim lost to a server crash leaves its jobs `ready`, as if never claimed, and the fence
/// then refuses whatever the worker writes under the lost lease, so at-least-once holds. Any
/// later synchronous commit (a completion) flushes the claim with it. The statement must run
/// in a transaction of its own, as [`Queue::claim`] runs it, since the setting lasts until the
/// transaction ends.
pub const CLAIM_SQL: &str = claim_sql!(concat!());

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

/// `query_scalar!` of `update jobs <set>` on the jobs of many leases at once, fenced by each
/// one's token: `$1` ids and `$2` tokens (unnested side by side), returning the ids it matched.
/// The `set` clause is the caller's literal; the fence is written once, and the whole is still
/// one literal the macro checks.
macro_rules! fenced_batch {
    ($set:literal, $ids:expr, $tokens:expr $(, $args:expr)* $(,)?) => {
        sqlx::query_scalar!(
            "update jobs
            " + $set + r#"
            from unnest($1::bigint[], $2::uuid[]) as held(id, token)
            where jobs.id = held.id
              and jobs.status = 'running'
              and jobs.lease_token = held.token
            returning jobs.id as "id: JobId""#,
            $ids,
            $tokens
            $(, $args)*
        )
    };
}

impl Queue {
    /// Claims up to `limit` due `ready` jobs of `kind` for `worker` ([`CLAIM_SQL`]).
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
        let rows = claim_sql!(
            query_as!(ClaimRow,),
            kind,
            limit,
            self.lease_millis(),
            worker,
            filter.map(|f| f.key.as_str()),
            filter.map(|f| f.skipped.as_slice()),
        )
        .fetch_all(&self.pool)
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
        let kept = fenced_batch!(
            "set lease_until = clock_timestamp() + $3 * interval '1 millisecond',
                updated_at = now()",
            &ids,
            &tokens,
            self.lease_millis(),
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
    /// `dead` when this was its last attempt). With `spend_attempt` false the attempt is given
    /// back and the error history is left alone: being rate limited is waiting, not failing
    /// (`last_error` still says why the job waits). Returns the job's new status.
    pub async fn retry(
        &self,
        lease: &Lease,
        error: &str,
        delay: Duration,
        spend_attempt: bool,
    ) -> Result<JobStatus, QueueError> {
        let status = sqlx::query_scalar!(
            r#"update jobs
            set attempts = attempts - case when $5 then 0 else 1 end,
                status = case when $5 and attempts >= max_attempts then 'dead' else 'ready' end,
                run_at = now() + $3 * interval '1 millisecond',
                lease_token = null,
                lease_until = null,
                last_error = $4,
                errors = case when $5 then jobs_push_error(errors, attempts, $4) else errors end,
                finished_at = case when $5 and attempts >= max_attempts then now() end,
                updated_at = now()
            where id = $1
              and status = 'running'
              and lease_token = $2
            returning status as "status: JobStatus""#,
            lease.job_id.0,
            lease.token,
            delay.as_secs_f64() * 1000.0,
            truncate(error),
            spend_attempt,
        )
        .fetch_optional(&self.pool)
        .await?;
        status.ok_or(QueueError::LeaseLost(lease.job_id))
    }

    /// Moves the job to `dead` at once: a permanent failure that no retry can fix. The job
    /// keeps its payload and error history so a person can decide what to do.
    pub async fn fail(&self, lease: &Lease, error: &str) -> Result<(), QueueError> {
        let updated = sqlx::query!(
            "update jobs
            set status = 'dead',
                lease_token = null,
                lease_until = null,
                last_error = $3,
                errors = jobs_push_error(errors, attempts, $3),
                finished_at = now(),
                updated_at = now()
            where id = $1
              and status = 'running'
              and lease_token = $2",
            lease.job_id.0,
            lease.token,
            truncate(error),
        )
        .execute(&self.pool)
        .await?
        .rows_affected();
        fenced(updated, lease)
    }

    /// Hands running jobs back to `ready` without spending their attempt: used at shutdown for
    /// handlers that did not finish within the grace period. Returns the leases already lost.
    pub async fn release(&self, leases: &[Lease]) -> Result<Vec<Lease>, QueueError> {
        if leases.is_empty() {
            return Ok(Vec::new());
        }
        let (ids, tokens) = split(leases);
        let matched = fenced_batch!(
            "set status = 'ready',
                attempts = greatest(attempts - 1, 0),
                run_at = now(),
                lease_token = null,
                lease_until = null,
                updated_at = now()",
            &ids,
            &tokens,
        )
        .fetch_all(&self.pool)
        .await?;
        Ok(lost(leases, &matched))
    }
}

/// Marks the jobs of `leases` done, fenced by each lease's token, in one statement on `conn`;
/// returns the leases it did not match.
async fn complete_on<'c>(
    conn: impl sqlx::PgExecutor<'c>,
    leases: &[Lease],
) -> Result<Vec<Lease>, QueueError> {
    if leases.is_empty() {
        return Ok(Vec::new());
    }
    let (ids, tokens) = split(leases);
    let matched = fenced_batch!(
        "set status = 'done',
            lease_token = null,
            lease_until = null,
            finished_at = now(),
            updated_at = now()",
        &ids,
        &tokens,
    )
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

fn fenced(rows: u64, lease: &Lease) -> Result<(), QueueError> {
    if rows == 1 {
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
