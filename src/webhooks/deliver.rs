//! The `webhook.deliver` job kind, declared once: one delivery is one job of docket's queue,
//! so leases, fencing, backoff, dead letters and the page's jobs view serve it unchanged.
//!
//! An attempt re-checks the target ([`super::target`]), signs the stored payload
//! ([`super::sign`]) and posts it with a 10 s timeout, no redirects followed and no proxy.
//! A 2xx marks the delivery delivered in one statement and completes the job through the
//! worker's batched completions (one commit for many jobs; a job whose delivery is already
//! delivered completes without sending); anything else is retried with jittered exponential backoff, the first retry about 10 s later, for more than
//! 24 hours (see [`DeliverJob::retry_policy`] and its test); after the last attempt the job's
//! end hook marks the delivery dead, with its last error, in the transaction that kills the
//! job. A target refused by policy is not retried: the delivery dies at once, saying why.
//! Each endpoint has at most [`PER_ENDPOINT`] attempts in flight in one process; a delivery
//! over that waits its turn without spending an attempt, so a slow endpoint holds at most that
//! many of the kind's slots.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::future::BoxFuture;
use serde::{Deserialize, Serialize};
use sqlx::{PgConnection, PgPool};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use uuid::Uuid;

use super::target::{TargetError, Targets};
use super::{sign, store};
use crate::queue::payload::JobPayload;
use crate::queue::{End, JobId, RetryPolicy};
use crate::worker::{Job, JobError, JobKind, Outcome, ResultExt};

/// How long a receiver has to answer.
pub const TIMEOUT: Duration = Duration::from_secs(10);

/// Attempts in flight per endpoint, per process.
pub const PER_ENDPOINT: usize = 4;

/// The payload of a `webhook.deliver` job: the delivery it sends.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct DeliverJob {
    pub delivery_id: Uuid,
}

impl JobPayload for DeliverJob {
    const KIND: &'static str = "webhook.deliver";
    /// With [`DeliverJob::retry_policy`], more than 24 hours of retries (tested below).
    const MAX_ATTEMPTS: i32 = 27;
    type Cause = ();

    fn idempotency_key(&self, _: &()) -> Option<String> {
        None
    }
}

impl JobKind for DeliverJob {
    type Context = Deliverer;
    const CONCURRENCY: usize = 16;

    /// About 10 s, doubling up to 2 hours, ±30 %.
    fn retry_policy() -> RetryPolicy {
        RetryPolicy {
            initial: Duration::from_secs(10),
            multiplier: 2.0,
            jitter: 0.3,
            max: Duration::from_secs(2 * 60 * 60),
        }
    }

    async fn run(deliverer: Arc<Deliverer>, _: Job, payload: Self) -> Result<Outcome, JobError> {
        deliverer.attempt(payload.delivery_id).await
    }

    fn on_ended<'c>(
        conn: &'c mut PgConnection,
        job: JobId,
        payload: Self,
        end: &'c End,
    ) -> BoxFuture<'c, Result<(), sqlx::Error>> {
        let error = match end {
            End::Killed { error } => error.clone(),
            End::Cancelled { reason } => match reason {
                Some(reason) => format!("cancelled: {reason}"),
                None => "cancelled".to_owned(),
            },
        };
        Box::pin(async move { store::dead(conn, payload.delivery_id, job.0, &error).await })
    }
}

/// What delivering needs: the database, the target policy, one HTTP client that resolves
/// through it, and the per-endpoint bound.
pub struct Deliverer {
    pool: PgPool,
    targets: Targets,
    client: Result<reqwest::Client, String>,
    in_flight: Mutex<HashMap<i64, Arc<Semaphore>>>,
}

impl Deliverer {
    /// Delivers from `pool` to targets `targets` permits.
    pub fn new(pool: PgPool, targets: Targets) -> Self {
        let client = reqwest::Client::builder()
            .timeout(TIMEOUT)
            .redirect(reqwest::redirect::Policy::none())
            .no_proxy()
            .dns_resolver(targets.resolver())
            .user_agent(concat!("docket-webhooks/", env!("CARGO_PKG_VERSION")))
            .build()
            .map_err(|err| format!("the webhook client could not be built: {err}"));
        if let Err(err) = &client {
            tracing::error!("{err}");
        }
        Self {
            pool,
            targets,
            client,
            in_flight: Mutex::new(HashMap::new()),
        }
    }

    /// The target policy deliveries are checked against.
    pub fn targets(&self) -> &Targets {
        &self.targets
    }

