//! The embed step: a document's chunks become vectors under one model version.
//!
//! Resumable: each batch of vectors is upserted as soon as the provider returns it, and a
//! (re)started job embeds only the chunks that have no vector yet under this version. The set
//! row, the document's `ready` status and this job's completion commit together at the end.
//! Every vector is written only onto a chunk whose content hash is still that of the text it was
//! made from, so a job overtaken by a reprocess writes nothing stale (and a reprocess or delete
//! also cancels it: it stops at its next heartbeat).
//!
//! Text is never paid for twice under one version: chunks whose content hash already has a
//! vector under the version (in any document) get a copy before anything is sent, and repeated
//! text within one request is sent once. The job may name any registered version this process
//! can build an embedder for ([`Pipeline::embedder_for`]).

use std::sync::Arc;
use std::time::Duration;

use pgvector::Vector;
use serde::Deserialize;

use super::Pipeline;
use crate::documents::{self, DocumentId, EMBED_JOB};
use crate::embed::EmbedError;
use crate::queue;
use crate::worker::{Job, JobError, Outcome, ResultExt};

#[derive(Deserialize)]
struct Payload {
    document_id: DocumentId,
    model_version: String,
}

/// How long to wait when a provider says "slow down" without saying for how long.
const DEFAULT_RATE_LIMIT_WAIT: Duration = Duration::from_secs(20);

