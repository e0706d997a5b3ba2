//! Extraction end to end: real fixture files through `sniff` and `extract`, with PDFs in the
//! real `docket __extract-pdf` child and poppler's `pdftotext`.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use docket::extract::{
    self, DocKind, ExtractError, ExtractSettings, Extracted, Extractor, extract_pdf, sniff,
};

fn fixture(relative: &str) -> Vec<u8> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("fixtures")
        .join(relative);
    std::fs::read(&path).unwrap_or_else(|err| panic!("reading {}: {err}", path.display()))
}

fn limits(timeout: Duration) -> ExtractSettings {
    ExtractSettings {
        timeout,
        ..ExtractSettings::new(PathBuf::from(env!("CARGO_BIN_EXE_docket")))
    }
}

async fn extract_fixture(relative: &str) -> Result<Extracted, ExtractError> {
    let bytes = fixture(relative);
    let name = relative.rsplit('/').next().unwrap_or(relative);
    let sniffed = sniff(&bytes, name)?;
    extract::extract(&bytes, &sniffed, &limits(Duration::from_secs(30))).await
}

fn all_text(extracted: &Extracted) -> String {
    extracted
        .pages
        .iter()
        .map(|p| p.text.as_str())
        .collect::<Vec<_>>()
        .join("\n")
}

fn is_hangul(c: char) -> bool {
    ('\u{ac00}'..='\u{d7a3}').contains(&c)
}

#[test]
fn a_pdf_named_txt_is_a_pdf() {
    let sniffed = sniff(
        &fixture("malformed/la-precinct-bulletin-2014-p1.txt"),
        "bulletin.txt",
    )
    .unwrap();
    assert_eq!(sniffed.kind, DocKind::Pdf);
    assert_eq!(sniffed.content_type, "application/pdf");
}

#[test]
fn a_png_named_pdf_is_a_png_image() {
    let sniffed = sniff(&fixture("malformed/typewriter.pdf"), "typewriter.pdf").unwrap();
    assert_eq!(sniffed.kind, DocKind::Image);
    assert_eq!(sniffed.content_type, "image/png");
}

#[test]
fn an_empty_upload_is_empty() {
    let err = sniff(&fixture("malformed/empty.pdf"), "empty.pdf").unwrap_err();
    assert_eq!(err.code(), "empty_file");
}

#[tokio::test]
async fn euc_kr_text_decodes_to_korean() {
    let bytes = fixture("text/cjk-euc_kr.txt");
    let sniffed = sniff(&bytes, "cjk-euc_kr.txt").unwrap();
    assert_eq!(sniffed.kind, DocKind::Text);
    assert_eq!(sniffed.encoding, Some(encoding_rs::EUC_KR));
    let extracted = extract_fixture("text/cjk-euc_kr.txt").await.unwrap();
    assert_eq!(extracted.extractor, Extractor::Text);
    let text = all_text(&extracted);
    assert!(
        text.starts_with("◎ 파이썬(Python)은 배우기 쉽고, 강력한 프로그래밍 언어입니다."),
        "{text}"
    );
    assert!(!text.contains('\u{fffd}'));
    // The last line spells rare syllables with KS X 1001 make-up sequences.
    assert!(
        text.ends_with("☆첫가끝: 날아라 쓔쓔쓩~ 닁큼! 뜽금없이 전홥니다. 뷁. 그런거 읎다."),
        "{text}"
    );
}

#[tokio::test]
async fn shift_jis_text_decodes_to_japanese() {
    let bytes = fixture("text/cjk-shift_jis.txt");
    let sniffed = sniff(&bytes, "cjk-shift_jis.txt").unwrap();
    assert_eq!(sniffed.encoding, Some(encoding_rs::SHIFT_JIS));
    let text = all_text(&extract_fixture("text/cjk-shift_jis.txt").await.unwrap());
    assert!(
        text.starts_with("Python の開発は、1990 年ごろから開始されています。"),
        "{text}"
    );
    assert!(text.contains("「モンティ パイソン」"));
}

