//! One error type for every HTTP handler, rendered as `{"error":{"code","message"}}`.
//!
//! An [`ApiError`] is a [`Code`] (the table in [`code`]: status and stable string) and a
//! message for the person reading it. Domain errors become one through `From`, here and nowhere
//! else, so `?` in a handler is all a handler writes. Server-side failures (5xx) are logged once
//! with their cause chain and never shown: the client reads the code and a fixed message.

mod code;

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde::Serialize;

pub use code::Code;

use crate::collections::CollectionError;
use crate::extract::ExtractError;
use crate::models::ModelError;
use crate::queue::QueueError;
use crate::schedule::ScheduleError;
use crate::search::SearchError;

/// An error answer: a code, what to tell the client and, for 5xx, the cause to log.
#[derive(Debug)]
pub struct ApiError {
    code: Code,
    message: String,
    /// What went wrong inside docket; logged, never sent.
    cause: Option<anyhow::Error>,
}

/// An error as clients see it (`{"code", "message"}`): the body of an error answer, and an
/// upload's per-file error.
#[derive(utoipa::ToSchema, Debug, Serialize)]
pub struct ErrorBody {
    /// A stable snake_case code (`invalid_json`, `not_found`…): clients match on it.
    #[schema(value_type = String, example = "invalid_json")]
    pub code: Code,
    pub message: String,
}

/// The body of every error answer.
#[derive(utoipa::ToSchema, Debug, Serialize)]
pub struct ErrorAnswer {
    pub error: ErrorBody,
}

impl ApiError {
    /// An error with `code` that tells the client `message`.
    pub fn new(code: Code, message: impl Into<String>) -> Self {
        Self {
            code,
            message: message.into(),
            cause: None,
        }
    }

    /// Our fault: 500, `cause` logged, "internal error" shown.
    pub fn internal(cause: impl Into<anyhow::Error>) -> Self {
        Self {
            code: Code::Internal,
            message: "internal error".into(),
            cause: Some(cause.into()),
        }
    }

    /// 401: a missing or wrong bearer token.
    pub fn unauthorized() -> Self {
        ApiError::new(Code::Unauthorized, "a valid bearer token is required")
    }

    /// 403: the caller's role or reach does not allow this.
    pub fn forbidden(what: &str) -> Self {
        ApiError::new(Code::Forbidden, format!("this token may not {what}"))
    }

    pub fn code(&self) -> Code {
        self.code
    }

    pub fn status(&self) -> StatusCode {
        self.code.status()
    }

    /// Logs a server-side error with its cause chain: our own failures as errors, a dependency
    /// that is down (503) as a warning. Client errors are the client's to read.
    pub fn log(&self) {
        let status = self.status();
        if !status.is_server_error() {
            return;
        }
        let code = self.code.as_str();
        let cause = self.cause.as_ref().map(|cause| format!("{cause:#}"));
        let cause = cause.as_deref().unwrap_or(&self.message);
        if status == StatusCode::SERVICE_UNAVAILABLE {
            tracing::warn!(code, error = cause, "request failed");
        } else {
            tracing::error!(code, error = cause, "request failed");
        }
    }

    /// What the client reads.
    pub fn into_body(self) -> ErrorBody {
        ErrorBody {
            code: self.code,
            message: self.message,
        }
    }
}

