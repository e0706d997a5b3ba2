//! A person's retry of a pipeline job: a fresh run of the job ([`queue::retry_dead_in`]) and,
//! in the same transaction, its failed document back into the step the job works on, so the
//! page follows the document to `ready` or to the new failure instead of showing the old
//! reason until the run ends (and, for OCR or embedding, keeping it if the run fails again,
//! since a step's failure only settles a document that is in the step).
//!
//! Only a `failed` document moves: a ready one, or one another job is working on, has
//! something else speaking for it, and the retried job runs as any job would (a re-embed
//! under a new version of a ready document, say). A job of another kind is retried as it is.

use serde_json::Value;
use sqlx::PgPool;

use super::jobs::{DOCUMENT_KEY, EmbedJob, ExtractJob, OcrJob};
use crate::documents::{self, DocumentId, DocumentStatus};
use crate::queue::payload::JobPayload;
use crate::queue::{self, JobId, JobRecord, QueueError};

/// Where a failed document waits again when a job of `kind` is retried: before its
/// extraction, in it (the OCR phase), or in embedding; `None` for a kind that works on no
/// document's step.
fn resumes_at(kind: &str) -> Option<DocumentStatus> {
    match kind {
        ExtractJob::KIND => Some(DocumentStatus::Uploaded),
        OcrJob::KIND => Some(DocumentStatus::Extracting),
        EmbedJob::KIND => Some(DocumentStatus::Embedding),
        _ => None,
    }
}

/// Retries dead or cancelled job `id` as a fresh run; a failed document it works on goes back
/// into the job's step, in the same transaction. Returns the job as it is now.
pub async fn retry_job(pool: &PgPool, id: JobId) -> Result<JobRecord, QueueError> {
    let mut tx = pool.begin().await?;
    let job = queue::retry_dead_in(&mut tx, id).await?;
    let document = job.payload.get(DOCUMENT_KEY).and_then(Value::as_i64);
    if let (Some(status), Some(document)) = (resumes_at(&job.kind), document) {
        documents::resume(&mut *tx, DocumentId(document), status).await?;
    }
    tx.commit().await?;
    Ok(job)
}