#[tokio::test]
async fn utf16_with_a_bom_decodes_in_either_byte_order() {
    let sample = "Grüße aus Köln.\n한국어와 日本語.";
    for little_endian in [true, false] {
        let mut bytes = if little_endian {
            vec![0xff, 0xfe]
        } else {
            vec![0xfe, 0xff]
        };
        for unit in sample.encode_utf16() {
            let pair = if little_endian {
                unit.to_le_bytes()
            } else {
                unit.to_be_bytes()
            };
            bytes.extend_from_slice(&pair);
        }
        let sniffed = sniff(&bytes, "sample.txt").unwrap();
        assert_eq!(sniffed.kind, DocKind::Text);
        let limits = limits(Duration::from_secs(5));
        let extracted = extract::extract(&bytes, &sniffed, &limits).await.unwrap();
        assert_eq!(all_text(&extracted), sample);
    }
}

#[tokio::test]
async fn markdown_is_recognised_once_the_bytes_are_text() {
    let bytes = fixture("text/pdfjs-README.md");
    assert_eq!(sniff(&bytes, "README.md").unwrap().kind, DocKind::Markdown);
    let text = all_text(&extract_fixture("text/pdfjs-README.md").await.unwrap());
    assert!(text.starts_with("# PDF.js"));
}

#[tokio::test]
async fn html_drops_head_styles_and_scripts_and_keeps_paragraphs() {
    let extracted = extract_fixture("html/python-tutorial-introduction.html")
        .await
        .unwrap();
    assert_eq!(extracted.extractor, Extractor::Html);
    let text = all_text(&extracted);
    assert!(!text.contains("@media"), "style content leaked");
    assert!(!text.contains("<script"));
    assert!(text.contains(
        "\n\nIn the following examples, input and output are distinguished by the presence or absence of prompts"
    ));
    assert!(!text.contains("\n\n\n"));

    let page = b"<!DOCTYPE html><html><head><title>Title only</title></head><body>\
        <p>First   paragraph\n spans lines.</p><script>alert('leak')</script>\
        <div>Second<br>line two</div><noscript>enable js</noscript></body></html>";
    let sniffed = sniff(page, "page.bin").unwrap();
    let extracted = extract::extract(page, &sniffed, &limits(Duration::from_secs(5)))
        .await
        .unwrap();
    assert_eq!(
        all_text(&extracted),
        "First paragraph spans lines.\n\nSecond\nline two"
    );
}

#[tokio::test]
async fn korean_html_gives_hangul() {
    let text = all_text(
        &extract_fixture("html/debian-faq-choosing.ko.html")
            .await
            .unwrap(),
    );
    assert!(text.contains("데비안"), "{}", &text[..text.len().min(500)]);
}

#[tokio::test]
async fn a_real_pdf_keeps_its_page_numbers() {
    let extracted = extract_fixture("pdf/pdflatex-outline.pdf").await.unwrap();
    let numbers: Vec<u32> = extracted.pages.iter().map(|p| p.number).collect();
    assert_eq!(numbers, vec![1, 2, 3, 4]);
    assert!(extracted.pages[0].text.contains("Contents"));
    assert!(
        extracted.pages[1]
            .text
            .contains("Hello, here is some text without a meaning.")
    );
    assert!(
        extracted.pages[3]
            .text
            .contains("the length of words should match the language.")
    );
}

#[tokio::test]
async fn the_korean_pdf_gives_hangul() {
    let extracted = extract_fixture("pdf/cjk-ko-doc.pdf").await.unwrap();
    assert_eq!(extracted.pages.len(), 6);
    let text = all_text(&extracted);
    let hangul = text.chars().filter(|&c| is_hangul(c)).count();
    assert!(
        hangul > 500,
        "only {hangul} Hangul syllables via {:?}",
        extracted.extractor
    );
    assert!(
        text.contains("간단 매뉴얼"),
        "{}",
        &text[..text.len().min(300)]
    );
}

