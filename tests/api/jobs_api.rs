//! The jobs API over a real HTTP server on loopback: answers, errors, and the bearer token.

use docket::queue::NewJob;
use reqwest::StatusCode;
use serde_json::{Value, json};
use sqlx::PgPool;

use crate::support::{TestApp, enqueue};

async fn error_code(response: reqwest::Response) -> (StatusCode, String, String) {
    let status = response.status();
    let body: Value = response.json().await.expect("JSON error body");
    (
        status,
        body["error"]["code"]
            .as_str()
            .unwrap_or_default()
            .to_owned(),
        body["error"]["message"]
            .as_str()
            .unwrap_or_default()
            .to_owned(),
    )
}

#[sqlx::test(migrator = "docket::db::MIGRATOR")]
async fn enqueue_list_show_cancel_and_retry_through_the_api(pool: PgPool) {
    let api = TestApp::builder(pool.clone()).spawn().await;
    let created = api
        .client
        .post(api.url("/api/jobs"))
        .json(&json!({ "kind": "noop", "payload": { "n": 1 }, "idempotency_key": "k1" }))
        .send()
        .await
        .expect("post");
    assert_eq!(created.status(), StatusCode::CREATED);
    let job: Value = created.json().await.expect("job");
    let id = job["id"].as_i64().expect("id");
    assert_eq!(job["status"], "ready");

    let again = api
        .client
        .post(api.url("/api/jobs"))
        .json(&json!({ "kind": "noop", "payload": { "n": 1 }, "idempotency_key": "k1" }))
        .send()
        .await
        .expect("post");
    assert_eq!(again.status(), StatusCode::OK, "same key: the existing job");
    assert_eq!(again.json::<Value>().await.expect("job")["id"], id);

    let shown: Value = api.get_json(&format!("/api/jobs/{id}")).await;
    assert_eq!(shown["payload"]["n"], 1);

    let cancelled = api
        .client
        .post(api.url(&format!("/api/jobs/{id}/cancel")))
        .send()
        .await
        .expect("cancel");
    assert_eq!(cancelled.status(), StatusCode::OK);
    let retried: Value = api.post_json(&format!("/api/jobs/{id}/retry")).await;
    assert_eq!(retried["status"], "ready");

    for i in 0..4 {
        enqueue(&pool, NewJob::new("noop", json!({ "i": i }))).await;
    }
    let page: Value = api.get_json("/api/jobs?limit=3&status=ready").await;
    assert_eq!(page["jobs"].as_array().expect("jobs").len(), 3);
    let next = page["next"].as_i64().expect("a next cursor");
    let rest: Value = api
        .get_json(&format!("/api/jobs?limit=3&status=ready&before={next}"))
        .await;
    assert_eq!(rest["jobs"].as_array().expect("jobs").len(), 2);
    assert!(rest["next"].is_null());

    let stats: Value = api.get_json("/api/queue/stats").await;
    assert_eq!(stats["kinds"][0]["kind"], "noop");
    assert_eq!(stats["kinds"][0]["ready"], 5);
    assert!(stats["oldest_due_age_seconds"].as_f64().is_some());
    assert_eq!(stats["expired_leases"], 0);
}

