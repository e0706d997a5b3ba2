//! One rate limit for the whole fleet: processes sharing a provider draw on one budget row in
//! PostgreSQL. A "process" here is either a real `docket worker` child or a limiter with its own
//! connection pool, as a second process would have; the test server counts what arrives.

use std::num::NonZeroU32;
use std::time::Duration;

use docket::embed::{EmbedError, Embedder, FleetBudget, RateLimits};
use docket_testkit::embedding_server::{self, EmbeddingServer, EmbeddingServerConfig};
use sqlx::PgPool;
use sqlx::postgres::PgPoolOptions;
use tokio::time::Instant;

use crate::support::{TestApp, database_url, openai_embedder, wait_until};

const DIMS: usize = 32;

async fn server(cfg: EmbeddingServerConfig) -> EmbeddingServer {
    embedding_server::start(EmbeddingServerConfig { dims: DIMS, ..cfg })
        .await
        .expect("test server starts")
}

/// A second connection pool to the test database: what another process would hold.
async fn process_pool(pool: &PgPool) -> PgPool {
    PgPoolOptions::new()
        .max_connections(2)
        .connect(&database_url(pool).await)
        .await
        .expect("a second pool connects")
}

/// An embedder for `server` whose limiter books on the fleet budget in `pool`'s database.
fn fleet_embedder(server: &EmbeddingServer, pool: &PgPool, limits: RateLimits) -> Embedder {
    let embedder = openai_embedder(server, DIMS as u32, limits, |c| {
        c.max_batch = 1;
        c.initial_backoff = Duration::from_millis(10);
        c.max_backoff = Duration::from_millis(100);
    });
    assert!(embedder.share_rate_budget(pool));
    embedder
}

fn the_budget(embedder: &Embedder, pool: &PgPool) -> FleetBudget {
    let Embedder::OpenAi(openai) = embedder else {
        panic!("an OpenAI-compatible embedder");
    };
    FleetBudget::new(pool.clone(), openai.budget_key())
}

fn rpm(n: u32) -> RateLimits {
    RateLimits {
        rpm: NonZeroU32::new(n),
        ..RateLimits::default()
    }
}

/// Runs two "processes" (own pool, own limiter, four workers each) sending `per_process`
/// one-text requests of about `padding` extra bytes each under `limits`; asserts both finished.
async fn two_processes(
    pool: &PgPool,
    server: &EmbeddingServer,
    limits: RateLimits,
    per_process: usize,
    padding: usize,
) {
    let mut processes = tokio::task::JoinSet::new();
    for process in 0..2 {
        let own_pool = process_pool(pool).await;
        let embedder = fleet_embedder(server, &own_pool, limits);
        processes.spawn(async move {
            let mut workers = tokio::task::JoinSet::new();
            for worker in 0..4 {
                let embedder = embedder.clone();
                workers.spawn(async move {
                    for i in 0..per_process / 4 {
                        let text = format!("process {process} worker {worker} text {i} ");
                        embedder.embed(&[text + &"x".repeat(padding)]).await?;
                    }
                    Ok::<usize, EmbedError>(per_process / 4)
                });
            }
            let mut sent = 0;
            while let Some(joined) = workers.join_next().await {
                sent += joined
                    .expect("worker task ran")
                    .expect("embedding succeeds");
            }
            (process, sent)
        });
    }
    let mut progress = Vec::new();
    while let Some(joined) = processes.join_next().await {
        progress.push(joined.expect("process task ran"));
    }
    progress.sort();
    assert_eq!(progress, vec![(0, per_process), (1, per_process)]);
}

/// How many budget rows exist: the processes of a test share one.
async fn budget_rows(pool: &PgPool) -> i64 {
    sqlx::query_scalar("select count(*) from rate_budgets")
        .fetch_one(pool)
        .await
        .expect("count budgets")
}

#[sqlx::test(migrator = "docket::db::MIGRATOR")]
async fn two_processes_sharing_one_limit_never_send_more_than_it_per_window_and_both_progress(
    pool: PgPool,
) {
    // The server takes 12 requests per 1 s window. The fleet limit is 240/min, booked at one
    // request per (60 + 0.25 + 1) s / 239 = 0.256 s: any 1 s window sees the slices that started
    // within 1 s + 0.25 s + the real latency spread, at most 6 < 12. Two processes that each
    // kept 240/min to themselves would send about 8 a second each and be refused.
    const WINDOW_REQUESTS: u32 = 12;
    const PER_PROCESS: usize = 12;
    let server = server(EmbeddingServerConfig {
        rpm: Some(WINDOW_REQUESTS),
        window: Duration::from_secs(1),
        ..EmbeddingServerConfig::default()
    })
    .await;
    two_processes(&pool, &server, rpm(240), PER_PROCESS, 0).await;
    let stats = server.stats();
    println!(
        "429s {}, most accepted in a window {}",
        stats.rate_limited, stats.max_requests_in_window
    );
    // The server refuses (429) whatever would exceed a window, so "never more than 12 offered
    // in a window" is "no 429"; accepted requests per window are reported as well.
    assert_eq!(stats.rate_limited, 0, "{stats:?}");
    assert!(
        stats.max_requests_in_window <= u64::from(WINDOW_REQUESTS),
        "{stats:?}"
    );
    assert_eq!(stats.inputs_embedded, 2 * PER_PROCESS as u64);
    assert_eq!(
        budget_rows(&pool).await,
        1,
        "both processes booked on one row"
    );
}

