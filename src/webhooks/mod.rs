//! Webhooks: other systems learn that documents are done without polling.
//!
//! An endpoint subscribes to events ([`Event`]); each event becomes one delivery per subscribed
//! endpoint, enqueued **in the transaction of the state change that causes it** (a document
//! becomes ready and its `document.ready` deliveries commit together, or neither does): the
//! pipeline and the delete call [`document_changed`] and [`document_deleted`] with the row the
//! transition returned, an upload request calls [`upload_closed`] once it stored its files.
//! Each delivery is a `webhook.deliver` job ([`deliver`]), so a slow or dead endpoint never
//! holds up the pipeline; delivery is at least once, and order is not guaranteed.
//!
//! A payload is `{"type", "timestamp", "data"}` with the document as the API shows it
//! (`upload.settled`: `{"upload_id", "documents": [...]}`), signed as Standard Webhooks has
//! it ([`sign`]); targets are checked against server-side request forgery ([`target`]).
//! [`store`] is the one writer of `webhook_endpoints` and `webhook_deliveries`.

pub mod deliver;
pub mod sign;
pub mod store;
pub mod target;

pub use deliver::{DeliverJob, Deliverer};
pub use target::{Lookup, TargetError, Targets};

use serde::Serialize;
use sqlx::PgConnection;
use uuid::Uuid;

use crate::collections::CollectionId;
use crate::documents::{Document, DocumentStatus, UploadId, uploads};
use crate::queue::{self, NewJob, QueueError};
use crate::worker::Declare;

/// What an endpoint can subscribe to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum Event {
    /// A document became ready (searchable).
    #[serde(rename = "document.ready")]
    DocumentReady,
    /// A document failed for good; its `error` says why.
    #[serde(rename = "document.failed")]
    DocumentFailed,
    /// A document was deleted.
    #[serde(rename = "document.deleted")]
    DocumentDeleted,
    /// Every document one upload request created became ready or failed.
    #[serde(rename = "upload.settled")]
    UploadSettled,
}

impl Event {
    /// Every event, in the order the page lists them.
    pub const ALL: [Event; 4] = [
        Event::DocumentReady,
        Event::DocumentFailed,
        Event::DocumentDeleted,
        Event::UploadSettled,
    ];

    /// The event's name, as subscribed to and sent in `type`.
    pub fn as_str(self) -> &'static str {
        match self {
            Event::DocumentReady => "document.ready",
            Event::DocumentFailed => "document.failed",
            Event::DocumentDeleted => "document.deleted",
            Event::UploadSettled => "upload.settled",
        }
    }

    /// The event named `name`.
    pub fn parse(name: &str) -> Option<Event> {
        Event::ALL.into_iter().find(|event| event.as_str() == name)
    }
}

/// The webhook job kinds, listed once (the pipeline's declaration lists this too).
pub fn declare(kinds: &mut impl Declare<Deliverer>) {
    kinds.kind::<DeliverJob>();
}

/// A document's transition returned `document` as it now is (on the transition's
/// transaction): a ready or failed document is announced, and its upload settles if it was
/// the last of its request.
pub async fn document_changed(
    conn: &mut PgConnection,
    document: &Document,
) -> Result<(), sqlx::Error> {
    let event = match document.status {
        DocumentStatus::Ready => Event::DocumentReady,
        DocumentStatus::Failed => Event::DocumentFailed,
        _ => return Ok(()),
    };
    announce(
        conn,
        event,
        document.collection_id,
        serde_json::json!(document),
    )
    .await?;
    if let Some(upload) = document.upload_id {
        settle_upload(conn, upload).await?;
    }
    Ok(())
}

/// `document` was deleted (on the delete's transaction); its upload may settle without it.
pub async fn document_deleted(
    conn: &mut PgConnection,
    document: &Document,
) -> Result<(), sqlx::Error> {
    announce(
        conn,
        Event::DocumentDeleted,
        document.collection_id,
        serde_json::json!(document),
    )
    .await?;
    if let Some(upload) = document.upload_id {
        settle_upload(conn, upload).await?;
    }
    Ok(())
}

/// Upload request `upload` stored all its files (on the caller's transaction); it settles now
/// if its documents already did.
pub async fn upload_closed(conn: &mut PgConnection, upload: UploadId) -> Result<(), sqlx::Error> {
    uploads::close(conn, upload).await?;
    settle_upload(conn, upload).await
}

async fn settle_upload(conn: &mut PgConnection, upload: UploadId) -> Result<(), sqlx::Error> {
    if let Some(documents) = uploads::settle(conn, upload).await? {
        // One request uploads into one collection; `settle` answers only non-empty uploads.
        let Some(collection) = documents.first().map(|d| d.collection_id) else {
            return Ok(());
        };
        let data = serde_json::json!({ "upload_id": upload, "documents": documents });
        announce(conn, Event::UploadSettled, collection, data).await?;
    }
    Ok(())
}

/// One delivery of `event` with `data` to every endpoint subscribed to it for `collection` (or
/// for every collection), each with its job.
async fn announce(
    conn: &mut PgConnection,
    event: Event,
    collection: CollectionId,
    data: serde_json::Value,
) -> Result<(), sqlx::Error> {
    let subscribers = store::subscribers(conn, event.as_str(), collection).await?;
    if subscribers.is_empty() {
        return Ok(());
    }
    let payload = serde_json::json!({
        "type": event,
        "timestamp": chrono::Utc::now(),
        "data": data,
    });
    for endpoint in subscribers {
        let id = Uuid::new_v4();
        let job = enqueue(conn, id).await?;
        store::insert_delivery(conn, id, endpoint.id, event.as_str(), &payload, job).await?;
    }
    Ok(())
}

/// Enqueues the job that delivers `delivery` (on the caller's transaction); its job id.
pub(crate) async fn enqueue(conn: &mut PgConnection, delivery: Uuid) -> Result<i64, sqlx::Error> {
    let job = NewJob::of(
        &DeliverJob {
            delivery_id: delivery,
        },
        &(),
    )
    .map_err(database)?;
    let enqueued = queue::enqueue(conn, &job).await.map_err(database)?;
    Ok(enqueued.id.0)
}

/// A queue error on a path whose callers speak `sqlx::Error`: a delivery job is always valid,
/// so anything but the database's own error is a bug, reported as such.
fn database(err: QueueError) -> sqlx::Error {
    match err {
        QueueError::Database(err) => err,
        other => sqlx::Error::Protocol(format!("enqueueing a webhook delivery: {other}")),
    }
}

/// Retries a dead delivery `delivery` of `endpoint` with a new job. `Ok(None)` when there is no
/// such delivery, `Ok(Some(false))` when it is not dead.
pub async fn retry(
    pool: &sqlx::PgPool,
    endpoint: i64,
    delivery: Uuid,
) -> Result<Option<bool>, sqlx::Error> {
    let mut tx = pool.begin().await?;
    let Some(found) = store::lock_delivery(&mut tx, endpoint, delivery).await? else {
        return Ok(None);
    };
    if found.status != "dead" {
        return Ok(Some(false));
    }
    let job = enqueue(&mut tx, delivery).await?;
    store::restart(&mut tx, delivery, job).await?;
    tx.commit().await?;
    Ok(Some(true))
}