    /// A slot for one attempt to `endpoint`, if one is free.
    fn slot(&self, endpoint: i64) -> Option<OwnedSemaphorePermit> {
        let semaphore = {
            let mut map = self
                .in_flight
                .lock()
                .unwrap_or_else(|poisoned| poisoned.into_inner());
            map.entry(endpoint)
                .or_insert_with(|| Arc::new(Semaphore::new(PER_ENDPOINT)))
                .clone()
        };
        semaphore.try_acquire_owned().ok()
    }

    /// One attempt at delivery `id`.
    async fn attempt(&self, id: Uuid) -> Result<Outcome, JobError> {
        let Some(out) = store::outgoing(&self.pool, id).await.retryable()? else {
            // The endpoint was deleted, and its deliveries with it.
            return Ok(Outcome::Complete);
        };
        if out.status == "delivered" {
            return Ok(Outcome::Complete);
        }
        let Some(_slot) = self.slot(out.endpoint_id) else {
            return Err(JobError::RateLimited {
                reason: format!("{PER_ENDPOINT} deliveries to this endpoint are in flight"),
                after: Duration::from_secs(1),
            });
        };
        let url = match self.targets.check(&out.url).await {
            Ok(url) => url,
            Err(err) => return Err(self.failed(id, err.to_string(), !retried(&err)).await),
        };
        let client = self.client.as_ref().map_err(|err| JobError::Retry {
            error: anyhow::anyhow!("{err}"),
            after: None,
        })?;
        let key = sign::secret_key(&out.secret)
            .ok_or_else(|| anyhow::anyhow!("the endpoint's secret is not a whsec_ secret"))
            .fatal()?;
        let body = serde_json::to_vec(&out.payload).fatal()?;
        let message_id = out.id.to_string();
        let timestamp = chrono::Utc::now().timestamp();
        let signature = sign::signature(&key, &message_id, timestamp, &body);
        let sent = client
            .post(url)
            .header(reqwest::header::CONTENT_TYPE, "application/json")
            .header("webhook-id", &message_id)
            .header("webhook-timestamp", timestamp.to_string())
            .header("webhook-signature", signature)
            .body(body)
            .send()
            .await;
        let error = match sent {
            Ok(answer) if answer.status().is_success() => {
                // One statement, then the job completes in the worker's batched completions: a
                // crash between the two leaves a delivered delivery whose job runs again and
                // sends nothing (above), so nothing is lost or sent twice by it.
                store::delivered(&self.pool, id).await.retryable()?;
                return Ok(Outcome::Complete);
            }
            Ok(answer) => format!("the receiver answered {}", answer.status()),
            Err(err) if err.is_timeout() => {
                format!("the receiver did not answer within {} s", TIMEOUT.as_secs())
            }
            Err(err) => format!("{:#}", anyhow::Error::new(err)),
        };
        Err(self.failed(id, error, false).await)
    }

    /// Records a failed attempt; the job is retried, or dies at once when `fatal`.
    async fn failed(&self, id: Uuid, error: String, fatal: bool) -> JobError {
        if let Err(db) = store::attempt_failed(&self.pool, id, &error).await {
            tracing::warn!(delivery = %id, error = %db, "recording a failed webhook attempt");
        }
        let error = anyhow::anyhow!(error);
        if fatal {
            JobError::Fatal(error)
        } else {
            JobError::Retry { error, after: None }
        }
    }
}

/// Whether a refused target may be fine later: a name that does not resolve now may.
fn retried(err: &TargetError) -> bool {
    matches!(err, TargetError::Unresolved { .. })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retries_start_near_ten_seconds_and_last_more_than_a_day_even_at_the_lowest_jitter() {
        let policy = DeliverJob::retry_policy();
        let lowest = |attempt: i32| {
            let centre = policy.initial.as_secs_f64() * policy.multiplier.powi(attempt - 1);
            centre.min(policy.max.as_secs_f64()) * (1.0 - policy.jitter)
        };
        assert!((5.0..=15.0).contains(&lowest(1)) && policy.initial.as_secs() == 10);
        // Every failed attempt but the last waits before the next one.
        let total: f64 = (1..DeliverJob::MAX_ATTEMPTS).map(lowest).sum();
        assert!(total >= 24.0 * 3600.0, "only {total} s of retries");
        for attempt in 1..DeliverJob::MAX_ATTEMPTS {
            let drawn = policy.delay(attempt).as_secs_f64();
            assert!(
                drawn >= lowest(attempt) - 1.0,
                "attempt {attempt}: {drawn} s"
            );
        }
    }
}
