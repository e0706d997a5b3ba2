//! The keyword index: the only writer of `chunk_terms` and of the chunks' analysis columns
//! (`language`, `term_count`, `analyzer`).
//!
//! Two ways in. The extract step indexes the chunks it writes in its own transaction
//! ([`write()`]), so a document is searchable by keyword the moment its chunks commit. Chunks
//! written without postings (rows from before keyword ranking, bulk loads) or by an older
//! analysis are indexed by [`index_pending`], which every process runs in the background in
//! short batches, locking rows with `skip locked` so that processes share the work.

use std::collections::HashMap;

use sqlx::PgConnection;

use crate::analysis::{self, ANALYZER_VERSION, Language};

/// One chunk's analysis: what `chunks` records and what `chunk_terms` holds for it.
#[derive(Debug, Clone, PartialEq)]
pub struct ChunkTerms {
    pub chunk_index: i32,
    pub language: Language,
    /// Its length in terms.
    pub term_count: i32,
    /// Each distinct term and how often it occurs.
    pub postings: Vec<(String, i16)>,
}

/// Analyses one chunk's text (CPU work: call it off the async threads for many chunks).
pub fn analyze_chunk(chunk_index: i32, text: &str) -> ChunkTerms {
    let language = analysis::detect(text);
    let terms = analysis::analyze(text, language);
    let mut counts: HashMap<String, i16> = HashMap::new();
    for term in &terms {
        let count = counts.entry(term.text.clone()).or_insert(0);
        *count = count.saturating_add(1);
    }
    let mut postings: Vec<(String, i16)> = counts.into_iter().collect();
    postings.sort();
    ChunkTerms {
        chunk_index,
        language,
        term_count: i32::try_from(terms.len()).unwrap_or(i32::MAX),
        postings,
    }
}

/// Writes the postings of `chunks` of `document_id`, which must have none yet (see
/// [`forget`]). The chunk rows record their analysis themselves: the extract step inserts them
/// with [`ChunkTerms::language`], [`ChunkTerms::term_count`] and [`ANALYZER_VERSION`] (an
/// update afterwards would write every chunk row twice), [`index_pending`] updates them.
pub async fn write(
    conn: &mut PgConnection,
    document_id: i64,
    chunks: &[ChunkTerms],
) -> Result<(), sqlx::Error> {
    // A few thousand postings per statement keep the arrays and the statement small.
    let mut batch = Batch::default();
    for chunk in chunks {
        batch.add(chunk);
        if batch.terms.len() >= 5000 {
            batch.flush(conn, document_id).await?;
        }
    }
    batch.flush(conn, document_id).await
}

/// Records on existing chunk rows the analysis their postings were written with.
async fn mark(
    conn: &mut PgConnection,
    document_id: i64,
    chunks: &[ChunkTerms],
) -> Result<(), sqlx::Error> {
    let indexes: Vec<i32> = chunks.iter().map(|c| c.chunk_index).collect();
    let languages: Vec<&str> = chunks.iter().map(|c| c.language.code()).collect();
    let counts: Vec<i32> = chunks.iter().map(|c| c.term_count).collect();
    sqlx::query!(
        "update chunks c
         set language = u.language, term_count = u.term_count, analyzer = $5
         from unnest($2::int[], $3::text[], $4::int[]) as u(chunk_index, language, term_count)
         where c.document_id = $1
           and c.chunk_index = u.chunk_index",
        document_id,
        &indexes[..],
        &languages[..] as &[&str],
        &counts[..],
        ANALYZER_VERSION,
    )
    .execute(&mut *conn)
    .await?;
    Ok(())
}

/// Postings waiting to be inserted, as the columns of one `unnest`.
#[derive(Default)]
struct Batch {
    terms: Vec<String>,
    indexes: Vec<i32>,
    tfs: Vec<i16>,
    lengths: Vec<i16>,
}

