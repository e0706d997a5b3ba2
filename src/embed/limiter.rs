//! The process-wide embedding rate limiter: requests per minute and tokens per minute.
//!
//! One [`Limiter`] is built per process and shared (behind an `Arc`) by every embedder clone, so
//! every worker's calls draw from the same budget and none can go around it. It combines:
//!
//! - two GCRA buckets from `governor`, one counting requests and one counting (estimated) tokens;
//! - a shared pause: when a provider answers 429 with a time to come back, [`Limiter::pause_until`]
//!   holds *every* caller until then, not just the one that was refused — otherwise the other
//!   workers would keep knocking and be refused too.
//!
//! **Burst.** A `governor` quota of N per minute lets N cells through at once and then refills at
//! N/60 per second. Providers state limits per minute but enforce them over shorter slices too (a
//! full minute's budget in one second is refused), so the burst here is *one second's worth*:
//! `ceil(N / 60)`, at least 1. The sustained rate is unchanged; only the start-up burst is smaller.
//!
//! **Requests larger than the token bucket** are *split*, not clamped: the tokens are taken in
//! pieces no larger than the bucket, one after another, and the request goes out when the last
//! piece is granted. The long-run token rate therefore stays at or under the limit even for
//! oversized batches, at the cost of a longer wait for that one request.

use std::num::NonZeroU32;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use governor::{DefaultDirectRateLimiter, Quota, RateLimiter};
use tokio::time::Instant;

/// The configured limits; `None` means unlimited in that dimension.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RateLimits {
    /// Requests per minute.
    pub rpm: Option<NonZeroU32>,
    /// Tokens per minute (estimated with [`super::estimate_tokens`]).
    pub tpm: Option<NonZeroU32>,
}

/// The burst allowed for a per-minute limit: one second's worth, at least 1.
pub fn burst_for(per_minute: NonZeroU32) -> NonZeroU32 {
    NonZeroU32::new(per_minute.get().div_ceil(60)).unwrap_or(NonZeroU32::MIN)
}

/// A shared requests-and-tokens limiter; see the module docs for burst and splitting.
pub struct Limiter {
    limits: RateLimits,
    requests: Option<DefaultDirectRateLimiter>,
    /// The token bucket and its capacity (the largest piece one wait may ask for).
    tokens: Option<(DefaultDirectRateLimiter, NonZeroU32)>,
    /// Set after a 429: nobody sends before this instant.
    paused_until: Mutex<Option<Instant>>,
    /// Total time callers spent in [`Limiter::acquire`], for metrics.
    waited_micros: AtomicU64,
}

impl std::fmt::Debug for Limiter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Limiter")
            .field("limits", &self.limits)
            .field("time_waited", &self.time_waited())
            .finish_non_exhaustive()
    }
}

impl Limiter {
    /// A limiter enforcing `limits`.
    pub fn new(limits: RateLimits) -> Self {
        let bucket = |per_minute: NonZeroU32| {
            let burst = burst_for(per_minute);
            (
                RateLimiter::direct(Quota::per_minute(per_minute).allow_burst(burst)),
                burst,
            )
        };
        Self {
            limits,
            requests: limits.rpm.map(|rpm| bucket(rpm).0),
            tokens: limits.tpm.map(bucket),
            paused_until: Mutex::new(None),
            waited_micros: AtomicU64::new(0),
        }
    }

    /// A limiter that never waits except for a provider-requested pause.
    pub fn unlimited() -> Self {
        Self::new(RateLimits::default())
    }

    /// The limits this limiter enforces.
    pub fn limits(&self) -> RateLimits {
        self.limits
    }

    /// Waits until one request carrying `tokens` estimated tokens may be sent.
    pub async fn acquire(&self, tokens: u32) {
        let started = Instant::now();
        if let Some(requests) = &self.requests {
            requests.until_ready().await;
        }
        if let Some((bucket, capacity)) = &self.tokens {
            let mut remaining = tokens.max(1);
            while let Some(piece) = NonZeroU32::new(remaining.min(capacity.get())) {
                // A piece never exceeds the capacity, so InsufficientCapacity cannot happen;
                // if it somehow did, sending is better than waiting forever.
                if bucket.until_n_ready(piece).await.is_err() {
                    break;
                }
                remaining -= piece.get();
            }
        }
        // The pause is checked last, right before the caller sends, so a 429 seen by another
        // worker while this one waited on the buckets still holds it back.
        while let Some(until) = self.paused_until() {
            if until <= Instant::now() {
                break;
            }
            tokio::time::sleep_until(until).await;
        }
        let waited = u64::try_from(started.elapsed().as_micros()).unwrap_or(u64::MAX);
        self.waited_micros.fetch_add(waited, Ordering::Relaxed);
    }

    /// Holds every caller of [`Limiter::acquire`] until `until` (extends, never shortens, a pause).
    pub fn pause_until(&self, until: Instant) {
        let mut guard = self
            .paused_until
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        if guard.is_none_or(|current| current < until) {
            *guard = Some(until);
        }
    }

    /// Total time all callers have spent waiting in [`Limiter::acquire`].
    pub fn time_waited(&self) -> Duration {
        Duration::from_micros(self.waited_micros.load(Ordering::Relaxed))
    }

    fn paused_until(&self) -> Option<Instant> {
        *self
            .paused_until
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn nz(n: u32) -> NonZeroU32 {
        NonZeroU32::new(n).expect("non-zero in tests")
    }

    #[test]
    fn burst_is_one_second_of_the_per_minute_limit() {
        assert_eq!(burst_for(nz(600)).get(), 10);
        assert_eq!(burst_for(nz(61)).get(), 2);
        assert_eq!(burst_for(nz(3)).get(), 1);
    }

    #[tokio::test]
    async fn request_larger_than_the_token_bucket_still_passes_after_waiting() {
        // 60 000 tpm: a 1 000-token bucket; 1 500 tokens must be taken in two pieces.
        let limiter = Limiter::new(RateLimits {
            rpm: None,
            tpm: Some(nz(60_000)),
        });
        limiter.acquire(1_500).await;
        // Splitting means the second piece (500 tokens at 1 000/s) had to accrue: a lower bound
        // implied by the quota, not a speed measurement. Clamping would have returned at once.
        assert!(limiter.time_waited() >= Duration::from_millis(400));
    }

    #[tokio::test]
    async fn pause_holds_back_the_next_caller_until_its_end() {
        let limiter = Limiter::unlimited();
        let until = Instant::now() + Duration::from_millis(50);
        limiter.pause_until(until);
        limiter.pause_until(until - Duration::from_millis(40)); // shorter: ignored
        limiter.acquire(1).await;
        assert!(Instant::now() >= until);
    }
}
