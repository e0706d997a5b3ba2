//! The moves of a document's lifecycle that are not its extraction's own ([`super::extraction`]):
//! a reprocess, the extract step starting, the set completing, a step failing for good, and a
//! person's retry putting a failed document back into the step it failed in.

use sqlx::types::Json;
use sqlx::{PgConnection, PgExecutor};

use super::{Document, DocumentId, DocumentStatus, ExtractionNote, UploadId};
use crate::collections::CollectionId;

/// A reprocess: the document starts again at `uploaded`, its error and any progress of the
/// run it replaces cleared. Returns whether it exists.
pub async fn restart(executor: impl PgExecutor<'_>, id: DocumentId) -> Result<bool, sqlx::Error> {
    let updated = sqlx::query!(
        "update documents
         set status = 'uploaded', error = null, progress = null
         where id = $1",
        id.0
    )
    .execute(executor)
    .await?
    .rows_affected();
    Ok(updated == 1)
}

/// A person retried the job of a step that failed a document (in the transaction of the
/// retry): the document goes back to `status` (`uploaded` before an extraction, `extracting`
/// for its OCR, `embedding`), its error and any progress cleared, so the page follows it to
/// `ready` or to the new failure. Only a `failed` document moves: one that is ready, or
/// in a step already, has something else speaking for it. Returns whether it moved.
pub async fn resume(
    executor: impl PgExecutor<'_>,
    id: DocumentId,
    status: DocumentStatus,
) -> Result<bool, sqlx::Error> {
    let updated = sqlx::query!(
        "update documents
         set status = $2, error = null, progress = null
         where id = $1
           and status = 'failed'",
        id.0,
        status.as_str(),
    )
    .execute(executor)
    .await?
    .rows_affected();
    Ok(updated == 1)
}

/// Extraction started: `extracting`, any earlier error cleared.
pub async fn mark_extracting(
    executor: impl PgExecutor<'_>,
    id: DocumentId,
) -> Result<(), sqlx::Error> {
    sqlx::query!(
        "update documents
         set status = 'extracting', error = null
         where id = $1",
        id.0
    )
    .execute(executor)
    .await?;
    Ok(())
}

/// A set is complete (in the caller's transaction): `ready`, any error cleared. Not while a
/// newer extraction is pending or running (`uploaded`, `extracting`): its chunks replace these,
/// and the document is ready only once they are embedded. Returns the document when it became
/// ready now (it was not already), which is what `document.ready` announces.
pub async fn mark_ready(
    conn: &mut PgConnection,
    id: DocumentId,
) -> Result<Option<Document>, sqlx::Error> {
    // Locked, so that of two sets completing at once only one sees the document not yet ready.
    let before = sqlx::query_scalar!(
        r#"select status as "status: DocumentStatus" from documents where id = $1 for update"#,
        id.0
    )
    .fetch_optional(&mut *conn)
    .await?;
    if !matches!(
        before,
        Some(DocumentStatus::Embedding | DocumentStatus::Failed)
    ) {
        return Ok(None);
    }
    documents_query!(
        "update documents
         set status = 'ready', error = null
         where id = $1
         returning",
        "",
        id.0
    )
    .fetch_optional(conn)
    .await
}

/// A step of a document's lifecycle, as far as a failure is concerned.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Step {
    /// Reading the text (OCR included): the document is `uploaded` or `extracting`.
    Extract,
    /// Embedding the chunks: the document is `embedding`.
    Embed,
}

/// Step `step` failed for good (on the caller's connection, normally the transaction that
/// ended the step's job): the document is `failed` with `{code, message}`, unless it moved on
/// (it is no longer in the step) or, for embedding, it is searchable under some version (a
/// complete set for its current chunks), which makes it `ready` instead: a failed embed under
/// one version must not fail a document people can find. Whether another job of the step still
/// speaks for the document is the caller's to check first. `permanent` says that running the
/// step again on the same bytes cannot help (the file's own fault, or a refusal by the
/// provider), so a client offers advice rather than a retry; it is stored as the error's
/// `permanent`. Returns the document when it changed (now `failed`, or `ready`).
pub async fn fail_step(
    executor: impl PgExecutor<'_>,
    id: DocumentId,
    step: Step,
    code: &str,
    message: &str,
    permanent: bool,
) -> Result<Option<Document>, sqlx::Error> {
    match step {
        Step::Extract => {
            documents_query!(
                "update documents
             set status = 'failed',
                 error = jsonb_build_object('code', $2::text, 'message', $3::text,
                                            'permanent', $4::bool),
                 progress = null,
                 extraction = case when extraction ->> 'method' = 'ocr_pending' then null
                                   else extraction end
             where id = $1
               and status in ('uploaded', 'extracting')
             returning",
                "",
                id.0,
                code,
                message,
                permanent,
            )
            .fetch_optional(executor)
            .await
        }
        Step::Embed => {
            documents_query!(
                "with searchable as (
                 select exists (select 1 from embedding_sets_complete where document_id = $1) as yes
             )
             update documents
             set status = case when searchable.yes then 'ready' else 'failed' end,
                 error = case when searchable.yes then null
                              else jsonb_build_object('code', $2::text, 'message', $3::text,
                                                      'permanent', $4::bool) end
             from searchable
             where id = $1
               and status = 'embedding'
             returning",
                "",
                id.0,
                code,
                message,
                permanent,
            )
            .fetch_optional(executor)
            .await
        }
    }
}
