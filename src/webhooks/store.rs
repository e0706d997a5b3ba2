//! `webhook_endpoints` and `webhook_deliveries`: this module is their one writer.
//!
//! A delivery row is what a receiver and a person see of one message (its `webhook-id`, its
//! status, attempts and last error); the job delivering it is the queue's (`job_id` names the
//! current one). Deleting an endpoint deletes its deliveries; a job of a deleted delivery finds
//! nothing to send and completes.

use chrono::{DateTime, Utc};
use serde::Serialize;
use sqlx::{PgConnection, PgExecutor, PgPool};
use uuid::Uuid;

use crate::collections::CollectionId;

/// A registered endpoint, as `GET /api/webhooks` shows it (never with its secret).
#[derive(utoipa::ToSchema, Debug, Clone, Serialize)]
pub struct Endpoint {
    pub id: i64,
    pub url: String,
    pub events: Vec<String>,
    /// Only this collection's documents; null: all.
    pub collection_id: Option<i64>,
    pub created_at: DateTime<Utc>,
}

/// An endpoint with what signs its deliveries.
#[derive(Debug, Clone)]
pub struct Subscriber {
    pub id: i64,
}

/// One delivery, as `GET /api/webhooks/{id}/deliveries` shows it.
#[derive(utoipa::ToSchema, Debug, Clone, Serialize)]
pub struct Delivery {
    /// The `webhook-id` header, the same on every attempt.
    pub id: Uuid,
    pub endpoint_id: i64,
    pub event_type: String,
    /// `pending` (waiting or being retried), `delivered` or `dead`.
    pub status: String,
    pub attempts: i32,
    pub last_error: Option<String>,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
    pub delivered_at: Option<DateTime<Utc>>,
}

/// What one attempt needs: the message and where it goes.
#[derive(Debug, Clone)]
pub struct Outgoing {
    pub id: Uuid,
    pub endpoint_id: i64,
    pub url: String,
    pub secret: String,
    pub payload: serde_json::Value,
    pub status: String,
}

/// Registers an endpoint.
pub async fn create(
    pool: &PgPool,
    url: &str,
    events: &[String],
    collection_id: Option<i64>,
    secret: &str,
) -> Result<Endpoint, sqlx::Error> {
    sqlx::query_as!(
        Endpoint,
        "insert into webhook_endpoints (url, events, collection_id, secret)
         values ($1, $2, $3, $4)
         returning id, url, events, collection_id, created_at",
        url,
        events,
        collection_id,
        secret,
    )
    .fetch_one(pool)
    .await
}

/// Every endpoint, oldest first.
pub async fn list(pool: &PgPool) -> Result<Vec<Endpoint>, sqlx::Error> {
    sqlx::query_as!(
        Endpoint,
        "select id, url, events, collection_id, created_at
         from webhook_endpoints order by id"
    )
    .fetch_all(pool)
    .await
}

/// One endpoint.
pub async fn get(pool: &PgPool, id: i64) -> Result<Option<Endpoint>, sqlx::Error> {
    sqlx::query_as!(
        Endpoint,
        "select id, url, events, collection_id, created_at
         from webhook_endpoints where id = $1",
        id
    )
    .fetch_optional(pool)
    .await
}

/// Deletes an endpoint and its deliveries; returns whether it existed.
pub async fn delete(pool: &PgPool, id: i64) -> Result<bool, sqlx::Error> {
    let deleted = sqlx::query!("delete from webhook_endpoints where id = $1", id)
        .execute(pool)
        .await?
        .rows_affected();
    Ok(deleted == 1)
}

/// The endpoints subscribed to `event` (on the caller's transaction).
pub async fn subscribers(
    conn: &mut PgConnection,
    event: &str,
    collection: CollectionId,
) -> Result<Vec<Subscriber>, sqlx::Error> {
    sqlx::query_as!(
        Subscriber,
        "select id from webhook_endpoints
         where $1 = any(events) and (collection_id is null or collection_id = $2)
         order by id",
        event,
        collection.0,
    )
    .fetch_all(conn)
    .await
}

