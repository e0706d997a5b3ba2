//! Handlers registered by payload type: the kind comes from [`JobPayload::KIND`] and the
//! handler receives the payload already decoded, so a kind string is written once, next to its
//! payload.

use std::future::Future;
use std::sync::Arc;

use super::job::{Job, JobError, Outcome};
use super::registry::Registry;
use crate::queue::payload::JobPayload;

impl Registry {
    /// Runs `handler` for jobs of `P::KIND`, at most `concurrency` at once (at least one), with
    /// each job's payload decoded as `P`. A payload that does not decode fails its job for good
    /// without calling the handler, as [`Job::payload`] does.
    pub fn register_job<P, F, Fut>(&mut self, concurrency: usize, handler: F) -> &mut Self
    where
        P: JobPayload + Send + 'static,
        F: Fn(Job, P) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<Outcome, JobError>> + Send + 'static,
    {
        let handler = Arc::new(handler);
        self.register(P::KIND, concurrency, move |job: Job| {
            let handler = handler.clone();
            async move {
                let payload: P = job.payload()?;
                handler(job, payload).await
            }
        })
    }
}
