//! From candidates to hits: one query fetches the chunks' text, page, location, language and
//! file name, and each chunk gets its snippet.

use std::collections::{BTreeSet, HashMap};

use sqlx::PgPool;

use super::snippet::snippet;
use super::vector::Route;
use super::{Candidate, Hit};
use crate::analysis::{self, Language, Script};

/// The hits of a set of candidates, by chunk.
pub(super) struct Fetched(HashMap<(i64, i32), Hit>);

impl Fetched {
    /// The hit of `candidate`, if its chunk still exists.
    pub(super) fn get(&self, candidate: &Candidate) -> Option<Hit> {
        self.0
            .get(&(candidate.document_id, candidate.chunk_index))
            .cloned()
    }

    /// Like [`Fetched::get`], without a copy when nothing else needs the hit.
    pub(super) fn take(&mut self, candidate: &Candidate) -> Option<Hit> {
        self.0
            .remove(&(candidate.document_id, candidate.chunk_index))
    }
}

/// A fetched chunk with its document's name and type.
struct Row {
    document_id: i64,
    chunk_index: i32,
    page: i32,
    location: Option<String>,
    text: String,
    language: Option<String>,
    filename: String,
    content_type: String,
}

/// Fetches the chunks of `first` and `more` (the same chunk may be in both) and cuts their
/// snippets for the query's `terms`.
pub(super) async fn fetch<'a>(
    pool: &PgPool,
    terms: &BTreeSet<&str>,
    first: &'a [Candidate],
    more: impl Iterator<Item = &'a Candidate>,
    routes: &[Route],
) -> Result<Fetched, sqlx::Error> {
    let mut wanted: HashMap<(i64, i32), &Candidate> = HashMap::new();
    for candidate in first.iter().chain(more) {
        wanted
            .entry((candidate.document_id, candidate.chunk_index))
            .or_insert(candidate);
    }
    let ids: Vec<i64> = wanted.keys().map(|k| k.0).collect();
    let indexes: Vec<i32> = wanted.keys().map(|k| k.1).collect();
    let rows = sqlx::query_as!(
        Row,
        "select c.document_id, c.chunk_index, c.page, c.location, c.text, c.language, d.filename,
                d.content_type
         from unnest($1::bigint[], $2::int[]) as wanted(document_id, chunk_index)
         join chunks c using (document_id, chunk_index)
         join documents d on d.id = c.document_id",
        &ids[..],
        &indexes[..],
    )
    .fetch_all(pool)
    .await?;
    // A chunk deleted between the queries is simply left out.
    let hits = rows
        .into_iter()
        .filter_map(|row| {
            let candidate = wanted.get(&(row.document_id, row.chunk_index))?;
            let hit = hit_of(row, candidate, terms, routes);
            Some(((hit.document_id, hit.chunk_index), hit))
        })
        .collect();
    Ok(Fetched(hits))
}

/// The hit of one fetched chunk: the candidate's score and version, and a snippet for `terms`.
fn hit_of(row: Row, candidate: &Candidate, terms: &BTreeSet<&str>, routes: &[Route]) -> Hit {
    let Row {
        document_id,
        chunk_index,
        page,
        location,
        text,
        language,
        filename,
        content_type,
    } = row;
    let location = location.or_else(|| {
        let paginated = content_type == "application/pdf" || content_type.starts_with("image/");
        paginated.then(|| format!("page {page}"))
    });
    // A chunk not indexed yet has no language recorded: detect it as indexing will.
    let language = language
        .as_deref()
        .map_or_else(|| analysis::detect(&text), Language::from_code);
    let (snippet, highlights) = snippet(&text, language, terms);
    Hit {
        document_id,
        filename,
        content_type,
        page,
        location,
        chunk_index,
        relevance: candidate.relevance,
        score: candidate.score,
        text,
        snippet,
        highlights,
        model_version: candidate
            .route
            .and_then(|at| routes.get(at))
            .map(|r| r.version.model_version.clone()),
        signals: candidate.signals,
    }
}

/// The script each of `chunks` is mostly written in (from its first few hundred characters);
/// a chunk that vanished is left out.
pub(super) async fn scripts(
    pool: &PgPool,
    chunks: &[(i64, i32)],
) -> Result<HashMap<(i64, i32), Option<Script>>, sqlx::Error> {
    if chunks.is_empty() {
        return Ok(HashMap::new());
    }
    let ids: Vec<i64> = chunks.iter().map(|k| k.0).collect();
    let indexes: Vec<i32> = chunks.iter().map(|k| k.1).collect();
    let rows = sqlx::query!(
        r#"select c.document_id, c.chunk_index, left(c.text, 400) as "start!"
         from unnest($1::bigint[], $2::int[]) as wanted(document_id, chunk_index)
         join chunks c using (document_id, chunk_index)"#,
        &ids[..],
        &indexes[..],
    )
    .fetch_all(pool)
    .await?;
    Ok(rows
        .into_iter()
        .map(|row| {
            (
                (row.document_id, row.chunk_index),
                analysis::script(&row.start),
            )
        })
        .collect())
}
