//! OCR end to end: real scans, photos and garbage-text PDFs from the corpus (or derived from
//! it, see fixtures/MANIFEST.tsv) through the real `docket __extract-pdf` child, poppler and
//! tesseract; hostile images through the whole pipeline with a real worker.

use docket::extract::{self, ExtractError, ExtractSettings, Extracted, Extractor, sniff};
use docket::pipeline::OCR_JOB;
use sqlx::PgPool;

use crate::support::{
    document, drive, extract_settings, fixture, hash_pipeline, pipeline_worker, spawn_api, upload,
    upload_one,
};

async fn read(relative: &str, limits: &ExtractSettings) -> Result<Extracted, ExtractError> {
    let bytes = fixture(relative);
    let name = relative.rsplit('/').next().unwrap_or(relative);
    let sniffed = sniff(&bytes, name)?;
    extract::extract(&bytes, &sniffed, limits).await
}

/// English fixtures are read in English: script detection is exercised by the Korean scan and
/// the pipeline test, and skipping it keeps these tests to a few seconds.
fn english() -> ExtractSettings {
    let mut limits = extract_settings();
    limits.ocr.languages = extract::Languages::Fixed(vec!["eng".into()]);
    limits
}

fn page_text(extracted: &Extracted, number: u32) -> &str {
    extracted
        .pages
        .iter()
        .find(|p| p.number == number)
        .map_or("", |p| p.text.as_str())
}

fn hangul(text: &str) -> usize {
    text.chars()
        .filter(|c| ('\u{ac00}'..='\u{d7a3}').contains(c))
        .count()
}

#[tokio::test]
async fn a_jpeg_photo_of_a_page_is_read_by_ocr() {
    let extracted = read("image/c02-22.jpg", &english()).await.unwrap();
    assert_eq!(extracted.extractor, Extractor::Ocr);
    assert_eq!(extracted.pages.len(), 1);
    let text = page_text(&extracted, 1);
    for word in ["garden", "kitchen", "Watson", "listened"] {
        assert!(text.contains(word), "{word:?} missing from {text}");
    }
    let label = extracted.label();
    assert!(label.starts_with("ocr (tesseract "), "{label}");
    assert!(label.ends_with(", eng)"), "{label}");
}

#[tokio::test]
async fn a_korean_scan_gives_korean_text() {
    let extracted = read("image/cjk-ko-doc-p1.png", &extract_settings())
        .await
        .unwrap();
    let text = page_text(&extracted, 1);
    assert!(text.contains("매뉴얼"), "{text}");
    assert!(
        hangul(text) > 100,
        "only {} syllables: {text}",
        hangul(text)
    );
    // Script detection chose Korean rather than every language at once.
    let label = extracted.label();
    assert!(label.contains("kor"), "{label}");
    assert!(!label.contains("rus"), "{label}");
}

#[tokio::test]
async fn a_multi_page_tiff_keeps_its_page_numbers() {
    let extracted = read("image/two-pages.tif", &english()).await.unwrap();
    let numbers: Vec<u32> = extracted.pages.iter().map(|p| p.number).collect();
    assert_eq!(numbers, vec![1, 2]);
    assert!(page_text(&extracted, 1).contains("garden"), "{extracted:?}");
    assert!(page_text(&extracted, 2).contains("Hello"), "{extracted:?}");
    assert!(!page_text(&extracted, 1).contains("Hello"), "{extracted:?}");
}

#[tokio::test]
async fn a_mixed_pdf_ocrs_only_its_pages_without_text() {
    let extracted = read("pdf/mixed-text-and-scan.pdf", &english())
        .await
        .unwrap();
    assert_eq!(extracted.pages.len(), 5);
    let run = extracted.ocr.as_ref().expect("OCR ran");
    assert_eq!(run.pages, vec![5]);
    assert!(page_text(&extracted, 2).contains("Hello, here is some text without a meaning."));
    assert!(page_text(&extracted, 5).contains("garden"));
    let label = extracted.label();
    assert!(label.contains(" + ocr (tesseract"), "{label}");
    assert!(label.ends_with("on 1 of 5 pages"), "{label}");
    assert_eq!(
        extracted.note().as_deref(),
        Some("page 5: no text layer; read by OCR")
    );
}

#[tokio::test]
async fn a_pdf_whose_text_layer_has_no_letters_goes_to_ocr() {
    // Its font has no Unicode mapping: the text layer is `"7+%-`, the page shows "Phone".
    let extracted = read("pdf/truetype_font_nomapping.pdf", &english())
        .await
        .unwrap();
    assert!(extracted.ocr.is_some());
    assert!(page_text(&extracted, 1).contains("Phone"), "{extracted:?}");
    let note = extracted.note().unwrap_or_default();
    assert!(note.contains("without letters"), "{note}");
}

