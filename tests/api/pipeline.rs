//! The pipeline end to end against the real test embedding server: faults and rate limits,
//! a killed `docket worker` process resumed in-process, and permanent provider errors.

use std::collections::{BTreeSet, HashMap};
use std::num::NonZeroU32;
use std::sync::Arc;
use std::time::Duration;

use docket::embed::RateLimits;
use docket::pipeline::Pipeline;
use docket::queue::Queue;
use docket_testkit::embedding_server::{self, EmbeddingServer, EmbeddingServerConfig};
use serde_json::Value;
use sqlx::PgPool;
use tokio_util::sync::CancellationToken;

use crate::support::{
    TestApp, TestWorker, chunks, database_url, fixture, openai_embedder, pipeline, wait_until,
};

const DIMS: usize = 32;

async fn server(cfg: EmbeddingServerConfig) -> EmbeddingServer {
    embedding_server::start(EmbeddingServerConfig { dims: DIMS, ..cfg })
        .await
        .expect("test server starts")
}

/// Runs a real background worker (which honours every `run_at`, unlike `drive`) until each
/// of `ids` has left the pipeline, then stops it.
async fn run_until_settled(
    api: &TestApp,
    pool: &PgPool,
    pipeline: &Arc<Pipeline>,
    ids: &[i64],
    embed: usize,
) {
    let worker = TestWorker::new(pool, pipeline, embed);
    let stop = CancellationToken::new();
    let handle = tokio::spawn(worker.into_worker().run(stop.clone().cancelled_owned()));
    wait_until(
        Duration::from_secs(180),
        "every document ready or failed",
        || async {
            for id in ids {
                let status = api.document(*id).await["status"].clone();
                if status != "ready" && status != "failed" {
                    return false;
                }
            }
            true
        },
    )
    .await;
    stop.cancel();
    handle.await.expect("worker stops");
}

/// Every chunk text of `ids`, with how many chunks hold it.
async fn chunk_texts(pool: &PgPool, ids: &[i64]) -> HashMap<String, u64> {
    let mut texts = HashMap::new();
    for id in ids {
        for (_, text) in chunks(pool, *id).await {
            *texts.entry(text).or_default() += 1;
        }
    }
    texts
}

#[sqlx::test(migrator = "docket::db::MIGRATOR")]
async fn thirty_percent_faults_under_a_tight_limit_end_ready_with_every_text_embedded_once(
    pool: PgPool,
) {
    const WINDOW_REQUESTS: u32 = 12;
    const WINDOW_TOKENS: u32 = 6000;
    let server = server(EmbeddingServerConfig {
        rpm: Some(WINDOW_REQUESTS),
        tpm: Some(WINDOW_TOKENS),
        window: Duration::from_secs(1),
        fail_rate: 0.1,
        drop_rate: 0.1,
        // Slowness is drawn only for requests that neither dropped nor failed, so its rate is
        // a little higher to make about 30 % of all requests faulty.
        slow_rate: 0.15,
        // Well under the request timeout: a slow answer that the client gave up on would be
        // embedded by the server and then again by the retry, which is not what this measures.
        slow_delay: Duration::from_millis(150),
        seed: 3,
        ..EmbeddingServerConfig::default()
    })
    .await;
    // The client limiter runs at a third of the server's window: the limiter's burst is one
    // second's worth, so any 1 s window sees at most burst + rate = 2/3 of the server limit.
    let limits = RateLimits {
        rpm: NonZeroU32::new(WINDOW_REQUESTS * 60 / 3),
        tpm: NonZeroU32::new(WINDOW_TOKENS * 60 / 3),
        ..RateLimits::default()
    };
    let embedder = openai_embedder(&server, DIMS as u32, limits, |c| {
        // Small batches: many requests, so many faults and many windows.
        c.max_batch = 3;
        c.max_batch_tokens = 1500;
        c.request_timeout = Duration::from_secs(10);
        c.initial_backoff = Duration::from_millis(50);
        c.max_backoff = Duration::from_millis(400);
        c.max_elapsed = Duration::from_secs(30);
    });
    let pipeline = pipeline(&pool, embedder).await;
    let api = TestApp::builder(pool.clone()).spawn().await;
    let mut ids = Vec::new();
    for (name, path) in [
        ("outline.pdf", "pdf/pdflatex-outline.pdf"),
        ("tutorial.html", "html/python-tutorial-introduction.html"),
        ("README.md", "text/pdfjs-README.md"),
        ("faq.ko.html", "html/debian-faq-choosing.ko.html"),
    ] {
        ids.push(api.upload_one(name, fixture(path)).await);
    }
    run_until_settled(&api, &pool, &pipeline, &ids, 2).await;

    for id in &ids {
        let detail = api.document(*id).await;
        assert_eq!(detail["status"], "ready", "{detail}");
        let sets = &detail["embedding_sets"][0];
        assert_eq!(sets["embedded"], detail["chunk_count"], "{detail}");
    }
    let stats = server.stats();
    let summary = format!(
        "requests {}, 500s {}, drops {}, slow {}, 429s {}, most requests in a window {}, most tokens {}",
        stats.requests,
        stats.server_errors,
        stats.drops,
        stats.slow,
        stats.rate_limited,
        stats.max_requests_in_window,
        stats.max_tokens_in_window
    );
    println!("{summary}");
    assert!(
        stats.server_errors > 0 && stats.drops > 0 && stats.slow > 0,
        "the faults really happened: {summary}"
    );
    assert_eq!(
        stats.rate_limited, 0,
        "the client's limiter kept every window under the server's limit"
    );
    assert!(stats.max_requests_in_window <= u64::from(WINDOW_REQUESTS));
    assert!(stats.max_tokens_in_window <= u64::from(WINDOW_TOKENS));
    let texts = chunk_texts(&pool, &ids).await;
    let total: u64 = texts.values().sum();
    assert!(total > 60, "enough chunks to need many windows: {total}");
    for (text, chunks) in &texts {
        assert_eq!(
            stats.times_embedded(text),
            *chunks,
            "a chunk text was embedded a different number of times than it occurs: {text:?} ({summary})"
        );
    }
    assert_eq!(stats.inputs_embedded, total, "no vector was computed twice");
    let vectors: i64 = sqlx::query_scalar("select count(*) from embeddings")
        .fetch_one(&pool)
        .await
        .expect("count");
    assert_eq!(vectors as u64, total);
}