impl std::fmt::Display for ApiError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        self.log();
        let status = self.status();
        let mut response = (
            status,
            axum::Json(ErrorAnswer {
                error: self.into_body(),
            }),
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

/// Unavailable (503) when the pool cannot reach the server, else internal.
impl From<sqlx::Error> for ApiError {
    fn from(err: sqlx::Error) -> Self {
        match err {
            sqlx::Error::PoolTimedOut | sqlx::Error::Io(_) | sqlx::Error::PoolClosed => Self {
                code: Code::DatabaseUnavailable,
                message: "the database is not reachable right now; try again shortly".into(),
                cause: Some(err.into()),
            },
            other => ApiError::internal(other),
        }
    }
}

impl From<QueueError> for ApiError {
    fn from(err: QueueError) -> Self {
        let code = match err {
            QueueError::Database(err) => return err.into(),
            QueueError::NotFound(_) => Code::JobNotFound,
            QueueError::WrongState { .. } => Code::JobStateConflict,
            QueueError::LeaseLost(_) => Code::LeaseLost,
            QueueError::PayloadTooLarge { .. } => Code::PayloadTooLarge,
            QueueError::Invalid(_) => Code::InvalidJob,
        };
        ApiError::new(code, err.to_string())
    }
}

impl From<ModelError> for ApiError {
    fn from(err: ModelError) -> Self {
        let code = match err {
            ModelError::Database(err) => return err.into(),
            ModelError::Invalid(_) => Code::InvalidModelVersion,
            ModelError::NotFound(_) => Code::ModelVersionNotFound,
        };
        ApiError::new(code, err.to_string())
    }
}

impl From<ScheduleError> for ApiError {
    fn from(err: ScheduleError) -> Self {
        let code = match err {
            ScheduleError::Queue(err) => return err.into(),
            ScheduleError::Database(err) => return err.into(),
            ScheduleError::NotFound(_) => Code::ScheduleNotFound,
            ScheduleError::Exists(_) => Code::ScheduleExists,
            ScheduleError::Invalid(_) => Code::InvalidSchedule,
            ScheduleError::PgCronUnavailable(_) => Code::PgCronUnavailable,
        };
        ApiError::new(code, err.to_string())
    }
}

impl From<CollectionError> for ApiError {
    fn from(err: CollectionError) -> Self {
        let code = match err {
            CollectionError::Database(err) => return err.into(),
            CollectionError::Queue(err) => return err.into(),
            CollectionError::NotFound(_) => Code::CollectionNotFound,
            CollectionError::InvalidName(_) => Code::InvalidCollection,
            CollectionError::Exists(_) => Code::CollectionExists,
            CollectionError::DefaultKept => Code::DefaultCollectionKept,
        };
        ApiError::new(code, err.to_string())
    }
}

impl From<SearchError> for ApiError {
    fn from(err: SearchError) -> Self {
        let code = match err {
            SearchError::Database(err) => return err.into(),
            // The provider's message is about the provider, not the request; it never holds a
            // key. A permanent failure is a misconfiguration: ours, not the client's.
            SearchError::Embed(err) if !err.is_permanent() => {
                return ApiError::new(
                    Code::EmbeddingUnavailable,
                    format!("the embedding provider is not answering right now: {err}"),
                );
            }
            SearchError::Embed(err) => return ApiError::internal(err),
            SearchError::EmptyQuery => Code::EmptyQuery,
            SearchError::QueryTooLong(_) => Code::QueryTooLong,
            SearchError::InvalidK(_) => Code::InvalidK,
            SearchError::InvalidMinRelevance(_) => Code::InvalidMinRelevance,
            SearchError::UnknownModel(_) => Code::ModelVersionNotFound,
            SearchError::NoActiveModel => Code::NoActiveModel,
            SearchError::ModelNotEmbeddable { .. } => Code::ModelVersionNotEmbeddable,
            SearchError::NoVectors(_) => Code::NoVectors,
        };
        ApiError::new(code, err.to_string())
    }
}

/// An upload's file refused as it is read (`extract::sniff`): 400 when empty, 415 with
/// extraction's own code for a type docket does not read.
impl From<ExtractError> for ApiError {
    fn from(err: ExtractError) -> Self {
        match err {
            ExtractError::Empty => ApiError::new(Code::EmptyFile, err.to_string()),
            ExtractError::Unsupported { .. } => ApiError::new(
                Code::UnsupportedFile(err.code()),
                format!("{err}; docket reads {}", crate::extract::formats::names()),
            ),
            other => ApiError::new(Code::UnsupportedFile(other.code()), other.to_string()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The status, the `WWW-Authenticate` header and the body `error` renders as.
    async fn rendered(error: ApiError) -> (StatusCode, Option<String>, String) {
        let response = error.into_response();
        let status = response.status();
        let challenge = response
            .headers()
            .get(axum::http::header::WWW_AUTHENTICATE)
            .map(|v| v.to_str().unwrap_or("not ascii").to_owned());
        let body = axum::body::to_bytes(response.into_body(), 4096)
            .await
            .expect("a small body");
        (
            status,
            challenge,
            String::from_utf8(body.to_vec()).expect("utf-8"),
        )
    }

    #[tokio::test]
    async fn an_error_renders_as_its_code_and_message() {
        let error = ApiError::from(QueueError::NotFound(crate::queue::JobId(7)));
        assert_eq!(
            rendered(error).await,
            (
                StatusCode::NOT_FOUND,
                None,
                r#"{"error":{"code":"job_not_found","message":"job 7 not found"}}"#.to_owned()
            )
        );
    }

    #[tokio::test]
    async fn a_database_failure_is_internal_and_never_shows_its_cause() {
        let error = ApiError::from(sqlx::Error::Protocol("secret detail".into()));
        let (status, _, body) = rendered(error).await;
        assert_eq!(status, StatusCode::INTERNAL_SERVER_ERROR);
        assert_eq!(
            body,
            r#"{"error":{"code":"internal_error","message":"internal error"}}"#
        );
    }

    #[test]
    fn an_unreachable_database_is_unavailable() {
        for err in [sqlx::Error::PoolTimedOut, sqlx::Error::PoolClosed] {
            let error = ApiError::from(QueueError::Database(err));
            assert_eq!(error.code(), Code::DatabaseUnavailable);
            assert_eq!(error.status(), StatusCode::SERVICE_UNAVAILABLE);
        }
    }

    #[tokio::test]
    async fn unauthorized_asks_for_a_bearer_token() {
        let (status, challenge, body) = rendered(ApiError::unauthorized()).await;
        assert_eq!(status, StatusCode::UNAUTHORIZED);
        assert_eq!(challenge.as_deref(), Some("Bearer"));
        assert!(body.contains(r#""code":"unauthorized""#), "{body}");
    }

    #[test]
    fn a_refused_upload_says_what_extraction_would_have_said() {
        let refusals = [
            (ExtractError::Empty, StatusCode::BAD_REQUEST),
            (
                ExtractError::Unsupported {
                    detected: "application/zip",
                },
                StatusCode::UNSUPPORTED_MEDIA_TYPE,
            ),
            (
                ExtractError::NotAPdf {
                    detected: "text/plain",
                },
                StatusCode::UNSUPPORTED_MEDIA_TYPE,
            ),
        ];
        for (err, status) in refusals {
            let code = err.code();
            let error = ApiError::from(err);
            assert_eq!((error.status(), error.code().as_str()), (status, code));
        }
    }
}
