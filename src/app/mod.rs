//! Wiring: one configuration in, a running process out. `serve` runs HTTP, workers,
//! maintenance and the scheduler loop; `worker` runs workers, maintenance and the scheduler loop
//! (one process leads the scheduler at a time, see [`crate::schedule::leader`]). Both stop
//! gracefully on one shutdown future (SIGINT/SIGTERM in the binary, anything in tests).
//!
//! The configuration is plain data; what takes I/O to build from it is built here: the
//! embedder and the PDF limits ([`embedder`]), the pipeline and the handlers ([`pipeline()`], [`registry()`]),
//! the HTTP state ([`AppState::builder`]). `connect` and `migrate` are [`crate::db`]'s.

mod embedder;
mod pipeline;

use std::net::SocketAddr;
use std::sync::Arc;

use anyhow::Context;
use tokio_util::sync::CancellationToken;

use crate::config::{ServeConfig, WorkerConfigArgs, WorkerSettings};
use crate::http::{self, AppState};
use crate::queue::Queue;
use crate::worker::{Registry, Worker};

pub use embedder::{EmbedderChoice, extract_settings};
pub use pipeline::{pipeline, pipeline_with, registry};

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
        let pool =
            crate::db::connect(&config.database.database_url, config.database.db_pool).await?;
        crate::db::migrate(&pool).await?;
        let choice = EmbedderChoice::of(&config.pipeline);
        let pipeline = pipeline_with(&pool, &config.pipeline, &choice).await?;
        let registry = registry(&config.worker, &pipeline, &config.pipeline.concurrency());
        let listener = tokio::net::TcpListener::bind(config.bind)
            .await
            .with_context(|| format!("binding {}", config.bind))?;
        let mut searcher = crate::search::Searcher::new(
            pool.clone(),
            pipeline.embedder.clone(),
            pipeline.model.clone(),
        )
        .with_min_relevance(config.http.search.min_relevance);
        if let Some(replicas) = search_replicas(&pool, &config)? {
            searcher = searcher.with_replicas(replicas);
        }
        let events_stop = CancellationToken::new();
        let state = AppState::builder(pool.clone(), Arc::new(searcher))
            .queue(queue_for(pool, &config.worker, &registry))
            .job_kinds(registry.kinds())
            .api_token(config.api_token.as_deref())
            .max_upload_bytes(config.max_upload_bytes)
            .embedder_warning(choice.warning.as_deref())
            .guard(config.guard()?)
            .webhook_targets(pipeline.webhooks.targets().clone())
            .start(events_stop.clone());
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
    let pool = crate::db::connect(&config.database.database_url, config.database.db_pool).await?;
    crate::db::migrate(&pool).await?;
    let pipeline = pipeline(&pool, &config.pipeline).await?;
    let registry = registry(&config.worker, &pipeline, &config.pipeline.concurrency());
    let queue = queue_for(pool, &config.worker, &registry);
    let stop = CancellationToken::new();
    let background = spawn_background(&queue, registry, &config.worker, stop.clone());
    shutdown.await;
    stop.cancel();
    background.await;
    Ok(())
}

/// The process's queue: the workers' lease, and the registered kinds' end hooks, so every job
/// it kills or cancels (a worker's failure, the rescuer, a person) settles what it worked on.
fn queue_for(pool: sqlx::PgPool, settings: &WorkerSettings, registry: &Registry) -> Queue {
    Queue::new(pool, settings.lease()).with_ends(Arc::new(registry.table().clone()))
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
