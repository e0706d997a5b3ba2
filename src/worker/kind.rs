//! A job kind declared once: its payload type states its kind, idempotency key and attempt
//! budget ([`JobPayload`]), and, here, its handler, its concurrency, its retry policy, which
//! owner's restart or delete cancels it, and what its end means for what it worked on. A module
//! lists its kinds in one function over [`Declare`]; the same list fills a worker's [`Registry`]
//! (with handlers) and a [`Kinds`] table (without), which the queue uses as its [`JobEnds`] hook.

use std::collections::BTreeMap;
use std::future::Future;
use std::sync::Arc;

use futures::future::BoxFuture;
use sqlx::PgConnection;

use super::job::{Job, JobError, Outcome};
use super::registry::Registry;
use crate::queue::payload::JobPayload;
use crate::queue::{End, EndedJob, JobEnds, JobId, RetryPolicy, by_payload};

/// Everything about one kind of job, on its payload type.
pub trait JobKind: JobPayload + Send + Sync + 'static {
    /// What the handler needs (the pipeline, for the pipeline's kinds).
    type Context: Send + Sync + 'static;

    /// Jobs of this kind running at once in one process, unless a setting says otherwise.
    const CONCURRENCY: usize = 1;

    /// The payload field naming the row this kind works on (`document_id`): when that row's
    /// owner restarts or deletes it, jobs of this kind are cancelled ([`Kinds::cancel_owned`]).
    const OWNER_KEY: Option<&'static str> = None;

    /// How long a failed attempt waits before the next.
    fn retry_policy() -> RetryPolicy {
        RetryPolicy::default()
    }

    /// Runs one job (its payload already decoded).
    fn run(
        context: Arc<Self::Context>,
        job: Job,
        payload: Self,
    ) -> impl Future<Output = Result<Outcome, JobError>> + Send;

    /// Settles what the job worked on once it died or was cancelled, on `conn`: the
    /// transaction that ended it. Nothing, unless the kind says otherwise.
    fn on_ended<'c>(
        conn: &'c mut PgConnection,
        job: JobId,
        payload: Self,
        end: &'c End,
    ) -> BoxFuture<'c, Result<(), sqlx::Error>> {
        let _ = (conn, job, payload, end);
        Box::pin(async { Ok(()) })
    }
}

/// What the worker and the queue need of a kind once its type is erased.
#[derive(Clone)]
struct Spec {
    concurrency: usize,
    retry_policy: RetryPolicy,
    owner_key: Option<&'static str>,
    on_ended: Option<Arc<EndFn>>,
}

type EndFn = dyn for<'c> Fn(&'c mut PgConnection, &'c EndedJob) -> BoxFuture<'c, Result<(), sqlx::Error>>
    + Send
    + Sync;

/// A table of job kinds: their defaults and end hooks, without handlers. The queue takes it as
/// its [`JobEnds`] hook; owners cancel through it ([`Kinds::cancel_owned`]).
#[derive(Clone, Default)]
pub struct Kinds {
    specs: BTreeMap<String, Spec>,
}

impl Kinds {
    /// An empty table.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds kind `K`.
    pub fn add<K: JobKind>(&mut self) -> &mut Self {
        let on_ended: Arc<EndFn> = Arc::new(|conn, job| Box::pin(ended::<K>(conn, job)));
        self.specs.insert(
            K::KIND.to_owned(),
            Spec {
                concurrency: K::CONCURRENCY.max(1),
                retry_policy: K::retry_policy(),
                owner_key: K::OWNER_KEY,
                on_ended: Some(on_ended),
            },
        );
        self
    }

    /// Adds a kind known only by name (a handler registered as a closure): default retry
    /// policy, no owner, no end hook.
    pub(crate) fn add_untyped(&mut self, kind: &str, concurrency: usize) {
        self.specs.insert(
            kind.to_owned(),
            Spec {
                concurrency: concurrency.max(1),
                retry_policy: RetryPolicy::default(),
                owner_key: None,
                on_ended: None,
            },
        );
    }

