//! The local embedder against the real all-MiniLM-L6-v2 model: its vectors match
//! sentence-transformers' for every text of the committed reference fixture, batching and padding
//! change nothing, and, through the whole pipeline, a question that shares no word with a PDF
//! finds that PDF first by vector while full-text search cannot.
//!
//! The model is not committed (weights never are): `make test` fetches it first with
//! scripts/get-model.sh. If it is absent these tests fail and say so; they never skip.

use std::path::PathBuf;
use std::sync::{Arc, OnceLock};

use docket::chunk::TokenCounter;
use docket::documents::NewDocument;
use docket::embed::{Embedder, LocalEmbedder, Purpose};
use docket::extract::ExtractSettings;
use docket::pipeline::{self, Pipeline};
use sqlx::PgPool;

/// The directory the default model is installed in, by the same rule as the configuration.
fn model_dir() -> PathBuf {
    std::env::var_os("DOCKET_MODEL_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            PathBuf::from(std::env::var_os("HOME").expect("HOME is set"))
                .join(".cache/docket/models/all-MiniLM-L6-v2")
        })
}

/// The model, loaded once for the whole test binary (it is about 90 MB).
pub fn model() -> LocalEmbedder {
    static MODEL: OnceLock<LocalEmbedder> = OnceLock::new();
    MODEL
        .get_or_init(|| {
            crate::support::load_local_model(model_dir(), "scripts/get-model.sh all-MiniLM-L6-v2")
        })
        .clone()
}

#[derive(serde::Deserialize)]
struct Fixture {
    model: String,
    max_seq_length: usize,
    texts: Vec<Reference>,
}

#[derive(serde::Deserialize)]
struct Reference {
    text: String,
    tokens: usize,
    vector: Vec<f32>,
}

fn fixture() -> Fixture {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/fixtures/reference-vectors.json"
    );
    let bytes = std::fs::read(path).expect("read the reference fixture");
    serde_json::from_slice(&bytes).expect("parse the reference fixture")
}

fn cosine(a: &[f32], b: &[f32]) -> f32 {
    let dot: f32 = a.iter().zip(b).map(|(x, y)| x * y).sum();
    let norm = |v: &[f32]| v.iter().map(|x| x * x).sum::<f32>().sqrt();
    dot / (norm(a) * norm(b))
}

#[test]
fn local_vectors_match_sentence_transformers_for_every_reference_text() {
    let fixture = fixture();
    let model = model();
    assert_eq!(
        model.model_id(),
        format!("local:{}-{}:384", fixture.model, fixture.max_seq_length)
    );
    assert!(
        fixture.texts.len() >= 40,
        "the fixture holds {} texts",
        fixture.texts.len()
    );
    let texts: Vec<String> = fixture.texts.iter().map(|r| r.text.clone()).collect();
    // All at once: sorted into length buckets and padded, as the pipeline calls it.
    let vectors = model
        .embed_blocking(&texts, Purpose::Passage)
        .expect("embed the fixture");
    assert_eq!(vectors.len(), texts.len());
    let mut worst = (f32::MAX, String::new());
    for (reference, vector) in fixture.texts.iter().zip(&vectors) {
        assert_eq!(vector.len(), reference.vector.len());
        let similarity = cosine(vector, &reference.vector);
        if similarity < worst.0 {
            worst = (similarity, reference.text.chars().take(60).collect());
        }
        assert!(
            similarity >= 0.999,
            "cosine {similarity} for {:?}",
            reference.text.chars().take(80).collect::<String>()
        );
    }
    eprintln!("lowest cosine {:.6} for {:?}", worst.0, worst.1);
}

#[test]
fn token_counts_agree_with_the_reference_tokenizer_and_stop_at_the_max_length() {
    let fixture = fixture();
    let counter = model().token_counter();
    let mut truncated = 0;
    for reference in &fixture.texts {
        // The counter excludes [CLS] and [SEP]; the model sees at most max_seq_length tokens.
        let seen = (counter.count(&reference.text) + 2).min(fixture.max_seq_length);
        assert_eq!(
            seen,
            reference.tokens,
            "{:?}",
            reference.text.chars().take(80).collect::<String>()
        );
        truncated += usize::from(reference.tokens == fixture.max_seq_length);
    }
    assert!(
        truncated >= 3,
        "the fixture must hold over-length texts; {truncated} reach the limit"
    );
}

