//! The pipeline: the job handlers that turn an uploaded document into searchable vectors.
//!
//! `extract` (bytes → pages → chunks; via `ocr` when pages need OCR) then `embed` (chunks → vectors for one model version);
//! `reembed` (run by the nightly schedule) enqueues `embed` for documents whose set under the
//! active version is missing or incomplete; `delete_collection` deletes a collection's
//! documents a batch at a time, then the collection.
//! Each step is a durable checkpoint: its output, the next step's job and its own completion
//! commit in one transaction, fenced by the job's lease. A crash resumes from the last
//! checkpoint: extraction reruns as a whole (it is one step), embedding resumes at the first
//! chunk without a vector, since every batch of vectors is committed as it arrives.
//!
//! No transaction stays open across an extraction or an embedding call.
//!
//! The pipeline owns its job kinds, each declared once on its payload type ([`ExtractJob`],
//! [`OcrJob`], [`EmbedJob`], [`ReembedJob`]: kind, payload, key, handler, concurrency, owner and
//! end hook) and listed once in [`declare`]. Documents enter through [`create_with_extract_job`]
//! and restart or leave through [`reprocess`] and [`delete_document`], which cancel every kind
//! that works on a document. A document's status moves only through the transitions of
//! [`crate::documents`].
//!
//! A document never shows a step in progress after that step's job ended: a handler that fails
//! for good records its readable reason, and every other end (rescued past its last attempt,
//! cancelled, a panic on the last attempt) settles the document through the kind's end hook, in
//! the transaction that ends the job. Neither lets a job speak for a document that has moved on
//! (a newer job of the step waits, or it is searchable already); see `settle`.

mod collection;
mod embed;
mod extract;
mod intake;
mod jobs;
mod note;
mod ocr;
pub mod reembed;
mod retry;
mod settle;

pub use collection::{DeleteCollectionJob, delete_collection};
pub use intake::{create_with_extract_job, delete_document, reprocess};
pub use jobs::{DOCUMENT_KEY, EmbedCause, EmbedJob, ExtractJob, OcrJob, ReembedJob};
pub use retry::retry_job;

use std::sync::Arc;

use crate::chunk::{ApproxTokens, ChunkConfig, TokenCounter};
use crate::embed::Embedder;
use crate::extract::ExtractSettings;
use crate::models::ModelVersion;
use crate::queue::PayloadFilter;
use crate::queue::payload::JobPayload;
use crate::worker::{Declare, Kinds, Registry};

/// The job kind that enqueues embed jobs for stale documents (see [`reembed`]); the built-in
/// nightly schedule names it.
pub const REEMBED_JOB: &str = ReembedJob::KIND;

/// The job kind that reads a document's pages with OCR.
pub const OCR_JOB: &str = OcrJob::KIND;

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
    pub extraction: ExtractSettings,
    /// Delivers the webhooks the pipeline's transitions announce (their kind runs beside the
    /// pipeline's own); targets checked with loopback refused unless [`Pipeline::with_webhooks`]
    /// says otherwise.
    pub webhooks: Arc<crate::webhooks::Deliverer>,
}

/// Every job kind of the pipeline, listed once: adding a kind is its file (a payload type with
/// its `JobPayload` and `JobKind`) and one line here.
pub fn declare(kinds: &mut impl Declare<Pipeline>) {
    kinds
        .kind::<ExtractJob>()
        .kind::<OcrJob>()
        .kind::<EmbedJob>()
        .kind::<ReembedJob>()
        .kind::<DeleteCollectionJob>();
}

/// The pipeline's kinds and the webhooks' (which its transitions enqueue) without their handlers: what a queue settles their ended jobs with,
/// and what a reprocess or delete cancels.
pub fn kinds() -> Kinds {
    let mut kinds = Kinds::new();
    declare(&mut kinds);
    crate::webhooks::declare(&mut kinds);
    kinds
}

