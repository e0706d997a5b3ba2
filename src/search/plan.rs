//! The plan of one search on one pool, as named steps: check the request, work out how deep
//! each list looks, gather candidates by mode (vector, text, or both fused), then fetch the
//! hits and gather them by document.
//!
//! The steps live here, apart from the queries, so that what every mode shares (the checks,
//! the depths, fetching and grouping) is written once and reads in order; [`super::vector`],
//! [`super::text`] and [`super::hits`] own the SQL.

use super::hits::{self, Fetched};
use super::vector::{self, Route};
use super::{
    Candidate, GROUP_DEPTH, GROUP_HITS, Group, HYBRID_DEPTH, Hit, MAX_K, MAX_QUERY_CHARS, Mode,
    SearchError, SearchRequest, SearchResults, Searcher, rank, text,
};
use crate::analysis::query::{self, Query};
use crate::models;

/// A hybrid list is never shorter than this, however small `k`: fusion needs room to promote.
const HYBRID_MIN_LIST: i64 = 40;

/// How deep one search looks, from its request.
#[derive(Debug, Clone, Copy)]
struct Depths<'a> {
    /// Hits asked for.
    k: i64,
    /// Candidates one mode's list returns: `k`, or deeper for a grouped search so that `k`
    /// documents can be filled.
    depth: i64,
    /// Only this document's chunks.
    document: Option<i64>,
    /// Only these collections' chunks (`None`: no filter).
    collections: Option<&'a [i64]>,
    /// In a grouped search, at most this many keyword candidates of one document.
    per_document: Option<i64>,
}

impl<'a> Depths<'a> {
    fn of(request: &'a SearchRequest) -> Self {
        let k = request.k;
        Self {
            k,
            depth: if request.group { k * GROUP_DEPTH } else { k },
            document: request.document.map(|d| d.0),
            collections: request.collections.ids(),
            per_document: request.group.then_some(GROUP_HITS as i64),
        }
    }

    /// How long each list of a hybrid search is: fusion can only promote a chunk that some
    /// list returned.
    fn hybrid_list(&self) -> i64 {
        (self.k * HYBRID_DEPTH).max(self.depth).max(HYBRID_MIN_LIST)
    }
}

/// The request's query, trimmed, once it passes the checks every mode shares.
fn checked_query(request: &SearchRequest) -> Result<&str, SearchError> {
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
    Ok(query)
}

/// The groups of a grouped search, with their fetched hits; a group whose chunks all vanished
/// between the queries is left out.
fn groups_of(grouped: &[Vec<Candidate>], fetched: &Fetched) -> Vec<Group> {
    grouped
        .iter()
        .filter_map(|group| {
            let hits: Vec<Hit> = group.iter().filter_map(|c| fetched.get(c)).collect();
            let first = hits.first()?;
            Some(Group {
                document_id: first.document_id,
                filename: first.filename.clone(),
                hits,
            })
        })
        .collect()
}

impl Searcher {
    /// Searches on this searcher's own pool.
    pub(super) async fn search_here(
        &self,
        request: &SearchRequest,
    ) -> Result<SearchResults, SearchError> {
        let query = checked_query(request)?;
        let parsed = query::parse(query);
        let depths = Depths::of(request);
        let plan = if request.mode.uses_vectors() {
            self.plan(request).await?
        } else {
            vector::Plan::default()
        };
        let candidates = self
            .candidates(request.mode, query, &parsed, depths, &plan.routes)
            .await?;
        let (hits, groups) = self
            .hits(request.group, &parsed, &candidates, depths.k, &plan.routes)
            .await?;
        let model_version = match plan.versions.first() {
            Some(first) => Some(first.model_version.clone()),
            None => self.text_version(request).await?,
        };
        Ok(SearchResults {
            mode: request.mode,
            semantic: request.mode.uses_vectors()
                && plan.routes.iter().all(|r| r.embedder.is_semantic()),
            model_version,
            hits,
            groups,
            versions: plan.versions,
            partial: plan.partial,
        })
    }

    /// The candidates of `mode`, best first.
    async fn candidates(
        &self,
        mode: Mode,
        query: &str,
        parsed: &Query,
        depths: Depths<'_>,
        routes: &[Route],
    ) -> Result<Vec<Candidate>, SearchError> {
        match mode {
            Mode::Vector => {
                self.vectors(query, routes, depths.collections, depths.depth)
                    .await
            }
            Mode::Text => Ok(self.keywords(parsed, depths, depths.depth).await?),
            Mode::Hybrid => {
                let list = depths.hybrid_list();
                // The lists are independent: ask for both at once, on separate connections.
                let (vectors, text) = tokio::join!(
                    self.vectors(query, routes, depths.collections, list),
                    self.keywords(parsed, depths, list)
                );
                Ok(rank::fuse(
                    &vectors?,
                    &text?,
                    self.fusion,
                    usize::try_from(depths.depth).unwrap_or(0),
                ))
            }
        }
    }

    /// The `limit` best keyword candidates (see [`text`]).
    async fn keywords(
        &self,
        parsed: &Query,
        depths: Depths<'_>,
        limit: i64,
    ) -> Result<Vec<Candidate>, sqlx::Error> {
        let within = text::Within {
            document: depths.document,
            collections: depths.collections,
            per_document: depths.per_document,
        };
        text::rank(&self.pool, &self.stats, parsed, within, limit).await
    }

    /// The first `k` candidates as hits and, with `group`, the candidates gathered by
    /// document, each chunk fetched once.
    async fn hits(
        &self,
        group: bool,
        parsed: &Query,
        candidates: &[Candidate],
        k: i64,
        routes: &[Route],
    ) -> Result<(Vec<Hit>, Option<Vec<Group>>), SearchError> {
        let k = usize::try_from(k).unwrap_or(0);
        let grouped = group.then(|| rank::group(candidates, k, GROUP_HITS));
        let flat = &candidates[..candidates.len().min(k)];
        let terms = parsed.all_terms();
        let mut fetched = hits::fetch(
            &self.pool,
            &terms,
            flat,
            grouped.iter().flatten().flatten(),
            routes,
        )
        .await?;
        let groups = grouped.map(|grouped| groups_of(&grouped, &fetched));
        let hits = flat.iter().filter_map(|c| fetched.take(c)).collect();
        Ok((hits, groups))
    }

    /// What a text search reports as its version: the requested one (which must exist), or the
    /// active one when there is one.
    async fn text_version(&self, request: &SearchRequest) -> Result<Option<String>, SearchError> {
        match &request.model_version {
            Some(requested) => match models::get(&self.pool, requested).await? {
                Some(version) => Ok(Some(version.model_version)),
                None => Err(SearchError::UnknownModel(requested.clone())),
            },
            None => Ok(models::active(&self.pool).await?.map(|m| m.model_version)),
        }
    }
}