#[test]
fn a_text_gets_the_same_vector_alone_as_packed_among_others() {
    let model = model();
    let short = "Does the warranty cover water damage?".to_owned();
    let long = "A long neighbour packed right before the short text. ".repeat(20);
    let alone = model
        .embed_blocking(std::slice::from_ref(&short), Purpose::Passage)
        .expect("embed");
    let batched = model
        .embed_blocking(&[long, short], Purpose::Passage)
        .expect("embed");
    let similarity = cosine(&alone[0], &batched[1]);
    assert!(
        similarity > 0.99999,
        "its neighbour changed the vector: cosine {similarity}"
    );
}

#[test]
fn a_batch_split_into_several_forward_passes_keeps_every_vector_in_place() {
    let model = model();
    // Texts at the max length, more of them than one pass holds.
    let per_pass = docket::embed::local::TOKENS_PER_PASS / model.max_tokens();
    let texts: Vec<String> = (0..per_pass + 3)
        .map(|i| format!("Text number {i} repeats its own words. ").repeat(40))
        .collect();
    let batched = model
        .embed_blocking(&texts, Purpose::Passage)
        .expect("embed the batch");
    assert_eq!(batched.len(), texts.len());
    for i in [0, per_pass - 1, per_pass, texts.len() - 1] {
        let alone = model
            .embed_blocking(std::slice::from_ref(&texts[i]), Purpose::Passage)
            .expect("embed one text");
        let similarity = cosine(&alone[0], &batched[i]);
        assert!(similarity > 0.99999, "text {i}: cosine {similarity}");
    }
    // Different texts must not have collapsed into one vector.
    assert!(cosine(&batched[0], &batched[per_pass]) < 0.999);
}

/// A search's query is embedded while a worker's batch of passages is: it does not wait for
/// the batch to end (`docket serve` embeds both with one embedder). With one lane for both, the
/// query's call waited for the passages' and returned after them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_query_is_embedded_while_passages_are_and_does_not_wait_for_them() {
    // Its own instance: the shared one may be busy with other tests.
    let model =
        crate::support::load_local_model(model_dir(), "scripts/get-model.sh all-MiniLM-L6-v2");
    // Many forward passes of texts at the max length: seconds of work.
    let passages: Vec<String> = (0..160)
        .map(|i| format!("Passage {i} of a long manual repeats its words. ").repeat(40))
        .collect();
    let documents = tokio::spawn({
        let model = model.clone();
        async move { model.embed(&passages, Purpose::Passage).await }
    });
    crate::support::wait_until(
        std::time::Duration::from_secs(30),
        "the passages' call to start",
        || async { model.busy(Purpose::Passage) },
    )
    .await;
    let query = model
        .embed(&["how long is the manual?".to_owned()], Purpose::Query)
        .await
        .expect("embed the query");
    assert!(
        !documents.is_finished() && model.busy(Purpose::Passage),
        "the query's call returned only after the passages' had ended"
    );
    assert_eq!(query.len(), 1);
    let passages = documents
        .await
        .expect("the passages' task")
        .expect("embed the passages");
    assert_eq!(passages.len(), 160);
}

/// The texts the end-to-end test ingests: a filler-text PDF, a Korean LaTeX manual and an
/// election results bulletin (a PDF saved under a .txt name).
const DOCUMENTS: [(&str, &str); 3] = [
    ("pdf/pdflatex-outline.pdf", "application/pdf"),
    ("pdf/cjk-ko-doc.pdf", "application/pdf"),
    ("malformed/la-precinct-bulletin-2014-p1.txt", "text/plain"),
];

/// Questions that paraphrase one document without sharing a word with it, and which one they
/// mean. (The filler-text PDF talks about fonts and letters, so a question about typefaces finds
/// the Korean font-package manual first: fair, and why these questions ask about its nonsense.)
const QUESTIONS: [(&str, &str); 3] = [
    (
        "gibberish placeholder prose that says nothing",
        "pdf/pdflatex-outline.pdf",
    ),
    (
        "polling outcome tallies by district",
        "malformed/la-precinct-bulletin-2014-p1.txt",
    ),
    (
        "which politicians won their races",
        "malformed/la-precinct-bulletin-2014-p1.txt",
    ),
];

