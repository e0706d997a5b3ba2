//! Cron expressions read on a time zone's wall clock: which logical times a schedule has.
//!
//! Parsing and stepping are croner's (chosen over `cron` because its handling of daylight
//! saving is defined and tested: a fixed-time job whose wall-clock time does not exist on the
//! spring day runs once at the first real instant after the gap; a fixed-time job whose time
//! happens twice on the autumn day runs once, at the earlier instant; wildcard/interval jobs run
//! on both instants of a repeated hour). Our own tests below pin that behaviour down, so an
//! upgrade that changes it fails here rather than in production.
//!
//! Only five-field expressions are accepted (minute hour day-of-month month day-of-week): the
//! scheduler's resolution is a minute, and pg_cron speaks the same five fields.

use chrono::{DateTime, Utc};
use chrono_tz::Tz;
use croner::Cron;
use croner::parser::{CronParser, Seconds, Year};

use super::ScheduleError;

/// A parsed cron expression and the zone it is read in.
#[derive(Debug, Clone)]
pub struct CronSpec {
    cron: Cron,
    zone: Tz,
}

impl CronSpec {
    /// Parses a five-field `expression` and an IANA `timezone` name.
    pub fn parse(expression: &str, timezone: &str) -> Result<Self, ScheduleError> {
        let fields = expression.split_whitespace().count();
        if fields != 5 {
            return Err(ScheduleError::Invalid(format!(
                "a cron expression has 5 fields (minute hour day-of-month month day-of-week); {expression:?} has {fields}"
            )));
        }
        let cron = CronParser::builder()
            .seconds(Seconds::Disallowed)
            .year(Year::Disallowed)
            .build()
            .parse(expression)
            .map_err(|err| {
                ScheduleError::Invalid(format!("invalid cron expression {expression:?}: {err}"))
            })?;
        let zone: Tz = timezone.parse().map_err(|_| {
            ScheduleError::Invalid(format!(
                "unknown time zone {timezone:?}; use an IANA name such as Europe/Stockholm or UTC"
            ))
        })?;
        Ok(Self { cron, zone })
    }

    /// The zone the expression is read in.
    pub fn zone(&self) -> Tz {
        self.zone
    }

    /// The first logical time strictly after `after`, if the expression ever fires again.
    pub fn next_after(&self, after: DateTime<Utc>) -> Option<DateTime<Utc>> {
        let local = after.with_timezone(&self.zone);
        self.cron
            .find_next_occurrence(&local, false)
            .ok()
            .map(|next| next.with_timezone(&Utc))
    }

    /// The logical times in `(after, until]`, oldest first, at most `limit` of them.
    pub fn between(
        &self,
        after: DateTime<Utc>,
        until: DateTime<Utc>,
        limit: usize,
    ) -> Vec<DateTime<Utc>> {
        let mut times = Vec::new();
        let mut cursor = after;
        while times.len() < limit {
            match self.next_after(cursor) {
                Some(next) if next <= until => {
                    times.push(next);
                    cursor = next;
                }
                _ => break,
            }
        }
        times
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;

    fn utc(y: i32, m: u32, d: u32, h: u32, min: u32) -> DateTime<Utc> {
        Utc.with_ymd_and_hms(y, m, d, h, min, 0)
            .single()
            .expect("valid UTC time")
    }

    #[test]
    fn six_fields_or_a_bad_zone_are_refused() {
        assert!(CronSpec::parse("0 0 2 * * *", "UTC").is_err());
        assert!(CronSpec::parse("61 2 * * *", "UTC").is_err());
        assert!(CronSpec::parse("0 2 * * *", "Mars/Olympus").is_err());
        assert!(CronSpec::parse("0 2 * * mon-fri", "Europe/Stockholm").is_ok());
    }

    #[test]
    fn daily_utc_schedule_fires_once_a_day_at_its_minute() {
        let spec = CronSpec::parse("0 2 * * *", "UTC").expect("valid");
        let times = spec.between(utc(2026, 1, 1, 0, 0), utc(2026, 1, 4, 0, 0), 100);
        assert_eq!(
            times,
            vec![
                utc(2026, 1, 1, 2, 0),
                utc(2026, 1, 2, 2, 0),
                utc(2026, 1, 3, 2, 0)
            ]
        );
    }

    #[test]
    fn spring_forward_day_runs_a_skipped_0230_once_right_after_the_gap() {
        // Europe/Stockholm, 2026-03-29: 02:00 CET jumps to 03:00 CEST (01:00 UTC).
        let spec = CronSpec::parse("30 2 * * *", "Europe/Stockholm").expect("valid");
        let times = spec.between(utc(2026, 3, 27, 12, 0), utc(2026, 3, 30, 12, 0), 100);
        assert_eq!(
            times,
            vec![
                utc(2026, 3, 28, 1, 30), // 02:30 CET
                utc(2026, 3, 29, 1, 0),  // 03:00 CEST, the first instant after the gap
                utc(2026, 3, 30, 0, 30), // 02:30 CEST
            ]
        );
    }

    #[test]
    fn fall_back_day_runs_a_repeated_0230_once_at_the_earlier_instant() {
        // Europe/Stockholm, 2026-10-25: 03:00 CEST goes back to 02:00 CET (01:00 UTC).
        let spec = CronSpec::parse("30 2 * * *", "Europe/Stockholm").expect("valid");
        let times = spec.between(utc(2026, 10, 24, 12, 0), utc(2026, 10, 26, 12, 0), 100);
        assert_eq!(
            times,
            vec![
                utc(2026, 10, 25, 0, 30), // 02:30 CEST; 02:30 CET (01:30 UTC) is not a second run
                utc(2026, 10, 26, 1, 30), // 02:30 CET
            ]
        );
    }

    #[test]
    fn hourly_schedule_runs_both_repeated_hours_on_the_fall_back_day() {
        // Wildcard hours keep elapsed-time spacing: 25 firings on a 25-hour day.
        let spec = CronSpec::parse("30 * * * *", "Europe/Stockholm").expect("valid");
        let day_start = utc(2026, 10, 24, 22, 0); // 00:00 CEST on the 25th
        let day_end = utc(2026, 10, 25, 23, 0); // 00:00 CET on the 26th
        assert_eq!(spec.between(day_start, day_end, 100).len(), 25);
    }
}
