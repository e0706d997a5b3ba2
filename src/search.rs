//! Search: every vector and full-text query over the stored chunks, in one place.
//!
//! Three modes, each returning the best `k` chunks:
//!
//! - **vector**: the query is embedded by this process's embedder (it must be the model version
//!   of the stored vectors, else the distances mean nothing) and the nearest chunks by cosine
//!   distance come from that version's partial HNSW index. The query repeats the index's
//!   expression and predicate exactly (`(embedding::vector(DIMS)) <=> …` with
//!   `where model_version = '…'`), or PostgreSQL would not use the index. `hnsw.ef_search` is set
//!   per query, and pgvector's iterative scan (`relaxed_order`) keeps a document filter from
//!   silently returning fewer than `k` hits: without it the index yields `ef_search` candidates
//!   and the filter discards those of other documents.
//! - **text**: PostgreSQL full-text search (`websearch_to_tsquery('simple', …)` over the
//!   generated `chunks.tsv`, ranked by `ts_rank_cd`). Scripts without spaces (Chinese, Japanese)
//!   form one "word" per run of characters, so when full text finds fewer than `k` hits a
//!   substring match (ILIKE, served by the pg_trgm index) adds more, after the full-text hits.
//! - **hybrid** (the default): reciprocal rank fusion (k = 60) of the vector and text lists, so
//!   neither score scale dominates.
//!
//! Each hit carries the chunk text and a snippet with highlight *ranges* (character offsets),
//! never markup: clients build the emphasis themselves, so a document can never inject HTML.

use std::collections::HashMap;

use pgvector::Vector;
use serde::Serialize;
use sqlx::PgPool;

use crate::documents::DocumentId;
use crate::embed::{EmbedError, Embedder};
use crate::models::ModelVersion;

/// Longest query accepted, in characters.
pub const MAX_QUERY_CHARS: usize = 1000;
/// Most hits one search returns.
pub const MAX_K: i64 = 100;
/// Hits returned when the caller does not say.
pub const DEFAULT_K: i64 = 10;
/// HNSW candidate list size, above any `k` we serve. `docket bench search` measured recall@10
/// of 0.97 at 100 on 100,000 chunks for passage queries; raising it to 800 bought little
/// (BENCHMARKS.md).
pub const EF_SEARCH: i64 = 100;
/// The constant of reciprocal rank fusion, as in the original paper (Cormack et al., 2009).
const RRF_K: f64 = 60.0;
/// Characters of context a snippet shows around its first match.
const SNIPPET_CHARS: usize = 240;

/// How to search.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, serde::Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum Mode {
    /// Reciprocal rank fusion of vector and text.
    #[default]
    Hybrid,
    /// Nearest neighbours of the embedded query.
    Vector,
    /// Full-text (and substring) match.
    Text,
}

impl Mode {
    /// Parses `hybrid`, `vector` or `text`.
    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "hybrid" => Some(Mode::Hybrid),
            "vector" => Some(Mode::Vector),
            "text" => Some(Mode::Text),
            _ => None,
        }
    }

    fn uses_vectors(self) -> bool {
        self != Mode::Text
    }
}

/// One search.
#[derive(Debug, Clone)]
pub struct SearchRequest {
    pub query: String,
    pub k: i64,
    pub mode: Mode,
    /// Only chunks of this document.
    pub document: Option<DocumentId>,
    /// Search vectors of this version; the active one when `None`.
    pub model_version: Option<String>,
}

/// A highlighted part of a snippet: `[start, end)` in characters (Unicode scalar values).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Highlight {
    pub start: usize,
    pub end: usize,
}

/// One result (DESIGN.md section 8).
#[derive(Debug, Clone, Serialize)]
pub struct Hit {
    pub document_id: i64,
    pub filename: String,
    pub page: i32,
    pub chunk_index: i32,
    /// Higher is better. vector: cosine similarity; text: `ts_rank_cd` (0 for substring-only
    /// hits); hybrid: the fused reciprocal-rank score. Comparable within one response only.
    pub score: f64,
    pub text: String,
    /// Plain text around the first match (the chunk's start when nothing matches literally).
    pub snippet: String,
    /// Where the query's words occur in `snippet`.
    pub highlights: Vec<Highlight>,
}

