//! Collections and tokens end to end: when a token is needed, what each role may do, revocation
//! seen at once by another process, uploads refused with nothing stored, deleting a collection,
//! and the token's secret kept out of the database and the logs.

use docket::access::{Role, tokens};
use reqwest::StatusCode;
use sha2::{Digest, Sha256};
use sqlx::PgPool;

use crate::access::{TwoCollections, upload_into, upload_status};
use crate::support::TestApp;

async fn status_of(request: reqwest::RequestBuilder) -> StatusCode {
    request.send().await.expect("request").status()
}

async fn document_count(pool: &PgPool) -> i64 {
    sqlx::query_scalar("select count(*) from documents")
        .fetch_one(pool)
        .await
        .expect("count")
}

#[sqlx::test]
async fn loopback_is_open_until_the_first_token_then_every_request_needs_one(pool: PgPool) {
    let app = TestApp::builder(pool.clone()).spawn().await;
    let get = |path: &str| app.client.get(app.url(path));
    assert_eq!(status_of(get("/api/documents")).await, StatusCode::OK);
    assert_eq!(status_of(get("/metrics")).await, StatusCode::OK);

    let secret = tokens::create(&pool, "ci", Role::Reader, &[])
        .await
        .expect("token");
    for path in [
        "/api/documents",
        "/api/collections",
        "/api/info",
        "/metrics",
    ] {
        assert_eq!(
            status_of(get(path)).await,
            StatusCode::UNAUTHORIZED,
            "{path}"
        );
        assert_eq!(
            status_of(get(path).bearer_auth("dkt_0000")).await,
            StatusCode::UNAUTHORIZED,
            "{path}"
        );
    }
    assert_eq!(
        status_of(get("/api/documents").bearer_auth(&secret)).await,
        StatusCode::OK
    );
    // Metrics are an admin's.
    assert_eq!(
        status_of(get("/metrics").bearer_auth(&secret)).await,
        StatusCode::FORBIDDEN
    );
    // The page and health stay open: the page asks for the token itself.
    assert_eq!(status_of(get("/")).await, StatusCode::OK);
    assert_eq!(status_of(get("/healthz")).await, StatusCode::OK);
}

#[sqlx::test]
async fn the_configured_api_token_is_an_admin(pool: PgPool) {
    let app = TestApp::builder(pool)
        .token("operator-secret")
        .spawn()
        .await;
    let jobs = || app.client.get(app.url("/api/jobs"));
    assert_eq!(status_of(jobs()).await, StatusCode::UNAUTHORIZED);
    assert_eq!(
        status_of(jobs().bearer_auth("operator-secret")).await,
        StatusCode::OK
    );
    let created = app
        .client
        .post(app.url("/api/collections"))
        .bearer_auth("operator-secret")
        .json(&serde_json::json!({ "name": "team" }))
        .send()
        .await
        .expect("create");
    assert_eq!(created.status(), StatusCode::CREATED);
}

