//! `docket bench pipeline --processes 1,2,4`: one provider limit shared by N real processes.
//!
//! For each N: the test embedding server enforces `--rpm` requests per rolling 60 s window (as
//! a provider counting a trailing minute does, with requests counted as they arrive); docket
//! serves uploads in this process (no workers) on a fresh scratch database, and N `docket worker`
//! children of this very binary do the work, each told `DOCKET_RPM=--rpm` (the provider's limit,
//! undivided: the fleet budget in PostgreSQL divides it). More documents are uploaded than the
//! limit lets through in `--seconds`, so the limit is the bottleneck. Reported per N: the share
//! of the limit used (aim ≥ 95 %) and the requests over the limit, which the server refuses with
//! 429 (aim 0), with the most requests that arrived in any rolling window (aim: at most the limit).
//!
//! Before that, the cost of the limiter itself: the latency of one grant statement (booking a
//! slice of the budget) next to the latency of one request to the test server, which answers
//! from loopback in about a millisecond (a real provider takes tens to hundreds).

use std::num::NonZeroU32;
use std::process::Stdio;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context as _;
use serde_json::json;

use super::docket::{DIMS, Docket, Provider, answered, documents, openai_config, scratch_url};
use super::{PipelineBench, round};
use docket::embed::budget::{Ask, FleetBudget};
use docket::embed::{Limiter, OpenAiEmbedder};
use docket_testkit::{EmbeddingServer, EmbeddingServerConfig};

/// Grants timed for the statement's latency.
const GRANTS: usize = 500;
/// Requests timed for the test server's latency.
const REQUESTS: usize = 200;

/// The figures of one N.
struct Row {
    processes: usize,
    requests: u64,
    share: f64,
    rate_limited: u64,
    max_in_window: u64,
    documents: i64,
}

/// Runs the fleet measurement for every N in `--processes`.
pub(super) async fn run(args: &PipelineBench, rpm: NonZeroU32) -> anyhow::Result<()> {
    let (grant_us, request_us) = costs(args).await?;
    let mut rows = Vec::new();
    for &processes in &args.processes {
        anyhow::ensure!(processes >= 1, "--processes takes numbers from 1");
        rows.push(measure(args, rpm, processes).await?);
    }

    println!();
    println!(
        "limiter cost: one grant {:.0} µs (median of {GRANTS}), one test-server request {:.0} µs \
         (median of {REQUESTS}, {} inputs): a grant costs {:.1} % of a request",
        grant_us.0,
        request_us.0,
        docket::embed::OpenAiConfig::new("", "").max_batch,
        grant_us.0 / request_us.0.max(1e-9) * 100.0
    );
    println!(
        "  p99: grant {:.0} µs, request {:.0} µs",
        grant_us.1, request_us.1
    );
    println!(
        "fleet: {} RPM shared, measured {} s per run",
        args.rpm, args.seconds
    );
    println!(
        "{:>9} {:>10} {:>14} {:>12} {:>18} {:>10}",
        "processes", "requests", "share of limit", "over (429)", "most in a window", "documents"
    );
    for row in &rows {
        println!(
            "{:>9} {:>10} {:>13.1}% {:>12} {:>18} {:>10}",
            row.processes,
            row.requests,
            row.share * 100.0,
            row.rate_limited,
            row.max_in_window,
            row.documents
        );
    }
    let worst = rows.iter().map(|r| r.share).fold(f64::INFINITY, f64::min);
    println!(
        "{}",
        json!({
            "bench": "pipeline_fleet",
            "rpm_limit": args.rpm,
            "seconds": args.seconds,
            "grant_us_median": round(grant_us.0),
            "grant_us_p99": round(grant_us.1),
            "request_us_median": round(request_us.0),
            "request_us_p99": round(request_us.1),
            "runs": rows.iter().map(|r| json!({
                "processes": r.processes,
                "requests": r.requests,
                "share_of_limit": round(r.share),
                "over_limit_429": r.rate_limited,
                "max_in_window": r.max_in_window,
            })).collect::<Vec<_>>(),
            "ratio": round(worst),
        })
    );
    Ok(())
}

