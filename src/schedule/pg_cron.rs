//! The pg_cron alternative: a schedule's firing registered as a pg_cron job.
//!
//! pg_cron runs its jobs from the one database named by `cron.database_name` (the project's
//! set-up uses `postgres`), while docket's tables live in docket's database. So the job is
//! registered *in the cron database* with `cron.schedule_in_database(…, <docket's database>)`
//! (pg_cron 1.4+), and its command runs in docket's database: `docket_fire_schedule(name,
//! date_trunc('minute', now()))`, the SQL twin of [`super::fire_due`] with the same idempotency
//! key. The in-app scheduler may keep running: both paths produce the same key, so a logical
//! time is enqueued once whichever fires first.
//!
//! pg_cron reads expressions in GMT (its default `cron.timezone`), so only UTC schedules are
//! registered; a schedule in another zone is refused with the reason rather than shifted.

use sqlx::postgres::PgConnectOptions;
use sqlx::{Connection, PgConnection, PgPool};

use super::ScheduleError;

/// A registered pg_cron job.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct PgCronJob {
    pub jobid: i64,
    pub jobname: String,
    /// The database pg_cron lives in (where the job row is).
    pub cron_database: String,
    /// The database the command runs in (docket's).
    pub target_database: String,
    pub schedule: String,
    pub command: String,
}

/// The pg_cron job name of schedule `name` for docket database `database`:
/// `docket:<database>:<name>`, or, when that passes PostgreSQL's 63-byte `name` limit (which
/// would silently truncate it and make two names collide), `docket:<digest of database>:<name>`.
pub fn job_name(database: &str, name: &str) -> String {
    let full = format!("docket:{database}:{name}");
    if full.len() <= 63 {
        return full;
    }
    use sha2::Digest;
    let digest = hex::encode(sha2::Sha256::digest(database.as_bytes()));
    let short: String = name.chars().take(63 - 7 - 13).collect();
    format!("docket:{}:{short}", &digest[..12])
}

/// Registers schedule `name` as a pg_cron job (or updates the one registered before).
/// `database_url` is docket's; the cron database is reached with the same credentials.
pub async fn install(
    pool: &PgPool,
    database_url: &str,
    name: &str,
) -> Result<PgCronJob, ScheduleError> {
    let schedule = super::store::get(pool, name).await?;
    if !matches!(schedule.timezone.as_str(), "UTC" | "Etc/UTC" | "GMT") {
        return Err(ScheduleError::Invalid(format!(
            "schedule {name:?} is in {}, but pg_cron reads expressions in GMT; only UTC schedules can be handed to pg_cron (the in-app scheduler handles any zone)",
            schedule.timezone
        )));
    }
    let (mut cron, cron_database, target_database) = cron_connection(pool, database_url).await?;
    let command = sqlx::query_scalar!(
        r#"select format('select docket_fire_schedule(%L, date_trunc(''minute'', now()))', $1::text)
            as "command!""#,
        schedule.name,
    )
    .fetch_one(pool)
    .await?;
    let jobname = job_name(&target_database, &schedule.name);
    // Runtime SQL: it runs in pg_cron's database, whose `cron` schema the compile-time check
    // (against docket's database) cannot see.
    let jobid: i64 = sqlx::query_scalar("select cron.schedule_in_database($1, $2, $3, $4)")
        .bind(&jobname)
        .bind(&schedule.cron)
        .bind(&command)
        .bind(&target_database)
        .fetch_one(&mut cron)
        .await
        .map_err(|err| {
            ScheduleError::PgCronUnavailable(format!(
                "pg_cron refused the job (cron.schedule_in_database needs pg_cron 1.4 or later): {err}"
            ))
        })?;
    let _ = cron.close().await;
    Ok(PgCronJob {
        jobid,
        jobname,
        cron_database,
        target_database,
        schedule: schedule.cron,
        command,
    })
}

/// Removes schedule `name`'s pg_cron job; returns whether there was one.
pub async fn uninstall(
    pool: &PgPool,
    database_url: &str,
    name: &str,
) -> Result<bool, ScheduleError> {
    let (mut cron, _, target_database) = cron_connection(pool, database_url).await?;
    // Runtime SQL: it runs in pg_cron's database, whose `cron` schema the compile-time check
    // (against docket's database) cannot see.
    let removed: Option<bool> =
        sqlx::query_scalar("select cron.unschedule(jobid) from cron.job where jobname = $1")
            .bind(job_name(&target_database, name))
            .fetch_optional(&mut cron)
            .await?;
    let _ = cron.close().await;
    Ok(removed.unwrap_or(false))
}

/// A connection to pg_cron's database, with that database's name and docket's.
async fn cron_connection(
    pool: &PgPool,
    database_url: &str,
) -> Result<(PgConnection, String, String), ScheduleError> {
    let target_database = sqlx::query_scalar!(r#"select current_database() as "name!""#)
        .fetch_one(pool)
        .await?;
    let cron_database = sqlx::query_scalar!(
        r#"select setting as "setting!"
        from pg_settings
        where name = 'cron.database_name'"#
    )
    .fetch_optional(pool)
    .await?;
    let Some(cron_database) = cron_database else {
        return Err(ScheduleError::PgCronUnavailable(
            "pg_cron is not installed on this PostgreSQL server: it must be in shared_preload_libraries (with cron.database_name set) and the server restarted; scripts/install-deps.sh does both. The in-app scheduler needs none of this.".into(),
        ));
    };
    let options: PgConnectOptions = database_url
        .parse()
        .map_err(|err| ScheduleError::Invalid(format!("DATABASE_URL: {err}")))?;
    let mut cron = PgConnection::connect_with(&options.database(&cron_database))
        .await
        .map_err(|err| {
            ScheduleError::PgCronUnavailable(format!(
                "cannot connect to pg_cron's database {cron_database:?} with docket's credentials: {err}"
            ))
        })?;
    // Checked against docket's database, run in pg_cron's: the catalog is the same in both.
    let installed = sqlx::query_scalar!(
        "select extversion
        from pg_extension
        where extname = 'pg_cron'"
    )
    .fetch_optional(&mut cron)
    .await?;
    if installed.is_none() {
        // Runtime SQL: DDL, which the query macros do not check.
        sqlx::query("create extension if not exists pg_cron")
            .execute(&mut cron)
            .await
            .map_err(|err| {
                ScheduleError::PgCronUnavailable(format!(
                    "pg_cron is loaded but not created in database {cron_database:?}, and creating it failed ({err}); run `create extension pg_cron` there as a superuser"
                ))
            })?;
    }
    Ok((cron, cron_database, target_database))
}
