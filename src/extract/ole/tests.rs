//! The compound-file readers on real files (fixtures/office, origins in its MANIFEST.tsv) and
//! on hostile ones built here.

use super::*;
use crate::extract::Location;

fn fixture(name: &str) -> Vec<u8> {
    let path = format!("{}/fixtures/office/{name}", env!("CARGO_MANIFEST_DIR"));
    std::fs::read(&path).unwrap_or_else(|e| panic!("{path}: {e}"))
}

fn all_text(sections: &[Section]) -> String {
    sections
        .iter()
        .map(|s| s.text.as_str())
        .collect::<Vec<_>>()
        .join("\n\n")
}

/// A copy of `bytes` whose directory's first sector is chained to itself in the FAT.
fn with_cyclic_directory(bytes: &[u8]) -> Vec<u8> {
    let word = |at: usize| u32::from_le_bytes(bytes[at..at + 4].try_into().unwrap()) as usize;
    let sector = 1usize << u16::from_le_bytes([bytes[30], bytes[31]]).min(12);
    let (directory, first_fat) = (word(48), word(76));
    let mut out = bytes.to_vec();
    let entry = (first_fat + 1) * sector + directory * 4;
    out[entry..entry + 4].copy_from_slice(&(directory as u32).to_le_bytes());
    out
}

#[test]
fn a_korean_press_release_reads_whole_with_its_tables() {
    let sections = extract_ole(&fixture("noori-press-release-2018.hwp")).unwrap();
    let text = all_text(&sections);
    assert!(text.contains("한국형발사체"), "{text}");
    // No control characters or replacement characters survive.
    let stray = text
        .chars()
        .find(|c| (c.is_control() && !matches!(c, '\n' | '\t')) || *c == '\u{fffd}');
    assert_eq!(stray, None, "{text}");
    // Tables come out one row a line, cells joined by "; ".
    assert!(text.lines().any(|l| l.contains("; ")), "{text}");
    // Paragraphs in outline styles are headings: the body text sits under them.
    let under = sections
        .iter()
        .find(|s| s.text.contains("대국민 명칭 공모전"))
        .unwrap();
    assert!(
        under
            .location
            .label()
            .contains("명칭공모전에 1만건 이상 응모"),
        "{:?}",
        under.location
    );
}

#[test]
fn the_tika_description_starts_with_its_title() {
    let sections = extract_ole(&fixture("tika-korean-description.hwp")).unwrap();
    let text = all_text(&sections);
    assert!(text.starts_with("Apache Tika - 컨텐츠 분석 툴킷"), "{text}");
    assert!(text.contains("Apache Software Foundation"));
}

#[test]
fn a_distribution_document_is_decrypted() {
    let sections = extract_ole(&fixture("distribution-tender-notice.hwp")).unwrap();
    let text = all_text(&sections);
    assert!(text.contains("시설관리원 용역업체"), "{text}");
    // Read from the decrypted body, not the preview.
    assert!(
        sections
            .iter()
            .all(|s| !s.location.label().contains("preview")),
        "{sections:?}"
    );
}

#[test]
fn a_password_protected_hwp_is_refused_as_encrypted() {
    let error = extract_ole(&fixture("encrypted-password.hwp")).unwrap_err();
    assert_eq!(
        error,
        ExtractError::Encrypted {
            format: "HWP document"
        }
    );
    assert!(error.to_string().contains("password"));
}

#[test]
fn an_xls_workbook_reads_every_sheet_with_its_name() {
    let bytes = fixture("ko-unicode.xls");
    assert_eq!(classify(&bytes).unwrap(), OleKind::Excel97);
    let sections = extract_ole(&bytes).unwrap();
    let text = all_text(&sections);
    for word in ["홍길동", "김다영", "Rocket Launch"] {
        assert!(text.contains(word), "{word} missing: {text}");
    }
    let sheets: Vec<&str> = sections
        .iter()
        .filter_map(|s| match &s.location {
            Location::Sheet { name, .. } => Some(name.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(sheets.len(), sections.len());
    let mut distinct = sheets.clone();
    distinct.dedup();
    assert_eq!(distinct.len(), 2, "{sheets:?}");
}

#[test]
fn legacy_word_and_encrypted_office_files_are_refused_with_what_to_do() {
    let error = extract_ole(&fixture("anl-linac-lattice-govdocs.doc")).unwrap_err();
    assert_eq!(error.code(), "legacy_format");
    assert_eq!(
        error.to_string(),
        "legacy Word 97–2003 document files are not read; \
         open it in Word or LibreOffice and save it as .docx"
    );
    let error = extract_ole(&fixture("encrypted-password-tika.docx")).unwrap_err();
    assert_eq!(error.code(), "encrypted");
    assert!(
        error
            .to_string()
            .starts_with("the Office document is password-protected")
    );
}

#[test]
fn hwp_3_is_refused_with_what_to_do() {
    let mut bytes = b"HWP Document File V3.00 \x1a\x01\x02\x03\x04\x05".to_vec();
    bytes.resize(200, 0);
    assert!(is_hwp3(&bytes) && !is_ole(&bytes));
    let error = extract_ole(&bytes).unwrap_err();
    assert_eq!(error.code(), "legacy_format");
    assert!(error.to_string().contains("save it as .hwpx or .hwp (5.0)"));
}

#[test]
fn cyclic_sectors_and_cut_files_end_as_damaged_not_in_a_loop() {
    let bytes = fixture("tika-korean-description.hwp");
    let cyclic = with_cyclic_directory(&bytes);
    let error = extract_ole(&cyclic).unwrap_err();
    assert_eq!(error.code(), "file_corrupt", "{error}");
    for len in [8, 600, 4096, bytes.len() / 2] {
        let error = extract_ole(&bytes[..len]).unwrap_err();
        assert!(
            matches!(error.code(), "file_corrupt" | "document_too_complex"),
            "{len} bytes: {error}"
        );
    }
}

#[test]
fn flipped_bytes_never_panic() {
    // Every 97th byte of the body changed: records, sizes and deflate data go wrong in many
    // ways; each must be an error or text, never a panic.
    let bytes = fixture("noori-press-release-2018.hwp");
    for offset in [0usize, 13, 41, 77] {
        let mut damaged = bytes.clone();
        for at in (4096 + offset..damaged.len()).step_by(97) {
            damaged[at] ^= 0x5a;
        }
        let _ = extract_ole(&damaged);
    }
}
