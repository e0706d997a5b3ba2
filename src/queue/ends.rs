//! What a job's end means beyond the `jobs` table. The queue knows no kinds, so it does not know
//! that an extract job's death fails a document; it knows when a job dies or is cancelled, and
//! hands that job, in the transaction that ended it, to a [`JobEnds`] hook its owner installed
//! ([`super::Queue::with_ends`]; the worker's table of kinds is one). Whatever the hook writes
//! commits with the job's end, or not at all.

use futures::future::BoxFuture;
use sqlx::PgConnection;

use super::JobId;

/// How a job ended without succeeding.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum End {
    /// It will not run again: a permanent failure, its last attempt failed (or panicked), or the
    /// rescuer found its lease expired on the last attempt. `error` is its last error.
    Killed { error: String },
    /// Someone stopped it: a person, or the owner of what it worked on (a reprocess, a delete).
    /// `reason` is the reason they gave, if any.
    Cancelled { reason: Option<String> },
}

/// A job that just died or was cancelled, as the statement that ended it returned it.
#[derive(Debug, Clone, PartialEq)]
pub struct EndedJob {
    pub id: JobId,
    pub kind: String,
    pub payload: serde_json::Value,
    pub end: End,
}

/// Settles what a job worked for when it ends without succeeding, on the connection (inside the
/// transaction) that ended it.
pub trait JobEnds: Send + Sync {
    fn ended<'c>(
        &'c self,
        conn: &'c mut PgConnection,
        job: &'c EndedJob,
    ) -> BoxFuture<'c, Result<(), sqlx::Error>>;
}