#[sqlx::test]
async fn roles_decide_what_a_token_may_do_in_its_collections(pool: PgPool) {
    let t = TwoCollections::new(pool.clone()).await;
    let app = &t.app;
    let writer = tokens::create(&pool, "writer-a", Role::Writer, &["a".to_owned()])
        .await
        .expect("writer");

    // A reader uploads nothing, deletes nothing, reprocesses nothing: 403, nothing changes.
    let before = document_count(&pool).await;
    let (status, body) = upload_status(app, Some(&t.reader), "a", "r.txt", "reader text").await;
    assert_eq!(status, StatusCode::FORBIDDEN, "{body}");
    let delete = |secret: &str, id: i64| {
        app.client
            .delete(app.url(&format!("/api/documents/{id}")))
            .bearer_auth(secret.to_owned())
    };
    assert_eq!(
        status_of(delete(&t.reader, t.a_doc)).await,
        StatusCode::FORBIDDEN
    );
    assert_eq!(document_count(&pool).await, before);

    // A writer of A uploads into A, but into B (or a collection that does not exist) gets 403
    // and nothing is stored; B's documents are 404 to it.
    upload_into(app, Some(&writer), "a", "w.txt", "writer text").await;
    let stored = document_count(&pool).await;
    for collection in ["b", "nosuch"] {
        let (status, body) = upload_status(app, Some(&writer), collection, "w2.txt", "x").await;
        assert_eq!(status, StatusCode::FORBIDDEN, "{collection}: {body}");
    }
    assert_eq!(document_count(&pool).await, stored, "nothing stored");
    assert_eq!(
        status_of(delete(&writer, t.b_doc)).await,
        StatusCode::NOT_FOUND
    );
    assert_eq!(
        status_of(delete(&writer, t.a_doc)).await,
        StatusCode::NO_CONTENT
    );

    // Admin work is an admin's.
    for (method, path) in [
        (reqwest::Method::GET, "/api/jobs"),
        (reqwest::Method::GET, "/api/schedules"),
        (reqwest::Method::GET, "/api/models"),
        (reqwest::Method::GET, "/api/webhooks"),
        (reqwest::Method::POST, "/api/webhooks"),
        (reqwest::Method::POST, "/api/collections"),
        (reqwest::Method::DELETE, "/api/collections/a"),
    ] {
        let request = app
            .client
            .request(method.clone(), app.url(path))
            .bearer_auth(&writer)
            .json(&serde_json::json!({ "name": "c" }));
        assert_eq!(
            status_of(request).await,
            StatusCode::FORBIDDEN,
            "{method} {path}"
        );
    }
    // The admin may upload anywhere, and learns when a collection does not exist.
    let (status, body) = upload_status(app, Some(&t.admin), "nosuch", "x.txt", "x").await;
    assert_eq!(status, StatusCode::NOT_FOUND, "{body}");
    assert_eq!(body["error"]["code"], "collection_not_found");
}

#[sqlx::test]
async fn a_revoked_token_is_refused_at_once_by_another_process(pool: PgPool) {
    let first = TestApp::builder(pool.clone()).spawn().await;
    let second = TestApp::builder(pool.clone()).spawn().await;
    let secret = tokens::create(&pool, "laptop", Role::Writer, &[])
        .await
        .expect("token");
    let list = |app: &TestApp| {
        app.client
            .get(app.url("/api/documents"))
            .bearer_auth(&secret)
    };
    assert_eq!(status_of(list(&first)).await, StatusCode::OK);
    assert_eq!(status_of(list(&second)).await, StatusCode::OK);
    assert!(tokens::revoke(&pool, "laptop").await.expect("revoke"));
    assert_eq!(status_of(list(&second)).await, StatusCode::UNAUTHORIZED);
    assert_eq!(status_of(list(&first)).await, StatusCode::UNAUTHORIZED);
}

#[sqlx::test]
async fn the_same_file_may_live_in_two_collections_and_is_one_document_in_each(pool: PgPool) {
    let t = TwoCollections::new(pool.clone()).await;
    let text = "The same policy text, kept by two teams.";
    let in_a = upload_into(&t.app, Some(&t.admin), "a", "policy.txt", text).await;
    let in_b = upload_into(&t.app, Some(&t.admin), "b", "policy.txt", text).await;
    assert_ne!(in_a, in_b);
    let (status, body) = upload_status(&t.app, Some(&t.admin), "a", "again.txt", text).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["results"][0]["duplicate"], true);
    assert_eq!(body["results"][0]["document"]["id"], in_a);
    assert_eq!(body["results"][0]["document"]["collection"], "a");
}

