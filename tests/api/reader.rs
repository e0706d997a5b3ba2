//! `GET /api/documents/{id}/text`, the document view's text, over real uploads through the real
//! pipeline: chunk overlaps removed so the text reads as written, pages OCR read marked, the
//! locations of structured formats, a window opened at a hit's chunk, and bounded windows that
//! together hold every chunk once.

use reqwest::StatusCode;
use serde_json::Value;
use sqlx::PgPool;

use crate::support::{TestApp, chunks, fixture};
use docket::chunk::ChunkConfig;
use docket::search::reader::WINDOW_CHUNKS;

fn squeeze(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// Every section's text in one string, in order.
fn whole(body: &Value) -> String {
    body["sections"]
        .as_array()
        .expect("sections")
        .iter()
        .map(|s| s["text"].as_str().expect("text"))
        .collect::<Vec<_>>()
        .join("\n\n")
}

fn prose(sentences: usize) -> String {
    (0..sentences)
        .map(|i| {
            let end = if i % 7 == 6 { ".\n\n" } else { ". " };
            format!("Sentence {i} tells of the heron number {i} by the river{end}")
        })
        .collect()
}

#[sqlx::test(migrator = "docket::db::MIGRATOR")]
async fn the_text_reads_as_uploaded_with_every_chunk_overlap_removed(pool: PgPool) {
    let chunking = ChunkConfig {
        target_tokens: 40,
        overlap_tokens: 10,
    };
    let api = TestApp::builder(pool.clone())
        .chunking(chunking)
        .spawn()
        .await;
    let original = prose(60);
    let id = api
        .upload_one("herons.txt", original.clone().into_bytes())
        .await;
    api.worker().await.run_until_idle().await;
    let stored = chunks(&pool, id).await;
    let stored_len: usize = stored.iter().map(|(_, t)| t.len()).sum();
    assert!(stored.len() > 5, "{} chunks", stored.len());
    assert!(
        stored_len > original.trim().len() + 50,
        "the chunks overlap (else this test proves nothing)"
    );

    let body: Value = api.get_json(&format!("/api/documents/{id}/text")).await;
    assert_eq!(body["filename"], "herons.txt");
    assert_eq!(body["from"], 0);
    assert!(body["next"].is_null(), "{body}");
    assert_eq!(body["total_chunks"], stored.len());
    assert_eq!(body["ocr_pages"], serde_json::json!([]));
    assert_eq!(squeeze(&whole(&body)), squeeze(&original));
    let section = &body["sections"][0];
    assert_eq!(section["label"], "page 1");
    assert_eq!(section["ocr"], false);
    // Each chunk's span is that chunk's whole text, overlap included.
    let text: Vec<char> = section["text"].as_str().unwrap().chars().collect();
    for (span, (_, chunk)) in section["chunks"].as_array().unwrap().iter().zip(&stored) {
        let (start, end) = (
            span["start"].as_u64().unwrap() as usize,
            span["end"].as_u64().unwrap() as usize,
        );
        let shown: String = text[start..end].iter().collect();
        assert_eq!(&shown, chunk, "span {span}");
    }

    // Opened at a hit's chunk: the window starts at its page's start (here within the lead).
    let at = i32::try_from(stored.len() - 2).unwrap();
    let body: Value = api
        .get_json(&format!("/api/documents/{id}/text?at={at}"))
        .await;
    let spans = body["sections"][0]["chunks"].as_array().unwrap();
    assert!(spans.iter().any(|s| s["chunk_index"] == at), "{body}");
    assert!(body["from"].as_i64().unwrap() <= i64::from(at));
}

#[sqlx::test(migrator = "docket::db::MIGRATOR")]
async fn a_scan_shows_what_ocr_read_marked_as_read_by_ocr(pool: PgPool) {
    let api = TestApp::builder(pool.clone()).spawn().await;
    let id = api
        .upload_one("c02-22.pdf", fixture("pdf/c02-22.pdf"))
        .await;
    api.worker().await.run_until_idle().await;
    let body: Value = api.get_json(&format!("/api/documents/{id}/text")).await;
    assert_eq!(body["ocr_pages"], serde_json::json!([1]), "{body}");
    let section = &body["sections"][0];
    assert_eq!(section["label"], "page 1");
    assert_eq!(section["ocr"], true);
    let text = section["text"].as_str().unwrap();
    assert!(text.contains("garden") && text.contains("Watson"), "{text}");
}

#[sqlx::test(migrator = "docket::db::MIGRATOR")]
async fn a_presentation_reads_by_slide(pool: PgPool) {
    let api = TestApp::builder(pool.clone()).spawn().await;
    let id = api
        .upload_one("notes.pptx", fixture("office/ko-sample-notes.pptx"))
        .await;
    api.worker().await.run_until_idle().await;
    let body: Value = api.get_json(&format!("/api/documents/{id}/text")).await;
    let labels: Vec<&str> = body["sections"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["label"].as_str().unwrap())
        .collect();
    assert!(!labels.is_empty());
    assert!(labels.iter().all(|l| l.starts_with("slide ")), "{labels:?}");
}

#[sqlx::test(migrator = "docket::db::MIGRATOR")]
async fn windows_are_bounded_and_together_hold_every_chunk_once(pool: PgPool) {
    // No overlap and one short paragraph per chunk: many chunks from a small file.
    let chunking = ChunkConfig {
        target_tokens: 12,
        overlap_tokens: 0,
    };
    let api = TestApp::builder(pool.clone())
        .chunking(chunking)
        .spawn()
        .await;
    let count = usize::try_from(WINDOW_CHUNKS).unwrap() + 30;
    let paragraphs: Vec<String> = (0..count)
        .map(|i| format!("chunk {i} about topic {} and {}", i % 17, i % 29))
        .collect();
    let id = api.upload_paragraphs("many.txt", &paragraphs).await;

    let first: Value = api.get_json(&format!("/api/documents/{id}/text")).await;
    assert_eq!(first["next"], WINDOW_CHUNKS, "{}", first["next"]);
    assert_eq!(first["sections"][0]["continues"], true);
    let second: Value = api
        .get_json(&format!("/api/documents/{id}/text?from={WINDOW_CHUNKS}"))
        .await;
    assert!(second["next"].is_null());
    assert_eq!(second["sections"][0]["continued"], true);
    let indexes: Vec<i64> = [&first, &second]
        .iter()
        .flat_map(|w| w["sections"].as_array().unwrap().clone())
        .flat_map(|s| s["chunks"].as_array().unwrap().clone())
        .map(|c| c["chunk_index"].as_i64().unwrap())
        .collect();
    assert_eq!(indexes, (0..count as i64).collect::<Vec<_>>());
    let text = format!("{}\n\n{}", whole(&first), whole(&second));
    assert_eq!(squeeze(&text), squeeze(&paragraphs.join(" ")));
}

#[sqlx::test(migrator = "docket::db::MIGRATOR")]
async fn a_missing_document_is_404_and_a_bad_window_is_400(pool: PgPool) {
    let api = TestApp::builder(pool.clone()).spawn().await;
    let client = reqwest::Client::new();
    let response = client
        .get(api.url("/api/documents/99999/text"))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::NOT_FOUND);
    let body: Value = response.json().await.unwrap();
    assert_eq!(body["error"]["code"], "document_not_found");
    let id = api.upload_one("a.txt", b"Some words.".to_vec()).await;
    let response = client
        .get(api.url(&format!("/api/documents/{id}/text?from=0&at=0")))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::BAD_REQUEST);
}
