//! The embedding cache (`embedding_cache`, owned here): vectors keyed by what they depend on,
//! the model version and the SHA-256 of the exact text sent (a chunk's `content_hash`).
//!
//! Why: the same text recurs (page headers and legal boilerplate in every document, a new
//! version of a contract, the same file in two collections, a reprocess), and under one version
//! its vector is always the same. The embed step asks [`take`] before calling the provider and
//! hands every vector it paid for to [`put`], in every path (upload, reprocess, nightly
//! re-embed), so a text is embedded once per version.
//!
//! Concurrency: two jobs embedding the same text at once would both miss. A caller takes
//! [`lock`] on its keys in its transaction first (advisory transaction locks, taken in one
//! statement in key order, so two callers never wait on each other in a cycle), then asks
//! [`take`], sends only the misses, [`put`]s them and commits: the second caller waits for the
//! first's commit and then finds its vectors. [`put`] upserts, so a writer that did not lock is
//! still safe.
//!
//! Bounded: [`evict`] (run by the maintenance loop) deletes the least recently used entries
//! beyond `DOCKET_EMBEDDING_CACHE_ENTRIES`, in batches; [`take`] marks what it serves as used.

use pgvector::Vector;
use sqlx::PgConnection;

/// A stored vector and what it saved.
#[derive(Debug, Clone)]
pub struct Hit {
    pub text_sha256: Vec<u8>,
    pub embedding: Vector,
    /// The text's tokens: what was not sent.
    pub token_count: i32,
}

/// A vector to store.
#[derive(Debug, Clone, Copy)]
pub struct Entry<'a> {
    pub text_sha256: &'a [u8],
    pub embedding: &'a Vector,
    pub token_count: i32,
}

/// Default bound on entries (`DOCKET_EMBEDDING_CACHE_ENTRIES`): 500,000 vectors of 384
/// floats are about 0.8 GB with their keys.
pub const DEFAULT_MAX_ENTRIES: u64 = 500_000;

/// Locks `keys` under `model_version` until the end of the caller's transaction.
pub async fn lock(
    tx: &mut PgConnection,
    model_version: &str,
    keys: &[&[u8]],
) -> Result<(), sqlx::Error> {
    sqlx::query_scalar!(
        r#"select count(*) as "locked!"
           from (select distinct hashtextextended($1 || ':' || encode(k, 'hex'), 0) as key
                 from unnest($2::bytea[]) as k
                 order by key) keys
           cross join lateral pg_advisory_xact_lock(keys.key)"#,
        model_version,
        keys as &[&[u8]],
    )
    .fetch_one(tx)
    .await?;
    Ok(())
}

/// The stored vectors among `keys` under `model_version`, marked as used now.
pub async fn take(
    conn: &mut PgConnection,
    model_version: &str,
    keys: &[&[u8]],
) -> Result<Vec<Hit>, sqlx::Error> {
    sqlx::query_as!(
        Hit,
        r#"update embedding_cache
           set last_used = now()
           where model_version = $1 and text_sha256 = any($2::bytea[])
           returning text_sha256, embedding as "embedding!: Vector", token_count"#,
        model_version,
        keys as &[&[u8]],
    )
    .fetch_all(conn)
    .await
}

/// Stores `entries` under `model_version` (an entry already there is only marked as used).
pub async fn put(
    conn: &mut PgConnection,
    model_version: &str,
    entries: &[Entry<'_>],
) -> Result<(), sqlx::Error> {
    if entries.is_empty() {
        return Ok(());
    }
    let keys: Vec<&[u8]> = entries.iter().map(|e| e.text_sha256).collect();
    let vectors: Vec<Vector> = entries.iter().map(|e| e.embedding.clone()).collect();
    let tokens: Vec<i32> = entries.iter().map(|e| e.token_count).collect();
    sqlx::query!(
        "insert into embedding_cache (model_version, text_sha256, embedding, token_count)
         select $1, input.k, input.v, input.t
         from unnest($2::bytea[], $3::vector[], $4::int[]) as input(k, v, t)
         on conflict (model_version, text_sha256) do update set last_used = now()",
        model_version,
        &keys as &[&[u8]],
        // pgvector's type is not one the query macros know: bound as it is, unchecked.
        &vectors as _,
        &tokens,
    )
    .execute(conn)
    .await?;
    Ok(())
}

/// Deletes the least recently used entries beyond `max_entries`, at most `batch` per statement,
/// until the table is within the bound. Returns how many went.
pub async fn evict(pool: &sqlx::PgPool, max_entries: u64, batch: u64) -> Result<u64, sqlx::Error> {
    let max = i64::try_from(max_entries).unwrap_or(i64::MAX);
    let batch = i64::try_from(batch.max(1)).unwrap_or(i64::MAX);
    let mut total = 0;
    loop {
        let deleted = sqlx::query!(
            "delete from embedding_cache
             where ctid in (
                 select ctid from embedding_cache
                 order by last_used, text_sha256
                 limit least($2::bigint,
                             greatest((select count(*) from embedding_cache) - $1::bigint, 0))
                 for update skip locked)",
            max,
            batch,
        )
        .execute(pool)
        .await?
        .rows_affected();
        total += deleted;
        if deleted < batch as u64 {
            return Ok(total);
        }
    }
}

/// Entries stored (for tests and the page).
pub async fn entries(pool: &sqlx::PgPool) -> Result<i64, sqlx::Error> {
    sqlx::query_scalar!(r#"select count(*) as "n!" from embedding_cache"#)
        .fetch_one(pool)
        .await
}
