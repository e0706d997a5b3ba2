//! `docket tokens …` and `docket collections …`: the operator's commands for who may do what,
//! run against the database directly (the operator reaches everything).

use anyhow::Context;
use clap::Subcommand;
use sqlx::PgPool;

use crate::access::{Access, Role, tokens};
use crate::collections;

#[derive(Debug, Subcommand)]
pub(super) enum TokensCommand {
    /// Create a token; its secret is printed once, alone on the last line of standard output.
    Create {
        #[arg(long)]
        name: String,
        /// reader, writer or admin.
        #[arg(long)]
        role: String,
        /// Limit it to this collection (repeatable); all collections when absent.
        #[arg(long = "collection", value_name = "NAME")]
        collections: Vec<String>,
    },
    /// Every token (never a secret).
    List,
    /// Revoke a token: every process refuses it from its next request.
    Revoke { name: String },
}

#[derive(Debug, Subcommand)]
pub(super) enum CollectionsCommand {
    /// Every collection with its documents, chunks, bytes and embedding tokens.
    List,
    /// Create an empty collection.
    Create { name: String },
    /// Delete a collection and, through a job, all its documents.
    Delete { name: String },
}

/// Runs one `docket tokens` subcommand.
pub(super) async fn tokens(pool: &PgPool, command: TokensCommand) -> anyhow::Result<()> {
    match command {
        TokensCommand::Create {
            name,
            role,
            collections,
        } => {
            let role = Role::parse(&role).with_context(|| {
                format!("unknown role {role:?}; expected reader, writer or admin")
            })?;
            let secret = tokens::create(pool, &name, role, &collections).await?;
            let reach = if collections.is_empty() {
                "every collection".to_owned()
            } else {
                collections.join(", ")
            };
            println!("token {name:?} created: {} in {reach}", role.as_str());
            println!("the secret below is shown once; send it as Authorization: Bearer <secret>");
            println!("{secret}");
        }
        TokensCommand::List => {
            for token in tokens::list(pool).await? {
                let reach = token
                    .collections
                    .map_or_else(|| "all collections".to_owned(), |c| c.join(", "));
                println!(
                    "{:<24} {:<7} {:<30} created {}",
                    token.name,
                    token.role,
                    reach,
                    token.created_at.format("%Y-%m-%d %H:%M")
                );
            }
        }
        TokensCommand::Revoke { name } => {
            anyhow::ensure!(
                tokens::revoke(pool, &name).await?,
                "no token named {name:?}"
            );
            println!("token {name:?} revoked");
        }
    }
    Ok(())
}

/// Runs one `docket collections` subcommand.
pub(super) async fn collections(pool: &PgPool, command: CollectionsCommand) -> anyhow::Result<()> {
    match command {
        CollectionsCommand::List => {
            let reach = Access::admin().reach(pool, &[]).await?;
            println!(
                "{:<24} {:>9} {:>9} {:>12}  embedding tokens",
                "name", "documents", "chunks", "bytes"
            );
            for c in collections::usage(pool, &reach).await? {
                let tokens: Vec<String> = c
                    .embedding_tokens
                    .iter()
                    .map(|t| format!("{} {}", t.model_version, t.tokens))
                    .collect();
                println!(
                    "{:<24} {:>9} {:>9} {:>12}  {}",
                    c.name,
                    c.documents,
                    c.chunks,
                    c.bytes,
                    tokens.join(", ")
                );
            }
        }
        CollectionsCommand::Create { name } => {
            collections::create(pool, &name).await?;
            println!("collection {name:?} created");
        }
        CollectionsCommand::Delete { name } => {
            let job = crate::pipeline::delete_collection(pool, &name).await?;
            println!(
                "collection {name:?} is being deleted (job {}); its documents go with it",
                job.id.0
            );
        }
    }
    Ok(())
}
