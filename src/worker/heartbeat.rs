//! Keeps the leases of running jobs alive, and stops the jobs whose lease was lost.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use super::Shared;
use crate::queue::Lease;

/// The leases this process holds, each with the token that stops its handler.
///
/// Keyed by the whole lease, not the job id: a job whose lease was lost can be claimed again by
/// this same process under a new token while the old handler is still winding down, and the
/// old handler's end must not take the new lease out of the heartbeat.
#[derive(Default)]
pub(crate) struct Inflight {
    leases: Mutex<HashMap<Lease, CancellationToken>>,
}

impl Inflight {
    pub fn hold(&self, lease: Lease, lost: CancellationToken) {
        self.lock().insert(lease, lost);
    }

    pub fn drop_lease(&self, lease: &Lease) {
        self.lock().remove(lease);
    }

    pub fn leases(&self) -> Vec<Lease> {
        self.lock().keys().copied().collect()
    }

    /// Stops the handler holding `lease`, if it is still running.
    pub fn stop(&self, lease: &Lease) {
        if let Some(lost) = self.lock().get(lease) {
            lost.cancel();
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<Lease, CancellationToken>> {
        // A panic while holding this lock cannot leave the map inconsistent (single inserts
        // and removes), so a poisoned lock is still usable.
        self.leases
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

/// Extends all held leases every `every` until `stop`.
pub(crate) async fn run(shared: Arc<Shared>, every: Duration, stop: CancellationToken) {
    let mut tick = tokio::time::interval(every);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            () = stop.cancelled() => return,
            _ = tick.tick() => {}
        }
        let held = shared.inflight.leases();
        match shared.queue.extend(&held).await {
            Ok(lost) => {
                for lease in lost {
                    tracing::warn!(job = %lease.job_id, "lease lost (rescued or cancelled); stopping the handler");
                    shared.inflight.stop(&lease);
                }
            }
            // If the database stays away longer than the lease, the next successful
            // heartbeat reports those leases lost and their handlers stop then.
            Err(err) => tracing::warn!(error = %err, "heartbeat failed; will try again"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::queue::JobId;

    #[test]
    fn a_job_reclaimed_under_a_new_lease_stays_in_the_heartbeat_when_the_old_handler_ends() {
        let inflight = Inflight::default();
        let old = Lease {
            job_id: JobId(7),
            token: uuid::Uuid::new_v4(),
        };
        let new = Lease {
            job_id: JobId(7),
            token: uuid::Uuid::new_v4(),
        };
        let old_stop = CancellationToken::new();
        let new_stop = CancellationToken::new();
        inflight.hold(old, old_stop.clone());
        inflight.hold(new, new_stop.clone());
        // The old handler learns its lease is lost and ends.
        inflight.stop(&old);
        inflight.drop_lease(&old);
        assert!(old_stop.is_cancelled());
        assert!(
            !new_stop.is_cancelled(),
            "stopping the old lease spared the new one"
        );
        assert_eq!(
            inflight.leases(),
            vec![new],
            "the new lease is still extended"
        );
    }
}
