//! Documents: the rows people upload, list and delete, and every change of their state.
//!
//! An upload writes the document, its bytes and its first job in one transaction
//! ([`create_with_first_job`]): either all three exist or none. Identical bytes are one
//! document per collection (`(collection_id, sha256)` is unique), so an upload of known bytes
//! into the same collection returns the existing row.
//!
//! Every read that answers a request takes the request's [`Reach`] and filters by it in its own
//! statement: a document outside it is exactly as absent as a missing id.
//!
//! This module is the only writer of a document's row. Its lifecycle is `uploaded` →
//! `extracting` → `embedding` → `ready`, or `failed` when a step fails for good; a reprocess
//! starts again at `uploaded`, and a person's retry of the failed step's job puts it back into
//! that step ([`resume`]). Each move is a transition here ([`restart`], [`resume`],
//! [`mark_extracting`], [`mark_embedding`], [`mark_ready`], [`fail_step`]; the OCR progress
//! through [`start_ocr`], [`record_ocr_progress`] and [`clear_progress`]; the description of
//! how the text was obtained, [`ExtractionNote`], with them), run on the caller's
//! connection or transaction so that it commits with the step's other writes (a job's death
//! settles its document in the transaction that kills the job: the pipeline's kinds call
//! [`fail_step`] from their end hooks).
//!
//! The transitions that end a document (`ready`, `failed`) and [`delete`] return the row they
//! changed, so that the caller announces it (webhooks) in the same transaction. [`uploads`]
//! keeps the upload requests, so that "every document of this request settled" is answered
//! once.

use chrono::{DateTime, Utc};
use serde::Serialize;
use sha2::{Digest, Sha256};
use sqlx::types::Json;
use sqlx::{PgConnection, PgExecutor, PgPool};

use crate::collections::{CollectionId, Reach};
use crate::queue::{self, NewJob, QueueError};

pub use uploads::UploadId;

/// A document's identity.
#[derive(
    utoipa::ToSchema,
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    Hash,
    Serialize,
    serde::Deserialize,
    sqlx::Type,
)]
#[serde(transparent)]
#[sqlx(transparent)]
pub struct DocumentId(pub i64);

impl std::fmt::Display for DocumentId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.0.fmt(f)
    }
}

/// Where a document is in the pipeline.
#[derive(
    utoipa::ToSchema, Debug, Clone, Copy, PartialEq, Eq, Serialize, serde::Deserialize, sqlx::Type,
)]
#[serde(rename_all = "snake_case")]
#[sqlx(type_name = "text", rename_all = "lowercase")]
pub enum DocumentStatus {
    Uploaded,
    Extracting,
    Embedding,
    Ready,
    Failed,
}

impl DocumentStatus {
    /// The status as stored and shown.
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

/// A document as clients see it: the JSON of `/api/documents` is this struct.
#[derive(utoipa::ToSchema, Debug, Clone, Serialize)]
pub struct Document {
    pub id: DocumentId,
    /// The name of the collection it belongs to.
    pub collection: String,
    #[serde(skip)]
    pub collection_id: CollectionId,
    pub filename: String,
    pub content_type: String,
    pub byte_size: i64,
    #[schema(value_type = String)]
    #[serde(serialize_with = "hex_bytes")]
    pub sha256: Vec<u8>,
    pub status: DocumentStatus,
    /// `null` or `{ "code", "message", "permanent" }`: why a step failed, and whether running
    /// it again on the same bytes cannot help (absent for failures recorded before docket said).
    pub error: Option<serde_json::Value>,
    pub extractor: Option<String>,
    pub page_count: Option<i32>,
    /// `null`, or how far a long step got: `{ "step": "ocr", "done", "total" }`.
    pub progress: Option<serde_json::Value>,
    /// Why pages were read by OCR (no text layer, garbage text), once some were.
    pub extract_note: Option<String>,
    /// How its text was obtained, in one description to show as given (text layer, OCR on N
    /// of M pages, OCR pending, OCR off); null before the first extraction, for documents
    /// extracted before it was recorded, and after a pending OCR failed.
    #[schema(value_type = Option<ExtractionNote>)]
    pub extraction: Option<Json<ExtractionNote>>,
    /// The upload request (`POST /api/documents`) that created it; `upload.settled` names it.
    pub upload_id: Option<UploadId>,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
}

fn hex_bytes<S: serde::Serializer>(bytes: &[u8], s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(&hex::encode(bytes))
}

/// A checked query of whole [`Document`] rows: `$head`, the columns a `Document` holds, then
/// `$tail`, with `$arg`s bound. One column list for every statement that returns documents.
macro_rules! documents_query {
    ($head:literal, $tail:literal $(, $arg:expr)* $(,)?) => {
        sqlx::query_as!(
            Document,
            $head
                + r#" id as "id: DocumentId",
                      (select c.name from collections c where c.id = documents.collection_id)
                          as "collection!",
                      collection_id as "collection_id: CollectionId",
                      filename, content_type, byte_size, sha256,
                      status as "status: DocumentStatus", error, extractor, page_count,
                      progress, extract_note,
                      extraction as "extraction: Json<ExtractionNote>",
                      upload_id as "upload_id: UploadId",
                      created_at, updated_at "#
                + $tail
            $(, $arg)*
        )
    };
}

// After the macro, which they use.
mod extraction;
mod transitions;
pub mod uploads;

pub use extraction::{
    Extraction, ExtractionMethod, ExtractionNote, clear_progress, mark_embedding,
    record_ocr_progress, start_ocr,
};
pub use transitions::{Step, fail_step, mark_extracting, mark_ready, restart, resume};

/// A new upload, already sniffed.
pub struct NewDocument<'a> {
    pub collection: CollectionId,
    pub filename: &'a str,
    pub content_type: &'a str,
    pub bytes: &'a [u8],
    /// The upload request it arrived in, if it came through the API.
    pub upload: Option<UploadId>,
}

