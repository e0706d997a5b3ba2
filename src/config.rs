//! Configuration: the only place that reads the environment.
//!
//! Every setting is a command-line flag with an environment variable behind it (clap reads
//! both; the flag wins). Settings are checked once at start-up by [`ServeConfig::validate`], so a
//! bad combination stops the process with a clear message instead of surfacing later.

use std::net::SocketAddr;
use std::time::Duration;

use clap::Args;

/// Where the database is.
#[derive(Debug, Clone, Args)]
pub struct DatabaseConfig {
    /// PostgreSQL connection URL.
    #[arg(long, env = "DATABASE_URL", hide_env_values = true)]
    pub database_url: String,

    /// Connections in this process's pool.
    #[arg(long, env = "DOCKET_DB_POOL", default_value_t = 16)]
    pub db_pool: u32,
}

/// How workers claim and run jobs, and how the maintenance loops behave.
#[derive(Debug, Clone, Args)]
pub struct WorkerSettings {
    /// How long a claim lasts without a heartbeat, in seconds.
    #[arg(long, env = "DOCKET_LEASE_SECS", default_value_t = 60)]
    pub lease_secs: u64,

    /// Jobs of one kind running at once in this process.
    #[arg(long, env = "DOCKET_CONCURRENCY", default_value_t = 4)]
    pub concurrency: usize,

    /// Most jobs taken per claim statement (never more than free slots).
    #[arg(long, env = "DOCKET_CLAIM_BATCH", default_value_t = 10)]
    pub claim_batch: usize,

    /// Poll interval in milliseconds: the safety net under LISTEN/NOTIFY.
    #[arg(long, env = "DOCKET_POLL_MS", default_value_t = 2000)]
    pub poll_ms: u64,

    /// Seconds running jobs get to finish at shutdown before they are handed back.
    #[arg(long, env = "DOCKET_SHUTDOWN_GRACE_SECS", default_value_t = 20)]
    pub shutdown_grace_secs: u64,

    /// Seconds between rescues of expired leases.
    #[arg(long, env = "DOCKET_RESCUE_SECS", default_value_t = 5)]
    pub rescue_secs: u64,

    /// Hours a `done` job is kept before it is pruned.
    #[arg(long, env = "DOCKET_RETENTION_HOURS", default_value_t = 168)]
    pub retention_hours: u64,
}

impl WorkerSettings {
    pub fn lease(&self) -> Duration {
        Duration::from_secs(self.lease_secs)
    }

    pub fn worker_config(&self) -> crate::worker::WorkerConfig {
        let mut config = crate::worker::WorkerConfig::for_lease(self.lease());
        config.claim_batch = self.claim_batch;
        config.poll_interval = Duration::from_millis(self.poll_ms);
        config.shutdown_grace = Duration::from_secs(self.shutdown_grace_secs);
        config
    }

    pub fn maintenance(&self) -> crate::maintenance::MaintenanceConfig {
        crate::maintenance::MaintenanceConfig {
            rescue_every: Duration::from_secs(self.rescue_secs.max(1)),
            retention: Duration::from_secs(self.retention_hours * 3600),
            ..crate::maintenance::MaintenanceConfig::default()
        }
    }

    fn validate(&self) -> Result<(), ConfigError> {
        if self.lease_secs < 3 {
            return Err(ConfigError("DOCKET_LEASE_SECS must be at least 3".into()));
        }
        if self.concurrency == 0 || self.claim_batch == 0 {
            return Err(ConfigError(
                "DOCKET_CONCURRENCY and DOCKET_CLAIM_BATCH must be at least 1".into(),
            ));
        }
        if self.poll_ms == 0 {
            return Err(ConfigError("DOCKET_POLL_MS must be at least 1".into()));
        }
        Ok(())
    }
}

/// `docket serve`: the HTTP API and page, workers, and maintenance.
#[derive(Debug, Clone, Args)]
pub struct ServeConfig {
    #[command(flatten)]
    pub database: DatabaseConfig,

    /// Address to listen on. Anything but loopback requires DOCKET_API_TOKEN.
    #[arg(long, env = "DOCKET_BIND", default_value = "127.0.0.1:8080")]
    pub bind: SocketAddr,

    /// Bearer token required on /api routes (required when not bound to loopback).
    #[arg(long, env = "DOCKET_API_TOKEN", hide_env_values = true)]
    pub api_token: Option<String>,

    /// Largest upload accepted per file, in bytes.
    #[arg(long, env = "DOCKET_MAX_UPLOAD_BYTES", default_value_t = 50 * 1024 * 1024)]
    pub max_upload_bytes: u64,

    /// Run the HTTP server only, with no workers in this process.
    #[arg(long, env = "DOCKET_NO_WORKERS")]
    pub no_workers: bool,

    #[command(flatten)]
    pub worker: WorkerSettings,
}

impl ServeConfig {
    /// Checks the settings together; the message says what to change.
    pub fn validate(&self) -> Result<(), ConfigError> {
        self.worker.validate()?;
        let token = self.api_token.as_deref().unwrap_or("");
        if !self.bind.ip().is_loopback() && token.is_empty() {
            return Err(ConfigError(format!(
                "DOCKET_BIND is {} (not loopback): set DOCKET_API_TOKEN so that the API is not open to the network",
                self.bind
            )));
        }
        if !token.is_empty() && token.len() < 16 {
            return Err(ConfigError(
                "DOCKET_API_TOKEN must be at least 16 characters".into(),
            ));
        }
        Ok(())
    }
}

/// `docket worker`: workers and maintenance, no HTTP.
#[derive(Debug, Clone, Args)]
pub struct WorkerConfigArgs {
    #[command(flatten)]
    pub database: DatabaseConfig,

    #[command(flatten)]
    pub worker: WorkerSettings,
}

impl WorkerConfigArgs {
    pub fn validate(&self) -> Result<(), ConfigError> {
        self.worker.validate()
    }
}

/// A setting, or a combination of settings, that cannot work.
#[derive(Debug, thiserror::Error)]
#[error("configuration: {0}")]
pub struct ConfigError(pub String);
