//! Jobs found by what their payload names, for the module that owns what is named: the jobs
//! of one document, say, listed on its page, cancelled when it is deleted, or looked for before
//! more are enqueued. Those modules ask here rather than reading `jobs` themselves.
//!
//! The queue still knows no kinds and no payload fields: callers pass both. A field is named by
//! its key (`document_id`) and holds an integer, as a payload's references do; the statements
//! compare `(payload ->> key)::bigint`, the expression the `jobs` indexes on payload references
//! are built on.

use serde::Serialize;
use sqlx::{PgConnection, PgExecutor};

use super::{End, EndedJob, JobId, JobStatus};

/// A job as listed under what its payload names, with its error history.
#[derive(utoipa::ToSchema, Debug, Clone, Serialize)]
pub struct NamedJob {
    pub id: JobId,
    pub kind: String,
    pub status: JobStatus,
    pub attempts: i32,
    pub max_attempts: i32,
    pub last_error: Option<String>,
    /// One `{ "attempt", "at", "error" }` object per failed attempt, oldest first, across
    /// every run (entries before `retried_at` are from before a person's retry).
    pub errors: serde_json::Value,
    /// How many times a person retried it; each retry starts a fresh run.
    pub retries: i32,
    pub retried_at: Option<chrono::DateTime<chrono::Utc>>,
}

/// Every job whose payload holds `id` under `key`, of any kind and status, oldest first.
pub async fn list(
    executor: impl PgExecutor<'_>,
    key: &str,
    id: i64,
) -> Result<Vec<NamedJob>, sqlx::Error> {
    sqlx::query_as!(
        NamedJob,
        r#"select id as "id: JobId", kind, status as "status: JobStatus", attempts,
                max_attempts, last_error, errors, retries, retried_at
         from jobs
         where payload ? $1
           and (payload ->> $1)::bigint = $2
         order by id"#,
        key,
        id,
    )
    .fetch_all(executor)
    .await
}

/// Cancels the waiting and running jobs of `kinds` whose payload holds `id` under `key`,
/// except `keep`, on `conn`, with `reason` as their last error, and returns them: the caller
/// settles them in the same transaction (the worker's `Kinds::cancel_owned` does). A running
/// job's lease goes with its token, so its worker's next heartbeat stops the handler and no
/// write of it lands.
pub async fn cancel(
    conn: &mut PgConnection,
    kinds: &[&str],
    key: &str,
    id: i64,
    keep: Option<JobId>,
    reason: &str,
) -> Result<Vec<EndedJob>, sqlx::Error> {
    let kinds: Vec<String> = kinds.iter().map(|kind| (*kind).to_owned()).collect();
    let rows = sqlx::query!(
        r#"update jobs
         set status = 'cancelled',
             lease_token = null,
             lease_until = null,
             last_error = $5,
             finished_at = now(),
             updated_at = now()
         where payload ? $1
           and (payload ->> $1)::bigint = $2
           and kind = any($3)
           and status in ('ready', 'running')
           and ($4::bigint is null or id <> $4)
         returning id as "id: JobId", kind, payload"#,
        key,
        id,
        &kinds,
        keep.map(|job| job.0),
        reason,
    )
    .fetch_all(conn)
    .await?;
    Ok(rows
        .into_iter()
        .map(|row| EndedJob {
            id: row.id,
            kind: row.kind,
            payload: row.payload,
            end: End::Cancelled {
                reason: Some(reason.to_owned()),
            },
        })
        .collect())
}

/// Whether a waiting or running job of one of `kinds`, other than `except`, has `id` under
/// `key` in its payload: something else still works for what `id` names.
pub async fn any_pending(
    conn: &mut PgConnection,
    kinds: &[&str],
    key: &str,
    id: i64,
    except: JobId,
) -> Result<bool, sqlx::Error> {
    let kinds: Vec<String> = kinds.iter().map(|kind| (*kind).to_owned()).collect();
    sqlx::query_scalar!(
        r#"select exists (
             select 1
             from jobs
             where kind = any($1)
               and status in ('ready', 'running')
               and id <> $4
               and payload ? $2
               and (payload ->> $2)::bigint = $3) as "pending!""#,
        &kinds,
        key,
        id,
        except.0,
    )
    .fetch_one(conn)
    .await
}

/// Which of `ids` have a waiting or running job of `kind` whose payload holds the id under
/// `key` and the text `value` under `text_key` (an embed job of a document under a model
/// version, say). In no particular order.
pub async fn pending_among(
    executor: impl PgExecutor<'_>,
    kind: &str,
    key: &str,
    ids: &[i64],
    text_key: &str,
    value: &str,
) -> Result<Vec<i64>, sqlx::Error> {
    sqlx::query_scalar!(
        r#"select distinct (payload ->> $2)::bigint as "id!"
           from jobs
           where kind = $1
             and status in ('ready', 'running')
             and (payload ->> $2)::bigint = any($3)
             and payload ->> $4 = $5"#,
        kind,
        key,
        ids,
        text_key,
        value,
    )
    .fetch_all(executor)
    .await
}
