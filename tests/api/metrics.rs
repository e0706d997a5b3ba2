//! `/metrics` over a real HTTP server: the text parses as Prometheus exposition format (a small
//! parser here checks the grammar), its gauges equal what the database holds, and every 429 of
//! the test embedding server is counted, also those retried inside one call.

use std::collections::BTreeMap;
use std::time::Duration;

use docket::embed::RateLimits;
use docket::queue::{NewJob, Queue};
use docket::worker::{Outcome, Registry, Worker, WorkerConfig};
use docket_testkit::embedding_server::{self, EmbeddingServerConfig};
use serde_json::json;
use sqlx::PgPool;

use crate::support::{TestApp, enqueue, openai_embedder};

/// One sample: metric name, labels, value.
type Sample = (String, BTreeMap<String, String>, f64);

/// Parses Prometheus text format 0.0.4, panicking on anything malformed: every sample belongs
/// to a family declared by `# TYPE` before it, names and labels are well formed, values are
/// floats, and histogram buckets are cumulative.
fn parse(text: &str) -> Vec<Sample> {
    let mut types: BTreeMap<String, String> = BTreeMap::new();
    let mut samples = Vec::new();
    let valid_name = |s: &str| {
        !s.is_empty()
            && s.chars().enumerate().all(|(i, c)| {
                c.is_ascii_alphabetic() || c == '_' || c == ':' || (i > 0 && c.is_ascii_digit())
            })
    };
    for line in text.lines() {
        if line.is_empty() {
            continue;
        }
        if let Some(rest) = line.strip_prefix("# ") {
            let mut parts = rest.splitn(3, ' ');
            let keyword = parts.next().expect("keyword");
            let family = parts.next().expect("family").to_owned();
            assert!(valid_name(&family), "bad family name in {line:?}");
            if keyword == "TYPE" {
                let kind = parts.next().expect("type");
                assert!(
                    ["counter", "gauge", "histogram", "summary", "untyped"].contains(&kind),
                    "bad type in {line:?}"
                );
                assert!(
                    types.insert(family, kind.to_owned()).is_none(),
                    "TYPE twice: {line}"
                );
            } else {
                assert_eq!(keyword, "HELP", "unknown comment {line:?}");
            }
            continue;
        }
        let (series, value) = line.rsplit_once(' ').expect("a value");
        let value: f64 = match value {
            "+Inf" => f64::INFINITY,
            "-Inf" => f64::NEG_INFINITY,
            v => v
                .parse()
                .unwrap_or_else(|_| panic!("bad value in {line:?}")),
        };
        let (name, labels) = match series.split_once('{') {
            None => (series.to_owned(), BTreeMap::new()),
            Some((name, rest)) => {
                let body = rest.strip_suffix('}').expect("closing brace");
                let mut labels = BTreeMap::new();
                let mut chars = body.chars().peekable();
                while chars.peek().is_some() {
                    let key: String = chars.by_ref().take_while(|c| *c != '=').collect();
                    assert!(valid_name(&key), "bad label name in {line:?}");
                    assert_eq!(chars.next(), Some('"'), "label value quoted in {line:?}");
                    let mut value = String::new();
                    loop {
                        match chars.next().expect("unterminated label value") {
                            '\\' => match chars.next().expect("escape") {
                                'n' => value.push('\n'),
                                c @ ('\\' | '"') => value.push(c),
                                c => panic!("bad escape \\{c} in {line:?}"),
                            },
                            '"' => break,
                            c => value.push(c),
                        }
                    }
                    labels.insert(key, value);
                    if chars.peek() == Some(&',') {
                        chars.next();
                    }
                }
                (name.to_owned(), labels)
            }
        };
        let family = ["_bucket", "_sum", "_count"]
            .iter()
            .find_map(|suffix| {
                name.strip_suffix(suffix)
                    .filter(|f| types.get(*f).map(String::as_str) == Some("histogram"))
            })
            .unwrap_or(&name)
            .to_owned();
        assert!(
            types.contains_key(&family),
            "sample before its TYPE: {line:?}"
        );
        samples.push((name, labels, value));
    }
    // Buckets of each histogram series are cumulative and end at +Inf = _count.
    let mut buckets: BTreeMap<String, Vec<(f64, f64)>> = BTreeMap::new();
    for (name, labels, value) in &samples {
        if let Some(family) = name.strip_suffix("_bucket") {
            let mut rest = labels.clone();
            let le: f64 = match rest.remove("le").expect("le").as_str() {
                "+Inf" => f64::INFINITY,
                v => v.parse().expect("le"),
            };
            buckets
                .entry(format!("{family}{rest:?}"))
                .or_default()
                .push((le, *value));
        }
    }
    for (series, points) in buckets {
        assert!(
            points
                .windows(2)
                .all(|w| w[0].0 < w[1].0 && w[0].1 <= w[1].1),
            "{series} buckets not cumulative"
        );
        assert_eq!(points.last().map(|p| p.0), Some(f64::INFINITY));
    }
    samples
}

