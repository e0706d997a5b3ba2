//! Webhooks end to end: a real receiver on loopback, docket's own queue and worker, real
//! documents. Signed deliveries retried with the same `webhook-id` until they land, nothing
//! lost while the receiver is down or when a worker dies mid-delivery, `upload.settled` once per
//! upload request, dead deliveries retried by a person, and no request forgery: refused targets
//! at registration and at delivery, DNS rebinding included.

use std::collections::HashMap;
use std::net::IpAddr;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use docket::queue::Queue;
use docket::webhooks::{Lookup, Targets};
use reqwest::StatusCode;
use serde_json::{Value, json};
use sqlx::PgPool;

use crate::support::receiver::{Answer, Receiver};
use crate::support::{TestApp, fixture, wait_until};

/// Registers a webhook for `events` at `url`; answers the status and body.
async fn register(app: &TestApp, url: &str, events: &[&str]) -> (StatusCode, Value) {
    let response = app
        .client
        .post(app.url("/api/webhooks"))
        .json(&json!({ "url": url, "events": events }))
        .send()
        .await
        .expect("POST /api/webhooks");
    let status = response.status();
    (status, response.json().await.expect("JSON"))
}

/// Registers a webhook that must be accepted; answers its id and secret.
async fn registered(app: &TestApp, url: &str, events: &[&str]) -> (i64, String) {
    let (status, body) = register(app, url, events).await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    let secret = body["secret"].as_str().expect("a secret").to_owned();
    assert!(secret.starts_with("whsec_"), "{body}");
    (body["id"].as_i64().expect("an id"), secret)
}

async fn deliveries(app: &TestApp, webhook: i64) -> Vec<Value> {
    let body: Value = app
        .get_json(&format!("/api/webhooks/{webhook}/deliveries"))
        .await;
    body["deliveries"].as_array().expect("deliveries").clone()
}

#[sqlx::test]
async fn a_receiver_that_fails_twice_gets_the_event_three_times_with_one_id_and_valid_signatures(
    pool: PgPool,
) {
    let app = TestApp::builder(pool).spawn().await;
    let receiver = Receiver::start(&[Answer::Status(500), Answer::Status(503)]).await;
    let (webhook, secret) = registered(&app, &receiver.url(), &["document.ready"]).await;
    let id = app
        .upload_one("note.txt", b"webhooks tell other systems".to_vec())
        .await;
    app.worker().await.run_until_idle().await;

    let received = receiver.received();
    assert_eq!(received.len(), 3, "two failures, then the delivery");
    assert!(
        received.iter().all(|r| r.id == received[0].id),
        "one webhook-id"
    );
    for attempt in &received {
        assert!(attempt.signed_by(&secret), "attempt {attempt:?} is signed");
        assert!(!attempt.signed_by("whsec_AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"));
        let body = attempt.json();
        assert_eq!(body["type"], "document.ready");
        assert_eq!(body["data"]["id"], id);
        assert_eq!(body["data"]["status"], "ready");
        assert_eq!(body["data"]["filename"], "note.txt");
        assert!(body["timestamp"].is_string(), "{body}");
    }
    let listed = deliveries(&app, webhook).await;
    assert_eq!(listed.len(), 1, "{listed:?}");
    assert_eq!(listed[0]["id"], received[0].id.as_str());
    assert_eq!(listed[0]["status"], "delivered");
    assert_eq!(listed[0]["attempts"], 3);
    assert_eq!(listed[0]["last_error"], Value::Null);
}

