//! Wiring: one configuration in, a running process out. `serve` runs HTTP, workers,
//! maintenance and the scheduler loop; `worker` runs workers, maintenance and the scheduler loop
//! (one process leads the scheduler at a time, see [`crate::schedule::leader`]). Both stop gracefully on one shutdown
//! future (SIGINT/SIGTERM in the binary, anything in tests).

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use sqlx::postgres::PgPoolOptions;
use tokio_util::sync::CancellationToken;

use crate::config::{
    DatabaseConfig, PipelineSettings, ServeConfig, WorkerConfigArgs, WorkerSettings,
};
use crate::http::{self, AppState};
use crate::pipeline::{Pipeline, PipelineConcurrency};
use crate::queue::Queue;
use crate::worker::{JobError, Outcome, Registry, Worker};

/// Every migration, embedded in the binary.
pub static MIGRATOR: sqlx::migrate::Migrator = sqlx::migrate!("./migrations");

/// Connects to the database (waiting briefly for it) and applies pending migrations.
pub async fn connect(database: &DatabaseConfig) -> anyhow::Result<sqlx::PgPool> {
    let pool = PgPoolOptions::new()
        .max_connections(database.db_pool.max(4))
        .acquire_timeout(Duration::from_secs(10))
        .connect(&database.database_url)
        .await
        .context("connecting to PostgreSQL (DATABASE_URL)")?;
    Ok(pool)
}

/// Applies pending migrations. Safe to run from many processes at once: sqlx takes an
/// advisory lock.
pub async fn migrate(pool: &sqlx::PgPool) -> anyhow::Result<()> {
    MIGRATOR
        .run(pool)
        .await
        .context("applying database migrations")
}

/// Job kinds every docket process runs, besides the pipeline's.
pub mod builtin {
    /// Does nothing: for smoke tests and the queue benchmark.
    pub const NOOP: &str = "noop";
    /// Sleeps `{"ms": n}` milliseconds: a job that takes time, for trying out leases, crashes
    /// and shutdown.
    pub const SLEEP: &str = "sleep";
}