/// What a search found.
#[derive(Debug, Clone, Serialize)]
pub struct SearchResults {
    pub mode: Mode,
    /// The model version whose vectors were searched (the active one for text searches, when
    /// there is one).
    pub model_version: Option<String>,
    /// Whether nearness of these vectors means similar meaning (false for the hashing
    /// embedder, which only sees spellings).
    pub semantic: bool,
    pub hits: Vec<Hit>,
}

/// Why a search could not run.
#[derive(Debug, thiserror::Error)]
pub enum SearchError {
    #[error("the query is empty: type one or more words")]
    EmptyQuery,
    #[error("the query is {0} characters long; the limit is {MAX_QUERY_CHARS}")]
    QueryTooLong(usize),
    #[error("k must be between 1 and {MAX_K}, not {0}")]
    InvalidK(i64),
    #[error("model version {0:?} is not registered")]
    UnknownModel(String),
    #[error("no model version is active yet: start a worker so one is registered")]
    NoActiveModel,
    #[error(
        "model version {requested:?} cannot be searched by vector here: this server embeds queries with {available:?}, and vectors of different versions cannot be compared"
    )]
    ModelNotEmbeddable {
        requested: String,
        available: String,
    },
    #[error(
        "model version {0:?} has no vectors yet: wait until documents are ready, or search with mode=text"
    )]
    NoVectors(String),
    #[error("embedding the query failed: {0}")]
    Embed(#[from] EmbedError),
    #[error("the database failed: {0}")]
    Database(#[from] sqlx::Error),
}

/// Runs searches with the embedder of this process.
#[derive(Debug, Clone)]
pub struct Searcher {
    pool: PgPool,
    embedder: Embedder,
    /// The version `embedder` produces: the only one whose vectors this process can search.
    model: ModelVersion,
}

/// A candidate before its text is fetched.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Candidate {
    document_id: i64,
    chunk_index: i32,
    score: f64,
}

impl Searcher {
    /// A searcher embedding queries with `embedder`, whose version is `model`.
    pub fn new(pool: PgPool, embedder: Embedder, model: ModelVersion) -> Self {
        Self {
            pool,
            embedder,
            model,
        }
    }

    /// The version this process embeds queries with.
    pub fn model(&self) -> &ModelVersion {
        &self.model
    }

    /// Whether this process's embedder captures meaning.
    pub fn is_semantic(&self) -> bool {
        self.embedder.is_semantic()
    }

    /// Searches; hits come best first.
    pub async fn search(&self, request: &SearchRequest) -> Result<SearchResults, SearchError> {
        let query = request.query.trim();
        if query.is_empty() {
            return Err(SearchError::EmptyQuery);
        }
        let length = query.chars().count();
        if length > MAX_QUERY_CHARS {
            return Err(SearchError::QueryTooLong(length));
        }
        if !(1..=MAX_K).contains(&request.k) {
            return Err(SearchError::InvalidK(request.k));
        }
        let version = self.version(request).await?;
        let k = request.k;
        let document = request.document.map(|d| d.0);
        let candidates = match request.mode {
            Mode::Vector => {
                let version = self.searchable(version.as_deref())?;
                self.vector(query, version, document, k).await?
            }
            Mode::Text => self.text(query, document, k).await?,
            Mode::Hybrid => {
                let version = self.searchable(version.as_deref())?;
                // Deeper lists than k give fusion room to promote a chunk both lists like.
                let depth = (k * 2).clamp(20, 2 * MAX_K);
                // The two lists are independent: ask for both at once, on two connections.
                let (vector, text) = tokio::join!(
                    self.vector(query, version, document, depth),
                    self.text(query, document, depth)
                );
                fuse(&[vector?, text?], k)
            }
        };
        let hits = self.hits(query, &candidates).await?;
        Ok(SearchResults {
            mode: request.mode,
            semantic: request.mode.uses_vectors() && self.embedder.is_semantic(),
            model_version: version,
            hits,
        })
    }