/// Ingests the documents through the real pipeline with the local model and asks each question
/// by vector (the search API is another module's: this queries `embeddings` directly with the
/// model's vector of the question, cosine distance, over the pipeline's model version).
#[sqlx::test(migrator = "docket::db::MIGRATOR")]
async fn a_paraphrased_question_finds_its_pdf_by_vector_and_not_by_words(pool: PgPool) {
    paraphrased_questions_find_their_documents(pool, model()).await;
}

/// The paraphrase check with any local model (tests/api/multilingual.rs runs it with
/// multilingual-e5-small).
pub async fn paraphrased_questions_find_their_documents(pool: PgPool, model: LocalEmbedder) {
    let max_tokens = model.max_tokens();
    let embedder = Embedder::Local(model);
    let pipeline = Arc::new(Pipeline::new(
        pool.clone(),
        embedder.clone(),
        docket::chunk::ChunkConfig::default(),
        ExtractSettings::new(PathBuf::from(env!("CARGO_BIN_EXE_docket"))),
    ));
    pipeline
        .prepare()
        .await
        .expect("register the model version");
    let mut ids = Vec::new();
    for (path, content_type) in DOCUMENTS {
        let bytes = std::fs::read(format!("{}/fixtures/{path}", env!("CARGO_MANIFEST_DIR")))
            .expect("read fixture");
        let stored = pipeline::create_with_extract_job(
            &pool,
            &NewDocument {
                collection: docket::collections::DEFAULT,
                filename: path,
                content_type,
                bytes: &bytes,
                upload: None,
            },
        )
        .await
        .expect("store");
        ids.push((path, stored.document.id.0));
    }
    crate::support::TestWorker::new(&pool, &pipeline, 1)
        .run_due()
        .await;
    for (path, id) in &ids {
        let status: String = sqlx::query_scalar("select status from documents where id = $1")
            .bind(id)
            .fetch_one(&pool)
            .await
            .expect("status");
        assert_eq!(status, "ready", "{path}");
    }
    // Chunks are sized by the model's own tokenizer, so none is cut by its 256-token limit.
    let longest: i32 = sqlx::query_scalar("select max(token_count) from chunks")
        .fetch_one(&pool)
        .await
        .expect("longest chunk");
    // Two special tokens, and a few for a prompt where the model has one.
    assert!(
        longest as usize + 2 + 8 <= max_tokens,
        "a chunk of {longest} tokens would be truncated"
    );

    for (question, expected) in QUESTIONS {
        let expected_id = ids
            .iter()
            .find(|(p, _)| *p == expected)
            .map(|(_, id)| *id)
            .expect("known");
        // The question shares no word with the document: full-text search (any of its words)
        // finds nothing there.
        let terms: Vec<&str> = question.split_whitespace().collect();
        let word_hits: i64 = sqlx::query_scalar(
            "select count(*) from chunks
             where document_id = $1
               and to_tsvector('english', text) @@ to_tsquery('english', $2)",
        )
        .bind(expected_id)
        .bind(terms.join(" | "))
        .fetch_one(&pool)
        .await
        .expect("full-text query");
        assert_eq!(word_hits, 0, "{question:?} shares words with {expected}");

        let vector = embedder
            .embed_as(&[question.to_owned()], Purpose::Query)
            .await
            .expect("embed question");
        let nearest: Vec<(i64, f64)> = sqlx::query_as(
            "select document_id, (embedding <=> $1)::float8 as distance
             from embeddings
             where model_version = $2
             order by embedding <=> $1
             limit 3",
        )
        .bind(pgvector::Vector::from(vector[0].clone()))
        .bind(&pipeline.model.model_version)
        .fetch_all(&pool)
        .await
        .expect("nearest chunks");
        assert_eq!(
            nearest.first().map(|n| n.0),
            Some(expected_id),
            "{question:?}: nearest chunks {nearest:?}, expected document {expected_id} ({expected})"
        );
    }
}