/// Its fonts name the Adobe-Japan1 collection without a ToUnicode map: poppler needs the CID
/// maps of Debian's poppler-data (installed by scripts/install-deps.sh) to map them, and
/// without them pdftotext prints "Missing language pack" and extracts nothing.
#[tokio::test]
async fn a_japanese_pdf_whose_fonts_need_poppler_data_gives_its_text_layer() {
    let extracted = extract_fixture("pdf/jo.pdf").await.unwrap();
    assert!(
        extracted.ocr.is_none(),
        "read by OCR, not from its text layer"
    );
    let text = all_text(&extracted);
    assert!(text.contains("わたくしといふ現象は"), "{text}");
    assert!(text.contains("ひとつの青い照明です"), "{text}");
}

#[tokio::test]
async fn the_encrypted_pdf_is_pdf_encrypted() {
    let err = extract_fixture("pdf/libreoffice-writer-password.pdf")
        .await
        .unwrap_err();
    assert_eq!(err, ExtractError::PdfEncrypted);
    assert_eq!(err.code(), "pdf_encrypted");
    assert_eq!(err.to_string(), "the PDF is encrypted");
}

#[tokio::test]
async fn with_ocr_off_the_scanned_pdf_has_no_text_layer() {
    let bytes = fixture("pdf/c02-22.pdf");
    let sniffed = sniff(&bytes, "c02-22.pdf").unwrap();
    let mut limits = limits(Duration::from_secs(30));
    limits.ocr.enabled = false;
    let err = extract::extract(&bytes, &sniffed, &limits)
        .await
        .unwrap_err();
    assert_eq!(err, ExtractError::NoTextLayer);
    assert_eq!(err.code(), "no_text_layer");
}

#[tokio::test]
async fn a_memory_cap_too_small_to_parse_is_out_of_memory() {
    let bytes = fixture("pdf/cjk-ko-doc.pdf");
    let limits = ExtractSettings {
        memory_bytes: 8 << 20,
        ..limits(Duration::from_secs(30))
    };
    let err = extract_pdf(&bytes, &limits).await.unwrap_err();
    assert_eq!(err, ExtractError::OutOfMemory);
    assert_eq!(err.code(), "extraction_out_of_memory");
}

#[tokio::test]
async fn a_missing_pdftotext_leaves_pdf_extract_as_the_judge() {
    let limits = ExtractSettings {
        pdftotext: PathBuf::from("/nonexistent/pdftotext"),
        ..limits(Duration::from_secs(30))
    };
    let ok = extract_pdf(&fixture("pdf/pdflatex-outline.pdf"), &limits)
        .await
        .unwrap();
    assert_eq!(ok.extractor, Extractor::PdfExtract);
    let err = extract_pdf(&fixture("malformed/bad1.pdf"), &limits)
        .await
        .unwrap_err();
    assert_eq!(err.code(), "pdf_malformed", "{err}");
}