#[sqlx::test(migrator = "docket::db::MIGRATOR")]
async fn bad_input_gets_clear_client_errors(pool: PgPool) {
    let api = TestApp::builder(pool.clone()).spawn().await;
    let post = |body: Value| api.client.post(api.url("/api/jobs")).json(&body).send();

    let (status, code, message) =
        error_code(post(json!({ "kind": "rm -rf" })).await.expect("post")).await;
    assert_eq!(
        (status, code.as_str()),
        (StatusCode::UNPROCESSABLE_ENTITY, "unknown_job_kind")
    );
    assert!(message.contains("noop"), "names the known kinds: {message}");

    let big = json!({ "kind": "noop", "payload": { "blob": "x".repeat(100 * 1024) } });
    let (status, code, _) = error_code(post(big).await.expect("post")).await;
    assert_eq!(
        (status, code.as_str()),
        (StatusCode::PAYLOAD_TOO_LARGE, "payload_too_large")
    );

    let huge = json!({ "kind": "noop", "payload": { "blob": "x".repeat(400 * 1024) } });
    let (status, _, _) = error_code(post(huge).await.expect("post")).await;
    assert_eq!(status, StatusCode::PAYLOAD_TOO_LARGE);

    let (status, code, _) = error_code(
        post(json!({ "kind": "noop", "payload": [1, 2] }))
            .await
            .expect("post"),
    )
    .await;
    assert_eq!(
        (status, code.as_str()),
        (StatusCode::BAD_REQUEST, "invalid_payload")
    );

    let (status, code, message) = error_code(
        post(json!({ "kind": "noop", "colour": "red" }))
            .await
            .expect("post"),
    )
    .await;
    assert_eq!(
        (status, code.as_str()),
        (StatusCode::BAD_REQUEST, "invalid_json")
    );
    assert!(message.contains("colour"), "says which field: {message}");

    let malformed = api
        .client
        .post(api.url("/api/jobs"))
        .header("content-type", "application/json")
        .body("{\"kind\": ")
        .send()
        .await
        .expect("post");
    let (status, code, _) = error_code(malformed).await;
    assert_eq!(
        (status, code.as_str()),
        (StatusCode::BAD_REQUEST, "invalid_json")
    );

    for path in [
        "/api/jobs/abc",
        "/api/jobs/1e9",
        "/api/jobs/99999999999999999999",
    ] {
        let (status, code, _) =
            error_code(api.client.get(api.url(path)).send().await.expect("get")).await;
        assert_eq!(
            (status, code.as_str()),
            (StatusCode::BAD_REQUEST, "invalid_path"),
            "{path}"
        );
    }
    let (status, code, _) = error_code(
        api.client
            .get(api.url("/api/jobs/424242"))
            .send()
            .await
            .expect("get"),
    )
    .await;
    assert_eq!(
        (status, code.as_str()),
        (StatusCode::NOT_FOUND, "job_not_found")
    );

    let (status, code, _) = error_code(
        api.client
            .get(api.url("/api/jobs?status=happy"))
            .send()
            .await
            .expect("get"),
    )
    .await;
    assert_eq!(
        (status, code.as_str()),
        (StatusCode::BAD_REQUEST, "invalid_status")
    );
    let (status, code, _) = error_code(
        api.client
            .get(api.url("/api/jobs?limit=0"))
            .send()
            .await
            .expect("get"),
    )
    .await;
    assert_eq!(
        (status, code.as_str()),
        (StatusCode::BAD_REQUEST, "invalid_limit")
    );

    let id = enqueue(&pool, NewJob::new("noop", json!({}))).await;
    let (status, code, _) = error_code(
        api.client
            .post(api.url(&format!("/api/jobs/{id}/retry")))
            .send()
            .await
            .expect("retry"),
    )
    .await;
    assert_eq!(
        (status, code.as_str()),
        (StatusCode::CONFLICT, "job_state_conflict"),
        "a ready job cannot be retried"
    );

    let (status, code, _) = error_code(
        api.client
            .get(api.url("/api/nothing-here"))
            .send()
            .await
            .expect("get"),
    )
    .await;
    assert_eq!(
        (status, code.as_str()),
        (StatusCode::NOT_FOUND, "route_not_found")
    );
}

