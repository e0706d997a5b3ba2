//! Search over a real HTTP server and a real PostgreSQL with pgvector: text, vector and hybrid
//! modes, the HNSW index really used, filtered recall, error answers, `/api/info`, and the
//! live event stream.

use docket::chunk::ChunkConfig;
use docket::embed::{Embedder, HashEmbedder, RateLimits};
use docket::models::{self, ModelVersion};
use docket::search::Scope;
use docket_testkit::embedding_server::{self, EmbeddingServerConfig};
use futures::StreamExt;
use pgvector::Vector;
use reqwest::StatusCode;
use serde_json::Value;
use sqlx::PgPool;

use crate::support::{self, TestApp, TestWorker, fixture};

/// Chunks of at most 90 estimated tokens with no overlap: short enough that the README makes
/// a few dozen chunks and that the Japanese fixture's two lines with a shared phrase land in
/// two chunks.
const SMALL_CHUNKS: ChunkConfig = ChunkConfig {
    target_tokens: 90,
    overlap_tokens: 0,
};

/// The README and the Japanese fixture uploaded and processed by `api`'s pipeline: their ids.
async fn readme_and_japanese(api: &TestApp) -> (i64, i64) {
    let readme = api
        .upload_one("pdfjs-README.md", fixture("text/pdfjs-README.md"))
        .await;
    let japanese = api
        .upload_one("日本語.txt", fixture("text/cjk-shift_jis.txt"))
        .await;
    api.worker().await.run_until_idle().await;
    (readme, japanese)
}

/// `lines` paragraphs made by `line(i)`.
fn lines(n: usize, line: impl Fn(usize) -> String) -> Vec<String> {
    (0..n).map(line).collect()
}

pub(crate) fn marked(hit: &Value) -> Vec<String> {
    let snippet: Vec<char> = hit["snippet"].as_str().expect("snippet").chars().collect();
    hit["highlights"]
        .as_array()
        .expect("highlights")
        .iter()
        .map(|h| {
            let start = h["start"].as_u64().expect("start") as usize;
            let end = h["end"].as_u64().expect("end") as usize;
            snippet[start..end].iter().collect()
        })
        .collect()
}

#[sqlx::test(migrator = "docket::db::MIGRATOR")]
async fn text_search_ranks_the_chunk_with_the_words_first_and_highlights_them(pool: PgPool) {
    let api = TestApp::builder(pool.clone())
        .chunking(SMALL_CHUNKS)
        .spawn()
        .await;
    let (readme, _) = readme_and_japanese(&api).await;
    let model = api.model();

    let (status, body) = api.search("q=local%20web%20server&mode=text").await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["mode"], "text");
    assert_eq!(body["model_version"], model.model_version.as_str());
    let top = &body["hits"][0];
    assert_eq!(top["document_id"], readme);
    assert_eq!(top["filename"], "pdfjs-README.md");
    let text = top["text"].as_str().expect("text").to_lowercase();
    assert!(text.contains("local web server"), "{text}");
    let marks: Vec<String> = marked(top).iter().map(|m| m.to_lowercase()).collect();
    assert!(marks.contains(&"local".to_owned()), "{marks:?}");
    assert!(marks.contains(&"server".to_owned()), "{marks:?}");
    // Words are OR-ed and ranked: every hit holds some of them, and no hit holding fewer of
    // them ranks above one holding all three.
    let held: Vec<usize> = body["hits"]
        .as_array()
        .expect("hits")
        .iter()
        .map(|hit| {
            let text = hit["text"].as_str().expect("text").to_lowercase();
            ["local", "web", "server"]
                .iter()
                .filter(|w| text.contains(*w))
                .count()
        })
        .collect();
    assert!(held.iter().all(|&n| n >= 1), "{held:?}");
    let last_full = held
        .iter()
        .rposition(|&n| n == 3)
        .expect("a hit with all three");
    assert!(held[..last_full].iter().all(|&n| n == 3), "{held:?}");
}

