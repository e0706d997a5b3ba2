//! The scratch database: dropped and created on the server of `DATABASE_URL`, migrated, and
//! dropped again at the end, so a benchmark never touches real data and always starts alike.

use std::str::FromStr;
use std::time::Duration;

use anyhow::Context;
use sqlx::postgres::{PgConnectOptions, PgPoolOptions};
use sqlx::{Connection, PgConnection};

/// A freshly created and migrated database.
pub(super) struct Scratch {
    /// Options of the server's maintenance database, from which the scratch one is dropped.
    admin: PgConnectOptions,
    /// Options of the scratch database itself.
    options: PgConnectOptions,
    name: String,
}

impl Scratch {
    /// Drops `name` if it exists (disconnecting its sessions), creates it and migrates it.
    pub async fn create(database_url: &str, name: &str) -> anyhow::Result<Scratch> {
        if name.is_empty() || !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
            anyhow::bail!("the scratch database name must be letters, digits and underscores");
        }
        let server = PgConnectOptions::from_str(database_url).context("parsing DATABASE_URL")?;
        let admin = server.clone().database("postgres");
        let scratch = Scratch {
            options: server.database(name),
            admin,
            name: name.to_owned(),
        };
        scratch.drop_database().await?;
        let mut conn = scratch.admin_connection().await?;
        // Identifiers cannot be bound as parameters; the name was checked above.
        sqlx::query(sqlx::AssertSqlSafe(format!(
            "create database {}",
            scratch.name
        )))
        .execute(&mut conn)
        .await
        .with_context(|| format!("creating the scratch database {}", scratch.name))?;
        conn.close().await.ok();

        let pool = scratch.pool(2).await?;
        docket::db::migrate(&pool).await?;
        pool.close().await;
        Ok(scratch)
    }

    /// A pool of `size` connections on the scratch database, all opened now so that no round
    /// pays for connecting.
    pub async fn pool(&self, size: u32) -> anyhow::Result<sqlx::PgPool> {
        let pool = PgPoolOptions::new()
            .max_connections(size)
            .acquire_timeout(Duration::from_secs(30))
            .connect_with(self.options.clone())
            .await
            .with_context(|| format!("connecting to the scratch database {}", self.name))?;
        let held = futures::future::try_join_all((0..size).map(|_| pool.acquire()))
            .await
            .context("opening the pool's connections")?;
        drop(held);
        Ok(pool)
    }

    /// Drops the scratch database, disconnecting whoever is still on it.
    pub async fn drop_database(&self) -> anyhow::Result<()> {
        let mut conn = self.admin_connection().await?;
        sqlx::query(sqlx::AssertSqlSafe(format!(
            "drop database if exists {} with (force)",
            self.name
        )))
        .execute(&mut conn)
        .await
        .with_context(|| format!("dropping the scratch database {}", self.name))?;
        conn.close().await.ok();
        Ok(())
    }

    async fn admin_connection(&self) -> anyhow::Result<PgConnection> {
        PgConnection::connect_with(&self.admin)
            .await
            .context("connecting to the server's postgres database (DATABASE_URL)")
    }
}
