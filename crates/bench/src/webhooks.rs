//! `docket bench webhooks`: what webhooks cost and deliver.
//!
//! 1. Deliveries per second to a local receiver (axum on loopback, answering 200), with 1
//!    endpoint and with 50: `--deliveries` deliveries enqueued as `document.ready` events the
//!    way the pipeline enqueues them, then drained by a real worker (`webhook.deliver`, its
//!    declared concurrency, at most 4 per endpoint), timed until the receiver has them all.
//! 2. Ingest throughput with 10 endpoints subscribed against none, side by side on the same
//!    database: `--documents` small text documents through the real pipeline (the hashing
//!    embedder, or the local model with `--model-dir`), timed until all are ready, deliveries
//!    running in the same worker meanwhile.
//!
//! Each run starts on a fresh scratch database. Prints one JSON line last.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use docket::chunk::ChunkConfig;
use docket::documents::{Document, DocumentId, DocumentStatus};
use docket::embed::{Embedder, HashEmbedder};
use docket::pipeline::Pipeline;
use docket::queue::payload::JobPayload;
use docket::webhooks::{self, Targets};
use serde_json::json;
use tokio_util::sync::CancellationToken;

/// Options of `docket bench webhooks`.
#[derive(Debug, clap::Args)]
pub struct WebhooksBench {
    /// Server URL; a scratch database is created on the same server.
    #[arg(
        long,
        env = "DATABASE_URL",
        hide_env_values = true,
        default_value = "postgres://postgres@127.0.0.1:5432/postgres"
    )]
    pub database_url: String,

    /// The scratch database, dropped and created for each run (everything in it is lost).
    #[arg(long, default_value = "docket_bench_webhooks")]
    pub scratch_db: String,

    /// Deliveries per delivery run.
    #[arg(long, default_value_t = 2000)]
    pub deliveries: usize,

    /// Documents per ingest run.
    #[arg(long, default_value_t = 200)]
    pub documents: usize,

    /// Embed with the local model in this directory (e.g. `~/.cache/docket/models/
    /// multilingual-e5-small`, the product's default) instead of the hashing embedder: the
    /// ingest runs then cost what they cost in production, where the encoder, not the
    /// pipeline's bookkeeping, takes most of the two cores.
    #[arg(long)]
    pub model_dir: Option<std::path::PathBuf>,
}

/// A receiver on loopback that answers 200 and counts.
async fn receiver(stop: CancellationToken) -> anyhow::Result<(String, Arc<AtomicU64>)> {
    let count = Arc::new(AtomicU64::new(0));
    let counter = count.clone();
    let app = axum::Router::new().fallback(move || {
        let counter = counter.clone();
        async move {
            counter.fetch_add(1, Ordering::Relaxed);
            axum::http::StatusCode::OK
        }
    });
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let url = format!("http://{}/hook", listener.local_addr()?);
    tokio::spawn(async move {
        axum::serve(listener, app)
            .with_graceful_shutdown(stop.cancelled_owned())
            .await
    });
    Ok((url, count))
}

async fn fresh(args: &WebhooksBench) -> anyhow::Result<(sqlx::PgPool, Arc<Pipeline>)> {
    let pool = crate::scratch_database(&args.database_url, &args.scratch_db, true, &[]).await?;
    docket::db::migrate(&pool).await?;
    let embedder = match &args.model_dir {
        Some(dir) => Embedder::Local(docket::embed::LocalEmbedder::load(
            &docket::embed::LocalConfig {
                model_dir: dir.clone(),
                threads: 2,
                precision: Default::default(),
            },
        )?),
        None => Embedder::Hash(HashEmbedder::new(384)),
    };
    let pipeline = Pipeline::new(
        pool.clone(),
        embedder,
        ChunkConfig::default(),
        docket::extract::ExtractSettings::new(std::env::current_exe()?),
    )
    .with_webhooks(Targets::new(true));
    pipeline.prepare().await?;
    Ok((pool, Arc::new(pipeline)))
}

fn worker(pool: &sqlx::PgPool, pipeline: &Arc<Pipeline>) -> docket::worker::Worker {
    worker_with(pool, pipeline, None)
}

/// A worker running the pipeline and the deliveries (`deliveries` at once, when set).
fn worker_with(
    pool: &sqlx::PgPool,
    pipeline: &Arc<Pipeline>,
    deliveries: Option<usize>,
) -> docket::worker::Worker {
    let mut registry = docket::worker::Registry::new();
    pipeline.register(&mut registry);
    if let Some(slots) = deliveries {
        registry.set_concurrency(webhooks::DeliverJob::KIND, slots);
    }
    registry
        .set_concurrency("extract", 2)
        .set_concurrency("embed", 4);
    let mut config = docket::worker::WorkerConfig::for_lease(Duration::from_secs(300));
    config.poll_interval = Duration::from_millis(100);
    let queue = docket::queue::Queue::new(pool.clone(), Duration::from_secs(300));
    docket::worker::Worker::new(queue, registry, config)
}

async fn subscribe(pool: &sqlx::PgPool, url: &str, endpoints: usize) -> anyhow::Result<()> {
    for _ in 0..endpoints {
        let secret = webhooks::sign::new_secret();
        webhooks::store::create(pool, url, &["document.ready".to_owned()], None, &secret).await?;
    }
    Ok(())
}

