//! The local encoder in int8 (`DOCKET_LOCAL_PRECISION=int8`) against f32, with
//! multilingual-e5-small: every reference text's vector within a cosine of 0.99 of f32's, a
//! version name of its own so the two never mix, and, through upload and `/api/search`, a
//! Korean and an English question finding the same passage first in both precisions.
//!
//! Like tests/api/multilingual.rs, these need the installed model (`make test` installs it)
//! and fail, never skip, without it.

use std::sync::OnceLock;

use docket::embed::{LocalEmbedder, Precision, Purpose};
use serde_json::Value;
use sqlx::PgPool;

use crate::multilingual::{self, DOCUMENTS, cosine, describe, short};
use crate::support;

/// The int8 model, loaded (and quantised) once for the whole test binary.
fn int8_model() -> LocalEmbedder {
    static MODEL: OnceLock<LocalEmbedder> = OnceLock::new();
    MODEL
        .get_or_init(|| {
            support::load_local_model_in(
                multilingual::model_dir(),
                "scripts/get-model.sh multilingual-e5-small",
                Precision::Int8,
            )
        })
        .clone()
}

#[test]
fn int8_vectors_of_every_reference_text_are_within_0_99_of_f32() {
    let fixture = multilingual::fixture();
    let (f32, int8) = (multilingual::model(), int8_model());
    assert_eq!(int8.precision(), Precision::Int8);
    let mut worst = (f32::MAX, String::new());
    let mut compared = 0;
    for purpose in [Purpose::Query, Purpose::Passage] {
        let texts: Vec<String> = fixture
            .texts
            .iter()
            .filter(|r| r.purpose() == purpose)
            .map(|r| r.text.clone())
            .collect();
        let exact = f32.embed_blocking(&texts, purpose).expect("f32 embeds");
        let quantised = int8.embed_blocking(&texts, purpose).expect("int8 embeds");
        for ((text, a), b) in texts.iter().zip(&exact).zip(&quantised) {
            let similarity = cosine(a, b);
            assert!(
                similarity >= 0.99,
                "cosine {similarity} for {:?}",
                short(text)
            );
            assert_ne!(a, b, "int8 gave f32's very vector for {:?}", short(text));
            if similarity < worst.0 {
                worst = (similarity, short(text));
            }
            compared += 1;
        }
    }
    assert!(compared >= 45, "{compared} texts");
    eprintln!(
        "lowest cosine int8 against f32 {:.6} for {:?}",
        worst.0, worst.1
    );
}

#[test]
fn int8_has_a_model_version_of_its_own() {
    let (f32, int8) = (multilingual::model(), int8_model());
    let (a, b) = (f32.model_id(), int8.model_id());
    assert!(b.ends_with("-int8:384"), "{b}");
    assert!(!a.contains("int8"), "{a}");
    // The same model otherwise: the version differs only by the suffix.
    assert_eq!(b.replace("-int8:", ":"), a);
}

/// A second fresh, migrated database beside `pool`'s (dropped by [`drop_second`]): the two
/// precisions are separate installations, each with its own active model version.
async fn second_database(pool: &PgPool) -> (PgPool, String) {
    let url = support::database_url(pool).await;
    let mut url = url::Url::parse(&url).expect("a URL");
    // Test databases' names already take PostgreSQL's 63 characters: keep their unique tail.
    let own = url.path().trim_start_matches('/').to_owned();
    let name = format!("int8_{}", &own[own.len().saturating_sub(40)..]);
    // The name is the test database's own plus a suffix (not user input). A run that failed
    // half-way may have left one behind.
    sqlx::query(sqlx::AssertSqlSafe(format!(
        "drop database if exists \"{name}\""
    )))
    .execute(pool)
    .await
    .expect("drop a leftover");
    sqlx::query(sqlx::AssertSqlSafe(format!("create database \"{name}\"")))
        .execute(pool)
        .await
        .expect("create the second database");
    url.set_path(&name);
    let other = PgPool::connect(url.as_str()).await.expect("connect");
    docket::db::MIGRATOR.run(&other).await.expect("migrate");
    (other, name)
}

async fn drop_second(pool: &PgPool, other: PgPool, name: &str) {
    other.close().await;
    sqlx::query(sqlx::AssertSqlSafe(format!(
        "drop database if exists \"{name}\" with (force)"
    )))
    .execute(pool)
    .await
    .expect("drop the second database");
}

/// The first hit for `question` over the documents, in f32 and in int8 (each on a database of
/// its own).
async fn first_hits(f32_pool: &PgPool, int8_pool: &PgPool, question: &str) -> (Value, Value) {
    let exact =
        multilingual::vector_search_with(f32_pool, multilingual::model(), &DOCUMENTS, question)
            .await;
    let quantised =
        multilingual::vector_search_with(int8_pool, int8_model(), &DOCUMENTS, question).await;
    let first = |hits: &[Value]| hits.first().cloned().expect("a hit");
    let (a, b) = (first(&exact), first(&quantised));
    assert_eq!(
        (&a["filename"], &a["chunk_index"]),
        (&b["filename"], &b["chunk_index"]),
        "f32 {:#?}\nint8 {:#?}",
        describe(&exact),
        describe(&quantised)
    );
    assert!(
        b["model_version"]
            .as_str()
            .unwrap_or("")
            .contains("-int8:384"),
        "{b}"
    );
    (a, b)
}

#[sqlx::test(migrator = "docket::db::MIGRATOR")]
async fn a_korean_question_finds_the_same_passage_first_in_int8_and_f32(pool: PgPool) {
    let (other, name) = second_database(&pool).await;
    let (_, int8) = first_hits(
        &pool,
        &other,
        "노트북에서 리눅스가 잘 동작하는지 알아볼 수 있는 사이트가 있나요?",
    )
    .await;
    drop_second(&pool, other, &name).await;
    assert_eq!(int8["filename"], "debian-faq-choosing.ko.html", "{int8}");
    assert!(
        int8["text"]
            .as_str()
            .unwrap_or("")
            .contains("linux-on-laptops.com"),
        "{int8}"
    );
}

#[sqlx::test(migrator = "docket::db::MIGRATOR")]
async fn an_english_question_finds_the_same_passage_first_in_int8_and_f32(pool: PgPool) {
    let (other, name) = second_database(&pool).await;
    // A question with one clear answer: a vaguer one ("how do I serve the viewer from my own
    // machine during development") had its first two hits 0.003 apart in f32, in two
    // documents, so the order of that near-tie flipped between CPUs, not between precisions.
    let (_, int8) = first_hits(
        &pool,
        &other,
        "why must I start a local web server instead of opening the PDF from a file URL?",
    )
    .await;
    drop_second(&pool, other, &name).await;
    assert_eq!(int8["filename"], "pdfjs-README.md", "{int8}");
    assert!(
        int8["text"]
            .as_str()
            .unwrap_or("")
            .contains("start a local web server"),
        "{int8}"
    );
}
