//! Every error code the API answers with, its HTTP status and its string: the one table.
//!
//! Clients match on the string, so it never changes once shipped; adding a code is a variant
//! here and its line in [`Code::parts`]. The handlers and the domain mappings in
//! [`super`] name variants, never strings.

use axum::http::StatusCode;

/// A stable error code. Serialises as its snake_case string.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Code {
    // 400: the request is malformed; the message says what was wrong.
    /// A JSON body that does not parse or has the wrong fields.
    InvalidJson,
    /// A path parameter of the wrong type (`/api/jobs/abc`).
    InvalidPath,
    /// Query parameters that do not parse.
    InvalidQuery,
    /// A `status` filter naming no status.
    InvalidStatus,
    /// A page `limit` outside 1 to 500.
    InvalidLimit,
    /// A job's `payload` that is not a JSON object.
    InvalidPayload,
    /// A job the queue refuses as it stands (see `QueueError::Invalid`).
    InvalidJob,
    /// A schedule's expression, zone, name, kind or window.
    InvalidSchedule,
    /// Settings that name no model version docket can embed with.
    InvalidModelVersion,
    /// A search `mode` other than hybrid, vector or text.
    InvalidMode,
    /// A search `group` other than document.
    InvalidGroup,
    /// A search `k` out of range.
    InvalidK,
    /// A search `min_relevance` outside [0, 1].
    InvalidMinRelevance,
    /// A search without words.
    EmptyQuery,
    /// A search longer than the limit.
    QueryTooLong,
    /// A multipart body that does not parse.
    InvalidMultipart,
    /// A multipart field other than `file`.
    UnexpectedField,
    /// More files in one upload than it may carry.
    TooManyFiles,
    /// An upload without a file.
    NoFile,
    /// An uploaded file's name that cannot be a document's.
    InvalidFilename,
    /// An uploaded file without bytes (extraction's own code, `ExtractError::Empty`).
    EmptyFile,
    /// A collection name that cannot be one.
    InvalidCollection,
    /// A webhook registration with a bad URL, no or unknown events, or a collection.
    InvalidWebhook,
    /// A webhook URL whose host is or resolves to an address webhooks are not sent to.
    WebhookTargetRefused,
    // 401
    /// A missing or wrong bearer token.
    Unauthorized,
    // 403: refused whoever asks.
    /// A `Host` docket is not served under.
    HostNotAllowed,
    /// A state-changing request from a page of another origin.
    CrossOriginRequest,
    /// The caller's role does not allow this (a reader uploading, a writer listing jobs), or a
    /// collection it may not write.
    Forbidden,
    // 404
    /// A path under `/api` that names no route.
    RouteNotFound,
    DocumentNotFound,
    JobNotFound,
    ScheduleNotFound,
    ModelVersionNotFound,
    /// A collection that does not exist, is being deleted, or is outside the caller's reach.
    CollectionNotFound,
    WebhookNotFound,
    DeliveryNotFound,
    // 408
    /// The request took longer than the request timeout.
    RequestTimeout,
    // 409: the thing exists but its state forbids this.
    /// A retry or cancel of a job in a status that does not allow it.
    JobStateConflict,
    /// A job's lease lost to a rescue, cancel or another worker.
    LeaseLost,
    ScheduleExists,
    CollectionExists,
    /// Deleting `default`, which holds the documents uploaded without a collection.
    DefaultCollectionKept,
    /// Search before any model version is registered.
    NoActiveModel,
    /// A vector search under a version this server cannot embed queries for.
    ModelVersionNotEmbeddable,
    /// A vector search under a version without vectors yet.
    NoVectors,
    /// A retry of a delivery that is not dead.
    DeliveryNotDead,
    // 413: over a size limit.
    /// A job payload over the queue's limit.
    PayloadTooLarge,
    /// A request body over the body limit.
    BodyTooLarge,
    /// The files of one upload add up to more than a request may carry.
    RequestTooLarge,
    /// One uploaded file over the per-file limit.
    FileTooLarge,
    // 415
    /// An uploaded file docket does not read; the string is extraction's own code
    /// (`unsupported_type`, `not_a_pdf`, …: `ExtractError::code`), so an upload refused at
    /// once and a document that failed later say the same thing.
    UnsupportedFile(&'static str),
    // 422
    /// A job kind no handler of this deployment runs.
    UnknownJobKind,
    // 500
    /// Our fault: the cause is logged, never sent.
    Internal,
    // 503: a dependency is not available right now.
    /// The pool cannot reach the database.
    DatabaseUnavailable,
    /// pg_cron is not installed where a schedule needs it.
    PgCronUnavailable,
    /// The embedding provider does not answer right now.
    EmbeddingUnavailable,
}

