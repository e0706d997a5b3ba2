//! `GET /api/events`: server-sent events of document and job changes.
//!
//! PostgreSQL triggers (migration `…000003_search.sql`) `NOTIFY docket_events` with a small JSON
//! object whenever a document is created, changes status or is deleted, and whenever a pipeline
//! job is enqueued or changes status. Each server process holds ONE `LISTEN` connection
//! ([`EventHub`]) and fans the messages out to every browser through a tokio broadcast channel,
//! so a hundred open pages cost one database connection, not a hundred.
//!
//! Events are hints, never the source of truth: a client refetches what it shows. When the
//! listening connection drops (messages may have been lost) or a slow client falls behind the
//! channel, a `resync` event tells clients to refetch everything. Keep-alive comments keep proxies
//! from closing an idle stream; EventSource reconnects by itself and the page refetches then.
//!
//! EventSource cannot send an `Authorization` header, so this route also accepts the token as
//! the `access_token` query parameter; that is why it is routed beside `/api`, not inside it.
//! Each stream forwards only what its caller may read: document changes of the collections in
//! its reach (the trigger names the collection), job changes to admins only.

use std::convert::Infallible;
use std::time::Duration;

use axum::extract::{Query, State};
use axum::http::HeaderMap;
use axum::response::sse::{Event, KeepAlive, Sse};
use futures::Stream;
use tokio::sync::broadcast;
use tokio_util::sync::CancellationToken;

use super::AppState;
use super::error::ApiError;
use crate::collections::{CollectionId, Reach};
use crate::listen::Listened;

/// The NOTIFY channel the triggers send on.
pub const EVENTS_CHANNEL: &str = "docket_events";
/// Messages buffered per client before it is told to resync.
const BUFFER: usize = 1024;
/// How often an idle stream carries a comment, so proxies keep it open.
const KEEP_ALIVE: Duration = Duration::from_secs(15);

/// A message for clients.
#[derive(Debug, Clone)]
pub enum Change {
    /// A notification's JSON payload, as the trigger wrote it.
    Notified(String),
    /// Messages may have been lost: refetch everything.
    Resync,
}

/// One process's fan-out of database notifications. Cheap to clone.
#[derive(Debug, Clone)]
pub struct EventHub {
    sender: broadcast::Sender<Change>,
    /// Ends every open stream at shutdown: graceful shutdown waits for open connections, and
    /// an event stream would otherwise never close.
    stop: CancellationToken,
    /// True while the LISTEN connection is up.
    listening: tokio::sync::watch::Receiver<bool>,
}

impl EventHub {
    /// Starts listening on `pool`'s server until `stop`; reconnects with backoff.
    pub fn start(pool: sqlx::PgPool, stop: CancellationToken) -> Self {
        let (sender, _) = broadcast::channel(BUFFER);
        let (up, listening) = tokio::sync::watch::channel(false);
        tokio::spawn(listen(pool, sender.clone(), up, stop.clone()));
        Self {
            sender,
            stop,
            listening,
        }
    }

    /// Resolves once the LISTEN connection is up (at once if it is): changes committed after
    /// this reach subscribers. For tests and readiness checks.
    pub async fn listening(&self) {
        let mut listening = self.listening.clone();
        // An error means the listener stopped (shutdown): nothing more to wait for.
        let _ = listening.wait_for(|up| *up).await;
    }

    /// A receiver of every change from now on.
    pub fn subscribe(&self) -> broadcast::Receiver<Change> {
        self.sender.subscribe()
    }
}

async fn listen(
    pool: sqlx::PgPool,
    sender: broadcast::Sender<Change>,
    up: tokio::sync::watch::Sender<bool>,
    stop: CancellationToken,
) {
    crate::listen::listen(pool, EVENTS_CHANNEL, stop, |event| match event {
        Listened::Connected => {
            up.send_replace(true);
            // Whatever happened while we were not listening is unknown to clients.
            let _ = sender.send(Change::Resync);
        }
        // No receivers is not an error: nobody has the page open.
        Listened::Notified(payload) => {
            let _ = sender.send(Change::Notified(payload.to_owned()));
        }
        Listened::Lost => {
            up.send_replace(false);
        }
    })
    .await;
}

