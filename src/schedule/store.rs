//! The `schedules` rows: what people create, edit, enable, disable and remove.
//!
//! Everything written is validated first (expression, zone, name, window), so the scheduler
//! loop never meets a row it cannot evaluate.

use chrono::{DateTime, Utc};
use serde::Deserialize;
use sqlx::{PgConnection, PgPool};

use super::{CronSpec, NIGHTLY_REEMBED, Schedule, ScheduleError};

/// The smallest backfill window: a firing seen a tick late must still run.
pub const MIN_BACKFILL_SECS: i64 = 60;

/// A schedule to create.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NewSchedule {
    pub name: String,
    pub cron: String,
    #[serde(default = "utc")]
    pub timezone: String,
    pub kind: String,
    #[serde(default = "empty_object")]
    pub payload: serde_json::Value,
    #[serde(default = "enabled")]
    pub enabled: bool,
    #[serde(default = "one_day")]
    pub backfill_secs: i64,
}

fn utc() -> String {
    "UTC".to_owned()
}
fn empty_object() -> serde_json::Value {
    serde_json::json!({})
}
fn enabled() -> bool {
    true
}
fn one_day() -> i64 {
    86_400
}

/// Changes to a schedule; absent fields stay as they are.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ScheduleUpdate {
    pub cron: Option<String>,
    pub timezone: Option<String>,
    pub kind: Option<String>,
    pub payload: Option<serde_json::Value>,
    pub enabled: Option<bool>,
    pub backfill_secs: Option<i64>,
}

fn validate(
    name: &str,
    cron: &str,
    timezone: &str,
    kind: &str,
    payload: &serde_json::Value,
    backfill_secs: i64,
) -> Result<(), ScheduleError> {
    let name_ok = !name.is_empty()
        && name.len() <= 63
        && name.chars().enumerate().all(|(i, c)| {
            c.is_ascii_lowercase() || c.is_ascii_digit() || (i > 0 && "_.-".contains(c))
        });
    if !name_ok {
        return Err(ScheduleError::Invalid(format!(
            "schedule name {name:?}: 1 to 63 characters, lowercase letters, digits, '_', '.', '-', starting with a letter or digit"
        )));
    }
    CronSpec::parse(cron, timezone)?;
    if kind.is_empty() || kind.len() > 100 {
        return Err(ScheduleError::Invalid(
            "a job kind is 1 to 100 characters".into(),
        ));
    }
    if !payload.is_object() {
        return Err(ScheduleError::Invalid(
            "payload must be a JSON object".into(),
        ));
    }
    if backfill_secs < MIN_BACKFILL_SECS {
        return Err(ScheduleError::Invalid(format!(
            "the backfill window is at least {MIN_BACKFILL_SECS} seconds"
        )));
    }
    Ok(())
}

/// Every schedule, by name.
pub async fn list(pool: &PgPool) -> Result<Vec<Schedule>, ScheduleError> {
    Ok(schedule_query!(
        "select " {columns} "
        from schedules
        order by name"
    )
    .fetch_all(pool)
    .await?)
}

/// One schedule.
pub async fn get(pool: &PgPool, name: &str) -> Result<Schedule, ScheduleError> {
    schedule_query!(
        "select " {columns} "
        from schedules
        where name = $1",
        name,
    )
    .fetch_optional(pool)
    .await?
    .ok_or_else(|| ScheduleError::NotFound(name.to_owned()))
}

/// `name`'s row, locked (`for update`) until `conn`'s transaction ends: changes and firings of
/// one schedule take turns.
pub(super) async fn lock(
    conn: &mut PgConnection,
    name: &str,
) -> Result<Option<Schedule>, sqlx::Error> {
    schedule_query!(
        "select " {columns} "
        from schedules
        where name = $1
        for update",
        name,
    )
    .fetch_optional(conn)
    .await
}

/// Creates a schedule whose first firing is the first logical time after `now`.
pub async fn create(
    pool: &PgPool,
    new: &NewSchedule,
    now: DateTime<Utc>,
) -> Result<Schedule, ScheduleError> {
    validate(
        &new.name,
        &new.cron,
        &new.timezone,
        &new.kind,
        &new.payload,
        new.backfill_secs,
    )?;
    schedule_query!(
        "insert into schedules (name, cron, timezone, kind, payload, enabled, backfill_secs, created_at)
        values ($1, $2, $3, $4, $5, $6, $7, $8)
        on conflict (name) do nothing
        returning " {columns} "",
        new.name,
        new.cron.trim(),
        new.timezone,
        new.kind,
        new.payload,
        new.enabled,
        new.backfill_secs,
        now,
    )
    .fetch_optional(pool)
    .await?
    .ok_or_else(|| ScheduleError::Exists(new.name.clone()))
}

