//! How long a job waits before its next attempt: jittered exponential backoff.
//!
//! The `backoff` crate's policy is a stateful iterator meant for in-process retry loops; a
//! queue's retries happen in different processes, hours apart, so the policy here is a pure
//! function of the attempt number that replays that iterator. Same curve, no state to keep.

use std::time::Duration;

use backoff::SystemClock;
use backoff::backoff::Backoff;
use backoff::exponential::ExponentialBackoff;

/// Exponential backoff with jitter for job-level retries.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RetryPolicy {
    /// The delay after the first failure, before jitter.
    pub initial: Duration,
    /// Growth per attempt.
    pub multiplier: f64,
    /// 0.5 means each delay is drawn from ±50% around the curve.
    pub jitter: f64,
    /// The curve stops growing here.
    pub max: Duration,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        Self {
            initial: Duration::from_secs(2),
            multiplier: 2.0,
            jitter: 0.5,
            max: Duration::from_secs(60 * 60),
        }
    }
}

impl RetryPolicy {
    /// The delay before the next try after failed attempt number `attempt` (1-based).
    pub fn delay(&self, attempt: i32) -> Duration {
        let mut policy: ExponentialBackoff<SystemClock> = ExponentialBackoff {
            current_interval: self.initial,
            initial_interval: self.initial,
            randomization_factor: self.jitter,
            multiplier: self.multiplier,
            max_interval: self.max,
            // A job-level retry is bounded by max_attempts, not by elapsed time.
            max_elapsed_time: None,
            ..ExponentialBackoff::default()
        };
        policy.reset();
        let steps = attempt.clamp(1, 64);
        let mut delay = self.initial;
        for _ in 0..steps {
            delay = policy.next_backoff().unwrap_or(self.max);
        }
        delay
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn delays_grow_with_attempts_and_stay_within_jitter() {
        let policy = RetryPolicy {
            initial: Duration::from_millis(100),
            multiplier: 2.0,
            jitter: 0.5,
            max: Duration::from_secs(10),
        };
        for attempt in 1..=6 {
            let centre = 100.0 * 2f64.powi(attempt - 1);
            let got = policy.delay(attempt).as_secs_f64() * 1000.0;
            assert!(
                got >= centre * 0.5 - 1.0 && got <= centre * 1.5 + 1.0,
                "attempt {attempt}: {got} ms is outside ±50% of {centre} ms"
            );
        }
    }

    #[test]
    fn delays_are_jittered() {
        let policy = RetryPolicy::default();
        let draws: std::collections::HashSet<u128> =
            (0..20).map(|_| policy.delay(3).as_micros()).collect();
        assert!(draws.len() > 1, "20 draws gave one value: no jitter");
    }

    #[test]
    fn delays_are_capped() {
        let policy = RetryPolicy {
            max: Duration::from_secs(5),
            ..RetryPolicy::default()
        };
        assert!(policy.delay(40) <= Duration::from_secs_f64(5.0 * 1.5 + 0.001));
    }
}
