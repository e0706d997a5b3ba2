//! `/api/models`: model versions, which one is active, and how far each version's sets are.

use axum::extract::State;
use axum::http::StatusCode;
use serde_json::{Value, json};

use super::AppState;
use super::error::ApiError;
use super::input::{Json, Path};
use crate::models::{self, ModelError, NewModelVersion};

impl From<ModelError> for ApiError {
    fn from(err: ModelError) -> Self {
        match err {
            ModelError::Invalid(message) => ApiError::bad_request("invalid_model_version", message),
            err @ ModelError::NotFound(_) => ApiError::NotFound {
                code: "model_version_not_found",
                message: err.to_string(),
            },
            ModelError::Database(err) => super::error::database(err),
        }
    }
}

/// `GET /api/models`: every version with `active`, `documents_complete`, `documents_total`
/// and `documents_searchable` (the progress of a switch).
pub async fn list(State(state): State<AppState>) -> Result<Json<Value>, ApiError> {
    let versions = models::list(&state.pool)
        .await
        .map_err(super::error::database)?;
    Ok(Json(json!({ "models": versions })))
}

/// `POST /api/models`: registers a version; 201 when new, 200 when it existed.
pub async fn add(
    State(state): State<AppState>,
    Json(body): Json<NewModelVersion>,
) -> Result<(StatusCode, Json<Value>), ApiError> {
    let name = body.version()?.model_version;
    let existed = models::get(&state.pool, &name)
        .await
        .map_err(super::error::database)?
        .is_some();
    let version = models::add(&state.pool, &body).await?;
    let status = if existed {
        StatusCode::OK
    } else {
        StatusCode::CREATED
    };
    Ok((status, Json(json!({ "model": version }))))
}

/// `POST /api/models/{version}/activate`: makes it the active version.
pub async fn activate(
    State(state): State<AppState>,
    Path(version): Path<String>,
) -> Result<Json<Value>, ApiError> {
    let version = models::switch_to(&state.pool, &version).await?;
    Ok(Json(json!({ "model": version, "active": true })))
}
