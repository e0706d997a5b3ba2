//! Who is calling: the one place a request's bearer token becomes an [`Access`].
//!
//! [`identify`] runs before every `/api` handler (and `/api/events`, `/metrics` call
//! [`resolve`] themselves) and leaves the caller's [`Access`] in the request; handlers take it
//! as [`Caller`], or as [`Admin`] where only an admin may act. The rules:
//!
//! - A bearer equal to `DOCKET_API_TOKEN` (compared in constant time) is an admin.
//! - Any other bearer is looked up among the tokens (by its hash, on every request, so a
//!   revocation holds at once on every process); unknown: 401.
//! - No bearer: 401 when `DOCKET_API_TOKEN` is set (always off loopback) or once any token
//!   exists; before that, on loopback, the single user is an admin.

use axum::extract::{FromRequestParts, Request, State};
use axum::http::HeaderMap;
use axum::http::request::Parts;
use axum::middleware::Next;
use axum::response::Response;
use subtle::ConstantTimeEq;

use super::AppState;
use super::error::ApiError;
use crate::access::{Access, tokens};

/// The caller of a request, as [`identify`] resolved it.
#[derive(Debug, Clone)]
pub struct Caller(pub Access);

/// The caller of a request only an admin may make; anyone else gets 403.
#[derive(Debug, Clone)]
pub struct Admin;

/// Resolves the caller's access and keeps it for the handler.
pub async fn identify(
    State(state): State<AppState>,
    mut request: Request,
    next: Next,
) -> Result<Response, ApiError> {
    let access = resolve(&state, bearer(request.headers())).await?;
    request.extensions_mut().insert(Caller(access));
    Ok(next.run(request).await)
}

/// The access of a request that presented `given` (its bearer, if any).
pub async fn resolve(state: &AppState, given: Option<&str>) -> Result<Access, ApiError> {
    let configured = state.api_token.as_deref();
    match given {
        Some(given) => {
            if configured.is_some_and(|t| bool::from(given.as_bytes().ct_eq(t.as_bytes()))) {
                return Ok(Access::admin());
            }
            tokens::identify(&state.pool, given)
                .await?
                .ok_or_else(ApiError::unauthorized)
        }
        None if configured.is_some() => Err(ApiError::unauthorized()),
        None if tokens::any(&state.pool).await? => Err(ApiError::unauthorized()),
        None => Ok(Access::admin()),
    }
}

/// The token of `Authorization: Bearer …`, if one is given.
pub fn bearer(headers: &HeaderMap) -> Option<&str> {
    headers
        .get(axum::http::header::AUTHORIZATION)
        .and_then(|value| value.to_str().ok())
        .and_then(|value| value.strip_prefix("Bearer "))
        .filter(|token| !token.is_empty())
}

/// Whether `headers` carry `Authorization: Bearer <expected>`, compared in constant time.
pub fn bearer_is(headers: &HeaderMap, expected: &str) -> bool {
    let given = bearer(headers).unwrap_or("");
    bool::from(given.as_bytes().ct_eq(expected.as_bytes()))
}

fn caller_of(parts: &Parts) -> Result<Access, ApiError> {
    // `identify` runs on every /api route; a handler outside it that asks for a caller is a
    // wiring bug, answered as unauthenticated rather than as an open door.
    parts
        .extensions
        .get::<Caller>()
        .map(|caller| caller.0.clone())
        .ok_or_else(ApiError::unauthorized)
}

impl<S: Send + Sync> FromRequestParts<S> for Caller {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, _: &S) -> Result<Self, ApiError> {
        caller_of(parts).map(Caller)
    }
}

impl<S: Send + Sync> FromRequestParts<S> for Admin {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, _: &S) -> Result<Self, ApiError> {
        if caller_of(parts)?.is_admin() {
            Ok(Admin)
        } else {
            Err(ApiError::forbidden("do this: it needs an admin token"))
        }
    }
}
