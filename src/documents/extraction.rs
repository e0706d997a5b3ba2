//! What a document's extraction found and how its text was obtained, as the document shows it,
//! and the transitions of the extract and OCR steps that write it.
//!
//! A document carries one description of how its text was obtained ([`ExtractionNote`]: the
//! text layer, OCR on N of M pages, OCR pending, OCR off), written in the same statement as the
//! state it describes: pending when the pages go to OCR ([`start_ocr`]), final at the extract
//! checkpoint ([`mark_embedding`]), gone when a pending OCR fails ([`super::fail_step`]). The
//! pipeline composes it from what the extraction found; clients show it as given, so the page
//! never puts "OCR off" next to a page OCR read.

use serde::{Deserialize, Serialize};
use sqlx::PgExecutor;
use sqlx::types::Json;

use super::DocumentId;

/// How a document's text was obtained.
#[derive(utoipa::ToSchema, Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ExtractionMethod {
    /// The file's own text on every page (a PDF's text layer, markup, a package's XML): no OCR
    /// was needed.
    Text,
    /// Every page read by OCR: an image, or a PDF without a usable text layer on any page.
    Ocr,
    /// A PDF's text layer, with OCR on the pages that had none usable.
    TextAndOcr,
    /// Pages without a usable text layer wait for OCR, or OCR is reading them (the document's
    /// `progress` says how far it got).
    OcrPending,
    /// Pages without a usable text layer were left unread: OCR is off.
    OcrOff,
}

/// One truthful description of how a document's text was obtained (the document's
/// `extraction`).
#[derive(utoipa::ToSchema, Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ExtractionNote {
    pub method: ExtractionMethod,
    /// The document's pages (sections, for structured formats).
    pub pages: i32,
    /// Pages without a usable text layer: those OCR read, reads, or would have read.
    pub ocr_wanted: i32,
    /// Pages OCR read text from (not those it found blank).
    pub ocr_read: i32,
    /// The one sentence to show: "Text layer on 4 of 5 pages (pdftotext); OCR on 1 of 5 pages
    /// (tesseract 5.3.0, eng): page 5: no text layer."
    pub summary: String,
}

/// What an extraction found, as the document shows it.
#[derive(Debug, Clone, Copy)]
pub struct Extraction<'a> {
    /// Which extractor read the text (`pdf`, `html`, `ocr:…`).
    pub extractor: &'a str,
    pub page_count: i32,
    /// Why pages were read by OCR, when some were.
    pub note: Option<&'a str>,
    /// The pages OCR read (1-based), in order; empty when none was.
    pub ocr_pages: &'a [i32],
    /// How the text was obtained, in one description.
    pub described: &'a ExtractionNote,
}

/// The text is extracted and chunked (in the caller's transaction): `embedding`, with what the
/// extraction found; any error and OCR progress are cleared. Returns whether the document
/// still exists.
pub async fn mark_embedding(
    executor: impl PgExecutor<'_>,
    id: DocumentId,
    extraction: &Extraction<'_>,
) -> Result<bool, sqlx::Error> {
    let updated = sqlx::query!(
        "update documents
         set status = 'embedding', error = null, extractor = $2, page_count = $3,
             progress = null, extract_note = $4, ocr_pages = $5, extraction = $6
         where id = $1",
        id.0,
        extraction.extractor,
        extraction.page_count,
        extraction.note,
        extraction.ocr_pages,
        Json(extraction.described) as _,
    )
    .execute(executor)
    .await?
    .rows_affected();
    Ok(updated == 1)
}

/// The document's pages go to OCR (in the caller's transaction): its progress starts at 0 of
/// `pages` and its extraction is `pending` (an OCR-pending description). The status stays
/// `extracting`; `extract_note`, which says why pages *were* read by OCR, waits for the
/// checkpoint. Returns whether the document still exists.
pub async fn start_ocr(
    executor: impl PgExecutor<'_>,
    id: DocumentId,
    pages: i32,
    pending: &ExtractionNote,
) -> Result<bool, sqlx::Error> {
    let updated = sqlx::query!(
        "update documents
         set progress = jsonb_build_object('step', 'ocr', 'done', 0, 'total', $2::int),
             extract_note = null,
             extraction = $3
         where id = $1",
        id.0,
        pages,
        Json(pending) as _,
    )
    .execute(executor)
    .await?
    .rows_affected();
    Ok(updated == 1)
}

/// OCR has read `done` of `total` pages; written only while the document is `extracting`.
pub async fn record_ocr_progress(
    executor: impl PgExecutor<'_>,
    id: DocumentId,
    done: i32,
    total: i32,
) -> Result<(), sqlx::Error> {
    sqlx::query!(
        "update documents
         set progress = jsonb_build_object('step', 'ocr', 'done', $2::int, 'total', $3::int)
         where id = $1
           and status = 'extracting'",
        id.0,
        done,
        total,
    )
    .execute(executor)
    .await?;
    Ok(())
}

/// A failed OCR run must not keep showing its progress, nor say that OCR is pending.
pub async fn clear_progress(
    executor: impl PgExecutor<'_>,
    id: DocumentId,
) -> Result<(), sqlx::Error> {
    sqlx::query!(
        "update documents
         set progress = null,
             extraction = case when extraction ->> 'method' = 'ocr_pending' then null
                               else extraction end
         where id = $1",
        id.0
    )
    .execute(executor)
    .await?;
    Ok(())
}