#[sqlx::test(migrator = "docket::db::MIGRATOR")]
async fn japanese_text_without_spaces_is_found_by_its_bigrams(pool: PgPool) {
    let api = TestApp::builder(pool.clone())
        .chunking(SMALL_CHUNKS)
        .spawn()
        .await;
    let (_, japanese) = readme_and_japanese(&api).await;

    let phrase = "プログラミング言語";
    let chunks = support::chunks(&pool, japanese).await;
    let expected = chunks.iter().filter(|(_, t)| t.contains(phrase)).count();
    assert!(expected >= 2, "the phrase is in several chunks: {chunks:?}");
    // Unquoted, the lines holding the whole word rank first, each with the word marked.
    let (status, body) = api.search(&format!("q={phrase}&mode=text")).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let hits = body["hits"].as_array().expect("hits");
    assert!(hits.len() >= expected, "{body}");
    for hit in &hits[..expected] {
        assert_eq!(hit["document_id"], japanese);
        assert!(hit["text"].as_str().expect("text").contains(phrase));
        assert!(marked(hit).iter().any(|m| m == phrase), "{hit}");
    }
    // Quoted, only they are left.
    let (_, body) = api.search(&format!("q=%22{phrase}%22&mode=text")).await;
    assert_eq!(
        body["hits"].as_array().expect("hits").len(),
        expected,
        "{body}"
    );
}

#[sqlx::test(migrator = "docket::db::MIGRATOR")]
async fn vector_and_hybrid_search_put_the_matching_chunk_first(pool: PgPool) {
    let api = TestApp::builder(pool.clone())
        .chunking(SMALL_CHUNKS)
        .spawn()
        .await;
    let (readme, _) = readme_and_japanese(&api).await;

    // A whole chunk as the query: its own vector is the nearest one.
    let chunks = support::chunks(&pool, readme).await;
    let target = chunks
        .iter()
        .position(|(_, text)| text.contains("local web server"))
        .expect("a chunk about the dev server");
    let q = url::form_urlencoded::byte_serialize(chunks[target].1.as_bytes()).collect::<String>();
    for mode in ["vector", "hybrid"] {
        let (status, body) = api.search(&format!("q={q}&mode={mode}&k=5")).await;
        assert_eq!(status, StatusCode::OK, "{mode}: {body}");
        assert_eq!(body["mode"], mode);
        assert_eq!(body["semantic"], false, "the hash embedder is not semantic");
        let hits = body["hits"].as_array().expect("hits");
        assert_eq!(hits.len(), 5, "{mode}");
        assert_eq!(hits[0]["document_id"], readme, "{mode}");
        assert_eq!(hits[0]["chunk_index"], target as i64, "{mode}");
        let scores: Vec<f64> = hits
            .iter()
            .map(|h| h["score"].as_f64().expect("score"))
            .collect();
        assert!(
            scores.windows(2).all(|w| w[0] >= w[1]),
            "{mode}: {scores:?}"
        );
    }
}

#[sqlx::test(migrator = "docket::db::MIGRATOR")]
async fn every_search_says_where_its_time_went_in_server_timing(pool: PgPool) {
    let api = TestApp::builder(pool.clone())
        .chunking(SMALL_CHUNKS)
        .spawn()
        .await;
    readme_and_japanese(&api).await;
    for (mode, expected) in [
        ("text", &["keywords", "hits"][..]),
        ("vector", &["plan", "embed", "nearest", "hits"]),
        (
            "hybrid",
            &["plan", "embed", "nearest", "keywords", "complete", "hits"],
        ),
    ] {
        let response = api
            .client
            .get(api.url(&format!("/api/search?q=local+web+server&mode={mode}")))
            .send()
            .await
            .expect("search");
        assert_eq!(response.status(), StatusCode::OK, "{mode}");
        let header = response
            .headers()
            .get("server-timing")
            .unwrap_or_else(|| panic!("{mode}: no Server-Timing header"))
            .to_str()
            .expect("ASCII")
            .to_owned();
        let stages = docket::search::parse_server_timing(&header)
            .unwrap_or_else(|| panic!("{mode}: not name;dur=ms entries: {header}"));
        assert!(stages.iter().all(|(_, ms)| *ms >= 0.0), "{mode}: {header}");
        let mut named: Vec<String> = stages.into_iter().map(|(name, _)| name).collect();
        named.sort();
        let mut expected = expected.to_vec();
        expected.sort();
        assert_eq!(named, expected, "{mode}: {header}");
        let body: Value = response.json().await.expect("JSON");
        assert!(
            body.get("stages").is_none(),
            "the stages are not in the body"
        );
    }
}

