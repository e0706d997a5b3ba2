//! The `delete_collection` kind: a collection's documents leave through the same delete as one
//! document's (bytes, chunks and vectors cascade, their pipeline jobs are cancelled), a batch per
//! transaction, and the collection's row goes once it holds none.
//!
//! The collection is outside every caller's reach from the moment its deletion was asked
//! (`collections.deleting_since`), so nothing of it is seen while this runs. Running twice is
//! harmless: a batch deletes what is still there, and the last step finds nothing left.

use std::future::Future;
use std::sync::Arc;

use serde::{Deserialize, Serialize};

use super::Pipeline;
use super::intake::delete_documents;
use sqlx::PgPool;

use crate::collections::{self, CollectionError, CollectionId};
use crate::queue::payload::JobPayload;
use crate::queue::{self, Enqueued, NewJob};
use crate::worker::{Job, JobError, JobKind, Outcome, ResultExt};

/// Documents deleted per transaction.
const BATCH: i64 = 100;

/// Delete a collection and its documents: `{"collection_id": 2}`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct DeleteCollectionJob {
    pub collection_id: CollectionId,
}

impl JobPayload for DeleteCollectionJob {
    const KIND: &'static str = "delete_collection";
    /// One deletion per collection row: its id is never reused.
    type Cause = ();

    fn idempotency_key(&self, _: &()) -> Option<String> {
        Some(format!("delete_collection:{}", self.collection_id.0))
    }
}

/// One at a time: it is bulk work that nobody waits on.
impl JobKind for DeleteCollectionJob {
    type Context = Pipeline;

    fn run(
        pipeline: Arc<Pipeline>,
        _job: Job,
        payload: Self,
    ) -> impl Future<Output = Result<Outcome, JobError>> + Send {
        run(pipeline, payload)
    }
}

/// Marks the collection `name` as being deleted and enqueues the job that deletes its
/// documents, in one transaction: from its commit the collection is outside every reach.
pub async fn delete_collection(pool: &PgPool, name: &str) -> Result<Enqueued, CollectionError> {
    let mut tx = pool.begin().await?;
    let collection_id = collections::start_deleting(&mut *tx, name).await?;
    let enqueued = queue::enqueue(
        &mut tx,
        &NewJob::of(&DeleteCollectionJob { collection_id }, &())?,
    )
    .await?;
    tx.commit().await?;
    Ok(enqueued)
}

async fn run(pipeline: Arc<Pipeline>, payload: DeleteCollectionJob) -> Result<Outcome, JobError> {
    let pool = &pipeline.pool;
    loop {
        let batch = sqlx::query_scalar!(
            "select id from documents where collection_id = $1 order by id limit $2",
            payload.collection_id.0,
            BATCH,
        )
        .fetch_all(pool)
        .await
        .retryable()?;
        if batch.is_empty() {
            break;
        }
        delete_documents(pool, &batch).await.retryable()?;
    }
    collections::finish_deleting(pool, payload.collection_id)
        .await
        .retryable()?;
    Ok(Outcome::Complete)
}