/// Query of `GET /api/events`.
#[derive(utoipa::IntoParams, Debug, serde::Deserialize)]
#[into_params(parameter_in = Query)]
pub struct EventsQuery {
    access_token: Option<String>,
}

/// `GET /api/events`: `hello` first, then `change` (JSON data) and `resync` events.
#[utoipa::path(
    get,
    path = "/api/events",
    operation_id = "stream_events",
    tag = "events",
    params(EventsQuery),
    responses((status = 200, description = "Server-sent events: `hello` first, then `change` (JSON data) and `resync`", content_type = "text/event-stream", body = String)),
    security(("bearer" = []), ("access_token" = []))
)]
pub async fn stream(
    State(state): State<AppState>,
    headers: HeaderMap,
    query: Result<Query<EventsQuery>, axum::extract::rejection::QueryRejection>,
) -> Result<Sse<impl Stream<Item = Result<Event, Infallible>>>, ApiError> {
    let from_query = query.as_ref().ok().and_then(|q| q.0.access_token.clone());
    let given = super::auth::bearer(&headers)
        .map(str::to_owned)
        .or(from_query);
    let access = super::auth::resolve(&state, given.as_deref()).await?;
    let reach = access.reach(&state.pool, &[]).await?;
    let admin = access.is_admin();
    let receiver = state.events.subscribe();
    let hello = futures::stream::once(async { Ok(Event::default().event("hello").data("{}")) });
    let changes = futures::stream::unfold(
        (receiver, reach, admin),
        |(mut receiver, reach, admin)| async move {
            let event = loop {
                match receiver.recv().await {
                    Ok(Change::Notified(json)) if visible(&json, admin, &reach) => {
                        break Event::default().event("change").data(json);
                    }
                    Ok(Change::Notified(_)) => continue,
                    Ok(Change::Resync) | Err(broadcast::error::RecvError::Lagged(_)) => {
                        break Event::default().event("resync").data("{}");
                    }
                    Err(broadcast::error::RecvError::Closed) => return None,
                }
            };
            Some((Ok(event), (receiver, reach, admin)))
        },
    );
    let stream = futures::StreamExt::take_until(
        futures::StreamExt::chain(hello, changes),
        state.events.stop.clone().cancelled_owned(),
    );
    Ok(Sse::new(stream).keep_alive(KeepAlive::new().interval(KEEP_ALIVE).text("keep-alive")))
}

/// Whether a caller with `reach` (an admin when `admin`) may see the change `json`: a document's
/// when its collection is within reach, a job's only for an admin (jobs are an admin's view).
/// A payload that does not parse is nobody's.
fn visible(json: &str, admin: bool, reach: &Reach) -> bool {
    #[derive(serde::Deserialize)]
    struct Notified {
        #[serde(rename = "type")]
        kind: String,
        collection: Option<i64>,
    }
    match serde_json::from_str::<Notified>(json) {
        Ok(n) if n.kind == "document" => n
            .collection
            .is_some_and(|c| reach.contains(CollectionId(c))),
        Ok(_) => admin,
        Err(_) => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_reader_sees_its_collections_documents_and_no_jobs() {
        let reach = Reach::only([CollectionId(2)]);
        let doc = |c: i64| {
            format!(
                r#"{{"type":"document","op":"update","id":5,"status":"ready","collection":{c}}}"#
            )
        };
        assert!(visible(&doc(2), false, &reach));
        assert!(!visible(&doc(3), false, &reach));
        let job = r#"{"type":"job","id":1,"kind":"extract","status":"ready","document_id":5}"#;
        assert!(!visible(job, false, &reach));
        assert!(visible(job, true, &Reach::everything()));
        assert!(!visible("not json", true, &Reach::everything()));
    }
}