#[sqlx::test(migrator = "docket::db::MIGRATOR")]
async fn rate_limited_embeds_wait_for_retry_after_and_spend_no_attempt(pool: PgPool) {
    let server = server(EmbeddingServerConfig {
        rpm: Some(2),
        window: Duration::from_secs(1),
        ..EmbeddingServerConfig::default()
    })
    .await;
    // No client limit, so demand outruns the server; a retry budget shorter than any
    // Retry-After hands every 429 to the queue, which must not count it as an attempt.
    let embedder = openai_embedder(&server, DIMS as u32, RateLimits::default(), |c| {
        c.max_batch = 4;
        c.max_elapsed = Duration::from_millis(200);
    });
    let pipeline = pipeline(&pool, embedder).await;
    let api = TestApp::builder(pool.clone()).spawn().await;
    let id = api
        .upload_one("README.md", fixture("text/pdfjs-README.md"))
        .await;
    // One embed job at a time, so no request is in flight when another one sees a 429: every
    // request the server counts as early really is a retry that did not wait.
    run_until_settled(&api, &pool, &pipeline, &[id], 1).await;

    let detail = api.document(id).await;
    assert_eq!(detail["status"], "ready", "{detail}");
    let stats = server.stats();
    assert!(
        stats.rate_limited >= 2,
        "the limit was below demand: {stats:?}"
    );
    assert_eq!(
        stats.early_retries, 0,
        "every Retry-After was waited out: {stats:?}"
    );
    let embed: Vec<Value> = detail["jobs"]
        .as_array()
        .expect("jobs")
        .iter()
        .filter(|j| j["kind"] == "embed")
        .cloned()
        .collect();
    assert_eq!(embed.len(), 1, "{detail}");
    assert_eq!(embed[0]["status"], "done");
    assert_eq!(
        embed[0]["attempts"], 1,
        "a 429 spent an attempt: {}",
        embed[0]
    );
    assert_eq!(embed[0]["errors"], serde_json::json!([]), "{}", embed[0]);
    assert_eq!(stats.duplicate_embeddings(), 0);
}

/// A text document of `paragraphs` distinct paragraphs, each about one chunk long.
fn long_document(paragraphs: usize) -> Vec<u8> {
    let mut text = String::new();
    for p in 0..paragraphs {
        for s in 0..12 {
            text.push_str(&format!(
                "Paragraph {p} sentence {s} talks about durable pipelines and checkpoints. "
            ));
        }
        text.push_str("\n\n");
    }
    text.into_bytes()
}

