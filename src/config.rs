//! Configuration: the only place that reads the environment.
//!
//! Every setting is a command-line flag with an environment variable behind it (clap reads
//! both; the flag wins). Settings are checked once at start-up by [`ServeConfig::validate`], so a
//! bad combination stops the process with a clear message instead of surfacing later.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use clap::Args;

/// Where the database is.
#[derive(Debug, Clone, Args)]
pub struct DatabaseConfig {
    /// PostgreSQL connection URL.
    #[arg(long, env = "DATABASE_URL", hide_env_values = true)]
    pub database_url: String,

    /// Connections in this process's pool.
    #[arg(long, env = "DOCKET_DB_POOL", default_value_t = 16)]
    pub db_pool: u32,
}

/// How workers claim and run jobs, and how the maintenance loops behave.
#[derive(Debug, Clone, Args)]
pub struct WorkerSettings {
    /// How long a claim lasts without a heartbeat, in seconds.
    #[arg(long, env = "DOCKET_LEASE_SECS", default_value_t = 60)]
    pub lease_secs: u64,

    /// Jobs of one kind running at once in this process.
    #[arg(long, env = "DOCKET_CONCURRENCY", default_value_t = 4)]
    pub concurrency: usize,

    /// Most jobs taken per claim statement (never more than free slots).
    #[arg(long, env = "DOCKET_CLAIM_BATCH", default_value_t = 10)]
    pub claim_batch: usize,

    /// Poll interval in milliseconds: the safety net under LISTEN/NOTIFY.
    #[arg(long, env = "DOCKET_POLL_MS", default_value_t = 2000)]
    pub poll_ms: u64,

    /// Seconds running jobs get to finish at shutdown before they are handed back.
    #[arg(long, env = "DOCKET_SHUTDOWN_GRACE_SECS", default_value_t = 20)]
    pub shutdown_grace_secs: u64,

    /// Seconds between rescues of expired leases.
    #[arg(long, env = "DOCKET_RESCUE_SECS", default_value_t = 5)]
    pub rescue_secs: u64,

    /// Hours a `done` job is kept before it is pruned.
    #[arg(long, env = "DOCKET_RETENTION_HOURS", default_value_t = 168)]
    pub retention_hours: u64,

    /// Most vectors the embedding cache keeps (least recently used evicted beyond it).
    #[arg(long, env = "DOCKET_EMBEDDING_CACHE_ENTRIES", default_value_t = crate::embed::cache::DEFAULT_MAX_ENTRIES)]
    pub embedding_cache_entries: u64,

    /// Do not run the scheduler loop in this process (another process, or pg_cron, fires).
    #[arg(long, env = "DOCKET_NO_SCHEDULER")]
    pub no_scheduler: bool,

    /// Seconds between scheduler steps: how late a firing may be, and how soon a follower
    /// replaces a dead leader.
    #[arg(long, env = "DOCKET_SCHEDULER_TICK_SECS", default_value_t = 15)]
    pub scheduler_tick_secs: u64,
}

impl WorkerSettings {
    pub fn lease(&self) -> Duration {
        Duration::from_secs(self.lease_secs)
    }

    pub fn worker_config(&self) -> crate::worker::WorkerConfig {
        let mut config = crate::worker::WorkerConfig::for_lease(self.lease());
        config.claim_batch = self.claim_batch;
        config.poll_interval = Duration::from_millis(self.poll_ms);
        config.shutdown_grace = Duration::from_secs(self.shutdown_grace_secs);
        config
    }

    pub fn maintenance(&self) -> crate::maintenance::MaintenanceConfig {
        crate::maintenance::MaintenanceConfig {
            rescue_every: Duration::from_secs(self.rescue_secs.max(1)),
            retention: Duration::from_secs(self.retention_hours * 3600),
            cache_entries: self.embedding_cache_entries,
            ..crate::maintenance::MaintenanceConfig::default()
        }
    }

    /// The scheduler loop's settings.
    pub fn scheduler(&self) -> crate::schedule::SchedulerConfig {
        crate::schedule::SchedulerConfig {
            tick: Duration::from_secs(self.scheduler_tick_secs.max(1)),
        }
    }