fn value(samples: &[Sample], name: &str, labels: &[(&str, &str)]) -> Option<f64> {
    samples
        .iter()
        .find(|(n, l, _)| {
            n == name
                && l.len() == labels.len()
                && labels
                    .iter()
                    .all(|(k, v)| l.get(*k).map(String::as_str) == Some(*v))
        })
        .map(|(_, _, v)| *v)
}

async fn scrape(api: &TestApp) -> Vec<Sample> {
    let response = api
        .client
        .get(api.url("/metrics"))
        .send()
        .await
        .expect("scrape");
    assert_eq!(response.status(), reqwest::StatusCode::OK);
    assert!(
        response.headers()["content-type"]
            .to_str()
            .expect("ascii")
            .starts_with("text/plain; version=0.0.4")
    );
    parse(&response.text().await.expect("body"))
}

#[sqlx::test(migrator = "docket::db::MIGRATOR")]
async fn metrics_parse_as_prometheus_text_and_match_the_database(pool: PgPool) {
    let api = TestApp::builder(pool.clone()).spawn().await;
    // A kind no other test uses, so this process's counters for it are ours alone.
    let kind = "metrics-probe";
    for n in 0..3 {
        enqueue(&pool, NewJob::new(kind, json!({ "n": n }))).await;
    }
    let mut registry = Registry::new();
    registry.register(kind, 2, |_job| async { Ok(Outcome::Complete) });
    let worker = Worker::new(
        Queue::new(pool.clone(), Duration::from_secs(60)),
        registry,
        WorkerConfig::for_lease(Duration::from_secs(60)),
    );
    assert_eq!(worker.run_until_idle().await.expect("run"), 3);

    // Only future work is waiting: no due job, so the oldest due age is zero.
    enqueue(
        &pool,
        NewJob::new("noop", json!({})).run_at(chrono::Utc::now() + chrono::Duration::hours(1)),
    )
    .await;
    let dead = enqueue(&pool, NewJob::new("sleep", json!({ "ms": 1 }))).await;
    sqlx::query("update jobs set status = 'dead', finished_at = now() where id = $1")
        .bind(dead.0)
        .execute(&pool)
        .await
        .expect("dead");
    sqlx::query(
        "insert into documents (filename, content_type, byte_size, sha256, status, error)
         values ('scan.pdf', 'application/pdf', 1, '\\x01', 'failed',
                 '{\"code\": \"no_text\", \"message\": \"no text layer\"}')",
    )
    .execute(&pool)
    .await
    .expect("failed document");

    let samples = scrape(&api).await;
    let by_status: Vec<(String, String, i64)> =
        sqlx::query_as("select status, kind, count(*) from jobs group by 1, 2")
            .fetch_all(&pool)
            .await
            .expect("jobs");
    assert_eq!(
        samples
            .iter()
            .filter(|(n, _, _)| n == "docket_jobs")
            .count(),
        by_status.len()
    );
    for (status, kind, n) in &by_status {
        assert_eq!(
            value(
                &samples,
                "docket_jobs",
                &[("status", status), ("kind", kind)]
            ),
            Some(*n as f64),
            "{status} {kind}"
        );
    }
    assert_eq!(value(&samples, "docket_dead_jobs", &[]), Some(1.0));
    assert_eq!(
        value(&samples, "docket_oldest_due_job_age_seconds", &[]),
        Some(0.0)
    );
    assert_eq!(
        value(
            &samples,
            "docket_extraction_failures",
            &[("reason", "no_text")]
        ),
        Some(1.0)
    );
    assert_eq!(value(&samples, "docket_documents", &[]), Some(1.0));
    assert_eq!(
        value(&samples, "docket_job_completions_total", &[("kind", kind)]),
        Some(3.0)
    );

    // A due job that has waited 100 seconds shows up in the age.
    let waiting = enqueue(&pool, NewJob::new("noop", json!({ "wait": true }))).await;
    sqlx::query("update jobs set run_at = now() - interval '100 seconds' where id = $1")
        .bind(waiting.0)
        .execute(&pool)
        .await
        .expect("backdate");
    let samples = scrape(&api).await;
    let age = value(&samples, "docket_oldest_due_job_age_seconds", &[]).expect("age");
    assert!(age >= 100.0, "{age}");

    // 429s the provider retries inside one call never reach the caller, yet each one counts:
    // one request a second lets only the first of three requests through at once.
    let server = embedding_server::start(EmbeddingServerConfig {
        rpm: Some(1),
        window: Duration::from_secs(1),
        dims: 8,
        ..Default::default()
    })
    .await
    .expect("embedding server");
    // A model name no other test uses, so the counter's series is this test's alone.
    let embedder = openai_embedder(&server, 8, RateLimits::default(), |c| {
        c.model = "metrics-429-probe".into();
        c.max_batch = 1;
    });
    let texts: Vec<String> = (0..3).map(|i| format!("limited text {i}")).collect();
    let vectors = embedder.embed(&texts).await.expect("waits out the 429s");
    assert_eq!(vectors.len(), 3);
    let refused = server.stats().rate_limited;
    assert!(refused >= 1, "{:?}", server.stats());
    let samples = scrape(&api).await;
    assert_eq!(
        value(
            &samples,
            "docket_embedding_429_responses_total",
            &[("model", "openai:metrics-429-probe:8")]
        ),
        Some(refused as f64)
    );
}

