//! A schedule as people read it, in the API and on the command line alike: the stored row, its
//! next firing, and (for a schedule whose job kind can tell) what its next run would send.
//!
//! The preview is the job kind's business, not the schedule's: the caller asks the module that
//! runs the kind (the pipeline, for the nightly re-embedding) and hands the answer in, so this
//! module stays below the pipeline.

use chrono::{DateTime, Utc};
use serde::Serialize;

use super::Schedule;

/// A schedule with what people want to know about it next. `S` is the preview's shape, owned
/// by the module that runs the schedule's job kind.
#[derive(Debug, Serialize)]
pub struct ScheduleView<S> {
    #[serde(flatten)]
    pub schedule: Schedule,
    /// The next logical time it will fire, if any.
    pub next_firing: Option<DateTime<Utc>>,
    /// What its next run would send now, when its job kind can say (see the module docs).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub next_run_sends: Option<S>,
}

/// The view of `schedule` at `now`, with `next_run_sends` as its job kind previewed it.
pub fn view<S>(
    schedule: Schedule,
    now: DateTime<Utc>,
    next_run_sends: Option<S>,
) -> ScheduleView<S> {
    ScheduleView {
        next_firing: schedule.next_firing(now),
        schedule,
        next_run_sends,
    }
}