    fn validate(&self) -> Result<(), ConfigError> {
        if self.lease_secs < 3 {
            return Err(ConfigError("DOCKET_LEASE_SECS must be at least 3".into()));
        }
        if self.concurrency == 0 || self.claim_batch == 0 {
            return Err(ConfigError(
                "DOCKET_CONCURRENCY and DOCKET_CLAIM_BATCH must be at least 1".into(),
            ));
        }
        if self.poll_ms == 0 {
            return Err(ConfigError("DOCKET_POLL_MS must be at least 1".into()));
        }
        Ok(())
    }
}

/// `docket serve`: the HTTP API and page, workers, and maintenance.
#[derive(Debug, Clone, Args)]
pub struct ServeConfig {
    #[command(flatten)]
    pub database: DatabaseConfig,

    /// Address to listen on. Anything but loopback requires DOCKET_API_TOKEN.
    #[arg(long, env = "DOCKET_BIND", default_value = "127.0.0.1:8080")]
    pub bind: SocketAddr,

    /// Bearer token required on /api routes (required when not bound to loopback).
    #[arg(long, env = "DOCKET_API_TOKEN", hide_env_values = true)]
    pub api_token: Option<String>,

    /// Largest upload accepted per file, in bytes.
    #[arg(long, env = "DOCKET_MAX_UPLOAD_BYTES", default_value_t = 50 * 1024 * 1024)]
    pub max_upload_bytes: u64,

    /// Run the HTTP server only, with no workers in this process.
    #[arg(long, env = "DOCKET_NO_WORKERS")]
    pub no_workers: bool,

    #[command(flatten)]
    pub http: HttpSettings,

    #[command(flatten)]
    pub worker: WorkerSettings,

    #[command(flatten)]
    pub pipeline: PipelineSettings,
}

impl ServeConfig {
    /// Checks the settings together; the message says what to change.
    pub fn validate(&self) -> Result<(), ConfigError> {
        self.worker.validate()?;
        self.pipeline.validate()?;
        let token = self.api_token.as_deref().unwrap_or("");
        if !self.bind.ip().is_loopback() && token.is_empty() {
            return Err(ConfigError(format!(
                "DOCKET_BIND is {} (not loopback): set DOCKET_API_TOKEN so that the API is not open to the network",
                self.bind
            )));
        }
        if !token.is_empty() && token.len() < 16 {
            return Err(ConfigError(
                "DOCKET_API_TOKEN must be at least 16 characters".into(),
            ));
        }
        self.http.hosts()?;
        self.http.search.validate()?;
        if self
            .http
            .metrics_token
            .as_deref()
            .is_some_and(|t| !t.is_empty() && t.len() < 16)
        {
            return Err(ConfigError(
                "DOCKET_METRICS_TOKEN must be at least 16 characters".into(),
            ));
        }
        Ok(())
    }

    /// The HTTP checks and bounds of this server. `/metrics` requires `DOCKET_METRICS_TOKEN`
    /// when one is set, else the API token when docket listens beyond loopback.
    pub fn guard(&self) -> Result<crate::http::Guard, ConfigError> {
        let mut guard = crate::http::Guard::new(
            self.http.hosts()?,
            Duration::from_secs(self.http.request_timeout_secs.max(1)),
            self.http.upload_concurrency,
        );
        let api_token = self.api_token.as_deref().filter(|t| !t.is_empty());
        let scraper_token = self.http.metrics_token.as_deref().filter(|t| !t.is_empty());
        guard.metrics_token = scraper_token
            .or(api_token.filter(|_| !self.bind.ip().is_loopback()))
            .map(std::sync::Arc::from);
        Ok(guard)
    }
}

/// Who the HTTP server answers, and how much it takes on at once.
#[derive(Debug, Clone, Args)]
pub struct HttpSettings {
    /// The URL people open docket at when it is behind a reverse proxy (e.g.
    /// `https://docket.example.com`): its host is accepted in `Host` and its origin may change things.
    #[arg(long, env = "DOCKET_PUBLIC_URL")]
    pub public_url: Option<String>,

