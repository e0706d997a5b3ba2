//! `/api/jobs` and `/api/queue/stats`: people and scripts look at jobs, enqueue known kinds,
//! retry dead ones and cancel.

use axum::extract::State;
use axum::http::StatusCode;
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::AppState;
use super::auth::Admin;
use super::error::{ApiError, Code};
use super::input::{Json, Path, Query, next_cursor, page_limit};
use crate::pipeline;
use crate::queue::{self, JobFilter, JobId, JobRecord, JobStatus, NewJob, QueueStats};

/// Query of `GET /api/jobs`.
#[derive(utoipa::IntoParams, Debug, Deserialize)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
pub struct ListQuery {
    status: Option<String>,
    kind: Option<String>,
    /// The `next` cursor of the previous page.
    before: Option<i64>,
    limit: Option<i64>,
}

/// Answer of `GET /api/jobs`.
#[derive(utoipa::ToSchema, Debug, Serialize)]
pub struct JobPage {
    /// Newest first.
    pub jobs: Vec<JobRecord>,
    /// The `before` of the following page; none after the last.
    pub next: Option<i64>,
}

/// `GET /api/jobs`: newest first; `next` is the cursor for the following page.
#[utoipa::path(
    get,
    path = "/jobs",
    operation_id = "list_jobs",
    tag = "jobs",
    params(ListQuery),
    responses((status = 200, body = JobPage), (status = 400, description = "a bad status, limit or query", body = super::error::ErrorAnswer)),
    security(("bearer" = ["admin"]))
)]
pub async fn list(
    State(state): State<AppState>,
    _: Admin,
    Query(query): Query<ListQuery>,
) -> Result<Json<JobPage>, ApiError> {
    let status = query
        .status
        .as_deref()
        .map(str::parse::<JobStatus>)
        .transpose()
        .map_err(|err| ApiError::new(Code::InvalidStatus, err.to_string()))?;
    let limit = page_limit(query.limit)?;
    let jobs = state
        .queue
        .list(&JobFilter {
            status,
            kind: query.kind,
            before: query.before.map(JobId),
            limit,
        })
        .await?;
    let next = next_cursor(jobs.iter().map(|j| j.id.0), limit);
    Ok(Json(JobPage { jobs, next }))
}

/// `GET /api/jobs/{id}`.
#[utoipa::path(
    get,
    path = "/jobs/{id}",
    operation_id = "get_job",
    tag = "jobs",
    params(("id" = i64, Path, description = "The job's id")),
    responses((status = 200, body = JobRecord), (status = 404, description = "no such job", body = super::error::ErrorAnswer)),
    security(("bearer" = ["admin"]))
)]
pub async fn get(
    State(state): State<AppState>,
    _: Admin,
    Path(id): Path<i64>,
) -> Result<Json<JobRecord>, ApiError> {
    Ok(Json(state.queue.get(JobId(id)).await?))
}

/// Body of `POST /api/jobs`.
#[derive(utoipa::ToSchema, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EnqueueBody {
    kind: String,
    /// The handler's input, a JSON object; `{}` when absent.
    #[serde(default)]
    payload: Option<Value>,
    idempotency_key: Option<String>,
    run_at: Option<DateTime<Utc>>,
    max_attempts: Option<i32>,
}

