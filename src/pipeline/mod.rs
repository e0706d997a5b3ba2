//! The pipeline: the job handlers that turn an uploaded document into searchable vectors.
//!
//! `extract` (bytes → pages → chunks) then `embed` (chunks → vectors for one model version).
//! Each step is a durable checkpoint: its output, the next step's job and its own completion
//! commit in one transaction, fenced by the job's lease. A crash resumes from the last
//! checkpoint: extraction reruns as a whole (it is one step), embedding resumes at the first
//! chunk without a vector, since every batch of vectors is committed as it arrives.
//!
//! No transaction stays open across an extraction or an embedding call.

pub mod chunk;
mod embed;
mod extract;

use std::sync::Arc;

use crate::documents::{self, DocumentId, EMBED_JOB, EXTRACT_JOB};
use crate::embed::Embedder;
use crate::extract::PdfLimits;
use crate::models::ModelVersion;
use crate::worker::{Job, JobError, Outcome, Registry};
use chunk::{ApproxTokens, ChunkConfig, TokenCounter};

/// What the pipeline's handlers need.
pub struct Pipeline {
    pub pool: sqlx::PgPool,
    pub embedder: Embedder,
    /// The version this process embeds under (derived from `embedder` and `chunking`).
    pub model: ModelVersion,
    pub chunking: ChunkConfig,
    /// How chunk sizes are counted: the local model's own tokenizer when that model embeds
    /// (its input is cut at a token limit, so counts must be exact), an estimate otherwise.
    pub tokens: Arc<dyn TokenCounter + Send + Sync>,
    pub pdf: PdfLimits,
}

/// How many jobs of each step run at once in one process.
#[derive(Debug, Clone, Copy)]
pub struct PipelineConcurrency {
    /// Extraction is CPU-bound (and PDFs run in child processes).
    pub extract: usize,
    /// Embedding mostly waits on the provider and the rate limiter.
    pub embed: usize,
}

impl Pipeline {
    /// A pipeline embedding with `embedder` under `chunking`.
    pub fn new(
        pool: sqlx::PgPool,
        embedder: Embedder,
        chunking: ChunkConfig,
        pdf: PdfLimits,
    ) -> Self {
        let model = ModelVersion::of(&embedder, &chunking);
        let tokens: Arc<dyn TokenCounter + Send + Sync> = match embedder.local_token_counter() {
            Some(local) => Arc::new(local),
            None => Arc::new(ApproxTokens),
        };
        Self {
            pool,
            embedder,
            model,
            chunking,
            tokens,
            pdf,
        }
    }

    /// Registers the model version this pipeline writes and makes it active when none is.
    pub async fn prepare(&self) -> Result<(), sqlx::Error> {
        crate::models::register(&self.pool, &self.model).await?;
        if crate::models::active(&self.pool).await?.is_none() {
            crate::models::activate(&self.pool, &self.model.model_version).await?;
        }
        Ok(())
    }

    /// Adds the pipeline's handlers to `registry`.
    pub fn register(self: &Arc<Self>, registry: &mut Registry, concurrency: PipelineConcurrency) {
        let pipeline = self.clone();
        registry.register(EXTRACT_JOB, concurrency.extract, move |job| {
            let pipeline = pipeline.clone();
            async move {
                let last = last_attempt(&job);
                let outcome = extract::run(pipeline.clone(), job).await;
                settle(&pipeline, last, outcome).await
            }
        });
        let pipeline = self.clone();
        registry.register(EMBED_JOB, concurrency.embed, move |job| {
            let pipeline = pipeline.clone();
            async move {
                let last = last_attempt(&job);
                let outcome = embed::run(pipeline.clone(), job).await;
                settle(&pipeline, last, outcome).await
            }
        });
    }
}

/// The document of a job that runs its last attempt, if the payload names one.
fn last_attempt(job: &Job) -> Option<DocumentId> {
    (job.attempt >= job.max_attempts)
        .then(|| job.payload::<DocumentRef>().ok().map(|r| r.document_id))
        .flatten()
}

#[derive(serde::Deserialize)]
struct DocumentRef {
    document_id: DocumentId,
}

/// A transient failure on the last attempt sends the job to `dead`: the document must say so
/// too, or it would show a step in progress forever.
async fn settle(
    pipeline: &Pipeline,
    last_attempt: Option<DocumentId>,
    outcome: Result<Outcome, JobError>,
) -> Result<Outcome, JobError> {
    if let (Some(id), Err(JobError::Retry { error, .. })) = (last_attempt, &outcome) {
        let message = format!("gave up after the last attempt: {error:#}");
        if let Err(err) =
            documents::set_failed(&pipeline.pool, id, "retries_exhausted", &message).await
        {
            tracing::error!(document = %id, error = %err, "could not mark the document failed");
        }
    }
    outcome
}
