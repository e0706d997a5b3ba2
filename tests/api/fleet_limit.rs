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
        tpm: None,
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
    // The server takes 12 requests per 1 s window. The fleet limit is 240/min = 4/s: the fleet
    // sends at most 4 a second plus the burst (1 s worth, 4) plus one slice (1), 9 < 12. Two
    // processes that each kept 240/min to themselves would send 8 a second plus two bursts,
    // about 16 in the first window, and be refused.
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
    // 600 tokens per 1 s window at the server; the fleet limit is 12 000/min = 200/s. Requests
    // of about 45 tokens: the fleet sends at most 200 a second, plus the burst (200), plus one
    // slice and one request (about 45 each), under 500. Two processes with 12 000/min each would
    // send about 800 in the first window.
    const WINDOW_TOKENS: u32 = 600;
    let server = server(EmbeddingServerConfig {
        tpm: Some(WINDOW_TOKENS),
        window: Duration::from_secs(1),
        ..EmbeddingServerConfig::default()
    })
    .await;
    let limits = RateLimits {
        rpm: None,
        tpm: NonZeroU32::new(12_000),
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
    // 60 requests a minute: a slice is one request, one second of the rate line, and the burst
    // allowance is one second too. The child's four embed workers want far more than that, so
    // at any moment one of them holds a booked slice and waits for its start.
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
    // What lies booked beyond now is the burst allowance (1 s) plus at most the one slice the
    // child held (1 s). Four workers booking for themselves would leave up to 4 s beyond it.
    println!("booked beyond now after the kill: {booked:.3} s");
    assert!(booked > 0.0, "the child had booked ahead: {booked}");
    assert!(booked <= 2.05, "booked {booked} s beyond now");

    // The next process waits for the dead child's slice and its own, no more.
    let grant = budget.grant(&rpm(60).slice_for(1)).await.expect("grant");
    assert!(grant.wait <= Duration::from_millis(2050), "{grant:?}");
    survivor
        .embed(&["after the kill".to_owned()])
        .await
        .expect("the fleet goes on");
    assert_eq!(server.stats().rate_limited, 0);
    drop(api);
}
