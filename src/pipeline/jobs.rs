//! The pipeline's job kinds, each declared once on its payload type: its kind string, JSON and
//! idempotency key ([`JobPayload`]), its handler, concurrency, the document whose reprocess or
//! delete cancels it, and what its end means for that document ([`JobKind`]).
//!
//! Payloads carry references only (a document id, a model version name), never content.

use std::future::Future;
use std::sync::Arc;

use futures::future::BoxFuture;
use serde::{Deserialize, Serialize};
use sqlx::PgConnection;

use super::{Pipeline, settle};
use crate::collections::CollectionId;
use crate::documents::{self, DocumentId, Step};
use crate::queue::payload::JobPayload;
use crate::queue::{End, JobId, NewJob};
use crate::worker::{Job, JobError, JobKind, Outcome};

/// The payload key of the pipeline's document steps: a document's reprocess or delete cancels
/// the jobs that name it there.
pub const DOCUMENT_KEY: &str = "document_id";

/// A document step's job, sharing the workers fairly with other collections' (the queue's
/// `fair_key`): one collection's bulk upload never holds up another's single file.
pub fn in_collection(job: NewJob, collection: CollectionId) -> NewJob {
    job.fair_key(format!("collection:{}", collection.0))
}

/// [`in_collection`] for the collection of `document`, read on `executor` (a deleted
/// document's job keeps the shared key; it will find nothing to do).
pub async fn for_document(
    executor: impl sqlx::PgExecutor<'_>,
    job: NewJob,
    document: DocumentId,
) -> Result<NewJob, sqlx::Error> {
    Ok(match documents::collection_of(executor, document).await? {
        Some(collection) => in_collection(job, collection),
        None => job,
    })
}

/// Extract a document's text: `{"document_id": 1}`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct ExtractJob {
    pub document_id: DocumentId,
}

impl JobPayload for ExtractJob {
    const KIND: &'static str = "extract";
    /// Why the document is extracted (`upload`, or one reprocess request's own name), so a
    /// double-clicked "reprocess" still runs once per request.
    type Cause = str;

    fn idempotency_key(&self, reason: &str) -> Option<String> {
        Some(format!("extract:{}:{reason}", self.document_id))
    }
}

impl JobKind for ExtractJob {
    type Context = Pipeline;
    /// Extraction is CPU-bound (and PDFs run in child processes).
    const CONCURRENCY: usize = 2;
    const OWNER_KEY: Option<&'static str> = Some(DOCUMENT_KEY);

    fn run(
        pipeline: Arc<Pipeline>,
        job: Job,
        payload: Self,
    ) -> impl Future<Output = Result<Outcome, JobError>> + Send {
        super::extract::run(pipeline, job, payload)
    }

    fn on_ended<'c>(
        conn: &'c mut PgConnection,
        job: JobId,
        payload: Self,
        end: &'c End,
    ) -> BoxFuture<'c, Result<(), sqlx::Error>> {
        let id = payload.document_id;
        Box::pin(settle::job_ended(
            conn,
            id,
            job,
            Self::KIND,
            Step::Extract,
            end,
        ))
    }
}

/// Read the pages of a document that have no usable text layer with OCR:
/// `{"document_id": 1}`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct OcrJob {
    pub document_id: DocumentId,
}

impl JobPayload for OcrJob {
    const KIND: &'static str = "ocr";
    /// The extract job that handed the document over.
    type Cause = JobId;

    fn idempotency_key(&self, extract_job: &JobId) -> Option<String> {
        Some(format!("ocr:{}:{extract_job}", self.document_id))
    }
}

impl JobKind for OcrJob {
    type Context = Pipeline;
    /// OCR takes a core per job for seconds a page; as a kind of its own it never occupies the
    /// extract slots.
    const CONCURRENCY: usize = 1;
    const OWNER_KEY: Option<&'static str> = Some(DOCUMENT_KEY);

    fn run(
        pipeline: Arc<Pipeline>,
        job: Job,
        payload: Self,
    ) -> impl Future<Output = Result<Outcome, JobError>> + Send {
        super::ocr::run(pipeline, job, payload)
    }

    /// OCR is a phase of extraction: its end settles the document as the extract step's, and
    /// clears the progress it left.
    fn on_ended<'c>(
        conn: &'c mut PgConnection,
        job: JobId,
        payload: Self,
        end: &'c End,
    ) -> BoxFuture<'c, Result<(), sqlx::Error>> {
        let id = payload.document_id;
        Box::pin(async move {
            documents::clear_progress(&mut *conn, id).await?;
            settle::job_ended(conn, id, job, Self::KIND, Step::Extract, end).await
        })
    }
}

/// Embed a document's chunks under one model version:
/// `{"document_id": 1, "model_version": "hash:v1:384:c200o30"}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct EmbedJob {
    pub document_id: DocumentId,
    pub model_version: String,
}

