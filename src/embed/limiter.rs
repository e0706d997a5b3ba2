//! The embedding rate limiter: requests per minute and tokens per minute, for the whole fleet.
//!
//! One [`Limiter`] is built per process and shared (behind an `Arc`) by every embedder clone, so
//! every worker's calls draw from the same budget and none can go around it. `DOCKET_RPM` and
//! `DOCKET_TPM` are the *provider's* limits (they belong to its API key), so in a running docket
//! the authority is the fleet budget in PostgreSQL ([`super::budget`]), attached with
//! [`Limiter::share`]: every process books its slices on one row, and adding a process never
//! raises the total. Without a database (unit tests, one-off tools) the limiter falls back to
//! two local GCRA buckets from `governor` at the nominal rate with a burst of one second's worth
//! (that path is for one process and makes no rolling-window promise).
//!
//! **Slices.** A process books a slice at a time: about [`SLICE_SPAN`] of the limit (at least
//! one request, and at least the tokens the waiting request needs), waits until the grant says
//! its stretch starts, and hands the slice out to its workers locally. One worker books while
//! the others wait locally, so a process holds at most one slice, and a slice not spent within
//! [`SLICE_LIFETIME`] of its start is dropped (a process whose demand stopped, or that woke late,
//! must not save budget up and spend it later on top of everyone else's). A process that dies
//! loses at most its slice.
//!
//! **The bound, as a provider counts it.** A provider counts what *arrives* in a rolling window
//! `W` (60 s unless `DOCKET_RATE_WINDOW_SECS` says otherwise): `N = RPM × W / 60` requests. The
//! booked stretches follow one another on the fleet's line without overlap, each used from its
//! start `a`: its requests leave between `a` and `a + SLICE_LIFETIME` and arrive within the
//! latency allowance `S` after that (`DOCKET_RATE_LATENCY_ALLOWANCE_MS`, default 1 s: the spread
//! of network latency between grant and arrival, not the latency itself). So the slices arriving
//! in any window of `W` started within `W + SLICE_LIFETIME + S` of each other, and they hold at
//! most `(W + SLICE_LIFETIME + S) / T + k` requests, `T` being the emission interval and `k` a
//! slice's requests (the last slice counts whole). The interval is chosen so that this is `N`:
//! `T = (W + SLICE_LIFETIME + S) / (N − k)`. The fleet then never exceeds the limit in any
//! rolling window while using `W (N − k) / ((W + SLICE_LIFETIME + S) N)` of it: 96 % at 60 RPM,
//! 98 % at 3 000 (defaults). Tokens follow the same rule with a slice's usual tokens as `k`; a
//! single request larger than a slice adds its excess once.
//!
//! **No burst.** An idle fleet starts at once (the line's start is `max(TAT, now)`), but nobody
//! goes ahead of the line: a burst allowance would be sent on top of a full window.
//!
//! **Pauses.** When a provider answers 429 with a time to come back, [`Limiter::pause_until`]
//! holds every caller in this process at once and writes the pause to the fleet budget, where
//! every other process meets it with its next grant.
//!
//! **Requests larger than the token bucket** wait longer, they are not clamped: the local
//! bucket takes them in pieces, the fleet budget books them whole.

use std::num::NonZeroU32;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, OnceLock};
use std::time::Duration;

use governor::{DefaultDirectRateLimiter, Quota, RateLimiter};
use tokio::time::Instant;

use super::budget::{Ask, FleetBudget};

/// The share of a per-minute limit one slice books: small, so a dead process wastes little
/// and slices spread evenly over processes; large enough at high limits to spare statements.
pub const SLICE_SPAN: Duration = Duration::from_millis(100);
/// How long a booked slice stays usable after its start (part of the margin in the bound).
pub const SLICE_LIFETIME: Duration = Duration::from_millis(250);
/// The provider's counting window unless configured.
pub const DEFAULT_WINDOW: Duration = Duration::from_secs(60);
/// The spread of network latency between grant and arrival allowed for unless configured.
pub const DEFAULT_LATENCY_ALLOWANCE: Duration = Duration::from_secs(1);

