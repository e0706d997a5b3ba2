//! Documents: the rows people upload, list and delete, and the SQL that reads and writes them.
//!
//! An upload writes the document, its bytes and its first job in one transaction
//! ([`create_with_extract_job`]): either all three exist or none. Identical bytes are one
//! document (`sha256` is unique), so an upload of known bytes returns the existing row.

use chrono::{DateTime, Utc};
use serde::Serialize;
use sha2::{Digest, Sha256};
use sqlx::{PgConnection, PgPool};

use crate::queue::{self, NewJob, QueueError};

/// The job kind that extracts a document's text.
pub const EXTRACT_JOB: &str = "extract";
/// The job kind that embeds a document's chunks under one model version.
pub const EMBED_JOB: &str = "embed";

/// A document's identity.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, serde::Deserialize)]
#[serde(transparent)]
pub struct DocumentId(pub i64);

impl std::fmt::Display for DocumentId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.0.fmt(f)
    }
}

/// Where a document is in the pipeline.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DocumentStatus {
    Uploaded,
    Extracting,
    Embedding,
    Ready,
    Failed,
}

impl DocumentStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            DocumentStatus::Uploaded => "uploaded",
            DocumentStatus::Extracting => "extracting",
            DocumentStatus::Embedding => "embedding",
            DocumentStatus::Ready => "ready",
            DocumentStatus::Failed => "failed",
        }
    }

    /// Parses a stored or requested status.
    pub fn parse(s: &str) -> Option<Self> {
        [
            DocumentStatus::Uploaded,
            DocumentStatus::Extracting,
            DocumentStatus::Embedding,
            DocumentStatus::Ready,
            DocumentStatus::Failed,
        ]
        .into_iter()
        .find(|status| status.as_str() == s)
    }
}

/// A document as clients see it (DESIGN.md section 8).
#[derive(Debug, Clone, Serialize, sqlx::FromRow)]
pub struct Document {
    pub id: i64,
    pub filename: String,
    pub content_type: String,
    pub byte_size: i64,
    #[serde(serialize_with = "hex_bytes")]
    pub sha256: Vec<u8>,
    pub status: String,
    /// `null` or `{ "code", "message" }`: why a step failed.
    pub error: Option<serde_json::Value>,
    pub extractor: Option<String>,
    pub page_count: Option<i32>,
    /// `null`, or how far a long step got: `{ "step": "ocr", "done", "total" }`.
    pub progress: Option<serde_json::Value>,
    /// Why pages were read by OCR (no text layer, garbage text), when some were.
    pub extract_note: Option<String>,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
}

fn hex_bytes<S: serde::Serializer>(bytes: &[u8], s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(&hex::encode(bytes))
}

const COLUMNS: &str = "id, filename, content_type, byte_size, sha256, status, error, extractor, \
     page_count, progress, extract_note, created_at, updated_at";

/// A new upload, already sniffed.
pub struct NewDocument<'a> {
    pub filename: &'a str,
    pub content_type: &'a str,
    pub bytes: &'a [u8],
}

/// The outcome of storing an upload.
pub struct Stored {
    pub document: Document,
    /// True when these bytes were already a document, which is returned instead.
    pub duplicate: bool,
}

/// Stores an upload and enqueues its extraction, in one transaction.
pub async fn create_with_extract_job(
    pool: &PgPool,
    upload: &NewDocument<'_>,
) -> Result<Stored, QueueError> {
    let sha256 = Sha256::digest(upload.bytes).to_vec();
    let mut tx = pool.begin().await?;
    let inserted = sqlx::query_as::<_, Document>(sqlx::AssertSqlSafe(format!(
        "insert into documents (filename, content_type, byte_size, sha256)
         values ($1, $2, $3, $4)
         on conflict (sha256) do nothing
         returning {COLUMNS}"
    )))
    .bind(upload.filename)
    .bind(upload.content_type)
    .bind(upload.bytes.len() as i64)
    .bind(&sha256)
    .fetch_optional(&mut *tx)
    .await?;
    let Some(document) = inserted else {
        tx.rollback().await?;
        let existing = sqlx::query_as::<_, Document>(sqlx::AssertSqlSafe(format!(
            "select {COLUMNS} from documents where sha256 = $1"
        )))
        .bind(&sha256)
        .fetch_one(pool)
        .await?;
        return Ok(Stored {
            document: existing,
            duplicate: true,
        });
    };
    sqlx::query("insert into document_blobs (document_id, bytes) values ($1, $2)")
        .bind(document.id)
        .bind(upload.bytes)
        .execute(&mut *tx)
        .await?;
    enqueue_extract(&mut tx, DocumentId(document.id), "upload").await?;
    tx.commit().await?;
    Ok(Stored {
        document,
        duplicate: false,
    })
}

