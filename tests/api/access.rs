//! Access that never leaks: a reader of collection A, while collection B holds the best match
//! for every query, sees nothing of B on any read path: list (and its total), detail, file,
//! chunks (the text view and search), jobs, events, search in every mode, grouped and flat, and the collections' counts.
//! B's ids answer 404 exactly as missing ids do.

use std::time::Duration;

use docket::access::{Role, tokens};
use futures::StreamExt;
use reqwest::StatusCode;
use serde_json::Value;
use sqlx::PgPool;

use crate::support::TestApp;

/// What the best match of every query holds; only B's document has all of it.
const SECRET_TEXT: &str = "Quarterly ledger reconciliation for the Hanbit merger: \
     the escrow account closes on 14 March.";

/// Two collections with one document each (B's matches the queries best), both embedded, and
/// a reader token of A. The app runs in single-user mode until the token is made.
pub(crate) struct TwoCollections {
    pub app: TestApp,
    pub a_doc: i64,
    pub b_doc: i64,
    /// The secret of a reader of A.
    pub reader: String,
    /// The secret of an admin.
    pub admin: String,
}

impl TwoCollections {
    pub async fn new(pool: PgPool) -> Self {
        let app = TestApp::builder(pool).spawn().await;
        for name in ["a", "b"] {
            let response = app
                .client
                .post(app.url("/api/collections"))
                .json(&serde_json::json!({ "name": name }))
                .send()
                .await
                .expect("create collection");
            assert_eq!(response.status(), StatusCode::CREATED);
        }
        let a_doc = upload_into(
            &app,
            None,
            "a",
            "alpha-notes.txt",
            "Meeting notes about the ledger: the team reviewed the garden plan.",
        )
        .await;
        let b_doc = upload_into(&app, None, "b", "hanbit-merger.txt", SECRET_TEXT).await;
        app.worker().await.run_until_idle().await;
        let reader = tokens::create(&app.pool, "reader-a", Role::Reader, &["a".to_owned()])
            .await
            .expect("reader token");
        let admin = tokens::create(&app.pool, "admin", Role::Admin, &[])
            .await
            .expect("admin token");
        Self {
            app,
            a_doc,
            b_doc,
            reader,
            admin,
        }
    }

    /// GET `path` with `secret`: the status and the body as text.
    pub async fn get(&self, secret: &str, path: &str) -> (StatusCode, String) {
        let response = self
            .app
            .client
            .get(self.app.url(path))
            .bearer_auth(secret)
            .send()
            .await
            .expect("GET");
        let status = response.status();
        (status, response.text().await.expect("a body"))
    }
}

/// Uploads `text` as `name` into `collection` with `secret` (none: no token); the document id.
pub(crate) async fn upload_into(
    app: &TestApp,
    secret: Option<&str>,
    collection: &str,
    name: &str,
    text: &str,
) -> i64 {
    let (status, body) = upload_status(app, secret, collection, name, text).await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    body["results"][0]["document"]["id"]
        .as_i64()
        .unwrap_or_else(|| panic!("no document id in {body}"))
}

/// The status and body of an upload of `text` into `collection`.
pub(crate) async fn upload_status(
    app: &TestApp,
    secret: Option<&str>,
    collection: &str,
    name: &str,
    text: &str,
) -> (StatusCode, Value) {
    app.upload_to(
        &format!("/api/documents?collection={collection}"),
        secret,
        &[(name, text.as_bytes().to_vec())],
    )
    .await
}

/// Whether `body` mentions B's document in any way a client could read.
fn mentions_b(body: &str, b_doc: i64) -> bool {
    body.contains("hanbit")
        || body.contains("Hanbit")
        || body.contains("escrow")
        || body.contains(&format!("\"document_id\":{b_doc}"))
        || body.contains(&format!("\"id\":{b_doc},"))
}