    /// The requested version, or the active one.
    async fn version(&self, request: &SearchRequest) -> Result<Option<String>, SearchError> {
        if let Some(requested) = &request.model_version {
            let known: bool = sqlx::query_scalar(
                "select exists (select 1 from embedding_models where model_version = $1)",
            )
            .bind(requested)
            .fetch_one(&self.pool)
            .await?;
            if !known {
                return Err(SearchError::UnknownModel(requested.clone()));
            }
            return Ok(Some(requested.clone()));
        }
        let active = crate::models::active(&self.pool).await?;
        match active {
            Some(model) => Ok(Some(model.model_version)),
            None if request.mode.uses_vectors() => Err(SearchError::NoActiveModel),
            None => Ok(None),
        }
    }

    /// The version to search by vector, if this process can embed queries for it.
    fn searchable<'v>(&self, version: Option<&'v str>) -> Result<&'v str, SearchError> {
        let version = version.ok_or(SearchError::NoActiveModel)?;
        if version != self.model.model_version {
            return Err(SearchError::ModelNotEmbeddable {
                requested: version.to_owned(),
                available: self.model.model_version.clone(),
            });
        }
        Ok(version)
    }

    /// The `limit` nearest chunks to the embedded query, over the version's HNSW index.
    async fn vector(
        &self,
        query: &str,
        version: &str,
        document: Option<i64>,
        limit: i64,
    ) -> Result<Vec<Candidate>, SearchError> {
        let mut vectors = self.embedder.embed(&[query.to_owned()]).await?;
        let embedded = vectors.pop().unwrap_or_default();
        let sql = vector_sql(self.model.dims, version, document.is_some());
        let mut tx = self.pool.begin().await?;
        // Local to this transaction, so pooled connections keep the server defaults.
        sqlx::query(
            "select set_config('hnsw.ef_search', $1, true),
                    set_config('hnsw.iterative_scan', 'relaxed_order', true)",
        )
        .bind(EF_SEARCH.max(limit).to_string())
        .execute(&mut *tx)
        .await?;
        let rows: Vec<(i64, i32, f64)> = sqlx::query_as(sqlx::AssertSqlSafe(sql))
            .bind(Vector::from(embedded))
            .bind(limit)
            .bind(document)
            .fetch_all(&mut *tx)
            .await?;
        tx.commit().await?;
        if rows.is_empty() && !self.has_vectors(version).await? {
            return Err(SearchError::NoVectors(version.to_owned()));
        }
        // relaxed_order may return neighbours slightly out of order: sort by the true distance.
        let mut candidates: Vec<Candidate> = rows
            .into_iter()
            .map(|(document_id, chunk_index, distance)| Candidate {
                document_id,
                chunk_index,
                score: 1.0 - distance,
            })
            .collect();
        candidates.sort_by(|a, b| b.score.total_cmp(&a.score));
        Ok(candidates)
    }

    async fn has_vectors(&self, version: &str) -> Result<bool, sqlx::Error> {
        sqlx::query_scalar(
            "select exists (select 1 from embedding_sets where model_version = $1)
                 or exists (select 1 from embeddings where model_version = $1)",
        )
        .bind(version)
        .fetch_one(&self.pool)
        .await
    }

    /// The `limit` best full-text matches, topped up with substring matches.
    async fn text(
        &self,
        query: &str,
        document: Option<i64>,
        limit: i64,
    ) -> Result<Vec<Candidate>, SearchError> {
        let rows: Vec<(i64, i32, f32)> = sqlx::query_as(
            "select c.document_id, c.chunk_index, ts_rank_cd(c.tsv, q.query) as rank
             from chunks c,
                  websearch_to_tsquery('simple', $1) as q(query)
             where c.tsv @@ q.query
               and ($3::bigint is null or c.document_id = $3)
             order by rank desc, c.document_id, c.chunk_index
             limit $2",
        )
        .bind(query)
        .bind(limit)
        .bind(document)
        .fetch_all(&self.pool)
        .await?;
        let mut candidates: Vec<Candidate> = rows
            .into_iter()
            .map(|(document_id, chunk_index, rank)| Candidate {
                document_id,
                chunk_index,
                score: f64::from(rank),
            })
            .collect();
        let missing = limit - candidates.len() as i64;
        // Fewer than three characters make no trigram: such a substring scan could not use the
        // index, and full text has already had its say.
        if missing > 0 && query.chars().count() >= 3 {
            let rows: Vec<(i64, i32)> = sqlx::query_as(
                "select c.document_id, c.chunk_index
                 from chunks c
                 where c.text ilike $1
                   and ($3::bigint is null or c.document_id = $3)
                 limit $2",
            )
            .bind(format!("%{}%", escape_like(query)))
            .bind(limit)
            .bind(document)
            .fetch_all(&self.pool)
            .await?;
            for (document_id, chunk_index) in rows {
                let known = candidates
                    .iter()
                    .any(|c| c.document_id == document_id && c.chunk_index == chunk_index);
                if !known && (candidates.len() as i64) < limit {
                    candidates.push(Candidate {
                        document_id,
                        chunk_index,
                        score: 0.0,
                    });
                }
            }
        }
        Ok(candidates)
    }

    /// Fetches text and file names for `candidates`, keeping their order.
    async fn hits(&self, query: &str, candidates: &[Candidate]) -> Result<Vec<Hit>, sqlx::Error> {
        let ids: Vec<i64> = candidates.iter().map(|c| c.document_id).collect();
        let indexes: Vec<i32> = candidates.iter().map(|c| c.chunk_index).collect();
        let rows: Vec<(i64, i32, i32, String, String)> = sqlx::query_as(
            "select c.document_id, c.chunk_index, c.page, c.text, d.filename
             from unnest($1::bigint[], $2::int[]) as wanted(document_id, chunk_index)
             join chunks c using (document_id, chunk_index)
             join documents d on d.id = c.document_id",
        )
        .bind(&ids)
        .bind(&indexes)
        .fetch_all(&self.pool)
        .await?;
        let mut found: HashMap<(i64, i32), (i32, String, String)> = rows
            .into_iter()
            .map(|(d, c, page, text, filename)| ((d, c), (page, text, filename)))
            .collect();
        let terms = query_terms(query);
        // A chunk deleted between the two queries is simply left out.
        Ok(candidates
            .iter()
            .filter_map(|c| {
                let (page, text, filename) = found.remove(&(c.document_id, c.chunk_index))?;
                let (snippet, highlights) = snippet(&text, &terms);
                Some(Hit {
                    document_id: c.document_id,
                    filename,
                    page,
                    chunk_index: c.chunk_index,
                    score: c.score,
                    text,
                    snippet,
                    highlights,
                })
            })
            .collect())
    }
}

