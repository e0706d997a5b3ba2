//! The database connection and its schema: one pool per process, and the migrations that every
//! process applies before it starts work.
//!
//! Why its own module: every entry point (`serve`, `worker`, `migrate`, the command line, the
//! tests, the benchmarks) connects and migrates the same way, and `/health` compares the applied
//! migrations with [`MIGRATOR`]; none of them should reach up into `app` for it.

use std::time::Duration;

use anyhow::Context;
use sqlx::postgres::PgPoolOptions;

/// Every migration, embedded in the binary.
pub static MIGRATOR: sqlx::migrate::Migrator = sqlx::migrate!("./migrations");

/// Connects to `database_url` with a pool of `pool_size` connections (at least 4), waiting up to
/// ten seconds for a connection. It does not migrate: see [`migrate`].
pub async fn connect(database_url: &str, pool_size: u32) -> anyhow::Result<sqlx::PgPool> {
    PgPoolOptions::new()
        .max_connections(pool_size.max(4))
        .acquire_timeout(Duration::from_secs(10))
        .connect(database_url)
        .await
        .context("connecting to PostgreSQL (DATABASE_URL)")
}

/// Applies pending migrations. Safe to run from many processes at once: sqlx takes an
/// advisory lock.
pub async fn migrate(pool: &sqlx::PgPool) -> anyhow::Result<()> {
    MIGRATOR
        .run(pool)
        .await
        .context("applying database migrations")
}
