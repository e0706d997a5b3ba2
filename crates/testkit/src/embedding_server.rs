//! A real HTTP test double of the OpenAI embeddings API, on `127.0.0.1:<random port>`.
//!
//! It behaves like a strict provider so clients can be tested against what they will meet:
//!
//! - **Rate limits in fixed windows** of `window` (60 s like the real thing, ~1 s in tests),
//!   counted from server start: a request that would exceed `rpm` requests or `tpm` estimated
//!   tokens in the current window gets 429 with `Retry-After` (whole seconds, rounded up, to the
//!   window end), the `x-ratelimit-*` headers, and an OpenAI-shaped error body. Refused requests
//!   do not use up the window. With `rolling` set, the window is a **rolling** one instead: a
//!   request is refused when the requests or tokens accepted in the `window` up to its arrival
//!   would exceed the limit, as providers that count a trailing minute do.
//! - **What was sent, per rolling window**: every request that reaches the limit check (accepted
//!   or refused) is counted at its arrival, and the stats keep the most requests and tokens that
//!   arrived within any `window` (half-open, `(t − window, t]`): what a client offered, whatever
//!   the server's own admission rule.
//! - **Arrival jitter**: with `arrival_jitter` set, each request waits a random time up to it
//!   before it is counted, as the spread of network latency would delay its arrival.
//! - **Faults on demand**, drawn from a seeded RNG in a fixed order per request so a
//!   single-client run is reproducible: 500s (`fail_rate`), slow answers (`slow_rate`), and
//!   dropped connections (`drop_rate`) — a real abrupt close with no response (the hyper service
//!   returns an error, so hyper shuts the socket), not a 500.
//! - **Wrong answers on demand** ([`Corruption`]) to prove clients check what they get.
//! - **Auth**: with `api_key` set, anything but `Bearer <key>` gets 401 whose message quotes the
//!   key it was given in full — deliberately careless, to prove clients scrub such messages.
//! - **Validation**: empty input, empty strings, non-string input, or a `dimensions` other than
//!   `dims` get 400 with a provider message.
//!
//! Vectors come from [`HashEmbedder`] with `dims`, so they are deterministic per text. Tokens are
//! estimated with the same [`estimate_tokens`] the client uses, so limits line up.
//! [`EmbeddingServer::stats`] reports what happened, including how often each distinct text was
//! embedded (to prove "no duplicate embeddings") and `early_retries`: requests from a client
//! (its `x-client-id` header, else everyone together) that arrived before the instant named by a
//! 429's `Retry-After`.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use anyhow::Context as _;
use http_body_util::{BodyExt as _, Full};
use hyper::body::{Bytes, Incoming};
use hyper::header::{AUTHORIZATION, CONTENT_TYPE, HeaderValue};
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use rand::rngs::StdRng;
use rand::{Rng as _, SeedableRng as _};
use serde::Deserialize;
use serde_json::json;
use tokio::net::TcpListener;
use tokio::task::{JoinHandle, JoinSet};
use tokio::time::Instant;

use docket::embed::error::format_go_duration;
use docket::embed::{HashEmbedder, estimate_tokens};

/// How the server should get its successful answers wrong.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Corruption {
    /// Every vector is one value short of `dims`.
    WrongDims,
    /// The last input's vector is missing from `data`.
    MissingVector,
    /// The first vector holds `1e39`, which overflows `f32` to infinity (JSON has no NaN).
    NonFinite,
}

