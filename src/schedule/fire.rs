//! Firing: a schedule's due logical times become jobs, and its cursor moves, in one transaction.
//!
//! The schedule row is locked (`for update`) for the length of that short transaction, so two
//! callers firing the same schedule take turns and the second sees the first one's cursor; the
//! idempotency key covers anything that slips past the lock (pg_cron, a restored backup).

use chrono::{DateTime, Utc};
use sqlx::PgPool;

use super::{Schedule, ScheduleError, firing_key};
use crate::queue::{self, Enqueued, NewJob};

/// Most firings enqueued for one schedule in one pass; the rest follow on the next pass.
const MAX_FIRINGS_PER_PASS: usize = 2_000;
/// Most skipped firings counted (and stepped over) in one pass.
const MAX_SKIPPED_COUNTED: usize = 100_000;

/// What one pass over a schedule did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FireReport {
    /// Logical times enqueued as new jobs, oldest first.
    pub fired: Vec<DateTime<Utc>>,
    /// Of `fired`, those that were missed (all but the newest due one): the backfill.
    pub backfilled: usize,
    /// Logical times older than the backfill window, stepped over and not enqueued.
    pub skipped: usize,
}

/// Fires `name`'s firings due at `now`: those after its cursor, no older than its backfill
/// window, oldest first. Disabled or missing schedules fire nothing.
pub async fn fire_due(
    pool: &PgPool,
    name: &str,
    now: DateTime<Utc>,
) -> Result<FireReport, ScheduleError> {
    let mut tx = pool.begin().await?;
    let schedule = super::store::lock(&mut tx, name).await?;
    let Some(schedule) = schedule.filter(|s| s.enabled) else {
        return Ok(FireReport::default());
    };
    let firings = Firings::at(&schedule, now)?;

    let mut report = FireReport {
        skipped: firings.skipped.len(),
        ..FireReport::default()
    };
    for logical in &firings.due {
        let job = NewJob::new(schedule.kind.clone(), schedule.payload.clone())
            .idempotency_key(firing_key(&schedule.name, *logical));
        let enqueued = queue::enqueue(&mut tx, &job).await?;
        if enqueued.created {
            report.fired.push(*logical);
        }
    }
    report.backfilled = report.fired.len().saturating_sub(1);

    if let Some(new_cursor) = firings.new_cursor() {
        sqlx::query!(
            "update schedules
            set last_fired_for = greatest(coalesce(last_fired_for, $2), $2)
            where name = $1",
            schedule.name,
            new_cursor,
        )
        .execute(&mut *tx)
        .await?;
    }
    tx.commit().await?;

    log_and_count(&schedule, &firings.skipped, &report);
    Ok(report)
}

/// The logical times one pass looks at: those to skip (older than the window) and those due.
struct Firings {
    skipped: Vec<DateTime<Utc>>,
    due: Vec<DateTime<Utc>>,
}

impl Firings {
    /// `schedule`'s firings after its cursor up to `now`, split at its backfill window.
    fn at(schedule: &Schedule, now: DateTime<Utc>) -> Result<Self, ScheduleError> {
        let spec = schedule.spec()?;
        let oldest_allowed = now - chrono::Duration::seconds(schedule.backfill_secs);
        let cursor = schedule.cursor();

        // Everything strictly older than the window is skipped; a firing exactly at its edge
        // runs.
        let skipped = spec.between(
            cursor,
            oldest_allowed - chrono::Duration::milliseconds(1),
            MAX_SKIPPED_COUNTED,
        );
        // Never older than the window, even when more were skipped than are counted: the
        // counted ones may stop short of the window's edge.
        let window_start = oldest_allowed - chrono::Duration::milliseconds(1);
        let start = skipped
            .last()
            .copied()
            .unwrap_or(cursor)
            .max(cursor)
            .max(window_start.min(now));
        let due = spec.between(start, now, MAX_FIRINGS_PER_PASS);
        Ok(Self { skipped, due })
    }

    /// Where the cursor moves: the newest firing looked at, due or skipped.
    fn new_cursor(&self) -> Option<DateTime<Utc>> {
        self.due.last().or(self.skipped.last()).copied()
    }
}

/// Logs what a pass skipped and fired, and counts it in the metrics.
fn log_and_count(schedule: &Schedule, skipped: &[DateTime<Utc>], report: &FireReport) {
    if let (Some(first), Some(last)) = (skipped.first(), skipped.last()) {
        tracing::warn!(
            schedule = %schedule.name,
            skipped = skipped.len(),
            oldest = %first,
            newest = %last,
            backfill_secs = schedule.backfill_secs,
            "missed firings older than the backfill window were skipped"
        );
    }
    if let Some(newest) = report.fired.last() {
        tracing::info!(
            schedule = %schedule.name,
            fired = report.fired.len(),
            backfilled = report.backfilled,
            newest = %newest,
            "schedule fired"
        );
    }
    let metrics = crate::metrics::global();
    metrics.schedule_fired(&schedule.name, report.fired.len() as u64);
    metrics.schedule_backfilled(&schedule.name, report.backfilled as u64);
    metrics.schedule_skipped(&schedule.name, report.skipped as u64);
}

/// Fires every enabled schedule due at `now`. A schedule that fails is logged and does not
/// stop the others.
pub async fn fire_all_due(
    pool: &PgPool,
    now: DateTime<Utc>,
) -> Result<Vec<(String, FireReport)>, ScheduleError> {
    let names = sqlx::query_scalar!(
        "select name
        from schedules
        where enabled
        order by name"
    )
    .fetch_all(pool)
    .await?;
    let mut reports = Vec::with_capacity(names.len());
    for name in names {
        match fire_due(pool, &name, now).await {
            Ok(report) => reports.push((name, report)),
            Err(err) => {
                tracing::error!(schedule = %name, error = %err, "firing failed; will try again")
            }
        }
    }
    Ok(reports)
}

/// Enqueues `name`'s job now, outside its timetable (the cursor does not move). The key holds
/// the request time, so a double click within the same millisecond still runs once.
pub async fn run_now(
    pool: &PgPool,
    name: &str,
    now: DateTime<Utc>,
) -> Result<Enqueued, ScheduleError> {
    let schedule = super::store::get(pool, name).await?;
    let key = format!(
        "schedule:{}:run-now:{}",
        schedule.name,
        now.format("%Y-%m-%dT%H:%M:%S%.3fZ")
    );
    let job = NewJob::new(schedule.kind, schedule.payload).idempotency_key(key);
    let mut conn = pool.acquire().await?;
    Ok(queue::enqueue(&mut conn, &job).await?)
}
