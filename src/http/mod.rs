//! The HTTP surface: the JSON API under `/api`, health probes, and the static page.
//!
//! [`router`] builds everything from an [`AppState`], so tests call it on a listener bound to
//! port 0; [`serve`] runs it until a shutdown future resolves. Every `/api` request first
//! becomes a caller ([`auth`]: its role and collections); health and the page stay open. Every route, whatever its
//! token, first passes the [`guard`]: a foreign `Host` or a state-changing request from another
//! web origin is refused, so a page the operator happens to visit cannot drive docket.
//! Every `/api` route is declared with its OpenAPI operation ([`openapi`]), so the router and
//! `GET /api/openapi.json` are built from the same list.

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
pub mod openapi;
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
use axum::routing::get;
use tower_http::trace::TraceLayer;
use utoipa::OpenApi;
use utoipa_axum::router::{OpenApiRouter, UtoipaMethodRouterExt};
use utoipa_axum::routes;

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
    let api = api_routes()
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
    let (api, _) = with_public_routes(api).split_for_parts();
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
        .merge(api)
        .layer(axum::middleware::from_fn_with_state(
            state.clone(),
            guard::check,
        ))
        .layer(TraceLayer::new_for_http().make_span_with(request_span))
        .with_state(state)
}

/// Every route under `/api` that a caller's token opens, each declared once with its OpenAPI
/// operation (`#[utoipa::path]` on the handler): `routes!` gives the router and the document
/// the same declaration, so neither can have a route the other lacks. Paths are relative to
/// `/api`; [`router`] adds the bearer check, limits and fallback.
fn api_routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(jobs::list, jobs::enqueue))
        .routes(routes!(jobs::get))
        .routes(routes!(jobs::retry))
        .routes(routes!(jobs::cancel))
        .routes(routes!(jobs::stats))
        // Uploads stream with a per-file limit of their own (DOCKET_MAX_UPLOAD_BYTES).
        .routes(routes!(documents::list, upload::upload).layer(DefaultBodyLimit::disable()))
        .routes(routes!(documents::get, documents::delete))
        .routes(routes!(documents::file))
        .routes(routes!(reader::text))
        .routes(routes!(documents::reprocess))
        .routes(routes!(schedules::list, schedules::create))
        .routes(routes!(
            schedules::get,
            schedules::update,
            schedules::delete
        ))
        .routes(routes!(schedules::run_now))
        .routes(routes!(models::list, models::add))
        .routes(routes!(models::activate))
        .routes(routes!(collections::list, collections::create))
        .routes(routes!(collections::delete))
        .routes(routes!(search::search))
        .routes(routes!(search::info))
        .routes(routes!(webhooks::list, webhooks::create))
        .routes(routes!(webhooks::delete))
        .routes(routes!(webhooks::deliveries))
        .routes(routes!(webhooks::retry))
}

/// `api` nested under `/api`, beside the `/api` routes that check no token first: the event
/// stream (EventSource cannot send the bearer header, so it checks the token itself and also
/// takes it as a query parameter) and the OpenAPI document.
fn with_public_routes(api: OpenApiRouter<AppState>) -> OpenApiRouter<AppState> {
    OpenApiRouter::with_openapi(openapi::ApiDoc::openapi())
        .routes(routes!(events::stream))
        .routes(routes!(openapi::document))
        .nest("/api", api)
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