impl Batch {
    fn add(&mut self, chunk: &ChunkTerms) {
        let length = i16::try_from(chunk.term_count).unwrap_or(i16::MAX);
        for (term, tf) in &chunk.postings {
            self.terms.push(term.clone());
            self.indexes.push(chunk.chunk_index);
            self.tfs.push(*tf);
            self.lengths.push(length);
        }
    }

    async fn flush(
        &mut self,
        conn: &mut PgConnection,
        document_id: i64,
    ) -> Result<(), sqlx::Error> {
        if self.terms.is_empty() {
            return Ok(());
        }
        sqlx::query!(
            "insert into chunk_terms (term, document_id, chunk_index, tf, length)
             select u.term, $1, u.chunk_index, u.tf, u.length
             from unnest($2::text[], $3::int[], $4::int2[], $5::int2[])
                  as u(term, chunk_index, tf, length)",
            document_id,
            &self.terms[..],
            &self.indexes[..],
            &self.tfs[..],
            &self.lengths[..],
        )
        .execute(&mut *conn)
        .await?;
        *self = Batch::default();
        Ok(())
    }
}

/// Deletes the postings of every chunk of `document_id`: call it in the transaction that
/// replaces the document's chunks.
pub async fn forget(conn: &mut PgConnection, document_id: i64) -> Result<(), sqlx::Error> {
    sqlx::query!(
        "delete from chunk_terms
         where document_id = $1",
        document_id,
    )
    .execute(conn)
    .await?;
    Ok(())
}

/// Indexes up to `batch` chunks that have no postings from the current analysis yet, in one
/// transaction; returns how many it indexed (0 when nothing is left).
pub async fn index_pending(pool: &sqlx::PgPool, batch: i64) -> Result<usize, sqlx::Error> {
    let mut tx = pool.begin().await?;
    let rows = sqlx::query!(
        "select document_id, chunk_index, text
         from chunks
         where analyzer is null or analyzer < $1
         order by document_id, chunk_index
         limit $2
         for update skip locked",
        ANALYZER_VERSION,
        batch,
    )
    .fetch_all(&mut *tx)
    .await?;
    if rows.is_empty() {
        return Ok(0);
    }
    let analysed = tokio::task::spawn_blocking(move || {
        rows.into_iter()
            .map(|row| (row.document_id, analyze_chunk(row.chunk_index, &row.text)))
            .collect::<Vec<_>>()
    })
    .await
    .map_err(|err| sqlx::Error::Protocol(format!("the analysis task failed: {err}")))?;
    let count = analysed.len();
    let mut by_document: Vec<(i64, Vec<ChunkTerms>)> = Vec::new();
    for (document_id, chunk) in analysed {
        match by_document.last_mut() {
            Some((id, chunks)) if *id == document_id => chunks.push(chunk),
            _ => by_document.push((document_id, vec![chunk])),
        }
    }
    for (document_id, chunks) in &by_document {
        let indexes: Vec<i32> = chunks.iter().map(|c| c.chunk_index).collect();
        sqlx::query!(
            "delete from chunk_terms
             where document_id = $1
               and chunk_index = any($2::int[])",
            document_id,
            &indexes[..],
        )
        .execute(&mut *tx)
        .await?;
        write(&mut tx, *document_id, chunks).await?;
        mark(&mut tx, *document_id, chunks).await?;
    }
    tx.commit().await?;
    Ok(count)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_chunk_counts_each_distinct_term_once_with_its_frequency() {
        let chunk = analyze_chunk(
            3,
            "Workers claim jobs. A worker that dies loses its lease, and the job is claimed again.",
        );
        assert_eq!(chunk.chunk_index, 3);
        assert_eq!(chunk.language.code(), "en");
        let tf = |term: &str| chunk.postings.iter().find(|(t, _)| t == term).map(|p| p.1);
        assert_eq!(tf("worker"), Some(2));
        assert_eq!(tf("claim"), Some(2));
        assert_eq!(tf("the"), None);
        let total: i32 = chunk.postings.iter().map(|(_, tf)| i32::from(*tf)).sum();
        assert_eq!(total, chunk.term_count);
    }
}