    /// More host names docket answers under, comma-separated (loopback names and IP literals are
    /// always accepted).
    #[arg(long, env = "DOCKET_ALLOWED_HOSTS", value_delimiter = ',')]
    pub allowed_hosts: Vec<String>,

    /// Seconds one API request may take, an upload's body included (408 after).
    #[arg(long, env = "DOCKET_REQUEST_TIMEOUT_SECS", default_value_t = 300)]
    pub request_timeout_secs: u64,

    /// Uploads read and stored at once; more wait their turn.
    #[arg(long, env = "DOCKET_UPLOAD_CONCURRENCY", default_value_t = 4)]
    pub upload_concurrency: usize,

    /// A bearer token for scrapers of /metrics (16+ characters), so they need not hold the API
    /// token; without it, /metrics takes the API token off loopback.
    #[arg(long, env = "DOCKET_METRICS_TOKEN", hide_env_values = true)]
    pub metrics_token: Option<String>,

    /// Where the server's searches run (here because only `serve` searches).
    #[command(flatten)]
    pub search: SearchSettings,
}

impl Default for HttpSettings {
    fn default() -> Self {
        Self {
            public_url: None,
            allowed_hosts: Vec::new(),
            request_timeout_secs: 300,
            upload_concurrency: 4,
            metrics_token: None,
            search: SearchSettings::default(),
        }
    }
}

impl HttpSettings {
    fn hosts(&self) -> Result<crate::http::guard::HostPolicy, ConfigError> {
        crate::http::guard::HostPolicy::new(self.public_url.as_deref(), &self.allowed_hosts)
            .map_err(ConfigError)
    }
}

/// Where searches run: on read replicas of the primary, when some are given.
#[derive(Debug, Clone, Args)]
pub struct SearchSettings {
    /// PostgreSQL streaming replicas of DATABASE_URL's server that answer searches
    /// (comma-separated URLs, or the flag repeated); writes and the queue stay on the primary.
    #[arg(
        long,
        env = "DOCKET_SEARCH_DATABASE_URL",
        value_delimiter = ',',
        hide_env_values = true
    )]
    pub search_database_url: Vec<String>,

    /// A replica further behind the primary than this many milliseconds is not searched.
    #[arg(long, env = "DOCKET_SEARCH_MAX_LAG_MS", default_value_t = 2000)]
    pub search_max_lag_ms: u64,

    /// How often each replica's lag is measured, in milliseconds.
    #[arg(long, env = "DOCKET_SEARCH_PROBE_MS", default_value_t = 1000)]
    pub search_probe_ms: u64,

    /// Hits less relevant than this (0 to 1) are left out of a search unless it asks for them
    /// (`min_relevance`); 0 returns every hit.
    #[arg(long, env = "DOCKET_MIN_RELEVANCE", default_value_t = crate::search::DEFAULT_MIN_RELEVANCE)]
    pub min_relevance: f64,
}

impl Default for SearchSettings {
    fn default() -> Self {
        Self {
            search_database_url: Vec::new(),
            search_max_lag_ms: 2000,
            search_probe_ms: 1000,
            min_relevance: crate::search::DEFAULT_MIN_RELEVANCE,
        }
    }
}

impl SearchSettings {
    /// The replica URLs, blanks left out.
    pub fn replica_urls(&self) -> Vec<String> {
        self.search_database_url
            .iter()
            .map(|u| u.trim().to_owned())
            .filter(|u| !u.is_empty())
            .collect()
    }

    pub fn max_lag(&self) -> Duration {
        Duration::from_millis(self.search_max_lag_ms)
    }

    pub fn probe_every(&self) -> Duration {
        Duration::from_millis(self.search_probe_ms)
    }