#[sqlx::test(migrator = "docket::db::MIGRATOR")]
async fn two_processes_sharing_one_token_limit_never_send_more_tokens_than_it_per_window(
    pool: PgPool,
) {
    // 600 tokens per 1 s window at the server; the fleet limit is 12 000/min, booked at about
    // 196 tokens a second. Requests of about 45 tokens: a 1 s window sees what started within
    // 1.25 s and a little latency, plus one slice, under 300. Two processes with 12 000/min each
    // would send about 400 a second at once, more with the bunching of four workers each.
    const WINDOW_TOKENS: u32 = 600;
    let server = server(EmbeddingServerConfig {
        tpm: Some(WINDOW_TOKENS),
        window: Duration::from_secs(1),
        ..EmbeddingServerConfig::default()
    })
    .await;
    let limits = RateLimits {
        tpm: NonZeroU32::new(12_000),
        ..RateLimits::default()
    };
    two_processes(&pool, &server, limits, 12, 160).await;
    let stats = server.stats();
    println!(
        "429s {}, most tokens accepted in a window {}",
        stats.rate_limited, stats.max_tokens_in_window
    );
    assert_eq!(stats.rate_limited, 0, "{stats:?}");
    assert!(
        stats.max_tokens_in_window <= u64::from(WINDOW_TOKENS),
        "{stats:?}"
    );
    assert_eq!(stats.inputs_embedded, 24);
    assert_eq!(
        budget_rows(&pool).await,
        1,
        "both processes booked on one row"
    );
}

#[sqlx::test(migrator = "docket::db::MIGRATOR")]
async fn a_pause_written_by_one_process_holds_back_the_next_grant_of_another(pool: PgPool) {
    let server = server(EmbeddingServerConfig::default()).await;
    let first_pool = process_pool(&pool).await;
    let second_pool = process_pool(&pool).await;
    let first = fleet_embedder(&server, &first_pool, rpm(6000));
    let second = fleet_embedder(&server, &second_pool, rpm(6000));
    // What a 429 with `Retry-After: 2` does in the first process.
    let limiter = first.limiter().expect("the HTTP provider has a limiter");
    limiter
        .pause_until(Instant::now() + Duration::from_secs(2))
        .await;
    let grant = the_budget(&second, &second_pool)
        .grant(&rpm(6000).slice_for(1))
        .await
        .expect("grant");
    // The database's clock ran on between the two statements: a little less than 2 s is left.
    assert!(grant.wait > Duration::from_secs(1), "{grant:?}");
    assert!(grant.wait <= Duration::from_secs(2), "{grant:?}");
}

