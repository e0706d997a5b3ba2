//! The OpenAI-compatible embedder and the shared limiter, against the real test embedding server
//! on loopback.

use std::num::NonZeroU32;
use std::sync::Arc;
use std::time::Duration;

use docket::embed::{
    EmbedError, Embedder, HashEmbedder, Limiter, OpenAiConfig, OpenAiEmbedder, RateLimits, Secret,
};
use docket_testkit::embedding_server::{self, Corruption, EmbeddingServer, EmbeddingServerConfig};

const DIMS: usize = 32;

async fn server(cfg: EmbeddingServerConfig) -> EmbeddingServer {
    embedding_server::start(EmbeddingServerConfig { dims: DIMS, ..cfg })
        .await
        .expect("test server starts")
}

/// A client for `server` with fast retries; `tweak` adjusts the config.
fn client(server: &EmbeddingServer, tweak: impl FnOnce(&mut OpenAiConfig)) -> Embedder {
    client_with_limiter(server, Arc::new(Limiter::unlimited()), tweak)
}

fn client_with_limiter(
    server: &EmbeddingServer,
    limiter: Arc<Limiter>,
    tweak: impl FnOnce(&mut OpenAiConfig),
) -> Embedder {
    let mut config = OpenAiConfig::new(server.base_url.clone(), "test-model");
    config.dimensions = Some(DIMS as u32);
    config.request_timeout = Duration::from_secs(5);
    config.initial_backoff = Duration::from_millis(10);
    config.max_backoff = Duration::from_millis(100);
    config.max_elapsed = Duration::from_secs(10);
    tweak(&mut config);
    Embedder::OpenAi(OpenAiEmbedder::new(config, limiter).expect("valid config"))
}

fn texts(n: usize, prefix: &str) -> Vec<String> {
    (0..n)
        .map(|i| format!("{prefix} text number {i}"))
        .collect()
}

#[tokio::test]
async fn openai_embeds_and_returns_vectors_in_input_order() {
    let server = server(EmbeddingServerConfig {
        reverse_order: true,
        ..Default::default()
    })
    .await;
    let embedder = client(&server, |_| {});
    let input = texts(5, "ordered");
    let vectors = embedder.embed(&input).await.expect("embedding succeeds");
    let reference = HashEmbedder::new(DIMS);
    let expected: Vec<Vec<f32>> = input.iter().map(|t| reference.embed_one(t)).collect();
    assert_eq!(vectors, expected);
    assert_eq!(embedder.model_id(), format!("openai:test-model:{DIMS}"));
    let stats = server.stats();
    assert_eq!(stats.inputs_embedded, 5);
    assert_eq!(stats.duplicate_embeddings(), 0);
}

#[tokio::test]
async fn requests_respect_the_batch_count_limit() {
    let server = server(EmbeddingServerConfig::default()).await;
    let embedder = client(&server, |c| c.max_batch = 3);
    let vectors = embedder
        .embed(&texts(7, "counted"))
        .await
        .expect("embedding succeeds");
    assert_eq!(vectors.len(), 7);
    let stats = server.stats();
    assert_eq!(stats.requests, 3);
    assert_eq!(stats.max_inputs_per_request, 3);
}

#[tokio::test]
async fn requests_respect_the_batch_token_limit() {
    let server = server(EmbeddingServerConfig::default()).await;
    // Each text is 40 ASCII bytes: an estimated 10 tokens, so two fit under 25.
    let input: Vec<String> = (0..5).map(|i| format!("{i:0>40}")).collect();
    let embedder = client(&server, |c| c.max_batch_tokens = 25);
    let vectors = embedder.embed(&input).await.expect("embedding succeeds");
    assert_eq!(vectors.len(), 5);
    let stats = server.stats();
    assert_eq!(stats.requests, 3);
    assert_eq!(stats.max_inputs_per_request, 2);
}

