//! Keeps the leases of running jobs alive, and stops the jobs whose lease was lost.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use super::Shared;
use crate::queue::{JobId, Lease};

/// The leases this process holds, each with the token that stops its handler.
#[derive(Default)]
pub(crate) struct Inflight {
    leases: Mutex<HashMap<JobId, (Lease, CancellationToken)>>,
}

impl Inflight {
    pub fn hold(&self, lease: Lease, lost: CancellationToken) {
        self.lock().insert(lease.job_id, (lease, lost));
    }

    pub fn drop_lease(&self, lease: &Lease) {
        self.lock().remove(&lease.job_id);
    }

    pub fn leases(&self) -> Vec<Lease> {
        self.lock().values().map(|(lease, _)| *lease).collect()
    }

    /// Stops the handler holding `lease`, if it is still running.
    pub fn stop(&self, lease: &Lease) {
        if let Some((held, lost)) = self.lock().get(&lease.job_id)
            && held.token == lease.token
        {
            lost.cancel();
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<JobId, (Lease, CancellationToken)>> {
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
