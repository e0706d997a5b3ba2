//! Where documents enter and leave the pipeline: an upload commits with its extract job, a
//! reprocess starts the document again and stops the jobs still working on its old text, and a
//! delete stops its jobs with it. Each is one transaction.

use sqlx::{PgConnection, PgPool};

use super::jobs::{DOCUMENT_KEY, ExtractJob, for_document, in_collection};
use crate::documents::{self, DocumentId, NewDocument, Stored};
use crate::queue::{self, JobId, NewJob, QueueError};

/// Stores an upload and enqueues its extraction, in one transaction (see
/// [`documents::create_with_first_job`]).
pub async fn create_with_extract_job(
    pool: &PgPool,
    upload: &NewDocument<'_>,
) -> Result<Stored, QueueError> {
    documents::create_with_first_job(pool, upload, |document_id| {
        Ok(in_collection(
            NewJob::of(&ExtractJob { document_id }, "upload")?,
            upload.collection,
        ))
    })
    .await
}

/// Enqueues the extraction of a document on `conn`. `reason` makes the idempotency key, so a
/// double-clicked "reprocess" still runs once per request.
async fn enqueue_extract(
    conn: &mut PgConnection,
    document_id: DocumentId,
    reason: &str,
) -> Result<queue::Enqueued, QueueError> {
    let job = NewJob::of(&ExtractJob { document_id }, reason)?;
    let job = for_document(&mut *conn, job, document_id).await?;
    queue::enqueue(conn, &job).await
}

/// Extracts and embeds a document again from its original bytes: it goes back to `uploaded`
/// with a new extract job, and the jobs still working on the old text are cancelled (after the
/// new job exists, so the document is never left without one). Returns whether it exists.
pub async fn reprocess(pool: &PgPool, id: DocumentId) -> Result<bool, QueueError> {
    let mut tx = pool.begin().await?;
    if !documents::restart(&mut *tx, id).await? {
        return Ok(false);
    }
    let reason = format!("reprocess-{}", uuid::Uuid::new_v4().simple());
    let extract = enqueue_extract(&mut tx, id, &reason).await?;
    cancel_pipeline_jobs(
        &mut tx,
        id,
        Some(extract.id),
        "superseded: the document is being reprocessed",
    )
    .await?;
    tx.commit().await?;
    Ok(true)
}

/// Deletes a document; its bytes, chunks, embeddings and sets go with it (foreign keys
/// cascade), and its waiting and running pipeline jobs are cancelled and `document.deleted`
/// announced in the same transaction, so
/// a running one loses its lease and stops at its next heartbeat. Returns whether it existed.
pub async fn delete_document(pool: &PgPool, id: DocumentId) -> Result<bool, sqlx::Error> {
    let mut tx = pool.begin().await?;
    let deleted = documents::delete(&mut tx, id).await?;
    cancel_pipeline_jobs(&mut tx, id, None, "the document was deleted").await?;
    if let Some(document) = &deleted {
        crate::webhooks::document_deleted(&mut tx, document).await?;
    }
    tx.commit().await?;
    Ok(deleted.is_some())
}

/// Deletes `ids` as [`delete_document`] does each, in one transaction (a collection's
/// deletion, a batch at a time).
pub(super) async fn delete_documents(pool: &PgPool, ids: &[i64]) -> Result<(), sqlx::Error> {
    let mut tx = pool.begin().await?;
    for &id in ids {
        let id = DocumentId(id);
        documents::delete(&mut tx, id).await?;
        cancel_pipeline_jobs(&mut tx, id, None, "the document's collection was deleted").await?;
    }
    tx.commit().await
}

/// Cancels the document's waiting and running jobs of every kind that works on a document
/// (declared with `OWNER_KEY = DOCUMENT_KEY`), except `keep`, on `conn`, with `reason` as their
/// last error, and settles them. Returns how many.
async fn cancel_pipeline_jobs(
    conn: &mut PgConnection,
    id: DocumentId,
    keep: Option<JobId>,
    reason: &str,
) -> Result<u64, sqlx::Error> {
    super::kinds()
        .cancel_owned(conn, DOCUMENT_KEY, id.0, keep, reason)
        .await
}
