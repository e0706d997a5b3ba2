//! Upload requests: one row of `uploads` per `POST /api/documents`, so that "every document of
//! this request has settled" is a fact the database can answer once.
//!
//! A request opens its upload before it stores any file and closes it after the last; only a
//! closed upload can settle, so a document that settles while its siblings are still arriving
//! cannot settle the request early. [`settle`] locks the upload's row, so of the transactions
//! that settle its documents at once exactly one sees the last one settled, and `settled_at`
//! makes that answer come once.

use serde::Serialize;
use sqlx::types::Json;
use sqlx::{PgConnection, PgPool};

use super::{Document, DocumentId, DocumentStatus, ExtractionNote};
use crate::collections::CollectionId;

/// An upload request's identity.
#[derive(
    utoipa::ToSchema,
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    Hash,
    Serialize,
    serde::Deserialize,
    sqlx::Type,
)]
#[serde(transparent)]
#[sqlx(transparent)]
pub struct UploadId(pub i64);

impl std::fmt::Display for UploadId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.0.fmt(f)
    }
}

/// A new, open upload request.
pub async fn open(pool: &PgPool) -> Result<UploadId, sqlx::Error> {
    sqlx::query_scalar!(r#"insert into uploads default values returning id as "id: UploadId""#)
        .fetch_one(pool)
        .await
}

/// The request has stored all its files (on the caller's transaction).
pub async fn close(conn: &mut PgConnection, id: UploadId) -> Result<(), sqlx::Error> {
    sqlx::query!(
        "update uploads set closed_at = coalesce(closed_at, now()) where id = $1",
        id.0
    )
    .execute(conn)
    .await?;
    Ok(())
}

/// Settles upload `id` if it is closed, not yet settled, and none of its documents is still in
/// the pipeline (on the caller's transaction, which changed one of them or closed it). Returns
/// its documents, ready or failed, when it settled now; `None` otherwise, and also for an
/// upload that created no document (all its files were duplicates or refused).
pub async fn settle(
    conn: &mut PgConnection,
    id: UploadId,
) -> Result<Option<Vec<Document>>, sqlx::Error> {
    let row = sqlx::query!(
        "select closed_at is not null as \"closed!\", settled_at is not null as \"settled!\"
         from uploads where id = $1
         for update",
        id.0
    )
    .fetch_optional(&mut *conn)
    .await?;
    let Some(row) = row else { return Ok(None) };
    if !row.closed || row.settled {
        return Ok(None);
    }
    let documents = documents_query!(
        "select",
        "from documents where upload_id = $1 order by id",
        id.0
    )
    .fetch_all(&mut *conn)
    .await?;
    let settled = |d: &Document| matches!(d.status, DocumentStatus::Ready | DocumentStatus::Failed);
    if !documents.iter().all(settled) {
        return Ok(None);
    }
    sqlx::query!("update uploads set settled_at = now() where id = $1", id.0)
        .execute(&mut *conn)
        .await?;
    Ok((!documents.is_empty()).then_some(documents))
}
