//! Request extractors that answer malformed input with our JSON error format (400 and a
//! message saying what was wrong) instead of axum's plain-text rejections.

use axum::extract::rejection::{JsonRejection, PathRejection};
use axum::extract::{FromRequest, FromRequestParts};
use axum::http::StatusCode;

use super::error::{ApiError, Code};

/// `axum::Json` with our errors.
#[derive(Debug, Clone, Copy, Default, FromRequest)]
#[from_request(via(axum::Json), rejection(ApiError))]
pub struct Json<T>(pub T);

/// `axum::extract::Path` with our errors.
#[derive(Debug, FromRequestParts)]
#[from_request(via(axum::extract::Path), rejection(ApiError))]
pub struct Path<T>(pub T);

/// A query string with our errors. Parsed by `serde_html_form`, so a repeated key
/// (`?collection=a&collection=b`) fills a `Vec` field.
#[derive(Debug)]
pub struct Query<T>(pub T);

impl<T: serde::de::DeserializeOwned, S: Send + Sync> FromRequestParts<S> for Query<T> {
    type Rejection = ApiError;

    async fn from_request_parts(
        parts: &mut axum::http::request::Parts,
        _: &S,
    ) -> Result<Self, ApiError> {
        let query = parts.uri.query().unwrap_or_default();
        serde_html_form::from_str(query).map(Query).map_err(|err| {
            ApiError::new(
                Code::InvalidQuery,
                format!("Failed to deserialize query string: {err}"),
            )
        })
    }
}

impl<T: serde::Serialize> axum::response::IntoResponse for Json<T> {
    fn into_response(self) -> axum::response::Response {
        axum::Json(self.0).into_response()
    }
}

impl From<JsonRejection> for ApiError {
    fn from(rejection: JsonRejection) -> Self {
        if rejection.status() == StatusCode::PAYLOAD_TOO_LARGE {
            return ApiError::new(Code::BodyTooLarge, rejection.body_text());
        }
        ApiError::new(Code::InvalidJson, rejection.body_text())
    }
}

impl From<PathRejection> for ApiError {
    fn from(rejection: PathRejection) -> Self {
        ApiError::new(Code::InvalidPath, rejection.body_text())
    }
}

/// The `limit` of a list request: 50 when absent, 1 to 500 otherwise.
pub fn page_limit(limit: Option<i64>) -> Result<i64, ApiError> {
    let limit = limit.unwrap_or(50);
    if (1..=500).contains(&limit) {
        Ok(limit)
    } else {
        Err(ApiError::new(
            Code::InvalidLimit,
            "limit must be between 1 and 500",
        ))
    }
}

/// The cursor of the next page (keyset pagination by descending id): the last id of a full
/// page, none after a short one.
pub fn next_cursor(
    ids: impl DoubleEndedIterator<Item = i64> + ExactSizeIterator,
    limit: i64,
) -> Option<i64> {
    let full = ids.len() as i64 == limit;
    ids.last().filter(|_| full)
}
