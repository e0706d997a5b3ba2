//! A document's one description of how its text was obtained (`extraction`), through the API
//! and the real pipeline, on real fixtures: a text layer, a file's own text, a photo read by
//! OCR, a PDF part text layer and part scan (pending, read, and with OCR off), and a pending
//! OCR that was stopped. The page shows `extraction.summary` as given.

use std::sync::Arc;
use std::time::Duration;

use docket::chunk::ChunkConfig;
use docket::embed::{Embedder, HashEmbedder};
use docket::pipeline::{ExtractJob, Pipeline};
use docket::queue::Queue;
use docket::worker::{Declare, Registry, Worker, WorkerConfig};
use reqwest::StatusCode;
use serde_json::Value;
use sqlx::PgPool;

use crate::support::{TestApp, TestWorker, extract_settings, fixture};

/// The document's `extraction` once the worker is idle.
async fn extracted(api: &TestApp, name: &str, relative: &str) -> (Value, Value) {
    let id = api.upload_one(name, fixture(relative)).await;
    api.worker().await.run_until_idle().await;
    let doc = api.document(id).await;
    (doc["extraction"].clone(), doc)
}

/// The pages the reader marks as read by OCR: the same pages the description counts.
async fn ocr_pages(api: &TestApp, doc: &Value) -> Value {
    let text: Value = api
        .get_json(&format!("/api/documents/{}/text", doc["id"]))
        .await;
    text["ocr_pages"].clone()
}

fn summary(extraction: &Value) -> &str {
    extraction["summary"].as_str().unwrap_or_default()
}

#[sqlx::test(migrator = "docket::db::MIGRATOR")]
async fn a_text_pdf_and_a_markdown_file_say_no_ocr_was_needed(pool: PgPool) {
    let api = TestApp::builder(pool).spawn().await;
    let (pdf, doc) = extracted(&api, "outline.pdf", "pdf/pdflatex-outline.pdf").await;
    assert_eq!(doc["status"], "ready", "{doc}");
    assert_eq!(pdf["method"], "text", "{pdf}");
    assert_eq!(pdf["ocr_wanted"], 0);
    assert_eq!(
        summary(&pdf),
        format!(
            "Text layer on every page ({}); no OCR needed.",
            doc["extractor"].as_str().unwrap_or_default()
        )
    );
    let (markdown, _) = extracted(&api, "README.md", "text/pdfjs-README.md").await;
    assert_eq!(markdown["method"], "text", "{markdown}");
    assert!(
        summary(&markdown).starts_with("The file's own text (")
            && summary(&markdown).ends_with("); no OCR needed."),
        "{markdown}"
    );
}

#[sqlx::test(migrator = "docket::db::MIGRATOR")]
async fn a_photo_says_ocr_read_its_page(pool: PgPool) {
    let api = TestApp::builder(pool).spawn().await;
    let (photo, doc) = extracted(&api, "page.jpg", "image/c02-22.jpg").await;
    assert_eq!(doc["status"], "ready", "{doc}");
    assert_eq!(
        (
            photo["method"].as_str(),
            photo["pages"].as_i64(),
            photo["ocr_read"].as_i64()
        ),
        (Some("ocr"), Some(1), Some(1)),
        "{photo}"
    );
    let text = summary(&photo);
    assert!(text.starts_with("OCR on 1 of 1 page (tesseract "), "{text}");
    assert!(text.ends_with("): the file is an image."), "{text}");
    assert_eq!(ocr_pages(&api, &doc).await, serde_json::json!([1]));
}

