//! Job kinds as types: a payload type names its kind, its JSON and what makes two enqueues of
//! it one job, so the code that enqueues a kind and the handler that runs it cannot disagree on
//! the kind string or the payload's fields.
//!
//! The queue still knows no kinds: this is a contract any module can implement for its own
//! payloads. What else a kind declares (its handler, concurrency, retry policy and what its end
//! means) is the worker's `JobKind`, built on this trait.

use serde::Serialize;
use serde::de::DeserializeOwned;

use super::{NewJob, QueueError};

/// The payload of one job kind.
pub trait JobPayload: Serialize + DeserializeOwned {
    /// The kind jobs of this payload run under.
    const KIND: &'static str;

    /// How many attempts a job of this kind gets.
    const MAX_ATTEMPTS: i32 = super::DEFAULT_MAX_ATTEMPTS;

    /// What, besides the payload, tells apart two enqueues that must both run (the request that
    /// asked, the job that handed over); `()` for kinds that are never deduplicated.
    type Cause: ?Sized;

    /// The idempotency key of this payload enqueued for `cause`: a second enqueue with the same
    /// key is the same job. `None` enqueues a new job every time.
    fn idempotency_key(&self, cause: &Self::Cause) -> Option<String>;
}

impl NewJob {
    /// A job of `P::KIND` carrying `payload`, keyed for `cause`, due now, with the kind's
    /// attempt budget.
    pub fn of<P: JobPayload>(payload: &P, cause: &P::Cause) -> Result<Self, QueueError> {
        let json = serde_json::to_value(payload).map_err(|err| {
            QueueError::Invalid(format!("a {} payload does not serialize: {err}", P::KIND))
        })?;
        let job = NewJob::new(P::KIND, json).max_attempts(P::MAX_ATTEMPTS);
        Ok(match payload.idempotency_key(cause) {
            Some(key) => job.idempotency_key(key),
            None => job,
        })
    }
}

#[cfg(test)]
mod tests {
    use serde::{Deserialize, Serialize};

    use super::JobPayload;
    use crate::queue::NewJob;

    #[derive(Serialize, Deserialize)]
    struct Resize {
        image_id: i64,
    }

    impl JobPayload for Resize {
        const KIND: &'static str = "resize";
        type Cause = str;

        fn idempotency_key(&self, cause: &str) -> Option<String> {
            Some(format!("resize:{}:{cause}", self.image_id))
        }
    }

    #[test]
    fn a_payload_gives_its_kind_json_and_key() {
        let job = NewJob::of(&Resize { image_id: 7 }, "upload").expect("serializes");
        assert_eq!(job.kind, "resize");
        assert_eq!(job.payload, serde_json::json!({ "image_id": 7 }));
        assert_eq!(job.idempotency_key.as_deref(), Some("resize:7:upload"));
        assert_eq!(job.run_at, None);
        assert_eq!(job.max_attempts, Some(crate::queue::DEFAULT_MAX_ATTEMPTS));
    }
}