/// Records a new delivery of `payload` to `endpoint`, delivered by job `job_id`.
pub async fn insert_delivery(
    conn: &mut PgConnection,
    id: Uuid,
    endpoint: i64,
    event: &str,
    payload: &serde_json::Value,
    job_id: i64,
) -> Result<(), sqlx::Error> {
    sqlx::query!(
        "insert into webhook_deliveries (id, endpoint_id, event_type, payload, job_id)
         values ($1, $2, $3, $4, $5)",
        id,
        endpoint,
        event,
        payload,
        job_id,
    )
    .execute(conn)
    .await?;
    Ok(())
}

/// The delivery `id` with its endpoint, if both still exist.
pub async fn outgoing(pool: &PgPool, id: Uuid) -> Result<Option<Outgoing>, sqlx::Error> {
    sqlx::query_as!(
        Outgoing,
        "select d.id, d.endpoint_id, e.url, e.secret, d.payload, d.status
         from webhook_deliveries d
         join webhook_endpoints e on e.id = d.endpoint_id
         where d.id = $1",
        id
    )
    .fetch_optional(pool)
    .await
}

/// An attempt failed with `error`; the delivery stays pending (the queue retries it).
pub async fn attempt_failed(pool: &PgPool, id: Uuid, error: &str) -> Result<(), sqlx::Error> {
    sqlx::query!(
        "update webhook_deliveries
         set attempts = attempts + 1, last_error = $2
         where id = $1",
        id,
        error
    )
    .execute(pool)
    .await?;
    Ok(())
}

/// The receiver answered 2xx; its job completes after this, in a batch of completions.
pub async fn delivered(executor: impl PgExecutor<'_>, id: Uuid) -> Result<(), sqlx::Error> {
    sqlx::query!(
        "update webhook_deliveries
         set status = 'delivered', attempts = attempts + 1, last_error = null,
             delivered_at = now()
         where id = $1",
        id
    )
    .execute(executor)
    .await?;
    Ok(())
}

/// The delivering job `job` ended without success (on the transaction that ended it): the
/// delivery is dead with `error`, unless a newer job delivers it now.
pub async fn dead(
    conn: &mut PgConnection,
    id: Uuid,
    job: i64,
    error: &str,
) -> Result<(), sqlx::Error> {
    sqlx::query!(
        "update webhook_deliveries
         set status = 'dead', last_error = $3
         where id = $1 and job_id = $2 and status = 'pending'",
        id,
        job,
        error
    )
    .execute(conn)
    .await?;
    Ok(())
}

/// The endpoint's most recent deliveries, newest first.
pub async fn recent(
    pool: &PgPool,
    endpoint: i64,
    limit: i64,
) -> Result<Vec<Delivery>, sqlx::Error> {
    sqlx::query_as!(
        Delivery,
        "select id, endpoint_id, event_type, status, attempts, last_error, created_at,
                updated_at, delivered_at
         from webhook_deliveries
         where endpoint_id = $1
         order by created_at desc, id
         limit $2",
        endpoint,
        limit
    )
    .fetch_all(pool)
    .await
}

/// One delivery of `endpoint`, locked (on the caller's transaction).
pub async fn lock_delivery(
    conn: &mut PgConnection,
    endpoint: i64,
    id: Uuid,
) -> Result<Option<Delivery>, sqlx::Error> {
    sqlx::query_as!(
        Delivery,
        "select id, endpoint_id, event_type, status, attempts, last_error, created_at,
                updated_at, delivered_at
         from webhook_deliveries
         where endpoint_id = $1 and id = $2
         for update",
        endpoint,
        id
    )
    .fetch_optional(conn)
    .await
}

/// A dead delivery goes again, by job `job_id` (on the transaction that enqueued it).
pub async fn restart(conn: &mut PgConnection, id: Uuid, job_id: i64) -> Result<(), sqlx::Error> {
    sqlx::query!(
        "update webhook_deliveries
         set status = 'pending', job_id = $2
         where id = $1",
        id,
        job_id
    )
    .execute(conn)
    .await?;
    Ok(())
}
