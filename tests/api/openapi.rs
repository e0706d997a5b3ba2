//! `GET /api/openapi.json` against the real server: the document is public, names every route
//! the router answers (and the router answers every operation it names, no other method on its
//! paths), validates as OpenAPI 3.1 with a real validator, is complete enough to generate a
//! client from (an operationId each, every reference resolved), and agrees with the README's
//! route table. No route can be added beside the declarations: the sources are checked for a
//! `.route(` that is not one of the page's.

use std::collections::{BTreeSet, HashSet};
use std::path::{Path, PathBuf};

use reqwest::{Method, StatusCode};
use serde_json::Value;
use sqlx::PgPool;

use crate::support::TestApp;

const METHODS: [&str; 5] = ["get", "post", "put", "patch", "delete"];

/// The routes outside `/api`, added with a plain `.route(`: the page, its scripts, the probes and
/// `/metrics`. Anything else is an API route and must be declared with `#[utoipa::path]` and
/// `routes!` (src/http/mod.rs), so that it is in the document.
const NOT_API: &[&str] = &[
    "/",
    "/app.js",
    "/names.js",
    "/list.js",
    "/reader.js",
    "/search.js",
    "/collections.js",
    "/webhooks.js",
    "/app.css",
    "/healthz",
    "/readyz",
    "/metrics",
];

/// The document as a client without a token fetches it from a server that requires one.
async fn served(pool: PgPool) -> (TestApp, Value) {
    let app = TestApp::builder(pool).token("s3cret-token").spawn().await;
    let response = reqwest::get(app.url("/api/openapi.json"))
        .await
        .expect("GET /api/openapi.json");
    assert_eq!(response.status(), StatusCode::OK, "the document is public");
    let content_type = response.headers()[reqwest::header::CONTENT_TYPE].clone();
    assert_eq!(content_type, "application/json");
    let doc: Value = response.json().await.expect("JSON");
    (app, doc)
}

/// Every (METHOD, path) the document names.
fn operations(doc: &Value) -> BTreeSet<(String, String)> {
    let paths = doc["paths"].as_object().expect("paths");
    let mut out = BTreeSet::new();
    for (path, item) in paths {
        for method in METHODS {
            if item.get(method).is_some() {
                out.insert((method.to_uppercase(), path.clone()));
            }
        }
    }
    out
}

/// `path` with each `{param}` filled with a value of the right type that names nothing.
fn concrete(path: &str) -> String {
    path.replace("{id}", "987654")
        .replace("{delivery}", "00000000-0000-0000-0000-000000000000")
        .replace("{name}", "no-such-name")
        .replace("{version}", "no:such:1:c1o0")
}

/// Whether an answer came from a route (a handler, its extractors or the guard), not from the
/// `/api` fallback or axum's method check.
async fn routed(response: reqwest::Response) -> Result<(), String> {
    let status = response.status();
    if status == StatusCode::METHOD_NOT_ALLOWED {
        return Err("405".into());
    }
    if status == StatusCode::NOT_FOUND {
        let body: Value = response.json().await.unwrap_or(Value::Null);
        if body["error"]["code"] == "route_not_found" {
            return Err(format!("route_not_found: {body}"));
        }
    }
    Ok(())
}

#[sqlx::test]
async fn every_documented_operation_is_routed_and_no_other_method_is(pool: PgPool) {
    let (app, doc) = served(pool).await;
    let client = reqwest::Client::new();
    let documented = operations(&doc);
    assert!(documented.len() >= 30, "{} operations", documented.len());
    for (method, path) in &documented {
        assert!(path.starts_with("/api/"), "{path} is outside /api");
        let url = app.url(&concrete(path));
        let method = Method::from_bytes(method.as_bytes()).expect("a method");
        // With the token, so that each request reaches its handler.
        let response = client
            .request(method.clone(), &url)
            .bearer_auth("s3cret-token")
            .send()
            .await
            .expect("a request");
        if let Err(why) = routed(response).await {
            panic!("{method} {path} is in the document but not routed: {why}");
        }
    }
    // No method the document leaves out answers on its paths.
    let paths: BTreeSet<&String> = documented.iter().map(|(_, p)| p).collect();
    for path in paths {
        for method in METHODS {
            let upper = method.to_uppercase();
            if documented.contains(&(upper.clone(), path.clone())) {
                continue;
            }
            let response = client
                .request(
                    Method::from_bytes(upper.as_bytes()).expect("a method"),
                    app.url(&concrete(path)),
                )
                .bearer_auth("s3cret-token")
                .send()
                .await
                .expect("a request");
            assert!(
                routed(response).await.is_err(),
                "{upper} {path} is routed but not in the document"
            );
        }
    }
}