/// What the server enforces and which faults it injects. `Default` is a well-behaved server
/// with no limits, 60 s windows and 384 dimensions.
#[derive(Debug, Clone)]
pub struct EmbeddingServerConfig {
    /// Requests accepted per window.
    pub rpm: Option<u32>,
    /// Estimated tokens accepted per window.
    pub tpm: Option<u32>,
    /// Length of one rate-limit window.
    pub window: Duration,
    /// Admit by a rolling window of `window` instead of fixed windows.
    pub rolling: bool,
    /// Most extra delay, drawn uniformly, between receiving a request and counting its arrival.
    pub arrival_jitter: Duration,
    /// Share of accepted requests answered 500.
    pub fail_rate: f64,
    /// Share of successful answers delayed by `slow_delay`.
    pub slow_rate: f64,
    /// Delay of a slow answer.
    pub slow_delay: Duration,
    /// Share of requests whose connection is closed with no answer.
    pub drop_rate: f64,
    /// Vector length.
    pub dims: usize,
    /// Seed of the fault RNG.
    pub seed: u64,
    /// Required bearer token, if any.
    pub api_key: Option<String>,
    /// Deliberately wrong successful answers.
    pub corrupt: Option<Corruption>,
    /// List `data` in reverse input order (with correct `index` fields), as the API allows.
    pub reverse_order: bool,
}

impl Default for EmbeddingServerConfig {
    fn default() -> Self {
        Self {
            rpm: None,
            tpm: None,
            window: Duration::from_secs(60),
            rolling: false,
            arrival_jitter: Duration::ZERO,
            fail_rate: 0.0,
            slow_rate: 0.0,
            slow_delay: Duration::from_millis(200),
            drop_rate: 0.0,
            dims: 384,
            seed: 0,
            api_key: None,
            corrupt: None,
            reverse_order: false,
        }
    }
}

/// What the server has seen so far.
#[derive(Debug, Clone, Default)]
pub struct StatsSnapshot {
    /// HTTP requests received, whatever their fate.
    pub requests: u64,
    /// Inputs answered with a vector.
    pub inputs_embedded: u64,
    /// Estimated tokens answered with vectors.
    pub tokens_embedded: u64,
    /// 429 answers.
    pub rate_limited: u64,
    /// Injected 500 answers.
    pub server_errors: u64,
    /// Connections closed with no answer.
    pub drops: u64,
    /// Answers delayed by `slow_delay`.
    pub slow: u64,
    /// 401 answers.
    pub unauthorized: u64,
    /// 400 and 404 answers.
    pub bad_requests: u64,
    /// Most requests accepted (not refused with 429) in any one window.
    pub max_requests_in_window: u64,
    /// Most estimated tokens accepted in any one window.
    pub max_tokens_in_window: u64,
    /// Most requests that arrived (accepted or refused) within any rolling `window`.
    pub max_requests_in_rolling_window: u64,
    /// Most estimated tokens that arrived within any rolling `window`.
    pub max_tokens_in_rolling_window: u64,
    /// Most inputs in one request.
    pub max_inputs_per_request: u64,
    /// Requests that came back before the instant a 429's `Retry-After` named.
    pub early_retries: u64,
    /// How many times each distinct text was answered with a vector.
    pub embed_counts: HashMap<String, u64>,
}

impl StatsSnapshot {
    /// How many vectors were computed for texts that had already been embedded.
    pub fn duplicate_embeddings(&self) -> u64 {
        self.embed_counts
            .values()
            .map(|n| n.saturating_sub(1))
            .sum()
    }

    /// How many times `text` was embedded.
    pub fn times_embedded(&self, text: &str) -> u64 {
        self.embed_counts.get(text).copied().unwrap_or(0)
    }
}

/// A running server; it stops on [`EmbeddingServer::shutdown`] or when dropped.
#[derive(Debug)]
pub struct EmbeddingServer {
    /// `http://127.0.0.1:PORT/v1`, the base URL a client appends `/embeddings` to.
    pub base_url: String,
    state: Arc<State>,
    accept_loop: JoinHandle<()>,
}

impl EmbeddingServer {
    /// A copy of the counters.
    pub fn stats(&self) -> StatsSnapshot {
        self.state.lock().stats.clone()
    }

    /// Stops accepting and closes every open connection.
    pub fn shutdown(self) {
        // Drop aborts the accept loop, which owns (and so aborts) every connection task.
    }
}

impl Drop for EmbeddingServer {
    fn drop(&mut self) {
        self.accept_loop.abort();
    }
}

