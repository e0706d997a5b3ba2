//! `docket schedule …`: recurring schedules (list, add, remove, enable, disable, run now, show)
//! and their pg_cron alternative.

use anyhow::Context;
use chrono::{DateTime, Utc};
use clap::Subcommand;
use sqlx::PgPool;

use super::print_json;
use crate::schedule::{self, store};

#[derive(Debug, Subcommand)]
pub(super) enum ScheduleCommand {
    /// Every schedule with its last and next firing.
    List,
    /// Create a schedule.
    Add {
        name: String,
        /// Five cron fields, quoted: "0 2 * * *".
        cron: String,
        /// The job kind each firing enqueues.
        kind: String,
        /// IANA time zone the cron fields are read in.
        #[arg(long, default_value = "UTC")]
        timezone: String,
        /// JSON object payload of the job.
        #[arg(long, default_value = "{}")]
        payload: String,
        /// Missed firings younger than this many seconds are enqueued after downtime.
        #[arg(long, default_value_t = 86_400)]
        backfill_secs: i64,
        /// Create it disabled.
        #[arg(long)]
        disabled: bool,
    },
    /// Delete a schedule.
    Remove { name: String },
    /// Turn a schedule on.
    Enable { name: String },
    /// Turn a schedule off.
    Disable { name: String },
    /// Enqueue a schedule's job now, outside its timetable.
    RunNow { name: String },
    /// One schedule as JSON; for nightly-reembed, what its next run will send.
    Show { name: String },
    /// Register the schedule's firing as a pg_cron job (UTC schedules; pg_cron 1.4+).
    InstallPgCron { name: String },
    /// Remove the schedule's pg_cron job.
    UninstallPgCron { name: String },
}

/// A firing time as the tables show it, `-` for none.
fn time(t: Option<DateTime<Utc>>) -> String {
    t.map_or_else(
        || "-".to_owned(),
        |t| t.format("%Y-%m-%d %H:%M UTC").to_string(),
    )
}

/// Runs one `docket schedule` subcommand; `database_url` is where pg_cron jobs connect to.
pub(super) async fn run(
    pool: &PgPool,
    database_url: &str,
    command: ScheduleCommand,
) -> anyhow::Result<()> {
    let now = Utc::now();
    match command {
        ScheduleCommand::List => list(pool, now).await?,
        ScheduleCommand::Add {
            name,
            cron,
            kind,
            timezone,
            payload,
            backfill_secs,
            disabled,
        } => {
            let payload = serde_json::from_str(&payload).context("--payload is not JSON")?;
            let new = store::NewSchedule {
                name,
                cron,
                timezone,
                kind,
                payload,
                enabled: !disabled,
                backfill_secs,
            };
            add(pool, &new, now).await?;
        }
        ScheduleCommand::Remove { name } => {
            store::remove(pool, &name).await?;
            println!("schedule {name} removed");
        }
        ScheduleCommand::Enable { name } => {
            let s = store::set_enabled(pool, &name, true).await?;
            println!(
                "schedule {} enabled; next firing {}",
                s.name,
                time(s.next_firing(now))
            );
        }
        ScheduleCommand::Disable { name } => {
            store::set_enabled(pool, &name, false).await?;
            println!("schedule {name} disabled");
        }
        ScheduleCommand::RunNow { name } => {
            let enqueued = schedule::run_now(pool, &name, now).await?;
            println!("schedule {name}: job {} enqueued", enqueued.id);
        }
        ScheduleCommand::Show { name } => {
            let s = store::get(pool, &name).await?;
            let sends = crate::pipeline::reembed::next_run_sends(pool, &s).await?;
            print_json(&schedule::view(s, now, sends))?;
        }
        ScheduleCommand::InstallPgCron { name } => {
            install_pg_cron(pool, database_url, &name).await?
        }
        ScheduleCommand::UninstallPgCron { name } => {
            if schedule::pg_cron::uninstall(pool, database_url, &name).await? {
                println!("pg_cron job of {name} removed");
            } else {
                println!("schedule {name} had no pg_cron job");
            }
        }
    }
    Ok(())
}

/// `docket schedule list`: a table of the schedules with their last and next firings.
async fn list(pool: &PgPool, now: DateTime<Utc>) -> anyhow::Result<()> {
    println!(
        "{:<24} {:<14} {:<18} {:<12} {:<8} {:<21} next",
        "name", "cron", "zone", "kind", "enabled", "last"
    );
    for s in store::list(pool).await? {
        println!(
            "{:<24} {:<14} {:<18} {:<12} {:<8} {:<21} {}",
            s.name,
            s.cron,
            s.timezone,
            s.kind,
            s.enabled,
            time(s.last_fired_for),
            time(s.next_firing(now))
        );
    }
    Ok(())
}

/// `docket schedule add`.
async fn add(pool: &PgPool, new: &store::NewSchedule, now: DateTime<Utc>) -> anyhow::Result<()> {
    let created = store::create(pool, new, now).await?;
    println!(
        "schedule {} created; next firing {}",
        created.name,
        time(created.next_firing(now))
    );
    Ok(())
}

/// `docket schedule install-pg-cron`: registers the firing and says where it runs.
async fn install_pg_cron(pool: &PgPool, database_url: &str, name: &str) -> anyhow::Result<()> {
    let job = schedule::pg_cron::install(pool, database_url, name).await?;
    println!(
        "pg_cron job {} ({}) in database {} runs `{}` at \"{}\" (GMT) in database {}",
        job.jobid, job.jobname, job.cron_database, job.command, job.schedule, job.target_database
    );
    Ok(())
}
