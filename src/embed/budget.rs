//! The fleet's one rate budget, kept in PostgreSQL (`rate_budgets`, one row per provider key).
//!
//! A provider's limits belong to its API key, not to a docket process: four processes under a
//! 3 000 requests-a-minute key must share 3 000, and adding a fifth must not make it 3 750. So
//! every process takes its requests and tokens from one row, by one short statement.
//!
//! **GCRA by reservation, one line for both dimensions.** The row holds a theoretical arrival
//! time (TAT) per dimension. A [`Grant`] of `n` requests and `t` tokens starts at
//! `max(request TAT, token TAT, now, paused_until)`, moves each TAT `n` (or `t`) emission
//! intervals past that start, and answers how long the caller must wait for the start. There is
//! no burst on top: the slice begins at the start of the stretch it booked, so slices follow one
//! another on the line and never overlap, and both dimensions of a slice start at one instant
//! (a slice that waits for tokens has not used requests booked earlier). The bound per rolling
//! window, and the margins it needs, are in [`super::limiter`]. A grant never fails for lack of
//! budget: it books the next free stretch of the rate line and says when that stretch starts,
//! so waiting stays waiting. Time is the database's clock, so process clocks need not agree.
//!
//! **What a dead process costs.** The budget a grant books is gone whether or not it is spent;
//! a process holds at most one grant at a time (see [`super::limiter`]), so a process killed
//! while holding budget wastes at most that one slice, and the others carry on after it.
//!
//! **Pauses.** [`FleetBudget::pause_for`] writes `paused_until` (extending, never shortening it);
//! every process honours it with its next grant, so one process's 429 slows all of them.
//!
//! The key is a sha256 prefix of provider base URL, model and API key ([`budget_key`]): the
//! key is never stored or logged in clear.

use std::time::Duration;

use sha2::{Digest as _, Sha256};

/// What one grant asks for: amounts, and the caller's emission intervals (from its DOCKET_RPM /
/// DOCKET_TPM and margins; see [`super::limiter::RateLimits::slice_for`]). `None` intervals mean
/// that dimension is unlimited.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ask {
    /// Requests in the slice.
    pub requests: u32,
    /// Estimated tokens in the slice.
    pub tokens: u64,
    /// Time one request uses up on the rate line (60 s / RPM).
    pub request_interval: Option<Duration>,
    /// Time one token uses up (60 s / TPM).
    pub token_interval: Option<Duration>,
}

/// The answer to one grant.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Grant {
    /// How long to wait (by the database's clock) for the start of the booked stretch, from
    /// which the slice may be used.
    pub wait: Duration,
    /// How far the request TAT now lies beyond the database's clock: budget already booked by
    /// the fleet, this grant included.
    pub booked: Duration,
}

/// A handle on one `rate_budgets` row.
#[derive(Debug, Clone)]
pub struct FleetBudget {
    pool: sqlx::PgPool,
    key: String,
}

/// The row key of a provider: `sha256(base URL, model, API key)`, first 32 hex digits.
pub fn budget_key(base_url: &str, model: &str, api_key: Option<&str>) -> String {
    let mut hasher = Sha256::new();
    for part in [base_url.trim_end_matches('/'), model, api_key.unwrap_or("")] {
        hasher.update(part.as_bytes());
        // A separator that cannot occur in any part, so ("ab", "c") and ("a", "bc") differ.
        hasher.update([0u8]);
    }
    let digest = hasher.finalize();
    digest[..16].iter().map(|b| format!("{b:02x}")).collect()
}

fn micros(duration: Duration) -> i64 {
    i64::try_from(duration.as_micros()).unwrap_or(i64::MAX)
}

fn duration_from_micros(micros: i64) -> Duration {
    Duration::from_micros(u64::try_from(micros).unwrap_or(0))
}

impl FleetBudget {
    /// The budget row `key` in `pool`'s database (created on first use).
    pub fn new(pool: sqlx::PgPool, key: String) -> Self {
        Self { pool, key }
    }

    /// The row's key (a hash; see [`budget_key`]).
    pub fn key(&self) -> &str {
        &self.key
    }

    /// Books `ask` on the fleet's rate line; see the module docs.
    pub async fn grant(&self, ask: &Ask) -> Result<Grant, sqlx::Error> {
        let request_cost = ask
            .request_interval
            .map_or(0, |i| micros(i).saturating_mul(i64::from(ask.requests)));
        let token_cost = ask.token_interval.map_or(0, |i| {
            micros(i).saturating_mul(i64::try_from(ask.tokens).unwrap_or(i64::MAX))
        });
        for _ in 0..2 {
            // The costs are whole microseconds (bigint), as the caller computed them. RETURNING
            // sees the new TATs, so the start is the new request TAT less this grant's cost.
            let row = sqlx::query!(
                r#"with clock as (select clock_timestamp() as now)
                update rate_budgets as b
                set request_tat = greatest(b.request_tat, b.token_tat, clock.now, b.paused_until)
                        + $2::bigint * interval '1 microsecond',
                    token_tat = greatest(b.request_tat, b.token_tat, clock.now, b.paused_until)
                        + $3::bigint * interval '1 microsecond',
                    updated_at = clock.now
                from clock
                where b.key = $1
                returning
                    (extract(epoch from b.request_tat - $2::bigint * interval '1 microsecond'
                        - clock.now) * 1000000)::bigint as "wait!",
                    (extract(epoch from greatest(b.request_tat, clock.now) - clock.now)
                        * 1000000)::bigint as "booked!""#,
                self.key,
                request_cost,
                token_cost,
            )
            .fetch_optional(&self.pool)
            .await?;
            if let Some(row) = row {
                return Ok(Grant {
                    wait: duration_from_micros(row.wait),
                    booked: duration_from_micros(row.booked),
                });
            }
            self.create().await?;
        }
        Err(sqlx::Error::RowNotFound)
    }

    /// Holds every process's next grant until `duration` from now (by the database's clock);
    /// extends, never shortens, a pause already set.
    pub async fn pause_for(&self, duration: Duration) -> Result<(), sqlx::Error> {
        self.create().await?;
        sqlx::query!(
            "update rate_budgets
            set paused_until = greatest(paused_until,
                    clock_timestamp() + $2::bigint * interval '1 microsecond'),
                updated_at = clock_timestamp()
            where key = $1",
            self.key,
            micros(duration),
        )
        .execute(&self.pool)
        .await?;
        Ok(())
    }

    /// Creates the row if it is missing (the first process to use a provider does).
    async fn create(&self) -> Result<(), sqlx::Error> {
        sqlx::query!(
            "insert into rate_budgets (key)
            values ($1)
            on conflict (key) do nothing",
            self.key,
        )
        .execute(&self.pool)
        .await?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_key_is_a_hash_that_separates_its_parts_and_hides_the_api_key() {
        let key = budget_key("http://api/v1/", "m", Some("sk-secret"));
        assert_eq!(key.len(), 32);
        assert!(!key.contains("secret"));
        assert_eq!(key, budget_key("http://api/v1", "m", Some("sk-secret")));
        assert_ne!(key, budget_key("http://api/v1", "m", Some("sk-other")));
        assert_ne!(
            budget_key("http://api/v1", "ab", None),
            budget_key("http://api/v1a", "b", None)
        );
    }
}