#[sqlx::test(migrator = "docket::db::MIGRATOR")]
async fn hybrid_search_honours_phrases_and_excluded_words_in_both_lists(pool: PgPool) {
    let api = TestApp::builder(pool.clone())
        .chunking(SMALL_CHUNKS)
        .spawn()
        .await;
    readme_and_japanese(&api).await;
    let text_of = |hit: &Value| hit["text"].as_str().expect("text").to_lowercase();
    // The vector list alone would bring chunks about gulp: the query's own spelling is near them.
    let (status, body) = api.search("q=server%20-gulp&mode=hybrid&k=10").await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let hits = body["hits"].as_array().expect("hits");
    assert!(!hits.is_empty(), "{body}");
    for hit in hits {
        assert!(!text_of(hit).contains("gulp"), "-gulp: {}", text_of(hit));
    }
    let (status, body) = api.search("q=%22web%20server%22&mode=hybrid&k=10").await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let hits = body["hits"].as_array().expect("hits");
    assert!(!hits.is_empty(), "{body}");
    for hit in hits {
        assert!(
            text_of(hit).contains("web server"),
            "\"web server\": {}",
            text_of(hit)
        );
    }
}

#[sqlx::test(migrator = "docket::db::MIGRATOR")]
async fn the_vector_query_is_served_by_the_versions_hnsw_index(pool: PgPool) {
    // One line (10 estimated tokens) a chunk.
    let api = TestApp::builder(pool.clone())
        .chunking(ChunkConfig {
            target_tokens: 12,
            overlap_tokens: 0,
        })
        .spawn()
        .await;
    let texts = lines(3000, |i| {
        format!("chunk {i} about topic {} and {}", i % 17, i % 29)
    });
    api.upload_paragraphs("many.txt", &texts).await;
    let model = api.model();
    sqlx::query("analyze embeddings")
        .execute(&pool)
        .await
        .expect("analyze");
    let query = Vector::from(HashEmbedder::new(384).embed_one("topic 3"));
    for (scope, documents) in [
        (Scope::All, None),
        (Scope::Only, Some(vec![1i64])),
        // What the active version's query looks like while documents are read elsewhere.
        (Scope::Except, Some(vec![2i64, 3])),
    ] {
        let sql = docket::search::vector_sql(model.dims, &model.model_version, scope, false);
        let plan: Vec<String> = sqlx::query_scalar(sqlx::AssertSqlSafe(format!("explain {sql}")))
            .bind(&query)
            .bind(10i64)
            .bind(documents)
            .bind(None::<Vec<i64>>)
            .fetch_all(&pool)
            .await
            .expect("explain");
        let plan = plan.join("\n");
        assert!(
            plan.contains(&format!("Index Scan using {}", model.index_name())),
            "{scope:?}:\n{plan}"
        );
    }
}

#[sqlx::test(migrator = "docket::db::MIGRATOR")]
async fn a_filtered_search_returns_k_hits_from_a_small_document(pool: PgPool) {
    // One line (at most 13 estimated tokens) a chunk.
    let api = TestApp::builder(pool.clone())
        .chunking(ChunkConfig {
            target_tokens: 16,
            overlap_tokens: 0,
        })
        .spawn()
        .await;
    let model = api.model();
    // The big document holds 99% of the vectors, so the index's first ef_search candidates
    // hold about one chunk of the small one.
    let big = lines(3000, |i| {
        format!(
            "ledger entry {i} for account {} in region {}",
            i % 31,
            i % 7
        )
    });
    api.upload_paragraphs("big.txt", &big).await;
    let small = api
        .upload_paragraphs(
            "small.txt",
            &lines(30, |i| format!("small note {i} on harbour tides")),
        )
        .await;
    sqlx::query("analyze embeddings")
        .execute(&pool)
        .await
        .expect("analyze");

    let (status, body) = api
        .search(&format!(
            "q=ledger%20account&mode=vector&k=10&document={small}"
        ))
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let hits = body["hits"].as_array().expect("hits");
    assert_eq!(hits.len(), 10, "{body}");
    assert!(hits.iter().all(|h| h["document_id"] == small));

    // For so small a document the planner may rather sort its rows exactly (primary key). When
    // it walks the HNSW index instead (forced here by forbidding the sort), the iterative scan
    // is what keeps k hits: without it the filter empties ef_search's candidate list.
    let sql = docket::search::vector_sql(model.dims, &model.model_version, Scope::Only, false);
    let query = Vector::from(HashEmbedder::new(384).embed_one("ledger account"));
    let mut found = Vec::new();
    for iterative in ["relaxed_order", "off"] {
        let mut tx = pool.begin().await.expect("tx");
        for setting in [
            "set local hnsw.ef_search = 100".to_owned(),
            "set local enable_sort = off".to_owned(),
            format!("set local hnsw.iterative_scan = {iterative}"),
        ] {
            sqlx::query(sqlx::AssertSqlSafe(setting))
                .execute(&mut *tx)
                .await
                .expect("set");
        }
        let plan: Vec<String> = sqlx::query_scalar(sqlx::AssertSqlSafe(format!("explain {sql}")))
            .bind(&query)
            .bind(10i64)
            .bind(Some(vec![small]))
            .bind(None::<Vec<i64>>)
            .fetch_all(&mut *tx)
            .await
            .expect("explain");
        assert!(plan.join("\n").contains(&model.index_name()), "{plan:?}");
        let rows: Vec<(i64, i32, f64)> = sqlx::query_as(sqlx::AssertSqlSafe(sql.clone()))
            .bind(&query)
            .bind(10i64)
            .bind(Some(vec![small]))
            .bind(None::<Vec<i64>>)
            .fetch_all(&mut *tx)
            .await
            .expect("filtered search");
        found.push(rows.len());
    }
    assert_eq!(found[0], 10, "with the iterative scan");
    assert!(found[1] < 10, "without it: {} hits", found[1]);
}