#[sqlx::test]
async fn nothing_is_lost_while_the_receiver_is_down(pool: PgPool) {
    let app = TestApp::builder(pool.clone()).spawn().await;
    let mut receiver = Receiver::start(&[]).await;
    let (webhook, secret) = registered(&app, &receiver.url(), &["document.ready"]).await;
    receiver.stop();
    let worker = app.worker().await;
    for i in 0..3 {
        app.upload_one(
            &format!("down-{i}.txt"),
            format!("written while down {i}").into_bytes(),
        )
        .await;
    }
    for _ in 0..3 {
        worker.run_due().await;
        crate::support::make_due(&pool).await;
    }
    assert!(receiver.received().is_empty());
    let listed = deliveries(&app, webhook).await;
    assert_eq!(listed.len(), 3);
    for delivery in &listed {
        assert_eq!(delivery["status"], "pending", "{delivery}");
        assert!(
            delivery["attempts"].as_i64().expect("attempts") >= 1,
            "{delivery}"
        );
        assert!(delivery["last_error"].is_string(), "{delivery}");
    }

    receiver.restart().await;
    worker.run_until_idle().await;
    let received = receiver.received();
    let mut names: Vec<String> = received
        .iter()
        .map(|r| {
            r.json()["data"]["filename"]
                .as_str()
                .expect("name")
                .to_owned()
        })
        .collect();
    names.sort();
    assert_eq!(names, ["down-0.txt", "down-1.txt", "down-2.txt"]);
    assert!(received.iter().all(|r| r.signed_by(&secret)));
    assert!(
        deliveries(&app, webhook)
            .await
            .iter()
            .all(|d| d["status"] == "delivered")
    );
}

#[sqlx::test]
async fn upload_settled_arrives_once_per_upload_request_listing_all_its_documents(pool: PgPool) {
    let app = TestApp::builder(pool).spawn().await;
    let receiver = Receiver::start(&[]).await;
    registered(
        &app,
        &receiver.url(),
        &["upload.settled", "document.failed"],
    )
    .await;
    let (status, first) = app
        .upload(&[
            ("a.txt", b"the first of three".to_vec()),
            ("b.txt", b"the second of three".to_vec()),
            ("broken.pdf", fixture("malformed/invalid.pdf")),
        ])
        .await;
    assert_eq!(status, StatusCode::CREATED, "{first}");
    let (status, second) = app.upload(&[("c.txt", b"another request".to_vec())]).await;
    assert_eq!(status, StatusCode::CREATED, "{second}");
    let worker = app.worker().await;
    worker.run_until_idle().await;

    let settled: Vec<Value> = receiver
        .received()
        .iter()
        .map(|r| r.json())
        .filter(|b| b["type"] == "upload.settled")
        .collect();
    assert_eq!(settled.len(), 2, "one per request: {settled:?}");
    let of = |answer: &Value| -> Vec<i64> {
        answer["results"]
            .as_array()
            .expect("results")
            .iter()
            .map(|r| r["document"]["id"].as_i64().expect("stored"))
            .collect()
    };
    for (answer, expected) in [(&first, 3), (&second, 1)] {
        let ids = of(answer);
        assert_eq!(ids.len(), expected);
        let event = settled
            .iter()
            .find(|e| e["data"]["documents"][0]["id"] == ids[0])
            .unwrap_or_else(|| panic!("no upload.settled for {ids:?}: {settled:?}"));
        let listed = event["data"]["documents"].as_array().expect("documents");
        let listed_ids: Vec<i64> = listed
            .iter()
            .map(|d| d["id"].as_i64().expect("id"))
            .collect();
        assert_eq!(listed_ids, ids);
        assert_eq!(event["data"]["upload_id"], listed[0]["upload_id"]);
        for document in listed {
            let status = document["status"].as_str().expect("status");
            let expected = if document["filename"] == "broken.pdf" {
                "failed"
            } else {
                "ready"
            };
            assert_eq!(status, expected, "{document}");
        }
    }
    let failed: Vec<Value> = receiver
        .received()
        .iter()
        .map(|r| r.json())
        .filter(|b| b["type"] == "document.failed")
        .collect();
    assert_eq!(failed.len(), 1, "{failed:?}");
    assert_eq!(failed[0]["data"]["filename"], "broken.pdf");
    assert!(failed[0]["data"]["error"]["code"].is_string());

    // Reprocessing a document of a settled upload announces nothing about the upload again.
    let again = of(&first)[0];
    let response = app
        .client
        .post(app.url(&format!("/api/documents/{again}/reprocess")))
        .send()
        .await
        .expect("reprocess");
    assert!(response.status().is_success());
    worker.run_until_idle().await;
    let settled_after = receiver
        .received()
        .iter()
        .filter(|r| r.json()["type"] == "upload.settled")
        .count();
    assert_eq!(settled_after, 2);
}

