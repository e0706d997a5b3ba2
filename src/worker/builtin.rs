//! The job kinds every docket process runs besides the pipeline's: `noop` (smoke tests, the
//! queue benchmark) and `sleep` (a job that takes time, for trying out leases, crashes and
//! shutdown).
//!
//! Why here: they are the worker's own, known to every registry, and the HTTP API accepts them
//! from `POST /api/jobs` in any deployment.

use std::time::Duration;

use super::{JobError, Outcome, Registry};

/// Does nothing.
pub const NOOP: &str = "noop";
/// Sleeps `{"ms": n}` milliseconds, at most an hour.
pub const SLEEP: &str = "sleep";
/// Both kinds.
pub const KINDS: [&str; 2] = [NOOP, SLEEP];

/// Registers both kinds, each running at most `concurrency` jobs at once.
pub fn register(registry: &mut Registry, concurrency: usize) {
    registry.register(NOOP, concurrency, |_job| async { Ok(Outcome::Complete) });
    registry.register(SLEEP, concurrency, |job| async move {
        #[derive(serde::Deserialize)]
        struct Sleep {
            ms: u64,
        }
        let sleep: Sleep = job.payload()?;
        if sleep.ms > 3_600_000 {
            return Err(JobError::Fatal(anyhow::anyhow!(
                "a sleep job sleeps at most one hour"
            )));
        }
        tokio::time::sleep(Duration::from_millis(sleep.ms)).await;
        Ok(Outcome::Complete)
    });
}
