//! `docket models …`: the embedding model versions: list them, register one, activate one.

use clap::Subcommand;
use sqlx::PgPool;

use crate::models;

#[derive(Debug, Subcommand)]
pub(super) enum ModelsCommand {
    /// Every version, with the progress of its embedding sets.
    List,
    /// Register a version (not active until `activate`).
    Add {
        /// hash or openai.
        provider: String,
        /// v1 for hash; the API's model name for openai.
        model: String,
        dims: i32,
        #[arg(long, default_value_t = 200)]
        chunk_tokens: i32,
        #[arg(long, default_value_t = 30)]
        chunk_overlap: i32,
    },
    /// Make a version the active one; the nightly reembed fills its sets.
    Activate { version: String },
}

/// Runs one `docket models` subcommand.
pub(super) async fn run(pool: &PgPool, command: ModelsCommand) -> anyhow::Result<()> {
    match command {
        ModelsCommand::List => list(pool).await?,
        ModelsCommand::Add {
            provider,
            model,
            dims,
            chunk_tokens,
            chunk_overlap,
        } => {
            let version = models::add(
                pool,
                &models::NewModelVersion {
                    provider,
                    model,
                    dims,
                    chunk_tokens,
                    chunk_overlap,
                },
            )
            .await?;
            println!(
                "model version {} registered (not active)",
                version.model_version
            );
        }
        ModelsCommand::Activate { version } => {
            let version = models::switch_to(pool, &version).await?;
            println!(
                "model version {} is active; documents move over as their sets complete (nightly-reembed, or `docket schedule run-now nightly-reembed`)",
                version.model_version
            );
        }
    }
    Ok(())
}

/// `docket models list`: a table of the versions and their sets.
async fn list(pool: &PgPool) -> anyhow::Result<()> {
    println!(
        "{:<40} {:<7} {:>9} {:>9} {:>11}",
        "model version", "active", "complete", "of", "searchable"
    );
    for m in models::list(pool).await? {
        println!(
            "{:<40} {:<7} {:>9} {:>9} {:>11}",
            m.version.model_version,
            m.active,
            m.documents_complete,
            m.documents_total,
            m.documents_searchable
        );
    }
    Ok(())
}