#[tokio::test]
async fn rate_limit_with_retry_after_is_waited_out_and_succeeds() {
    let server = server(EmbeddingServerConfig {
        rpm: Some(1),
        window: Duration::from_secs(1),
        ..Default::default()
    })
    .await;
    let embedder = client(&server, |c| c.max_batch = 1);
    // Three one-input requests cannot all fall in different one-second windows at once.
    let input = texts(3, "limited");
    let vectors = embedder.embed(&input).await.expect("waits, then succeeds");
    assert_eq!(vectors.len(), 3);
    let stats = server.stats();
    assert!(stats.rate_limited >= 1, "{stats:?}");
    assert_eq!(stats.early_retries, 0, "came back before Retry-After");
    assert_eq!(stats.duplicate_embeddings(), 0);
    assert!(input.iter().all(|t| stats.times_embedded(t) == 1));
}

#[tokio::test]
async fn server_errors_and_dropped_connections_are_retried_in_call() {
    let server = server(EmbeddingServerConfig {
        fail_rate: 0.3,
        drop_rate: 0.3,
        seed: 7,
        ..Default::default()
    })
    .await;
    let embedder = client(&server, |c| c.max_batch = 1);
    let input = texts(12, "flaky");
    let vectors = embedder.embed(&input).await.expect("retries succeed");
    assert_eq!(vectors.len(), 12);
    let stats = server.stats();
    assert!(stats.server_errors >= 1, "{stats:?}");
    assert!(stats.drops >= 1, "{stats:?}");
    assert!(input.iter().all(|t| stats.times_embedded(t) == 1));
}

#[tokio::test]
async fn spent_retry_budget_returns_the_last_transient_error() {
    let server = server(EmbeddingServerConfig {
        fail_rate: 1.0,
        ..Default::default()
    })
    .await;
    let embedder = client(&server, |c| c.max_elapsed = Duration::from_millis(200));
    let error = embedder
        .embed(&texts(1, "doomed"))
        .await
        .expect_err("every attempt fails");
    assert!(matches!(error, EmbedError::Transient { .. }), "{error:?}");
    assert_eq!(error.code(), "embedding_unavailable");
    assert!(error.to_string().contains("500"), "{error}");
    assert!(
        server.stats().server_errors >= 2,
        "retried before giving up"
    );
}

#[tokio::test]
async fn rate_limit_longer_than_the_budget_returns_rate_limited_with_retry_after() {
    let server = server(EmbeddingServerConfig {
        rpm: Some(1),
        window: Duration::from_secs(30),
        ..Default::default()
    })
    .await;
    let embedder = client(&server, |c| {
        c.max_batch = 1;
        c.max_elapsed = Duration::from_millis(200);
    });
    let error = embedder
        .embed(&texts(3, "too many"))
        .await
        .expect_err("the window is longer than the budget");
    assert!(error.is_rate_limited(), "{error:?}");
    let retry_after = error.retry_after().expect("server said when");
    assert!(retry_after > Duration::ZERO && retry_after <= Duration::from_secs(30));
    assert_eq!(server.stats().early_retries, 0);
}

#[tokio::test]
async fn provider_rejection_is_permanent_with_the_provider_message() {
    let server = server(EmbeddingServerConfig::default()).await;
    let embedder = client(&server, |c| c.dimensions = Some(64));
    let error = embedder
        .embed(&texts(1, "rejected"))
        .await
        .expect_err("server refuses 64 dimensions");
    assert!(error.is_permanent(), "{error:?}");
    assert!(error.to_string().contains("400"), "{error}");
    assert!(
        error.to_string().contains("dimensions=64 is not supported"),
        "{error}"
    );
    assert_eq!(
        server.stats().requests,
        1,
        "permanent errors are not retried"
    );
}

async fn corrupted_answer_error(corruption: Corruption) -> EmbedError {
    let server = server(EmbeddingServerConfig {
        corrupt: Some(corruption),
        ..Default::default()
    })
    .await;
    let error = client(&server, |_| {})
        .embed(&texts(2, "corrupt"))
        .await
        .expect_err("the answer is wrong");
    assert!(error.is_permanent(), "{error:?}");
    assert_eq!(
        server.stats().requests,
        1,
        "permanent errors are not retried"
    );
    error
}

#[tokio::test]
async fn wrong_dimensions_are_permanent_and_named() {
    let error = corrupted_answer_error(Corruption::WrongDims).await;
    let expected = format!("has {} dimensions, expected {DIMS}", DIMS - 1);
    assert!(error.to_string().contains(&expected), "{error}");
}

