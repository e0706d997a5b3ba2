//! A kind's slots: the jobs of that kind this process may hold at once, as many as its
//! concurrency.
//!
//! The producer takes slots before it claims and asks for no more jobs than it holds slots, so
//! a claim never takes work this process cannot start. A [`Slot`] then travels with its job
//! (producer → executor → completer) and is dropped by whoever writes the job's outcome, once
//! that write is done: dropping it is what frees it, so it is freed exactly once, and a kind
//! never has more jobs `running` in the table than its concurrency.

use std::sync::Arc;

use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// The slots of one kind.
pub(crate) struct Slots {
    free: Arc<Semaphore>,
}

/// One taken slot; dropping it gives it back.
pub(crate) struct Slot {
    _permit: OwnedSemaphorePermit,
}

impl Slots {
    /// `concurrency` slots, all free.
    pub fn new(concurrency: usize) -> Self {
        Self {
            free: Arc::new(Semaphore::new(concurrency)),
        }
    }

    /// Waits until a slot is free, then takes it and every other free one, up to `most` in all.
    ///
    /// Taking what is free at once, not one slot per wake-up, keeps claims large: the completer
    /// frees a whole batch of slots together, and claiming each freed slot on its own would make
    /// that batch's worth of jobs as many claims of one job.
    pub async fn take(&self, most: usize) -> Vec<Slot> {
        // The semaphore is never closed, so the wait ends only with a permit.
        let Ok(first) = self.free.clone().acquire_owned().await else {
            return Vec::new();
        };
        let mut taken = vec![Slot { _permit: first }];
        taken.extend(self.take_free(most.saturating_sub(1)));
        taken
    }

    /// The slots free right now, up to `most`, without waiting.
    pub fn take_free(&self, most: usize) -> Vec<Slot> {
        std::iter::from_fn(|| self.free.clone().try_acquire_owned().ok())
            .take(most)
            .map(|permit| Slot { _permit: permit })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_slot_is_free_again_once_dropped_and_never_more_are_taken_than_exist() {
        let slots = Slots::new(3);
        let first = slots.take(2).await;
        assert_eq!(first.len(), 2);
        assert_eq!(slots.take_free(5).len(), 1, "one slot was left");
        drop(first);
        assert_eq!(slots.take(10).await.len(), 3, "every slot came back");
    }
}