/// The nearest-neighbour query of one model version.
///
/// Built with `format!` because the index is an *expression* index over
/// `embedding::vector(DIMS)` and a *partial* one for `model_version = '<literal>'`: PostgreSQL
/// uses it only when the query has the same cast (the dimension is part of the type, and
/// types take no bind parameters) and a predicate it can prove implies the index's, which a bind
/// parameter is not under a generic plan. `dims` is an integer and the version is quoted as a
/// SQL literal, so nothing from a request reaches the SQL unquoted.
pub fn vector_sql(dims: i32, model_version: &str, filtered: bool) -> String {
    let version = quote_literal(model_version);
    let filter = if filtered {
        "and document_id = $3"
    } else {
        // $3 is always bound; this keeps its type known when no filter is asked for.
        "and $3::bigint is null"
    };
    format!(
        "select document_id, chunk_index,
                ((embedding::vector({dims})) <=> $1::vector({dims}))::float8 as distance
         from embeddings
         where model_version = {version}
           {filter}
         order by (embedding::vector({dims})) <=> $1::vector({dims})
         limit $2"
    )
}

/// A SQL string literal: doubling quotes is enough under `standard_conforming_strings`, on by
/// default since PostgreSQL 9.1; the `E` prefix is never used, so backslashes are plain.
fn quote_literal(value: &str) -> String {
    format!("'{}'", value.replace('\'', "''"))
}