    fn validate(&self) -> Result<(), ConfigError> {
        for url in self.replica_urls() {
            // The message never repeats the URL: it may hold a password. sqlx parses any
            // scheme, so the scheme is checked here.
            let postgres = url.starts_with("postgres://") || url.starts_with("postgresql://");
            let parsed = url.parse::<sqlx::postgres::PgConnectOptions>();
            if !postgres || parsed.is_err() {
                return Err(ConfigError(
                    "DOCKET_SEARCH_DATABASE_URL holds a URL that is not a postgres:// URL".into(),
                ));
            }
        }
        if self.search_probe_ms < 10 || self.search_max_lag_ms == 0 {
            return Err(ConfigError(
                "DOCKET_SEARCH_PROBE_MS must be at least 10 and DOCKET_SEARCH_MAX_LAG_MS at least 1"
                    .into(),
            ));
        }
        if !(0.0..=1.0).contains(&self.min_relevance) {
            return Err(ConfigError(
                "DOCKET_MIN_RELEVANCE must be between 0 and 1".into(),
            ));
        }
        Ok(())
    }
}

/// `docket worker`: workers and maintenance, no HTTP.
#[derive(Debug, Clone, Args)]
pub struct WorkerConfigArgs {
    #[command(flatten)]
    pub database: DatabaseConfig,

    #[command(flatten)]
    pub worker: WorkerSettings,

    #[command(flatten)]
    pub pipeline: PipelineSettings,
}

impl WorkerConfigArgs {
    pub fn validate(&self) -> Result<(), ConfigError> {
        self.worker.validate()?;
        self.pipeline.validate()
    }
}

/// The local model docket embeds with when `DOCKET_MODEL_DIR` is unset; README.md ("Which local
/// model") says how it was chosen.
pub const DEFAULT_MODEL: &str = "multilingual-e5-small";

/// The model that was the default before [`DEFAULT_MODEL`]. A process that runs the default
/// (no `DOCKET_MODEL_DIR`) also loads this one when it is installed, so that an installation
/// upgraded across the change keeps searching its old vectors while they are re-embedded, and
/// on its first start moves the active version over ([`crate::models::adopt_default`]).
pub const PREVIOUS_DEFAULT_MODEL: Option<&str> = Some("all-MiniLM-L6-v2");

/// Where scripts/get-model.sh installs `model`: `~/.cache/docket/models/<model>`.
pub fn model_cache_dir(model: &str) -> PathBuf {
    let home = std::env::var_os("HOME").map_or_else(|| PathBuf::from("."), PathBuf::from);
    home.join(".cache/docket/models").join(model)
}

/// Where scripts/get-model.sh installs the default model ([`DEFAULT_MODEL`]).
pub fn default_model_dir() -> PathBuf {
    model_cache_dir(DEFAULT_MODEL)
}

/// A setting, or a combination of settings, that cannot work.
#[derive(Debug, thiserror::Error)]
#[error("configuration: {0}")]
pub struct ConfigError(pub String);

/// Which embedding provider produces the vectors.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum EmbedderKind {
    /// Feature hashing: lexical, deterministic, offline; not semantic.
    Hash,
    /// Any OpenAI-compatible `/embeddings` endpoint.
    Openai,
    /// A sentence-embedding model in this process (multilingual-e5-small by default).
    Local,
}

/// The pipeline: extraction limits, chunking, and the embedding provider with its rate limits.
#[derive(Debug, Clone, Args)]
pub struct PipelineSettings {
    /// Embedding provider; unset means `local` when the model directory holds a model, else
    /// `hash` (with a warning: hashing is not semantic).
    #[arg(long, env = "DOCKET_EMBEDDER", value_enum)]
    pub embedder: Option<EmbedderKind>,

    /// The local model's directory (config.json, tokenizer.json, model.safetensors); default
    /// ~/.cache/docket/models/multilingual-e5-small (the default model), where scripts/get-model.sh puts it.
    #[arg(long, env = "DOCKET_MODEL_DIR")]
    pub model_dir: Option<PathBuf>,

    /// Threads the local model computes on (default: every core of the machine).
    #[arg(long, env = "DOCKET_EMBED_THREADS")]
    pub embed_threads: Option<usize>,

    /// The local model's number format: `f32`, or `int8` (8-bit linear layers, about twice as
    /// fast; its own model version, so its vectors never mix with f32's).
    #[arg(long, env = "DOCKET_LOCAL_PRECISION", value_enum, default_value_t = crate::embed::Precision::F32)]
    pub local_precision: crate::embed::Precision,