impl Code {
    /// The HTTP status and the string of this code.
    pub fn parts(self) -> (StatusCode, &'static str) {
        use StatusCode as S;
        match self {
            Code::InvalidJson => (S::BAD_REQUEST, "invalid_json"),
            Code::InvalidPath => (S::BAD_REQUEST, "invalid_path"),
            Code::InvalidQuery => (S::BAD_REQUEST, "invalid_query"),
            Code::InvalidStatus => (S::BAD_REQUEST, "invalid_status"),
            Code::InvalidLimit => (S::BAD_REQUEST, "invalid_limit"),
            Code::InvalidPayload => (S::BAD_REQUEST, "invalid_payload"),
            Code::InvalidJob => (S::BAD_REQUEST, "invalid_job"),
            Code::InvalidSchedule => (S::BAD_REQUEST, "invalid_schedule"),
            Code::InvalidModelVersion => (S::BAD_REQUEST, "invalid_model_version"),
            Code::InvalidMode => (S::BAD_REQUEST, "invalid_mode"),
            Code::InvalidGroup => (S::BAD_REQUEST, "invalid_group"),
            Code::InvalidK => (S::BAD_REQUEST, "invalid_k"),
            Code::InvalidMinRelevance => (S::BAD_REQUEST, "invalid_min_relevance"),
            Code::EmptyQuery => (S::BAD_REQUEST, "empty_query"),
            Code::QueryTooLong => (S::BAD_REQUEST, "query_too_long"),
            Code::InvalidMultipart => (S::BAD_REQUEST, "invalid_multipart"),
            Code::UnexpectedField => (S::BAD_REQUEST, "unexpected_field"),
            Code::TooManyFiles => (S::BAD_REQUEST, "too_many_files"),
            Code::NoFile => (S::BAD_REQUEST, "no_file"),
            Code::InvalidFilename => (S::BAD_REQUEST, "invalid_filename"),
            Code::EmptyFile => (S::BAD_REQUEST, "empty_file"),
            Code::InvalidCollection => (S::BAD_REQUEST, "invalid_collection"),
            Code::InvalidWebhook => (S::BAD_REQUEST, "invalid_webhook"),
            Code::WebhookTargetRefused => (S::BAD_REQUEST, "webhook_target_refused"),
            Code::Unauthorized => (S::UNAUTHORIZED, "unauthorized"),
            Code::HostNotAllowed => (S::FORBIDDEN, "host_not_allowed"),
            Code::CrossOriginRequest => (S::FORBIDDEN, "cross_origin_request"),
            Code::Forbidden => (S::FORBIDDEN, "forbidden"),
            Code::RouteNotFound => (S::NOT_FOUND, "route_not_found"),
            Code::DocumentNotFound => (S::NOT_FOUND, "document_not_found"),
            Code::JobNotFound => (S::NOT_FOUND, "job_not_found"),
            Code::ScheduleNotFound => (S::NOT_FOUND, "schedule_not_found"),
            Code::ModelVersionNotFound => (S::NOT_FOUND, "model_version_not_found"),
            Code::CollectionNotFound => (S::NOT_FOUND, "collection_not_found"),
            Code::WebhookNotFound => (S::NOT_FOUND, "webhook_not_found"),
            Code::DeliveryNotFound => (S::NOT_FOUND, "delivery_not_found"),
            Code::RequestTimeout => (S::REQUEST_TIMEOUT, "request_timeout"),
            Code::JobStateConflict => (S::CONFLICT, "job_state_conflict"),
            Code::LeaseLost => (S::CONFLICT, "lease_lost"),
            Code::ScheduleExists => (S::CONFLICT, "schedule_exists"),
            Code::CollectionExists => (S::CONFLICT, "collection_exists"),
            Code::DefaultCollectionKept => (S::CONFLICT, "default_collection_kept"),
            Code::NoActiveModel => (S::CONFLICT, "no_active_model"),
            Code::ModelVersionNotEmbeddable => (S::CONFLICT, "model_version_not_embeddable"),
            Code::NoVectors => (S::CONFLICT, "no_vectors"),
            Code::DeliveryNotDead => (S::CONFLICT, "delivery_not_dead"),
            Code::PayloadTooLarge => (S::PAYLOAD_TOO_LARGE, "payload_too_large"),
            Code::BodyTooLarge => (S::PAYLOAD_TOO_LARGE, "body_too_large"),
            Code::RequestTooLarge => (S::PAYLOAD_TOO_LARGE, "request_too_large"),
            Code::FileTooLarge => (S::PAYLOAD_TOO_LARGE, "file_too_large"),
            Code::UnsupportedFile(code) => (S::UNSUPPORTED_MEDIA_TYPE, code),
            Code::UnknownJobKind => (S::UNPROCESSABLE_ENTITY, "unknown_job_kind"),
            Code::Internal => (S::INTERNAL_SERVER_ERROR, "internal_error"),
            Code::DatabaseUnavailable => (S::SERVICE_UNAVAILABLE, "database_unavailable"),
            Code::PgCronUnavailable => (S::SERVICE_UNAVAILABLE, "pg_cron_unavailable"),
            Code::EmbeddingUnavailable => (S::SERVICE_UNAVAILABLE, "embedding_unavailable"),
        }
    }

    /// The HTTP status this code answers with.
    pub fn status(self) -> StatusCode {
        self.parts().0
    }

    /// The stable string clients match on.
    pub fn as_str(self) -> &'static str {
        self.parts().1
    }
}

impl serde::Serialize for Code {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::Code;

    #[test]
    fn a_code_serialises_as_its_string() {
        let json = serde_json::to_string(&[Code::NoVectors, Code::UnsupportedFile("not_a_pdf")])
            .expect("serialise");
        assert_eq!(json, r#"["no_vectors","not_a_pdf"]"#);
    }
}