#[sqlx::test(migrator = "docket::db::MIGRATOR")]
async fn a_worker_killed_mid_embedding_resumes_without_re_embedding_finished_batches(pool: PgPool) {
    // Each request takes a while, so the kill lands between checkpoints.
    let server = server(EmbeddingServerConfig {
        slow_rate: 1.0,
        slow_delay: Duration::from_millis(300),
        ..EmbeddingServerConfig::default()
    })
    .await;
    let api = TestApp::builder(pool.clone()).spawn().await;
    let id = api.upload_one("long.txt", long_document(400)).await;

    let mut child = tokio::process::Command::new(env!("CARGO_BIN_EXE_docket"))
        .arg("worker")
        .env("DATABASE_URL", database_url(&pool).await)
        .env("DOCKET_EMBEDDER", "openai")
        .env("DOCKET_OPENAI_BASE_URL", &server.base_url)
        .env("DOCKET_OPENAI_MODEL", "docket-test-embedder")
        .env("DOCKET_OPENAI_DIMENSIONS", DIMS.to_string())
        .env("DOCKET_LEASE_SECS", "3")
        .env("RUST_LOG", "warn")
        .kill_on_drop(true)
        .spawn()
        .expect("start docket worker");
    let embedded = || async {
        sqlx::query_scalar::<_, i64>("select count(*) from embeddings where document_id = $1")
            .bind(id)
            .fetch_one(&pool)
            .await
            .expect("count")
    };
    wait_until(
        Duration::from_secs(60),
        "the child checkpoints a batch",
        || async { embedded().await > 0 },
    )
    .await;
    child.start_kill().expect("SIGKILL");
    child.wait().await.expect("the child is reaped");

    // The in-process pipeline embeds under the same model version as the child: same provider,
    // model, dimensions, chunking, and the same default batch size.
    let embedder = openai_embedder(&server, DIMS as u32, RateLimits::default(), |_| {});
    let pipeline = pipeline(&pool, embedder).await;
    let max_batch = pipeline.embedder.max_batch();
    let all = chunks(&pool, id).await;
    let done_at_kill: BTreeSet<i32> =
        sqlx::query_scalar("select chunk_index from embeddings where document_id = $1")
            .bind(id)
            .fetch_all(&pool)
            .await
            .expect("embedded indexes")
            .into_iter()
            .collect();
    assert!(
        !done_at_kill.is_empty() && done_at_kill.len() < all.len(),
        "the kill landed mid-embedding: {} of {} chunks had vectors",
        done_at_kill.len(),
        all.len()
    );
    assert!(
        all.len() > 3 * max_batch,
        "a large document: {} chunks",
        all.len()
    );

    // The dead child's lease runs out; the rescuer hands the job back.
    wait_until(Duration::from_secs(30), "the child's lease expires", || async {
        let expired: i64 = sqlx::query_scalar(
            "select count(*) from jobs where status = 'running' and lease_until < clock_timestamp()",
        )
        .fetch_one(&pool)
        .await
        .expect("count");
        expired == 1
    })
    .await;
    let rescued = Queue::new(pool.clone(), Duration::from_secs(30))
        .rescue_expired(10)
        .await
        .expect("rescue");
    assert_eq!(rescued.requeued, 1);
    let worker = TestWorker::new(&pool, &pipeline, 1);
    worker.run_until_idle().await;
    assert_eq!(api.document(id).await["status"], "ready");

    // The bound: a chunk that had its vector at the kill was embedded exactly once; the others
    // at most twice, and the twice-embedded ones are the one batch that was in flight: at most
    // `max_batch` chunks, all of them in the first batch after the checkpoint.
    let stats = server.stats();
    let first_missing = (0..all.len() as i32)
        .find(|i| !done_at_kill.contains(i))
        .expect("a chunk without a vector at the kill");
    let mut twice = Vec::new();
    for (index, (_, text)) in all.iter().enumerate() {
        let index = index as i32;
        let times = stats.times_embedded(text);
        if done_at_kill.contains(&index) {
            assert_eq!(
                times, 1,
                "chunk {index} was checkpointed but embedded {times} times"
            );
        } else {
            assert!(
                (1..=2).contains(&times),
                "chunk {index} embedded {times} times"
            );
            if times == 2 {
                twice.push(index);
            }
        }
    }
    assert!(
        twice.len() <= max_batch,
        "{} chunks re-embedded: {twice:?}",
        twice.len()
    );
    let in_flight = first_missing..first_missing + max_batch as i32;
    assert!(
        twice.iter().all(|i| in_flight.contains(i)),
        "re-embedded chunks {twice:?} lie outside the batch in flight {in_flight:?}"
    );
    assert!(stats.inputs_embedded <= (all.len() + max_batch) as u64);
    let distinct: BTreeSet<&str> = all.iter().map(|(_, t)| t.as_str()).collect();
    assert_eq!(
        distinct.len(),
        all.len(),
        "chunk texts are distinct, so counts are per chunk"
    );
    println!(
        "{} chunks, {} done at the kill, {} embedded twice",
        all.len(),
        done_at_kill.len(),
        twice.len()
    );
}