#[tokio::test]
async fn a_garbage_text_layer_is_dropped_and_the_page_goes_to_ocr() {
    // GBK bytes shown as Latin-1 (`¹ØÓÚºì¾ü…`): the text layer is junk, so it is not kept and
    // the page is read by OCR instead. (Its fonts are not embedded, so poppler draws the same
    // mojibake; what OCR reads there is noise, but never the junk of the text layer.)
    let extracted = read("pdf/XiaoBiaoSong.pdf", &english()).await.unwrap();
    assert!(matches!(
        extracted.unreadable.as_slice(),
        [(1, extract::TextProblem::Garbage { share })] if *share > 0.7
    ));
    assert_eq!(
        extracted.ocr.as_ref().map(|run| run.pages.clone()),
        Some(vec![1])
    );
    assert!(!page_text(&extracted, 1).contains("ØÓÚ"));
    let note = extracted.note().unwrap_or_default();
    assert_eq!(
        note,
        "page 1: a text layer of unmappable glyphs (garbage); read by OCR"
    );
}

#[tokio::test]
async fn more_pages_than_the_ocr_cap_fail_with_a_readable_reason() {
    let mut limits = extract_settings();
    limits.ocr.max_pages = 1;
    let err = read("image/two-pages.tif", &limits).await.unwrap_err();
    assert_eq!(err.code(), "ocr_page_limit");
    assert_eq!(
        err.to_string(),
        "2 pages need OCR, more than the limit of 1 (DOCKET_OCR_MAX_PAGES)"
    );
}

#[sqlx::test(migrator = "docket::db::MIGRATOR")]
async fn a_scanned_pdf_ends_ready_through_the_ocr_step(pool: PgPool) {
    let api = spawn_api(pool.clone(), None).await;
    let pipeline = hash_pipeline(&pool).await;
    let worker = pipeline_worker(&pool, &pipeline, 2);
    let id = upload_one(&api, "c02-22.pdf", fixture("pdf/c02-22.pdf")).await;
    drive(&pool, &worker, 20).await;

    let doc = document(&api, id).await;
    assert_eq!(doc["status"], "ready", "{doc}");
    assert_eq!(doc["page_count"], 1);
    assert!(doc["progress"].is_null(), "{doc}");
    let extractor = doc["extractor"].as_str().unwrap_or_default();
    assert!(extractor.starts_with("ocr (tesseract "), "{extractor}");
    assert_eq!(doc["extract_note"], "page 1: no text layer; read by OCR");
    let chunks = crate::support::chunks(&pool, id).await;
    assert!(!chunks.is_empty());
    assert!(chunks.iter().all(|(page, _)| *page == 1));
    let text: String = chunks.iter().map(|(_, t)| t.as_str()).collect();
    assert!(text.contains("garden") && text.contains("Watson"), "{text}");
    // The OCR ran as its own job kind, not inside the extract job.
    let ocr_jobs: i64 =
        sqlx::query_scalar("select count(*) from jobs where kind = $1 and status = 'done'")
            .bind(OCR_JOB)
            .fetch_one(&pool)
            .await
            .unwrap();
    assert_eq!(ocr_jobs, 1);
}

#[sqlx::test(migrator = "docket::db::MIGRATOR")]
async fn hostile_images_fail_with_a_reason_and_the_worker_keeps_working(pool: PgPool) {
    let api = spawn_api(pool.clone(), None).await;
    let pipeline = hash_pipeline(&pool).await;
    let worker = pipeline_worker(&pool, &pipeline, 2);
    let (status, body) = upload(
        &api,
        &[
            ("bomb.png", fixture("image/bomb-20000x20000.png")),
            ("cut.jpg", fixture("image/c02-22.truncated.jpg")),
            (
                "notes.txt",
                b"Plain words that must still be indexed.".to_vec(),
            ),
        ],
    )
    .await;
    assert_eq!(status, reqwest::StatusCode::CREATED, "{body}");
    let ids: Vec<i64> = (0..3)
        .map(|i| body["results"][i]["document"]["id"].as_i64().unwrap())
        .collect();
    assert_eq!(body["results"][0]["document"]["content_type"], "image/png");
    drive(&pool, &worker, 20).await;

    let bomb = document(&api, ids[0]).await;
    assert_eq!(bomb["status"], "failed");
    assert_eq!(bomb["error"]["code"], "image_too_large");
    assert_eq!(
        bomb["error"]["message"],
        "the image is 20000 × 20000 pixels; docket reads images up to 50 megapixels"
    );
    let cut = document(&api, ids[1]).await;
    assert_eq!(cut["status"], "failed");
    assert_eq!(cut["error"]["code"], "image_malformed");
    assert_eq!(
        cut["error"]["message"],
        "the image is damaged: the JPEG is truncated (no end-of-image marker)"
    );
    assert_eq!(document(&api, ids[2]).await["status"], "ready");
    // A photo uploaded after them is still read.
    let photo = upload_one(&api, "page.jpg", fixture("image/c02-22.jpg")).await;
    drive(&pool, &worker, 20).await;
    let doc = document(&api, photo).await;
    assert_eq!(doc["status"], "ready", "{doc}");
}