    /// Dimensions of the hashing embedder.
    #[arg(long, env = "DOCKET_HASH_DIMS", default_value_t = 384)]
    pub hash_dims: usize,

    /// Base URL of the OpenAI-compatible API (…/v1).
    #[arg(
        long,
        env = "DOCKET_OPENAI_BASE_URL",
        default_value = "https://api.openai.com/v1"
    )]
    pub openai_base_url: String,

    /// API key of the OpenAI-compatible API; never logged.
    #[arg(long, env = "DOCKET_OPENAI_API_KEY", hide_env_values = true)]
    pub openai_api_key: Option<String>,

    /// Embedding model name at that API.
    #[arg(
        long,
        env = "DOCKET_OPENAI_MODEL",
        default_value = "text-embedding-3-small"
    )]
    pub openai_model: String,

    /// Ask the API for vectors of this many dimensions (models that support shortening).
    #[arg(long, env = "DOCKET_OPENAI_DIMENSIONS")]
    pub openai_dimensions: Option<u32>,

    /// The embedding provider's requests per minute, shared by every docket process using it.
    #[arg(long, env = "DOCKET_RPM")]
    pub rpm: Option<std::num::NonZeroU32>,

    /// The embedding provider's tokens per minute, shared by every docket process using it.
    #[arg(long, env = "DOCKET_TPM")]
    pub tpm: Option<std::num::NonZeroU32>,

    /// The rolling window, in seconds, over which the provider counts DOCKET_RPM and DOCKET_TPM.
    #[arg(long, env = "DOCKET_RATE_WINDOW_SECS", default_value_t = 60)]
    pub rate_window_secs: u64,

    /// The spread of network latency between a grant and the request's arrival at the provider
    /// that the fleet limit allows for, in milliseconds (see embed::limiter).
    #[arg(long, env = "DOCKET_RATE_LATENCY_ALLOWANCE_MS", default_value_t = 1000)]
    pub rate_latency_allowance_ms: u64,

    /// Target chunk size in tokens.
    #[arg(long, env = "DOCKET_CHUNK_TOKENS", default_value_t = 200)]
    pub chunk_tokens: usize,

    /// Tokens repeated from the end of one chunk at the start of the next.
    #[arg(long, env = "DOCKET_CHUNK_OVERLAP", default_value_t = 30)]
    pub chunk_overlap: usize,

    /// Wall-clock limit of one PDF extractor, in seconds.
    #[arg(long, env = "DOCKET_EXTRACT_TIMEOUT_SECS", default_value_t = 60)]
    pub extract_timeout_secs: u64,

    /// Memory limit of one PDF extractor process, in MiB.
    #[arg(long, env = "DOCKET_EXTRACT_MEMORY_MB", default_value_t = 1024)]
    pub extract_memory_mb: u64,

    /// Extract jobs running at once in this process [default: the extract kind's own, 2].
    #[arg(long, env = "DOCKET_EXTRACT_CONCURRENCY")]
    pub extract_concurrency: Option<usize>,

    /// Embed jobs running at once in this process [default: the embed kind's own, 4].
    #[arg(long, env = "DOCKET_EMBED_CONCURRENCY")]
    pub embed_concurrency: Option<usize>,

    /// OCR of images and of PDF pages without a usable text layer (tesseract).
    #[arg(long, env = "DOCKET_OCR", default_value_t = true, action = clap::ArgAction::Set)]
    pub ocr: bool,

    /// Webhooks may be sent to loopback addresses (local integrations, tests). Private,
    /// link-local, multicast and unspecified addresses are refused whatever this says.
    #[arg(long, env = "DOCKET_WEBHOOK_ALLOW_LOOPBACK", default_value_t = false, action = clap::ArgAction::Set)]
    pub webhook_allow_loopback: bool,

    /// Webhook deliveries in flight at once in this process [default: the kind's own, 16];
    /// each endpoint has at most 4 of them.
    #[arg(long, env = "DOCKET_WEBHOOK_CONCURRENCY")]
    pub webhook_concurrency: Option<usize>,

    /// OCR languages: `auto` (each page's script picks among eng, kor, chi_sim, chi_tra, jpn,
    /// fra, deu, rus) or tesseract codes joined by `+`, e.g. `deu+eng`.
    #[arg(long, env = "DOCKET_OCR_LANGS", default_value = "auto")]
    pub ocr_langs: String,

    /// The most pages one document may need OCR on.
    #[arg(long, env = "DOCKET_OCR_MAX_PAGES", default_value_t = 200)]
    pub ocr_max_pages: u32,

    /// OCR jobs running at once in this process (each takes one core) [default: the ocr kind's
    /// own, 1].
    #[arg(long, env = "DOCKET_OCR_CONCURRENCY")]
    pub ocr_concurrency: Option<usize>,
}

