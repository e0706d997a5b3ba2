//! The reembed step: finds documents whose embedding set for a model version (the active one by
//! default) is missing or incomplete, and enqueues their embed jobs in batches.
//!
//! "Incomplete" covers a new model version, runs that failed, and chunks that changed (a
//! reprocess): see the `embedding_sets_complete` view. Each embed job's idempotency key names
//! the version, the document, a digest of its current chunks and the UTC day, and documents that
//! already have an embed job waiting or running for the version are passed over, so two runs on
//! the same night enqueue the work once, and the next night retries what still failed.
//!
//! [`plan`] answers "what will the next run send?" without enqueueing anything: the chunks with
//! no vector under the version whose text the embedding cache does not hold under it (those are
//! taken from it, not sent; see the embed step), and their estimated tokens.

use std::collections::HashSet;
use std::sync::Arc;

use chrono::{DateTime, Utc};
use serde::Serialize;
use sqlx::PgPool;

use super::Pipeline;
use super::jobs::{EmbedCause, EmbedJob, ReembedJob, in_collection};
use crate::collections::CollectionId;
use crate::documents::DocumentId;
use crate::queue::payload::JobPayload;
use crate::queue::{self, NewJob, by_payload};
use crate::worker::{Job, JobError, Outcome, ResultExt};

/// Documents looked at per batch (one statement and one transaction each).
const BATCH: i64 = 500;

/// What a reembed run would do, or did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct ReembedPlan {
    /// Documents whose set is missing or incomplete.
    pub documents: i64,
    /// Chunks whose text must be sent to the provider (the embedding cache holds the rest).
    pub chunks: i64,
    /// Their estimated tokens.
    pub tokens: i64,
}

/// A checked query that starts with the `stale` relation, the documents that need embedding
/// under `$1` (they have chunks, are not being extracted, and have no complete set under the
/// version), and goes on with `$rest`; one definition for the run and its plan.
macro_rules! query_with_stale {
    ($rest:literal $(, $arg:expr)* $(,)?) => {
        sqlx::query!(
            "with stale as (
                 select d.id
                 from documents d
                 where d.status not in ('uploaded', 'extracting')
                   and exists (select 1 from chunks c where c.document_id = d.id)
                   and not exists (
                       select 1 from embedding_sets_complete s
                       where s.document_id = d.id and s.model_version = $1))
             " + $rest
            $(, $arg)*
        )
    };
}

pub(super) async fn run(
    pipeline: Arc<Pipeline>,
    _job: Job,
    payload: ReembedJob,
) -> Result<Outcome, JobError> {
    let pool = &pipeline.pool;
    let version = match payload.model_version {
        Some(version) => Some(version),
        None => crate::models::active(pool)
            .await
            .retryable()?
            .map(|m| m.model_version),
    };
    let Some(version) = version else {
        tracing::info!("no active model version; nothing to re-embed");
        return Ok(Outcome::Complete);
    };
    let enqueued = enqueue_stale(pool, &version, Utc::now())
        .await
        .retryable()?;
    tracing::info!(model_version = %version, enqueued, "reembed enqueued embed jobs");
    Ok(Outcome::Complete)
}

/// Enqueues an embed job under `model_version` for every stale document that has none waiting,
/// in batches; returns how many jobs were new. `now` picks the day in the idempotency key.
pub async fn enqueue_stale(
    pool: &PgPool,
    model_version: &str,
    now: DateTime<Utc>,
) -> Result<u64, queue::QueueError> {
    let day = now.format("%Y-%m-%d").to_string();
    let mut after = 0i64;
    let mut created = 0u64;
    loop {
        let batch = query_with_stale!(
            r#"select stale.id as "id!",
                      (select d.collection_id from documents d where d.id = stale.id)
                          as "collection!: CollectionId",
                      (select md5(string_agg(encode(c.content_hash, 'hex'), ',' order by c.chunk_index))
                       from chunks c where c.document_id = stale.id) as "digest!"
               from stale
               where stale.id > $2
               order by stale.id
               limit $3"#,
            model_version,
            after,
            BATCH,
        )
        .fetch_all(pool)
        .await?;
        let Some(last) = batch.last() else {
            return Ok(created);
        };
        after = last.id;
        // Documents that already have an embed job waiting or running for the version are
        // passed over: that job brings them up to date.
        let ids: Vec<i64> = batch.iter().map(|stale| stale.id).collect();
        let pending: HashSet<i64> = by_payload::pending_among(
            pool,
            EmbedJob::KIND,
            "document_id",
            &ids,
            "model_version",
            model_version,
        )
        .await?
        .into_iter()
        .collect();
        let jobs = batch
            .iter()
            .filter(|stale| !pending.contains(&stale.id))
            .map(|stale| {
                let embed = EmbedJob {
                    document_id: DocumentId(stale.id),
                    model_version: model_version.to_owned(),
                };
                let cause = EmbedCause::Reembed {
                    chunks: stale.digest.clone(),
                    day: day.clone(),
                };
                NewJob::of(&embed, &cause).map(|job| in_collection(job, stale.collection))
            })
            .collect::<Result<Vec<NewJob>, _>>()?;
        let mut tx = pool.begin().await?;
        created += queue::enqueue_many(&mut tx, &jobs).await?;
        tx.commit().await?;
        if (batch.len() as i64) < BATCH {
            return Ok(created);
        }
    }
}

/// What a reembed run under `model_version` would send now.
pub async fn plan(pool: &PgPool, model_version: &str) -> Result<ReembedPlan, sqlx::Error> {
    let plan = query_with_stale!(
        r#", missing as (
             select c.content_hash, c.token_count
             from chunks c
             join stale on stale.id = c.document_id
             where not exists (
                 select 1 from embeddings e
                 where e.document_id = c.document_id
                   and e.model_version = $1
                   and e.chunk_index = c.chunk_index)),
         to_send as (
             select distinct on (m.content_hash) m.content_hash, m.token_count
             from missing m
             where not exists (
                 select 1 from embedding_cache k
                 where k.model_version = $1 and k.text_sha256 = m.content_hash))
         select (select count(*) from stale) as "documents!",
                count(*) as "chunks!",
                coalesce(sum(token_count), 0)::bigint as "tokens!"
         from to_send"#,
        model_version,
    )
    .fetch_one(pool)
    .await?;
    Ok(ReembedPlan {
        documents: plan.documents,
        chunks: plan.chunks,
        tokens: plan.tokens,
    })
}

/// What `schedule`'s next run would send now, for the nightly re-embedding: the [`plan`] under
/// the active model version (`None` for any other schedule, or while no version is active).
/// The schedule views show it as `next_run_sends`.
pub async fn next_run_sends(
    pool: &PgPool,
    schedule: &crate::schedule::Schedule,
) -> Result<Option<ReembedPlan>, sqlx::Error> {
    if schedule.name != crate::schedule::NIGHTLY_REEMBED {
        return Ok(None);
    }
    let Some(active) = crate::models::active(pool).await? else {
        return Ok(None);
    };
    plan(pool, &active.model_version).await.map(Some)
}