/// Applies `update` to `name`. A new expression or zone keeps the cursor: firings continue
/// after the last one, on the new timetable.
pub async fn update(
    pool: &PgPool,
    name: &str,
    update: &ScheduleUpdate,
) -> Result<Schedule, ScheduleError> {
    let mut tx = pool.begin().await?;
    let current = lock(&mut tx, name)
        .await?
        .ok_or_else(|| ScheduleError::NotFound(name.to_owned()))?;
    let cron = update.cron.clone().unwrap_or(current.cron);
    let timezone = update.timezone.clone().unwrap_or(current.timezone);
    let kind = update.kind.clone().unwrap_or(current.kind);
    let payload = update.payload.clone().unwrap_or(current.payload);
    let enabled = update.enabled.unwrap_or(current.enabled);
    let backfill_secs = update.backfill_secs.unwrap_or(current.backfill_secs);
    validate(name, &cron, &timezone, &kind, &payload, backfill_secs)?;
    let updated = schedule_query!(
        "update schedules
        set cron = $2, timezone = $3, kind = $4, payload = $5, enabled = $6, backfill_secs = $7
        where name = $1
        returning " {columns} "",
        name,
        cron.trim(),
        timezone,
        kind,
        payload,
        enabled,
        backfill_secs,
    )
    .fetch_one(&mut *tx)
    .await?;
    tx.commit().await?;
    Ok(updated)
}

/// Turns a schedule on or off. Turning it on does not replay what was missed beyond the
/// backfill window.
pub async fn set_enabled(
    pool: &PgPool,
    name: &str,
    enabled: bool,
) -> Result<Schedule, ScheduleError> {
    update(
        pool,
        name,
        &ScheduleUpdate {
            enabled: Some(enabled),
            ..ScheduleUpdate::default()
        },
    )
    .await
}

/// Removes a schedule; jobs it already enqueued stay.
pub async fn remove(pool: &PgPool, name: &str) -> Result<(), ScheduleError> {
    let deleted = sqlx::query!(
        "delete from schedules
        where name = $1",
        name,
    )
    .execute(pool)
    .await?
    .rows_affected();
    if deleted == 0 {
        return Err(ScheduleError::NotFound(name.to_owned()));
    }
    Ok(())
}

/// A schedule the application always has. The schedule module knows no job kinds, so what a
/// built-in one enqueues comes from the module that runs that kind, through the caller.
#[derive(Debug, Clone, PartialEq)]
pub struct BuiltinSchedule {
    pub name: String,
    /// Five cron fields, read in UTC.
    pub cron: String,
    /// The job kind each firing enqueues, with `payload`.
    pub kind: String,
    pub payload: serde_json::Value,
}

impl BuiltinSchedule {
    /// [`NIGHTLY_REEMBED`] at 02:00 UTC, enqueueing `kind` (the pipeline's re-embedding job)
    /// with an empty payload.
    pub fn nightly_reembed(kind: &str) -> Self {
        Self {
            name: NIGHTLY_REEMBED.to_owned(),
            cron: "0 2 * * *".to_owned(),
            kind: kind.to_owned(),
            payload: empty_object(),
        }
    }
}

/// Creates the built-in schedules of `builtins` that are missing, as of `now`. An edited one
/// is left as it is; a removed one comes back at the next start (disable it instead).
pub async fn ensure_builtin(
    pool: &PgPool,
    builtins: &[BuiltinSchedule],
    now: DateTime<Utc>,
) -> Result<(), ScheduleError> {
    for builtin in builtins {
        validate(
            &builtin.name,
            &builtin.cron,
            "UTC",
            &builtin.kind,
            &builtin.payload,
            one_day(),
        )?;
        sqlx::query!(
            "insert into schedules (name, cron, timezone, kind, payload, created_at)
            values ($1, $2, 'UTC', $3, $4, $5)
            on conflict (name) do nothing",
            builtin.name,
            builtin.cron,
            builtin.kind,
            builtin.payload,
            now,
        )
        .execute(pool)
        .await?;
    }
    Ok(())
}