/// Deliveries/s with `endpoints` endpoints, `total` deliveries in all.
async fn delivery_run(args: &WebhooksBench, endpoints: usize) -> anyhow::Result<f64> {
    let (pool, pipeline) = fresh(args).await?;
    let stop = CancellationToken::new();
    let (url, received) = receiver(stop.clone()).await?;
    subscribe(&pool, &url, endpoints).await?;
    let events = args.deliveries.div_ceil(endpoints);
    let now = chrono::Utc::now();
    let mut tx = pool.begin().await?;
    for i in 0..events {
        // A ready document as the pipeline announces it; the bench needs only the event.
        let document = Document {
            id: DocumentId(i as i64 + 1),
            collection: docket::collections::DEFAULT_NAME.to_owned(),
            collection_id: docket::collections::DEFAULT,
            filename: format!("bench-{i}.txt"),
            content_type: "text/plain".into(),
            byte_size: 100,
            sha256: vec![0; 32],
            status: DocumentStatus::Ready,
            error: None,
            extractor: Some("text".into()),
            page_count: Some(1),
            progress: None,
            extract_note: None,
            extraction: None,
            upload_id: None,
            created_at: now,
            updated_at: now,
        };
        webhooks::document_changed(&mut tx, &document).await?;
    }
    tx.commit().await?;
    let total = (events * endpoints) as u64;
    // Running, not run_until_idle: deliveries over an endpoint's bound wait a second, not due.
    let worker_stop = CancellationToken::new();
    let running = tokio::spawn(worker(&pool, &pipeline).run(worker_stop.clone().cancelled_owned()));
    let started = Instant::now();
    let deadline = started + Duration::from_secs(600);
    while received.load(Ordering::Relaxed) < total {
        anyhow::ensure!(
            Instant::now() < deadline,
            "the receiver got {} of {total} deliveries in 10 minutes",
            received.load(Ordering::Relaxed)
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let elapsed = started.elapsed().as_secs_f64();
    worker_stop.cancel();
    running.await?;
    stop.cancel();
    pool.close().await;
    Ok(total as f64 / elapsed)
}

/// Documents made ready per second with `endpoints` subscribed endpoints.
async fn ingest_run(
    args: &WebhooksBench,
    endpoints: usize,
    deliveries: Option<usize>,
) -> anyhow::Result<(f64, u64)> {
    let (pool, pipeline) = fresh(args).await?;
    let stop = CancellationToken::new();
    let (url, received) = receiver(stop.clone()).await?;
    subscribe(&pool, &url, endpoints).await?;
    let worker_stop = CancellationToken::new();
    let running = tokio::spawn(
        worker_with(&pool, &pipeline, deliveries).run(worker_stop.clone().cancelled_owned()),
    );
    let started = Instant::now();
    for i in 0..args.documents {
        // Every sentence differs, so the embedding cache serves no chunk of another document.
        let sentences: String = (0..20)
            .map(|j| format!("Plain words make small text {i}.{j} of a few sentences. "))
            .collect();
        let text = format!(
            "document {i}: webhooks announce finished documents to other systems, signed, at least once, while the pipeline keeps its pace. {sentences}"
        );
        let upload = docket::documents::NewDocument {
            collection: docket::collections::DEFAULT,
            filename: "ingest.txt",
            content_type: "text/plain",
            bytes: text.as_bytes(),
            upload: None,
        };
        docket::pipeline::create_with_extract_job(&pool, &upload).await?;
    }
    let total = args.documents as i64;
    loop {
        let ready: i64 = sqlx::query_scalar(
            "select count(*) from documents where status in ('ready', 'failed')",
        )
        .fetch_one(&pool)
        .await?;
        if ready >= total {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let rate = total as f64 / started.elapsed().as_secs_f64();
    // Let the deliveries finish (untimed) so the run leaves nothing behind.
    let expected = (endpoints * args.documents) as u64;
    let deadline = Instant::now() + Duration::from_secs(600);
    while received.load(Ordering::Relaxed) < expected && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    worker_stop.cancel();
    running.await?;
    stop.cancel();
    pool.close().await;
    Ok((rate, received.load(Ordering::Relaxed)))
}

/// Runs the benchmark.
pub async fn run(args: WebhooksBench) -> anyhow::Result<()> {
    let one = delivery_run(&args, 1).await?;
    eprintln!("deliveries/s, 1 endpoint: {one:.0}");
    let fifty = delivery_run(&args, 50).await?;
    eprintln!("deliveries/s, 50 endpoints: {fifty:.0}");
    let (none, _) = ingest_run(&args, 0, None).await?;
    let (ten, delivered) = ingest_run(&args, 10, None).await?;
    // The same with deliveries one at a time: what the enqueue costs, apart from the sending.
    let (ten_one_slot, _) = ingest_run(&args, 10, Some(1)).await?;
    // And once more without, so drift on a loaded machine shows.
    let (none_again, _) = ingest_run(&args, 0, None).await?;
    eprintln!(
        "ingest docs/s: none {none:.1}, 10 endpoints {ten:.1} ({delivered} deliveries), 10 endpoints with 1 delivery slot {ten_one_slot:.1}, none again {none_again:.1}"
    );
    crate::drop_scratch_database(&args.database_url, &args.scratch_db).await?;
    println!(
        "{}",
        json!({
            "bench": "webhooks",
            "deliveries_per_s_1_endpoint": one,
            "deliveries_per_s_50_endpoints": fifty,
            "deliveries_per_run": args.deliveries,
            "ingest_docs_per_s_no_endpoints": none,
            "ingest_docs_per_s_10_endpoints": ten,
            "ingest_docs_per_s_no_endpoints_again": none_again,
            "ingest_docs_per_s_10_endpoints_1_delivery_slot": ten_one_slot,
            "ingest_ratio_10_vs_none": ten / ((none + none_again) / 2.0),
            "ingest_ratio_10_1_slot_vs_none": ten_one_slot / ((none + none_again) / 2.0),
            "deliveries_during_ingest": delivered,
            "documents_per_ingest_run": args.documents,
            "embedder": if args.model_dir.is_some() { "local" } else { "hash" },
        })
    );
    Ok(())
}