/// Escapes LIKE's wildcards so the query matches literally.
fn escape_like(query: &str) -> String {
    let mut escaped = String::with_capacity(query.len());
    for c in query.chars() {
        if matches!(c, '%' | '_' | '\\') {
            escaped.push('\\');
        }
        escaped.push(c);
    }
    escaped
}

/// Reciprocal rank fusion: each list adds `1 / (RRF_K + rank)` (rank from 1) to a chunk.
fn fuse(lists: &[Vec<Candidate>], k: i64) -> Vec<Candidate> {
    let mut fused: Vec<Candidate> = Vec::new();
    let mut position: HashMap<(i64, i32), usize> = HashMap::new();
    for list in lists {
        for (rank, candidate) in list.iter().enumerate() {
            let add = 1.0 / (RRF_K + rank as f64 + 1.0);
            let key = (candidate.document_id, candidate.chunk_index);
            match position.get(&key) {
                Some(&at) => fused[at].score += add,
                None => {
                    position.insert(key, fused.len());
                    fused.push(Candidate {
                        score: add,
                        ..*candidate
                    });
                }
            }
        }
    }
    // Stable: among equal scores the earlier list's order wins.
    fused.sort_by(|a, b| b.score.total_cmp(&a.score));
    fused.truncate(usize::try_from(k).unwrap_or(0));
    fused
}

/// The words of a query worth highlighting, lower-cased: websearch operators (`or`, a leading
/// `-`) and single Latin letters are left out; CJK runs stay whole.
fn query_terms(query: &str) -> Vec<Vec<char>> {
    let mut terms: Vec<Vec<char>> = Vec::new();
    for token in query.split_whitespace() {
        if token.starts_with('-') || token.eq_ignore_ascii_case("or") {
            continue;
        }
        for word in token.split(|c: char| !c.is_alphanumeric()) {
            let word: Vec<char> = word.chars().map(lower).collect();
            let worth = word.len() >= 2 || word.iter().any(|c| !c.is_ascii());
            if worth && !word.is_empty() && !terms.contains(&word) {
                terms.push(word);
            }
        }
    }
    terms
}

/// Lower-cases one character to one character, so offsets stay aligned with the original.
fn lower(c: char) -> char {
    c.to_lowercase().next().unwrap_or(c)
}

/// A window of `text` around the first match of any term, and the matches inside it.
pub fn snippet_of(text: &str, query: &str) -> (String, Vec<Highlight>) {
    snippet(text, &query_terms(query))
}

