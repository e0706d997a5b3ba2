//! `/api/schedules`: list, create, show, update, delete and run now. Each schedule comes with its
//! next firing; `nightly-reembed` also says what its next run will send.

use axum::extract::State;
use axum::http::StatusCode;
use chrono::{DateTime, Utc};
use serde::Serialize;

use super::AppState;
use super::auth::Admin;
use super::error::ApiError;
use super::input::{Json, Path};
use super::jobs::check_kind;
use crate::pipeline::reembed::{self, ReembedPlan};
use crate::queue::JobId;
use crate::schedule::{self, NewSchedule, Schedule, ScheduleError, ScheduleUpdate, ScheduleView};

/// A schedule as clients see it, with the nightly re-embedding's preview.
pub type ScheduleAnswer = ScheduleView<ReembedPlan>;

/// Answer of `GET /api/schedules`.
#[derive(utoipa::ToSchema, Debug, Serialize)]
pub struct ScheduleList {
    #[schema(value_type = Vec<Object>)]
    pub schedules: Vec<ScheduleAnswer>,
}

/// Answer of `POST /api/schedules/{name}/run-now`.
#[derive(utoipa::ToSchema, Debug, Serialize)]
pub struct RunNow {
    pub job_id: JobId,
    /// False when the run's idempotency key named a job already enqueued.
    pub created: bool,
}

/// The view of `schedule` at `now`, with the pipeline's preview of the nightly re-embedding.
async fn view(
    pool: &sqlx::PgPool,
    schedule: Schedule,
    now: DateTime<Utc>,
) -> Result<ScheduleAnswer, ScheduleError> {
    let next_run_sends = reembed::next_run_sends(pool, &schedule).await?;
    Ok(schedule::view(schedule, now, next_run_sends))
}

/// `GET /api/schedules`.
#[utoipa::path(
    get,
    path = "/schedules",
    operation_id = "list_schedules",
    tag = "schedules",
    responses((status = 200, body = ScheduleList)),
    security(("bearer" = ["admin"]))
)]
pub async fn list(State(state): State<AppState>, _: Admin) -> Result<Json<ScheduleList>, ApiError> {
    let now = Utc::now();
    let mut views = Vec::new();
    for schedule in schedule::store::list(&state.pool).await? {
        views.push(view(&state.pool, schedule, now).await?);
    }
    Ok(Json(ScheduleList { schedules: views }))
}

/// `POST /api/schedules`: 201 with the schedule; 409 when the name is taken.
#[utoipa::path(
    post,
    path = "/schedules",
    operation_id = "create_schedule",
    tag = "schedules",
    request_body(content = serde_json::Value, description = "`{\"name\", \"cron\", \"timezone\"?, \"job_kind\", \"payload\"?, \"enabled\"?}`"),
    responses((status = 201, description = "The schedule, with its next firing", body = serde_json::Value), (status = 400, description = "a bad expression, zone, name or kind", body = super::error::ErrorAnswer), (status = 409, description = "the name is taken", body = super::error::ErrorAnswer), (status = 422, description = "no handler runs jobs of this kind", body = super::error::ErrorAnswer)),
    security(("bearer" = ["admin"]))
)]
pub async fn create(
    State(state): State<AppState>,
    _: Admin,
    Json(body): Json<NewSchedule>,
) -> Result<(StatusCode, Json<ScheduleAnswer>), ApiError> {
    check_kind(&state, &body.kind)?;
    let now = Utc::now();
    let created = schedule::store::create(&state.pool, &body, now).await?;
    Ok((
        StatusCode::CREATED,
        Json(view(&state.pool, created, now).await?),
    ))
}

/// `GET /api/schedules/{name}`.
#[utoipa::path(
    get,
    path = "/schedules/{name}",
    operation_id = "get_schedule",
    tag = "schedules",
    params(("name" = String, Path, description = "The schedule's name")),
    responses((status = 200, description = "The schedule, with its next firing", body = serde_json::Value), (status = 404, description = "no such schedule", body = super::error::ErrorAnswer)),
    security(("bearer" = ["admin"]))
)]
pub async fn get(
    State(state): State<AppState>,
    _: Admin,
    Path(name): Path<String>,
) -> Result<Json<ScheduleAnswer>, ApiError> {
    let schedule = schedule::store::get(&state.pool, &name).await?;
    Ok(Json(view(&state.pool, schedule, Utc::now()).await?))
}

/// `PATCH /api/schedules/{name}`: fields present are changed (enable/disable is `enabled`).
#[utoipa::path(
    patch,
    path = "/schedules/{name}",
    operation_id = "update_schedule",
    tag = "schedules",
    params(("name" = String, Path, description = "The schedule's name")),
    request_body(content = serde_json::Value, description = "The fields to change"),
    responses((status = 200, description = "The schedule, with its next firing", body = serde_json::Value), (status = 400, description = "a bad field", body = super::error::ErrorAnswer), (status = 404, description = "no such schedule", body = super::error::ErrorAnswer)),
    security(("bearer" = ["admin"]))
)]
pub async fn update(
    State(state): State<AppState>,
    _: Admin,
    Path(name): Path<String>,
    Json(body): Json<ScheduleUpdate>,
) -> Result<Json<ScheduleAnswer>, ApiError> {
    if let Some(kind) = &body.kind {
        check_kind(&state, kind)?;
    }
    let updated = schedule::store::update(&state.pool, &name, &body).await?;
    Ok(Json(view(&state.pool, updated, Utc::now()).await?))
}

/// `DELETE /api/schedules/{name}`: 204.
#[utoipa::path(
    delete,
    path = "/schedules/{name}",
    operation_id = "delete_schedule",
    tag = "schedules",
    params(("name" = String, Path, description = "The schedule's name")),
    responses((status = 204, description = "Deleted"), (status = 404, description = "no such schedule", body = super::error::ErrorAnswer)),
    security(("bearer" = ["admin"]))
)]
pub async fn delete(
    State(state): State<AppState>,
    _: Admin,
    Path(name): Path<String>,
) -> Result<StatusCode, ApiError> {
    schedule::store::remove(&state.pool, &name).await?;
    Ok(StatusCode::NO_CONTENT)
}

/// `POST /api/schedules/{name}/run-now`: 202 with the enqueued job's id.
#[utoipa::path(
    post,
    path = "/schedules/{name}/run-now",
    operation_id = "run_schedule_now",
    tag = "schedules",
    params(("name" = String, Path, description = "The schedule's name")),
    responses((status = 202, body = RunNow), (status = 404, description = "no such schedule", body = super::error::ErrorAnswer)),
    security(("bearer" = ["admin"]))
)]
pub async fn run_now(
    State(state): State<AppState>,
    _: Admin,
    Path(name): Path<String>,
) -> Result<(StatusCode, Json<RunNow>), ApiError> {
    let enqueued = schedule::run_now(&state.pool, &name, Utc::now()).await?;
    Ok((
        StatusCode::ACCEPTED,
        Json(RunNow {
            job_id: enqueued.id,
            created: enqueued.created,
        }),
    ))
}
