//! Ranked keyword search end to end: natural questions against real documents, through the
//! real pipeline (upload, extraction, keyword indexing, embedding) and the API.

use docket::chunk::ChunkConfig;
use reqwest::StatusCode;
use serde_json::Value;
use sqlx::PgPool;

use crate::search::marked;
use crate::support::{TestApp, fixture};

/// Chunks of at most 30 estimated tokens with no overlap: each sentence below is one chunk.
const SENTENCE_CHUNKS: ChunkConfig = ChunkConfig {
    target_tokens: 30,
    overlap_tokens: 0,
};

fn hits(body: &Value) -> &Vec<Value> {
    body["hits"].as_array().expect("hits")
}

fn text_of(hit: &Value) -> String {
    hit["text"].as_str().expect("text").to_owned()
}

/// URL-encodes a query for `q=`.
fn q(query: &str) -> String {
    url::form_urlencoded::byte_serialize(query.as_bytes()).collect()
}

#[sqlx::test(migrator = "docket::db::MIGRATOR")]
async fn a_question_sharing_only_some_words_ranks_the_chunk_with_the_rarest_first(pool: PgPool) {
    let api = TestApp::builder(pool.clone())
        .chunking(SENTENCE_CHUNKS)
        .spawn()
        .await;
    // Many chunks share the common words of the question; one holds its rare ones.
    let mut texts: Vec<String> = (0..30)
        .map(|i| format!("Section {i}: the queue hands jobs to workers, and workers run each job."))
        .collect();
    texts.push("Expired leases are returned to ready by the rescuer, in short batches.".into());
    texts.push("Nothing here is about that at all; it is about gardening and tomatoes.".into());
    api.upload_paragraphs("queue-notes.txt", &texts).await;

    let question = "Which part of the queue returns jobs whose leases expired?";
    let words = ["queue", "returns", "jobs", "leases", "expired"];
    assert!(
        texts.iter().all(|t| !words.iter().all(|w| t.contains(w))),
        "no chunk holds every word of the question"
    );
    let (status, body) = api.search(&format!("q={}&mode=text", q(question))).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let found = hits(&body);
    assert!(found.len() >= 5, "{body}");
    assert!(text_of(&found[0]).contains("rescuer"), "{body}");
    assert!(found.iter().all(|h| !text_of(h).contains("gardening")));
    // Stems are marked, stop words are not.
    let marks = marked(&found[0]);
    assert!(marks.contains(&"Expired".to_owned()), "{marks:?}");
    assert!(marks.contains(&"returned".to_owned()), "{marks:?}");
    assert!(!marks.iter().any(|m| m == "the" || m == "by"), "{marks:?}");

    // Stop words alone match nothing, although every chunk holds some of them.
    let (status, body) = api.search("q=what%20is%20the&mode=text").await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert!(hits(&body).is_empty(), "{body}");
}

#[sqlx::test(migrator = "docket::db::MIGRATOR")]
async fn a_korean_question_finds_its_passage_by_keywords_despite_other_word_endings(pool: PgPool) {
    let api = TestApp::builder(pool.clone()).spawn().await;
    let id = api
        .upload_one(
            "debian-faq-choosing.ko.html",
            fixture("html/debian-faq-choosing.ko.html"),
        )
        .await;
    api.worker().await.run_until_idle().await;

    // The passage says "유지 관리가 거의 필요하지 않지만": the question asks "필요한가요".
    let question = "stable 배포판은 유지 관리가 필요한가요?";
    let (status, body) = api
        .search(&format!("q={}&mode=text&k=5", q(question)))
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let found = hits(&body).iter().position(|h| {
        h["document_id"] == id && text_of(h).contains("유지 관리가 거의 필요하지 않지만")
    });
    assert!(found.is_some(), "{body}");
    let hit = &hits(&body)[found.unwrap_or(0)];
    // Bigrams are marked as the characters they cover: 필요 inside 필요하지.
    assert!(marked(hit).iter().any(|m| m.starts_with("필요")), "{hit}");
}

