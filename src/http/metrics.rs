//! `/metrics`: this process's counters and the database's gauges in the Prometheus text format.
//! Outside `/api`, like the health probes, so a scraper needs no token.

use axum::extract::State;
use axum::http::header;
use axum::response::IntoResponse;

use super::AppState;
use super::error::ApiError;

/// `GET /metrics`.
pub async fn metrics(State(state): State<AppState>) -> Result<impl IntoResponse, ApiError> {
    let snapshot = crate::metrics::collect_state(&state.pool)
        .await
        .map_err(super::error::database)?;
    let body = crate::metrics::render(crate::metrics::global(), &snapshot);
    Ok((
        [(
            header::CONTENT_TYPE,
            "text/plain; version=0.0.4; charset=utf-8",
        )],
        body,
    ))
}