#[sqlx::test]
async fn deleting_a_collection_hides_it_at_once_and_its_documents_go_through_a_job(pool: PgPool) {
    let t = TwoCollections::new(pool.clone()).await;
    let response = t
        .app
        .client
        .delete(t.app.url("/api/collections/b"))
        .bearer_auth(&t.admin)
        .send()
        .await
        .expect("delete");
    assert_eq!(response.status(), StatusCode::ACCEPTED);
    // Before the job has run: nothing of B is visible, even to the admin.
    let (_, body) = t.get(&t.admin, "/api/collections").await;
    assert!(!body.contains("\"b\""), "{body}");
    let (_, body) = t
        .get(&t.admin, "/api/search?q=hanbit+merger&mode=text")
        .await;
    assert!(!body.contains("hanbit"), "{body}");
    let (status, _) = t
        .get(&t.admin, &format!("/api/documents/{}", t.b_doc))
        .await;
    assert_eq!(status, StatusCode::NOT_FOUND);

    t.app.worker().await.run_until_idle().await;
    let left: i64 = sqlx::query_scalar("select count(*) from documents where id = $1")
        .bind(t.b_doc)
        .fetch_one(&pool)
        .await
        .expect("count");
    assert_eq!(left, 0);
    let rows: i64 = sqlx::query_scalar("select count(*) from collections where name = 'b'")
        .fetch_one(&pool)
        .await
        .expect("count");
    assert_eq!(rows, 0, "the collection's row goes once its documents have");
    // The name is free again.
    let again = t
        .app
        .client
        .post(t.app.url("/api/collections"))
        .bearer_auth(&t.admin)
        .json(&serde_json::json!({ "name": "b" }))
        .send()
        .await
        .expect("create");
    assert_eq!(again.status(), StatusCode::CREATED);
    let kept = t
        .app
        .client
        .delete(t.app.url("/api/collections/default"))
        .bearer_auth(&t.admin)
        .send()
        .await
        .expect("delete default");
    assert_eq!(kept.status(), StatusCode::CONFLICT);
}

#[sqlx::test]
async fn the_cli_prints_the_secret_once_stores_only_its_hash_and_never_logs_it(pool: PgPool) {
    let url = crate::support::database_url(&pool).await;
    let docket = env!("CARGO_BIN_EXE_docket");
    let run = |args: &[&str]| {
        std::process::Command::new(docket)
            .args(args)
            .env("DATABASE_URL", &url)
            .env("RUST_LOG", "trace")
            .output()
            .expect("run docket")
    };
    let created = run(&["collections", "create", "team"]);
    assert!(created.status.success(), "{created:?}");
    let output = run(&[
        "tokens",
        "create",
        "--name",
        "bot",
        "--role",
        "writer",
        "--collection",
        "team",
    ]);
    assert!(output.status.success(), "{output:?}");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let secret = stdout
        .lines()
        .last()
        .expect("a last line")
        .trim()
        .to_owned();
    assert!(secret.starts_with("dkt_") && secret.len() > 60, "{stdout}");
    assert_eq!(stdout.matches(&secret).count(), 1, "printed once: {stdout}");
    assert!(!String::from_utf8_lossy(&output.stderr).contains(&secret));

    let stored: Vec<u8> = sqlx::query_scalar("select secret_sha256 from tokens where name = 'bot'")
        .fetch_one(&pool)
        .await
        .expect("stored");
    assert_eq!(stored, Sha256::digest(secret.as_bytes()).to_vec());
    let dump: String = sqlx::query_scalar("select string_agg(t::text, ' ') from tokens t")
        .fetch_one(&pool)
        .await
        .expect("dump");
    assert!(
        !dump.contains(&secret[4..]),
        "the secret is not in the table"
    );

    let listed = run(&["tokens", "list"]);
    let listed_out = String::from_utf8_lossy(&listed.stdout);
    assert!(
        listed_out.contains("bot") && listed_out.contains("team"),
        "{listed_out}"
    );
    assert!(!listed_out.contains(&secret));

    // Revocation from the command line holds at once for a running server.
    let app = TestApp::builder(pool.clone()).spawn().await;
    let list = || {
        app.client
            .get(app.url("/api/documents"))
            .bearer_auth(&secret)
    };
    assert_eq!(status_of(list()).await, StatusCode::OK);
    let revoked = run(&["tokens", "revoke", "bot"]);
    assert!(revoked.status.success(), "{revoked:?}");
    assert_eq!(status_of(list()).await, StatusCode::UNAUTHORIZED);
}
