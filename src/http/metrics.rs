//! `/metrics`: this process's counters and the database's gauges in the Prometheus text format.
//!
//! Outside `/api`, so a scraper can be given its own token (`DOCKET_METRICS_TOKEN`) instead of
//! the API's. Open on loopback while no token exists; off loopback it requires that token, or
//! an admin's (the API token among them); once tokens exist, loopback needs one of those too. The gauges come from a cache read at most once every few seconds
//! ([`crate::metrics::GaugeCache`]), so scrapes, however many and however often, never queue
//! whole-table aggregates on the pool the API and workers share.

use axum::extract::State;
use axum::http::{HeaderMap, header};
use axum::response::IntoResponse;

use super::AppState;
use super::auth::{bearer, bearer_is, resolve};
use super::error::ApiError;

/// `GET /metrics`.
pub async fn metrics(
    State(state): State<AppState>,
    headers: HeaderMap,
) -> Result<impl IntoResponse, ApiError> {
    let scraper = state.guard.metrics_token.as_deref();
    if !scraper.is_some_and(|t| bearer_is(&headers, t)) {
        // Otherwise an admin's token, or nobody's while the single-user mode lasts (and no
        // scraper token is required).
        let given = bearer(&headers);
        if scraper.is_some() && given.is_none() {
            return Err(ApiError::unauthorized());
        }
        if !resolve(&state, given).await?.is_admin() {
            return Err(ApiError::forbidden("read metrics: it needs an admin token"));
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
