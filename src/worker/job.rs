//! What a handler receives and what it may answer.

use std::time::Duration;

use serde::de::DeserializeOwned;

use crate::queue::{JobId, Lease};

/// A claimed job, as its handler sees it.
#[derive(Debug, Clone)]
pub struct Job {
    pub id: JobId,
    pub kind: String,
    pub payload: serde_json::Value,
    /// This attempt's number, from 1.
    pub attempt: i32,
    pub max_attempts: i32,
    /// The lease, for handlers that complete their job inside their own transaction
    /// ([`crate::queue::complete_in`]) so that result and completion commit together.
    pub lease: Lease,
}

impl Job {
    /// The payload as `T`; a payload that does not parse is a permanent error, since no retry
    /// can change it.
    pub fn payload<T: DeserializeOwned>(&self) -> Result<T, JobError> {
        serde_json::from_value(self.payload.clone()).map_err(|err| {
            JobError::Fatal(anyhow::anyhow!(
                "the payload of this {} job is not valid: {err}",
                self.kind
            ))
        })
    }
}

/// How a handler finished.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// The runtime marks the job done (batched with other completions).
    Complete,
    /// The handler already marked it done with [`crate::queue::complete_in`] in its own
    /// transaction; the runtime writes nothing more.
    CompletedInTransaction,
}

/// How a handler failed; this decides what happens to the job.
#[derive(Debug, thiserror::Error)]
pub enum JobError {
    /// Transient: try again later with backoff (not before `after` when the failure said when,
    /// such as a `Retry-After`). Spends an attempt; the last attempt goes to `dead`.
    #[error("{error:#}")]
    Retry {
        error: anyhow::Error,
        after: Option<Duration>,
    },
    /// Someone asked us to slow down. The job waits `after` and its attempt is given back.
    #[error("rate limited: {reason}")]
    RateLimited { reason: String, after: Duration },
    /// This process cannot run the job, but another may (a worker configured for another
    /// model version, during a switch). The job goes back at once, its attempt given back, for
    /// a process that can; `reason` is its `last_error` meanwhile.
    #[error("not runnable here: {reason}")]
    Elsewhere { reason: String },
    /// Permanent: no retry can help (a corrupt file, a 4xx from an API). The job goes to `dead`
    /// with this message, which people read.
    #[error("{0:#}")]
    Fatal(anyhow::Error),
}

/// Labels any error as retryable or fatal at the point where that is known:
/// `fetch().await.retryable()?`, `parse(bytes).fatal()?`.
pub trait ResultExt<T> {
    fn retryable(self) -> Result<T, JobError>;
    fn fatal(self) -> Result<T, JobError>;
}

impl<T, E> ResultExt<T> for Result<T, E>
where
    E: Into<anyhow::Error>,
{
    fn retryable(self) -> Result<T, JobError> {
        self.map_err(|err| JobError::Retry {
            error: err.into(),
            after: None,
        })
    }

    fn fatal(self) -> Result<T, JobError> {
        self.map_err(|err| JobError::Fatal(err.into()))
    }
}