pub(super) async fn run(pipeline: Arc<Pipeline>, job: Job) -> Result<Outcome, JobError> {
    let Payload {
        document_id,
        model_version,
    } = job.payload()?;
    let pool = &pipeline.pool;
    let Some(version) = crate::models::get(pool, &model_version).await.retryable()? else {
        return Err(JobError::Fatal(anyhow::anyhow!(
            "model version {model_version} is not registered"
        )));
    };
    // A process embeds its own version and the versions it can build from its configuration
    // (see Pipeline::embedder_for), and claims only those; one it claimed all the same (a version
    // registered since its last claim, or an older binary's claim filter) goes back for a process
    // that can, without spending an attempt. During a model switch mixed fleets are normal.
    let embedder = pipeline
        .embedder_for(&version)
        .map_err(|reason| JobError::Elsewhere { reason })?;

    // Never pay twice for the same text: a chunk whose text already has a vector under this
    // version (in any document) gets a copy of it.
    let copied = sqlx::query(
        "insert into embeddings (document_id, model_version, chunk_index, embedding)
         select c.document_id, $2, c.chunk_index, source.embedding
         from chunks c
         cross join lateral (
             select e.embedding
             from chunks o
             join embeddings e
               on e.document_id = o.document_id
              and e.chunk_index = o.chunk_index
              and e.model_version = $2
             where o.content_hash = c.content_hash
             limit 1) source
         where c.document_id = $1
           and not exists (
               select 1 from embeddings x
               where x.document_id = c.document_id
                 and x.model_version = $2
                 and x.chunk_index = c.chunk_index)
         on conflict (document_id, model_version, chunk_index) do nothing",
    )
    .bind(document_id.0)
    .bind(&model_version)
    .execute(pool)
    .await
    .retryable()?
    .rows_affected();
    crate::metrics::global().embeddings_reused(&model_version, copied);

    let missing: Vec<(i32, String, Vec<u8>)> = sqlx::query_as(
        "select c.chunk_index, c.text, c.content_hash
         from chunks c
         where c.document_id = $1
           and not exists (
               select 1 from embeddings e
               where e.document_id = c.document_id
                 and e.model_version = $2
                 and e.chunk_index = c.chunk_index)
         order by c.chunk_index",
    )
    .bind(document_id.0)
    .bind(&model_version)
    .fetch_all(pool)
    .await
    .retryable()?;

    for batch in missing.chunks(embedder.max_batch().max(1)) {
        // Repeated text within a batch is sent once.
        let mut texts: Vec<String> = Vec::with_capacity(batch.len());
        let mut slots: Vec<usize> = Vec::with_capacity(batch.len());
        for (_, text, _) in batch {
            let slot = match texts.iter().position(|t| t == text) {
                Some(slot) => slot,
                None => {
                    texts.push(text.clone());
                    texts.len() - 1
                }
            };
            slots.push(slot);
        }
        let started = std::time::Instant::now();
        let result = embedder.embed(&texts).await;
        let outcome = match &result {
            Ok(_) => "ok",
            Err(err) if err.is_rate_limited() => "rate_limited",
            Err(err) => err.code(),
        };
        crate::metrics::global().embedding_call(&model_version, outcome, started.elapsed());
        let unique = match result {
            Ok(vectors) => vectors,
            Err(err) => return Err(embedding_failed(&pipeline, &job, document_id, err).await),
        };
        let indexes: Vec<i32> = batch.iter().map(|(index, _, _)| *index).collect();
        let hashes: Vec<&[u8]> = batch.iter().map(|(_, _, hash)| hash.as_slice()).collect();
        let vectors: Vec<Vector> = slots
            .iter()
            .filter_map(|slot| unique.get(*slot))
            .map(|v| Vector::from(v.clone()))
            .collect();
        // A checkpoint per batch: a crash after this point does not pay for these again.
        // Fenced by content hash: a vector lands only on a chunk that still holds the text it
        // was made from, so a reprocess that replaced the chunks meanwhile never receives the
        // old text's vectors under the new chunks' indexes.
        let written = sqlx::query(
            "insert into embeddings (document_id, model_version, chunk_index, embedding)
             select $1, $2, input.chunk_index, input.embedding
             from unnest($3::int[], $4::vector[], $5::bytea[])
                  as input(chunk_index, embedding, content_hash)
             join chunks c
               on c.document_id = $1
              and c.chunk_index = input.chunk_index
              and c.content_hash = input.content_hash
             on conflict (document_id, model_version, chunk_index)
             do update set embedding = excluded.embedding",
        )
        .bind(document_id.0)
        .bind(&model_version)
        .bind(&indexes)
        .bind(&vectors)
        .bind(&hashes)
        .execute(pool)
        .await
        .retryable()?
        .rows_affected();
        if written < indexes.len() as u64 {
            // The text changed under us: stop paying for stale text and start over.
            return Err(JobError::Retry {
                error: anyhow::anyhow!(
                    "the chunks changed while embedding ({written} of {} vectors still matched their text)",
                    indexes.len()
                ),
                after: Some(Duration::from_secs(1)),
            });
        }
    }

    let mut tx = pool.begin().await.retryable()?;
    let counts: Option<(i64, i64)> = sqlx::query_as(
        "select
             (select count(*) from chunks where document_id = $1),
             (select count(*) from embeddings where document_id = $1 and model_version = $2)
         from documents
         where id = $1",
    )
    .bind(document_id.0)
    .bind(&model_version)
    .fetch_optional(&mut *tx)
    .await
    .retryable()?;
    let Some((chunks, embedded)) = counts else {
        // The document was deleted meanwhile.
        return Ok(Outcome::Complete);
    };
    if chunks != embedded {
        // The chunks changed under us (a reprocess); this job's view is stale, try again.
        return Err(JobError::Retry {
            error: anyhow::anyhow!(
                "{embedded} of {chunks} chunks have vectors; the chunks changed while embedding"
            ),
            after: Some(Duration::from_secs(1)),
        });
    }
    sqlx::query(
        "insert into embedding_sets (document_id, model_version, chunk_count, completed_at)
         values ($1, $2, $3, now())
         on conflict (document_id, model_version)
         do update set chunk_count = excluded.chunk_count, completed_at = excluded.completed_at",
    )
    .bind(document_id.0)
    .bind(&model_version)
    .bind(i32::try_from(chunks).unwrap_or(i32::MAX))
    .execute(&mut *tx)
    .await
    .retryable()?;
    // Not while a newer extraction is pending or running: its chunks replace these, and the
    // document is ready only once they are embedded.
    sqlx::query(
        "update documents
         set status = 'ready', error = null
         where id = $1
           and status in ('embedding', 'ready', 'failed')",
    )
    .bind(document_id.0)
    .execute(&mut *tx)
    .await
    .retryable()?;
    queue::complete_in(&mut tx, &job.lease).await.retryable()?;
    tx.commit().await.retryable()?;
    tracing::info!(document = %document_id, chunks, embedded_now = missing.len(), copied, %model_version, "embedded");
    Ok(Outcome::CompletedInTransaction)
}

/// Maps a provider failure to the job's fate; permanent ones also fail the document.
async fn embedding_failed(
    pipeline: &Pipeline,
    job: &Job,
    id: DocumentId,
    err: EmbedError,
) -> JobError {
    if err.is_rate_limited() {
        return JobError::RateLimited {
            reason: err.to_string(),
            after: err.retry_after().unwrap_or(DEFAULT_RATE_LIMIT_WAIT),
        };
    }
    if !err.is_permanent() {
        return JobError::Retry {
            after: err.retry_after(),
            error: anyhow::Error::new(err),
        };
    }
    let settled = documents::settle_failed_step(
        &pipeline.pool,
        id,
        job.id,
        EMBED_JOB,
        err.code(),
        &err.to_string(),
    )
    .await;
    if let Err(db) = settled {
        return JobError::Retry {
            error: anyhow::Error::new(db).context("recording the embedding failure"),
            after: None,
        };
    }
    JobError::Fatal(anyhow::Error::new(err))
}
