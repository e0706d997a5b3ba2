//! `/api/webhooks`: register an endpoint (its secret shown once), list and delete endpoints,
//! see an endpoint's recent deliveries, and retry a dead one.
//!
//! Every route here is an admin's: each handler takes the [`Admin`] caller, so a reader's or
//! writer's token gets 403.

use axum::extract::State;
use axum::http::StatusCode;
use serde::{Deserialize, Serialize};
use uuid::Uuid;

use super::AppState;
use super::auth::Admin;
use super::error::{ApiError, Code};
use super::input::{Json, Path};
use crate::collections::CollectionError;
use crate::webhooks::store::{self, Delivery, Endpoint};
use crate::webhooks::{self, Event, TargetError, sign};

/// How many deliveries `GET /api/webhooks/{id}/deliveries` shows.
const RECENT_DELIVERIES: i64 = 50;

/// Body of `POST /api/webhooks`.
#[derive(utoipa::ToSchema, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NewWebhook {
    pub url: String,
    /// Event names: `document.ready`, `document.failed`, `document.deleted`, `upload.settled`.
    pub events: Vec<String>,
    /// Only this collection's documents (and its uploads); absent: every collection.
    pub collection: Option<String>,
}

/// Answer of `POST /api/webhooks`: the endpoint and, this once, its signing secret.
#[derive(utoipa::ToSchema, Debug, Serialize)]
pub struct CreatedWebhook {
    #[serde(flatten)]
    pub endpoint: Endpoint,
    /// `whsec_<base64>`; receivers verify `webhook-signature` with it.
    pub secret: String,
}

/// Answer of `GET /api/webhooks`.
#[derive(utoipa::ToSchema, Debug, Serialize)]
pub struct WebhookList {
    pub webhooks: Vec<Endpoint>,
    /// Every event an endpoint may subscribe to.
    pub events: Vec<&'static str>,
}

/// Answer of `GET /api/webhooks/{id}/deliveries`.
#[derive(utoipa::ToSchema, Debug, Serialize)]
pub struct DeliveryList {
    /// Newest first, at most 50.
    pub deliveries: Vec<Delivery>,
}

/// Answer of `POST /api/webhooks/{id}/deliveries/{delivery}/retry`.
#[derive(utoipa::ToSchema, Debug, Serialize)]
pub struct Retried {
    pub id: Uuid,
    pub status: &'static str,
}

/// `POST /api/webhooks`: 201 with the endpoint and its secret.
#[utoipa::path(
    post,
    path = "/webhooks",
    operation_id = "create_webhook",
    tag = "webhooks",
    request_body = NewWebhook,
    responses((status = 201, description = "Registered; the secret is shown this once", body = CreatedWebhook), (status = 400, description = "a bad URL or events, or a host that is or resolves to an address webhooks are not sent to (`webhook_target_refused`)", body = super::error::ErrorAnswer), (status = 404, description = "no such collection", body = super::error::ErrorAnswer)),
    security(("bearer" = ["admin"]))
)]
pub async fn create(
    _: Admin,
    State(state): State<AppState>,
    Json(body): Json<NewWebhook>,
) -> Result<(StatusCode, Json<CreatedWebhook>), ApiError> {
    let collection = match body.collection.as_deref() {
        None => None,
        Some(name) => Some(
            crate::collections::find(&state.pool, name)
                .await?
                .ok_or_else(|| CollectionError::NotFound(name.to_owned()))?,
        ),
    };
    let events = events(&body.events)?;
    if body.url.len() > 2048 {
        return Err(ApiError::new(
            Code::InvalidWebhook,
            "the webhook URL is longer than 2048 bytes",
        ));
    }
    state
        .webhook_targets
        .check(&body.url)
        .await
        .map_err(target_error)?;
    let secret = sign::new_secret();
    let endpoint = store::create(
        &state.pool,
        &body.url,
        &events,
        collection.map(|c| c.0),
        &secret,
    )
    .await?;
    Ok((
        StatusCode::CREATED,
        Json(CreatedWebhook { endpoint, secret }),
    ))
}

/// The subscribed events, each known, none twice, at least one.
fn events(names: &[String]) -> Result<Vec<String>, ApiError> {
    let mut events: Vec<String> = Vec::new();
    for name in names {
        if Event::parse(name).is_none() {
            let known: Vec<&str> = Event::ALL.iter().map(|e| e.as_str()).collect();
            return Err(ApiError::new(
                Code::InvalidWebhook,
                format!("unknown event {name:?}; events are {}", known.join(", ")),
            ));
        }
        if !events.contains(name) {
            events.push(name.clone());
        }
    }
    if events.is_empty() {
        return Err(ApiError::new(
            Code::InvalidWebhook,
            "a webhook needs at least one event",
        ));
    }
    Ok(events)
}

