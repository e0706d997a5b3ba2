//! The scheduler loop and its leader election.
//!
//! Every `serve` and `worker` process runs a [`Scheduler`]; only the one holding a PostgreSQL
//! *session* advisory lock fires. The lock lives on a connection taken out of the pool for good
//! (detached), so it is held exactly as long as that connection: a leader that crashes, hangs up
//! or is partitioned loses its backend and PostgreSQL releases the lock, and a follower takes
//! it on its next step. Leadership is an efficiency, not the safety net: firing is safe with
//! two leaders (see [`super::fire`]).

use std::time::Duration;

use chrono::{DateTime, Utc};
use sqlx::{Connection, PgConnection, PgPool};
use tokio_util::sync::CancellationToken;

use super::{FireReport, ScheduleError, fire_all_due};

/// The advisory lock key of scheduler leadership ("docket" and a role number, as a bigint).
pub const LEADER_LOCK_KEY: i64 = 0x646f_636b_6574_0001;

/// How the loop behaves.
#[derive(Debug, Clone)]
pub struct SchedulerConfig {
    /// Time between steps: how late a firing may be seen, and how soon a follower notices a
    /// dead leader.
    pub tick: Duration,
}

impl Default for SchedulerConfig {
    fn default() -> Self {
        Self {
            tick: Duration::from_secs(15),
        }
    }
}

/// One process's scheduler: a follower until it wins the lock.
pub struct Scheduler {
    pool: PgPool,
    config: SchedulerConfig,
    /// The dedicated connection that holds (or tries for) the lock.
    conn: Option<PgConnection>,
    leader: bool,
}

impl Scheduler {
    /// A follower on `pool`.
    pub fn new(pool: PgPool, config: SchedulerConfig) -> Self {
        Self {
            pool,
            config,
            conn: None,
            leader: false,
        }
    }

    /// Whether this scheduler held the lock at its last step.
    pub fn is_leader(&self) -> bool {
        self.leader
    }

    /// One step at `now`: keep or try to take leadership, and when leading, fire every due
    /// schedule. Returns the reports when it fired, `None` as a follower.
    pub async fn step(
        &mut self,
        now: DateTime<Utc>,
    ) -> Result<Option<Vec<(String, FireReport)>>, ScheduleError> {
        if !self.hold_or_take().await? {
            return Ok(None);
        }
        fire_all_due(&self.pool, now).await.map(Some)
    }

    /// Gives up leadership by closing the lock's connection, as a crash would.
    pub async fn resign(&mut self) {
        self.leader = false;
        if let Some(conn) = self.conn.take()
            && let Err(err) = conn.close().await
        {
            tracing::debug!(error = %err, "closing the scheduler lock connection");
        }
    }

    async fn hold_or_take(&mut self) -> Result<bool, ScheduleError> {
        if self.conn.is_none() {
            let conn = self.pool.acquire().await?.detach();
            self.conn = Some(conn);
            self.leader = false;
        }
        let Some(conn) = self.conn.as_mut() else {
            return Ok(false);
        };
        let checked = if self.leader {
            // The session lock holds as long as this connection does; prove it is alive.
            sqlx::query_scalar!(r#"select 1 as "alive!""#)
                .fetch_one(&mut *conn)
                .await
                .map(|_| true)
        } else {
            sqlx::query_scalar!(
                r#"select pg_try_advisory_lock($1) as "locked!""#,
                LEADER_LOCK_KEY,
            )
            .fetch_one(&mut *conn)
            .await
        };
        match checked {
            Ok(leader) => {
                if leader && !self.leader {
                    tracing::info!("this process now leads the scheduler");
                }
                self.leader = leader;
                Ok(leader)
            }
            Err(err) => {
                if self.leader {
                    tracing::warn!(error = %err, "lost the scheduler lock connection; following");
                }
                self.leader = false;
                self.conn = None;
                Err(err.into())
            }
        }
    }

    /// Steps every tick until `stop`, then releases the lock.
    pub async fn run(mut self, stop: CancellationToken) {
        let mut tick = tokio::time::interval(self.config.tick);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                () = stop.cancelled() => break,
                _ = tick.tick() => {
                    if let Err(err) = self.step(Utc::now()).await {
                        tracing::warn!(error = %err, "scheduler step failed; will try again");
                    }
                }
            }
        }
        self.resign().await;
    }
}
