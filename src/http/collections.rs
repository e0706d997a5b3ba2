//! `/api/collections`: the collections a caller reaches, with what each holds and costs;
//! creating and deleting them is an admin's.

use axum::extract::State;
use axum::http::StatusCode;
use serde::{Deserialize, Serialize};

use super::AppState;
use super::auth::{Admin, Caller};
use super::error::ApiError;
use super::input::{Json, Path};
use crate::collections::{self, CollectionUsage, Reach};

/// Answer of `GET /api/collections`.
#[derive(Debug, Serialize)]
pub struct CollectionList {
    /// By name; only those the caller may read.
    pub collections: Vec<CollectionUsage>,
}

/// Body of `POST /api/collections`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NewCollection {
    name: String,
}

/// Answer of `DELETE /api/collections/{name}`: the job deleting its documents.
#[derive(Debug, Serialize)]
pub struct Deletion {
    pub name: String,
    pub job_id: i64,
}

/// `GET /api/collections`.
pub async fn list(
    State(state): State<AppState>,
    Caller(access): Caller,
) -> Result<Json<CollectionList>, ApiError> {
    let reach = access.reach(&state.pool, &[]).await?;
    Ok(Json(CollectionList {
        collections: collections::usage(&state.pool, &reach).await?,
    }))
}

/// `POST /api/collections {"name"}`: 201 with the new, empty collection.
pub async fn create(
    State(state): State<AppState>,
    _: Admin,
    Json(body): Json<NewCollection>,
) -> Result<(StatusCode, Json<CollectionUsage>), ApiError> {
    let id = collections::create(&state.pool, &body.name).await?;
    let mut created = collections::usage(&state.pool, &Reach::only([id])).await?;
    let created = created
        .pop()
        .ok_or_else(|| ApiError::internal(anyhow::anyhow!("a created collection vanished")))?;
    Ok((StatusCode::CREATED, Json(created)))
}

/// `DELETE /api/collections/{name}`: 202; the collection is gone from every view at once, and
/// its documents are deleted by a job.
pub async fn delete(
    State(state): State<AppState>,
    _: Admin,
    Path(name): Path<String>,
) -> Result<(StatusCode, Json<Deletion>), ApiError> {
    let job = crate::pipeline::delete_collection(&state.pool, &name).await?;
    Ok((
        StatusCode::ACCEPTED,
        Json(Deletion {
            name,
            job_id: job.id.0,
        }),
    ))
}
