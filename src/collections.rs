//! Collections: the spaces documents live in, the one owner of the `collections` table.
//!
//! Every document belongs to exactly one collection; `default` (id [`DEFAULT`]) always exists.
//! A [`Reach`] is the exact set of collection ids every query of one request filters by in SQL
//! ([`crate::access::Access::reach`] makes it from a caller and what it asked for).
//! A collection being deleted (`deleting_since` set) is outside every reach from the moment the
//! deletion is asked, while its documents go through their jobs.

use serde::Serialize;
use sqlx::{PgExecutor, PgPool};

use crate::queue::QueueError;

/// The id of `default`, which the first migration creates and nothing deletes.
pub const DEFAULT: CollectionId = CollectionId(1);
/// The name of [`DEFAULT`].
pub const DEFAULT_NAME: &str = "default";

/// A collection's id.
#[derive(
    utoipa::ToSchema,
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    Hash,
    PartialOrd,
    Ord,
    Serialize,
    serde::Deserialize,
    sqlx::Type,
)]
#[sqlx(transparent)]
#[serde(transparent)]
pub struct CollectionId(pub i64);

/// What went wrong with a collection asked for by name.
#[derive(Debug, thiserror::Error)]
pub enum CollectionError {
    /// No such collection, or one outside the caller's reach: the two answer alike.
    #[error("collection {0:?} not found")]
    NotFound(String),
    /// A name that cannot be a collection's.
    #[error(
        "collection name {0:?} is not valid: 1–64 letters, digits, '.', '_' or '-', starting with a letter or digit"
    )]
    InvalidName(String),
    #[error("collection {0:?} already exists")]
    Exists(String),
    /// `default` holds the documents uploaded without a collection; it cannot go.
    #[error("the default collection cannot be deleted")]
    DefaultKept,
    #[error(transparent)]
    Queue(#[from] QueueError),
    #[error(transparent)]
    Database(#[from] sqlx::Error),
}

/// The collections one request covers, as every query filters them: `None` when the caller
/// reaches every collection and asked for none in particular (no filter at all), else the ids.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reach(Option<Vec<i64>>);

impl Reach {
    /// Every collection, unfiltered: for the process's own work (workers, maintenance, the CLI
    /// run by the operator), never for a request.
    pub fn everything() -> Self {
        Self(None)
    }

    /// Exactly these collections.
    pub fn only(ids: impl IntoIterator<Item = CollectionId>) -> Self {
        Self(Some(ids.into_iter().map(|id| id.0).collect()))
    }

    /// The `bigint[]` a query binds: null for no filter.
    pub fn ids(&self) -> Option<&[i64]> {
        self.0.as_deref()
    }

    /// Whether `collection` is inside.
    pub fn contains(&self, collection: CollectionId) -> bool {
        self.0
            .as_ref()
            .is_none_or(|ids| ids.contains(&collection.0))
    }
}

/// A collection with what it holds, as `GET /api/collections` shows it.
#[derive(utoipa::ToSchema, Debug, Clone, Serialize)]
pub struct CollectionUsage {
    pub name: String,
    pub documents: i64,
    pub chunks: i64,
    /// Bytes of the original files.
    pub bytes: i64,
    /// Tokens embedded per model version: the chunks' token counts of every document with a
    /// complete set under that version.
    pub embedding_tokens: Vec<VersionTokens>,
    pub created_at: chrono::DateTime<chrono::Utc>,
}

/// Embedding tokens of one model version.
#[derive(utoipa::ToSchema, Debug, Clone, Serialize)]
pub struct VersionTokens {
    pub model_version: String,
    pub tokens: i64,
}

/// Whether `name` may name a collection (the table's check, said early and plainly).
pub fn valid_name(name: &str) -> bool {
    let mut chars = name.chars();
    chars.next().is_some_and(|c| c.is_ascii_alphanumeric())
        && name.len() <= 64
        && chars.all(|c| c.is_ascii_alphanumeric() || "._-".contains(c))
}

/// The live (not being deleted) collection called `name`.
pub async fn find(
    executor: impl PgExecutor<'_>,
    name: &str,
) -> Result<Option<CollectionId>, sqlx::Error> {
    sqlx::query_scalar!(
        r#"select id as "id: CollectionId"
           from collections
           where name = $1 and deleting_since is null"#,
        name,
    )
    .fetch_optional(executor)
    .await
}

/// Whether some collection is being deleted (then "every collection" must be spelled out).
pub async fn any_deleting(pool: &PgPool) -> Result<bool, sqlx::Error> {
    sqlx::query_scalar!(
        r#"select exists (select 1 from collections where deleting_since is not null) as "any!""#
    )
    .fetch_one(pool)
    .await
}

/// The live collections among `limited` (none: all of them), by id.
pub async fn live(
    pool: &PgPool,
    limited: Option<&[CollectionId]>,
) -> Result<Vec<CollectionId>, sqlx::Error> {
    let limited: Option<Vec<i64>> = limited.map(|ids| ids.iter().map(|id| id.0).collect());
    sqlx::query_scalar!(
        r#"select id as "id: CollectionId"
           from collections
           where deleting_since is null
             and ($1::bigint[] is null or id = any($1))
           order by id"#,
        limited.as_deref(),
    )
    .fetch_all(pool)
    .await
}

/// Creates `name`.
pub async fn create(pool: &PgPool, name: &str) -> Result<CollectionId, CollectionError> {
    if !valid_name(name) {
        return Err(CollectionError::InvalidName(name.to_owned()));
    }
    let id = sqlx::query_scalar!(
        r#"insert into collections (name) values ($1)
           on conflict (name) do nothing
           returning id as "id: CollectionId""#,
        name,
    )
    .fetch_optional(pool)
    .await?;
    id.ok_or_else(|| CollectionError::Exists(name.to_owned()))
}

/// Marks `name` as being deleted (from now on outside every reach) and returns its id; the
/// caller enqueues the job that deletes its documents in the same transaction.
pub async fn start_deleting(
    executor: impl PgExecutor<'_>,
    name: &str,
) -> Result<CollectionId, CollectionError> {
    if name == DEFAULT_NAME {
        return Err(CollectionError::DefaultKept);
    }
    sqlx::query_scalar!(
        r#"update collections set deleting_since = now()
           where name = $1 and deleting_since is null
           returning id as "id: CollectionId""#,
        name,
    )
    .fetch_optional(executor)
    .await?
    .ok_or_else(|| CollectionError::NotFound(name.to_owned()))
}

/// Removes the row of a collection being deleted once it holds no document; false while some
/// remain.
pub async fn finish_deleting(
    executor: impl PgExecutor<'_>,
    id: CollectionId,
) -> Result<bool, sqlx::Error> {
    let deleted = sqlx::query!(
        "delete from collections c
         where c.id = $1 and c.deleting_since is not null
           and not exists (select 1 from documents d where d.collection_id = c.id)",
        id.0,
    )
    .execute(executor)
    .await?;
    Ok(deleted.rows_affected() > 0)
}

/// The collections of `reach`, each with its usage, by name.
pub async fn usage(pool: &PgPool, reach: &Reach) -> Result<Vec<CollectionUsage>, sqlx::Error> {
    let rows = sqlx::query!(
        r#"select c.name, c.created_at,
                  coalesce(d.documents, 0) as "documents!",
                  coalesce(d.bytes, 0)::int8 as "bytes!",
                  coalesce(k.chunks, 0) as "chunks!",
                  coalesce(t.tokens, '[]'::json) as "tokens!: sqlx::types::Json<Vec<(String, i64)>>"
           from collections c
           left join lateral (
               select count(*) as documents, sum(byte_size) as bytes
               from documents where collection_id = c.id
           ) d on true
           left join lateral (
               select count(*) as chunks
               from chunks ch join documents x on x.id = ch.document_id
               where x.collection_id = c.id
           ) k on true
           left join lateral (
               select json_agg(json_build_array(v.model_version, v.tokens) order by v.model_version) as tokens
               from (
                   select s.model_version, sum(ch.token_count)::int8 as tokens
                   from embedding_sets s
                   join documents x on x.id = s.document_id
                   join chunks ch on ch.document_id = s.document_id
                   where x.collection_id = c.id and s.completed_at is not null
                   group by s.model_version
               ) v
           ) t on true
           where c.deleting_since is null
             and ($1::bigint[] is null or c.id = any($1))
           order by c.name"#,
        reach.ids(),
    )
    .fetch_all(pool)
    .await?;
    Ok(rows
        .into_iter()
        .map(|row| CollectionUsage {
            name: row.name,
            documents: row.documents,
            chunks: row.chunks,
            bytes: row.bytes,
            embedding_tokens: row
                .tokens
                .0
                .into_iter()
                .map(|(model_version, tokens)| VersionTokens {
                    model_version,
                    tokens,
                })
                .collect(),
            created_at: row.created_at,
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_url_and_shell_safe() {
        assert!(valid_name("default"));
        assert!(valid_name("team-a.2026_q1"));
        assert!(!valid_name(""));
        assert!(!valid_name("-lead"));
        assert!(!valid_name("a b"));
        assert!(!valid_name("한국"));
        assert!(!valid_name(&"x".repeat(65)));
    }

    #[test]
    fn a_reach_of_everything_binds_no_filter() {
        assert_eq!(Reach::everything().ids(), None);
        assert!(Reach::everything().contains(CollectionId(7)));
        let only = Reach::only([CollectionId(2)]);
        assert_eq!(only.ids(), Some(&[2][..]));
        assert!(!only.contains(CollectionId(1)));
    }
}