#[sqlx::test(migrator = "docket::db::MIGRATOR")]
async fn a_japanese_question_without_spaces_finds_its_passage_by_keywords(pool: PgPool) {
    let api = TestApp::builder(pool.clone()).spawn().await;
    let document = api
        .upload_one("cjk-shift_jis.txt", fixture("text/cjk-shift_jis.txt"))
        .await;
    api.worker().await.run_until_idle().await;

    let question = "新しい機能は拡張モジュールで追加するのですか";
    let (status, body) = api
        .search(&format!("q={}&mode=text&k=5", q(question)))
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let top = &hits(&body)[0];
    assert_eq!(top["document_id"], document);
    assert!(
        text_of(top).contains("必要な機能は拡張モジュールとして追加する"),
        "{body}"
    );
}

#[sqlx::test(migrator = "docket::db::MIGRATOR")]
async fn grouped_results_keep_one_long_document_from_filling_the_page(pool: PgPool) {
    let api = TestApp::builder(pool.clone())
        .chunking(SENTENCE_CHUNKS)
        .spawn()
        .await;
    let long: Vec<String> = (0..40)
        .map(|i| format!("Lighthouse keeping log, day {i}: the lighthouse lamp was lit at dusk."))
        .collect();
    let long_id = api.upload_paragraphs("lighthouse-log.txt", &long).await;
    let short_id = api
        .upload_paragraphs(
            "coast.txt",
            &["A lighthouse stands on the northern cape.".to_owned()],
        )
        .await;

    // Flat, the long document fills the first five places.
    let (_, flat) = api.search("q=lighthouse&mode=text&k=5").await;
    assert!(
        hits(&flat).iter().all(|h| h["document_id"] == long_id),
        "{flat}"
    );
    assert!(flat.get("groups").is_none());

    let (status, body) = api
        .search("q=lighthouse&mode=text&k=5&group=document")
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let groups = body["groups"].as_array().expect("groups");
    let ids: Vec<&Value> = groups.iter().map(|g| &g["document_id"]).collect();
    assert_eq!(ids.len(), 2, "{body}");
    assert!(ids.contains(&&Value::from(long_id)) && ids.contains(&&Value::from(short_id)));
    let long_group = groups
        .iter()
        .find(|g| g["document_id"] == long_id)
        .expect("the long document's group");
    let in_group = long_group["hits"].as_array().expect("group hits");
    assert!(in_group.len() > 1, "{long_group}");
    assert!(in_group.iter().all(|h| h["document_id"] == long_id));
    assert_eq!(long_group["filename"], "lighthouse-log.txt");

    let (status, body) = api.search("q=lighthouse&group=pages").await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
    assert_eq!(body["error"]["code"], "invalid_group");
}

/// How many chunks `term_stats` says hold `term`, and how many really do.
async fn frequencies(pool: &PgPool, term: &str) -> (i32, i64) {
    let counted: Option<i32> = sqlx::query_scalar("select chunks from term_stats where term = $1")
        .bind(term)
        .fetch_optional(pool)
        .await
        .expect("term_stats");
    let real: i64 = sqlx::query_scalar("select count(*) from chunk_terms where term = $1")
        .bind(term)
        .fetch_one(pool)
        .await
        .expect("chunk_terms");
    (counted.unwrap_or(0), real)
}

#[sqlx::test(migrator = "docket::db::MIGRATOR")]
async fn document_frequencies_follow_uploads_reprocessing_and_deletes(pool: PgPool) {
    let api = TestApp::builder(pool.clone()).spawn().await;
    let worker = api.worker().await;
    let readme = api
        .upload_one("pdfjs-README.md", fixture("text/pdfjs-README.md"))
        .await;
    worker.run_until_idle().await;
    let (counted, real) = frequencies(&pool, "pdf").await;
    assert!(real > 1, "the README holds the term in several chunks");
    assert_eq!(counted as i64, real);

    // Reprocessing replaces the chunks and their postings: the count must not double.
    let response = api
        .client
        .post(api.url(&format!("/api/documents/{readme}/reprocess")))
        .send()
        .await
        .expect("reprocess");
    assert!(response.status().is_success(), "{}", response.status());
    worker.run_until_idle().await;
    assert_eq!(frequencies(&pool, "pdf").await, (counted, real));

    // Deleting the document cascades to its postings, and the count follows.
    let response = api
        .client
        .delete(api.url(&format!("/api/documents/{readme}")))
        .send()
        .await
        .expect("delete");
    assert!(response.status().is_success(), "{}", response.status());
    assert_eq!(frequencies(&pool, "pdf").await, (0, 0));
}
