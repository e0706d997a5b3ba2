//! Every job kind the pipeline declares, walked through every way its job can end without
//! succeeding, against a real PostgreSQL and the queue wired as a process wires it (the
//! registry's kinds as the queue's end hook): killed on its last attempt (a failure, a
//! permanent failure, the rescuer), cancelled by a person, and its document reprocessed or
//! deleted meanwhile. The document always settles (never left `extracting` or `embedding`), and
//! nothing of the old run is left waiting.

use std::sync::Arc;
use std::time::Duration;

use docket::documents::{
    self, DocumentId, Extraction, ExtractionMethod, ExtractionNote, NewDocument,
};
use docket::embed::{Embedder, HashEmbedder};
use docket::pipeline::{self, DOCUMENT_KEY};
use docket::queue::{JobStatus, Lease, NewJob, Queue, by_payload};
use docket::worker::Registry;
use serde_json::{Value, json};
use sqlx::PgPool;

use crate::support::pipeline as prepared_pipeline;

/// How a case ends its job.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Ending {
    LastAttemptFails,
    FailsForGood,
    LeaseExpiresOnLastAttempt,
    PersonCancels,
    DocumentReprocessed,
    DocumentDeleted,
}

const ENDINGS: [Ending; 6] = [
    Ending::LastAttemptFails,
    Ending::FailsForGood,
    Ending::LeaseExpiresOnLastAttempt,
    Ending::PersonCancels,
    Ending::DocumentReprocessed,
    Ending::DocumentDeleted,
];

/// The payload of a `kind` job for `document` and the step its document is in while it runs;
/// `None` for kinds that name no document. A new kind must say here what it works on.
fn job_for(kind: &str, document: DocumentId, version: &str) -> Option<(Value, documents::Step)> {
    match kind {
        "extract" | "ocr" => Some((json!({ "document_id": document }), documents::Step::Extract)),
        "embed" => Some((
            json!({ "document_id": document, "model_version": version }),
            documents::Step::Embed,
        )),
        // Works on no document: it enqueues, delivers a webhook, or deletes a whole collection
        // (its documents go through the same delete as one, tested in collections.rs).
        "reembed" | "webhook.deliver" | "delete_collection" => None,
        other => panic!("the pipeline declares a kind this test does not know: {other}"),
    }
}

/// A document whose only job is a running `kind` job on its last attempt, in the step the job
/// works on (with OCR progress shown for an OCR job).
async fn running_job(
    pool: &PgPool,
    q: &Queue,
    kind: &str,
    ending: Ending,
    version: &str,
) -> Option<(DocumentId, Lease)> {
    let (_, step) = job_for(kind, DocumentId(0), version)?;
    let bytes = format!("a document whose {kind} job ends: {ending:?}").into_bytes();
    let upload = NewDocument {
        collection: docket::collections::DEFAULT,
        filename: "case.txt",
        content_type: "text/plain",
        bytes: &bytes,
        upload: None,
    };
    let stored = documents::create_with_first_job(pool, &upload, |id| {
        let (payload, _) = job_for(kind, id, version).expect("a document's job");
        Ok(NewJob::new(kind, payload).max_attempts(1))
    })
    .await
    .expect("store");
    let id = stored.document.id;
    match step {
        documents::Step::Extract => documents::mark_extracting(pool, id)
            .await
            .expect("extracting"),
        documents::Step::Embed => {
            let found = Extraction {
                extractor: "text",
                page_count: 1,
                note: None,
                ocr_pages: &[],
                described: &note(ExtractionMethod::Text),
            };
            assert!(
                documents::mark_embedding(pool, id, &found)
                    .await
                    .expect("embedding")
            );
        }
    }
    if kind == "ocr" {
        documents::start_ocr(pool, id, 3, &note(ExtractionMethod::OcrPending))
            .await
            .expect("progress");
    }
    let claimed = q.claim(kind, 1, "w").await.expect("claim");
    assert_eq!(claimed.len(), 1, "{kind}: the job is claimed");
    assert_eq!(
        claimed[0].payload["document_id"],
        json!(id),
        "{kind}: its own job"
    );
    Some((id, claimed[0].lease))
}

