//! Where one search's time went, stage by stage. The API sends it as a `Server-Timing` header
//! (a browser's developer tools show it; `docket bench search` reads it), so a slow search says
//! which of its steps was slow without a profiler or a second run.

use std::future::Future;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// One timed step of a search: its name and how long it took.
pub type Stage = (&'static str, Duration);

/// The stages one search has timed so far, in the order they ended. A hybrid search runs its
/// two lists at once, so their stages overlap: the stages need not add up to the whole.
#[derive(Debug, Default)]
pub(super) struct Timings(Mutex<Vec<Stage>>);

impl Timings {
    /// Runs `work`, recording how long it took as `stage`.
    pub async fn time<T>(&self, stage: &'static str, work: impl Future<Output = T>) -> T {
        let started = Instant::now();
        let output = work.await;
        if let Ok(mut stages) = self.0.lock() {
            stages.push((stage, started.elapsed()));
        }
        output
    }

    /// The stages recorded.
    pub fn into_stages(self) -> Vec<Stage> {
        self.0.into_inner().unwrap_or_default()
    }
}

/// `stages` as a `Server-Timing` header value (`embed;dur=8.12, keywords;dur=40.20`).
pub fn server_timing(stages: &[Stage]) -> String {
    stages
        .iter()
        .map(|(name, took)| format!("{name};dur={:.2}", took.as_secs_f64() * 1000.0))
        .collect::<Vec<_>>()
        .join(", ")
}

/// The stages a `Server-Timing` header value names, with their ms, in order (the inverse of
/// [`server_timing`]); `None` when an entry lacks a name or a `dur` in ms.
pub fn parse_server_timing(header: &str) -> Option<Vec<(String, f64)>> {
    header
        .split(',')
        .map(|entry| {
            let mut parts = entry.trim().split(';');
            let name = parts.next().filter(|name| !name.is_empty())?;
            let ms = parts
                .find_map(|p| p.trim().strip_prefix("dur="))?
                .parse()
                .ok()?;
            Some((name.to_owned(), ms))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn each_stage_is_recorded_in_the_order_it_ended_and_written_as_server_timing() {
        let timings = Timings::default();
        let answer = timings
            .time("slow", async {
                tokio::time::sleep(Duration::from_millis(20)).await;
                42
            })
            .await;
        timings.time("quick", async {}).await;
        assert_eq!(answer, 42);
        let stages = timings.into_stages();
        let names: Vec<&str> = stages.iter().map(|s| s.0).collect();
        assert_eq!(names, ["slow", "quick"]);
        assert!(stages[0].1 >= Duration::from_millis(20));
        let header = server_timing(&[("embed", Duration::from_micros(8_120))]);
        assert_eq!(header, "embed;dur=8.12");
        let read = parse_server_timing("embed;dur=8.12, keywords;desc=\"x\";dur=40.2");
        assert_eq!(
            read,
            Some(vec![("embed".into(), 8.12), ("keywords".into(), 40.2)])
        );
        assert_eq!(parse_server_timing("embed, hits;dur=1"), None);
    }
}