fn snippet(text: &str, terms: &[Vec<char>]) -> (String, Vec<Highlight>) {
    let chars: Vec<char> = text.chars().collect();
    let lowered: Vec<char> = chars.iter().copied().map(lower).collect();
    let mut matches: Vec<(usize, usize)> = Vec::new();
    for term in terms {
        let mut at = 0;
        while at + term.len() <= lowered.len() {
            if lowered[at..at + term.len()] == term[..] {
                matches.push((at, at + term.len()));
                at += term.len();
            } else {
                at += 1;
            }
        }
    }
    matches.sort_unstable();
    // Merge overlapping or touching matches into one range.
    let mut merged: Vec<(usize, usize)> = Vec::new();
    for (start, end) in matches {
        match merged.last_mut() {
            Some(last) if start <= last.1 => last.1 = last.1.max(end),
            _ => merged.push((start, end)),
        }
    }
    let first = merged.first().map_or(0, |m| m.0);
    // Start a little before the first match, at a word boundary when one is near.
    let mut start = first.saturating_sub(SNIPPET_CHARS / 4);
    if start > 0
        && let Some(space) = chars[start..first].iter().position(|c| c.is_whitespace())
    {
        start += space + 1;
    }
    let end = (start + SNIPPET_CHARS).min(chars.len());
    let prefix = if start > 0 { "…" } else { "" };
    let suffix = if end < chars.len() { "…" } else { "" };
    let offset = prefix.chars().count();
    let body: String = chars[start..end].iter().collect();
    let snippet = format!("{prefix}{}{suffix}", body.trim_end());
    let body_len = body.trim_end().chars().count();
    let highlights = merged
        .into_iter()
        .filter(|&(s, e)| s >= start && e <= start + body_len)
        .map(|(s, e)| Highlight {
            start: s - start + offset,
            end: e - start + offset,
        })
        .collect();
    (snippet, highlights)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn marked(snippet: &str, highlights: &[Highlight]) -> Vec<String> {
        let chars: Vec<char> = snippet.chars().collect();
        highlights
            .iter()
            .map(|h| chars[h.start..h.end].iter().collect())
            .collect()
    }

    #[test]
    fn highlights_mark_every_query_word_case_insensitively() {
        let (snippet, highlights) =
            snippet_of("Python is fun. I like python and PYTHON.", "python fun");
        assert_eq!(
            marked(&snippet, &highlights),
            vec!["Python", "fun", "python", "PYTHON"]
        );
    }

    #[test]
    fn highlights_count_characters_not_bytes_in_cjk_text() {
        let text = "日本語のテキストで東京タワーを検索します";
        let (snippet, highlights) = snippet_of(text, "東京タワー");
        assert_eq!(marked(&snippet, &highlights), vec!["東京タワー"]);
        assert_eq!(highlights[0].start, 9);
    }

    #[test]
    fn a_late_match_gets_a_window_with_ellipses_and_shifted_ranges() {
        let text = format!("{} needle {}", "hay ".repeat(200), "hay ".repeat(200));
        let (snippet, highlights) = snippet_of(&text, "needle");
        assert!(
            snippet.starts_with('…') && snippet.ends_with('…'),
            "{snippet}"
        );
        assert!(snippet.chars().count() <= SNIPPET_CHARS + 2);
        assert_eq!(marked(&snippet, &highlights), vec!["needle"]);
    }

    #[test]
    fn websearch_operators_and_negated_words_are_not_highlighted() {
        let terms = query_terms("cats OR dogs -mice \"big cat\"");
        let words: Vec<String> = terms.iter().map(|t| t.iter().collect()).collect();
        assert_eq!(words, vec!["cats", "dogs", "big", "cat"]);
    }

    #[test]
    fn markup_in_a_chunk_stays_plain_text_in_the_snippet() {
        let (snippet, highlights) = snippet_of("<script>alert(1)</script> hello", "hello");
        assert!(snippet.starts_with("<script>"));
        assert_eq!(marked(&snippet, &highlights), vec!["hello"]);
    }

    #[test]
    fn fusion_rewards_chunks_both_lists_rank_high() {
        let c = |d, i| Candidate {
            document_id: d,
            chunk_index: i,
            score: 0.0,
        };
        let vector = vec![c(1, 0), c(2, 0), c(3, 0)];
        let text = vec![c(2, 0), c(4, 0), c(1, 0)];
        let fused = fuse(&[vector, text], 3);
        let order: Vec<i64> = fused.iter().map(|c| c.document_id).collect();
        assert_eq!(order, vec![2, 1, 4]);
        assert!((fused[0].score - (1.0 / 62.0 + 1.0 / 61.0)).abs() < 1e-12);
    }

    #[test]
    fn vector_sql_quotes_the_version_and_repeats_the_index_expression() {
        let sql = vector_sql(384, "it's:v1", true);
        assert!(sql.contains("where model_version = 'it''s:v1'"), "{sql}");
        assert_eq!(
            sql.matches("(embedding::vector(384)) <=> $1::vector(384)")
                .count(),
            2
        );
        assert!(sql.contains("document_id = $3"));
    }

    #[test]
    fn like_wildcards_in_a_query_match_literally() {
        assert_eq!(escape_like(r"50%_off\"), r"50\%\_off\\");
    }
}