#[sqlx::test(migrator = "docket::db::MIGRATOR")]
async fn bad_searches_get_clear_errors(pool: PgPool) {
    let api = TestApp::builder(pool.clone()).spawn().await;
    let long = "a".repeat(1001);
    for (query, status, code) in [
        ("q=", StatusCode::BAD_REQUEST, "empty_query"),
        ("q=%20%20", StatusCode::BAD_REQUEST, "empty_query"),
        (
            &format!("q={long}&mode=text")[..],
            StatusCode::BAD_REQUEST,
            "query_too_long",
        ),
        ("q=x&k=0", StatusCode::BAD_REQUEST, "invalid_k"),
        ("q=x&k=101", StatusCode::BAD_REQUEST, "invalid_k"),
        ("q=x&mode=fuzzy", StatusCode::BAD_REQUEST, "invalid_mode"),
        ("q=x&colour=red", StatusCode::BAD_REQUEST, "invalid_query"),
        ("q=x&mode=vector", StatusCode::CONFLICT, "no_active_model"),
    ] {
        let (got, body) = api.search(query).await;
        assert_eq!(got, status, "{query}: {body}");
        assert_eq!(body["error"]["code"], code, "{query}: {body}");
    }

    api.pipeline().await;
    let model = api.model();
    let (got, body) = api.search("q=anything&mode=vector").await;
    assert_eq!(got, StatusCode::CONFLICT, "{body}");
    assert_eq!(body["error"]["code"], "no_vectors");
    assert!(
        body["error"]["message"]
            .as_str()
            .expect("message")
            .contains(&model.model_version),
        "{body}"
    );
    // Text search needs no vectors.
    let (got, body) = api.search("q=anything&mode=text").await;
    assert_eq!(got, StatusCode::OK, "{body}");

    let (got, body) = api.search("q=x&model_version=nope:v0").await;
    assert_eq!(got, StatusCode::NOT_FOUND, "{body}");
    assert_eq!(body["error"]["code"], "model_version_not_found");

    // Another provider's model cannot embed queries here (its key and URL are configuration);
    // another hashing version can, and says it has no vectors.
    let other = models::add(
        &pool,
        &models::NewModelVersion {
            provider: "openai".into(),
            model: "text-embedding-3-small".into(),
            dims: 1536,
            chunk_tokens: 200,
            chunk_overlap: 30,
        },
    )
    .await
    .expect("add");
    let (got, body) = api
        .search(&format!("q=x&model_version={}", other.model_version))
        .await;
    assert_eq!(got, StatusCode::CONFLICT, "{body}");
    assert_eq!(body["error"]["code"], "model_version_not_embeddable");
    let hashing = ModelVersion::of(
        &Embedder::Hash(HashEmbedder::new(64)),
        &ChunkConfig::default(),
    );
    models::register(&pool, &hashing).await.expect("register");
    let (got, body) = api
        .search(&format!("q=x&model_version={}", hashing.model_version))
        .await;
    assert_eq!(got, StatusCode::CONFLICT, "{body}");
    assert_eq!(body["error"]["code"], "no_vectors");
    // Text search checks a named version exists too.
    let (got, body) = api.search("q=x&mode=text&model_version=nope:v0").await;
    assert_eq!(got, StatusCode::NOT_FOUND, "{body}");
}

