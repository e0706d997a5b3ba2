//! The extract step: a document's bytes become pages of text, then chunks; the chunks with
//! their keyword postings, the document's new status and the embed job commit together with
//! this job's completion.
//!
//! Each part has a deadline (`DOCKET_EXTRACT_TIMEOUT_SECS`): PDFs in their child processes,
//! text and HTML parsing and chunking here; past it the document fails with
//! `extraction_timeout` and the job ends, so a hostile file cannot hold a lease for hours.
//!
//! A document with pages that need OCR (an image, a scan, garbage text) is handed to the `ocr`
//! step ([`super::ocr`]) instead, in the same kind of transaction: OCR takes seconds a page,
//! and it runs under its own job kind and concurrency so that it never holds the extract slots
//! other documents are waiting for.

use std::sync::Arc;

use super::Pipeline;
use super::jobs::{EmbedCause, EmbedJob, ExtractJob, OcrJob, for_document};
use crate::analysis::ANALYZER_VERSION;
use crate::chunk::{Chunk, chunk_pages};
use crate::documents::{self, DocumentId, Extraction, Step};
use crate::extract::{self, DocKind, ExtractError, Extracted, Page};
use crate::queue::{self, NewJob};
use crate::search::index::{self, ChunkTerms};
use crate::worker::{Job, JobError, Outcome, ResultExt};

pub(super) async fn run(
    pipeline: Arc<Pipeline>,
    job: Job,
    ExtractJob { document_id }: ExtractJob,
) -> Result<Outcome, JobError> {
    let pool = &pipeline.pool;
    let Some(document) = documents::get(pool, document_id).await.retryable()? else {
        tracing::info!(document = %document_id, "document deleted before extraction; nothing to do");
        return Ok(Outcome::Complete);
    };
    let Some(bytes) = documents::bytes(pool, document_id).await.retryable()? else {
        return Ok(Outcome::Complete);
    };
    documents::mark_extracting(pool, document_id)
        .await
        .retryable()?;

    // PDFs run in child processes that are killed at their own deadline; everything else is
    // parsed in this process, under the same deadline.
    let deadline = pipeline.extraction.timeout;
    let started = std::time::Instant::now();
    let extracted = match extract::sniff(&bytes, &document.filename) {
        Ok(sniffed) if sniffed.kind == DocKind::Pdf => {
            extract::extract_text_layer(&bytes, &sniffed, &pipeline.extraction).await
        }
        Ok(sniffed) => tokio::time::timeout(
            deadline,
            extract::extract_text_layer(&bytes, &sniffed, &pipeline.extraction),
        )
        .await
        .unwrap_or(Err(ExtractError::Timeout)),
        Err(err) => Err(err),
    };
    let extracted = match extracted {
        Ok(extracted) if extracted.needs_ocr() && pipeline.extraction.ocr.enabled => {
            let pages = extracted.unreadable.len();
            if let Err(err) = extract::ocr::check_page_cap(pages, &pipeline.extraction.ocr) {
                return Err(failed(&pipeline, &job, document_id, &err).await);
            }
            return hand_to_ocr(&pipeline, &job, document_id, &extracted).await;
        }
        // No OCR to do: only the verdict on the whole (a document without any text fails).
        Ok(extracted) => {
            extract::read_unreadable(&bytes, extracted, &pipeline.extraction, &|_, _| {}).await
        }
        Err(err) => Err(err),
    };
    crate::metrics::global().step_time("extraction", started.elapsed());
    let extracted = match extracted {
        Ok(extracted) => extracted,
        Err(err) => return Err(failed(&pipeline, &job, document_id, &err).await),
    };
    drop(bytes);
    finish(&pipeline, &job, document_id, extracted).await
}

/// Enqueues the OCR step for a document and completes this job, in one transaction; the
/// document stays `extracting`, with its OCR progress at zero.
async fn hand_to_ocr(
    pipeline: &Pipeline,
    job: &Job,
    document_id: DocumentId,
    extracted: &Extracted,
) -> Result<Outcome, JobError> {
    let total = extracted.unreadable.len();
    let pages = i32::try_from(total).unwrap_or(i32::MAX);
    let mut tx = pipeline.pool.begin().await.retryable()?;
    let pending = super::note::pending(extracted);
    let still_there = documents::start_ocr(&mut *tx, document_id, pages, &pending)
        .await
        .retryable()?;
    if !still_there {
        return Ok(Outcome::Complete);
    }
    let ocr = NewJob::of(&OcrJob { document_id }, &job.id).fatal()?;
    let ocr = for_document(&mut *tx, ocr, document_id).await.retryable()?;
    queue::enqueue(&mut tx, &ocr).await.retryable()?;
    queue::complete_in(&mut tx, &job.lease).await.retryable()?;
    tx.commit().await.retryable()?;
    tracing::info!(document = %document_id, pages = total, "pages need OCR; handed to the ocr step");
    Ok(Outcome::CompletedInTransaction)
}