/// The outcome of storing an upload.
pub struct Stored {
    pub document: Document,
    /// True when these bytes were already a document, which is returned instead.
    pub duplicate: bool,
}

/// Stores an upload and enqueues its first job (`first_job` of the new document's id), in one
/// transaction. The caller names the job: documents know no job kinds.
pub async fn create_with_first_job(
    pool: &PgPool,
    upload: &NewDocument<'_>,
    first_job: impl FnOnce(DocumentId) -> Result<NewJob, QueueError>,
) -> Result<Stored, QueueError> {
    let sha256 = Sha256::digest(upload.bytes).to_vec();
    let byte_size = i64::try_from(upload.bytes.len()).unwrap_or(i64::MAX);
    let mut tx = pool.begin().await?;
    let inserted = documents_query!(
        "insert into documents (collection_id, filename, content_type, byte_size, sha256, upload_id)
         values ($1, $2, $3, $4, $5, $6)
         on conflict (collection_id, sha256) do nothing
         returning",
        "",
        upload.collection.0,
        upload.filename,
        upload.content_type,
        byte_size,
        &sha256,
        upload.upload.map(|u| u.0),
    )
    .fetch_optional(&mut *tx)
    .await?;
    let Some(document) = inserted else {
        tx.rollback().await?;
        let existing = documents_query!(
            "select",
            "from documents where collection_id = $1 and sha256 = $2",
            upload.collection.0,
            &sha256
        )
        .fetch_one(pool)
        .await?;
        return Ok(Stored {
            document: existing,
            duplicate: true,
        });
    };
    sqlx::query!(
        "insert into document_blobs (document_id, bytes)
         values ($1, $2)",
        document.id.0,
        upload.bytes,
    )
    .execute(&mut *tx)
    .await?;
    queue::enqueue(&mut tx, &first_job(document.id)?).await?;
    tx.commit().await?;
    Ok(Stored {
        document,
        duplicate: false,
    })
}

/// One document, when it is within `reach`.
pub async fn get_within(
    executor: impl PgExecutor<'_>,
    id: DocumentId,
    reach: &Reach,
) -> Result<Option<Document>, sqlx::Error> {
    documents_query!(
        "select",
        "from documents where id = $1 and ($2::bigint[] is null or collection_id = any($2))",
        id.0,
        reach.ids(),
    )
    .fetch_optional(executor)
    .await
}

/// The collection of document `id`, if it exists.
pub async fn collection_of(
    executor: impl PgExecutor<'_>,
    id: DocumentId,
) -> Result<Option<CollectionId>, sqlx::Error> {
    sqlx::query_scalar!(
        r#"select collection_id as "collection_id: CollectionId" from documents where id = $1"#,
        id.0
    )
    .fetch_optional(executor)
    .await
}

/// One document, wherever it is (for the pipeline's own steps, never for a request).
pub async fn get(
    executor: impl PgExecutor<'_>,
    id: DocumentId,
) -> Result<Option<Document>, sqlx::Error> {
    documents_query!("select", "from documents where id = $1", id.0)
        .fetch_optional(executor)
        .await
}

/// How a list of documents is ordered.
#[derive(utoipa::ToSchema, Debug, Clone, Copy, PartialEq, Eq, Default, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Sort {
    /// Newest upload first (the default).
    #[default]
    Newest,
    Oldest,
    /// By file name, A to Z (case-insensitive), then newest first.
    Name,
    /// Largest first.
    Size,
}