/// Binds `127.0.0.1:0` and serves until shut down.
pub async fn start(cfg: EmbeddingServerConfig) -> anyhow::Result<EmbeddingServer> {
    anyhow::ensure!(cfg.dims > 0, "dims must be positive");
    anyhow::ensure!(!cfg.window.is_zero(), "window must be positive");
    let listener = TcpListener::bind("127.0.0.1:0")
        .await
        .context("binding the embedding test server")?;
    let addr = listener
        .local_addr()
        .context("reading the test server's address")?;
    let state = Arc::new(State {
        embedder: HashEmbedder::new(cfg.dims),
        started: Instant::now(),
        mutable: Mutex::new(Mutable {
            rng: StdRng::seed_from_u64(cfg.seed),
            window_index: 0,
            window_requests: 0,
            window_tokens: 0,
            arrived: Rolling::default(),
            accepted: Rolling::default(),
            retry_at: HashMap::new(),
            stats: StatsSnapshot::default(),
        }),
        cfg,
    });
    let accept_loop = tokio::spawn(accept_loop(listener, state.clone()));
    Ok(EmbeddingServer {
        base_url: format!("http://{addr}/v1"),
        state,
        accept_loop,
    })
}

#[derive(Debug)]
struct State {
    cfg: EmbeddingServerConfig,
    embedder: HashEmbedder,
    started: Instant,
    mutable: Mutex<Mutable>,
}

#[derive(Debug)]
struct Mutable {
    rng: StdRng,
    window_index: u64,
    window_requests: u64,
    window_tokens: u64,
    /// Every request that reached the limit check within the last `window`.
    arrived: Rolling,
    /// The accepted ones (the rolling admission counts these).
    accepted: Rolling,
    /// Per client id ("" for clients without one): the instant its last 429 named.
    retry_at: HashMap<String, Instant>,
    stats: StatsSnapshot,
}

impl State {
    fn lock(&self) -> MutexGuard<'_, Mutable> {
        // A panic while holding the lock cannot leave the counters unusable for a test double.
        self.mutable
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// The current window's index and the instant it ends.
    fn window_at(&self, now: Instant) -> (u64, Instant) {
        let window = self.cfg.window.as_nanos();
        let index = (now.duration_since(self.started).as_nanos() / window) as u64;
        let end_nanos = u64::try_from(window * u128::from(index + 1)).unwrap_or(u64::MAX);
        (index, self.started + Duration::from_nanos(end_nanos))
    }
}

/// Requests and tokens within a trailing window `(now − window, now]`.
#[derive(Debug, Default)]
struct Rolling {
    entries: std::collections::VecDeque<(Instant, u64)>,
    tokens: u64,
}

impl Rolling {
    /// Drops what arrived at or before `now − window`.
    fn expire(&mut self, now: Instant, window: Duration) {
        while let Some(&(at, tokens)) = self.entries.front() {
            if now.saturating_duration_since(at) < window {
                break;
            }
            self.entries.pop_front();
            self.tokens -= tokens;
        }
    }

    fn push(&mut self, now: Instant, tokens: u64) {
        self.entries.push_back((now, tokens));
        self.tokens += tokens;
    }

    fn requests(&self) -> u64 {
        self.entries.len() as u64
    }

    /// How long until the oldest entry leaves the window.
    fn until_first_leaves(&self, now: Instant, window: Duration) -> Duration {
        self.entries.front().map_or(Duration::ZERO, |&(at, _)| {
            (at + window).saturating_duration_since(now)
        })
    }
}

async fn accept_loop(listener: TcpListener, state: Arc<State>) {
    let mut connections = JoinSet::new();
    loop {
        tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => {
                    let state = state.clone();
                    connections.spawn(async move {
                        let service = hyper::service::service_fn(move |request| {
                            handle(state.clone(), request)
                        });
                        // Errors here are the injected drops and clients hanging up: both
                        // end just this connection.
                        let _ = hyper::server::conn::http1::Builder::new()
                            .serve_connection(TokioIo::new(stream), service)
                            .await;
                    });
                }
                // Out of file descriptors and the like: back off instead of spinning.
                Err(_) => tokio::time::sleep(Duration::from_millis(10)).await,
            },
            Some(_) = connections.join_next(), if !connections.is_empty() => {}
        }
    }
}