/// What enqueued an embed job.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EmbedCause {
    /// The extract (or OCR) job whose checkpoint wrote the chunks.
    Extracted(JobId),
    /// The reembed run of `day` (UTC, `YYYY-MM-DD`), for the chunks whose digest is `chunks`:
    /// two runs on one day enqueue the work once, and the next day retries what still failed.
    Reembed { chunks: String, day: String },
}

impl JobPayload for EmbedJob {
    const KIND: &'static str = "embed";
    type Cause = EmbedCause;

    fn idempotency_key(&self, cause: &EmbedCause) -> Option<String> {
        let (document, version) = (self.document_id, &self.model_version);
        Some(match cause {
            EmbedCause::Extracted(job) => format!("embed:{document}:{version}:{job}"),
            EmbedCause::Reembed { chunks, day } => {
                format!("reembed:{version}:{document}:{chunks}:{day}")
            }
        })
    }
}

impl JobKind for EmbedJob {
    type Context = Pipeline;
    /// Embedding mostly waits on the provider and the rate limiter.
    const CONCURRENCY: usize = 4;
    const OWNER_KEY: Option<&'static str> = Some(DOCUMENT_KEY);

    fn run(
        pipeline: Arc<Pipeline>,
        job: Job,
        payload: Self,
    ) -> impl Future<Output = Result<Outcome, JobError>> + Send {
        super::embed::run(pipeline, job, payload)
    }

    fn on_ended<'c>(
        conn: &'c mut PgConnection,
        job: JobId,
        payload: Self,
        end: &'c End,
    ) -> BoxFuture<'c, Result<(), sqlx::Error>> {
        let id = payload.document_id;
        Box::pin(settle::job_ended(
            conn,
            id,
            job,
            Self::KIND,
            Step::Embed,
            end,
        ))
    }
}

/// Enqueue embed jobs for the documents whose set under a model version is missing or
/// incomplete: `{}` for the active version, or `{"model_version": "…"}`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReembedJob {
    /// The version to bring up to date; the active one when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model_version: Option<String>,
}

impl JobPayload for ReembedJob {
    const KIND: &'static str = "reembed";
    /// Schedules enqueue it, with their own keys (one per firing).
    type Cause = ();

    fn idempotency_key(&self, _: &()) -> Option<String> {
        None
    }
}

/// One run at a time: it only enqueues. Its end touches no document.
impl JobKind for ReembedJob {
    type Context = Pipeline;

    fn run(
        pipeline: Arc<Pipeline>,
        job: Job,
        payload: Self,
    ) -> impl Future<Output = Result<Outcome, JobError>> + Send {
        super::reembed::run(pipeline, job, payload)
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::queue::NewJob;

    #[test]
    fn pipeline_jobs_keep_their_kinds_payloads_and_keys() {
        let id = DocumentId(12);
        let extract = NewJob::of(&ExtractJob { document_id: id }, "upload").expect("extract");
        assert_eq!(
            (extract.kind.as_str(), &extract.payload),
            ("extract", &json!({ "document_id": 12 }))
        );
        assert_eq!(
            extract.idempotency_key.as_deref(),
            Some("extract:12:upload")
        );

        let ocr = NewJob::of(&OcrJob { document_id: id }, &JobId(5)).expect("ocr");
        assert_eq!(ocr.kind, "ocr");
        assert_eq!(ocr.payload, json!({ "document_id": 12 }));
        assert_eq!(ocr.idempotency_key.as_deref(), Some("ocr:12:5"));

        let embed = EmbedJob {
            document_id: id,
            model_version: "hash:v1:8:c200o30".into(),
        };
        let after_extract = NewJob::of(&embed, &EmbedCause::Extracted(JobId(5))).expect("embed");
        assert_eq!(after_extract.kind, "embed");
        assert_eq!(
            after_extract.payload,
            json!({ "document_id": 12, "model_version": "hash:v1:8:c200o30" })
        );
        assert_eq!(
            after_extract.idempotency_key.as_deref(),
            Some("embed:12:hash:v1:8:c200o30:5")
        );
        let nightly = EmbedCause::Reembed {
            chunks: "d1".into(),
            day: "2026-12-01".into(),
        };
        let reembed = NewJob::of(&embed, &nightly).expect("reembed");
        assert_eq!(
            reembed.idempotency_key.as_deref(),
            Some("reembed:hash:v1:8:c200o30:12:d1:2026-12-01")
        );

        let active = NewJob::of(&ReembedJob::default(), &()).expect("reembed");
        assert_eq!(
            (active.kind.as_str(), &active.payload),
            ("reembed", &json!({}))
        );
        assert_eq!(active.idempotency_key, None);
        let decoded: ReembedJob = serde_json::from_value(json!({})).expect("decodes");
        assert_eq!(decoded.model_version, None);
    }
}
