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
#[derive(utoipa::ToSchema, Debug, Serialize)]
pub struct CollectionList {
    /// By name; only those the caller may read.
    pub collections: Vec<CollectionUsage>,
}

/// Body of `POST /api/collections`.
#[derive(utoipa::ToSchema, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NewCollection {
    name: String,
}

/// Answer of `DELETE /api/collections/{name}`: the job deleting its documents.
#[derive(utoipa::ToSchema, Debug, Serialize)]
pub struct Deletion {
    pub name: String,
    pub job_id: i64,
}

/// `GET /api/collections`.
#[utoipa::path(
    get,
    path = "/collections",
    operation_id = "list_collections",
    tag = "collections",
    responses((status = 200, body = CollectionList)),
    security(("bearer" = []))
)]
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
#[utoipa::path(
    post,
    path = "/collections",
    operation_id = "create_collection",
    tag = "collections",
    request_body = NewCollection,
    responses((status = 201, body = CollectionUsage), (status = 400, description = "a name that cannot be one", body = super::error::ErrorAnswer), (status = 409, description = "the name is taken", body = super::error::ErrorAnswer)),
    security(("bearer" = ["admin"]))
)]
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
#[utoipa::path(
    delete,
    path = "/collections/{name}",
    operation_id = "delete_collection",
    tag = "collections",
    params(("name" = String, Path, description = "The collection's name")),
    responses((status = 202, description = "Gone from every view; its documents are deleted by the job", body = Deletion), (status = 404, description = "no such collection", body = super::error::ErrorAnswer), (status = 409, description = "the default collection cannot be deleted", body = super::error::ErrorAnswer)),
    security(("bearer" = ["admin"]))
)]
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
