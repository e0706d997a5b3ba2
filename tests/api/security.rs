//! The trust boundary against web pages, over a real server: another origin cannot change
//! docket, a foreign `Host` (DNS rebinding) cannot read it, and clients that send neither header
//! (CLIs, scripts) are not affected.

use reqwest::StatusCode;
use reqwest::header::{HOST, ORIGIN, REFERER};
use serde_json::{Value, json};
use sqlx::PgPool;

use crate::support::TestApp;

const EVIL: &str = "http://evil.example";

fn form(name: &str, text: &str) -> reqwest::multipart::Form {
    reqwest::multipart::Form::new().part(
        "file",
        reqwest::multipart::Part::bytes(text.as_bytes().to_vec()).file_name(name.to_owned()),
    )
}

async fn error_code(response: reqwest::Response) -> (StatusCode, String) {
    let status = response.status();
    let body: Value = response.json().await.expect("a JSON error");
    (
        status,
        body["error"]["code"].as_str().unwrap_or("").to_owned(),
    )
}

async fn document_count(pool: &PgPool) -> i64 {
    sqlx::query_scalar("select count(*) from documents")
        .fetch_one(pool)
        .await
        .expect("count documents")
}

fn port(api: &TestApp) -> &str {
    api.base.rsplit(':').next().expect("a port")
}

#[sqlx::test(migrator = "docket::db::MIGRATOR")]
async fn requests_from_another_origin_cannot_change_docket(pool: PgPool) {
    let api = TestApp::builder(pool.clone()).spawn().await;
    let refused = [
        (ORIGIN, EVIL.to_owned()),
        (ORIGIN, "null".to_owned()),
        (REFERER, format!("{EVIL}/attack.html")),
    ];
    for (name, value) in &refused {
        let response = api
            .client
            .post(api.url("/api/documents"))
            .header(name, value)
            .multipart(form("planted.txt", "a document planted by another site"))
            .send()
            .await
            .expect("upload");
        assert_eq!(
            error_code(response).await,
            (StatusCode::FORBIDDEN, "cross_origin_request".to_owned()),
            "{name}: {value}"
        );
    }
    assert_eq!(document_count(&pool).await, 0, "nothing was stored");

    // A CLI or script sends neither header and is not affected.
    let id = api
        .upload_one("notes.txt", b"notes of the operator".to_vec())
        .await;
    let created = api
        .client
        .post(api.url("/api/schedules"))
        .json(&json!({ "name": "hourly", "cron": "0 * * * *", "kind": "noop" }))
        .send()
        .await
        .expect("create schedule");
    assert_eq!(created.status(), StatusCode::CREATED);

    for (method, path) in [
        (
            reqwest::Method::POST,
            format!("/api/documents/{id}/reprocess"),
        ),
        (reqwest::Method::DELETE, format!("/api/documents/{id}")),
        (
            reqwest::Method::POST,
            "/api/schedules/hourly/run-now".into(),
        ),
        (reqwest::Method::POST, "/api/jobs".into()),
    ] {
        let response = api
            .client
            .request(method.clone(), api.url(&path))
            .header(ORIGIN, EVIL)
            .json(&json!({ "kind": "noop" }))
            .send()
            .await
            .expect("request");
        assert_eq!(
            error_code(response).await,
            (StatusCode::FORBIDDEN, "cross_origin_request".to_owned()),
            "{method} {path}"
        );
    }
    let jobs: i64 = sqlx::query_scalar("select count(*) from jobs")
        .fetch_one(&pool)
        .await
        .expect("count jobs");
    assert_eq!(jobs, 1, "only the upload's extract job exists");
    assert_eq!(document_count(&pool).await, 1);

    // The page itself sends its own origin, and that works.
    let response = api
        .client
        .post(api.url(&format!("/api/documents/{id}/reprocess")))
        .header(ORIGIN, &api.base)
        .send()
        .await
        .expect("reprocess");
    assert_eq!(response.status(), StatusCode::ACCEPTED);
    // Reads are not refused for their Origin: the browser keeps their answers from other sites.
    let response = api
        .client
        .get(api.url("/api/documents"))
        .header(ORIGIN, EVIL)
        .send()
        .await
        .expect("list");
    assert_eq!(response.status(), StatusCode::OK);
}

#[sqlx::test(migrator = "docket::db::MIGRATOR")]
async fn a_foreign_host_cannot_read_or_delete_anything(pool: PgPool) {
    let api = TestApp::builder(pool.clone()).spawn().await;
    let id = api
        .upload_one("private.txt", b"private notes".to_vec())
        .await;
    let rebound = format!("evil.example:{}", port(&api));
    for (method, path) in [
        (reqwest::Method::GET, "/api/documents".to_owned()),
        (reqwest::Method::GET, format!("/api/documents/{id}/file")),
        (reqwest::Method::DELETE, format!("/api/documents/{id}")),
        (reqwest::Method::GET, "/".to_owned()),
        (reqwest::Method::GET, "/metrics".to_owned()),
    ] {
        let response = api
            .client
            .request(method.clone(), api.url(&path))
            .header(HOST, &rebound)
            .send()
            .await
            .expect("request");
        assert_eq!(
            error_code(response).await,
            (StatusCode::FORBIDDEN, "host_not_allowed".to_owned()),
            "{method} {path}"
        );
    }
    assert_eq!(
        document_count(&pool).await,
        1,
        "the document is still there"
    );

    for host in [format!("localhost:{}", port(&api)), "127.0.0.1".to_owned()] {
        let response = api
            .client
            .get(api.url("/api/documents"))
            .header(HOST, &host)
            .send()
            .await
            .expect("list");
        assert_eq!(response.status(), StatusCode::OK, "{host}");
    }
}

#[sqlx::test(migrator = "docket::db::MIGRATOR")]
async fn behind_a_proxy_the_public_url_is_docket_s_own_origin(pool: PgPool) {
    let guard = docket::http::Guard {
        hosts: docket::http::guard::HostPolicy::new(
            Some("https://docket.example.com"),
            &["docket-internal".to_owned()],
        )
        .expect("policy"),
        ..docket::http::Guard::default()
    };
    let api = TestApp::builder(pool.clone()).guard(guard).spawn().await;
    for host in ["docket.example.com", "docket-internal:8080"] {
        let response = api
            .client
            .get(api.url("/api/documents"))
            .header(HOST, host)
            .send()
            .await
            .expect("list");
        assert_eq!(response.status(), StatusCode::OK, "{host}");
    }
    // The proxy passed its own Host on, or rewrote it: the public origin is accepted either way.
    for host in ["docket.example.com", "127.0.0.1"] {
        let response = api
            .client
            .post(api.url("/api/documents"))
            .header(HOST, host)
            .header(ORIGIN, "https://docket.example.com")
            .multipart(form(
                &format!("{host}.txt"),
                &format!("sent through {host}"),
            ))
            .send()
            .await
            .expect("upload");
        assert_eq!(response.status(), StatusCode::CREATED, "{host}");
    }
}
