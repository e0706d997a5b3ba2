//! Which job kinds this process runs, with what handler and how many at once, and (for kinds
//! whose jobs not every process can run) which of them to leave to others. Kinds declared as
//! types ([`JobKind`]) come with their defaults and end hooks, kept in the registry's
//! [`Kinds`] table.

use std::collections::BTreeMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use super::job::{Job, JobError, Outcome};
use super::kind::{Handlers, JobKind, Kinds};
use crate::queue::PayloadFilter;

type BoxFuture<T> = Pin<Box<dyn Future<Output = T> + Send + 'static>>;

/// A handler, type-erased so that one registry holds every kind.
pub(crate) type HandlerFn = dyn Fn(Job) -> BoxFuture<Result<Outcome, JobError>> + Send + Sync;

/// Says, right before a claim, which jobs of a kind this process must leave to others; `None`
/// means it can run them all. Asked before every claim, so it follows changes (a model version
/// registered while the process runs).
pub(crate) type ClaimFilterFn =
    dyn Fn() -> BoxFuture<Result<Option<PayloadFilter>, anyhow::Error>> + Send + Sync;

/// One job kind's handler and claim filter; its concurrency lives in the registry's [`Kinds`]
/// table, with the rest of what the kind is.
#[derive(Clone)]
pub(crate) struct KindConfig {
    pub handler: Arc<HandlerFn>,
    /// Which jobs of the kind to leave to other processes.
    pub filter: Option<Arc<ClaimFilterFn>>,
}

impl KindConfig {
    /// The filter for the next claim.
    pub async fn claim_filter(&self) -> Result<Option<PayloadFilter>, anyhow::Error> {
        match &self.filter {
            Some(filter) => filter().await,
            None => Ok(None),
        }
    }
}

/// The handlers of a worker process, keyed by job kind.
#[derive(Clone, Default)]
pub struct Registry {
    pub(crate) kinds: BTreeMap<String, KindConfig>,
    /// What every registered kind is: defaults, retry policy, end hook.
    table: Kinds,
}

impl Registry {
    /// An empty registry.
    pub fn new() -> Self {
        Self::default()
    }

    /// Runs `handler` for jobs of `kind`, at most `concurrency` at once (at least one).
    pub fn register<F, Fut>(&mut self, kind: &str, concurrency: usize, handler: F) -> &mut Self
    where
        F: Fn(Job) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<Outcome, JobError>> + Send + 'static,
    {
        self.table.add_untyped(kind, concurrency);
        self.insert_handler(kind, handler);
        self
    }

    /// Runs jobs of kind `K` with `K::run` and `context`, `K::CONCURRENCY` at once, each
    /// job's payload decoded as `K` (a payload that does not decode fails its job for good
    /// without running it, as [`Job::payload`] does); `K`'s end hook settles its jobs that die.
    pub fn add<K: JobKind>(&mut self, context: Arc<K::Context>) -> &mut Self {
        self.table.add::<K>();
        self.insert_handler(K::KIND, move |job: Job| {
            let context = context.clone();
            async move {
                let payload: K = job.payload()?;
                K::run(context, job, payload).await
            }
        });
        self
    }

    fn insert_handler<F, Fut>(&mut self, kind: &str, handler: F)
    where
        F: Fn(Job) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<Outcome, JobError>> + Send + 'static,
    {
        let handler: Arc<HandlerFn> = Arc::new(move |job| Box::pin(handler(job)));
        self.kinds.insert(
            kind.to_owned(),
            KindConfig {
                handler,
                filter: None,
            },
        );
    }

    /// A view of this registry that takes a module's kinds with their handlers, each run with
    /// `context`: what a module's list of kinds ([`super::Declare`]) is given.
    pub fn with<C>(&mut self, context: Arc<C>) -> Handlers<'_, C> {
        Handlers {
            registry: self,
            context,
        }
    }

    /// Runs at most `concurrency` jobs of `kind` at once (a setting over the kind's default);
    /// `kind` must be registered first.
    pub fn set_concurrency(&mut self, kind: &str, concurrency: usize) -> &mut Self {
        self.table.set_concurrency(kind, concurrency);
        self
    }

    /// The registered kinds' table: what the queue settles ended jobs with.
    pub fn table(&self) -> &Kinds {
        &self.table
    }

    /// Makes `kind`'s claims skip what `filter` answers, asked before every claim so that it
    /// follows changes; `kind` must be registered first.
    pub fn filter_claims<F, Fut>(&mut self, kind: &str, filter: F) -> &mut Self
    where
        F: Fn() -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<Option<PayloadFilter>, anyhow::Error>> + Send + 'static,
    {
        if let Some(config) = self.kinds.get_mut(kind) {
            config.filter = Some(Arc::new(move || Box::pin(filter())));
        }
        self
    }

    /// Whether `kind` has a handler here.
    pub fn handles(&self, kind: &str) -> bool {
        self.kinds.contains_key(kind)
    }

    /// The registered kinds.
    pub fn kinds(&self) -> impl Iterator<Item = &str> {
        self.kinds.keys().map(String::as_str)
    }
}

impl std::fmt::Debug for Registry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_map()
            .entries(self.kinds().map(|k| (k, self.table.concurrency(k))))
            .finish()
    }
}
