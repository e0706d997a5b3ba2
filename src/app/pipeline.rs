//! The pipeline of a process, built from its settings: the embedder (see [`super::embedder`]),
//! the model version it registers, the built-in schedules, and the registry of handlers.

use std::sync::Arc;

use anyhow::Context;

use crate::config::{PipelineSettings, WorkerSettings};
use crate::pipeline::Pipeline;
use crate::worker::Registry;

use super::embedder::EmbedderChoice;

/// Builds the pipeline from its settings and registers its model version.
pub async fn pipeline(
    pool: &sqlx::PgPool,
    settings: &PipelineSettings,
) -> anyhow::Result<Arc<Pipeline>> {
    pipeline_with(pool, settings, &EmbedderChoice::of(settings)).await
}

/// [`pipeline`] with the embedder already chosen.
pub async fn pipeline_with(
    pool: &sqlx::PgPool,
    settings: &PipelineSettings,
    choice: &EmbedderChoice,
) -> anyhow::Result<Arc<Pipeline>> {
    if let Some(warning) = &choice.warning {
        tracing::warn!("{warning}");
    }
    let embedder = choice.embedder(settings)?;
    log_local_model(&embedder, settings);
    let pipeline = Pipeline::new(
        pool.clone(),
        embedder,
        settings.chunking(),
        super::embedder::extract_settings(settings)?,
    )
    .with_webhooks(crate::webhooks::Targets::new(
        settings.webhook_allow_loopback,
    ));
    register_model_version(pool, &pipeline, choice).await?;
    // DOCKET_RPM / DOCKET_TPM are the provider's limits, shared by every process using it.
    if pipeline.embedder.share_rate_budget(pool) {
        tracing::info!("embedding rate limits are shared by the fleet (rate_budgets)");
    }
    if let Some(limiter) = pipeline.embedder.limiter() {
        crate::metrics::global().watch_limiter(limiter);
    }
    let builtins = [crate::schedule::BuiltinSchedule::nightly_reembed(
        crate::pipeline::REEMBED_JOB,
    )];
    crate::schedule::store::ensure_builtin(pool, &builtins, chrono::Utc::now())
        .await
        .context("creating the built-in schedules")?;
    Ok(Arc::new(pipeline))
}

/// Says which local model was loaded, and warns when chunks are longer than it reads.
fn log_local_model(embedder: &crate::embed::Embedder, settings: &PipelineSettings) {
    let crate::embed::Embedder::Local(local) = embedder else {
        return;
    };
    tracing::info!(
        model = %local.model_id(),
        threads = local.threads(),
        "local embedding model loaded"
    );
    // Two of the model's tokens are [CLS] and [SEP]; a chunk longer than the rest is cut.
    if settings.chunk_tokens + 2 > local.max_tokens() {
        tracing::warn!(
            chunk_tokens = settings.chunk_tokens,
            max_tokens = local.max_tokens(),
            "DOCKET_CHUNK_TOKENS exceeds what the local model reads; chunk ends will be ignored"
        );
    }
}

/// Registers the pipeline's model version and, on the first start of a process that follows
/// a changed default model, makes that version the active one.
async fn register_model_version(
    pool: &sqlx::PgPool,
    pipeline: &Pipeline,
    choice: &EmbedderChoice,
) -> anyhow::Result<()> {
    let first_start = crate::models::get(pool, &pipeline.model.model_version)
        .await
        .context("looking up the embedding model version")?
        .is_none();
    pipeline
        .prepare()
        .await
        .context("registering the embedding model version")?;
    if let Some(previous) = crate::config::PREVIOUS_DEFAULT_MODEL
        && first_start
        && choice.follows_default
        && crate::models::adopt_default(pool, &pipeline.model, previous)
            .await
            .context("moving to the new default model")?
    {
        tracing::info!(
            model_version = %pipeline.model.model_version,
            "docket's default local model changed: this version is now active; documents move \
             over as nightly-reembed fills their sets, and are searched under {previous} until then"
        );
    }
    tracing::info!(model_version = %pipeline.model.model_version, "embedding model version");
    Ok(())
}

/// The handlers this build runs: the pipeline's and the built-in ones, with `concurrency`
/// (settings by kind) over the kinds' own defaults.
pub fn registry(
    settings: &WorkerSettings,
    pipeline: &Arc<Pipeline>,
    concurrency: &[(&str, usize)],
) -> Registry {
    let mut registry = Registry::new();
    pipeline.register(&mut registry);
    crate::worker::builtin::register(&mut registry, settings.concurrency);
    for &(kind, n) in concurrency {
        registry.set_concurrency(kind, n);
    }
    registry
}
