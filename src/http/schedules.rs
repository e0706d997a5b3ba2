//! `/api/schedules`: list, create, show, update, delete and run now. Each schedule comes with its
//! next firing; `nightly-reembed` also says what its next run will send.

use axum::extract::State;
use axum::http::StatusCode;
use chrono::{DateTime, Utc};
use serde_json::{Value, json};

use super::AppState;
use super::error::ApiError;
use super::input::{Json, Path};
use crate::pipeline::reembed::{self, ReembedPlan};
use crate::schedule::{self, NewSchedule, Schedule, ScheduleError, ScheduleUpdate, ScheduleView};

impl From<ScheduleError> for ApiError {
    fn from(err: ScheduleError) -> Self {
        match err {
            ScheduleError::NotFound(name) => ApiError::NotFound {
                code: "schedule_not_found",
                message: format!("schedule {name:?} not found"),
            },
            err @ ScheduleError::Exists(_) => ApiError::Conflict {
                code: "schedule_exists",
                message: err.to_string(),
            },
            ScheduleError::Invalid(message) => ApiError::bad_request("invalid_schedule", message),
            ScheduleError::PgCronUnavailable(message) => ApiError::Unavailable {
                code: "pg_cron_unavailable",
                message,
            },
            ScheduleError::Queue(err) => err.into(),
            ScheduleError::Database(err) => super::error::database(err),
        }
    }
}

/// The view of `schedule` at `now`, with the pipeline's preview of the nightly re-embedding.
async fn view(
    pool: &sqlx::PgPool,
    schedule: Schedule,
    now: DateTime<Utc>,
) -> Result<ScheduleView<ReembedPlan>, ScheduleError> {
    let next_run_sends = reembed::next_run_sends(pool, &schedule).await?;
    Ok(schedule::view(schedule, now, next_run_sends))
}

/// A schedule may only enqueue kinds this deployment runs, or its jobs would wait forever.
fn check_kind(state: &AppState, kind: &str) -> Result<(), ApiError> {
    if state.job_kinds.iter().any(|k| k == kind) {
        return Ok(());
    }
    Err(ApiError::Unprocessable {
        code: "unknown_job_kind",
        message: format!(
            "no handler runs jobs of kind {kind:?}; known kinds: {}",
            state.job_kinds.join(", ")
        ),
    })
}

/// `GET /api/schedules`.
pub async fn list(State(state): State<AppState>) -> Result<Json<Value>, ApiError> {
    let now = Utc::now();
    let mut views = Vec::new();
    for schedule in schedule::store::list(&state.pool).await? {
        views.push(view(&state.pool, schedule, now).await?);
    }
    Ok(Json(json!({ "schedules": views })))
}

/// `POST /api/schedules`: 201 with the schedule; 409 when the name is taken.
pub async fn create(
    State(state): State<AppState>,
    Json(body): Json<NewSchedule>,
) -> Result<(StatusCode, Json<ScheduleView<ReembedPlan>>), ApiError> {
    check_kind(&state, &body.kind)?;
    let now = Utc::now();
    let created = schedule::store::create(&state.pool, &body, now).await?;
    Ok((
        StatusCode::CREATED,
        Json(view(&state.pool, created, now).await?),
    ))
}

/// `GET /api/schedules/{name}`.
pub async fn get(
    State(state): State<AppState>,
    Path(name): Path<String>,
) -> Result<Json<ScheduleView<ReembedPlan>>, ApiError> {
    let schedule = schedule::store::get(&state.pool, &name).await?;
    Ok(Json(view(&state.pool, schedule, Utc::now()).await?))
}

/// `PATCH /api/schedules/{name}`: fields present are changed (enable/disable is `enabled`).
pub async fn update(
    State(state): State<AppState>,
    Path(name): Path<String>,
    Json(body): Json<ScheduleUpdate>,
) -> Result<Json<ScheduleView<ReembedPlan>>, ApiError> {
    if let Some(kind) = &body.kind {
        check_kind(&state, kind)?;
    }
    let updated = schedule::store::update(&state.pool, &name, &body).await?;
    Ok(Json(view(&state.pool, updated, Utc::now()).await?))
}

/// `DELETE /api/schedules/{name}`: 204.
pub async fn delete(
    State(state): State<AppState>,
    Path(name): Path<String>,
) -> Result<StatusCode, ApiError> {
    schedule::store::remove(&state.pool, &name).await?;
    Ok(StatusCode::NO_CONTENT)
}

/// `POST /api/schedules/{name}/run-now`: 202 with the enqueued job's id.
pub async fn run_now(
    State(state): State<AppState>,
    Path(name): Path<String>,
) -> Result<(StatusCode, Json<Value>), ApiError> {
    let enqueued = schedule::run_now(&state.pool, &name, Utc::now()).await?;
    Ok((
        StatusCode::ACCEPTED,
        Json(json!({ "job_id": enqueued.id, "created": enqueued.created })),
    ))
}