/// The configured limits; `None` means unlimited in that dimension.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RateLimits {
    /// Requests per minute.
    pub rpm: Option<NonZeroU32>,
    /// Tokens per minute (estimated with [`super::estimate_tokens`]).
    pub tpm: Option<NonZeroU32>,
    /// The rolling window over which the provider counts (`W` in the module docs).
    pub window: Duration,
    /// The spread of latency between grant and arrival allowed for (`S` in the module docs).
    pub latency_allowance: Duration,
}

impl Default for RateLimits {
    fn default() -> Self {
        Self {
            rpm: None,
            tpm: None,
            window: DEFAULT_WINDOW,
            latency_allowance: DEFAULT_LATENCY_ALLOWANCE,
        }
    }
}

impl RateLimits {
    /// What one slice books, for a request about to send `tokens` tokens.
    pub fn slice_for(&self, tokens: u32) -> Ask {
        Ask {
            requests: self.rpm.map_or(u32::MAX, |rpm| {
                u32::try_from(slice_share(rpm)).unwrap_or(u32::MAX)
            }),
            tokens: self
                .tpm
                .map_or(u64::MAX, |tpm| slice_share(tpm).max(u64::from(tokens))),
            request_interval: self.rpm.map(|rpm| self.interval(rpm)),
            token_interval: self.tpm.map(|tpm| self.interval(tpm)),
        }
    }

    /// The emission interval for a per-minute limit: `(W + SLICE_LIFETIME + S) / (N − k)`, rounded
    /// up to a microsecond (see the module docs).
    fn interval(&self, per_minute: NonZeroU32) -> Duration {
        let window = self.window.max(Duration::from_millis(1));
        let per_window = u128::from(per_minute.get()) * window.as_micros() / 60_000_000;
        let k = u128::from(slice_share(per_minute));
        let spare = per_window.saturating_sub(k).max(1);
        let span = (window + SLICE_LIFETIME + self.latency_allowance).as_micros();
        Duration::from_micros(u64::try_from(span.div_ceil(spare)).unwrap_or(u64::MAX))
    }
}

/// How many units of a per-minute limit one slice books: [`SLICE_SPAN`] worth, at least 1.
fn slice_share(per_minute: NonZeroU32) -> u64 {
    let span = u64::from(per_minute.get()) * SLICE_SPAN.as_millis() as u64 / 60_000;
    span.max(1)
}

/// The burst of the local buckets (no fleet budget): one second's worth, at least 1.
pub fn burst_for(per_minute: NonZeroU32) -> NonZeroU32 {
    NonZeroU32::new(per_minute.get().div_ceil(60)).unwrap_or(NonZeroU32::MIN)
}

/// A shared requests-and-tokens limiter; see the module docs.
pub struct Limiter {
    limits: RateLimits,
    requests: Option<DefaultDirectRateLimiter>,
    /// The token bucket and its capacity (the largest piece one wait may ask for).
    tokens: Option<(DefaultDirectRateLimiter, NonZeroU32)>,
    /// The fleet budget, once attached; it then replaces the local buckets.
    fleet: OnceLock<Fleet>,
    /// Set after a 429: nobody in this process sends before this instant.
    paused_until: Mutex<Option<Instant>>,
    /// Total time callers spent in [`Limiter::acquire`], for metrics.
    waited_micros: AtomicU64,
}

/// The fleet budget and this process's current slice of it. The async mutex is what makes one
/// worker book while the others wait, so the process holds one slice at most.
struct Fleet {
    budget: FleetBudget,
    slice: tokio::sync::Mutex<Slice>,
}

/// What is left of the slice this process booked last.
#[derive(Debug, Clone, Copy)]
struct Slice {
    requests: u32,
    tokens: u64,
    usable_until: Instant,
}

impl Slice {
    fn covers(&self, tokens: u32, now: Instant) -> bool {
        now < self.usable_until && self.requests >= 1 && self.tokens >= u64::from(tokens)
    }
}

impl std::fmt::Debug for Limiter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Limiter")
            .field("limits", &self.limits)
            .field("fleet", &self.fleet.get().is_some())
            .field("time_waited", &self.time_waited())
            .finish_non_exhaustive()
    }
}

