//! API tokens, the one owner of `tokens` and `token_collections`.
//!
//! A secret is 32 bytes from the operating system, shown once (`dkt_` and 64 hex digits) and
//! stored only as its SHA-256, so a copy of the database holds nothing a caller can present.
//! A request's secret is hashed and looked up on every request, so a revoked token (its row
//! deleted) fails at once on every process; the stored hash is then compared with the computed
//! one in constant time.

use serde::Serialize;
use sha2::{Digest, Sha256};
use sqlx::PgPool;
use subtle::ConstantTimeEq;

use super::{Access, Role};
use crate::collections::{self, CollectionId};

/// What a secret starts with, so one found in a log or a file is recognisable.
pub const PREFIX: &str = "dkt_";

/// What went wrong managing tokens.
#[derive(Debug, thiserror::Error)]
pub enum TokenError {
    #[error("a token named {0:?} already exists")]
    Exists(String),
    #[error("collection {0:?} not found")]
    UnknownCollection(String),
    #[error("an admin token reaches every collection; leave out --collection")]
    AdminLimited,
    #[error("a token name must be 1–128 characters")]
    InvalidName,
    #[error("the operating system gave no random bytes: {0}")]
    Random(String),
    #[error(transparent)]
    Database(#[from] sqlx::Error),
}

/// A token as `docket tokens list` shows it: never the secret.
#[derive(Debug, Clone, Serialize)]
pub struct TokenInfo {
    pub name: String,
    pub role: String,
    /// The collections it is limited to, when it is limited.
    pub collections: Option<Vec<String>>,
    pub created_at: chrono::DateTime<chrono::Utc>,
}

fn hash(secret: &str) -> Vec<u8> {
    Sha256::digest(secret.as_bytes()).to_vec()
}

/// Creates a token and returns its secret, the only time it exists outside the caller.
pub async fn create(
    pool: &PgPool,
    name: &str,
    role: Role,
    collection_names: &[String],
) -> Result<String, TokenError> {
    if name.is_empty() || name.chars().count() > 128 {
        return Err(TokenError::InvalidName);
    }
    if role == Role::Admin && !collection_names.is_empty() {
        return Err(TokenError::AdminLimited);
    }
    let mut bytes = [0u8; 32];
    getrandom::fill(&mut bytes).map_err(|e| TokenError::Random(e.to_string()))?;
    let secret = format!("{PREFIX}{}", hex::encode(bytes));
    let mut tx = pool.begin().await?;
    let id = sqlx::query_scalar!(
        "insert into tokens (name, role, secret_sha256, all_collections) values ($1, $2, $3, $4)
         on conflict (name) do nothing
         returning id",
        name,
        role.as_str(),
        &hash(&secret),
        collection_names.is_empty(),
    )
    .fetch_optional(&mut *tx)
    .await?
    .ok_or_else(|| TokenError::Exists(name.to_owned()))?;
    for collection in collection_names {
        let Some(CollectionId(collection_id)) = collections::find(&mut *tx, collection).await?
        else {
            return Err(TokenError::UnknownCollection(collection.clone()));
        };
        sqlx::query!(
            "insert into token_collections (token_id, collection_id) values ($1, $2)
             on conflict do nothing",
            id,
            collection_id,
        )
        .execute(&mut *tx)
        .await?;
    }
    tx.commit().await?;
    Ok(secret)
}

/// Every token, by name.
pub async fn list(pool: &PgPool) -> Result<Vec<TokenInfo>, sqlx::Error> {
    let rows = sqlx::query!(
        r#"select t.name, t.role, t.created_at, t.all_collections,
                  array(select c.name from token_collections tc
                        join collections c on c.id = tc.collection_id
                        where tc.token_id = t.id order by c.name) as "collections!"
           from tokens t
           order by t.name"#
    )
    .fetch_all(pool)
    .await?;
    Ok(rows
        .into_iter()
        .map(|row| TokenInfo {
            name: row.name,
            role: row.role,
            collections: (!row.all_collections).then_some(row.collections),
            created_at: row.created_at,
        })
        .collect())
}

/// Deletes the token `name`; false when there is none.
pub async fn revoke(pool: &PgPool, name: &str) -> Result<bool, sqlx::Error> {
    let deleted = sqlx::query!("delete from tokens where name = $1", name)
        .execute(pool)
        .await?;
    Ok(deleted.rows_affected() > 0)
}

/// Whether any token exists: once one does, loopback needs a token too.
pub async fn any(pool: &PgPool) -> Result<bool, sqlx::Error> {
    sqlx::query_scalar!(r#"select exists (select 1 from tokens) as "any!""#)
        .fetch_one(pool)
        .await
}

/// The access of the token whose secret is `secret`, if it exists.
pub async fn identify(pool: &PgPool, secret: &str) -> Result<Option<Access>, sqlx::Error> {
    let wanted = hash(secret);
    let row = sqlx::query!(
        r#"select t.role, t.secret_sha256, t.all_collections,
                  array(select collection_id from token_collections
                        where token_id = t.id) as "collections!: Vec<i64>"
           from tokens t
           where t.secret_sha256 = $1"#,
        &wanted,
    )
    .fetch_optional(pool)
    .await?;
    let Some(row) = row else { return Ok(None) };
    if !bool::from(row.secret_sha256.ct_eq(&wanted)) {
        return Ok(None);
    }
    let Some(role) = Role::parse(&row.role) else {
        return Ok(None);
    };
    let collections =
        (!row.all_collections).then(|| row.collections.into_iter().map(CollectionId).collect());
    Ok(Some(Access::new(role, collections)))
}