/// Chunks the extracted pages and commits the checkpoint: chunks, status, the next job and
/// this job's completion, all or nothing.
pub(super) async fn finish(
    pipeline: &Pipeline,
    job: &Job,
    document_id: DocumentId,
    extracted: Extracted,
) -> Result<Outcome, JobError> {
    let label = extracted.label();
    let note = extracted.note();
    let described = super::note::finished(&extracted);
    let page_count = i32::try_from(extracted.pages.len()).unwrap_or(i32::MAX);
    let ocr_pages: Vec<i32> = super::note::ocr_read(&extracted)
        .into_iter()
        .map(|n| i32::try_from(n).unwrap_or(i32::MAX))
        .collect();
    // A chunk never spans two pages, so the location of the page (section) it starts on is
    // the chunk's.
    let labels: Vec<Option<String>> = extracted
        .pages
        .iter()
        .map(|page| extracted.location_of(page.number))
        .collect();
    let (chunks, terms) = match chunk_and_analyse(pipeline, extracted.pages).await? {
        Some(chunked) => chunked,
        None => return Err(failed(pipeline, job, document_id, &ExtractError::Timeout).await),
    };
    if chunks.is_empty() {
        return Err(failed(pipeline, job, document_id, &ExtractError::NoText).await);
    }
    let extraction = Extraction {
        extractor: &label,
        page_count,
        note: note.as_deref(),
        ocr_pages: &ocr_pages,
        described: &described,
    };
    let locations: Vec<Option<String>> = chunks
        .iter()
        .map(|chunk| {
            let at = usize::try_from(chunk.page).ok()?.checked_sub(1)?;
            labels.get(at).cloned().flatten()
        })
        .collect();
    let written = Written {
        chunks: &chunks,
        locations: &locations,
        terms: &terms,
    };
    let started = std::time::Instant::now();
    let outcome = checkpoint(pipeline, job, document_id, &extraction, &written).await;
    crate::metrics::global().step_time("writes", started.elapsed());
    let outcome = outcome?;
    if outcome == Outcome::CompletedInTransaction {
        tracing::info!(
            document = %document_id,
            pages = page_count,
            chunks = chunks.len(),
            extractor = %label,
            "extracted"
        );
    }
    Ok(outcome)
}

/// Chunks the pages and analyses each chunk's keywords, off the async threads (it is CPU
/// work), within the extraction deadline; `None` when the deadline passed.
async fn chunk_and_analyse(
    pipeline: &Pipeline,
    pages: Vec<Page>,
) -> Result<Option<(Vec<Chunk>, Vec<ChunkTerms>)>, JobError> {
    let chunking = pipeline.chunking;
    let tokens = pipeline.tokens.clone();
    let work = tokio::task::spawn_blocking(move || {
        let metrics = crate::metrics::global();
        let started = std::time::Instant::now();
        let chunks = chunk_pages(&pages, &chunking, &*tokens);
        metrics.step_time("chunking", started.elapsed());
        let started = std::time::Instant::now();
        let terms: Vec<ChunkTerms> = chunks
            .iter()
            .map(|c| index::analyze_chunk(c.index, &c.text))
            .collect();
        metrics.step_time("keyword_indexing", started.elapsed());
        (chunks, terms)
    });
    // A thread cannot be killed, so the job stops waiting; chunking is linear in the text and
    // bounded by the extractors' output, so the thread ends soon after.
    match tokio::time::timeout(pipeline.extraction.timeout, work).await {
        Ok(joined) => joined.retryable().map(Some),
        Err(_) => Ok(None),
    }
}

/// What the checkpoint writes: chunks, each one's location label, and their keyword terms.
struct Written<'a> {
    chunks: &'a [Chunk],
    locations: &'a [Option<String>],
    terms: &'a [ChunkTerms],
}