/// `POST /api/jobs`: enqueue a job of a kind this deployment runs. 201 when created, 200 when
/// the idempotency key named an existing job (which comes back).
#[utoipa::path(
    post,
    path = "/jobs",
    operation_id = "enqueue_job",
    tag = "jobs",
    request_body = EnqueueBody,
    responses((status = 201, description = "Enqueued", body = JobRecord), (status = 200, description = "The idempotency key named this existing job", body = JobRecord), (status = 400, description = "a bad payload", body = super::error::ErrorAnswer), (status = 413, description = "the payload is over the queue's limit", body = super::error::ErrorAnswer), (status = 422, description = "no handler runs jobs of this kind", body = super::error::ErrorAnswer)),
    security(("bearer" = ["admin"]))
)]
pub async fn enqueue(
    State(state): State<AppState>,
    _: Admin,
    Json(body): Json<EnqueueBody>,
) -> Result<(StatusCode, Json<JobRecord>), ApiError> {
    check_kind(&state, &body.kind)?;
    let payload = body
        .payload
        .unwrap_or_else(|| Value::Object(Default::default()));
    if !payload.is_object() {
        return Err(ApiError::new(
            Code::InvalidPayload,
            "payload must be a JSON object",
        ));
    }
    let job = NewJob {
        kind: body.kind,
        payload,
        idempotency_key: body.idempotency_key,
        run_at: body.run_at,
        max_attempts: body.max_attempts,
        fair_key: String::new(),
    };
    let mut conn = state.pool.acquire().await?;
    let enqueued = queue::enqueue(&mut conn, &job).await?;
    drop(conn);
    let status = if enqueued.created {
        StatusCode::CREATED
    } else {
        StatusCode::OK
    };
    Ok((status, Json(state.queue.get(enqueued.id).await?)))
}

/// A job, or a schedule's, may only be of a kind this deployment runs, or it would wait for
/// ever.
pub fn check_kind(state: &AppState, kind: &str) -> Result<(), ApiError> {
    if state.job_kinds.iter().any(|k| k == kind) {
        return Ok(());
    }
    Err(ApiError::new(
        Code::UnknownJobKind,
        format!(
            "no handler runs jobs of kind {kind:?}; known kinds: {}",
            state.job_kinds.join(", ")
        ),
    ))
}

/// `POST /api/jobs/{id}/retry`: a dead or cancelled job starts over, due now, with a fresh
/// attempt budget (its history kept); a failed document it works on goes back into its step
/// in the same transaction, so the document's own status shows what the retry does
/// ([`pipeline::retry_job`]).
#[utoipa::path(
    post,
    path = "/jobs/{id}/retry",
    operation_id = "retry_job",
    tag = "jobs",
    params(("id" = i64, Path, description = "The job's id")),
    responses((status = 200, body = JobRecord), (status = 404, description = "no such job", body = super::error::ErrorAnswer), (status = 409, description = "the job is not dead or cancelled", body = super::error::ErrorAnswer)),
    security(("bearer" = ["admin"]))
)]
pub async fn retry(
    State(state): State<AppState>,
    _: Admin,
    Path(id): Path<i64>,
) -> Result<Json<JobRecord>, ApiError> {
    Ok(Json(pipeline::retry_job(&state.pool, JobId(id)).await?))
}

/// `POST /api/jobs/{id}/cancel`: a ready or running job to cancelled.
#[utoipa::path(
    post,
    path = "/jobs/{id}/cancel",
    operation_id = "cancel_job",
    tag = "jobs",
    params(("id" = i64, Path, description = "The job's id")),
    responses((status = 200, body = JobRecord), (status = 404, description = "no such job", body = super::error::ErrorAnswer), (status = 409, description = "the job is finished", body = super::error::ErrorAnswer)),
    security(("bearer" = ["admin"]))
)]
pub async fn cancel(
    State(state): State<AppState>,
    _: Admin,
    Path(id): Path<i64>,
) -> Result<Json<JobRecord>, ApiError> {
    Ok(Json(state.queue.cancel(JobId(id)).await?))
}

/// `GET /api/queue/stats`.
#[utoipa::path(
    get,
    path = "/queue/stats",
    operation_id = "queue_stats",
    tag = "jobs",
    responses((status = 200, body = QueueStats)),
    security(("bearer" = ["admin"]))
)]
pub async fn stats(State(state): State<AppState>, _: Admin) -> Result<Json<QueueStats>, ApiError> {
    Ok(Json(state.queue.stats().await?))
}
