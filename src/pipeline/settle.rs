//! What a pipeline job's failure means for its document, in one place: the handlers' own
//! failures (with a readable reason) and the end hooks of the pipeline's kinds (a job killed on
//! its last attempt, rescued past it, or cancelled) both come here, on the connection that
//! ends the job, so the document and the job change together.
//!
//! A job never speaks for a document that has moved on: nothing changes while another job of
//! the same step still works for it (a reprocess enqueued a newer extraction), or once the
//! document left the step ([`documents::fail_step`]).

use sqlx::{Connection, PgConnection};

use super::jobs::{EmbedJob, ExtractJob, OcrJob};
use crate::documents::{self, DocumentId, Step};
use crate::queue::payload::JobPayload;
use crate::queue::{End, JobId, by_payload};

/// The kinds whose jobs carry a step: OCR is a phase of extraction.
fn kinds_of(step: Step) -> &'static [&'static str] {
    match step {
        Step::Extract => &[ExtractJob::KIND, OcrJob::KIND],
        Step::Embed => &[EmbedJob::KIND],
    }
}

/// Step `step` of document `id` failed for good in job `job`, with `code` and `message`;
/// `permanent` when running it again on the same bytes cannot help. The change and its
/// webhooks commit together (a savepoint when `conn` is already in a transaction). Returns
/// whether the document changed.
pub(super) async fn failed_step(
    conn: &mut PgConnection,
    id: DocumentId,
    job: JobId,
    step: Step,
    (code, message): (&str, &str),
    permanent: bool,
) -> Result<bool, sqlx::Error> {
    if by_payload::any_pending(conn, kinds_of(step), "document_id", id.0, job).await? {
        return Ok(false);
    }
    let mut tx = conn.begin().await?;
    let Some(changed) = documents::fail_step(&mut *tx, id, step, code, message, permanent).await?
    else {
        return Ok(false);
    };
    crate::webhooks::document_changed(&mut tx, &changed).await?;
    tx.commit().await?;
    Ok(true)
}

/// Job `job` of kind `kind`, working on step `step` of document `id`, ended as `end`.
pub(super) async fn job_ended(
    conn: &mut PgConnection,
    id: DocumentId,
    job: JobId,
    kind: &str,
    step: Step,
    end: &End,
) -> Result<(), sqlx::Error> {
    let (code, message) = match end {
        End::Killed { error } => (
            "retries_exhausted",
            format!("gave up after the last attempt: {error}"),
        ),
        End::Cancelled { reason } => (
            "cancelled",
            match reason {
                Some(reason) => format!("the {kind} job was cancelled: {reason}"),
                None => format!("the {kind} job was cancelled"),
            },
        ),
    };
    // A job killed or cancelled says nothing about the file: a person's retry may succeed.
    failed_step(conn, id, job, step, (code, &message), false).await?;
    Ok(())
}