/// The checkpoint: the chunks and their keyword postings replace the old ones, the document
/// moves to `embedding`, its embed job is enqueued and this job completes, in one transaction.
/// A document deleted meanwhile ends the job with nothing written.
async fn checkpoint(
    pipeline: &Pipeline,
    job: &Job,
    document_id: DocumentId,
    extraction: &Extraction<'_>,
    written: &Written<'_>,
) -> Result<Outcome, JobError> {
    let mut tx = pipeline.pool.begin().await.retryable()?;
    sqlx::query!(
        "delete from chunks
         where document_id = $1",
        document_id.0
    )
    .execute(&mut *tx)
    .await
    .retryable()?;
    index::forget(&mut tx, document_id.0).await.retryable()?;
    insert_chunks(&mut tx, document_id, written)
        .await
        .retryable()?;
    index::write(&mut tx, document_id.0, written.terms)
        .await
        .retryable()?;
    let still_there = documents::mark_embedding(&mut *tx, document_id, extraction)
        .await
        .retryable()?;
    if !still_there {
        // Deleted while we extracted: the chunks' foreign key would have failed anyway.
        return Ok(Outcome::Complete);
    }
    let embed = EmbedJob {
        document_id,
        model_version: pipeline.model.model_version.clone(),
    };
    let embed = NewJob::of(&embed, &EmbedCause::Extracted(job.id)).fatal()?;
    let embed = for_document(&mut *tx, embed, document_id)
        .await
        .retryable()?;
    queue::enqueue(&mut tx, &embed).await.retryable()?;
    queue::complete_in(&mut tx, &job.lease).await.retryable()?;
    tx.commit().await.retryable()?;
    Ok(Outcome::CompletedInTransaction)
}

/// Records why extraction (or its OCR step) failed on the document, and says how the job
/// should end.
pub(super) async fn failed(
    pipeline: &Pipeline,
    job: &Job,
    id: DocumentId,
    err: &ExtractError,
) -> JobError {
    if !err.is_permanent() {
        return JobError::Retry {
            error: anyhow::anyhow!("{err}"),
            after: None,
        };
    }
    // A failed OCR run must not keep showing its progress.
    if let Err(db) = documents::clear_progress(&pipeline.pool, id).await {
        return JobError::Retry {
            error: anyhow::Error::new(db).context("clearing the OCR progress"),
            after: None,
        };
    }
    // OCR is a phase of extraction: its failure settles the document as the extract step's.
    let settled = match pipeline.pool.acquire().await {
        Ok(mut conn) => {
            let (code, message) = (err.code(), err.to_string());
            let failure = (code, message.as_str());
            let permanent = err.is_permanent();
            super::settle::failed_step(&mut conn, id, job.id, Step::Extract, failure, permanent)
                .await
        }
        Err(err) => Err(err),
    };
    if let Err(db) = settled {
        return JobError::Retry {
            error: anyhow::Error::new(db).context("recording the extraction failure"),
            after: None,
        };
    }
    tracing::info!(document = %id, reason = %err, "extraction failed");
    JobError::Fatal(anyhow::anyhow!("{err}"))
}

async fn insert_chunks(
    conn: &mut sqlx::PgConnection,
    id: DocumentId,
    written: &Written<'_>,
) -> Result<(), sqlx::Error> {
    // One statement per thousand chunks keeps the arrays and the statement small.
    let batches = written
        .chunks
        .chunks(1000)
        .zip(written.locations.chunks(1000))
        .zip(written.terms.chunks(1000));
    for ((batch, locations), analysed) in batches {
        let indexes: Vec<i32> = batch.iter().map(|c| c.index).collect();
        let pages: Vec<i32> = batch.iter().map(|c| c.page).collect();
        let texts: Vec<&str> = batch.iter().map(|c| c.text.as_str()).collect();
        let tokens: Vec<i32> = batch.iter().map(|c| c.token_count).collect();
        let hashes: Vec<&[u8]> = batch.iter().map(|c| c.content_hash.as_slice()).collect();
        let languages: Vec<&str> = analysed.iter().map(|t| t.language.code()).collect();
        let term_counts: Vec<i32> = analysed.iter().map(|t| t.term_count).collect();
        sqlx::query!(
            "insert into chunks (document_id, chunk_index, page, text, token_count, content_hash,
                                 language, term_count, location, analyzer)
             select $1, u.*, $10
             from unnest($2::int[], $3::int[], $4::text[], $5::int[], $6::bytea[], $7::text[],
                         $8::int[], $9::text[]) as u",
            id.0,
            &indexes,
            &pages,
            // Borrowed arrays: the macros expect owned elements, which would copy every chunk.
            &texts as &[&str],
            &tokens,
            &hashes as &[&[u8]],
            &languages as &[&str],
            &term_counts,
            locations as &[Option<String>],
            ANALYZER_VERSION,
        )
        .execute(&mut *conn)
        .await?;
    }
    Ok(())
}