impl Sort {
    fn as_str(self) -> &'static str {
        match self {
            Sort::Newest => "newest",
            Sort::Oldest => "oldest",
            Sort::Name => "name",
            Sort::Size => "size",
        }
    }
}

/// Which documents a list holds and in what order: every filter of `GET /api/documents` is a
/// field here, so a new one is one field and one line of [`list`]'s `where`.
#[derive(Debug, Clone, Default)]
pub struct ListFilter {
    pub status: Option<DocumentStatus>,
    /// A part of the file name, any case.
    pub name: Option<String>,
    /// Any of these content types (empty: all).
    pub content_types: Vec<String>,
    pub sort: Sort,
    /// Keyset cursor for the newest-first order: ids below this one.
    pub before: Option<DocumentId>,
    /// Rows to skip, for the other orders.
    pub offset: i64,
}

/// A page of the documents within `reach` matching `filter`, in its order; with how many
/// match in all (within `reach` too: a count says nothing of other collections).
pub async fn list(
    pool: &PgPool,
    reach: &Reach,
    filter: &ListFilter,
    limit: i64,
) -> Result<(Vec<Document>, i64), sqlx::Error> {
    let status = filter.status.map(DocumentStatus::as_str);
    let name = filter.name.as_deref().filter(|n| !n.is_empty());
    let types = &filter.content_types[..];
    let documents = documents_query!(
        "select",
        "from documents
         where ($1::text is null or status = $1)
           and ($2::text is null or strpos(lower(filename), lower($2)) > 0)
           and (cardinality($3::text[]) = 0 or content_type = any($3))
           and ($4::bigint is null or id < $4)
           and ($8::bigint[] is null or collection_id = any($8))
         order by case when $5 = 'name' then lower(filename) end asc,
                  case when $5 = 'size' then byte_size end desc,
                  case when $5 = 'oldest' then id end asc,
                  id desc
         offset $6
         limit $7",
        status,
        name,
        types,
        filter.before.map(|id| id.0),
        filter.sort.as_str(),
        filter.offset,
        limit,
        reach.ids(),
    )
    .fetch_all(pool)
    .await?;
    let total = sqlx::query_scalar!(
        r#"select count(*) as "total!"
           from documents
           where ($1::text is null or status = $1)
             and ($2::text is null or strpos(lower(filename), lower($2)) > 0)
             and (cardinality($3::text[]) = 0 or content_type = any($3))
             and ($4::bigint[] is null or collection_id = any($4))"#,
        status,
        name,
        types,
        reach.ids(),
    )
    .fetch_one(pool)
    .await?;
    Ok((documents, total))
}

/// The original bytes of a document.
pub async fn bytes(pool: &PgPool, id: DocumentId) -> Result<Option<Vec<u8>>, sqlx::Error> {
    sqlx::query_scalar!(
        "select bytes
         from document_blobs
         where document_id = $1",
        id.0
    )
    .fetch_optional(pool)
    .await
}

/// How many chunks the document's current text has.
pub async fn chunk_count(pool: &PgPool, id: DocumentId) -> Result<i64, sqlx::Error> {
    sqlx::query_scalar!(
        r#"select count(*) as "count!"
           from chunks
           where document_id = $1"#,
        id.0
    )
    .fetch_one(pool)
    .await
}

/// A document's vectors under one model version.
#[derive(utoipa::ToSchema, Debug, Serialize)]
pub struct EmbeddingSet {
    pub model_version: String,
    pub chunk_count: i32,
    /// Chunks that have a vector so far; equal to `chunk_count` once complete.
    pub embedded: i64,
    pub completed_at: Option<DateTime<Utc>>,
}

/// The document's embedding sets, oldest first.
pub async fn embedding_sets(
    pool: &PgPool,
    id: DocumentId,
) -> Result<Vec<EmbeddingSet>, sqlx::Error> {
    sqlx::query_as!(
        EmbeddingSet,
        r#"select s.model_version, s.chunk_count,
                  (select count(*) from embeddings e
                   where e.document_id = s.document_id and e.model_version = s.model_version)
                      as "embedded!",
                  s.completed_at
           from embedding_sets s
           where s.document_id = $1
           order by s.created_at"#,
        id.0
    )
    .fetch_all(pool)
    .await
}

/// Deletes a document on `conn`; its bytes, chunks, embeddings and sets go with it (foreign
/// keys cascade). Returns the document as it was, if it existed. Its jobs are the caller's to
/// cancel in the same transaction (the pipeline's delete does).
pub async fn delete(
    conn: &mut PgConnection,
    id: DocumentId,
) -> Result<Option<Document>, sqlx::Error> {
    documents_query!("delete from documents where id = $1 returning", "", id.0)
        .fetch_optional(conn)
        .await
}