#[sqlx::test]
async fn the_document_says_auth_errors_and_admin_routes(pool: PgPool) {
    let (_app, doc) = served(pool).await;
    assert_eq!(doc["openapi"], "3.1.0");
    let schemes = &doc["components"]["securitySchemes"];
    assert_eq!(schemes["bearer"]["scheme"], "bearer", "{schemes}");
    let op = |method: &str, path: &str| doc["paths"][path][method].clone();
    // An admin's route says so and has its 403; a reader's has no admin role.
    let webhooks = op("post", "/api/webhooks");
    assert_eq!(webhooks["security"][0]["bearer"][0], "admin", "{webhooks}");
    assert!(webhooks["responses"].get("403").is_some(), "{webhooks}");
    assert!(webhooks["responses"].get("401").is_some(), "{webhooks}");
    let search = op("get", "/api/search");
    assert_eq!(search["security"][0]["bearer"], Value::Array(vec![]));
    assert!(search["responses"].get("401").is_some(), "{search}");
    assert!(search["responses"].get("403").is_none(), "{search}");
    // Query parameters and the multipart upload.
    let names: Vec<&str> = search["parameters"]
        .as_array()
        .expect("parameters")
        .iter()
        .filter(|p| p["in"] == "query")
        .filter_map(|p| p["name"].as_str())
        .collect();
    for name in ["q", "k", "mode", "collection", "group"] {
        assert!(names.contains(&name), "search lacks ?{name}: {names:?}");
    }
    let upload = op("post", "/api/documents");
    assert!(
        upload["requestBody"]["content"]
            .get("multipart/form-data")
            .is_some(),
        "{upload}"
    );
    // The public document needs no token.
    let itself = op("get", "/api/openapi.json");
    assert!(itself["responses"].get("401").is_none(), "{itself}");
    // Errors are the JSON error body.
    let error = &doc["components"]["schemas"]["ErrorAnswer"];
    assert!(error["properties"].get("error").is_some(), "{error}");
    let not_found = &op("get", "/api/documents/{id}")["responses"]["404"];
    assert_eq!(
        not_found["content"]["application/json"]["schema"]["$ref"],
        "#/components/schemas/ErrorAnswer"
    );
}

/// Every `$ref` under `value`.
fn refs<'a>(value: &'a Value, into: &mut Vec<&'a str>) {
    match value {
        Value::Object(map) => {
            for (key, inner) in map {
                match (key.as_str(), inner) {
                    ("$ref", Value::String(target)) => into.push(target),
                    _ => refs(inner, into),
                }
            }
        }
        Value::Array(items) => items.iter().for_each(|item| refs(item, into)),
        _ => {}
    }
}

#[sqlx::test]
async fn a_client_can_be_generated_every_operation_named_and_every_reference_resolved(
    pool: PgPool,
) {
    let (_app, doc) = served(pool).await;
    let mut ids = HashSet::new();
    for (method, path) in operations(&doc) {
        let op = &doc["paths"][&path][method.to_lowercase()];
        let id = op["operationId"].as_str().unwrap_or_default();
        assert!(!id.is_empty(), "{method} {path} has no operationId");
        assert!(ids.insert(id.to_owned()), "operationId {id} twice");
        let responses = op["responses"].as_object().expect("responses");
        assert!(
            responses.keys().any(|status| status.starts_with('2')),
            "{method} {path} has no success answer"
        );
    }
    let mut found = Vec::new();
    refs(&doc, &mut found);
    assert!(found.len() > 30, "{} references", found.len());
    for target in found {
        let name = target
            .strip_prefix("#/components/schemas/")
            .unwrap_or_else(|| panic!("{target} is not a schema reference"));
        assert!(
            doc["components"]["schemas"].get(name).is_some(),
            "{target} does not resolve"
        );
    }
}