impl Pipeline {
    /// A pipeline embedding with `embedder` under `chunking`.
    pub fn new(
        pool: sqlx::PgPool,
        embedder: Embedder,
        chunking: ChunkConfig,
        extraction: ExtractSettings,
    ) -> Self {
        let model = ModelVersion::of(&embedder, &chunking);
        let tokens: Arc<dyn TokenCounter + Send + Sync> = match embedder.local_token_counter() {
            Some(local) => Arc::new(local),
            None => Arc::new(ApproxTokens),
        };
        Self {
            webhooks: Arc::new(crate::webhooks::Deliverer::new(
                pool.clone(),
                crate::webhooks::Targets::default(),
            )),
            pool,
            embedder,
            model,
            chunking,
            tokens,
            extraction,
        }
    }

    /// Webhooks delivered to the targets `targets` permits.
    pub fn with_webhooks(mut self, targets: crate::webhooks::Targets) -> Self {
        self.webhooks = Arc::new(crate::webhooks::Deliverer::new(self.pool.clone(), targets));
        self
    }

    /// Registers the model version this pipeline writes and makes it active when none is.
    pub async fn prepare(&self) -> Result<(), sqlx::Error> {
        crate::models::register(&self.pool, &self.model).await?;
        if crate::models::active(&self.pool).await?.is_none() {
            crate::models::activate(&self.pool, &self.model.model_version).await?;
        }
        Ok(())
    }

    /// The embedder that produces `version`'s vectors in this process, or why there is none.
    ///
    /// A process embeds its own version and what [`crate::models::embedder_for`] can build from
    /// its configuration: any `hash:v1` version, and a version of this process's own provider,
    /// model and dimensions. Chunking is part of a version, and chunks are shared by all
    /// versions of a document, so a version whose chunking differs from this process's is refused:
    /// its vectors would be labelled with settings that did not make the chunks.
    pub fn embedder_for(&self, version: &ModelVersion) -> Result<Embedder, String> {
        if version.model_version == self.model.model_version {
            return Ok(self.embedder.clone());
        }
        let chunking_matches = usize::try_from(version.chunk_tokens).ok()
            == Some(self.chunking.target_tokens)
            && usize::try_from(version.chunk_overlap).ok() == Some(self.chunking.overlap_tokens);
        if !chunking_matches {
            return Err(format!(
                "model version {} chunks with {} tokens and {} overlap, but this process chunks with {} and {}; run a worker configured with that chunking",
                version.model_version,
                version.chunk_tokens,
                version.chunk_overlap,
                self.chunking.target_tokens,
                self.chunking.overlap_tokens
            ));
        }
        crate::models::embedder_for(version, &self.embedder).ok_or_else(|| {
            format!(
                "this process cannot embed under model version {}: it is configured for {}; run a worker with DOCKET_EMBEDDER and the provider settings of that version",
                version.model_version, self.model.model_version
            )
        })
    }

    /// The registered model versions this process cannot embed under: their embed jobs are left
    /// to processes that can (mixed fleets are normal during a model switch).
    async fn embed_claim_filter(&self) -> anyhow::Result<Option<PayloadFilter>> {
        let skipped: Vec<String> = crate::models::all(&self.pool)
            .await?
            .into_iter()
            .filter(|version| self.embedder_for(version).is_err())
            .map(|version| version.model_version)
            .collect();
        Ok((!skipped.is_empty()).then(|| PayloadFilter {
            key: "model_version".into(),
            skipped,
        }))
    }

    /// Adds the pipeline's kinds and the webhooks' delivery, with their handlers, to `registry`; embed jobs of versions
    /// this process cannot build are left to processes that can.
    pub fn register(self: &Arc<Self>, registry: &mut Registry) {
        declare(&mut registry.with(self.clone()));
        crate::webhooks::declare(&mut registry.with(self.webhooks.clone()));
        let pipeline = self.clone();
        registry.filter_claims(EmbedJob::KIND, move || {
            let pipeline = pipeline.clone();
            async move { pipeline.embed_claim_filter().await }
        });
    }
}