#[sqlx::test(migrator = "docket::db::MIGRATOR")]
async fn metrics_off_loopback_need_a_token(pool: PgPool) {
    let guard = docket::http::Guard {
        metrics_token: Some("scraper-token-0123456789".into()),
        ..Default::default()
    };
    let api_token = "api-token-0123456789abc";
    let api = TestApp::builder(pool)
        .token(api_token)
        .max_upload_bytes(1024)
        .guard(guard)
        .spawn()
        .await;
    let get = |token: Option<&str>| {
        let mut request = api.client.get(api.url("/metrics"));
        if let Some(token) = token {
            request = request.bearer_auth(token);
        }
        request.send()
    };
    assert_eq!(
        get(None).await.expect("scrape").status(),
        reqwest::StatusCode::UNAUTHORIZED
    );
    assert_eq!(
        get(Some("a-wrong-token-0123456789"))
            .await
            .expect("scrape")
            .status(),
        reqwest::StatusCode::UNAUTHORIZED
    );
    for token in ["scraper-token-0123456789", api_token] {
        assert_eq!(
            get(Some(token)).await.expect("scrape").status(),
            reqwest::StatusCode::OK,
            "{token}"
        );
    }
}

#[sqlx::test(migrator = "docket::db::MIGRATOR")]
async fn the_database_gauges_are_read_at_most_once_per_interval(pool: PgPool) {
    let guard = docket::http::Guard {
        gauges: std::sync::Arc::new(docket::metrics::GaugeCache::new(Duration::from_secs(600))),
        ..Default::default()
    };
    let api = TestApp::builder(pool.clone())
        .max_upload_bytes(1024)
        .guard(guard)
        .spawn()
        .await;
    // Many scrapes at once: one reading serves them all.
    let scrapes = (0..8).map(|_| scrape(&api));
    for samples in futures::future::join_all(scrapes).await {
        assert_eq!(value(&samples, "docket_documents", &[]), Some(0.0));
    }
    sqlx::query(
        "insert into documents (filename, content_type, byte_size, sha256)
         values ('new.txt', 'text/plain', 1, '\\x02')",
    )
    .execute(&pool)
    .await
    .expect("a document");
    let samples = scrape(&api).await;
    assert_eq!(
        value(&samples, "docket_documents", &[]),
        Some(0.0),
        "a scrape within the interval reuses the last reading"
    );
}
