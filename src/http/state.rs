//! [`AppState`], what every handler reaches, and the one way to build it: the app, the tests
//! and the benchmarks all start from [`AppState::builder`], so a new field gets one default in
//! one place.

use std::sync::Arc;
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use super::{EventHub, Guard};
use crate::queue::Queue;
use crate::search::Searcher;

/// What every handler can reach. Cheap to clone.
#[derive(Clone)]
pub struct AppState {
    pub pool: sqlx::PgPool,
    pub queue: Queue,
    /// Job kinds this deployment runs; `POST /api/jobs` accepts only these.
    pub job_kinds: Arc<Vec<String>>,
    /// When set, `/api` requires `Authorization: Bearer <token>`.
    pub api_token: Option<Arc<str>>,
    /// Largest file accepted in an upload.
    pub max_upload_bytes: u64,
    /// Searches with the pipeline's embedder (and the hash embedders of older versions).
    pub searcher: Arc<Searcher>,
    /// Why this process's embedder is a fallback, when it is one (`/api/info`, the page).
    pub embedder_warning: Option<Arc<str>>,
    /// The one LISTEN connection of this process, fanned out to `/api/events` streams.
    pub events: EventHub,
    /// What every request is checked against before any handler runs.
    pub guard: Arc<Guard>,
    /// Where webhooks may be registered to (the deliveries check again, in the workers).
    pub webhook_targets: crate::webhooks::Targets,
}

impl AppState {
    /// A state over `pool` that searches with `searcher`. Unless set: a queue with a 60 s
    /// lease that settles the pipeline's ended jobs, the worker's built-in job kinds, no token, 50 MiB uploads, no embedder warning,
    /// the default [`Guard`], webhooks refused to loopback.
    pub fn builder(pool: sqlx::PgPool, searcher: Arc<Searcher>) -> AppStateBuilder {
        AppStateBuilder {
            queue: Queue::new(pool.clone(), Duration::from_secs(60))
                .with_ends(Arc::new(crate::pipeline::kinds())),
            pool,
            searcher,
            job_kinds: crate::worker::builtin::KINDS
                .iter()
                .map(|&kind| kind.to_owned())
                .collect(),
            api_token: None,
            max_upload_bytes: 50 * 1024 * 1024,
            embedder_warning: None,
            guard: Guard::default(),
            webhook_targets: crate::webhooks::Targets::default(),
        }
    }
}

/// Builds an [`AppState`]; see [`AppState::builder`].
pub struct AppStateBuilder {
    pool: sqlx::PgPool,
    queue: Queue,
    searcher: Arc<Searcher>,
    job_kinds: Vec<String>,
    api_token: Option<Arc<str>>,
    max_upload_bytes: u64,
    embedder_warning: Option<Arc<str>>,
    guard: Guard,
    webhook_targets: crate::webhooks::Targets,
}

impl AppStateBuilder {
    /// The queue `/api/jobs` enqueues into and reads; when it has no hook for ended jobs, a
    /// person's cancel settles the pipeline's jobs as the default queue's does.
    pub fn queue(mut self, queue: Queue) -> Self {
        self.queue = queue.or_ends(|| Arc::new(crate::pipeline::kinds()));
        self
    }

    /// The job kinds `POST /api/jobs` accepts: those this deployment has handlers for.
    pub fn job_kinds<'a>(mut self, kinds: impl IntoIterator<Item = &'a str>) -> Self {
        self.job_kinds = kinds.into_iter().map(str::to_owned).collect();
        self
    }

    /// The bearer token `/api` requires; none (or an empty one) leaves `/api` open.
    pub fn api_token(mut self, token: Option<&str>) -> Self {
        self.api_token = token.filter(|t| !t.is_empty()).map(Arc::from);
        self
    }

    /// The largest file one upload may carry.
    pub fn max_upload_bytes(mut self, bytes: u64) -> Self {
        self.max_upload_bytes = bytes;
        self
    }

    /// Why the embedder is a fallback, shown by `/api/info` and the page.
    pub fn embedder_warning(mut self, warning: Option<&str>) -> Self {
        self.embedder_warning = warning.map(Arc::from);
        self
    }

    /// The checks and bounds every request runs under.
    pub fn guard(mut self, guard: Guard) -> Self {
        self.guard = guard;
        self
    }

    /// Where webhooks may be registered to (loopback refused unless set).
    pub fn webhook_targets(mut self, targets: crate::webhooks::Targets) -> Self {
        self.webhook_targets = targets;
        self
    }

    /// The state, with this process's event listener started; it stops with `events_stop`.
    pub fn start(self, events_stop: CancellationToken) -> AppState {
        AppState {
            events: EventHub::start(self.pool.clone(), events_stop),
            pool: self.pool,
            queue: self.queue,
            job_kinds: Arc::new(self.job_kinds),
            api_token: self.api_token,
            max_upload_bytes: self.max_upload_bytes,
            searcher: self.searcher,
            embedder_warning: self.embedder_warning,
            guard: Arc::new(self.guard),
            webhook_targets: self.webhook_targets,
        }
    }
}