#[sqlx::test]
async fn a_dead_delivery_keeps_its_last_error_and_a_retry_delivers_it_with_the_same_id(
    pool: PgPool,
) {
    let app = TestApp::builder(pool.clone()).spawn().await;
    let receiver = Receiver::start(&[Answer::Status(500), Answer::Status(500)]).await;
    let (webhook, _) = registered(&app, &receiver.url(), &["document.deleted"]).await;
    let id = app.upload_one("gone.txt", b"soon deleted".to_vec()).await;
    let worker = app.worker().await;
    worker.run_until_idle().await;
    let response = app
        .client
        .delete(app.url(&format!("/api/documents/{id}")))
        .send()
        .await
        .expect("delete");
    assert_eq!(response.status(), StatusCode::NO_CONTENT);
    // The delivery's first attempts fail; then it stands at its last attempt, as if it had
    // failed for a day (the write path cannot fast-forward 26 retries).
    worker.run_due().await;
    sqlx::query("update jobs set attempts = max_attempts - 1, run_at = now() where kind = 'webhook.deliver' and status = 'ready'")
        .execute(&pool)
        .await
        .expect("last attempt");
    worker.run_until_idle().await;
    let listed = deliveries(&app, webhook).await;
    assert_eq!(listed.len(), 1);
    assert_eq!(listed[0]["status"], "dead", "{listed:?}");
    assert_eq!(
        listed[0]["last_error"],
        "the receiver answered 500 Internal Server Error"
    );
    let delivery = listed[0]["id"].as_str().expect("id").to_owned();

    let retry = app.url(&format!(
        "/api/webhooks/{webhook}/deliveries/{delivery}/retry"
    ));
    let response = app.client.post(&retry).send().await.expect("retry");
    assert_eq!(response.status(), StatusCode::OK);
    worker.run_until_idle().await;
    let received = receiver.received();
    assert_eq!(received.len(), 3);
    assert!(received.iter().all(|r| r.id == delivery));
    assert_eq!(received[2].json()["type"], "document.deleted");
    assert_eq!(received[2].json()["data"]["id"], id);
    assert_eq!(deliveries(&app, webhook).await[0]["status"], "delivered");

    let response = app.client.post(&retry).send().await.expect("retry again");
    assert_eq!(response.status(), StatusCode::CONFLICT);
    let body: Value = response.json().await.expect("JSON");
    assert_eq!(body["error"]["code"], "delivery_not_dead");
}

#[sqlx::test]
async fn a_worker_killed_mid_delivery_loses_nothing(pool: PgPool) {
    let app = TestApp::builder(pool.clone()).spawn().await;
    let receiver = Receiver::start(&[Answer::Hang]).await;
    let (webhook, _) = registered(&app, &receiver.url(), &["document.ready"]).await;
    app.upload_one("crash.txt", b"a worker dies while sending".to_vec())
        .await;
    let doomed = app.worker().await.into_worker();
    let stop = tokio_util::sync::CancellationToken::new();
    let running = tokio::spawn(doomed.run(stop.clone().cancelled_owned()));
    wait_until(
        Duration::from_secs(60),
        "the receiver gets the first attempt",
        || async { !receiver.received().is_empty() },
    )
    .await;
    // Killed: no graceful shutdown, no completion, no heartbeat.
    running.abort();
    let _ = running.await;
    let state: (String,) = sqlx::query_as("select status from jobs where kind = 'webhook.deliver'")
        .fetch_one(&pool)
        .await
        .expect("job");
    assert_eq!(state.0, "running", "the dead worker's lease still stands");

    let later = chrono::Utc::now() + chrono::Duration::hours(1);
    let rescued = Queue::new(pool.clone(), Duration::from_secs(30))
        .at(later)
        .rescue_expired(10)
        .await
        .expect("rescue");
    assert_eq!(rescued.requeued, 1);
    app.worker().await.run_until_idle().await;

    let received = receiver.received();
    assert_eq!(
        received.len(),
        2,
        "the attempt that hung, then the delivery"
    );
    assert_eq!(received[0].id, received[1].id);
    let listed = deliveries(&app, webhook).await;
    assert_eq!(listed[0]["status"], "delivered", "{listed:?}");
}

/// A resolver answering from a table the test changes.
#[derive(Default)]
struct Table(Mutex<HashMap<String, Vec<Vec<IpAddr>>>>);

