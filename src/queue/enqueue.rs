//! Enqueueing on the caller's connection, so that a job commits with the rows that caused it.

use std::collections::BTreeSet;

use sqlx::PgConnection;

use super::{CHANNEL, DEFAULT_MAX_ATTEMPTS, Enqueued, JobId, NewJob, QueueError};

/// Enqueues `job` on `conn`, which is normally inside the caller's transaction.
///
/// With an idempotency key that already names a job, nothing is written and that job comes
/// back with `created: false`. Two concurrent enqueues of one key give one job: the second
/// waits on the first one's unique-index entry and then finds its row.
pub async fn enqueue(conn: &mut PgConnection, job: &NewJob) -> Result<Enqueued, QueueError> {
    job.validate()?;
    let inserted = sqlx::query_scalar!(
        r#"insert into jobs (kind, payload, idempotency_key, run_at, max_attempts, fair_key)
        values ($1, $2, $3, coalesce($4, now()), $5, $6)
        on conflict (idempotency_key) do nothing
        returning id as "id: JobId""#,
        job.kind,
        job.payload,
        job.idempotency_key,
        job.run_at,
        job.max_attempts.unwrap_or(DEFAULT_MAX_ATTEMPTS),
        job.fair_key,
    )
    .fetch_optional(&mut *conn)
    .await?;

    let Some(id) = inserted else {
        // Only a key conflict inserts nothing. This second statement takes a fresh snapshot,
        // so it sees the row that the conflicting transaction committed.
        let id = sqlx::query_scalar!(
            r#"select id as "id: JobId"
            from jobs
            where idempotency_key = $1"#,
            job.idempotency_key,
        )
        .fetch_one(&mut *conn)
        .await?;
        return Ok(Enqueued { id, created: false });
    };
    notify(conn, [job.kind.as_str()]).await?;
    Ok(Enqueued { id, created: true })
}

/// Enqueues many jobs in one statement on `conn`; returns how many were new (jobs whose
/// idempotency key already existed are skipped).
pub async fn enqueue_many(conn: &mut PgConnection, jobs: &[NewJob]) -> Result<u64, QueueError> {
    if jobs.is_empty() {
        return Ok(0);
    }
    for job in jobs {
        job.validate()?;
    }
    let kinds: Vec<&str> = jobs.iter().map(|j| j.kind.as_str()).collect();
    let payloads: Vec<&serde_json::Value> = jobs.iter().map(|j| &j.payload).collect();
    let keys: Vec<Option<&str>> = jobs.iter().map(|j| j.idempotency_key.as_deref()).collect();
    let run_ats: Vec<Option<chrono::DateTime<chrono::Utc>>> =
        jobs.iter().map(|j| j.run_at).collect();
    let max_attempts: Vec<i32> = jobs
        .iter()
        .map(|j| j.max_attempts.unwrap_or(DEFAULT_MAX_ATTEMPTS))
        .collect();
    let fair_keys: Vec<&str> = jobs.iter().map(|j| j.fair_key.as_str()).collect();

    // `as _`: the macros type arrays as owned, non-null elements, and these hold borrowed
    // values and nulls (no key, due now); the explicit casts in the SQL still fix their types.
    let inserted = sqlx::query!(
        "insert into jobs (kind, payload, idempotency_key, run_at, max_attempts, fair_key)
        select kind, payload, key, coalesce(run_at, now()), max_attempts, fair_key
        from unnest($1::text[], $2::jsonb[], $3::text[], $4::timestamptz[], $5::int[],
                    $6::text[])
            as input(kind, payload, key, run_at, max_attempts, fair_key)
        on conflict (idempotency_key) do nothing",
        &kinds as _,
        &payloads as _,
        &keys as _,
        &run_ats as _,
        &max_attempts,
        &fair_keys as _,
    )
    .execute(&mut *conn)
    .await?
    .rows_affected();

    if inserted > 0 {
        let distinct: BTreeSet<&str> = kinds.into_iter().collect();
        notify(conn, distinct).await?;
    }
    Ok(inserted)
}

/// Announces new work of these kinds. PostgreSQL delivers the notification at commit, and
/// folds duplicates within one transaction, so a batch costs one message per kind.
async fn notify<'a>(
    conn: &mut PgConnection,
    kinds: impl IntoIterator<Item = &'a str>,
) -> Result<(), QueueError> {
    let kinds: Vec<&str> = kinds.into_iter().collect();
    sqlx::query!(
        "select pg_notify($1, kind)
        from unnest($2::text[]) as kind",
        CHANNEL,
        &kinds as _,
    )
    .execute(conn)
    .await?;
    Ok(())
}
