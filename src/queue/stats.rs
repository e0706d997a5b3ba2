//! The queue's figures for `/metrics`: jobs by status and kind, and how long the oldest due job
//! has waited. They live here because only the queue reads `jobs`; metrics asks.

use sqlx::PgPool;

use super::JobStatus;

/// How many jobs of one kind are in one status.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JobCount {
    pub status: JobStatus,
    pub kind: String,
    pub jobs: i64,
}

/// Jobs by status and kind, ordered by status (as stored) and kind.
pub async fn count_by_status_and_kind(pool: &PgPool) -> Result<Vec<JobCount>, sqlx::Error> {
    sqlx::query_as!(
        JobCount,
        r#"select status as "status: JobStatus", kind, count(*) as "jobs!"
         from jobs
         group by status, kind
         order by status, kind"#,
    )
    .fetch_all(pool)
    .await
}

/// Age in seconds of the oldest `ready` job that is due (a future `run_at` does not count); 0
/// when there is none.
pub async fn oldest_due_age_seconds(pool: &PgPool) -> Result<f64, sqlx::Error> {
    sqlx::query_scalar!(
        r#"select coalesce(extract(epoch from now() - min(run_at))::float8, 0) as "age!"
         from jobs
         where status = 'ready'
           and run_at <= now()"#,
    )
    .fetch_one(pool)
    .await
}