/// Ends the job as `ending` says.
async fn end(pool: &PgPool, q: &Queue, id: DocumentId, lease: &Lease, ending: Ending) {
    match ending {
        Ending::LastAttemptFails => {
            let status = q
                .retry(lease, "boom", Duration::ZERO, true)
                .await
                .expect("retry");
            assert_eq!(status, JobStatus::Dead);
        }
        Ending::FailsForGood => q.fail(lease, "corrupt").await.expect("fail"),
        Ending::LeaseExpiresOnLastAttempt => {
            let later = q.at(chrono::Utc::now() + q.lease() + Duration::from_secs(1));
            assert_eq!(later.rescue_expired(10).await.expect("rescue").dead, 1);
        }
        Ending::PersonCancels => {
            q.cancel(lease.job_id).await.expect("cancel");
        }
        Ending::DocumentReprocessed => {
            assert!(pipeline::reprocess(pool, id).await.expect("reprocess"));
        }
        Ending::DocumentDeleted => {
            assert!(pipeline::delete_document(pool, id).await.expect("delete"));
        }
    }
}

/// The document's status, error code and progress, or `None` when it is gone.
async fn document(
    pool: &PgPool,
    id: DocumentId,
) -> Option<(String, Option<String>, Option<Value>)> {
    sqlx::query_as("select status, error ->> 'code', progress from documents where id = $1")
        .bind(id.0)
        .fetch_optional(pool)
        .await
        .expect("document")
}

#[sqlx::test(migrator = "docket::db::MIGRATOR")]
async fn every_kind_s_end_settles_its_document_and_leaves_nothing_of_the_old_run(pool: PgPool) {
    let hash = prepared_pipeline(&pool, Embedder::Hash(HashEmbedder::new(64))).await;
    let version = hash.model.model_version.clone();
    let mut registry = Registry::new();
    hash.register(&mut registry);
    let q = Queue::new(pool.clone(), Duration::from_secs(30))
        .with_ends(Arc::new(registry.table().clone()));
    let kinds: Vec<String> = registry.table().names().map(str::to_owned).collect();
    assert_eq!(kinds, pipeline::kinds().names().collect::<Vec<_>>());

    for kind in &kinds {
        for ending in ENDINGS {
            let Some((id, lease)) = running_job(&pool, &q, kind, ending, &version).await else {
                assert!(
                    !registry
                        .table()
                        .owned_by(DOCUMENT_KEY)
                        .contains(&kind.as_str()),
                    "{kind} names no document, so no document cancels it"
                );
                break;
            };
            end(&pool, &q, id, &lease, ending).await;
            let case = format!("{kind}, {ending:?}");
            let job = q.get(lease.job_id).await.expect("the job");
            let pending: Vec<(String, JobStatus)> = by_payload::list(&pool, DOCUMENT_KEY, id.0)
                .await
                .expect("jobs")
                .into_iter()
                .filter(|job| matches!(job.status, JobStatus::Ready | JobStatus::Running))
                .map(|job| (job.kind, job.status))
                .collect();
            let settled = document(&pool, id).await;
            match ending {
                Ending::DocumentReprocessed | Ending::DocumentDeleted => {
                    assert_eq!(job.status, JobStatus::Cancelled, "{case}");
                }
                _ => assert_ne!(job.status, JobStatus::Running, "{case}"),
            }
            let expected = match ending {
                Ending::PersonCancels => Some(("failed", Some("cancelled"))),
                Ending::DocumentReprocessed => Some(("uploaded", None)),
                Ending::DocumentDeleted => None,
                _ => Some(("failed", Some("retries_exhausted"))),
            };
            assert_eq!(
                settled
                    .as_ref()
                    .map(|(status, code, _)| (status.as_str(), code.as_deref())),
                expected,
                "{case}"
            );
            if let Some((_, _, progress)) = &settled {
                assert_eq!(progress, &None, "{case}: no progress is left showing");
            }
            let survivors: Vec<(String, JobStatus)> = match ending {
                // Only the new run's extraction waits.
                Ending::DocumentReprocessed => vec![("extract".to_owned(), JobStatus::Ready)],
                _ => Vec::new(),
            };
            assert_eq!(
                pending, survivors,
                "{case}: nothing of the old run is pending"
            );
            // The next case claims its own job, not this one's new run.
            pipeline::delete_document(&pool, id)
                .await
                .expect("clean up");
        }
    }
}

/// A description of how a document's text was obtained, for a state the test sets by hand.
fn note(method: ExtractionMethod) -> ExtractionNote {
    ExtractionNote {
        method,
        pages: 3,
        ocr_wanted: 3,
        ocr_read: 0,
        summary: "set by the test".into(),
    }
}
