//! `/metrics`: this process's counters and the database's gauges in the Prometheus text format.
//!
//! Outside `/api`, so a scraper can be given its own token (`DOCKET_METRICS_TOKEN`) instead of
//! the API's. Open on loopback; off loopback it requires that token, or the API token when no
//! scraper token is set. The gauges come from a cache read at most once every few seconds
//! ([`crate::metrics::GaugeCache`]), so scrapes, however many and however often, never queue
//! whole-table aggregates on the pool the API and workers share.

use axum::extract::State;
use axum::http::{HeaderMap, header};
use axum::response::IntoResponse;

use super::AppState;
use super::auth::bearer_is;
use super::error::ApiError;

/// `GET /metrics`.
pub async fn metrics(
    State(state): State<AppState>,
    headers: HeaderMap,
) -> Result<impl IntoResponse, ApiError> {
    if let Some(expected) = state.guard.metrics_token.as_deref() {
        let api_token = state.api_token.as_deref();
        if !bearer_is(&headers, expected) && !api_token.is_some_and(|t| bearer_is(&headers, t)) {
            return Err(ApiError::unauthorized());
        }
    }
    let snapshot = state.guard.gauges.get(&state.pool).await?;
    let body = crate::metrics::render(crate::metrics::global(), &snapshot);
    Ok((
        [(
            header::CONTENT_TYPE,
            "text/plain; version=0.0.4; charset=utf-8",
        )],
        body,
    ))
}
