//! Office, e-book, e-mail and Hangul formats end to end: real files (fixtures/office, origins
//! in fixtures/MANIFEST.tsv and fixtures/office/MANIFEST.tsv) go through upload and the worker, end `ready`, are found by words
//! printed in them, and their hits name where they sit (a heading, a slide, a sheet); hostile
//! containers generated here fail with a readable reason and the next document goes through.

use std::io::Write;

use reqwest::StatusCode;
use serde_json::Value;
use sqlx::PgPool;
use zip::write::SimpleFileOptions;

use crate::support::{TestApp, fixture};

/// Each fixture, a phrase printed in it, and the start of the location its hit must carry.
const CASES: &[(&str, &str, &str)] = &[
    (
        "ko-sample.docx",
        "Final paragraph with mixed content",
        "Sample Document › Section One › Subsection",
    ),
    (
        "tika-various-tables-headers-footnotes.docx",
        "This is a footnote",
        "Footnotes",
    ),
    (
        "ko-sample-notes.pptx",
        "Remember to explain the data table",
        "slide 2",
    ),
    ("uuid-two-sheets.xlsx", "6ff4173b", "Sheet1, rows "),
    (
        "freshwater-ducks.ods",
        "freshwater ducks per year",
        "Sheet1, row",
    ),
    (
        "lorem-ipsum-structure.odt",
        "St Bride Printing Library",
        "heading level 1.0",
    ),
    (
        "libreoffice-impress-example.odp",
        "example Impress file",
        "slide 1",
    ),
    ("tika-test.epub", "text for chapter One", "Chapter 1"),
    ("ulsan-namgu-notice-no-manifest.hwpx", "일부개정조례안", ""),
    ("tika-korean-description.hwp", "컨텐츠 분석 툴킷", ""),
    ("ko-unicode.xls", "Rocket Launch", "Sheet2, rows 1–4"),
    (
        "extraction-test.rtf",
        "Cell 2B",
        "Comprehensive Extraction Test Document › Second Section › Table Section",
    ),
    ("numbers-and-squares.csv", "Square: 49", "CSV, rows "),
    (
        "pdf-attachment.eml",
        "container email with an embedded pdf",
        "",
    ),
    // The e-mail's PDF attachment, read in the child and labelled with its name.
    (
        "pdf-attachment.eml",
        "Testing Incremental",
        "attachment testPDF_incrementalUpdates.pdf",
    ),
];

/// Text search on `api`, as JSON.
async fn search(api: &TestApp, q: &str) -> Value {
    let response = api
        .client
        .get(api.url("/api/search"))
        .query(&[("q", q), ("mode", "text"), ("k", "10")])
        .send()
        .await
        .expect("search");
    assert_eq!(response.status(), StatusCode::OK);
    response.json().await.expect("search JSON")
}

#[sqlx::test(migrator = "docket::db::MIGRATOR")]
async fn every_format_ends_ready_found_by_its_words_with_its_location(pool: PgPool) {
    let api = TestApp::builder(pool.clone()).spawn().await;
    let mut files: Vec<(&str, Vec<u8>)> = CASES
        .iter()
        .map(|(name, _, _)| (*name, fixture(&format!("office/{name}"))))
        .collect();
    files.dedup_by_key(|(name, _)| *name);
    let (status, body) = api.upload(&files).await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    let worker = api.worker().await;
    worker.run_until_idle().await;

    for (name, words, location) in CASES {
        let at = files.iter().position(|(file, _)| file == name).unwrap_or(0);
        let id = body["results"][at]["document"]["id"]
            .as_i64()
            .unwrap_or_else(|| panic!("{name} stored: {body}"));
        let doc = api.document(id).await;
        assert_eq!(doc["status"], "ready", "{name}: {doc}");
        let found = search(&api, words).await;
        let hit = found["hits"]
            .as_array()
            .expect("hits")
            .iter()
            .find(|hit| hit["document_id"] == id)
            .unwrap_or_else(|| panic!("{words:?} does not find {name}: {found}"));
        assert!(
            hit["text"].as_str().is_some_and(|t| t.contains(words)),
            "{name}: {hit}"
        );
        let label = hit["location"].as_str().unwrap_or("");
        assert!(
            label.starts_with(location),
            "{name}: location {label:?}, expected {location:?}"
        );
    }
}

/// A package of `parts` (name, content), deflated.
fn package(parts: &[(&str, &[u8])]) -> Vec<u8> {
    let mut zip = zip::ZipWriter::new(std::io::Cursor::new(Vec::new()));
    let options = SimpleFileOptions::default().compression_method(zip::CompressionMethod::Deflated);
    for (name, content) in parts {
        zip.start_file(*name, options).expect("zip entry");
        zip.write_all(content).expect("zip write");
    }
    zip.finish().expect("zip finish").into_inner()
}

const DOCX_TYPES: &[u8] = br#"<?xml version="1.0"?><Types xmlns="http://schemas.openxmlformats.org/package/2006/content-types"><Override PartName="/word/document.xml" ContentType="application/vnd.openxmlformats-officedocument.wordprocessingml.document.main+xml"/></Types>"#;

