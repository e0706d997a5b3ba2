//! The HTTP surface: the JSON API under `/api`, health probes, and the static page.
//!
//! [`router`] builds everything from an [`AppState`], so tests call it on a listener bound to
//! port 0; [`serve`] runs it until a shutdown future resolves. Every `/api` request first
//! becomes a caller ([`auth`]: its role and collections); health and the page stay open. Every route, whatever its
//! token, first passes the [`guard`]: a foreign `Host` or a state-changing request from another
//! web origin is refused, so a page the operator happens to visit cannot drive docket.

mod auth;
mod collections;
mod documents;
pub mod error;
pub mod events;
pub mod guard;
mod health;
pub mod input;
mod jobs;
mod metrics;
mod models;
mod page;
mod reader;
pub mod schedules;
mod search;
mod state;
mod upload;
mod webhooks;

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::extract::DefaultBodyLimit;
use axum::routing::{get, post};
use tower_http::trace::TraceLayer;

pub use events::EventHub;
pub use state::{AppState, AppStateBuilder};
pub use upload::MIN_REQUEST_BYTES;

/// The checks and bounds every request runs under, beside the bearer token.
#[derive(Debug, Clone)]
pub struct Guard {
    /// The names and origin docket is served under ([`guard`]).
    pub hosts: guard::HostPolicy,
    /// How long one `/api` request may take, reading an upload's body included (408 after).
    /// The event stream is long-lived by design and exempt.
    pub request_timeout: Duration,
    /// Uploads read and stored at once; more wait their turn. With the per-request byte limit
    /// this bounds the memory all uploads take together.
    pub upload_slots: Arc<tokio::sync::Semaphore>,
    /// The bearer token `/metrics` requires, when it requires one (the API token is accepted
    /// too).
    pub metrics_token: Option<Arc<str>>,
    /// The database gauges of `/metrics`, read at most once per interval.
    pub gauges: Arc<crate::metrics::GaugeCache>,
}

impl Guard {
    /// `hosts`, `request_timeout` and `uploads` at once; `/metrics` open, its gauges cached for
    /// [`crate::metrics::GAUGE_TTL`].
    pub fn new(hosts: guard::HostPolicy, request_timeout: Duration, uploads: usize) -> Self {
        Self {
            hosts,
            request_timeout,
            upload_slots: Arc::new(tokio::sync::Semaphore::new(uploads.max(1))),
            metrics_token: None,
            gauges: Arc::new(crate::metrics::GaugeCache::new(crate::metrics::GAUGE_TTL)),
        }
    }
}

impl Default for Guard {
    fn default() -> Self {
        Self::new(guard::HostPolicy::default(), Duration::from_secs(300), 4)
    }
}

/// JSON bodies (not uploads) are small: job payloads are references.
const JSON_BODY_LIMIT: usize = 256 * 1024;

/// The whole application's routes.
pub fn router(state: AppState) -> Router {
    let api = Router::new()
        .route("/jobs", get(jobs::list).post(jobs::enqueue))
        .route("/jobs/{id}", get(jobs::get))
        .route("/jobs/{id}/retry", post(jobs::retry))
        .route("/jobs/{id}/cancel", post(jobs::cancel))
        .route("/queue/stats", get(jobs::stats))
        .route(
            "/documents",
            get(documents::list)
                .post(upload::upload)
                // Uploads stream with a per-file limit of their own (DOCKET_MAX_UPLOAD_BYTES).
                .layer(DefaultBodyLimit::disable()),
        )
        .route(
            "/documents/{id}",
            get(documents::get).delete(documents::delete),
        )
        .route("/documents/{id}/file", get(documents::file))
        .route("/documents/{id}/text", get(reader::text))
        .route("/documents/{id}/reprocess", post(documents::reprocess))
        .route("/schedules", get(schedules::list).post(schedules::create))
        .route(
            "/schedules/{name}",
            get(schedules::get)
                .patch(schedules::update)
                .delete(schedules::delete),
        )
        .route("/schedules/{name}/run-now", post(schedules::run_now))
        .route("/models", get(models::list).post(models::add))
        .route("/models/{version}/activate", post(models::activate))
        .route(
            "/collections",
            get(collections::list).post(collections::create),
        )
        .route(
            "/collections/{name}",
            axum::routing::delete(collections::delete),
        )
        .route("/search", get(search::search))
        .route("/info", get(search::info))
        .route("/webhooks", get(webhooks::list).post(webhooks::create))
        .route("/webhooks/{id}", axum::routing::delete(webhooks::delete))
        .route("/webhooks/{id}/deliveries", get(webhooks::deliveries))
        .route(
            "/webhooks/{id}/deliveries/{delivery}/retry",
            post(webhooks::retry),
        )
        .fallback(api_not_found)
        .layer(axum::middleware::from_fn_with_state(
            state.clone(),
            guard::time_limit,
        ))
        .layer(DefaultBodyLimit::max(JSON_BODY_LIMIT))
        .route_layer(axum::middleware::from_fn_with_state(
            state.clone(),
            auth::identify,
        ));
    Router::new()
        .route("/", get(page::index))
        .route("/app.js", get(page::script))
        .route("/names.js", get(page::names_script))
        .route("/list.js", get(page::list_script))
        .route("/reader.js", get(page::reader_script))
        .route("/search.js", get(page::search_script))
        .route("/collections.js", get(page::collections_script))
        .route("/webhooks.js", get(page::webhooks_script))
        .route("/app.css", get(page::style))
        .route("/healthz", get(health::healthz))
        .route("/readyz", get(health::readyz))
        .route("/metrics", get(metrics::metrics))
        // Beside /api, not in it: EventSource cannot send the bearer header, so this route
        // checks the token itself and also takes it as a query parameter.
        .route("/api/events", get(events::stream))
        .nest("/api", api)
        .layer(axum::middleware::from_fn_with_state(
            state.clone(),
            guard::check,
        ))
        .layer(TraceLayer::new_for_http().make_span_with(request_span))
        .with_state(state)
}

/// The span of one request: its method and path, never its query string, which may carry a
/// token (`/api/events?access_token=…`, since EventSource cannot send headers).
fn request_span(request: &axum::http::Request<axum::body::Body>) -> tracing::Span {
    tracing::debug_span!(
        "request",
        method = %request.method(),
        path = %request.uri().path(),
    )
}

async fn api_not_found() -> error::ApiError {
    error::ApiError::new(error::Code::RouteNotFound, "no such API route")
}

/// Serves `router` on `listener` until `shutdown` resolves, then lets open requests finish.
pub async fn serve(
    listener: tokio::net::TcpListener,
    router: Router,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    axum::serve(listener, router)
        .with_graceful_shutdown(shutdown)
        .await
}