impl Table {
    /// `host` answers `answers` in turn, the last one from then on.
    fn set(&self, host: &str, answers: &[&[&str]]) {
        let answers = answers
            .iter()
            .map(|a| a.iter().map(|ip| ip.parse().expect("an address")).collect())
            .collect();
        self.0
            .lock()
            .expect("lock")
            .insert(host.to_owned(), answers);
    }
}

impl Lookup for Table {
    fn lookup(
        &self,
        host: &str,
    ) -> Pin<Box<dyn Future<Output = std::io::Result<Vec<IpAddr>>> + Send + 'static>> {
        let mut table = self.0.lock().expect("lock");
        let answer = match table.get_mut(host) {
            Some(answers) if answers.len() > 1 => Ok(answers.remove(0)),
            Some(answers) => Ok(answers[0].clone()),
            None => Err(std::io::Error::other(format!("{host}: unknown host"))),
        };
        Box::pin(async move { answer })
    }
}

#[sqlx::test]
async fn private_link_local_and_loopback_targets_are_refused_at_registration(pool: PgPool) {
    let table = Arc::new(Table::default());
    table.set("loopback.test", &[&["127.0.0.1"]]);
    table.set("sneaky.test", &[&["93.184.215.14", "10.1.2.3"]]);
    let app = TestApp::builder(pool.clone())
        .webhook_targets(Targets::with_lookup(false, table.clone()))
        .spawn()
        .await;
    for url in [
        "http://169.254.169.254/latest/meta-data/",
        "http://10.0.0.1/",
        "http://[::1]/",
        "http://[::ffff:192.168.0.1]/",
        "http://0.0.0.0:8080/",
        "http://loopback.test/hook",
        "http://sneaky.test/hook",
    ] {
        let (status, body) = register(&app, url, &["document.ready"]).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{url}: {body}");
        assert_eq!(
            body["error"]["code"], "webhook_target_refused",
            "{url}: {body}"
        );
    }
    let system = TestApp::builder(pool.clone())
        .webhook_targets(Targets::new(false))
        .spawn()
        .await;
    let (status, body) = register(&system, "http://localhost:9/", &["document.ready"]).await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
    assert_eq!(body["error"]["code"], "webhook_target_refused", "{body}");
    for (url, events) in [
        ("ftp://example.com/", &["document.ready"][..]),
        ("not a url", &["document.ready"][..]),
        ("http://93.184.215.14/", &["document.exploded"][..]),
        ("http://93.184.215.14/", &[][..]),
    ] {
        let (status, body) = register(&system, url, events).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{url}: {body}");
        assert_eq!(body["error"]["code"], "invalid_webhook", "{url}: {body}");
    }
    let listed: Value = system.get_json("/api/webhooks").await;
    assert_eq!(listed["webhooks"], json!([]), "nothing was registered");
}

#[sqlx::test]
async fn a_host_that_later_resolves_to_a_private_address_is_not_connected_to(pool: PgPool) {
    let receiver = Receiver::start(&[]).await;
    let port = receiver.addr.port();
    let table = Arc::new(Table::default());
    table.set("hooks.test", &[&["127.0.0.1"]]);
    let app = TestApp::builder(pool.clone())
        .webhook_targets(Targets::with_lookup(true, table.clone()))
        .spawn()
        .await;
    let (webhook, _) = registered(
        &app,
        &format!("http://hooks.test:{port}/hook"),
        &["document.ready"],
    )
    .await;
    let worker = app.worker().await;
    app.upload_one("first.txt", b"delivered through the name".to_vec())
        .await;
    worker.run_until_idle().await;
    assert_eq!(
        receiver.received().len(),
        1,
        "the name works while it is loopback"
    );

    // Rebinding: the check before sending sees loopback, the connection's own lookup a private
    // address, and the name stays private from then on.
    table.set(
        "hooks.test",
        &[&["127.0.0.1"], &["10.0.0.1"], &["10.0.0.1"]],
    );
    app.upload_one("second.txt", b"never sent to a private address".to_vec())
        .await;
    // A new worker process: the first one's pooled connection still goes to the address that
    // was checked when it was opened, which is safe, but would not look the name up again.
    app.worker().await.run_until_idle().await;
    assert_eq!(receiver.received().len(), 1, "nothing more reached anyone");
    let listed = deliveries(&app, webhook).await;
    let second = listed
        .iter()
        .find(|d| d["status"] != "delivered")
        .expect("the second delivery");
    assert_eq!(second["status"], "dead", "{second}");
    assert_eq!(second["attempts"], 2, "{second}");
    let error = second["last_error"].as_str().expect("an error");
    assert!(
        error.contains("hooks.test") && error.contains("private"),
        "{error}"
    );
}