fn target_error(err: TargetError) -> ApiError {
    let code = match err {
        TargetError::Refused { .. } | TargetError::Unresolved { .. } => Code::WebhookTargetRefused,
        TargetError::Invalid(_) | TargetError::Scheme => Code::InvalidWebhook,
    };
    ApiError::new(code, err.to_string())
}

/// `GET /api/webhooks`.
#[utoipa::path(
    get,
    path = "/webhooks",
    operation_id = "list_webhooks",
    tag = "webhooks",
    responses((status = 200, body = WebhookList)),
    security(("bearer" = ["admin"]))
)]
pub async fn list(_: Admin, State(state): State<AppState>) -> Result<Json<WebhookList>, ApiError> {
    Ok(Json(WebhookList {
        webhooks: store::list(&state.pool).await?,
        events: Event::ALL.iter().map(|e| e.as_str()).collect(),
    }))
}

/// `DELETE /api/webhooks/{id}`: 204; its deliveries go with it.
#[utoipa::path(
    delete,
    path = "/webhooks/{id}",
    operation_id = "delete_webhook",
    tag = "webhooks",
    params(("id" = i64, Path, description = "The webhook's id")),
    responses((status = 204, description = "Deleted, with its deliveries"), (status = 404, description = "no such webhook", body = super::error::ErrorAnswer)),
    security(("bearer" = ["admin"]))
)]
pub async fn delete(
    _: Admin,
    State(state): State<AppState>,
    Path(id): Path<i64>,
) -> Result<StatusCode, ApiError> {
    if store::delete(&state.pool, id).await? {
        Ok(StatusCode::NO_CONTENT)
    } else {
        Err(not_found(id))
    }
}

fn not_found(id: i64) -> ApiError {
    ApiError::new(Code::WebhookNotFound, format!("no webhook {id}"))
}

/// `GET /api/webhooks/{id}/deliveries`: the most recent, newest first.
#[utoipa::path(
    get,
    path = "/webhooks/{id}/deliveries",
    operation_id = "list_webhook_deliveries",
    tag = "webhooks",
    params(("id" = i64, Path, description = "The webhook's id")),
    responses((status = 200, body = DeliveryList), (status = 404, description = "no such webhook", body = super::error::ErrorAnswer)),
    security(("bearer" = ["admin"]))
)]
pub async fn deliveries(
    _: Admin,
    State(state): State<AppState>,
    Path(id): Path<i64>,
) -> Result<Json<DeliveryList>, ApiError> {
    if store::get(&state.pool, id).await?.is_none() {
        return Err(not_found(id));
    }
    let deliveries = store::recent(&state.pool, id, RECENT_DELIVERIES).await?;
    Ok(Json(DeliveryList { deliveries }))
}

/// `POST /api/webhooks/{id}/deliveries/{delivery}/retry`: a dead delivery goes again (with the
/// same `webhook-id`); 409 when it is not dead.
#[utoipa::path(
    post,
    path = "/webhooks/{id}/deliveries/{delivery}/retry",
    operation_id = "retry_webhook_delivery",
    tag = "webhooks",
    params(("id" = i64, Path, description = "The webhook's id"), ("delivery" = Uuid, Path, description = "The delivery's id (its webhook-id header)")),
    responses((status = 200, body = Retried), (status = 404, description = "no such webhook or delivery", body = super::error::ErrorAnswer), (status = 409, description = "the delivery is not dead", body = super::error::ErrorAnswer)),
    security(("bearer" = ["admin"]))
)]
pub async fn retry(
    _: Admin,
    State(state): State<AppState>,
    Path((id, delivery)): Path<(i64, Uuid)>,
) -> Result<Json<Retried>, ApiError> {
    match webhooks::retry(&state.pool, id, delivery).await? {
        None => Err(ApiError::new(
            Code::DeliveryNotFound,
            format!("webhook {id} has no delivery {delivery}"),
        )),
        Some(false) => Err(ApiError::new(
            Code::DeliveryNotDead,
            "only a dead delivery can be retried; this one is pending or delivered",
        )),
        Some(true) => Ok(Json(Retried {
            id: delivery,
            status: "pending",
        })),
    }
}