/// Every malformed fixture ends in text or a classified, permanent error, within the deadline
/// (two extractors, each with its own timeout), and the test process survives them all.
#[tokio::test]
async fn every_malformed_file_gives_text_or_a_classified_error() {
    let timeout = Duration::from_secs(5);
    let limits = limits(timeout);
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/malformed");
    let mut names: Vec<String> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|entry| entry.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    assert!(names.len() >= 14, "malformed fixtures missing: {names:?}");

    let mut table = vec![format!(
        "{:<36} {:<26} {:>8}  detail",
        "file", "outcome", "ms"
    )];
    let mut failures = Vec::new();
    for name in &names {
        let bytes = std::fs::read(dir.join(name)).unwrap();
        let started = Instant::now();
        let outcome = match sniff(&bytes, name) {
            Err(err) => Err(err),
            Ok(sniffed) => {
                // Generous outer bound: a hang here would fail rather than stall the suite.
                let bound = timeout * 2 + Duration::from_secs(10);
                match tokio::time::timeout(bound, extract::extract(&bytes, &sniffed, &limits)).await
                {
                    Ok(result) => result,
                    Err(_) => {
                        failures.push(format!("{name}: not finished after {bound:?}"));
                        continue;
                    }
                }
            }
        };
        let ms = started.elapsed().as_millis();
        let (label, detail) = match &outcome {
            Ok(extracted) => {
                let chars = all_text(extracted).chars().count();
                if chars == 0 {
                    failures.push(format!("{name}: Ok with no text"));
                }
                (
                    format!("text via {}", extracted.extractor.as_str()),
                    format!("{} pages, {chars} chars", extracted.pages.len()),
                )
            }
            Err(err) => {
                if !err.is_permanent() {
                    failures.push(format!("{name}: unclassified failure: {err}"));
                }
                (err.code().to_owned(), err.to_string())
            }
        };
        table.push(format!("{name:<36} {label:<26} {ms:>8}  {detail}"));
    }
    println!("{}", table.join("\n"));
    assert!(failures.is_empty(), "{failures:#?}");
}

#[tokio::test]
async fn an_extractor_past_its_deadline_is_killed_and_reported_as_a_timeout() {
    // A stand-in pdftotext that never answers: pdf-extract rejects the file, so the fallback's
    // verdict decides, and it must be the deadline's.
    let dir = tempfile::tempdir().unwrap();
    let stalled = dir.path().join("pdftotext");
    std::fs::write(&stalled, "#!/bin/sh\nexec sleep 300\n").unwrap();
    let mut permissions = std::fs::metadata(&stalled).unwrap().permissions();
    std::os::unix::fs::PermissionsExt::set_mode(&mut permissions, 0o755);
    std::fs::set_permissions(&stalled, permissions).unwrap();
    let limits = ExtractSettings {
        pdftotext: stalled,
        ..limits(Duration::from_secs(1))
    };
    let err = extract_pdf(&fixture("malformed/invalid.pdf"), &limits)
        .await
        .unwrap_err();
    assert_eq!(err, ExtractError::Timeout);
    assert_eq!(err.to_string(), "extraction timed out");
}

#[tokio::test]
async fn the_pdf_extractors_see_none_of_docket_s_environment() {
    // A stand-in pdftotext that answers with the environment it was given, as the page's text.
    let dir = tempfile::tempdir().unwrap();
    let tattler = dir.path().join("pdftotext");
    std::fs::write(&tattler, "#!/bin/sh\nexec /usr/bin/env\n").unwrap();
    let mut permissions = std::fs::metadata(&tattler).unwrap().permissions();
    std::os::unix::fs::PermissionsExt::set_mode(&mut permissions, 0o755);
    std::fs::set_permissions(&tattler, permissions).unwrap();
    let limits = ExtractSettings {
        pdftotext: tattler,
        ..limits(Duration::from_secs(10))
    };
    assert!(
        std::env::var_os("PATH").is_some() && std::env::vars().count() > 4,
        "the test process has an environment to leak"
    );
    let extracted = extract_pdf(&fixture("malformed/invalid.pdf"), &limits)
        .await
        .expect("the stand-in answers");
    let seen = all_text(&extracted);
    let names: Vec<&str> = seen
        .lines()
        .filter_map(|line| line.split_once('=').map(|(name, _)| name))
        .collect();
    assert!(names.contains(&"PATH"), "{seen}");
    for name in &names {
        // Besides what it needs, only the child's own instructions (DOCKET_PDF_*, and its
        // allocator's arena setting).
        assert!(
            [
                "PATH",
                "LANG",
                "LC_ALL",
                "LC_CTYPE",
                "PWD",
                "SHLVL",
                "_",
                "MIMALLOC_ARENA_RESERVE"
            ]
            .contains(name)
                || name.starts_with("DOCKET_PDF_"),
            "the PDF child passed {name} on: {seen}"
        );
    }
}
