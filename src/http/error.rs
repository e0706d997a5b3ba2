//! One error type for every HTTP handler, rendered as `{"error":{"code","message"}}`.
//!
//! Codes are stable snake_case strings clients can match on. Server-side failures are logged
//! once with their cause chain and shown to the client only as "internal error".

use axum::Json;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde_json::json;

use crate::queue::QueueError;

/// An error answer.
#[derive(Debug, thiserror::Error)]
pub enum ApiError {
    /// 400: the request is malformed; the message says what was wrong.
    #[error("{message}")]
    BadRequest { code: &'static str, message: String },
    /// 401: missing or wrong bearer token.
    #[error("a valid bearer token is required")]
    Unauthorized,
    /// 403: refused whoever asks: a foreign `Host`, or a page of another origin.
    #[error("{message}")]
    Forbidden { code: &'static str, message: String },
    /// 404: no such thing.
    #[error("{message}")]
    NotFound { code: &'static str, message: String },
    /// 408: the request took longer than the request timeout.
    #[error("the request took longer than {0} seconds")]
    Timeout(u64),
    /// 409: the thing exists but is in a state that forbids this.
    #[error("{message}")]
    Conflict { code: &'static str, message: String },
    /// 413: the body or a part of it is over the limit.
    #[error("{message}")]
    TooLarge { code: &'static str, message: String },
    /// 415: a file type we do not take.
    #[error("{message}")]
    UnsupportedType { code: &'static str, message: String },
    /// 422: well-formed but not acceptable (an unknown job kind, say).
    #[error("{message}")]
    Unprocessable { code: &'static str, message: String },
    /// 503: a dependency (the database) is not available right now.
    #[error("{message}")]
    Unavailable { code: &'static str, message: String },
    /// 500: our fault; the cause is logged, never sent.
    #[error(transparent)]
    Internal(#[from] anyhow::Error),
}

impl ApiError {
    pub fn bad_request(code: &'static str, message: impl Into<String>) -> Self {
        ApiError::BadRequest {
            code,
            message: message.into(),
        }
    }

    pub(crate) fn parts(&self) -> (StatusCode, &'static str) {
        match self {
            ApiError::BadRequest { code, .. } => (StatusCode::BAD_REQUEST, code),
            ApiError::Unauthorized => (StatusCode::UNAUTHORIZED, "unauthorized"),
            ApiError::Forbidden { code, .. } => (StatusCode::FORBIDDEN, code),
            ApiError::Timeout(_) => (StatusCode::REQUEST_TIMEOUT, "request_timeout"),
            ApiError::NotFound { code, .. } => (StatusCode::NOT_FOUND, code),
            ApiError::Conflict { code, .. } => (StatusCode::CONFLICT, code),
            ApiError::TooLarge { code, .. } => (StatusCode::PAYLOAD_TOO_LARGE, code),
            ApiError::UnsupportedType { code, .. } => (StatusCode::UNSUPPORTED_MEDIA_TYPE, code),
            ApiError::Unprocessable { code, .. } => (StatusCode::UNPROCESSABLE_ENTITY, code),
            ApiError::Unavailable { code, .. } => (StatusCode::SERVICE_UNAVAILABLE, code),
            ApiError::Internal(_) => (StatusCode::INTERNAL_SERVER_ERROR, "internal_error"),
        }
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let (status, code) = self.parts();
        let message = match &self {
            ApiError::Internal(err) => {
                tracing::error!(error = format!("{err:#}"), "request failed");
                "internal error".to_owned()
            }
            other => other.to_string(),
        };
        let mut response = (
            status,
            Json(json!({ "error": { "code": code, "message": message } })),
        )
            .into_response();
        if status == StatusCode::UNAUTHORIZED
            && let Ok(value) = "Bearer".parse()
        {
            response
                .headers_mut()
                .insert(axum::http::header::WWW_AUTHENTICATE, value);
        }
        response
    }
}

impl From<QueueError> for ApiError {
    fn from(err: QueueError) -> Self {
        match err {
            QueueError::NotFound(id) => ApiError::NotFound {
                code: "job_not_found",
                message: format!("job {id} not found"),
            },
            err @ QueueError::WrongState { .. } => ApiError::Conflict {
                code: "job_state_conflict",
                message: err.to_string(),
            },
            err @ QueueError::LeaseLost(_) => ApiError::Conflict {
                code: "lease_lost",
                message: err.to_string(),
            },
            err @ QueueError::PayloadTooLarge { .. } => ApiError::TooLarge {
                code: "payload_too_large",
                message: err.to_string(),
            },
            QueueError::Invalid(message) => ApiError::bad_request("invalid_job", message),
            QueueError::Database(err) => database(err),
        }
    }
}

/// A database error: unavailable (503) when the pool cannot reach the server, else internal.
pub fn database(err: sqlx::Error) -> ApiError {
    match err {
        sqlx::Error::PoolTimedOut | sqlx::Error::Io(_) | sqlx::Error::PoolClosed => {
            ApiError::Unavailable {
                code: "database_unavailable",
                message: "the database is not reachable right now; try again shortly".into(),
            }
        }
        other => ApiError::Internal(other.into()),
    }
}