    /// The kinds in the table, in name order.
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.specs.keys().map(String::as_str)
    }

    /// `kind`'s concurrency: its declared default, unless a setting changed it.
    pub fn concurrency(&self, kind: &str) -> Option<usize> {
        self.specs.get(kind).map(|spec| spec.concurrency)
    }

    pub(crate) fn set_concurrency(&mut self, kind: &str, concurrency: usize) {
        if let Some(spec) = self.specs.get_mut(kind) {
            spec.concurrency = concurrency.max(1);
        }
    }

    /// `kind`'s retry policy (the default one for a kind not in the table).
    pub fn retry_policy(&self, kind: &str) -> RetryPolicy {
        self.specs
            .get(kind)
            .map_or_else(RetryPolicy::default, |spec| spec.retry_policy)
    }

    /// The kinds that work on rows named by payload field `key`.
    pub fn owned_by(&self, key: &str) -> Vec<&str> {
        self.specs
            .iter()
            .filter(|(_, spec)| spec.owner_key == Some(key))
            .map(|(kind, _)| kind.as_str())
            .collect()
    }

    /// Cancels the waiting and running jobs of every kind owned by `key` whose payload names
    /// `id` there, except `keep`, with `reason`, and settles each through its kind's hook, all
    /// on `conn` (the owner's transaction, which restarts or deletes the row). Returns how many.
    pub async fn cancel_owned(
        &self,
        conn: &mut PgConnection,
        key: &str,
        id: i64,
        keep: Option<JobId>,
        reason: &str,
    ) -> Result<u64, sqlx::Error> {
        let cancelled =
            by_payload::cancel(conn, &self.owned_by(key), key, id, keep, reason).await?;
        for job in &cancelled {
            self.ended(conn, job).await?;
        }
        Ok(cancelled.len() as u64)
    }
}

impl JobEnds for Kinds {
    fn ended<'c>(
        &'c self,
        conn: &'c mut PgConnection,
        job: &'c EndedJob,
    ) -> BoxFuture<'c, Result<(), sqlx::Error>> {
        match self
            .specs
            .get(&job.kind)
            .and_then(|spec| spec.on_ended.as_ref())
        {
            Some(on_ended) => on_ended(conn, job),
            None => Box::pin(async { Ok(()) }),
        }
    }
}

/// Decodes the ended job's payload as `K` and runs `K`'s hook. A payload that does not decode
/// never ran either, so it has nothing to settle.
async fn ended<K: JobKind>(conn: &mut PgConnection, job: &EndedJob) -> Result<(), sqlx::Error> {
    match serde_json::from_value::<K>(job.payload.clone()) {
        Ok(payload) => K::on_ended(conn, job.id, payload, &job.end).await,
        Err(err) => {
            tracing::warn!(job = %job.id, kind = %job.kind, error = %err, "an ended job's payload does not decode; nothing to settle");
            Ok(())
        }
    }
}

/// Where a module lists its kinds, once: a [`Kinds`] table takes what they are, a
/// [`Handlers`] also how to run them.
pub trait Declare<C> {
    fn kind<K: JobKind<Context = C>>(&mut self) -> &mut Self;
}

impl<C> Declare<C> for Kinds {
    fn kind<K: JobKind<Context = C>>(&mut self) -> &mut Self {
        self.add::<K>()
    }
}

/// A registry taking a module's kinds with their handlers, which run with `context`.
pub struct Handlers<'r, C> {
    pub registry: &'r mut Registry,
    pub context: Arc<C>,
}

impl<C: Send + Sync + 'static> Declare<C> for Handlers<'_, C> {
    fn kind<K: JobKind<Context = C>>(&mut self) -> &mut Self {
        self.registry.add::<K>(self.context.clone());
        self
    }
}
