//! `GET /api/documents` filters, sorts and pages in SQL: by name, step and type, newest,
//! oldest, name or size first, with a `total` and pages past the 200 the page used to stop at.

use reqwest::StatusCode;
use serde_json::Value;
use sqlx::PgPool;

use crate::support::{TestApp, fixture};

fn names(body: &Value) -> Vec<String> {
    body["documents"]
        .as_array()
        .unwrap_or_else(|| panic!("no documents in {body}"))
        .iter()
        .map(|d| d["filename"].as_str().unwrap().to_owned())
        .collect()
}

#[sqlx::test(migrator = "docket::db::MIGRATOR")]
async fn the_list_filters_by_name_step_and_type_and_sorts(pool: PgPool) {
    let api = TestApp::builder(pool.clone()).spawn().await;
    let (status, body) = api
        .upload(&[
            ("Heron notes.txt", b"Herons wade.".to_vec()),
            (
                "crane NOTES.md",
                b"# Cranes\n\nCranes dance, and dance again.".to_vec(),
            ),
            ("broken.pdf", fixture("malformed/invalid.pdf")),
        ])
        .await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    api.worker().await.run_until_idle().await;

    let body: Value = api.get_json("/api/documents?name=notes").await;
    assert_eq!(names(&body), ["crane NOTES.md", "Heron notes.txt"]);
    assert_eq!(body["total"], 2);

    let body: Value = api.get_json("/api/documents?status=failed").await;
    assert_eq!(names(&body), ["broken.pdf"]);

    let body: Value = api
        .get_json("/api/documents?type=text/markdown,application/pdf")
        .await;
    assert_eq!(names(&body), ["broken.pdf", "crane NOTES.md"]);

    let body: Value = api.get_json("/api/documents?sort=name").await;
    assert_eq!(
        names(&body),
        ["broken.pdf", "crane NOTES.md", "Heron notes.txt"]
    );
    let body: Value = api.get_json("/api/documents?sort=oldest").await;
    assert_eq!(
        names(&body),
        ["Heron notes.txt", "crane NOTES.md", "broken.pdf"]
    );
    let body: Value = api.get_json("/api/documents?sort=size&limit=1").await;
    assert_eq!(body["total"], 3);
    assert!(body["next"].is_null(), "offset orders page by offset");
    let sizes: Vec<i64> = {
        let all: Value = api.get_json("/api/documents?sort=size").await;
        all["documents"]
            .as_array()
            .unwrap()
            .iter()
            .map(|d| d["byte_size"].as_i64().unwrap())
            .collect()
    };
    assert!(sizes.windows(2).all(|w| w[0] >= w[1]), "{sizes:?}");
    assert_eq!(names(&body).len(), 1);

    let response = reqwest::get(api.url("/api/documents?sort=colour"))
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::BAD_REQUEST);
}

#[sqlx::test(migrator = "docket::db::MIGRATOR")]
async fn the_list_pages_past_two_hundred_documents(pool: PgPool) {
    let api = TestApp::builder(pool.clone()).spawn().await;
    for batch in 0..3 {
        let files: Vec<(String, Vec<u8>)> = (0..70)
            .map(|i| {
                let n = batch * 70 + i;
                (format!("note-{n:03}.txt"), format!("note {n}").into_bytes())
            })
            .collect();
        let refs: Vec<(&str, Vec<u8>)> = files
            .iter()
            .map(|(name, bytes)| (name.as_str(), bytes.clone()))
            .collect();
        let (status, body) = api.upload(&refs).await;
        assert_eq!(status, StatusCode::CREATED, "{body}");
    }
    let mut seen = Vec::new();
    for offset in (0..210).step_by(100) {
        let body: Value = api
            .get_json(&format!(
                "/api/documents?sort=name&limit=100&offset={offset}"
            ))
            .await;
        assert_eq!(body["total"], 210);
        seen.extend(names(&body));
    }
    let expected: Vec<String> = (0..210).map(|n| format!("note-{n:03}.txt")).collect();
    assert_eq!(seen, expected);
}