impl Limiter {
    /// A limiter enforcing `limits` in this process, until [`Limiter::share`] attaches the fleet.
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
            fleet: OnceLock::new(),
            paused_until: Mutex::new(None),
            waited_micros: AtomicU64::new(0),
        }
    }

    /// A limiter that never waits except for a provider-requested pause.
    pub fn unlimited() -> Self {
        Self::new(RateLimits::default())
    }

    /// Makes `budget` the authority: from now on every slice is booked there. A second call
    /// keeps the first budget (one process, one provider row) and returns false.
    pub fn share(&self, budget: FleetBudget) -> bool {
        let now = Instant::now();
        self.fleet
            .set(Fleet {
                budget,
                slice: tokio::sync::Mutex::new(Slice {
                    requests: 0,
                    tokens: 0,
                    usable_until: now,
                }),
            })
            .is_ok()
    }

    /// The limits this limiter enforces.
    pub fn limits(&self) -> RateLimits {
        self.limits
    }

    /// Waits until one request carrying `tokens` estimated tokens may be sent.
    pub async fn acquire(&self, tokens: u32) {
        let started = Instant::now();
        loop {
            self.wait_for_pause().await;
            match self.fleet.get() {
                Some(fleet) => self.acquire_from_fleet(fleet, tokens).await,
                None => self.acquire_locally(tokens).await,
            }
            // The pause is checked again right before the caller sends, so a 429 seen by another
            // worker while this one waited still holds it back; what it took is then given up,
            // since a fleet slice is only good for its own stretch of time.
            if self
                .paused_until()
                .is_none_or(|until| until <= Instant::now())
            {
                break;
            }
        }
        let waited = u64::try_from(started.elapsed().as_micros()).unwrap_or(u64::MAX);
        self.waited_micros.fetch_add(waited, Ordering::Relaxed);
    }

    async fn wait_for_pause(&self) {
        while let Some(until) = self.paused_until() {
            if until <= Instant::now() {
                break;
            }
            tokio::time::sleep_until(until).await;
        }
    }

    async fn acquire_locally(&self, tokens: u32) {
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
    }

    async fn acquire_from_fleet(&self, fleet: &Fleet, tokens: u32) {
        let mut slice = fleet.slice.lock().await;
        // A slice whose start came and went before this worker woke is lost, not used late.
        while !slice.covers(tokens, Instant::now()) {
            let ask = self.limits.slice_for(tokens);
            let start = book(&fleet.budget, &ask).await;
            tokio::time::sleep_until(start).await;
            *slice = Slice {
                requests: ask.requests,
                tokens: ask.tokens,
                usable_until: start + SLICE_LIFETIME,
            };
        }
        slice.requests -= 1;
        slice.tokens = slice.tokens.saturating_sub(u64::from(tokens));
    }

    /// Holds every caller of [`Limiter::acquire`] in this process until `until` (extends, never
    /// shortens, a pause), and every other process sharing the fleet budget from its next grant.
    pub async fn pause_until(&self, until: Instant) {
        {
            let mut guard = self
                .paused_until
                .lock()
                .unwrap_or_else(|poisoned| poisoned.into_inner());
            if guard.is_none_or(|current| current < until) {
                *guard = Some(until);
            }
        }
        if let Some(fleet) = self.fleet.get() {
            let remaining = until.saturating_duration_since(Instant::now());
            if let Err(error) = fleet.budget.pause_for(remaining).await {
                // This process still pauses; the others learn of the limit from their own 429.
                tracing::warn!(%error, "could not share a provider's pause with the fleet");
            }
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

/// `/metrics` reads the limiter's waiting time through this (metrics names no embedder).
impl crate::metrics::WaitReport for Limiter {
    fn time_waited(&self) -> Duration {
        Limiter::time_waited(self)
    }
}

/// One grant from the fleet budget, as the local instant its stretch starts. Waiting for budget
/// is waiting, not failing: while the database cannot be reached the booking is retried (a
/// worker cannot finish a job without the database either), with a growing pause.
///
/// The start is counted from before the statement: the database's clock read the wait during
/// it, so the local start is never later than the booked one (a late start would stretch the
/// slice past the margin the bound allows for).
async fn book(budget: &FleetBudget, ask: &Ask) -> Instant {
    let mut delay = Duration::from_millis(100);
    loop {
        let started = Instant::now();
        match budget.grant(ask).await {
            Ok(grant) => {
                crate::metrics::global().rate_budget_granted(started.elapsed());
                return started + grant.wait;
            }
            Err(error) => {
                tracing::warn!(%error, ?delay, "cannot book embedding budget; retrying");
                tokio::time::sleep(delay).await;
                delay = (delay * 2).min(Duration::from_secs(5));
            }
        }
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

    fn limits(rpm: Option<u32>, tpm: Option<u32>) -> RateLimits {
        RateLimits {
            rpm: rpm.map(nz),
            tpm: tpm.map(nz),
            ..RateLimits::default()
        }
    }

    #[test]
    fn a_slice_is_a_tenth_of_a_second_of_the_limit_and_at_least_what_is_asked() {
        let ask = limits(Some(3000), Some(600_000)).slice_for(50);
        assert_eq!((ask.requests, ask.tokens), (5, 1000));
        // (60 s + 0.25 s + 1 s) / (3 000 − 5) and / (600 000 − 1 000), rounded up.
        assert_eq!(ask.request_interval, Some(Duration::from_micros(20_451)));
        assert_eq!(ask.token_interval, Some(Duration::from_micros(103)));
        assert_eq!(
            limits(Some(3000), Some(600_000)).slice_for(4000).tokens,
            4000
        );
        let ask = limits(Some(120), None).slice_for(10);
        assert_eq!((ask.requests, ask.tokens), (1, u64::MAX));
        assert_eq!(ask.token_interval, None);
        assert_eq!(ask.request_interval, Some(Duration::from_micros(514_706)));
    }

    /// The most requests that can arrive in one closed rolling window: slices of `k` back to
    /// back on the line, the first arriving as late as the margins allow and every later one
    /// as early, so the window holds every slice that starts within `W + lifetime + S`.
    fn worst_window(limits: &RateLimits) -> u64 {
        let ask = limits.slice_for(1);
        let slice = ask.request_interval.expect("a request limit") * ask.requests;
        let reach = limits.window + SLICE_LIFETIME + limits.latency_allowance;
        let slices = u64::try_from(reach.as_micros() / slice.as_micros()).expect("small") + 1;
        slices * u64::from(ask.requests)
    }

    #[test]
    fn no_rolling_window_can_hold_more_than_the_limit_and_at_least_95_percent_fit() {
        for (rpm, window) in [
            (60, 60),
            (61, 60),
            (600, 60),
            (3000, 60),
            (600, 10),
            (7, 60),
        ] {
            let limits = RateLimits {
                window: Duration::from_secs(window),
                ..limits(Some(rpm), None)
            };
            let per_window = u64::from(rpm) * window / 60;
            let worst = worst_window(&limits);
            assert!(worst <= per_window, "{rpm}/min over {window} s: {worst}");
            if rpm >= 60 && window == 60 {
                let ask = limits.slice_for(1);
                let rate = f64::from(ask.requests)
                    / (ask.request_interval.expect("limited") * ask.requests).as_secs_f64();
                let used = rate * window as f64 / per_window as f64;
                assert!(used >= 0.95, "{rpm}/min uses {used:.3} of it");
            }
        }
    }

    #[tokio::test]
    async fn request_larger_than_the_token_bucket_still_passes_after_waiting() {
        // 60 000 tpm: a 1 000-token bucket; 1 500 tokens must be taken in two pieces.
        let limiter = Limiter::new(limits(None, Some(60_000)));
        limiter.acquire(1_500).await;
        // Splitting means the second piece (500 tokens at 1 000/s) had to accrue: a lower bound
        // implied by the quota, not a speed measurement. Clamping would have returned at once.
        assert!(limiter.time_waited() >= Duration::from_millis(400));
    }

    #[tokio::test]
    async fn pause_holds_back_the_next_caller_until_its_end() {
        let limiter = Limiter::unlimited();
        let until = Instant::now() + Duration::from_millis(50);
        limiter.pause_until(until).await;
        limiter.pause_until(until - Duration::from_millis(40)).await; // shorter: ignored
        limiter.acquire(1).await;
        assert!(Instant::now() >= until);
    }
}