#[sqlx::test(migrator = "docket::db::MIGRATOR")]
async fn documents_under_a_version_this_server_cannot_embed_make_a_partial_answer(pool: PgPool) {
    let api = TestApp::builder(pool.clone()).spawn().await;
    let here = api
        .upload_one("here.txt", fixture("text/pdfjs-README.md"))
        .await;
    api.worker().await.run_until_idle().await;
    let model = api.model();
    // A document whose only complete set is another provider's, embedded by a process set up
    // for that provider alone: searches read it under that version.
    let server = embedding_server::start(EmbeddingServerConfig {
        dims: 32,
        ..EmbeddingServerConfig::default()
    })
    .await
    .expect("embedding server");
    let embedder = support::openai_embedder(&server, 32, RateLimits::default(), |_| {});
    let elsewhere_pipeline = support::pipeline(&pool, embedder).await;
    let elsewhere_model = &elsewhere_pipeline.model;
    let elsewhere = api
        .upload_one(
            "elsewhere.txt",
            b"a paragraph about lighthouses and ships".to_vec(),
        )
        .await;
    TestWorker::new(&pool, &elsewhere_pipeline, 1)
        .run_until_idle()
        .await;
    let (status, body) = api.search("q=lighthouses%20ships&mode=vector").await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["partial"], true, "{body}");
    let versions = body["versions"].as_array().expect("versions");
    assert_eq!(versions[0]["model_version"], model.model_version.as_str());
    assert_eq!(versions[0]["searched"], true);
    assert_eq!(
        versions[1]["model_version"],
        elsewhere_model.model_version.as_str()
    );
    assert_eq!(versions[1]["role"], "fallback");
    assert_eq!(versions[1]["documents"], 1);
    assert_eq!(versions[1]["searched"], false);
    assert!(
        versions[1]["reason"]
            .as_str()
            .expect("a reason")
            .contains(&model.model_version),
        "{body}"
    );
    let hits = body["hits"].as_array().expect("hits");
    assert!(!hits.is_empty());
    assert!(hits.iter().all(|h| h["document_id"] == here), "{body}");
    // Text search does not depend on vectors: it finds the document.
    let (_, body) = api.search("q=lighthouses&mode=text").await;
    assert_eq!(body["hits"][0]["document_id"], elsewhere, "{body}");
    assert_eq!(body["hits"][0]["model_version"], Value::Null);
}

#[sqlx::test(migrator = "docket::db::MIGRATOR")]
async fn info_names_the_active_model_and_says_hashing_is_not_semantic(pool: PgPool) {
    let api = TestApp::builder(pool.clone()).spawn().await;
    api.pipeline().await;
    let model = api.model();
    let body: Value = api.get_json("/api/info").await;
    assert_eq!(
        body["active_model"]["model_version"],
        model.model_version.as_str()
    );
    assert_eq!(body["active_model"]["provider"], "hash");
    assert_eq!(body["embedder"]["semantic"], false);
    assert_eq!(body["embedder"]["provider"], "hash");
    // The test server chose the hashing embedder: no fallback, no warning.
    assert_eq!(body["embedder"]["warning"], Value::Null);
}

#[sqlx::test(migrator = "docket::db::MIGRATOR")]
async fn info_warns_when_docket_falls_back_to_the_hashing_embedder(pool: PgPool) {
    use clap::Parser;
    #[derive(Parser)]
    struct Args {
        #[command(flatten)]
        serve: docket::config::ServeConfig,
    }
    let empty = tempfile::tempdir().expect("temp dir");
    let database_url = crate::support::database_url(&pool).await;
    let model_dir = empty.path().to_str().expect("utf-8 path");
    // No --embedder: the local model is the default, and it is missing from model_dir.
    let config = Args::try_parse_from([
        "docket",
        "--database-url",
        &database_url,
        "--bind",
        "127.0.0.1:0",
        "--model-dir",
        model_dir,
        "--no-workers",
    ])
    .expect("parses")
    .serve;
    let app = docket::app::App::build(config).await.expect("builds");
    let base = format!("http://{}", app.local_addr().expect("address"));
    let stop = tokio_util::sync::CancellationToken::new();
    let running = tokio::spawn(app.run_until_stopped(stop.clone().cancelled_owned()));
    let body: Value = reqwest::get(format!("{base}/api/info"))
        .await
        .expect("info")
        .json()
        .await
        .expect("JSON");
    stop.cancel();
    running.await.expect("joins").expect("stops cleanly");
    assert_eq!(body["embedder"]["provider"], "hash", "{body}");
    let warning = body["embedder"]["warning"].as_str().expect("a warning");
    assert!(warning.contains(model_dir), "{warning}");
    assert!(warning.contains("get-model.sh"), "{warning}");
}

