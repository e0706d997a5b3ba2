//! graphile-worker on the same server, as an anchor: its own script drains the same number of
//! no-op jobs with default settings and then with its batching on, and prints one JSON line
//! for each. The script lives beside the repository (in `../shared`), so a clone without it
//! skips the anchor with a note and reports null figures instead of failing the benchmark.

use std::path::Path;
use std::process::Stdio;

use anyhow::Context;
use serde::Deserialize;

/// One line of the anchor script's output (the fields this benchmark uses).
#[derive(Debug, Clone, Deserialize)]
pub(super) struct AnchorRun {
    #[serde(rename = "localQueue")]
    pub local_queue: bool,
    pub n: u64,
    pub concurrency: u64,
    pub jobs_per_s: f64,
    pub enqueue_jobs_per_s: f64,
}

/// graphile-worker's figures, or why there are none.
#[derive(Debug, Clone, Default)]
pub(super) struct Anchor {
    /// Default runner settings (no local queue, one completion per job).
    pub default: Option<AnchorRun>,
    /// `localQueue` and batched completions: its fastest documented configuration.
    pub batched: Option<AnchorRun>,
    /// Why a figure is missing.
    pub note: Option<String>,
}

impl Anchor {
    /// No figures, for `reason`.
    pub fn skipped(reason: impl Into<String>) -> Anchor {
        Anchor {
            note: Some(reason.into()),
            ..Anchor::default()
        }
    }
}

/// Runs `script` for `jobs` jobs at `concurrency` against the server of `database_url`.
pub(super) async fn run(
    script: &Path,
    database_url: &str,
    jobs: usize,
    concurrency: usize,
) -> anyhow::Result<Anchor> {
    if !script.is_file() {
        return Ok(Anchor::skipped(format!(
            "graphile-worker skipped: {} not found (pass --anchor PATH)",
            script.display()
        )));
    }
    let output = tokio::process::Command::new("bash")
        .arg(script)
        .env("N", jobs.to_string())
        .env("CONCURRENCY", concurrency.to_string())
        .env("PGURL", server_url(database_url))
        .stdin(Stdio::null())
        .output()
        .await
        .with_context(|| format!("starting {}", script.display()))?;
    let stdout = String::from_utf8_lossy(&output.stdout);
    let mut anchor = parse(&stdout);
    if !output.status.success() {
        let stderr = String::from_utf8_lossy(&output.stderr);
        let tail: Vec<&str> = stderr.lines().rev().take(5).collect();
        anchor.note = Some(format!(
            "graphile-worker's script failed ({}): {}",
            output.status,
            tail.into_iter().rev().collect::<Vec<_>>().join(" / ")
        ));
    } else if anchor.default.is_none() || anchor.batched.is_none() {
        anchor.note = Some("graphile-worker's script printed fewer figures than expected".into());
    }
    Ok(anchor)
}

/// Picks the two JSON lines out of the script's output; other lines (npm, warnings) are noise.
fn parse(stdout: &str) -> Anchor {
    let mut anchor = Anchor::default();
    for line in stdout.lines().map(str::trim).filter(|l| l.starts_with('{')) {
        if let Ok(run) = serde_json::from_str::<AnchorRun>(line) {
            if run.local_queue {
                anchor.batched = Some(run);
            } else {
                anchor.default = Some(run);
            }
        }
    }
    anchor
}

/// The server part of a connection URL (scheme, credentials, host, port), without the
/// database or parameters: the script appends its own database name.
fn server_url(database_url: &str) -> &str {
    let authority = database_url.find("://").map_or(0, |i| i + 3);
    let end = database_url[authority..]
        .find(['/', '?'])
        .map_or(database_url.len(), |i| authority + i);
    &database_url[..end]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn server_url_drops_the_database_and_parameters() {
        assert_eq!(
            server_url("postgres://postgres@127.0.0.1:5432/docket?sslmode=disable"),
            "postgres://postgres@127.0.0.1:5432"
        );
        assert_eq!(
            server_url("postgres://u:p@db:5433"),
            "postgres://u:p@db:5433"
        );
    }

    #[test]
    fn both_anchor_lines_are_found_among_noise() {
        let out = "Your pool doesn't have error handlers!\n\
            {\"anchor\":\"graphile-worker simple\",\"localQueue\":false,\"n\":2000,\"batch\":1000,\"concurrency\":10,\"enqueue_ms\":152,\"enqueue_jobs_per_s\":13164,\"drain_ms\":5111,\"last_handler_ms\":5072,\"jobs_per_s\":391}\n\
            {\"anchor\":\"graphile-worker simple\",\"localQueue\":true,\"n\":2000,\"batch\":1000,\"concurrency\":10,\"enqueue_ms\":184,\"enqueue_jobs_per_s\":10878,\"drain_ms\":514,\"last_handler_ms\":485,\"jobs_per_s\":3890}\n";
        let anchor = parse(out);
        assert_eq!(anchor.default.map(|r| r.jobs_per_s), Some(391.0));
        assert_eq!(anchor.batched.map(|r| r.jobs_per_s), Some(3890.0));
    }

    #[tokio::test]
    async fn a_missing_script_is_skipped_with_a_note() {
        let anchor = run(
            Path::new("/nonexistent/run.sh"),
            "postgres://x@127.0.0.1",
            10,
            10,
        )
        .await
        .expect("a missing script is not an error");
        assert!(anchor.default.is_none() && anchor.batched.is_none());
        assert!(anchor.note.is_some_and(|n| n.contains("not found")));
    }
}
