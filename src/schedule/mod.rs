//! Recurring schedules stored in PostgreSQL, fired by one leader, with missed firings backfilled.
//!
//! | part | role |
//! | --- | --- |
//! | [`cron`] | five-field cron read on an IANA zone's wall clock, daylight saving included |
//! | [`store`] | the `schedules` rows: list, create, update, remove, enable/disable |
//! | [`fire`] | one schedule's due firings: enqueue + move the cursor in one transaction; run-now |
//! | [`leader`] | the [`Scheduler`] loop: one leader per database through a session advisory lock |
//! | [`pg_cron`] | the alternative: the same firing registered as a pg_cron job |
//! | [`view`](mod@view) | a schedule as people read it: its next firing and its job kind's preview |
//!
//! What it guarantees:
//!
//! - **At most once per logical time.** A firing enqueues with the idempotency key
//!   `schedule:<name>:<logical time UTC>` ([`firing_key`]) and moves `last_fired_for` in the same
//!   transaction, under the schedule's row lock. Two leaders (a leader that lost its lock but does
//!   not know it yet), or the in-app scheduler and pg_cron, collide on the key.
//! - **Backfill.** After downtime, firings whose logical time is within the schedule's backfill
//!   window of now are enqueued oldest first; older ones are skipped and logged.
//! - **Logical time, not wall time.** Keys use the logical instant the expression names on the
//!   schedule's zone's wall clock, so daylight saving neither skips nor doubles a daily firing.
//! - **Time is injected.** Every function that needs "now" takes it; only the loop reads the clock.

/// `query_as!(Schedule, …)` with the row's columns spliced in where `{columns}` stands, so the
/// statements of [`store`] and [`fire`] stay single checked literals with one column list.
/// Defined before the submodules, which see it by textual scope.
macro_rules! schedule_query {
    ($before:literal {columns} $after:literal $(, $args:expr)* $(,)?) => {
        sqlx::query_as!(
            $crate::schedule::Schedule,
            $before
                + "name, cron, timezone, kind, payload, enabled, backfill_secs, last_fired_for,
                created_at, updated_at"
                + $after
            $(, $args)*
        )
    };
}

pub mod cron;
pub mod fire;
pub mod leader;
pub mod pg_cron;
pub mod store;
pub mod view;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

pub use cron::CronSpec;
pub use fire::{FireReport, fire_all_due, fire_due, run_now};
pub use leader::{Scheduler, SchedulerConfig};
pub use store::{BuiltinSchedule, NewSchedule, ScheduleUpdate};
pub use view::{ScheduleView, view};

/// The built-in schedule that re-embeds what is stale under the active model version.
pub const NIGHTLY_REEMBED: &str = "nightly-reembed";

/// A stored schedule.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Schedule {
    pub name: String,
    /// Five cron fields, read on `timezone`'s wall clock.
    pub cron: String,
    /// IANA zone name.
    pub timezone: String,
    /// The job kind each firing enqueues, with `payload`.
    pub kind: String,
    pub payload: serde_json::Value,
    pub enabled: bool,
    /// Missed firings no older than this many seconds are still enqueued after downtime.
    pub backfill_secs: i64,
    /// The logical time of the last firing.
    pub last_fired_for: Option<DateTime<Utc>>,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
}

impl Schedule {
    /// The parsed expression (stored rows were validated on the way in).
    pub fn spec(&self) -> Result<CronSpec, ScheduleError> {
        CronSpec::parse(&self.cron, &self.timezone)
    }

    /// Where the next firing is searched from: the last firing, or the creation time.
    pub fn cursor(&self) -> DateTime<Utc> {
        self.last_fired_for.unwrap_or(self.created_at)
    }

    /// The next logical time after the cursor, or after `now` for a schedule that has nothing
    /// due, as people expect to read it.
    pub fn next_firing(&self, now: DateTime<Utc>) -> Option<DateTime<Utc>> {
        let spec = self.spec().ok()?;
        let next = spec.next_after(self.cursor())?;
        let oldest_allowed = now - chrono::Duration::seconds(self.backfill_secs);
        if next < oldest_allowed {
            return spec.next_after(oldest_allowed - chrono::Duration::seconds(1));
        }
        Some(next)
    }
}

/// The idempotency key of `name`'s firing for `logical` (matches SQL `docket_schedule_key`).
pub fn firing_key(name: &str, logical: DateTime<Utc>) -> String {
    format!("schedule:{name}:{}", logical.format("%Y-%m-%dT%H:%M:%SZ"))
}

/// What went wrong with a schedule.
#[derive(Debug, thiserror::Error)]
pub enum ScheduleError {
    #[error("schedule {0:?} not found")]
    NotFound(String),
    #[error("a schedule named {0:?} already exists")]
    Exists(String),
    /// A bad expression, zone, name, kind or window; the message says which.
    #[error("{0}")]
    Invalid(String),
    /// pg_cron is not available where it would have to be; the message says what is missing.
    #[error("{0}")]
    PgCronUnavailable(String),
    #[error(transparent)]
    Queue(#[from] crate::queue::QueueError),
    #[error(transparent)]
    Database(#[from] sqlx::Error),
}