/// Median and p99 (µs) of one grant statement and of one test-server request.
async fn costs(args: &PipelineBench) -> anyhow::Result<((f64, f64), (f64, f64))> {
    let server = start_server(None).await?;
    let docket = Docket::start(
        &args.database_url,
        Provider::TestServer,
        None,
        Some(&server),
        false,
    )
    .await?;
    let budget = FleetBudget::new(docket.pool.clone(), "bench-grant-cost".into());
    // A limit so high the grant never asks anyone to wait: only the statement is timed.
    let ask = Ask {
        requests: 1,
        tokens: 0,
        request_interval: Some(Duration::from_nanos(1000)),
        token_interval: None,
    };
    let mut grants = Vec::with_capacity(GRANTS);
    for _ in 0..GRANTS {
        let started = Instant::now();
        budget.grant(&ask).await.context("granting")?;
        grants.push(started.elapsed());
    }
    docket.stop().await?;
    let embedder = OpenAiEmbedder::new(openai_config(&server), Arc::new(Limiter::unlimited()))?;
    let texts: Vec<String> = documents(embedder.max_batch(), 1, 9)
        .into_iter()
        .map(|(_, text)| text.chars().take(800).collect())
        .collect();
    let mut requests = Vec::with_capacity(REQUESTS);
    for _ in 0..REQUESTS {
        let started = Instant::now();
        embedder
            .embed(&texts)
            .await
            .context("embedding through the test server")?;
        requests.push(started.elapsed());
    }
    Ok((percentiles(&mut grants), percentiles(&mut requests)))
}

fn percentiles(samples: &mut [Duration]) -> (f64, f64) {
    samples.sort();
    let at = |q: f64| {
        let index = ((samples.len() as f64 - 1.0) * q).round() as usize;
        samples.get(index).map_or(0.0, |d| d.as_secs_f64() * 1e6)
    };
    (at(0.5), at(0.99))
}

async fn start_server(rpm: Option<NonZeroU32>) -> anyhow::Result<EmbeddingServer> {
    docket_testkit::start(EmbeddingServerConfig {
        rpm: rpm.map(NonZeroU32::get),
        rolling: true,
        dims: DIMS,
        ..EmbeddingServerConfig::default()
    })
    .await
}

/// One run with `processes` workers sharing `rpm`.
async fn measure(args: &PipelineBench, rpm: NonZeroU32, processes: usize) -> anyhow::Result<Row> {
    let server = start_server(Some(rpm)).await?;
    let wanted = (u64::from(rpm.get()) * args.seconds / 60) as usize;
    let documents = documents(wanted * 3 / 2 + 20, 2, 10 + processes as u64);
    println!(
        "fleet phase: {processes} worker processes, {} documents, limit {rpm} RPM, measuring {} s",
        documents.len(),
        args.seconds
    );
    let docket = Docket::start(
        &args.database_url,
        Provider::TestServer,
        Some(rpm),
        Some(&server),
        false,
    )
    .await?;
    let mut children = Vec::with_capacity(processes);
    for _ in 0..processes {
        children.push(spawn_worker(&args.database_url, &server, rpm)?);
    }
    let upload = docket.upload(documents);
    let measured = docket.measure_window(&server, args.seconds);
    let (uploaded, measured) = tokio::join!(upload, measured);
    for child in &mut children {
        // The scratch database is dropped next: nothing of the children's work is kept.
        let _ = child.start_kill();
        let _ = child.wait().await;
    }
    uploaded?;
    let super::docket::Window {
        before,
        after,
        ready: documents,
    } = measured?;
    docket.stop().await?;
    let requests = answered(&after) - answered(&before);
    let allowed = f64::from(rpm.get()) * args.seconds as f64 / 60.0;
    Ok(Row {
        processes,
        requests,
        share: requests as f64 / allowed,
        rate_limited: after.rate_limited,
        max_in_window: after.max_requests_in_rolling_window,
        documents,
    })
}

/// A `docket worker` child (the binary beside this one) on the scratch database, embedding through `server`.
fn spawn_worker(
    database_url: &str,
    server: &EmbeddingServer,
    rpm: NonZeroU32,
) -> anyhow::Result<tokio::process::Child> {
    let exe = crate::docket_binary()?;
    tokio::process::Command::new(exe)
        .arg("worker")
        .env("DATABASE_URL", scratch_url(database_url))
        .env("DOCKET_EMBEDDER", "openai")
        .env("DOCKET_OPENAI_BASE_URL", &server.base_url)
        .env("DOCKET_OPENAI_MODEL", "docket-bench")
        .env("DOCKET_OPENAI_DIMENSIONS", DIMS.to_string())
        .env("DOCKET_RPM", rpm.to_string())
        .env("DOCKET_EMBED_CONCURRENCY", "4")
        .env("DOCKET_DB_POOL", "6")
        .env("DOCKET_NO_SCHEDULER", "true")
        .env("RUST_LOG", "warn")
        .stdout(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .context("starting docket worker")
}
