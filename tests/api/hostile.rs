//! Hostile inputs over a real server and pipeline: uploads that break the request's limits store
//! nothing, a bad file fails alone, a client that never finishes its upload is cut off and frees
//! its slot, and an extraction past its deadline fails the document instead of holding the job.

use std::sync::Arc;
use std::time::Duration;

use docket::chunk::ChunkConfig;
use docket::embed::{Embedder, HashEmbedder};
use docket::extract::ExtractSettings;
use docket::pipeline::Pipeline;
use futures::StreamExt;
use reqwest::StatusCode;
use sqlx::PgPool;

use crate::support::{TestApp, TestWorker, extract_settings};

async fn document_count(pool: &PgPool) -> i64 {
    sqlx::query_scalar("select count(*) from documents")
        .fetch_one(pool)
        .await
        .expect("count documents")
}

#[sqlx::test(migrator = "docket::db::MIGRATOR")]
async fn a_request_over_its_limits_stores_nothing(pool: PgPool) {
    let api = TestApp::builder(pool.clone()).spawn().await;
    let files: Vec<(String, Vec<u8>)> = (0..101)
        .map(|i| (format!("f{i}.txt"), format!("file number {i}").into_bytes()))
        .collect();
    let named: Vec<(&str, Vec<u8>)> = files.iter().map(|(n, b)| (n.as_str(), b.clone())).collect();
    let (status, body) = api.upload(&named).await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
    assert_eq!(body["error"]["code"], "too_many_files");
    assert_eq!(
        document_count(&pool).await,
        0,
        "the first hundred were not stored"
    );

    // Two files under the per-file limit that together pass it.
    let small = TestApp::builder(pool.clone())
        .max_upload_bytes(docket::http::MIN_REQUEST_BYTES / 2 + 1)
        .guard(docket::http::Guard::default())
        .spawn()
        .await;
    let half = (docket::http::MIN_REQUEST_BYTES / 2 + 1) as usize;
    let (status, body) = small
        .upload(&[("a.txt", vec![b'a'; half]), ("b.txt", vec![b'b'; half])])
        .await;
    assert_eq!(status, StatusCode::PAYLOAD_TOO_LARGE, "{body}");
    assert_eq!(body["error"]["code"], "request_too_large");
    assert_eq!(document_count(&pool).await, 0);
}

#[sqlx::test(migrator = "docket::db::MIGRATOR")]
async fn a_file_with_a_bad_name_fails_alone(pool: PgPool) {
    let api = TestApp::builder(pool.clone()).spawn().await;
    // A C1 control character passes HTTP's header rules but is no part of a name.
    let (status, body) = api
        .upload(&[
            ("first.txt", b"the first file".to_vec()),
            (
                "next\u{85}line.txt",
                b"a name with a control character".to_vec(),
            ),
            ("last.txt", b"the last file".to_vec()),
        ])
        .await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    let results = body["results"].as_array().expect("results");
    assert_eq!(results.len(), 3);
    assert!(results[0]["document"]["id"].is_i64(), "{body}");
    assert_eq!(results[1]["error"]["code"], "invalid_filename", "{body}");
    assert!(results[1]["document"].is_null());
    assert!(results[2]["document"]["id"].is_i64(), "{body}");
    assert_eq!(document_count(&pool).await, 2);

    // A NUL never gets past the multipart parser; the request is refused before the file
    // ahead of it is stored.
    let (status, body) = api
        .upload(&[
            ("ahead.txt", b"a file ahead of the bad part".to_vec()),
            ("nul\0byte.txt", b"a name PostgreSQL cannot store".to_vec()),
        ])
        .await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
    assert_eq!(
        document_count(&pool).await,
        2,
        "nothing of that request was stored"
    );
}

#[sqlx::test(migrator = "docket::db::MIGRATOR")]
async fn an_upload_that_never_ends_times_out_and_frees_its_slot(pool: PgPool) {
    let guard = docket::http::Guard::new(Default::default(), Duration::from_secs(1), 1);
    let api = Arc::new(TestApp::builder(pool.clone()).guard(guard).spawn().await);
    // A client that sends the start of a file and then nothing, for ever.
    let head = "--cut\r\ncontent-disposition: form-data; name=\"file\"; filename=\"slow.txt\"\r\n\
                content-type: text/plain\r\n\r\nthe first bytes of a file that never ends";
    let body = futures::stream::iter([Ok::<_, std::io::Error>(head.as_bytes().to_vec())])
        .chain(futures::stream::pending());
    let slow = {
        let api = api.clone();
        tokio::spawn(async move {
            let response = api
                .client
                .post(api.url("/api/documents"))
                .header("content-type", "multipart/form-data; boundary=cut")
                .body(reqwest::Body::wrap_stream(body))
                .send()
                .await
                .expect("an answer");
            (tokio::time::Instant::now(), response.status())
        })
    };
    // Let the slow upload take the only slot first. The quick upload's own time is what is
    // left of its second after the slow one is cut off: this wait, generous for a loaded
    // machine (an upload is a few transactions: its upload row, each file, the close).
    tokio::time::sleep(Duration::from_millis(500)).await;
    let id = api
        .upload_one("quick.txt", b"a normal upload".to_vec())
        .await;
    let quick_done = tokio::time::Instant::now();
    let (slow_done, slow_status) = tokio::time::timeout(Duration::from_secs(10), slow)
        .await
        .expect("the slow upload is cut off")
        .expect("task");
    assert_eq!(slow_status, StatusCode::REQUEST_TIMEOUT);
    assert!(
        slow_done <= quick_done,
        "the quick upload waited for the slot the slow one held"
    );
    assert!(id > 0);
    assert_eq!(document_count(&pool).await, 1);
}

#[sqlx::test(migrator = "docket::db::MIGRATOR")]
async fn an_extraction_past_its_deadline_fails_the_document(pool: PgPool) {
    let limits = ExtractSettings {
        timeout: Duration::from_millis(1),
        ..extract_settings()
    };
    let pipeline = Pipeline::new(
        pool.clone(),
        Embedder::Hash(HashEmbedder::new(64)),
        ChunkConfig::default(),
        limits,
    );
    pipeline.prepare().await.expect("prepare");
    let pipeline = Arc::new(pipeline);
    let api = TestApp::builder(pool.clone())
        .max_upload_bytes(16 << 20)
        .guard(docket::http::Guard::default())
        .spawn()
        .await;
    let text: String = (0..400_000).map(|i| format!("word{i} ")).collect();
    let id = api.upload_one("long.txt", text.into_bytes()).await;
    TestWorker::new(&pool, &pipeline, 1)
        .run_until_idle_within(5)
        .await;
    let (status, code): (String, Option<String>) =
        sqlx::query_as("select status, error ->> 'code' from documents where id = $1")
            .bind(id)
            .fetch_one(&pool)
            .await
            .expect("document");
    assert_eq!(
        (status.as_str(), code.as_deref()),
        ("failed", Some("extraction_timeout"))
    );
}
