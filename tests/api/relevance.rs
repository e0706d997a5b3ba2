//! Search people can trust, through `/api/search` with the default model
//! (multilingual-e5-small) over real documents in Korean, English and French: a question in
//! one language finds the passage in another, every hit carries a relevance in [0, 1] that the
//! hybrid order follows, and a question nothing answers gets "no good match" instead of a page
//! of confident-looking noise.

use reqwest::StatusCode;
use serde_json::Value;
use sqlx::PgPool;

use crate::multilingual::{DOCUMENTS, describe, model};
use crate::support::{self, TestApp};
use docket::embed::Embedder;
use docket::search::Searcher;

/// An app with the default model and the default relevance threshold, the documents ingested.
async fn app_with_documents(pool: &PgPool) -> TestApp {
    let embedder = Embedder::Local(model());
    let chunking = docket::chunk::ChunkConfig::default();
    let version = docket::models::ModelVersion::of(&embedder, &chunking);
    let api = TestApp::builder(pool.clone())
        .max_upload_bytes(4 << 20)
        .embedder(embedder.clone())
        // As `docket serve` builds it: the default threshold, not the tests' usual 0.
        .searcher(Searcher::new(pool.clone(), embedder, version))
        .spawn()
        .await;
    for (name, path) in DOCUMENTS {
        api.upload_one(name, support::fixture(path)).await;
    }
    api.worker().await.run_until_idle().await;
    let not_ready: i64 =
        sqlx::query_scalar("select count(*) from documents where status <> 'ready'")
            .fetch_one(pool)
            .await
            .expect("count");
    assert_eq!(not_ready, 0, "every document is ready");
    api
}

/// `/api/search` for `question` with `extra` parameters; the body of a 200.
async fn search(api: &TestApp, question: &str, extra: &str) -> Value {
    let q: String = url::form_urlencoded::byte_serialize(question.as_bytes()).collect();
    let (status, body) = api.search(&format!("q={q}{extra}")).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    body
}

fn hits(body: &Value) -> &Vec<Value> {
    body["hits"].as_array().expect("hits")
}

fn relevance(hit: &Value) -> f64 {
    hit["relevance"].as_f64().expect("relevance is a number")
}

/// The rank (from 1) of the first hit of `filename` whose text contains `evidence`.
fn rank_of(hits: &[Value], filename: &str, evidence: &str) -> Option<usize> {
    hits.iter()
        .position(|h| {
            h["filename"] == filename && h["text"].as_str().unwrap_or("").contains(evidence)
        })
        .map(|at| at + 1)
}

#[sqlx::test(migrator = "docket::db::MIGRATOR")]
async fn a_question_in_one_language_finds_the_passage_in_another(pool: PgPool) {
    let api = app_with_documents(&pool).await;
    let cases = [
        // Korean question, English passage: "How do I start a local web server to view
        // pdf.js when the browser will not open files directly?" The README says
        // "start a local web server … $ npx gulp server".
        (
            "브라우저가 파일을 직접 열지 못할 때 pdf.js를 보려면 로컬 웹 서버를 어떻게 실행하나요?",
            "pdfjs-README.md",
            "gulp server",
        ),
        // English question, Korean passage: the CJK-ko manual says "[euc] 옵션을 주면
        // kotex-euc 패키지를 로드한다" (given [euc], kotex.sty loads kotex-euc).
        (
            "Which package does kotex.sty load when I give it the euc option?",
            "cjk-ko-doc.pdf",
            "kotex-euc",
        ),
    ];
    // Hybrid, and vector alone, in the top 5 (these two pass uncentred as well; the cases
    // below are the ones centring by script decides).
    for mode in ["hybrid", "vector"] {
        for (question, filename, evidence) in cases {
            let body = search(&api, question, &format!("&k=5&mode={mode}")).await;
            let found = hits(&body);
            let rank = rank_of(found, filename, evidence);
            assert!(
                rank.is_some(),
                "{mode}: {question}: the {filename} passage with {evidence:?} is not in the top 5: {:#?}",
                describe(found)
            );
        }
    }
    // The vectors alone, where centring by script is what lifts the Korean answer above the
    // English README's chunks (uncentred they ranked 2nd and 5th).
    let lifted = [
        // The FAQ names linux-on-laptops.com for checking Linux on a laptop (랩톱).
        (
            "Is there a website that tells whether Linux works well on a laptop?",
            "debian-faq-choosing.ko.html",
            "linux-on-laptops.com",
            1,
        ),
        // "Give this option if you named a TrueType font as the user font, or text
        // extraction will not work."
        (
            "I set a TrueType user font in CJK-ko and can't copy text out of the PDF; which option fixes that?",
            "cjk-ko-doc.pdf",
            "텍스트 추출",
            3,
        ),
    ];
    for (question, filename, evidence, within) in lifted {
        let body = search(&api, question, "&k=10&mode=vector&min_relevance=0").await;
        let found = hits(&body);
        let rank = rank_of(found, filename, evidence);
        assert!(
            rank.is_some_and(|r| r <= within),
            "vector: {question}: the {filename} passage with {evidence:?} ranks {rank:?}, not within {within}: {:#?}",
            describe(found)
        );
    }
}

#[sqlx::test(migrator = "docket::db::MIGRATOR")]
async fn relevance_is_a_probability_and_an_unanswerable_question_gets_no_good_match(pool: PgPool) {
    let api = app_with_documents(&pool).await;
    // Nothing in a Korean Debian FAQ, a Korean LaTeX manual, the pdf.js README or a French
    // tax form says how to boil an egg.
    let unanswerable = [
        "How long should I boil an egg to keep the yolk soft?",
        "김치찌개를 맛있게 끓이려면 어떻게 해야 하나요?",
    ];
    for question in unanswerable {
        let body = search(&api, question, "").await;
        assert_eq!(body["no_good_match"], true, "{question}: {body:#}");
        let weak = hits(&body);
        assert!(
            weak.len() <= docket::search::WEAK_HITS,
            "{question}: {weak:#?}"
        );
        assert!(
            weak.iter()
                .all(|h| relevance(h) < docket::search::GOOD_MATCH),
            "{question}: {:?}",
            weak.iter().map(relevance).collect::<Vec<_>>()
        );
        // Asked for every hit, it gets k of them, each with its (low) relevance.
        let all = search(&api, question, "&min_relevance=0&k=8").await;
        assert_eq!(hits(&all).len(), 8, "{question}");
        assert_eq!(all["min_relevance"], 0.0);
    }

    // Every mode: relevance in [0, 1]; hybrid hits come in its order.
    let answered = "pdf.js를 로컬에서 보려면 웹 서버를 어떻게 띄우나요?";
    for mode in ["hybrid", "vector", "text"] {
        let body = search(
            &api,
            answered,
            &format!("&mode={mode}&min_relevance=0&k=10"),
        )
        .await;
        let found = hits(&body);
        assert!(!found.is_empty(), "{mode}");
        let values: Vec<f64> = found.iter().map(relevance).collect();
        assert!(
            values.iter().all(|r| (0.0..=1.0).contains(r)),
            "{mode}: {values:?}"
        );
        if mode == "hybrid" {
            assert!(
                values.windows(2).all(|w| w[0] >= w[1]),
                "hybrid follows relevance: {values:?}"
            );
        }
    }

    // A threshold outside [0, 1] is refused.
    let (status, body) = api.search("q=pdf&min_relevance=1.5").await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
    assert_eq!(body["error"]["code"], "invalid_min_relevance", "{body}");
}