#[sqlx::test]
async fn webhooks_are_listed_without_secrets_and_deleted_with_their_deliveries(pool: PgPool) {
    let app = TestApp::builder(pool.clone()).spawn().await;
    let receiver = Receiver::start(&[]).await;
    let (webhook, secret) =
        registered(&app, &receiver.url(), &["document.ready", "document.ready"]).await;
    let listed: Value = app.get_json("/api/webhooks").await;
    assert_eq!(listed["webhooks"][0]["events"], json!(["document.ready"]));
    assert!(!listed.to_string().contains(&secret), "{listed}");
    app.upload_one("x.txt", b"one delivery".to_vec()).await;
    app.worker().await.run_until_idle().await;
    assert_eq!(deliveries(&app, webhook).await.len(), 1);
    let response = app
        .client
        .delete(app.url(&format!("/api/webhooks/{webhook}")))
        .send()
        .await
        .expect("delete");
    assert_eq!(response.status(), StatusCode::NO_CONTENT);
    let gone: (i64,) = sqlx::query_as("select count(*) from webhook_deliveries")
        .fetch_one(&pool)
        .await
        .expect("count");
    assert_eq!(gone.0, 0);
    let response = app
        .client
        .get(app.url(&format!("/api/webhooks/{webhook}/deliveries")))
        .send()
        .await
        .expect("deliveries");
    assert_eq!(response.status(), StatusCode::NOT_FOUND);
}

#[sqlx::test]
async fn a_webhook_for_one_collection_hears_only_that_collections_documents(pool: PgPool) {
    let app = TestApp::builder(pool.clone()).spawn().await;
    docket::collections::create(&pool, "team")
        .await
        .expect("collection");
    let everything = Receiver::start(&[]).await;
    let team_only = Receiver::start(&[]).await;
    registered(
        &app,
        &everything.url(),
        &["document.ready", "upload.settled"],
    )
    .await;
    let response = app
        .client
        .post(app.url("/api/webhooks"))
        .json(&json!({ "url": team_only.url(), "events": ["document.ready", "upload.settled"], "collection": "team" }))
        .send()
        .await
        .expect("register");
    assert_eq!(response.status(), StatusCode::CREATED);
    let unknown = app
        .client
        .post(app.url("/api/webhooks"))
        .json(&json!({ "url": team_only.url(), "events": ["document.ready"], "collection": "nosuch" }))
        .send()
        .await
        .expect("register");
    assert_eq!(unknown.status(), StatusCode::NOT_FOUND);

    crate::access::upload_into(&app, None, "default", "shared.txt", "For everyone.").await;
    crate::access::upload_into(&app, None, "team", "team.txt", "For the team.").await;
    app.worker().await.run_until_idle().await;

    let names = |receiver: &Receiver| -> Vec<(String, String)> {
        let mut seen: Vec<(String, String)> = receiver
            .received()
            .iter()
            .map(|r| {
                let body = r.json();
                let name = match body["data"]["filename"].as_str() {
                    Some(name) => name.to_owned(),
                    None => body["data"]["documents"][0]["filename"]
                        .as_str()
                        .unwrap_or("?")
                        .to_owned(),
                };
                (body["type"].as_str().unwrap_or("?").to_owned(), name)
            })
            .collect();
        seen.sort();
        seen
    };
    let pair = |t: &str, n: &str| (t.to_owned(), n.to_owned());
    assert_eq!(
        names(&team_only),
        [
            pair("document.ready", "team.txt"),
            pair("upload.settled", "team.txt")
        ]
    );
    assert_eq!(
        names(&everything),
        [
            pair("document.ready", "shared.txt"),
            pair("document.ready", "team.txt"),
            pair("upload.settled", "shared.txt"),
            pair("upload.settled", "team.txt"),
        ]
    );
}