#[sqlx::test(migrator = "docket::db::MIGRATOR")]
async fn a_part_scanned_pdf_is_pending_then_read_and_never_says_ocr_off(pool: PgPool) {
    let api = TestApp::builder(pool.clone()).spawn().await;
    let id = api
        .upload_one("mixed.pdf", fixture("pdf/mixed-text-and-scan.pdf"))
        .await;
    // The extract step alone: its page without a text layer waits for the OCR step.
    let mut registry = Registry::new();
    registry.with(api.pipeline().await).kind::<ExtractJob>();
    let extract_only = Worker::new(
        Queue::new(pool.clone(), Duration::from_secs(30)),
        registry,
        WorkerConfig::for_lease(Duration::from_secs(30)),
    );
    extract_only.run_until_idle().await.expect("extract");
    let doc = api.document(id).await;
    let pending = &doc["extraction"];
    assert_eq!(doc["status"], "extracting", "{doc}");
    assert_eq!(pending["method"], "ocr_pending", "{doc}");
    assert_eq!(
        summary(pending),
        "Text layer on 4 of 5 pages (pdftotext); OCR pending on 1 page: page 5: no text layer."
    );
    assert!(
        doc["extract_note"].is_null(),
        "no 'OCR off' while OCR waits: {doc}"
    );

    api.worker().await.run_until_idle().await;
    let doc = api.document(id).await;
    let read = &doc["extraction"];
    assert_eq!(doc["status"], "ready", "{doc}");
    assert_eq!(
        (
            read["method"].as_str(),
            read["ocr_wanted"].as_i64(),
            read["ocr_read"].as_i64()
        ),
        (Some("text_and_ocr"), Some(1), Some(1)),
        "{read}"
    );
    let text = summary(read);
    assert!(
        text.starts_with("Text layer on 4 of 5 pages (pdftotext); OCR on 1 of 5 pages (tesseract "),
        "{text}"
    );
    assert!(text.ends_with("): page 5: no text layer."), "{text}");
    assert_eq!(ocr_pages(&api, &doc).await, serde_json::json!([5]));
}

#[sqlx::test(migrator = "docket::db::MIGRATOR")]
async fn with_ocr_off_the_unread_page_is_said_to_be_unread(pool: PgPool) {
    let api = TestApp::builder(pool.clone()).spawn().await;
    let id = api
        .upload_one("mixed.pdf", fixture("pdf/mixed-text-and-scan.pdf"))
        .await;
    let mut settings = extract_settings();
    settings.ocr.enabled = false;
    let pipeline = Pipeline::new(
        pool.clone(),
        Embedder::Hash(HashEmbedder::new(384)),
        ChunkConfig::default(),
        settings,
    );
    pipeline
        .prepare()
        .await
        .expect("register the model version");
    TestWorker::new(&pool, &Arc::new(pipeline), 1)
        .run_until_idle()
        .await;
    let doc = api.document(id).await;
    let off = &doc["extraction"];
    assert_eq!(doc["status"], "ready", "{doc}");
    assert_eq!(
        (off["method"].as_str(), off["ocr_read"].as_i64()),
        (Some("ocr_off"), Some(0)),
        "{off}"
    );
    assert_eq!(
        summary(off),
        "Text layer on 4 of 5 pages (pdftotext); 1 page not read, because OCR is off: page 5: no text layer."
    );
}

#[sqlx::test(migrator = "docket::db::MIGRATOR")]
async fn a_stopped_ocr_leaves_no_pending_description_on_the_failed_document(pool: PgPool) {
    let api = TestApp::builder(pool.clone()).spawn().await;
    let id = api.upload_one("scan.pdf", fixture("pdf/c02-22.pdf")).await;
    let mut registry = Registry::new();
    registry.with(api.pipeline().await).kind::<ExtractJob>();
    Worker::new(
        Queue::new(pool.clone(), Duration::from_secs(30)),
        registry,
        WorkerConfig::for_lease(Duration::from_secs(30)),
    )
    .run_until_idle()
    .await
    .expect("extract");
    assert_eq!(
        api.document(id).await["extraction"]["method"],
        "ocr_pending"
    );
    let ocr: i64 = sqlx::query_scalar(
        "select id from jobs where kind = 'ocr' and (payload ->> 'document_id')::bigint = $1",
    )
    .bind(id)
    .fetch_one(&pool)
    .await
    .expect("the OCR job");
    let cancelled = api
        .client
        .post(api.url(&format!("/api/jobs/{ocr}/cancel")))
        .send()
        .await
        .expect("cancel");
    assert_eq!(cancelled.status(), StatusCode::OK);
    let doc = api.document(id).await;
    assert_eq!(doc["status"], "failed", "{doc}");
    assert!(doc["extraction"].is_null(), "{doc}");
    assert!(doc["progress"].is_null(), "{doc}");
}
