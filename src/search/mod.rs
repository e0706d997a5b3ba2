//! Search: every query over the stored chunks, in three modes, each returning the best `k`
//! chunks (optionally gathered by document).
//!
//! - **vector** ([`vector`]): the nearest chunks to the embedded query over the active model
//!   version's HNSW index (and, during a model switch, the older versions still in use).
//! - **text** ([`text`]): ranked keyword search, BM25 over postings written by docket's own text
//!   analysis ([`crate::analysis`]: per-language stemming and stop words, CJK bigrams). Words are
//!   OR-ed, so a question finds the chunks that share its informative words, the rarest first;
//!   `"phrases"` and `-words` filter.
//! - **hybrid** (the default): both lists, each asked for more candidates than `k`, fused by the
//!   method in [`rank`] that measured best on the development set.
//!
//! With `group`, hits are also gathered under their document (best hit first, then the others
//! the same search found in it), so one long document cannot fill a page of results.
//!
//! Each hit carries the chunk text and a snippet with highlight *ranges* (character offsets),
//! never markup: clients build the emphasis themselves, so a document can never inject HTML.
//!
//! Parts: this file holds the request and response types and the [`Searcher`]; [`plan`] runs
//! one search as named steps (checks, depths, candidates by mode, hits, groups); [`vector`] and
//! [`text`] each own their queries; [`index`] writes the keyword postings; [`hits`] fetches the
//! chunks and cuts snippets ([`snippet`], pure text); [`rank`] fuses, groups and merges
//! candidate lists (pure functions); [`replicas`] sends searches to read replicas and falls back
//! to the primary; [`reader`] rebuilds a document's text from its chunks for the document
//! view.

use serde::Serialize;
use sqlx::PgPool;

use crate::collections::Reach;
use crate::documents::DocumentId;
use crate::embed::{EmbedError, Embedder};
use crate::models::ModelVersion;

pub mod centring;
mod hits;
pub mod index;
mod plan;
mod rank;
pub mod reader;
pub mod relevance;
pub mod replicas;
mod snippet;
mod text;
mod timings;
mod vector;

pub use rank::{DEFAULT_FUSION, Fusion, SPELLING_FUSION};
pub use replicas::{Fallback, ReplicaStatus, Replicas};
pub use snippet::Highlight;
pub use timings::{Stage, parse_server_timing, server_timing};
pub use vector::{Scope, vector_sql};

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

/// How to search.
#[derive(
    utoipa::ToSchema, Debug, Clone, Copy, PartialEq, Eq, Serialize, serde::Deserialize, Default,
)]
#[serde(rename_all = "snake_case")]
pub enum Mode {
    /// Vector and keyword lists, fused.
    #[default]
    Hybrid,
    /// Nearest neighbours of the embedded query.
    Vector,
    /// Ranked keyword search (BM25).
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
    /// Only chunks of documents in these collections: every list of every mode filters by it
    /// in its own statement, so the top k are the best k the caller may see.
    pub collections: Reach,
    /// Search vectors of this version; the active one when `None`.
    pub model_version: Option<String>,
    /// Also gather the hits by document ([`SearchResults::groups`]).
    pub group: bool,
    /// Only hits at least this relevant (0 to 1; 0 returns every hit); the searcher's setting
    /// when `None`.
    pub min_relevance: Option<f64>,
}

/// One result: a chunk, where it sits, and why it matched.
#[derive(utoipa::ToSchema, Debug, Clone, Serialize)]
pub struct Hit {
    pub document_id: i64,
    pub filename: String,
    /// The document's type, so a client knows whether it can open the original at `page`.
    pub content_type: String,
    /// The page (PDFs, images); for structured formats the section's ordinal.
    pub page: i32,
    /// Where the chunk sits as a person names it: "page 3", "slide 2", "Q1, rows 4–9",
    /// "2. Installation › 2.1 Requirements"; `None` for plain text and sections before any
    /// heading.
    pub location: Option<String>,
    pub chunk_index: i32,
    /// The estimated probability that this passage answers the question, in [0, 1]: the same
    /// number means the same confidence in every mode, language and query (see [`relevance`]).
    /// Hybrid hits come in its order.
    pub relevance: f64,
    /// The mode's own score, higher is better. vector: cosine similarity; text: the BM25
    /// score; hybrid: the relevance. Comparable within one response only.
    pub score: f64,
    pub text: String,
    /// Plain text where the query's words are densest (the chunk's start when none occurs).
    pub snippet: String,
    /// Where the query's words occur in `snippet`.
    pub highlights: Vec<Highlight>,
    /// The model version whose vector matched this chunk; `None` for a text-only match.
    pub model_version: Option<String>,
    /// What `relevance` was computed from (for measuring the calibration; not sent).
    #[serde(skip)]
    pub signals: Signals,
}