impl PipelineSettings {
    /// Where the local model is looked for: `DOCKET_MODEL_DIR`, else the cache directory
    /// scripts/get-model.sh fills.
    pub fn model_dir(&self) -> PathBuf {
        self.model_dir.clone().unwrap_or_else(default_model_dir)
    }

    /// Whether the model directory holds the three files the local embedder loads (a look at
    /// the disk: `app` asks once, through its `EmbedderChoice`).
    pub fn model_files_present(&self) -> bool {
        let dir = self.model_dir();
        ["config.json", "tokenizer.json", "model.safetensors"]
            .iter()
            .all(|file| dir.join(file).is_file())
    }

    /// The local model's settings.
    pub fn local(&self) -> crate::embed::LocalConfig {
        let cores = std::thread::available_parallelism().map_or(1, usize::from);
        crate::embed::LocalConfig {
            model_dir: self.model_dir(),
            threads: self.embed_threads.unwrap_or(cores).max(1),
            precision: self.local_precision,
        }
    }

    /// The embedding provider's limits and how it counts them.
    pub fn rate_limits(&self) -> crate::embed::RateLimits {
        crate::embed::RateLimits {
            rpm: self.rpm,
            tpm: self.tpm,
            window: Duration::from_secs(self.rate_window_secs.max(1)),
            latency_allowance: Duration::from_millis(self.rate_latency_allowance_ms),
        }
    }

    /// The OpenAI-compatible API's settings.
    pub fn openai(&self) -> crate::embed::OpenAiConfig {
        let mut config = crate::embed::OpenAiConfig::new(
            self.openai_base_url.clone(),
            self.openai_model.clone(),
        );
        config.api_key = self
            .openai_api_key
            .clone()
            .filter(|k| !k.is_empty())
            .map(crate::embed::Secret::new);
        config.dimensions = self.openai_dimensions;
        config
    }

    /// Chunking as configured.
    pub fn chunking(&self) -> crate::chunk::ChunkConfig {
        crate::chunk::ChunkConfig {
            target_tokens: self.chunk_tokens,
            overlap_tokens: self.chunk_overlap,
        }
    }

    /// The concurrency settings given, by job kind: each overrides its kind's own default.
    pub fn concurrency(&self) -> Vec<(&'static str, usize)> {
        use crate::queue::payload::JobPayload;
        [
            (crate::pipeline::ExtractJob::KIND, self.extract_concurrency),
            (crate::pipeline::EmbedJob::KIND, self.embed_concurrency),
            (crate::pipeline::OcrJob::KIND, self.ocr_concurrency),
            (crate::webhooks::DeliverJob::KIND, self.webhook_concurrency),
        ]
        .into_iter()
        .filter_map(|(kind, n)| Some((kind, n?)))
        .collect()
    }