/// Enqueues the extraction of a document on `conn`. `reason` makes the idempotency key, so a
/// double-clicked "reprocess" still runs once per request.
pub async fn enqueue_extract(
    conn: &mut PgConnection,
    id: DocumentId,
    reason: &str,
) -> Result<queue::Enqueued, QueueError> {
    let job = NewJob::new(EXTRACT_JOB, serde_json::json!({ "document_id": id }))
        .idempotency_key(format!("extract:{id}:{reason}"));
    queue::enqueue(conn, &job).await
}

/// One document.
pub async fn get(pool: &PgPool, id: DocumentId) -> Result<Option<Document>, sqlx::Error> {
    sqlx::query_as::<_, Document>(sqlx::AssertSqlSafe(format!(
        "select {COLUMNS} from documents where id = $1"
    )))
    .bind(id.0)
    .fetch_optional(pool)
    .await
}

/// A page of documents, newest first, keyset-paginated by id.
pub async fn list(
    pool: &PgPool,
    status: Option<DocumentStatus>,
    before: Option<i64>,
    limit: i64,
) -> Result<Vec<Document>, sqlx::Error> {
    sqlx::query_as::<_, Document>(sqlx::AssertSqlSafe(format!(
        "select {COLUMNS}
         from documents
         where ($1::text is null or status = $1)
           and ($2::bigint is null or id < $2)
         order by id desc
         limit $3"
    )))
    .bind(status.map(DocumentStatus::as_str))
    .bind(before)
    .bind(limit)
    .fetch_all(pool)
    .await
}

/// The original bytes of a document.
pub async fn bytes(pool: &PgPool, id: DocumentId) -> Result<Option<Vec<u8>>, sqlx::Error> {
    sqlx::query_scalar("select bytes from document_blobs where document_id = $1")
        .bind(id.0)
        .fetch_optional(pool)
        .await
}

/// Deletes a document; its bytes, chunks, embeddings and sets go with it (foreign keys
/// cascade), and its waiting and running pipeline jobs are cancelled in the same transaction, so
/// a running one loses its lease and stops at its next heartbeat. Returns whether it existed.
pub async fn delete(pool: &PgPool, id: DocumentId) -> Result<bool, sqlx::Error> {
    let mut tx = pool.begin().await?;
    let deleted = sqlx::query("delete from documents where id = $1")
        .bind(id.0)
        .execute(&mut *tx)
        .await?
        .rows_affected();
    cancel_pipeline_jobs(&mut tx, id, None, "the document was deleted").await?;
    tx.commit().await?;
    Ok(deleted == 1)
}

/// Cancels the document's waiting and running extract and embed jobs, except `keep`, on
/// `conn`, with `reason` as their last error. A running job's lease is gone with its token, so
/// its worker's next heartbeat stops the handler and no write of it lands. Returns how many.
pub async fn cancel_pipeline_jobs(
    conn: &mut PgConnection,
    id: DocumentId,
    keep: Option<queue::JobId>,
    reason: &str,
) -> Result<u64, sqlx::Error> {
    let cancelled = sqlx::query(
        "update jobs
         set status = 'cancelled',
             lease_token = null,
             lease_until = null,
             last_error = $3,
             finished_at = now(),
             updated_at = now()
         where payload ? 'document_id'
           and (payload ->> 'document_id')::bigint = $1
           and kind in ('extract', 'embed')
           and status in ('ready', 'running')
           and ($2::bigint is null or id <> $2)",
    )
    .bind(id.0)
    .bind(keep.map(|job| job.0))
    .bind(reason)
    .execute(conn)
    .await?
    .rows_affected();
    Ok(cancelled)
}

/// Records that step `step` (an extract or embed job, `job`) failed for good, unless something
/// else now speaks for the document (see `docket_settle_failed_step` in the hardening
/// migration): a newer job of the step is waiting, the document moved on, or, for embedding, it
/// is searchable under some version and becomes `ready` instead. Returns whether it changed.
pub async fn settle_failed_step(
    pool: &PgPool,
    id: DocumentId,
    job: queue::JobId,
    step: &str,
    code: &str,
    message: &str,
) -> Result<bool, sqlx::Error> {
    sqlx::query_scalar("select docket_settle_failed_step($1, $2, $3, $4, $5)")
        .bind(id.0)
        .bind(job.0)
        .bind(step)
        .bind(code)
        .bind(message)
        .fetch_one(pool)
        .await
}

/// Moves a document to `status`, clearing any earlier error.
pub async fn set_status(
    conn: &mut PgConnection,
    id: DocumentId,
    status: DocumentStatus,
) -> Result<(), sqlx::Error> {
    sqlx::query("update documents set status = $2, error = null where id = $1")
        .bind(id.0)
        .bind(status.as_str())
        .execute(conn)
        .await?;
    Ok(())
}