/// Builds the pipeline from its settings and registers its model version.
pub async fn pipeline(
    pool: &sqlx::PgPool,
    settings: &PipelineSettings,
) -> anyhow::Result<Arc<Pipeline>> {
    if let Some(warning) = settings.embedder_warning() {
        tracing::warn!("{warning}");
    }
    let embedder = settings.embedder()?;
    if let crate::embed::Embedder::Local(local) = &embedder {
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
    let mut pipeline = Pipeline::new(
        pool.clone(),
        embedder,
        settings.chunking(),
        settings.pdf_limits()?,
    );
    pipeline.ocr_concurrency = settings.ocr_concurrency.max(1);
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
        && settings.follows_default_model()
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

/// The handlers this build runs: the pipeline's and the built-in ones.
pub fn registry(
    settings: &WorkerSettings,
    pipeline: &Arc<Pipeline>,
    concurrency: PipelineConcurrency,
) -> Registry {
    let mut registry = Registry::new();
    pipeline.register(&mut registry, concurrency);
    registry.register(builtin::NOOP, settings.concurrency, |_job| async {
        Ok(Outcome::Complete)
    });
    registry.register(builtin::SLEEP, settings.concurrency, |job| async move {
        #[derive(serde::Deserialize)]
        struct Sleep {
            ms: u64,
        }
        let sleep: Sleep = job.payload()?;
        if sleep.ms > 3_600_000 {
            return Err(JobError::Fatal(anyhow::anyhow!(
                "a sleep job sleeps at most one hour"
            )));
        }
        tokio::time::sleep(Duration::from_millis(sleep.ms)).await;
        Ok(Outcome::Complete)
    });
    registry
}

/// A built `serve` process: bound, connected, migrated; not yet running.
pub struct App {
    listener: tokio::net::TcpListener,
    /// Stops the event listener (and with it every open event stream) at shutdown.
    events_stop: CancellationToken,
    state: AppState,
    registry: Registry,
    settings: WorkerSettings,
    run_workers: bool,
}

impl App {
    /// Validates `config`, connects, migrates and binds.
    pub async fn build(config: ServeConfig) -> anyhow::Result<App> {
        config.validate()?;
        let pool = connect(&config.database).await?;
        migrate(&pool).await?;
        let queue = Queue::new(pool.clone(), config.worker.lease());
        let pipeline = pipeline(&pool, &config.pipeline).await?;
        let registry = registry(&config.worker, &pipeline, config.pipeline.concurrency());
        let listener = tokio::net::TcpListener::bind(config.bind)
            .await
            .with_context(|| format!("binding {}", config.bind))?;
        let events_stop = CancellationToken::new();
        let guard = Arc::new(config.guard()?);
        let mut searcher = crate::search::Searcher::new(
            pool.clone(),
            pipeline.embedder.clone(),
            pipeline.model.clone(),
        );
        if let Some(replicas) = search_replicas(&pool, &config)? {
            searcher = searcher.with_replicas(replicas);
        }
        let state = AppState {
            searcher: Arc::new(searcher),
            events: http::EventHub::start(pool.clone(), events_stop.clone()),
            pool,
            queue,
            job_kinds: Arc::new(registry.kinds().map(str::to_owned).collect()),
            api_token: config
                .api_token
                .filter(|t| !t.is_empty())
                .map(|t| Arc::from(t.as_str())),
            max_upload_bytes: config.max_upload_bytes,
            embedder_warning: config.pipeline.embedder_warning().map(Arc::from),
            guard,
        };
        Ok(App {
            listener,
            events_stop,
            state,
            registry,
            settings: config.worker,
            run_workers: !config.no_workers,
        })
    }

    /// The address actually bound (port 0 becomes a real port).
    pub fn local_addr(&self) -> std::io::Result<SocketAddr> {
        self.listener.local_addr()
    }

    /// Serves until `shutdown` resolves, then stops HTTP and workers gracefully.
    pub async fn run_until_stopped(
        self,
        shutdown: impl std::future::Future<Output = ()> + Send + 'static,
    ) -> anyhow::Result<()> {
        let stop = CancellationToken::new();
        let router = http::router(self.state.clone());
        let server = tokio::spawn(http::serve(
            self.listener,
            router,
            stop.clone().cancelled_owned(),
        ));
        let background = self.run_workers.then(|| {
            spawn_background(
                &self.state.queue,
                self.registry,
                &self.settings,
                stop.clone(),
            )
        });
        tracing::info!("docket is serving");
        shutdown.await;
        stop.cancel();
        self.events_stop.cancel();
        if let Some(background) = background {
            background.await;
        }
        server
            .await
            .context("the HTTP server task failed")?
            .context("the HTTP server failed")?;
        Ok(())
    }
}

/// The read replicas of `DOCKET_SEARCH_DATABASE_URL`, probed in the background and reported
/// in `/metrics`; `None` when there are none.
fn search_replicas(
    primary: &sqlx::PgPool,
    config: &ServeConfig,
) -> anyhow::Result<Option<Arc<crate::search::Replicas>>> {
    let urls = config.http.search.replica_urls();
    if urls.is_empty() {
        return Ok(None);
    }
    let replicas = crate::search::Replicas::new(
        primary.clone(),
        &urls,
        config.database.db_pool.max(4),
        config.http.search.max_lag(),
        config.http.search.probe_every(),
    )
    .context("DOCKET_SEARCH_DATABASE_URL")?;
    replicas.spawn_probe();
    crate::metrics::global().watch_replicas(&replicas);
    tracing::info!(
        replicas = urls.len(),
        max_lag_ms = config.http.search.search_max_lag_ms,
        "searches go to read replicas"
    );
    Ok(Some(replicas))
}

/// Runs `docket worker`: workers and maintenance until `shutdown`.
pub async fn run_worker(
    config: WorkerConfigArgs,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> anyhow::Result<()> {
    config.validate()?;
    let pool = connect(&config.database).await?;
    migrate(&pool).await?;
    let pipeline = pipeline(&pool, &config.pipeline).await?;
    let registry = registry(&config.worker, &pipeline, config.pipeline.concurrency());
    let queue = Queue::new(pool, config.worker.lease());
    let stop = CancellationToken::new();
    let background = spawn_background(&queue, registry, &config.worker, stop.clone());
    shutdown.await;
    stop.cancel();
    background.await;
    Ok(())
}

/// Starts the worker and the maintenance loops; the returned future ends when both have
/// stopped after `stop`.
fn spawn_background(
    queue: &Queue,
    registry: Registry,
    settings: &WorkerSettings,
    stop: CancellationToken,
) -> impl std::future::Future<Output = ()> + use<> {
    let worker = Worker::new(queue.clone(), registry, settings.worker_config());
    let worker = tokio::spawn(worker.run(stop.clone().cancelled_owned()));
    let maintenance = tokio::spawn(crate::maintenance::run(
        queue.clone(),
        settings.maintenance(),
        stop.clone(),
    ));
    let scheduler = (!settings.no_scheduler).then(|| {
        let scheduler = crate::schedule::Scheduler::new(queue.pool().clone(), settings.scheduler());
        tokio::spawn(scheduler.run(stop))
    });
    async move {
        if let Some(scheduler) = scheduler
            && let Err(err) = scheduler.await
        {
            tracing::error!(error = %err, "the scheduler task failed");
        }
        if let Err(err) = worker.await {
            tracing::error!(error = %err, "the worker task failed");
        }
        if let Err(err) = maintenance.await {
            tracing::error!(error = %err, "the maintenance task failed");
        }
    }
}

/// Resolves on SIGINT or SIGTERM.
pub async fn shutdown_signal() {
    let interrupt = async {
        if let Err(err) = tokio::signal::ctrl_c().await {
            tracing::error!(error = %err, "cannot listen for SIGINT");
            std::future::pending::<()>().await;
        }
    };
    let terminate = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut signal) => {
                signal.recv().await;
            }
            Err(err) => {
                tracing::error!(error = %err, "cannot listen for SIGTERM");
                std::future::pending::<()>().await;
            }
        }
    };
    tokio::select! {
        () = interrupt => {}
        () = terminate => {}
    }
    tracing::info!("shutdown requested");
}