#[sqlx::test(migrator = "docket::db::MIGRATOR")]
async fn token_guards_the_api_but_not_health_or_the_page(pool: PgPool) {
    let token = "a-long-enough-test-token";
    let api = TestApp::builder(pool).token(token).spawn().await;
    let (status, code, _) = error_code(
        api.client
            .get(api.url("/api/jobs"))
            .send()
            .await
            .expect("get"),
    )
    .await;
    assert_eq!(
        (status, code.as_str()),
        (StatusCode::UNAUTHORIZED, "unauthorized")
    );
    let wrong = api
        .client
        .get(api.url("/api/jobs"))
        .bearer_auth("a-long-enough-test-tokem")
        .send()
        .await
        .expect("get");
    assert_eq!(wrong.status(), StatusCode::UNAUTHORIZED);
    let right = api
        .client
        .get(api.url("/api/jobs"))
        .bearer_auth(token)
        .send()
        .await
        .expect("get");
    assert_eq!(right.status(), StatusCode::OK);
    for open in ["/healthz", "/readyz", "/"] {
        let response = api.client.get(api.url(open)).send().await.expect("get");
        assert_eq!(response.status(), StatusCode::OK, "{open}");
    }
    let page = api.client.get(api.url("/")).send().await.expect("page");
    let csp = page
        .headers()
        .get("content-security-policy")
        .expect("CSP header");
    assert!(csp.to_str().expect("ascii").contains("script-src 'self'"));
}

#[sqlx::test(migrator = "docket::db::MIGRATOR")]
async fn readyz_reports_missing_migrations(pool: PgPool) {
    let api = TestApp::builder(pool.clone()).spawn().await;
    let ready = api
        .client
        .get(api.url("/readyz"))
        .send()
        .await
        .expect("get");
    assert_eq!(ready.status(), StatusCode::OK);
    sqlx::query(
        "delete from _sqlx_migrations where version = (select max(version) from _sqlx_migrations)",
    )
    .execute(&pool)
    .await
    .expect("forget a migration");
    let not_ready = api
        .client
        .get(api.url("/readyz"))
        .send()
        .await
        .expect("get");
    assert_eq!(not_ready.status(), StatusCode::SERVICE_UNAVAILABLE);
    let body: Value = not_ready.json().await.expect("JSON body");
    let newest = docket::db::MIGRATOR.iter().map(|m| m.version).max();
    assert_eq!(
        body,
        json!({ "status": "unavailable", "reason": "migrations not applied", "missing": [newest] })
    );
}

#[sqlx::test(migrator = "docket::db::MIGRATOR")]
async fn an_unreachable_database_is_503_without_its_cause(pool: PgPool) {
    let api = TestApp::builder(pool.clone()).spawn().await;
    let healthy: Value = api.get_json("/healthz").await;
    assert_eq!(healthy, json!({ "status": "ok" }));
    pool.close().await;
    let response = api
        .client
        .get(api.url("/api/documents"))
        .send()
        .await
        .expect("get");
    let (status, code, message) = error_code(response).await;
    assert_eq!(
        (status, code.as_str(), message.as_str()),
        (
            StatusCode::SERVICE_UNAVAILABLE,
            "database_unavailable",
            "the database is not reachable right now; try again shortly"
        )
    );
}

#[test]
fn binding_beyond_loopback_requires_a_token() {
    use clap::Parser;
    #[derive(Parser)]
    struct Args {
        #[command(flatten)]
        serve: docket::config::ServeConfig,
    }
    let parse = |extra: &[&str]| {
        let mut argv = vec!["docket", "--database-url", "postgres://x@127.0.0.1/db"];
        argv.extend_from_slice(extra);
        Args::try_parse_from(argv).expect("parses").serve
    };
    let open = parse(&["--bind", "0.0.0.0:8080"]);
    let err = open.validate().expect_err("refused without a token");
    assert!(err.to_string().contains("DOCKET_API_TOKEN"), "{err}");
    assert!(
        parse(&["--bind", "0.0.0.0:8080", "--api-token", "0123456789abcdef"])
            .validate()
            .is_ok()
    );
    assert!(parse(&["--bind", "127.0.0.1:8080"]).validate().is_ok());
    assert!(parse(&["--bind", "[::1]:8080"]).validate().is_ok());
}