#[sqlx::test]
async fn a_reader_of_one_collection_sees_nothing_of_another_on_any_read_path(pool: PgPool) {
    let t = TwoCollections::new(pool).await;
    let (reader, b) = (t.reader.as_str(), t.b_doc);

    // The admin sees B's document as the best match: the queries below do find it.
    let (status, body) = t
        .get(&t.admin, "/api/search?q=hanbit+merger+escrow&mode=text")
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert!(mentions_b(&body, b), "the admin finds B's document: {body}");

    let (status, body) = t.get(reader, "/api/documents").await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert!(
        body.contains("alpha-notes.txt") && !mentions_b(&body, b),
        "{body}"
    );

    for path in [
        format!("/api/documents/{b}"),
        format!("/api/documents/{b}/file"),
        format!("/api/documents/{b}/text"),
        format!("/api/documents/{b}/text?at=0"),
        format!("/api/documents/{b}/reprocess"),
    ] {
        let (status, body) = if path.ends_with("reprocess") {
            let response = t
                .app
                .client
                .post(t.app.url(&path))
                .bearer_auth(reader)
                .send()
                .await
                .expect("POST");
            (response.status(), response.text().await.expect("body"))
        } else {
            t.get(reader, &path).await
        };
        let (missing_status, missing) = t.get(reader, "/api/documents/999999").await;
        assert_eq!(status, StatusCode::NOT_FOUND, "{path}: {body}");
        assert_eq!(missing_status, StatusCode::NOT_FOUND);
        // Exactly as a missing id: the same code, a message naming only the id asked for.
        assert_eq!(
            body.replace(&b.to_string(), "ID"),
            missing.replace("999999", "ID"),
            "{path}"
        );
    }

    for mode in ["text", "vector", "hybrid"] {
        for group in ["", "&group=document"] {
            for query in ["hanbit+merger+escrow", "ledger+reconciliation", "ledger"] {
                let path = format!("/api/search?q={query}&mode={mode}{group}");
                let (status, body) = t.get(reader, &path).await;
                assert_eq!(status, StatusCode::OK, "{path}: {body}");
                assert!(!mentions_b(&body, b), "{path}: {body}");
            }
            let path = format!("/api/search?q=ledger&mode={mode}{group}&document={b}");
            let (status, body) = t.get(reader, &path).await;
            assert_eq!(status, StatusCode::OK, "{path}: {body}");
            assert!(!mentions_b(&body, b), "{path}: {body}");
        }
    }
    // The reader's own document is found: the filter keeps its collection, not nothing.
    let (_, body) = t.get(reader, "/api/search?q=ledger&mode=text").await;
    assert!(body.contains("alpha-notes.txt"), "{body}");

    for path in [
        "/api/search?q=ledger&collection=b",
        "/api/documents?collection=b",
        "/api/search?q=ledger&collection=a&collection=b",
    ] {
        let (status, body) = t.get(reader, path).await;
        let (_, unknown) = t
            .get(reader, &path.replace("collection=b", "collection=nosuch"))
            .await;
        assert_eq!(status, StatusCode::NOT_FOUND, "{path}: {body}");
        let (body, unknown): (Value, Value) = (
            serde_json::from_str(&body).expect("JSON"),
            serde_json::from_str(&unknown).expect("JSON"),
        );
        assert_eq!(body["error"]["code"], unknown["error"]["code"], "{path}");
        assert_eq!(
            body["error"]["message"]
                .as_str()
                .map(|m| m.replace("\"b\"", "NAME")),
            unknown["error"]["message"]
                .as_str()
                .map(|m| m.replace("\"nosuch\"", "NAME")),
            "{path}"
        );
    }

    let (status, body) = t.get(reader, "/api/collections").await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let listed: Value = serde_json::from_str(&body).expect("JSON");
    let names: Vec<&str> = listed["collections"]
        .as_array()
        .expect("collections")
        .iter()
        .filter_map(|c| c["name"].as_str())
        .collect();
    assert_eq!(names, ["a"], "{body}");
    assert_eq!(listed["collections"][0]["documents"], 1, "{body}");

    // Jobs are an admin's view; a reader is refused, whichever job it names.
    for path in ["/api/jobs", "/api/jobs/1", "/api/queue/stats"] {
        let (status, body) = t.get(reader, path).await;
        assert_eq!(status, StatusCode::FORBIDDEN, "{path}: {body}");
        assert!(!mentions_b(&body, b), "{path}: {body}");
    }
    let (status, body) = t.get(&t.admin, "/api/jobs").await;
    assert_eq!(status, StatusCode::OK, "{body}");
}

#[sqlx::test]
async fn the_event_stream_carries_only_the_callers_collections(pool: PgPool) {
    let t = TwoCollections::new(pool).await;
    let response = t
        .app
        .client
        .get(t.app.url(&format!("/api/events?access_token={}", t.reader)))
        .send()
        .await
        .expect("events");
    assert_eq!(response.status(), StatusCode::OK);
    let mut stream = response.bytes_stream();
    let mut seen = String::new();
    // `hello` first: the stream is subscribed before the changes below commit.
    while !seen.contains("event: hello") {
        let chunk = tokio::time::timeout(Duration::from_secs(30), stream.next())
            .await
            .expect("hello in time")
            .expect("stream open")
            .expect("bytes");
        seen.push_str(&String::from_utf8_lossy(&chunk));
    }
    // B changes first, then A: once A's change arrives, B's would have arrived before it.
    for (doc, secret) in [(t.b_doc, &t.admin), (t.a_doc, &t.admin)] {
        let response = t
            .app
            .client
            .post(t.app.url(&format!("/api/documents/{doc}/reprocess")))
            .bearer_auth(secret)
            .send()
            .await
            .expect("reprocess");
        assert_eq!(response.status(), StatusCode::ACCEPTED);
    }
    let changes = |seen: &str| -> Vec<Value> {
        seen.lines()
            .filter_map(|line| line.strip_prefix("data: "))
            .filter_map(|data| serde_json::from_str::<Value>(data).ok())
            .filter(|change| change.get("type").is_some())
            .collect()
    };
    while !changes(&seen).iter().any(|c| c["id"] == t.a_doc) {
        let chunk = tokio::time::timeout(Duration::from_secs(30), stream.next())
            .await
            .expect("A's change in time")
            .expect("stream open")
            .expect("bytes");
        seen.push_str(&String::from_utf8_lossy(&chunk));
    }
    let changes = changes(&seen);
    assert!(
        changes.iter().all(|c| c["type"] == "document"),
        "jobs are an admin's: {seen}"
    );
    assert!(changes.iter().all(|c| c["id"] == t.a_doc), "{seen}");
}
