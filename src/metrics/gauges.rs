//! The database gauges: read at scrape time, at most once per [`GAUGE_TTL`] per process, so
//! that every process reports the same truth and scrapes never queue whole-table aggregates on
//! the shared pool. The job gauges come from the queue, the only reader of `jobs`.

use std::sync::Arc;
use std::time::Duration;

use crate::queue::JobStatus;
use crate::queue::stats::{self, JobCount};

/// The database's side of the picture, read at scrape time.
#[derive(Debug, Clone, Default)]
pub struct StateSnapshot {
    /// Jobs by status and kind.
    pub jobs: Vec<JobCount>,
    pub oldest_due_age_seconds: f64,
    pub dead_jobs: i64,
    /// (reason code, count).
    pub extraction_failures: Vec<(String, i64)>,
    /// (model version, complete documents).
    pub model_complete: Vec<(String, i64)>,
    pub documents: i64,
}

/// How long one reading of the database gauges is served to scrapes.
pub const GAUGE_TTL: Duration = Duration::from_secs(5);

/// The database gauges, read at most once per `ttl` however many scrapes arrive: the first
/// scrape after the interval reads them while the others wait for it and share its result, so
/// the aggregates never run more than once at a time or more often than the interval.
#[derive(Debug)]
pub struct GaugeCache {
    ttl: Duration,
    last: tokio::sync::Mutex<Option<(tokio::time::Instant, Arc<StateSnapshot>)>>,
}

impl GaugeCache {
    /// A cache serving each reading for `ttl` (zero: every scrape reads).
    pub fn new(ttl: Duration) -> Self {
        Self {
            ttl,
            last: tokio::sync::Mutex::new(None),
        }
    }

    /// The gauges, from the last reading when it is fresh enough.
    pub async fn get(&self, pool: &sqlx::PgPool) -> Result<Arc<StateSnapshot>, sqlx::Error> {
        let mut last = self.last.lock().await;
        if let Some((at, snapshot)) = last.as_ref()
            && at.elapsed() < self.ttl
        {
            return Ok(snapshot.clone());
        }
        let snapshot = Arc::new(collect_state(pool).await?);
        *last = Some((tokio::time::Instant::now(), snapshot.clone()));
        Ok(snapshot)
    }
}

/// Reads the gauges from the database.
pub async fn collect_state(pool: &sqlx::PgPool) -> Result<StateSnapshot, sqlx::Error> {
    let jobs = stats::count_by_status_and_kind(pool).await?;
    let oldest_due_age_seconds = stats::oldest_due_age_seconds(pool).await?;
    let dead_jobs = jobs
        .iter()
        .filter(|count| count.status == JobStatus::Dead)
        .map(|count| count.jobs)
        .sum();
    Ok(StateSnapshot {
        jobs,
        oldest_due_age_seconds,
        dead_jobs,
        extraction_failures: extraction_failures(pool).await?,
        model_complete: model_complete(pool).await?,
        documents: documents(pool).await?,
    })
}

/// Documents that failed before they had chunks, by the code of their error.
async fn extraction_failures(pool: &sqlx::PgPool) -> Result<Vec<(String, i64)>, sqlx::Error> {
    let rows = sqlx::query!(
        r#"select coalesce(d.error ->> 'code', 'unknown') as "reason!", count(*) as "documents!"
         from documents d
         where d.status = 'failed'
           and not exists (select 1 from chunks c where c.document_id = d.id)
         group by 1
         order by 1"#,
    )
    .fetch_all(pool)
    .await?;
    Ok(rows.into_iter().map(|r| (r.reason, r.documents)).collect())
}

/// Per registered model version, how many documents have a complete set under it.
async fn model_complete(pool: &sqlx::PgPool) -> Result<Vec<(String, i64)>, sqlx::Error> {
    let rows = sqlx::query!(
        r#"select m.model_version, count(c.document_id) as "documents!"
         from embedding_models m
         left join embedding_sets_complete c on c.model_version = m.model_version
         group by m.model_version
         order by m.model_version"#,
    )
    .fetch_all(pool)
    .await?;
    Ok(rows
        .into_iter()
        .map(|r| (r.model_version, r.documents))
        .collect())
}

/// Documents in the database.
async fn documents(pool: &sqlx::PgPool) -> Result<i64, sqlx::Error> {
    sqlx::query_scalar!(
        r#"select count(*) as "documents!"
         from documents"#,
    )
    .fetch_one(pool)
    .await
}