/// What a candidate's relevance is read from: each list's evidence on a scale that means the
/// same for every query.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct Signals {
    /// Cosine similarity of the query's vector and the chunk's; `None` when no vector was
    /// compared (text mode, or a chunk without a vector).
    pub cosine: Option<f64>,
    /// The chunk's BM25 score as a share of the most the query's words could score, in
    /// [0, 1); `None` in vector mode.
    pub keyword: Option<f64>,
    /// Whether the chunk is written in another language than the query (keywords cannot
    /// match across scripts, so their absence says less).
    pub other_language: bool,
    /// How far the cosine falls short of the best one among this search's candidates (0 for
    /// the best): the same cosine is stronger evidence on top of a list than under a better hit.
    pub cosine_gap: f64,
    /// Likewise for the keyword share.
    pub keyword_gap: f64,
}

/// What a search found.
#[derive(utoipa::ToSchema, Debug, Clone, Serialize)]
pub struct SearchResults {
    pub mode: Mode,
    /// The model version whose vectors were searched (the active one for text searches, when
    /// there is one).
    pub model_version: Option<String>,
    /// Whether nearness of these vectors means similar meaning (false for the hashing
    /// embedder, which only sees spellings).
    pub semantic: bool,
    pub hits: Vec<Hit>,
    /// True when no hit reaches a relevance of 0.5: nothing found is likely to answer the
    /// question; `hits` (and `groups`) then hold at most [`WEAK_HITS`] weak ones, unless the
    /// request set `min_relevance=0`.
    pub no_good_match: bool,
    /// The threshold this search applied (`min_relevance`).
    pub min_relevance: f64,
    /// Whether `relevance` was fitted for this embedding model (false: a conservative
    /// fallback, see [`relevance`]).
    pub calibrated: bool,
    /// With `group`: the documents of the best hits, in order, each with its hits.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub groups: Option<Vec<Group>>,
    /// The versions whose vectors were asked (empty for text searches): the active one and,
    /// during a switch, the older versions some documents are still read under.
    pub versions: Vec<VersionSearched>,
    /// True when some documents could not be searched by vector because this process cannot
    /// embed queries for the version they are read under (see `versions`).
    pub partial: bool,
    /// Where the time went (sent as the `Server-Timing` header, not in the body).
    #[serde(skip)]
    pub stages: Vec<Stage>,
}

/// Why a version took part in a vector search.
#[derive(utoipa::ToSchema, Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum VersionRole {
    /// The active version: every document whose set under it is complete, and every document
    /// not read under another version.
    Active,
    /// An older version, for the documents whose set under the active one is not complete yet.
    Fallback,
    /// The version the request named.
    Requested,
}

/// One version's part in a vector search.
#[derive(utoipa::ToSchema, Debug, Clone, Serialize)]
pub struct VersionSearched {
    pub model_version: String,
    pub role: VersionRole,
    /// For a fallback: how many documents are read under it.
    pub documents: Option<usize>,
    /// Whether its index was searched.
    pub searched: bool,
    /// Why not, when it was not.
    pub reason: Option<String>,
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
    #[error("min_relevance must be between 0 and 1, not {0}")]
    InvalidMinRelevance(f64),
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

/// A document's hits in a grouped search.
#[derive(utoipa::ToSchema, Debug, Clone, Serialize)]
pub struct Group {
    pub document_id: i64,
    pub filename: String,
    /// Best first: the first is the document's best passage, the rest "more in this document".
    pub hits: Vec<Hit>,
}

/// Runs searches with the embedder of this process.
#[derive(Debug, Clone)]
pub struct Searcher {
    pool: PgPool,
    embedder: Embedder,
    /// The version `embedder` produces: the only one whose vectors this process can search.
    model: ModelVersion,
    /// How hybrid search fuses its lists.
    fusion: Fusion,
    /// The collection statistics of BM25, shared by clones.
    stats: std::sync::Arc<text::StatsCache>,
    /// Read replicas that answer searches in the primary's stead, when configured.
    replicas: Option<std::sync::Arc<Replicas>>,
    /// Hits below this relevance are left out unless a request says otherwise.
    min_relevance: f64,
    /// Never cut a search to [`WEAK_HITS`] under "no good match" (tests of ranking).
    every_hit: bool,
    /// How relevance is read from signals for this searcher's embedding model.
    calibration: relevance::Calibration,
    /// The share of its script's mean taken off each vector ([`centring`]); 0 searches the
    /// vectors as stored.
    centring_share: f32,
}

/// A candidate before its text is fetched.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Candidate {
    document_id: i64,
    chunk_index: i32,
    score: f64,
    /// The position in [`vector::Plan::routes`] of the version whose vector matched, if one did.
    route: Option<usize>,
    signals: Signals,
    /// The estimated probability that the chunk answers the question ([`relevance`]).
    relevance: f64,
}

