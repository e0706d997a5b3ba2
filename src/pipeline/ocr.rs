//! The OCR step: the pages the extract step found without a usable text layer (every page of
//! an image) are read by tesseract, then the document is chunked and checkpointed exactly as
//! the extract step does ([`super::extract::finish`]).
//!
//! The text layer is extracted again rather than carried over: it takes a fraction of the
//! OCR's time, and it keeps payloads to references (docs/ARCHITECTURE.md §4). After every page the
//! document's `progress` (`{"step":"ocr","done":3,"total":10}`) is written, outside any
//! transaction and only ever forward, so the page can show how far a long scan got; the
//! checkpoint clears it.

use std::sync::Arc;

use super::Pipeline;
use super::extract::{failed, finish};
use super::jobs::OcrJob;
use crate::documents::{self, DocumentId};
use crate::extract;
use crate::worker::{Job, JobError, Outcome, ResultExt};

pub(super) async fn run(
    pipeline: Arc<Pipeline>,
    job: Job,
    OcrJob { document_id }: OcrJob,
) -> Result<Outcome, JobError> {
    let started = std::time::Instant::now();
    let outcome = recognise(pipeline, job, document_id).await;
    crate::metrics::global().step_time("ocr", started.elapsed());
    outcome
}

async fn recognise(
    pipeline: Arc<Pipeline>,
    job: Job,
    document_id: DocumentId,
) -> Result<Outcome, JobError> {
    let pool = &pipeline.pool;
    let Some(document) = documents::get(pool, document_id).await.retryable()? else {
        return Ok(Outcome::Complete);
    };
    let Some(bytes) = documents::bytes(pool, document_id).await.retryable()? else {
        return Ok(Outcome::Complete);
    };
    let limits = &pipeline.extraction;
    let extracted = match extract::sniff(&bytes, &document.filename) {
        Ok(sniffed) => extract::extract_text_layer(&bytes, &sniffed, limits).await,
        Err(err) => Err(err),
    };
    let extracted = match extracted {
        Ok(extracted) => {
            let (sender, receiver) = tokio::sync::watch::channel((0usize, 0usize));
            let writer = tokio::spawn(write_progress(pool.clone(), document_id, receiver));
            let progress = move |done: usize, total: usize| {
                let _ = sender.send((done, total));
            };
            let read = extract::read_unreadable(&bytes, extracted, limits, &progress).await;
            // Dropping the sender ends the writer once it has written the last value, so no
            // late progress lands after the checkpoint below.
            drop(progress);
            if let Err(join) = writer.await {
                tracing::debug!(document = %document_id, error = %join, "progress writer failed");
            }
            read
        }
        Err(err) => Err(err),
    };
    let extracted = match extracted {
        Ok(extracted) => extracted,
        Err(err) => return Err(failed(&pipeline, &job, document_id, &err).await),
    };
    drop(bytes);
    finish(&pipeline, &job, document_id, extracted).await
}

/// Writes each new progress value to the document until the sender is dropped. Progress is
/// advisory: a failed write is logged and the next page tries again.
async fn write_progress(
    pool: sqlx::PgPool,
    id: DocumentId,
    mut receiver: tokio::sync::watch::Receiver<(usize, usize)>,
) {
    while receiver.changed().await.is_ok() {
        let (done, total) = *receiver.borrow_and_update();
        let written = documents::record_ocr_progress(
            &pool,
            id,
            i32::try_from(done).unwrap_or(i32::MAX),
            i32::try_from(total).unwrap_or(i32::MAX),
        )
        .await;
        if let Err(err) = written {
            tracing::debug!(document = %id, error = %err, "could not record OCR progress");
        }
    }
}