/// Returned by the service to make hyper close the connection without answering.
#[derive(Debug)]
struct DropConnection;

impl std::fmt::Display for DropConnection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("connection dropped on purpose")
    }
}

impl std::error::Error for DropConnection {}

type Answer = Response<Full<Bytes>>;

#[derive(Deserialize)]
struct EmbeddingRequest {
    input: serde_json::Value,
    #[serde(default)]
    dimensions: Option<u64>,
}

/// The fault dice for one request, thrown up front so the RNG sequence does not depend on
/// which branch a request takes.
struct Dice {
    drop: bool,
    fail: bool,
    slow: bool,
    /// Drawn only when `arrival_jitter` is set, so other configurations keep their sequence.
    jitter: Duration,
}

async fn handle(state: Arc<State>, request: Request<Incoming>) -> Result<Answer, DropConnection> {
    let cfg = &state.cfg;
    let dice = {
        let mut m = state.lock();
        m.stats.requests += 1;
        Dice {
            drop: m.rng.random_bool(cfg.drop_rate.clamp(0.0, 1.0)),
            fail: m.rng.random_bool(cfg.fail_rate.clamp(0.0, 1.0)),
            slow: m.rng.random_bool(cfg.slow_rate.clamp(0.0, 1.0)),
            jitter: if cfg.arrival_jitter.is_zero() {
                Duration::ZERO
            } else {
                cfg.arrival_jitter.mul_f64(m.rng.random::<f64>())
            },
        }
    };
    let (parts, body) = request.into_parts();
    // Read the whole request first: a drop then looks like a provider dying mid-request.
    let body = match body.collect().await {
        Ok(collected) => collected.to_bytes(),
        Err(_) => return Err(DropConnection),
    };
    if dice.drop {
        state.lock().stats.drops += 1;
        return Err(DropConnection);
    }
    let now = Instant::now();
    let client = parts
        .headers
        .get("x-client-id")
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_owned();
    {
        let mut m = state.lock();
        if let Some(&retry_at) = m.retry_at.get(&client) {
            if now < retry_at {
                m.stats.early_retries += 1;
            } else {
                m.retry_at.remove(&client);
            }
        }
    }
    if parts.method != Method::POST || parts.uri.path() != "/v1/embeddings" {
        state.lock().stats.bad_requests += 1;
        let message = format!("Unknown request URL: {} {}", parts.method, parts.uri.path());
        return Ok(error_answer(
            StatusCode::NOT_FOUND,
            &message,
            "invalid_request_error",
        ));
    }
    if let Some(key) = &cfg.api_key {
        let given = parts
            .headers
            .get(AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default();
        if given != format!("Bearer {key}") {
            state.lock().stats.unauthorized += 1;
            let quoted = given.strip_prefix("Bearer ").unwrap_or(given);
            let message = format!("Incorrect API key provided: {quoted}.");
            return Ok(error_answer(
                StatusCode::UNAUTHORIZED,
                &message,
                "invalid_api_key",
            ));
        }
    }
    let inputs = match parse_inputs(&body, cfg.dims) {
        Ok(inputs) => inputs,
        Err(message) => {
            state.lock().stats.bad_requests += 1;
            return Ok(error_answer(
                StatusCode::BAD_REQUEST,
                &message,
                "invalid_request_error",
            ));
        }
    };
    let tokens: u64 = inputs.iter().map(|t| u64::from(estimate_tokens(t))).sum();
    if !dice.jitter.is_zero() {
        tokio::time::sleep(dice.jitter).await;
    }
    if let Some(answer) = admit(&state, &client, tokens) {
        return Ok(answer);
    }
    if dice.fail {
        state.lock().stats.server_errors += 1;
        let message = "The server had an error while processing your request.";
        return Ok(error_answer(
            StatusCode::INTERNAL_SERVER_ERROR,
            message,
            "server_error",
        ));
    }
    if dice.slow {
        state.lock().stats.slow += 1;
        tokio::time::sleep(cfg.slow_delay).await;
    }
    Ok(embeddings_answer(&state, &inputs, tokens))
}

/// Checks the request body; the error is the provider message for a 400.
fn parse_inputs(body: &[u8], dims: usize) -> Result<Vec<String>, String> {
    let request: EmbeddingRequest = serde_json::from_slice(body)
        .map_err(|e| format!("We could not parse the JSON body of your request: {e}"))?;
    let inputs: Vec<String> = match request.input {
        serde_json::Value::String(s) => vec![s],
        serde_json::Value::Array(items) => items
            .into_iter()
            .map(|item| match item {
                serde_json::Value::String(s) => Ok(s),
                _ => Err("'$.input' is invalid: only strings are supported here".to_owned()),
            })
            .collect::<Result<_, _>>()?,
        _ => return Err("'$.input' is invalid: expected a string or an array".to_owned()),
    };
    if inputs.is_empty() || inputs.iter().any(String::is_empty) {
        return Err("'$.input' is invalid: inputs must be non-empty strings".to_owned());
    }
    if let Some(requested) = request.dimensions
        && requested != dims as u64
    {
        return Err(format!(
            "This model produces {dims}-dimensional embeddings; dimensions={requested} is not supported."
        ));
    }
    Ok(inputs)
}

/// Applies the window limits: `None` admits the request (and counts it), `Some` is the 429 or
/// 400 to send instead.
fn admit(state: &State, client: &str, tokens: u64) -> Option<Answer> {
    let cfg = &state.cfg;
    let mut m = state.lock();
    // Read under the lock, so arrivals are counted in the order of their instants.
    let now = Instant::now();
    let (index, window_end) = state.window_at(now);
    m.arrived.expire(now, cfg.window);
    m.arrived.push(now, tokens);
    m.stats.max_requests_in_rolling_window = m
        .stats
        .max_requests_in_rolling_window
        .max(m.arrived.requests());
    m.stats.max_tokens_in_rolling_window =
        m.stats.max_tokens_in_rolling_window.max(m.arrived.tokens);
    m.accepted.expire(now, cfg.window);
    if cfg.rolling {
        // The rolling admission reads the fixed-window fields as "what the window holds".
        m.window_requests = m.accepted.requests();
        m.window_tokens = m.accepted.tokens;
    } else if m.window_index != index {
        m.window_index = index;
        m.window_requests = 0;
        m.window_tokens = 0;
    }
    if let Some(tpm) = cfg.tpm
        && tokens > u64::from(tpm)
    {
        m.stats.bad_requests += 1;
        let message =
            format!("Request too large: limit {tpm} tokens per window, requested {tokens}.");
        return Some(error_answer(
            StatusCode::BAD_REQUEST,
            &message,
            "invalid_request_error",
        ));
    }
    let over_requests = cfg
        .rpm
        .is_some_and(|rpm| m.window_requests + 1 > u64::from(rpm));
    let over_tokens = cfg
        .tpm
        .is_some_and(|tpm| m.window_tokens + tokens > u64::from(tpm));
    let until_reset = if cfg.rolling {
        m.accepted.until_first_leaves(now, cfg.window)
    } else {
        window_end.duration_since(now)
    };
    if over_requests || over_tokens {
        let seconds = until_reset.as_secs_f64().ceil().max(1.0) as u64;
        m.retry_at
            .insert(client.to_owned(), now + Duration::from_secs(seconds));
        m.stats.rate_limited += 1;
        let (limit, used, kind) = if over_requests {
            (cfg.rpm.unwrap_or_default(), m.window_requests, "requests")
        } else {
            (cfg.tpm.unwrap_or_default(), m.window_tokens, "tokens")
        };
        let message = format!(
            "Rate limit reached for {kind}: limit {limit}, used {used}, requested {}. Please try again in {seconds}s.",
            if over_requests { 1 } else { tokens }
        );
        let mut answer = error_answer(StatusCode::TOO_MANY_REQUESTS, &message, kind);
        set_header(&mut answer, "retry-after", &seconds.to_string());
        rate_headers(
            &mut answer,
            cfg,
            m.window_requests,
            m.window_tokens,
            until_reset,
        );
        return Some(answer);
    }
    m.window_requests += 1;
    m.window_tokens += tokens;
    m.accepted.push(now, tokens);
    m.stats.max_requests_in_window = m.stats.max_requests_in_window.max(m.window_requests);
    m.stats.max_tokens_in_window = m.stats.max_tokens_in_window.max(m.window_tokens);
    None
}

fn embeddings_answer(state: &State, inputs: &[String], tokens: u64) -> Answer {
    let cfg = &state.cfg;
    let mut data: Vec<serde_json::Value> = Vec::with_capacity(inputs.len());
    for (index, text) in inputs.iter().enumerate() {
        let mut vector: Vec<f64> = state
            .embedder
            .embed_one(text)
            .into_iter()
            .map(f64::from)
            .collect();
        match cfg.corrupt {
            Some(Corruption::WrongDims) => {
                vector.pop();
            }
            Some(Corruption::NonFinite) if index == 0 => vector[0] = 1e39,
            _ => {}
        }
        data.push(json!({ "object": "embedding", "index": index, "embedding": vector }));
    }
    if cfg.corrupt == Some(Corruption::MissingVector) {
        data.pop();
    }
    if cfg.reverse_order {
        data.reverse();
    }
    let (requests, window_tokens, until_reset) = {
        let mut m = state.lock();
        m.stats.inputs_embedded += inputs.len() as u64;
        m.stats.tokens_embedded += tokens;
        m.stats.max_inputs_per_request = m.stats.max_inputs_per_request.max(inputs.len() as u64);
        for text in inputs {
            *m.stats.embed_counts.entry(text.clone()).or_default() += 1;
        }
        let now = Instant::now();
        let (_, window_end) = state.window_at(now);
        (
            m.window_requests,
            m.window_tokens,
            window_end.duration_since(now),
        )
    };
    let body = json!({
        "object": "list",
        "data": data,
        "model": "docket-test-embedder",
        "usage": { "prompt_tokens": tokens, "total_tokens": tokens },
    });
    let mut answer = json_answer(StatusCode::OK, &body);
    rate_headers(&mut answer, cfg, requests, window_tokens, until_reset);
    answer
}

/// The OpenAI `x-ratelimit-*` headers for the limits that are set.
fn rate_headers(
    answer: &mut Answer,
    cfg: &EmbeddingServerConfig,
    requests: u64,
    tokens: u64,
    until_reset: Duration,
) {
    let reset = format_go_duration(until_reset);
    for (kind, limit, used) in [("requests", cfg.rpm, requests), ("tokens", cfg.tpm, tokens)] {
        if let Some(limit) = limit {
            let remaining = u64::from(limit).saturating_sub(used);
            set_header(
                answer,
                &format!("x-ratelimit-limit-{kind}"),
                &limit.to_string(),
            );
            set_header(
                answer,
                &format!("x-ratelimit-remaining-{kind}"),
                &remaining.to_string(),
            );
            set_header(answer, &format!("x-ratelimit-reset-{kind}"), &reset);
        }
    }
}

fn set_header(answer: &mut Answer, name: &str, value: &str) {
    if let (Ok(name), Ok(value)) = (
        hyper::header::HeaderName::from_bytes(name.as_bytes()),
        HeaderValue::from_str(value),
    ) {
        answer.headers_mut().insert(name, value);
    }
}

fn error_answer(status: StatusCode, message: &str, kind: &str) -> Answer {
    let code = match status {
        StatusCode::TOO_MANY_REQUESTS => json!("rate_limit_exceeded"),
        StatusCode::UNAUTHORIZED => json!("invalid_api_key"),
        _ => serde_json::Value::Null,
    };
    let body = json!({
        "error": { "message": message, "type": kind, "param": null, "code": code }
    });
    json_answer(status, &body)
}

fn json_answer(status: StatusCode, body: &serde_json::Value) -> Answer {
    let mut answer = Response::new(Full::new(Bytes::from(body.to_string())));
    *answer.status_mut() = status;
    answer
        .headers_mut()
        .insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
    answer
}