#[sqlx::test(migrator = "docket::db::MIGRATOR")]
async fn a_worker_killed_while_holding_budget_costs_the_fleet_at_most_one_slice(pool: PgPool) {
    // 60 requests a minute: a slice is one request, (60 + 0.25 + 1) s / 59 = 1.04 s of the rate
    // line. The child's four embed workers want far more than that, so at any moment one of them
    // holds a booked slice and waits for its start.
    let server = server(EmbeddingServerConfig::default()).await;
    let api = TestApp::builder(pool.clone()).spawn().await;
    for i in 0..20 {
        let text = format!("Document {i} is short and has one chunk about rate budgets.\n");
        api.upload_one(&format!("doc-{i}.txt"), text.into_bytes())
            .await;
    }
    let mut child = tokio::process::Command::new(env!("CARGO_BIN_EXE_docket"))
        .arg("worker")
        .env("DATABASE_URL", database_url(&pool).await)
        .env("DOCKET_EMBEDDER", "openai")
        .env("DOCKET_OPENAI_BASE_URL", &server.base_url)
        .env("DOCKET_OPENAI_MODEL", "docket-test-embedder")
        .env("DOCKET_OPENAI_DIMENSIONS", DIMS.to_string())
        .env("DOCKET_RPM", "60")
        .env("DOCKET_EMBED_CONCURRENCY", "4")
        .env("RUST_LOG", "warn")
        .kill_on_drop(true)
        .spawn()
        .expect("start docket worker");
    wait_until(
        Duration::from_secs(60),
        "the child embeds under the limit",
        || async { server.stats().inputs_embedded >= 3 },
    )
    .await;
    child.start_kill().expect("SIGKILL");
    child.wait().await.expect("the child is reaped");

    let survivor_pool = process_pool(&pool).await;
    let survivor = fleet_embedder(&server, &survivor_pool, rpm(60));
    let budget = the_budget(&survivor, &survivor_pool);
    let (key, booked): (String, f64) = sqlx::query_as(
        "select key, extract(epoch from request_tat - clock_timestamp())::float8
         from rate_budgets",
    )
    .fetch_one(&pool)
    .await
    .expect("the child's budget row");
    assert_eq!(
        key,
        budget.key(),
        "the child and this process share one row"
    );
    // What lies booked beyond now is at most the slice the child waited for and the one it
    // used last: two slices. Four workers booking for themselves would leave four beyond it.
    let slice = rpm(60)
        .slice_for(1)
        .request_interval
        .expect("a request limit");
    println!("booked beyond now after the kill: {booked:.3} s (a slice is {slice:?})");
    assert!(booked > 0.0, "the child had booked ahead: {booked}");
    assert!(
        booked <= 2.0 * slice.as_secs_f64() + 0.05,
        "booked {booked} s beyond now"
    );

    // The next process waits for the dead child's slice, no more.
    let grant = budget.grant(&rpm(60).slice_for(1)).await.expect("grant");
    assert!(
        grant.wait <= slice * 2 + Duration::from_millis(50),
        "{grant:?}"
    );
    survivor
        .embed(&["after the kill".to_owned()])
        .await
        .expect("the fleet goes on");
    assert_eq!(server.stats().rate_limited, 0);
    drop(api);
}

#[sqlx::test(migrator = "docket::db::MIGRATOR")]
async fn three_processes_never_exceed_a_rolling_window_with_jittered_arrivals(pool: PgPool) {
    // The provider counts a rolling 10 s window of 100 requests (600/min) as requests arrive,
    // each up to 150 ms late. The fleet is told the window and a 400 ms latency allowance (the
    // jitter, plus this loaded machine's own delay between a grant and the send), and three
    // processes of four workers each want far more than the limit for 25 s.
    const PER_MINUTE: u32 = 600;
    const WINDOW: Duration = Duration::from_secs(10);
    const PER_WINDOW: u64 = 100;
    const RUN: Duration = Duration::from_secs(25);
    let server = server(EmbeddingServerConfig {
        rpm: Some(PER_WINDOW as u32),
        window: WINDOW,
        rolling: true,
        arrival_jitter: Duration::from_millis(150),
        seed: 24,
        ..EmbeddingServerConfig::default()
    })
    .await;
    let limits = RateLimits {
        window: WINDOW,
        latency_allowance: Duration::from_millis(400),
        ..rpm(PER_MINUTE)
    };
    let started = Instant::now();
    let mut processes = tokio::task::JoinSet::new();
    for process in 0..3 {
        let embedder = fleet_embedder(&server, &process_pool(&pool).await, limits);
        for worker in 0..4 {
            let embedder = embedder.clone();
            processes.spawn(async move {
                let mut i = 0;
                while started.elapsed() < RUN {
                    let text = format!("process {process} worker {worker} text {i}");
                    embedder.embed(&[text]).await?;
                    i += 1;
                }
                Ok::<u64, EmbedError>(i)
            });
        }
    }
    let mut sent = 0;
    while let Some(joined) = processes.join_next().await {
        sent += joined.expect("worker ran").expect("embedding succeeds");
    }
    let elapsed = started.elapsed();
    let stats = server.stats();
    let use_of_limit = sent as f64 / (elapsed.as_secs_f64() * f64::from(PER_MINUTE) / 60.0);
    println!(
        "sent {sent} in {elapsed:.1?}: {:.1} % of the limit; most in a rolling window {} of \
         {PER_WINDOW}; 429s {}",
        use_of_limit * 100.0,
        stats.max_requests_in_rolling_window,
        stats.rate_limited
    );
    assert_eq!(stats.rate_limited, 0, "{stats:?}");
    assert!(
        stats.max_requests_in_rolling_window <= PER_WINDOW,
        "{stats:?}"
    );
    assert_eq!(stats.inputs_embedded, sent);
    // A floor well under the design's 93 % that a loaded machine still clears: the fleet must
    // keep the limit busy, not merely stay under it.
    assert!(use_of_limit >= 0.8, "used {use_of_limit:.3} of the limit");
}