/// Reads server-sent events until one named `name` arrives; returns its data.
async fn next_event<B: AsRef<[u8]>>(
    stream: &mut (impl futures::Stream<Item = reqwest::Result<B>> + Unpin),
    buffer: &mut String,
    name: &str,
) -> String {
    let deadline = std::time::Duration::from_secs(10);
    tokio::time::timeout(deadline, async {
        loop {
            while let Some(end) = buffer.find("\n\n") {
                let block: String = buffer.drain(..end + 2).collect();
                let mut event = "message";
                let mut data = String::new();
                for line in block.lines() {
                    if let Some(v) = line.strip_prefix("event:") {
                        event = v.trim();
                    } else if let Some(v) = line.strip_prefix("data:") {
                        data.push_str(v.trim());
                    }
                }
                if event == name {
                    return data;
                }
            }
            let chunk = stream.next().await.expect("stream open").expect("chunk");
            buffer.push_str(&String::from_utf8_lossy(chunk.as_ref()));
        }
    })
    .await
    .unwrap_or_else(|_| panic!("no {name} event"))
}

#[sqlx::test(migrator = "docket::db::MIGRATOR")]
async fn document_and_job_changes_arrive_as_server_sent_events(pool: PgPool) {
    let token = "a-token-of-sixteen-chars";
    let api = TestApp::builder(pool.clone()).token(token).spawn().await;
    let refused = api
        .client
        .get(api.url("/api/events?access_token=wrong-token-wrong-token"))
        .send()
        .await
        .expect("events");
    assert_eq!(refused.status(), StatusCode::UNAUTHORIZED);
    let response = api
        .client
        .get(api.url(&format!("/api/events?access_token={token}")))
        .send()
        .await
        .expect("events");
    assert_eq!(response.status(), StatusCode::OK);
    assert_eq!(
        response.headers()["content-type"].to_str().expect("type"),
        "text/event-stream"
    );
    let mut stream = response.bytes_stream();
    let mut buffer = String::new();
    next_event(&mut stream, &mut buffer, "hello").await;

    // A real upload: the document row and its extract job, in one transaction.
    let form = reqwest::multipart::Form::new().part(
        "file",
        reqwest::multipart::Part::bytes(b"hello events".to_vec()).file_name("note.txt"),
    );
    let uploaded: Value = api
        .client
        .post(api.url("/api/documents"))
        .bearer_auth(token)
        .multipart(form)
        .send()
        .await
        .expect("upload")
        .json()
        .await
        .expect("JSON");
    let id = uploaded["results"][0]["document"]["id"]
        .as_i64()
        .expect("id");
    let mut seen = Vec::new();
    while seen.len() < 2 {
        let data: Value =
            serde_json::from_str(&next_event(&mut stream, &mut buffer, "change").await)
                .expect("JSON data");
        seen.push(data);
    }
    assert!(
        seen.iter()
            .any(|e| e["type"] == "document" && e["id"] == id && e["status"] == "uploaded"),
        "{seen:?}"
    );
    assert!(
        seen.iter()
            .any(|e| e["type"] == "job" && e["kind"] == "extract" && e["document_id"] == id),
        "{seen:?}"
    );
    for event in &seen {
        assert!(
            !event.to_string().contains("note.txt"),
            "no file names in events"
        );
    }

    // A status change and a delete follow.
    sqlx::query("update documents set status = 'failed' where id = $1")
        .bind(id)
        .execute(&pool)
        .await
        .expect("update");
    let data: Value =
        serde_json::from_str(&next_event(&mut stream, &mut buffer, "change").await).expect("JSON");
    assert_eq!(
        (data["op"].as_str(), data["status"].as_str()),
        (Some("update"), Some("failed"))
    );
    let deleted = api
        .client
        .delete(api.url(&format!("/api/documents/{id}")))
        .bearer_auth(token)
        .send()
        .await
        .expect("delete");
    assert_eq!(deleted.status(), StatusCode::NO_CONTENT);
    let data: Value =
        serde_json::from_str(&next_event(&mut stream, &mut buffer, "change").await).expect("JSON");
    assert_eq!(data["op"], "delete");
    assert_eq!(data["id"], id);
}