#[sqlx::test(migrator = "docket::db::MIGRATOR")]
async fn a_provider_rejection_fails_the_document_with_its_message_and_never_the_key(pool: PgPool) {
    const KEY: &str = "sk-test-this-key-must-never-show-1234";
    let server = server(EmbeddingServerConfig {
        api_key: Some("sk-the-right-key".into()),
        ..EmbeddingServerConfig::default()
    })
    .await;
    let embedder = openai_embedder(&server, DIMS as u32, RateLimits::default(), |c| {
        c.api_key = Some(docket::embed::Secret::new(KEY.to_owned()));
    });
    let pipeline = pipeline(&pool, embedder).await;
    let api = TestApp::builder(pool.clone()).spawn().await;
    let id = api
        .upload_one("README.md", fixture("text/pdfjs-README.md"))
        .await;
    let worker = TestWorker::new(&pool, &pipeline, 1);
    worker.run_until_idle().await;

    let detail = api.document(id).await;
    assert_eq!(detail["status"], "failed", "{detail}");
    assert_eq!(detail["error"]["code"], "embedding_rejected", "{detail}");
    let message = detail["error"]["message"].as_str().expect("message");
    assert!(message.contains("Incorrect API key provided"), "{message}");
    let embed = detail["jobs"]
        .as_array()
        .expect("jobs")
        .iter()
        .find(|j| j["kind"] == "embed")
        .cloned()
        .expect("an embed job");
    assert_eq!(embed["status"], "dead", "{embed}");
    assert_eq!(
        embed["attempts"], 1,
        "a permanent error is not retried: {embed}"
    );
    assert!(
        embed["last_error"]
            .as_str()
            .is_some_and(|e| e.contains("Incorrect API key provided")),
        "{embed}"
    );
    assert_eq!(server.stats().unauthorized, 1, "one request, no retries");
    // Nowhere the key could leak: the document page, the job rows, the documents table.
    let everything: String =
        sqlx::query_scalar("select coalesce(string_agg(j::text, ' '), '') from jobs j")
            .fetch_one(&pool)
            .await
            .expect("jobs as text");
    let documents: String =
        sqlx::query_scalar("select coalesce(string_agg(d::text, ' '), '') from documents d")
            .fetch_one(&pool)
            .await
            .expect("documents as text");
    for (place, text) in [
        ("document", detail.to_string()),
        ("jobs", everything),
        ("documents", documents),
    ] {
        assert!(
            !text.contains(KEY),
            "the API key leaked into {place}: {text}"
        );
        assert!(
            !text.contains("never-show"),
            "part of the key leaked into {place}"
        );
    }
}

#[sqlx::test(migrator = "docket::db::MIGRATOR")]
async fn a_400_from_the_provider_fails_the_document_with_the_provider_message(pool: PgPool) {
    let server = server(EmbeddingServerConfig::default()).await;
    // The server makes 32-dimensional vectors; asking for 48 is a request it rejects.
    let embedder = openai_embedder(&server, 48, RateLimits::default(), |_| {});
    let pipeline = pipeline(&pool, embedder).await;
    let api = TestApp::builder(pool.clone()).spawn().await;
    let id = api
        .upload_one("note.txt", b"a short note to embed".to_vec())
        .await;
    TestWorker::new(&pool, &pipeline, 1).run_until_idle().await;
    let detail = api.document(id).await;
    assert_eq!(detail["status"], "failed", "{detail}");
    let message = detail["error"]["message"].as_str().expect("message");
    assert!(message.contains("400"), "{message}");
    assert!(
        message.contains("dimensions=48 is not supported"),
        "{message}"
    );
    assert_eq!(server.stats().bad_requests, 1);
}
