//! The queue benchmark.

/// Options of `docket bench queue`.
#[derive(Debug, clap::Args)]
pub struct QueueBench {
    /// Server URL; a scratch database is created on it.
    #[arg(long, env = "DATABASE_URL", hide_env_values = true)]
    pub database_url: String,
}

/// Runs the benchmark.
pub async fn run(_args: QueueBench) -> anyhow::Result<()> {
    anyhow::bail!("the queue benchmark is being written")
}