#[sqlx::test(migrator = "docket::db::MIGRATOR")]
async fn hostile_containers_fail_readably_and_the_next_document_goes_through(pool: PgPool) {
    let api = TestApp::builder(pool.clone()).spawn().await;
    // 64 MiB of one byte packs to about 64 KiB: a thousandfold.
    let flood = vec![b' '; 64 << 20];
    let bomb = package(&[
        ("[Content_Types].xml", DOCX_TYPES),
        ("word/document.xml", &flood),
    ]);
    assert!(bomb.len() < 1 << 20, "the bomb is small: {}", bomb.len());
    let lol = br#"<?xml version="1.0"?><!DOCTYPE lolz [<!ENTITY lol "lol"><!ENTITY lol1 "&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;"><!ENTITY lol2 "&lol1;&lol1;&lol1;&lol1;&lol1;&lol1;&lol1;&lol1;&lol1;&lol1;">]><w:document xmlns:w="http://schemas.openxmlformats.org/wordprocessingml/2006/main"><w:body><w:p><w:r><w:t>&lol2;</w:t></w:r></w:p></w:body></w:document>"#;
    let entities = package(&[
        ("[Content_Types].xml", DOCX_TYPES),
        ("word/document.xml", lol),
    ]);
    let good = fixture("office/ko-sample.docx");
    let (status, body) = api
        .upload(&[
            ("bomb.docx", bomb),
            ("entities.docx", entities),
            ("after.docx", good),
        ])
        .await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    let worker = api.worker().await;
    let started = std::time::Instant::now();
    worker.run_until_idle().await;
    assert!(started.elapsed().as_secs() < 30, "{:?}", started.elapsed());

    let id = |at: usize| body["results"][at]["document"]["id"].as_i64().expect("id");
    let bomb = api.document(id(0)).await;
    assert_eq!(bomb["status"], "failed", "{bomb}");
    assert_eq!(bomb["error"]["code"], "document_too_complex", "{bomb}");
    let message = bomb["error"]["message"].as_str().unwrap_or("");
    assert!(message.contains("zip bomb"), "{message}");
    let entities = api.document(id(1)).await;
    assert_eq!(entities["status"], "failed", "{entities}");
    assert_eq!(entities["error"]["code"], "document_too_complex");
    let message = entities["error"]["message"].as_str().unwrap_or("");
    assert!(message.contains("DTD"), "{message}");
    assert_eq!(api.document(id(2)).await["status"], "ready");

    // A zip cut short and a password-protected Word file (an OLE container holding an
    // encrypted package) are stored as what their names say and fail in the extract step with a
    // readable reason, as a damaged or encrypted PDF does; the next file still goes through.
    let (status, body) = api
        .upload(&[
            ("cut.docx", fixture("office/truncated.docx")),
            (
                "locked.docx",
                fixture("office/encrypted-password-tika.docx"),
            ),
            ("next.pptx", fixture("office/ko-sample-notes.pptx")),
        ])
        .await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    let started = std::time::Instant::now();
    worker.run_until_idle().await;
    assert!(started.elapsed().as_secs() < 30, "{:?}", started.elapsed());
    let id = |at: usize| body["results"][at]["document"]["id"].as_i64().expect("id");
    let cut = api.document(id(0)).await;
    assert_eq!(cut["status"], "failed", "{cut}");
    assert_eq!(cut["error"]["code"], "file_corrupt", "{cut}");
    let message = cut["error"]["message"].as_str().unwrap_or("");
    assert!(
        message.starts_with("the Word document is damaged"),
        "{message}"
    );
    let locked = api.document(id(1)).await;
    assert_eq!(locked["status"], "failed", "{locked}");
    assert_eq!(locked["error"]["code"], "encrypted", "{locked}");
    let message = locked["error"]["message"].as_str().unwrap_or("");
    assert!(message.contains("password-protected"), "{message}");
    assert_eq!(api.document(id(2)).await["status"], "ready");
}

#[sqlx::test(migrator = "docket::db::MIGRATOR")]
async fn a_legacy_word_file_is_refused_at_upload_saying_what_to_do(pool: PgPool) {
    let api = TestApp::builder(pool.clone()).spawn().await;
    let (status, body) = api
        .upload(&[(
            "lattice.doc",
            fixture("office/anl-linac-lattice-govdocs.doc"),
        )])
        .await;
    assert_eq!(status, StatusCode::UNSUPPORTED_MEDIA_TYPE, "{body}");
    let error = &body["results"][0]["error"];
    assert_eq!(error["code"], "legacy_format", "{body}");
    let message = error["message"].as_str().unwrap_or("");
    assert!(message.contains("save it as .docx"), "{message}");
    let stored: i64 = sqlx::query_scalar("select count(*) from documents")
        .fetch_one(&pool)
        .await
        .expect("count");
    assert_eq!(stored, 0, "nothing is stored");
}

#[sqlx::test(migrator = "docket::db::MIGRATOR")]
async fn info_lists_the_formats_read(pool: PgPool) {
    let api = TestApp::builder(pool).spawn().await;
    let info: Value = api
        .client
        .get(api.url("/api/info"))
        .send()
        .await
        .expect("info")
        .json()
        .await
        .expect("info JSON");
    let formats = info["formats"].as_array().expect("formats");
    let word = formats
        .iter()
        .find(|f| f["name"] == "Word document")
        .expect("Word is read");
    assert!(
        word["extensions"]
            .as_array()
            .is_some_and(|e| e.iter().any(|x| x == ".docx"))
    );
    assert!(formats.iter().any(|f| f["name"] == "HWPX document"));
}
