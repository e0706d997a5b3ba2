//! `/api/models`: model versions, which one is active, and how far each version's sets are.

use axum::extract::State;
use axum::http::StatusCode;
use serde::Serialize;

use super::AppState;
use super::auth::Admin;
use super::error::ApiError;
use super::input::{Json, Path};
use crate::models::{self, ModelVersion, ModelVersionStatus, NewModelVersion};

/// Answer of `GET /api/models`.
#[derive(utoipa::ToSchema, Debug, Serialize)]
pub struct ModelList {
    /// The active version first.
    pub models: Vec<ModelVersionStatus>,
}

/// Answer of `POST /api/models`.
#[derive(utoipa::ToSchema, Debug, Serialize)]
pub struct AddedModel {
    pub model: ModelVersion,
}

/// Answer of `POST /api/models/{version}/activate`.
#[derive(utoipa::ToSchema, Debug, Serialize)]
pub struct ActivatedModel {
    pub model: ModelVersion,
    /// Always true: the version is the active one now.
    pub active: bool,
}

/// `GET /api/models`: every version with `active`, `documents_complete`, `documents_total`
/// and `documents_searchable` (the progress of a switch).
#[utoipa::path(
    get,
    path = "/models",
    operation_id = "list_models",
    tag = "models",
    responses((status = 200, body = ModelList)),
    security(("bearer" = ["admin"]))
)]
pub async fn list(State(state): State<AppState>, _: Admin) -> Result<Json<ModelList>, ApiError> {
    Ok(Json(ModelList {
        models: models::list(&state.pool).await?,
    }))
}

/// `POST /api/models`: registers a version; 201 when new, 200 when it existed.
#[utoipa::path(
    post,
    path = "/models",
    operation_id = "add_model",
    tag = "models",
    request_body = NewModelVersion,
    responses((status = 201, description = "Registered", body = AddedModel), (status = 200, description = "It was registered already", body = AddedModel), (status = 400, description = "settings that name no version docket can embed with", body = super::error::ErrorAnswer)),
    security(("bearer" = ["admin"]))
)]
pub async fn add(
    State(state): State<AppState>,
    _: Admin,
    Json(body): Json<NewModelVersion>,
) -> Result<(StatusCode, Json<AddedModel>), ApiError> {
    let name = body.version()?.model_version;
    let existed = models::get(&state.pool, &name).await?.is_some();
    let model = models::add(&state.pool, &body).await?;
    let status = if existed {
        StatusCode::OK
    } else {
        StatusCode::CREATED
    };
    Ok((status, Json(AddedModel { model })))
}

/// `POST /api/models/{version}/activate`: makes it the active version.
#[utoipa::path(
    post,
    path = "/models/{version}/activate",
    operation_id = "activate_model",
    tag = "models",
    params(("version" = String, Path, description = "The model version")),
    responses((status = 200, body = ActivatedModel), (status = 404, description = "no such version", body = super::error::ErrorAnswer)),
    security(("bearer" = ["admin"]))
)]
pub async fn activate(
    State(state): State<AppState>,
    _: Admin,
    Path(version): Path<String>,
) -> Result<Json<ActivatedModel>, ApiError> {
    let model = models::switch_to(&state.pool, &version).await?;
    Ok(Json(ActivatedModel {
        model,
        active: true,
    }))
}
