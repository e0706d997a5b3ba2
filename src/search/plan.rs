//! The plan of one search on one pool, as named steps: check the request, work out how deep
//! each list looks, gather candidates by mode (vector, text, or both fused), then fetch the
//! hits and gather them by document.
//!
//! The steps live here, apart from the queries, so that what every mode shares (the checks,
//! the depths, fetching and grouping) is written once and reads in order; [`super::vector`],
//! [`super::text`] and [`super::hits`] own the SQL.

use super::hits::{self, Fetched};
use super::timings::Timings;
use super::vector::{self, Route};
use super::{
    Candidate, Fusion, GOOD_MATCH, GROUP_DEPTH, GROUP_HITS, Group, HYBRID_DEPTH, Hit, MAX_K,
    MAX_QUERY_CHARS, Mode, SearchError, SearchRequest, SearchResults, Searcher, WEAK_HITS, rank,
    text,
};
use crate::analysis;
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

/// The candidates at least `min_relevance` relevant, and whether none is a good match.
fn judged(mut candidates: Vec<Candidate>, min_relevance: f64) -> (Vec<Candidate>, bool) {
    let no_good_match = !candidates.iter().any(|c| c.relevance >= GOOD_MATCH);
    candidates.retain(|c| c.relevance >= min_relevance);
    (candidates, no_good_match)
}

/// How far `value` falls short of `best` (0 when either is unknown).
fn gap(value: Option<f64>, best: Option<f64>) -> f64 {
    match (value, best) {
        (Some(value), Some(best)) => (best - value).max(0.0),
        _ => 0.0,
    }
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
        let min_relevance = request.min_relevance.unwrap_or(self.min_relevance);
        if !(0.0..=1.0).contains(&min_relevance) {
            return Err(SearchError::InvalidMinRelevance(min_relevance));
        }
        let parsed = query::parse(query);
        let depths = Depths::of(request);
        let timings = Timings::default();
        let plan = if request.mode.uses_vectors() {
            timings.time("plan", self.plan(request)).await?
        } else {
            vector::Plan::default()
        };
        let candidates = self
            .candidates(request.mode, query, &parsed, depths, &plan.routes, &timings)
            .await?;
        let (candidates, no_good_match) = judged(candidates, min_relevance);
        // Nothing likely to answer: a few weak hits (or documents) to look at, not a page of
        // noise, unless the request asked for every hit.
        let k = if no_good_match && !self.every_hit && request.min_relevance != Some(0.0) {
            depths.k.min(WEAK_HITS as i64)
        } else {
            depths.k
        };
        let (hits, groups) = timings
            .time(
                "hits",
                self.hits(request.group, &parsed, &candidates, k, &plan.routes),
            )
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
            no_good_match,
            min_relevance,
            calibrated: self.calibration.fitted || request.mode == Mode::Text,
            groups,
            versions: plan.versions,
            partial: plan.partial,
            stages: timings.into_stages(),
        })
    }

    /// The candidates of `mode`, best first, each with its relevance.
    async fn candidates(
        &self,
        mode: Mode,
        query: &str,
        parsed: &Query,
        depths: Depths<'_>,
        routes: &[Route],
        timings: &Timings,
    ) -> Result<Vec<Candidate>, SearchError> {
        let mut candidates = match mode {
            Mode::Vector => {
                self.vectors(query, routes, depths.collections, depths.depth, timings)
                    .await?
                    .0
            }
            Mode::Text => {
                timings
                    .time("keywords", self.keywords(parsed, depths, depths.depth))
                    .await?
            }
            Mode::Hybrid => {
                let list = depths.hybrid_list();
                // The lists are independent: ask for both at once, on separate connections.
                let (vectors, text) = tokio::join!(
                    self.vectors(query, routes, depths.collections, list, timings),
                    timings.time("keywords", self.keywords(parsed, depths, list))
                );
                let ((vectors, embedded), text) = (vectors?, text?);
                let mut fused = rank::fuse(&vectors, &text, self.fusion, usize::MAX);
                if !parsed.phrases.is_empty() || !parsed.excluded.is_empty() {
                    // The keyword list is filtered already; the vector list is not.
                    let keys: Vec<(i64, i32)> = fused
                        .iter()
                        .map(|c| (c.document_id, c.chunk_index))
                        .collect();
                    let passing = text::passing(&self.pool, parsed, &keys).await?;
                    fused.retain(|c| passing.contains(&(c.document_id, c.chunk_index)));
                }
                timings
                    .time(
                        "complete",
                        self.complete(&mut fused, query, parsed, &embedded, routes),
                    )
                    .await?;
                fused
            }
        };
        let best = |signal: fn(&Candidate) -> Option<f64>| {
            candidates
                .iter()
                .filter_map(signal)
                .fold(None, |best: Option<f64>, v| {
                    Some(best.map_or(v, |b| b.max(v)))
                })
        };
        let best_cosine = best(|c| c.signals.cosine);
        let best_keyword = best(|c| c.signals.keyword);
        for candidate in &mut candidates {
            let signals = &mut candidate.signals;
            signals.cosine_gap = gap(signals.cosine, best_cosine);
            signals.keyword_gap = gap(signals.keyword, best_keyword);
            candidate.relevance = self.calibration.relevance(mode, &candidate.signals);
        }
        if mode == Mode::Hybrid {
            if self.fusion == Fusion::Relevance {
                // Stable: among equal relevance the vector list's order, then the keyword list's.
                candidates.sort_by(|a, b| b.relevance.total_cmp(&a.relevance));
                for candidate in &mut candidates {
                    candidate.score = candidate.relevance;
                }
            }
            candidates.truncate(usize::try_from(depths.depth).unwrap_or(0));
        }
        Ok(candidates)
    }

    /// Fills in what one list of a hybrid search did not measure for a chunk the other found:
    /// its cosine, its keyword share, and whether it is in the query's script.
    async fn complete(
        &self,
        fused: &mut [Candidate],
        query: &str,
        parsed: &Query,
        embedded: &vector::Embedded,
        routes: &[Route],
    ) -> Result<(), SearchError> {
        let key = |c: &Candidate| (c.document_id, c.chunk_index);
        let all: Vec<(i64, i32)> = fused.iter().map(key).collect();
        let no_cosine: Vec<(i64, i32)> = fused
            .iter()
            .filter(|c| c.signals.cosine.is_none())
            .map(key)
            .collect();
        let no_keyword: Vec<(i64, i32)> = fused
            .iter()
            .filter(|c| c.signals.keyword.is_none())
            .map(key)
            .collect();
        let (cosines, shares, scripts) = tokio::try_join!(
            self.cosines(embedded, routes, &no_cosine),
            text::shares(&self.pool, &self.stats, parsed, &no_keyword),
            hits::scripts(&self.pool, &all),
        )?;
        let script = analysis::script(query);
        for candidate in fused {
            let at = key(candidate);
            let signals = &mut candidate.signals;
            signals.cosine = signals.cosine.or_else(|| cosines.get(&at).copied());
            signals.keyword = signals.keyword.or_else(|| shares.get(&at).copied());
            signals.other_language = match (script, scripts.get(&at).copied().flatten()) {
                (Some(ours), Some(theirs)) => ours != theirs,
                _ => false,
            };
        }
        Ok(())
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
