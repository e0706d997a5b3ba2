//! Bearer-token authentication for `/api`, required whenever a token is configured (and the
//! configuration requires one whenever docket listens beyond loopback).

use axum::extract::{Request, State};
use axum::middleware::Next;
use axum::response::Response;
use subtle::ConstantTimeEq;

use super::AppState;
use super::error::ApiError;

/// Lets the request through when no token is configured or when it carries the right one.
pub async fn require_token(
    State(state): State<AppState>,
    request: Request,
    next: Next,
) -> Result<Response, ApiError> {
    if let Some(expected) = state.api_token.as_deref()
        && !bearer_is(request.headers(), expected)
    {
        return Err(ApiError::unauthorized());
    }
    Ok(next.run(request).await)
}

/// Whether `headers` carry `Authorization: Bearer <expected>`.
pub fn bearer_is(headers: &axum::http::HeaderMap, expected: &str) -> bool {
    let given = headers
        .get(axum::http::header::AUTHORIZATION)
        .and_then(|value| value.to_str().ok())
        .and_then(|value| value.strip_prefix("Bearer "))
        .unwrap_or("");
    // Constant time, so the comparison leaks nothing about how much of a guess was right.
    bool::from(given.as_bytes().ct_eq(expected.as_bytes()))
}