#[tokio::test]
async fn wrong_vector_count_is_permanent_and_named() {
    let error = corrupted_answer_error(Corruption::MissingVector).await;
    assert!(
        error
            .to_string()
            .contains("returned 1 embeddings for 2 inputs"),
        "{error}"
    );
}

#[tokio::test]
async fn non_finite_values_are_permanent_and_named() {
    let error = corrupted_answer_error(Corruption::NonFinite).await;
    assert!(error.to_string().contains("non-finite value"), "{error}");
}

#[tokio::test]
async fn api_key_never_appears_in_errors_or_debug_output() {
    let server_key = "sk-server-accepted-key";
    let client_key = "sk-client-SECRET-1234";
    let server = server(EmbeddingServerConfig {
        api_key: Some(server_key.to_owned()),
        ..Default::default()
    })
    .await;

    let wrong = client(&server, |c| c.api_key = Some(Secret::new(client_key)));
    assert!(!format!("{wrong:?}").contains(client_key));
    let error = wrong
        .embed(&texts(1, "secret"))
        .await
        .expect_err("wrong key is refused");
    assert!(error.is_permanent(), "{error:?}");
    for shown in [error.to_string(), format!("{error:?}")] {
        assert!(!shown.contains(client_key), "{shown}");
        // The server quoted the key; it was scrubbed, not lost.
        assert!(
            shown.contains("Incorrect API key provided: [redacted]"),
            "{shown}"
        );
    }

    let right = client(&server, |c| c.api_key = Some(Secret::new(server_key)));
    assert!(!format!("{right:?}").contains(server_key));
    right
        .embed(&texts(1, "secret"))
        .await
        .expect("the right key is sent as a bearer token");
}

#[tokio::test]
async fn limiter_keeps_concurrent_workers_under_the_server_window_limit() {
    // Server: 45 requests per 1 s window. Limiter: 1 200/min = 20/s with a 20-request burst, so
    // at most ~40 land in any one second; unlimited, 64 concurrent requests would overrun 45.
    let server_limit = 45;
    let server = server(EmbeddingServerConfig {
        rpm: Some(server_limit),
        window: Duration::from_secs(1),
        ..Default::default()
    })
    .await;
    let limiter = Arc::new(Limiter::new(RateLimits {
        rpm: NonZeroU32::new(1200),
        ..RateLimits::default()
    }));
    let embedder = client_with_limiter(&server, limiter.clone(), |c| c.max_batch = 1);
    let mut workers = tokio::task::JoinSet::new();
    for worker in 0..8 {
        let embedder = embedder.clone();
        workers.spawn(async move {
            for i in 0..8 {
                let text = vec![format!("worker {worker} text {i}")];
                embedder.embed(&text).await?;
            }
            Ok::<(), EmbedError>(())
        });
    }
    while let Some(joined) = workers.join_next().await {
        joined
            .expect("worker task ran")
            .expect("embedding succeeds");
    }
    let stats = server.stats();
    assert_eq!(stats.inputs_embedded, 64);
    assert_eq!(stats.rate_limited, 0, "{stats:?}");
    assert!(
        stats.max_requests_in_window <= u64::from(server_limit),
        "{stats:?}"
    );
    assert!(limiter.time_waited() > Duration::ZERO);
    assert_eq!(stats.duplicate_embeddings(), 0);
}

#[tokio::test]
async fn dropped_connection_is_a_transient_transport_error_not_a_status() {
    let server = server(EmbeddingServerConfig {
        drop_rate: 1.0,
        ..Default::default()
    })
    .await;
    let embedder = client(&server, |c| c.max_elapsed = Duration::from_millis(100));
    let error = embedder
        .embed(&texts(1, "dropped"))
        .await
        .expect_err("every connection is dropped");
    assert!(matches!(error, EmbedError::Transient { .. }), "{error:?}");
    assert!(!error.to_string().contains("HTTP "), "{error}");
    let stats = server.stats();
    assert!(stats.drops >= 2, "{stats:?}");
    assert_eq!(stats.server_errors, 0);
}