    fn validate(&self) -> Result<(), ConfigError> {
        crate::extract::Languages::parse(&self.ocr_langs).map_err(ConfigError)?;
        if self.chunk_tokens < 16 || self.chunk_overlap >= self.chunk_tokens {
            return Err(ConfigError(
                "DOCKET_CHUNK_TOKENS must be at least 16 and larger than DOCKET_CHUNK_OVERLAP"
                    .into(),
            ));
        }
        if self.embed_threads == Some(0) {
            return Err(ConfigError(
                "DOCKET_EMBED_THREADS must be at least 1".into(),
            ));
        }
        match self.embedder {
            // Loading the model twice at start-up would double its cost; its files are checked
            // here and its load errors surface when the pipeline is built.
            Some(EmbedderKind::Local) if !self.model_files_present() => Err(ConfigError(format!(
                "DOCKET_EMBEDDER=local but {} lacks config.json, tokenizer.json or \
                 model.safetensors: run scripts/get-model.sh or set DOCKET_MODEL_DIR",
                self.model_dir().display()
            ))),
            // Building the client checks the base URL and the model's dimensions (no I/O).
            Some(EmbedderKind::Openai) => {
                let limiter = std::sync::Arc::new(crate::embed::Limiter::new(self.rate_limits()));
                crate::embed::OpenAiEmbedder::new(self.openai(), limiter)
                    .map(|_| ())
                    .map_err(|err| ConfigError(format!("the OpenAI-compatible embedder: {err}")))
            }
            Some(EmbedderKind::Local | EmbedderKind::Hash) | None => Ok(()),
        }
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Args {
        #[command(flatten)]
        pipeline: PipelineSettings,
    }

    /// Pipeline settings as `docket` would parse them from `extra` (and no environment).
    pub(crate) fn settings(extra: &[&str]) -> PipelineSettings {
        let mut argv = vec!["docket"];
        argv.extend_from_slice(extra);
        Args::try_parse_from(argv).expect("parses").pipeline
    }

    #[derive(Parser)]
    struct Serve {
        #[command(flatten)]
        serve: ServeConfig,
    }

    fn serve(extra: &[&str]) -> ServeConfig {
        let mut argv = vec![
            "docket",
            "--database-url",
            "postgres://unused",
            "--embedder",
            "hash",
        ];
        argv.extend_from_slice(extra);
        Serve::try_parse_from(argv).expect("parses").serve
    }

    #[test]
    fn metrics_need_a_token_off_loopback_and_take_the_scrapers_own() {
        let token = "api-token-0123456789";
        let scraper = "scraper-token-0123456789";
        let metrics_token = |config: ServeConfig| {
            config.validate().expect("valid");
            config
                .guard()
                .expect("guard")
                .metrics_token
                .map(|t| t.to_string())
        };
        assert_eq!(metrics_token(serve(&[])), None);
        assert_eq!(metrics_token(serve(&["--api-token", token])), None);
        assert_eq!(
            metrics_token(serve(&["--bind", "0.0.0.0:8080", "--api-token", token])),
            Some(token.to_owned())
        );
        assert_eq!(
            metrics_token(serve(&["--metrics-token", scraper])),
            Some(scraper.to_owned())
        );
        assert!(serve(&["--metrics-token", "short"]).validate().is_err());
    }

    #[test]
    fn search_replicas_are_a_comma_separated_list_of_postgres_urls() {
        let config = serve(&[
            "--search-database-url",
            "postgres://a@127.0.0.1:5433/docket, postgres://b@127.0.0.1:5434/docket",
        ]);
        config.validate().expect("valid");
        assert_eq!(
            config.http.search.replica_urls(),
            [
                "postgres://a@127.0.0.1:5433/docket",
                "postgres://b@127.0.0.1:5434/docket"
            ]
        );
        assert!(serve(&[]).http.search.replica_urls().is_empty());
        let err = serve(&["--search-database-url", "mysql://secret@host/db"])
            .validate()
            .expect_err("not a PostgreSQL URL");
        assert!(!err.to_string().contains("secret"), "{err}");
        assert!(
            serve(&["--search-probe-ms", "0"]).validate().is_err(),
            "a probe needs an interval"
        );
    }

    #[test]
    fn local_embedder_without_a_model_is_refused_at_start_up() {
        let dir = tempfile::tempdir().expect("temp dir");
        let path = dir.path().to_str().expect("utf-8 path").to_owned();
        let err = settings(&["--model-dir", &path, "--embedder", "local"])
            .validate()
            .expect_err("no model, no local embedder");
        assert!(err.to_string().contains("get-model.sh"), "{err}");
    }
}