/// How many candidates each list of a hybrid search contributes, per hit asked for: fusion can
/// only promote a chunk that some list returned.
const HYBRID_DEPTH: i64 = 4;
/// Grouped searches look this much deeper, so that `k` documents can be filled.
const GROUP_DEPTH: i64 = 5;
/// Most hits a group shows.
const GROUP_HITS: usize = 5;
/// The relevance from which a hit counts as a good match (even odds that it answers).
pub const GOOD_MATCH: f64 = 0.5;
/// Most hits a search returns when none is a good match: a few weak ones to look at, not a
/// page of noise.
pub const WEAK_HITS: usize = 5;
/// Hits less relevant than this are left out of searches that do not set `min_relevance`;
/// `DOCKET_MIN_RELEVANCE` changes it. 0: every hit the search found, each with its relevance,
/// since the shortfall signals drive a keyword match far down a list close to 0 although a
/// person browsing for a word wants to see it (0.02 cost hybrid 0.012 of passage@5,
/// BENCHMARKS.md "Issue 23").
pub const DEFAULT_MIN_RELEVANCE: f64 = 0.0;

impl Searcher {
    /// A searcher embedding queries with `embedder`, whose version is `model`.
    pub fn new(pool: PgPool, embedder: Embedder, model: ModelVersion) -> Self {
        let calibration = relevance::Calibration::for_model(&embedder.model_id());
        Self {
            fusion: Fusion::default_for(embedder.is_semantic()),
            pool,
            embedder,
            model,
            stats: Default::default(),
            replicas: None,
            min_relevance: DEFAULT_MIN_RELEVANCE,
            every_hit: false,
            calibration,
            centring_share: centring::SHARE,
        }
    }

    /// The same searcher centring vectors by `share` of their script's mean (for measuring
    /// shares; 0 turns centring off).
    pub fn with_centring_share(mut self, share: f32) -> Self {
        self.centring_share = share.clamp(0.0, 1.0);
        self
    }

    /// The same searcher answering every hit it finds, as if each request asked
    /// `min_relevance=0` (for tests of ranking and for measuring).
    pub fn returning_every_hit(mut self) -> Self {
        self.min_relevance = 0.0;
        self.every_hit = true;
        self
    }

    /// The same searcher leaving out hits below `min_relevance` by default.
    pub fn with_min_relevance(mut self, min_relevance: f64) -> Self {
        self.min_relevance = min_relevance.clamp(0.0, 1.0);
        self
    }

    /// The same searcher sending searches to `replicas` (see [`replicas`]); `pool` stays the
    /// primary they fall back to.
    pub fn with_replicas(mut self, replicas: std::sync::Arc<Replicas>) -> Self {
        self.replicas = Some(replicas);
        self
    }

    /// The replicas searches go to, when there are any.
    pub fn replicas(&self) -> Option<&std::sync::Arc<Replicas>> {
        self.replicas.as_ref()
    }

    /// This searcher reading from `pool` alone (a replica's).
    fn reading_from(&self, pool: PgPool) -> Searcher {
        Searcher {
            pool,
            replicas: None,
            ..self.clone()
        }
    }

    /// How hybrid search fuses its lists here.
    pub fn fusion(&self) -> Fusion {
        self.fusion
    }

    /// The same searcher fusing hybrid lists by `fusion` (for measuring the methods).
    pub fn with_fusion(mut self, fusion: Fusion) -> Self {
        self.fusion = fusion;
        self
    }

    /// The version this process embeds queries with.
    pub fn model(&self) -> &ModelVersion {
        &self.model
    }

    /// Whether this process's embedder captures meaning.
    pub fn is_semantic(&self) -> bool {
        self.embedder.is_semantic()
    }

    /// Searches, on a read replica when one is configured and usable; hits come best first.
    pub async fn search(&self, request: &SearchRequest) -> Result<SearchResults, SearchError> {
        match &self.replicas {
            Some(replicas) => replicas.search(self, request).await,
            None => self.search_here(request).await,
        }
    }
}