#[sqlx::test]
async fn the_served_document_validates_as_openapi_3_1(pool: PgPool) {
    let (_app, doc) = served(pool).await;
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let setup = std::process::Command::new(root.join("scripts/openapi-validator.sh"))
        .output()
        .expect("run scripts/openapi-validator.sh");
    assert!(
        setup.status.success(),
        "the validator did not install: {}",
        String::from_utf8_lossy(&setup.stderr)
    );
    let python = String::from_utf8(setup.stdout).expect("a path");
    let dir = tempfile::tempdir().expect("a temporary directory");
    let file = dir.path().join("openapi.json");
    std::fs::write(&file, serde_json::to_vec(&doc).expect("JSON")).expect("write the document");
    let check = |file: &Path| {
        std::process::Command::new(python.trim())
            .args(["-m", "openapi_spec_validator", "--schema", "3.1.0"])
            .arg(file)
            .output()
            .expect("run the validator")
    };
    let verdict = check(&file);
    assert!(
        verdict.status.success(),
        "the document is not valid OpenAPI 3.1: {}",
        // The validator quotes the whole document after its verdict.
        String::from_utf8_lossy(&[verdict.stdout, verdict.stderr].concat())
            .chars()
            .take(600)
            .collect::<String>()
    );
    // The validator is not a rubber stamp: an operation without responses is refused.
    let mut broken = doc.clone();
    broken["paths"]["/api/search"]["get"]["responses"] = Value::String("none".into());
    let bad = dir.path().join("broken.json");
    std::fs::write(&bad, serde_json::to_vec(&broken).expect("JSON")).expect("write");
    assert!(!check(&bad).status.success(), "a broken document passed");
}

/// The (METHOD, path) pairs the README's API table lists: `GET/POST /api/x`, several per cell
/// separated by commas, optional query strings (`[?…]`, `?…`) and bodies (` {…}`) left out.
fn readme_routes() -> BTreeSet<(String, String)> {
    let readme = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("README.md"))
        .expect("README.md");
    let mut out = BTreeSet::new();
    for line in readme.lines() {
        let Some(cell) = line.strip_prefix("| `") else {
            continue;
        };
        let cell = cell.split(" | ").next().unwrap_or_default();
        for item in cell.split(", ") {
            let item = item.trim_matches('`');
            let Some((methods, rest)) = item.split_once(' ') else {
                continue;
            };
            let path = rest
                .split(['[', '?', ' '])
                .next()
                .unwrap_or_default()
                .trim_end_matches('`');
            if !path.starts_with("/api/") {
                continue;
            }
            for method in methods.split('/') {
                out.insert((method.to_owned(), path.to_owned()));
            }
        }
    }
    out
}

#[sqlx::test]
async fn the_readme_route_table_lists_exactly_the_documented_routes(pool: PgPool) {
    let (_app, doc) = served(pool).await;
    let documented = operations(&doc);
    let listed = readme_routes();
    let missing: Vec<_> = documented.difference(&listed).collect();
    let extra: Vec<_> = listed.difference(&documented).collect();
    assert!(
        missing.is_empty() && extra.is_empty(),
        "README.md's table lacks {missing:?} and lists {extra:?}, which the API does not have"
    );
}

fn rust_files(dir: &Path, into: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).expect("read src/") {
        let path = entry.expect("a directory entry").path();
        if path.is_dir() {
            rust_files(&path, into);
        } else if path.extension().is_some_and(|e| e == "rs") {
            into.push(path);
        }
    }
}

/// The string literal `rest` opens with (after spaces), if it opens with one.
fn literal_after(rest: &str) -> Option<&str> {
    let rest = rest.trim_start().strip_prefix('"')?;
    rest.split('"').next()
}

#[test]
fn no_route_is_added_beside_the_declarations() {
    let mut files = Vec::new();
    rust_files(
        &Path::new(env!("CARGO_MANIFEST_DIR")).join("src"),
        &mut files,
    );
    let mut nests = Vec::new();
    for file in files {
        let source = std::fs::read_to_string(&file).expect("read a source file");
        for (call, is_nest) in [
            (".route(", false),
            (".route_service(", false),
            (".nest(", true),
            (".nest_service(", true),
        ] {
            for (at, _) in source.match_indices(call) {
                let rest = &source[at + call.len()..];
                let Some(path) = literal_after(rest) else {
                    panic!(
                        "{}: {call} without a literal path; declare API routes with \
                         #[utoipa::path] and routes! (src/http/mod.rs)",
                        file.display()
                    );
                };
                if is_nest {
                    nests.push(path.to_owned());
                } else {
                    assert!(
                        NOT_API.contains(&path),
                        "{}: {call}\"{path}\" bypasses the OpenAPI declarations; declare it \
                         with #[utoipa::path] on its handler and routes! in src/http/mod.rs \
                         (a route outside /api goes into NOT_API here)",
                        file.display()
                    );
                }
            }
        }
    }
    assert_eq!(nests, ["/api"], "only the declared /api router is nested");
}
