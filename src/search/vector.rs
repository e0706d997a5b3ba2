//! Vector search: the nearest chunks to the embedded query over each model version's partial
//! HNSW index, and how the versions in use during a model switch are asked and merged.
//!
//! The query is embedded by the embedder of the model version whose vectors are searched
//! (vectors of different versions cannot be compared) and the nearest chunks by cosine distance
//! come from that version's partial HNSW index. The query repeats the index's expression and
//! predicate exactly (`(embedding::vector(DIMS)) <=> …` with `where model_version = '…'`), or
//! PostgreSQL would not use the index. `hnsw.ef_search` is set per query, and pgvector's
//! iterative scan (`relaxed_order`) keeps a document filter from silently returning fewer than
//! `k` hits: without it the index yields `ef_search` candidates and the filter discards those
//! of other documents.
//!
//! **Centring** ([`super::centring`]): for a model with fitted per-script means, the query
//! vector is moved away from its script's mean, and so is each chunk's when it is scored.
//! The index cannot hold every chunk centred (the share and the means are settings of the
//! search, not of the stored data), so it is asked for [`RESCORED_DEPTH`] times (at least
//! [`RESCORED_MIN`]) the neighbours wanted, by the centred query, and those are rescored by
//! the centred cosine.
//! Hybrid search's cosines of keyword-only hits are centred alike, so one cosine means the
//! same in every list.
//!
//! **During a switch of the active model version** each document is read under the version the
//! `document_search_versions` view names for it: the active one once its set there is complete,
//! else its newest complete set under another version. A vector search then asks one index per
//! version in use, each query embedded by that version's embedder
//! ([`crate::models::embedder_for`]): the active version's for every document except those still
//! read elsewhere (`document_id <> all(…)`, so a half-written new set does not answer for them),
//! and each older version's over *all* its vectors, keeping only the hits of the documents read
//! under it. An older version this process cannot embed for (another provider's model) is
//! skipped, its documents are searched through whatever vectors they already have under the
//! active version, and the response says so (`versions`, `partial`).
//!
//! The view counts every set's chunks and vectors, about 0.1 ms per document: far too much to run
//! whole on every search. So search first picks the documents that *can* be read elsewhere (a set
//! marked complete under another version and none under the active one: an anti-join over
//! `embedding_sets`, cheap) and asks the view only about those. An active set is marked complete
//! only after its vectors were counted, and the only way it loses vectors later is a reprocess,
//! which deletes every version's vectors of that document; so the narrowing drops nothing the view
//! would route elsewhere, except after vectors were deleted by hand.
//!
//! **Merging two versions' lists: placement by the older version's rank.** Cosine values of two
//! models are not on one scale, so they are not compared. Reciprocal rank fusion of the two lists
//! was tried and rejected: the lists hold disjoint documents, so fusion interleaves them, and a
//! version that still serves one document would put that document at rank 1 or 2 of every query,
//! relevant or not. Instead an older version ranks a document among *all* documents it holds
//! (before a switch it holds every one), which is a position on the same footing as the active
//! list's: a hit the old version ranks n-th overall is placed n-th in the merged list, and the
//! active version's hits fill the other places in their own order. A straggler that matches well
//! stays on top; one that matches poorly stays out of the top k. Each hit keeps the cosine
//! similarity of its own version and names it (`model_version`), so during a switch the scores of
//! two versions are not sorted against each other. With one version in use nothing changes.

use std::collections::{HashMap, HashSet};

use pgvector::Vector;
use sqlx::PgPool;

use super::centring::Centring;
use super::rank::place;
use super::timings::Timings;
use super::{
    Candidate, EF_SEARCH, SearchError, SearchRequest, Searcher, Signals, VersionRole,
    VersionSearched,
};
use crate::embed::{Embedder, Purpose};
use crate::models::{self, ModelVersion};

/// With centring, how many times `limit` neighbours the index is asked for before they are
/// rescored by the centred cosine, and at least how many. The index ranks stored vectors by
/// the centred query, which still favours the script with the larger share of the corpus, so
/// an answer in another script can sit a few hundred places down: on the development set
/// (4,473 chunks) at least 100 gave vector mode a cross-lingual passage@5 of 0.35, at least 400
/// gave 0.40, and overall 0.695 against 0.732, for about 8 ms more per query (BENCHMARKS.md,
/// issue 23).
const RESCORED_DEPTH: i64 = 3;
const RESCORED_MIN: i64 = 400;

/// Which documents' vectors one nearest-neighbour query may return; the documents are `$3`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scope {
    /// Every document (`$3` is null).
    All,
    /// Only the documents in `$3`.
    Only,
    /// Every document but those in `$3`.
    Except,
}

/// One version's index to ask, and about which documents.
#[derive(Debug, Clone)]
pub(super) struct Route {
    pub(super) version: ModelVersion,
    pub(super) embedder: Embedder,
    scope: Scope,
    /// `$3` of the query, for [`Scope::Only`] and [`Scope::Except`].
    documents: Vec<i64>,
    /// For an older version asked over all its vectors: the documents read under it, the only
    /// ones whose hits are kept (the others only count for their places).
    keep: Option<HashSet<i64>>,
}

/// What a vector search asks.
#[derive(Debug, Default)]
pub(super) struct Plan {
    pub(super) routes: Vec<Route>,
    pub(super) versions: Vec<VersionSearched>,
    pub(super) partial: bool,
}

/// The query embedded once per embedding model of the routes, by [`Embedder::model_id`].
#[derive(Debug, Default)]
pub(super) struct Embedded(HashMap<String, Vector>);

impl Route {
    /// Whether this route's version is the one `document` is read under.
    fn reads(&self, document: i64) -> bool {
        let scoped = match self.scope {
            Scope::All => true,
            Scope::Only => self.documents.contains(&document),
            Scope::Except => !self.documents.contains(&document),
        };
        scoped
            && self
                .keep
                .as_ref()
                .is_none_or(|keep| keep.contains(&document))
    }

    /// Every document of `version`, or only `document`.
    fn new(version: ModelVersion, embedder: Embedder, document: Option<i64>) -> Self {
        Self {
            version,
            embedder,
            scope: if document.is_some() {
                Scope::Only
            } else {
                Scope::All
            },
            documents: document.into_iter().collect(),
            keep: None,
        }
    }
}

impl Searcher {
    fn embedder_for(&self, version: &ModelVersion) -> Option<Embedder> {
        models::embedder_for(version, &self.embedder)
    }

    /// The centring of `route`'s model, if it has one (see [`super::centring`]).
    fn centring(&self, route: &Route) -> Option<Centring> {
        Centring::for_model(&route.embedder.model_id(), self.centring_share)
    }

    /// Which versions' indexes a vector search asks, about which documents.
    pub(super) async fn plan(&self, request: &SearchRequest) -> Result<Plan, SearchError> {
        let document = request.document.map(|d| d.0);
        if let Some(requested) = &request.model_version {
            return self.requested_plan(requested, document).await;
        }
        let active = models::active(&self.pool)
            .await?
            .ok_or(SearchError::NoActiveModel)?;
        let mut plan = Plan::default();
        let (elsewhere, fallbacks) = self
            .fallback_routes(&mut plan, &active, document, request.collections.ids())
            .await?;
        let entry = self.active_route(&mut plan, active, document, elsewhere)?;
        plan.versions.push(entry);
        plan.versions.extend(fallbacks);
        Ok(plan)
    }

    /// The plan of a search that names its version: that version's index alone.
    async fn requested_plan(
        &self,
        requested: &str,
        document: Option<i64>,
    ) -> Result<Plan, SearchError> {
        let version = models::get(&self.pool, requested)
            .await?
            .ok_or_else(|| SearchError::UnknownModel(requested.to_owned()))?;
        let embedder =
            self.embedder_for(&version)
                .ok_or_else(|| SearchError::ModelNotEmbeddable {
                    requested: requested.to_owned(),
                    available: self.model.model_version.clone(),
                })?;
        Ok(Plan {
            routes: vec![Route::new(version, embedder, document)],
            versions: vec![VersionSearched {
                model_version: requested.to_owned(),
                role: VersionRole::Requested,
                documents: None,
                searched: true,
                reason: None,
            }],
            partial: false,
        })
    }

    /// Adds a route per older version some documents are still read under and this process
    /// can embed for; returns the documents those routes answer for (the active index must
    /// skip them, or their partial new sets would answer for them a second time) and each
    /// older version's entry, searched or not.
    async fn fallback_routes(
        &self,
        plan: &mut Plan,
        active: &ModelVersion,
        document: Option<i64>,
        collections: Option<&[i64]>,
    ) -> Result<(Vec<i64>, Vec<VersionSearched>), SearchError> {
        let mut elsewhere: Vec<i64> = Vec::new();
        let mut fallbacks = Vec::new();
        let read = read_elsewhere(&self.pool, &active.model_version, document, collections).await?;
        for (name, documents) in read {
            let version = models::get(&self.pool, &name).await?;
            let embedder = version.as_ref().and_then(|v| self.embedder_for(v));
            let entry = VersionSearched {
                model_version: name.clone(),
                role: VersionRole::Fallback,
                documents: Some(documents.len()),
                searched: embedder.is_some(),
                reason: None,
            };
            match (version, embedder) {
                (Some(version), Some(embedder)) => {
                    elsewhere.extend(&documents);
                    fallbacks.push(entry);
                    let mut route = Route::new(version, embedder, document);
                    if document.is_none() {
                        route.keep = Some(documents.into_iter().collect());
                    }
                    plan.routes.push(route);
                }
                _ => {
                    plan.partial = true;
                    fallbacks.push(VersionSearched {
                        reason: Some(format!(
                            "this server embeds queries with {}, not {name}: these documents are searched only through the vectors they already have under {}",
                            self.model.model_version, active.model_version
                        )),
                        ..entry
                    });
                }
            }
        }
        Ok((elsewhere, fallbacks))
    }

    /// Puts the active version's route first (over every document but those read `elsewhere`)
    /// when this process can embed for it, and returns its entry.
    fn active_route(
        &self,
        plan: &mut Plan,
        active: ModelVersion,
        document: Option<i64>,
        elsewhere: Vec<i64>,
    ) -> Result<VersionSearched, SearchError> {
        let mut entry = VersionSearched {
            model_version: active.model_version.clone(),
            role: VersionRole::Active,
            documents: None,
            searched: false,
            reason: None,
        };
        match self.embedder_for(&active) {
            // The one document asked for is read under a fallback.
            Some(_) if document.is_some() && !elsewhere.is_empty() => {
                entry.reason = Some("the document is read under an older version".to_owned());
            }
            Some(embedder) => {
                entry.searched = true;
                let mut route = Route::new(active, embedder, document);
                if document.is_none() && !elsewhere.is_empty() {
                    route.scope = Scope::Except;
                    route.documents = elsewhere;
                }
                plan.routes.insert(0, route);
            }
            None if plan.routes.is_empty() => {
                return Err(SearchError::ModelNotEmbeddable {
                    requested: active.model_version,
                    available: self.model.model_version.clone(),
                });
            }
            None => {
                plan.partial = true;
                entry.reason = Some(format!(
                    "this server embeds queries with {}: documents already moved to the active version are not searched by vector here",
                    self.model.model_version
                ));
            }
        }
        Ok(entry)
    }

    /// The `limit` nearest chunks over every route, merged by placement (see the module docs),
    /// and the query's vectors, centred where the model has a centring (for
    /// [`Searcher::cosines`]).
    pub(super) async fn vectors(
        &self,
        query: &str,
        routes: &[Route],
        collections: Option<&[i64]>,
        limit: i64,
        timings: &Timings,
    ) -> Result<(Vec<Candidate>, Embedded), SearchError> {
        let embedded = timings.time("embed", self.embedded(query, routes)).await?;
        let nearest = timings
            .time(
                "nearest",
                self.nearest_all(&embedded, routes, collections, limit),
            )
            .await?;
        Ok((nearest, embedded))
    }

    /// The query embedded for every route, centred where the model has a centring.
    async fn embedded(&self, query: &str, routes: &[Route]) -> Result<Embedded, SearchError> {
        // Versions that differ only in chunking embed a query alike: embed it once for them.
        let mut embedded = Embedded::default();
        for route in routes {
            if let std::collections::hash_map::Entry::Vacant(slot) =
                embedded.0.entry(route.embedder.model_id())
            {
                let mut vectors = route
                    .embedder
                    .embed_as(&[query.to_owned()], Purpose::Query)
                    .await?;
                let vector = vectors.pop().unwrap_or_default();
                let vector = match self.centring(route) {
                    Some(centring) => centring.centre(&vector, query),
                    None => vector,
                };
                slot.insert(Vector::from(vector));
            }
        }
        Ok(embedded)
    }

    /// The cosine similarity of the query to each of `chunks` under the version that reads
    /// its document (the first route that has a vector for it); chunks without one are left out.
    pub(super) async fn cosines(
        &self,
        embedded: &Embedded,
        routes: &[Route],
        chunks: &[(i64, i32)],
    ) -> Result<HashMap<(i64, i32), f64>, sqlx::Error> {
        let mut found: HashMap<(i64, i32), f64> = HashMap::new();
        for route in routes {
            let wanted: Vec<&(i64, i32)> = chunks
                .iter()
                .filter(|key| !found.contains_key(key))
                .filter(|(document, _)| route.reads(*document))
                .collect();
            let Some(query) = embedded.0.get(&route.embedder.model_id()) else {
                continue;
            };
            if wanted.is_empty() {
                continue;
            }
            let ids: Vec<i64> = wanted.iter().map(|k| k.0).collect();
            let indexes: Vec<i32> = wanted.iter().map(|k| k.1).collect();
            if let Some(centring) = self.centring(route) {
                let sql = with_text_start(
                    "select w.document_id, w.chunk_index, e.embedding
                     from unnest($1::bigint[], $2::int[]) as w(document_id, chunk_index)
                     join embeddings e
                       on e.document_id = w.document_id
                      and e.chunk_index = w.chunk_index
                      and e.model_version = $3",
                );
                let rows: Vec<StoredVector> = sqlx::query_as(sqlx::AssertSqlSafe(sql))
                    .bind(&ids)
                    .bind(&indexes)
                    .bind(&route.version.model_version)
                    .fetch_all(&self.pool)
                    .await?;
                found.extend(rows.into_iter().map(|(d, c, embedding, start)| {
                    (
                        (d, c),
                        centring.similarity(query.as_slice(), embedding.as_slice(), &start),
                    )
                }));
                continue;
            }
            let dims = route.version.dims;
            let sql = format!(
                "select e.document_id, e.chunk_index,
                        (1 - ((e.embedding::vector({dims})) <=> $1::vector({dims})))::float8
                 from unnest($2::bigint[], $3::int[]) as w(document_id, chunk_index)
                 join embeddings e
                   on e.document_id = w.document_id
                  and e.chunk_index = w.chunk_index
                  and e.model_version = $4"
            );
            let rows: Vec<(i64, i32, f64)> = sqlx::query_as(sqlx::AssertSqlSafe(sql))
                .bind(query)
                .bind(&ids)
                .bind(&indexes)
                .bind(&route.version.model_version)
                .fetch_all(&self.pool)
                .await?;
            found.extend(rows.into_iter().map(|(d, c, cosine)| ((d, c), cosine)));
        }
        Ok(found)
    }

    /// The `limit` nearest chunks to the embedded queries over every route.
    async fn nearest_all(
        &self,
        embedded: &Embedded,
        routes: &[Route],
        collections: Option<&[i64]>,
        limit: i64,
    ) -> Result<Vec<Candidate>, SearchError> {
        let embedded = &embedded.0;
        let queries = routes.iter().enumerate().map(|(at, route)| {
            let vector = embedded.get(&route.embedder.model_id());
            self.nearest(route, at, vector, collections, limit)
        });
        let lists = futures::future::try_join_all(queries).await?;
        // Whether a version has vectors at all is a fact about every collection: a search
        // limited to some just finds nothing.
        if collections.is_none() && lists.iter().all(Vec::is_empty) {
            let mut any = false;
            for route in routes {
                any = any || self.has_vectors(&route.version.model_version).await?;
            }
            if let (false, Some(first)) = (any, routes.first()) {
                return Err(SearchError::NoVectors(first.version.model_version.clone()));
            }
        }
        let mut placed: Vec<Candidate> = Vec::new();
        let mut older: Vec<(usize, Candidate)> = Vec::new();
        for (route, list) in routes.iter().zip(lists) {
            match &route.keep {
                None => placed.extend(list),
                Some(keep) => older.extend(
                    list.into_iter()
                        .enumerate()
                        .filter(|(_, c)| keep.contains(&c.document_id)),
                ),
            }
        }
        Ok(place(placed, older, usize::try_from(limit).unwrap_or(0)))
    }

    /// The `limit` nearest chunks to `query` under `route`'s version, over its HNSW index.
    async fn nearest(
        &self,
        route: &Route,
        at: usize,
        query: Option<&Vector>,
        collections: Option<&[i64]>,
        limit: i64,
    ) -> Result<Vec<Candidate>, SearchError> {
        let Some(query) = query else {
            return Ok(Vec::new());
        };
        let version = &route.version;
        let centring = self.centring(route);
        // Centred: the index holds uncentred vectors, so more neighbours are asked for, each
        // with its stored vector, and rescored by the centred cosine.
        let (sql, fetch) = match centring {
            Some(_) => (
                centred_sql(
                    version.dims,
                    &version.model_version,
                    route.scope,
                    collections.is_some(),
                ),
                limit.saturating_mul(RESCORED_DEPTH).max(RESCORED_MIN),
            ),
            None => (
                vector_sql(
                    version.dims,
                    &version.model_version,
                    route.scope,
                    collections.is_some(),
                ),
                limit,
            ),
        };
        let documents = (route.scope != Scope::All).then_some(route.documents.as_slice());
        let mut tx = self.pool.begin().await?;
        // Local to this transaction, so pooled connections keep the server defaults.
        sqlx::query!(
            "select set_config('hnsw.ef_search', $1, true) as ef_search,
                    set_config('hnsw.iterative_scan', 'relaxed_order', true) as iterative_scan",
            EF_SEARCH.max(fetch).to_string(),
        )
        .fetch_one(&mut *tx)
        .await?;
        // Runtime SQL: the cast's dimension and the partial index's version literal are part
        // of the statement (see `vector_sql`), so it is built per model version.
        let similarities: Vec<(i64, i32, f64)> = match centring {
            None => {
                let rows: Vec<(i64, i32, f64)> = sqlx::query_as(sqlx::AssertSqlSafe(sql))
                    .bind(query)
                    .bind(fetch)
                    .bind(documents)
                    .bind(collections)
                    .fetch_all(&mut *tx)
                    .await?;
                rows.into_iter()
                    .map(|(document, chunk, distance)| (document, chunk, 1.0 - distance))
                    .collect()
            }
            Some(centring) => {
                let rows: Vec<StoredVector> = sqlx::query_as(sqlx::AssertSqlSafe(sql))
                    .bind(query)
                    .bind(fetch)
                    .bind(documents)
                    .bind(collections)
                    .fetch_all(&mut *tx)
                    .await?;
                rows.into_iter()
                    .map(|(document, chunk, embedding, start)| {
                        let cosine =
                            centring.similarity(query.as_slice(), embedding.as_slice(), &start);
                        (document, chunk, cosine)
                    })
                    .collect()
            }
        };
        tx.commit().await?;
        // relaxed_order may return neighbours slightly out of order, and centring reorders
        // them: sort by the similarity itself.
        let mut candidates: Vec<Candidate> = similarities
            .into_iter()
            .map(|(document_id, chunk_index, cosine)| Candidate {
                document_id,
                chunk_index,
                score: cosine,
                route: Some(at),
                signals: Signals {
                    cosine: Some(cosine),
                    ..Signals::default()
                },
                relevance: 0.0,
            })
            .collect();
        candidates.sort_by(|a, b| b.score.total_cmp(&a.score));
        candidates.truncate(usize::try_from(limit).unwrap_or(0));
        Ok(candidates)
    }

    async fn has_vectors(&self, version: &str) -> Result<bool, sqlx::Error> {
        sqlx::query_scalar!(
            r#"select exists (select 1 from embedding_sets where model_version = $1)
                   or exists (select 1 from embeddings where model_version = $1) as "any!""#,
            version,
        )
        .fetch_one(&self.pool)
        .await
    }
}

/// The nearest-neighbour query of one model version, over the documents `scope` lets through
/// (`$1` the query vector, `$2` the limit, `$3` a `bigint[]` of documents) and, when
/// `in_collections`, only those of the collections `$4` (a `bigint[]`): a filter inside the index
/// scan, which the iterative scan keeps reading past until `$2` rows pass it.
///
/// Built with `format!` because the index is an *expression* index over
/// `embedding::vector(DIMS)` and a *partial* one for `model_version = '<literal>'`: PostgreSQL
/// uses it only when the query has the same cast (the dimension is part of the type, and
/// types take no bind parameters) and a predicate it can prove implies the index's, which a bind
/// parameter is not under a generic plan. `dims` is an integer and the version is quoted as a
/// SQL literal, so nothing from a request reaches the SQL unquoted.
pub fn vector_sql(dims: i32, model_version: &str, scope: Scope, in_collections: bool) -> String {
    let columns = format!(
        "document_id, chunk_index, ((embedding::vector({dims})) <=> $1::vector({dims}))::float8 as distance"
    );
    nearest_sql(dims, model_version, scope, in_collections, &columns)
}

/// The centred search's nearest-neighbour query: [`vector_sql`]'s neighbours as
/// [`StoredVector`]s. The vector comes from the index scan's own heap row, so only the start of
/// the text is joined, not each neighbour looked up again in `embeddings` by key (about 1.5 ms
/// of 400 neighbours at 100,000 chunks, BENCHMARKS.md).
fn centred_sql(dims: i32, model_version: &str, scope: Scope, in_collections: bool) -> String {
    let nearest = nearest_sql(
        dims,
        model_version,
        scope,
        in_collections,
        "document_id, chunk_index, embedding",
    );
    with_text_start(&nearest)
}

/// The nearest-neighbour statement both searches share, returning `columns` of each neighbour.
fn nearest_sql(
    dims: i32,
    model_version: &str,
    scope: Scope,
    in_collections: bool,
    columns: &str,
) -> String {
    let version = quote_literal(model_version);
    let filter = match scope {
        // $3 is always bound; this keeps its type known when no filter is asked for.
        Scope::All => "and $3::bigint[] is null",
        Scope::Only => "and document_id = any($3::bigint[])",
        Scope::Except => "and document_id <> all($3::bigint[])",
    };
    // $4 likewise: a reach of every collection binds null and asks nothing of `documents`.
    let collections = if in_collections {
        "and exists (select 1 from documents d
                     where d.id = embeddings.document_id and d.collection_id = any($4::bigint[]))"
    } else {
        "and $4::bigint[] is null"
    };
    format!(
        "select {columns}
         from embeddings
         where model_version = {version}
           {filter}
           {collections}
         order by (embedding::vector({dims})) <=> $1::vector({dims})
         limit $2"
    )
}

/// A chunk's key, its stored vector and the start of its text: what the centred cosine needs.
type StoredVector = (i64, i32, Vector, String);

/// `rows` (a query returning `document_id, chunk_index, embedding`) as [`StoredVector`]s: each
/// joined to the start of its chunk's text, whose script decides the centring.
fn with_text_start(rows: &str) -> String {
    format!(
        "select n.document_id, n.chunk_index, n.embedding, left(c.text, 400)
         from ({rows}) as n
         join chunks c
           on c.document_id = n.document_id
          and c.chunk_index = n.chunk_index"
    )
}

/// Per older version, the documents `document_search_versions` reads under it instead of under
/// `active` (only `document`, when given; only those of `collections`, when given, so that
/// not even their number reaches a caller outside them), by version name. The view is asked only about the
/// documents that can be read elsewhere (see the module docs): asked whole it counts every set.
async fn read_elsewhere(
    pool: &PgPool,
    active: &str,
    document: Option<i64>,
    collections: Option<&[i64]>,
) -> Result<Vec<(String, Vec<i64>)>, sqlx::Error> {
    let rows = sqlx::query!(
        r#"select v.model_version as "model_version!",
                array_agg(v.document_id order by v.document_id) as "documents!: Vec<i64>"
         from document_search_versions v
         where v.document_id = any(array(
                   select s.document_id
                   from embedding_sets s
                   where s.model_version <> $1
                     and s.completed_at is not null
                     and ($2::bigint is null or s.document_id = $2)
                     and ($3::bigint[] is null or exists (
                             select 1 from documents d
                             where d.id = s.document_id and d.collection_id = any($3)))
                     and not exists (
                         select 1 from embedding_sets a
                         where a.document_id = s.document_id
                           and a.model_version = $1
                           and a.completed_at is not null)))
           and v.model_version <> $1
         group by v.model_version
         order by v.model_version"#,
        active,
        document,
        collections,
    )
    .fetch_all(pool)
    .await?;
    Ok(rows
        .into_iter()
        .map(|row| (row.model_version, row.documents))
        .collect())
}

/// A SQL string literal: doubling quotes is enough under `standard_conforming_strings`, on by
/// default since PostgreSQL 9.1; the `E` prefix is never used, so backslashes are plain.
fn quote_literal(value: &str) -> String {
    format!("'{}'", value.replace('\'', "''"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn vector_sql_quotes_the_version_and_repeats_the_index_expression() {
        let sql = vector_sql(384, "it's:v1", Scope::Only, false);
        assert!(sql.contains("where model_version = 'it''s:v1'"), "{sql}");
        assert_eq!(
            sql.matches("(embedding::vector(384)) <=> $1::vector(384)")
                .count(),
            2
        );
        assert!(sql.contains("document_id = any($3::bigint[])"));
        assert!(sql.contains("select document_id, chunk_index, ("), "{sql}");
        assert!(
            vector_sql(8, "v", Scope::Except, false).contains("document_id <> all($3::bigint[])")
        );
        assert!(vector_sql(8, "v", Scope::All, false).contains("$3::bigint[] is null"));
        assert!(vector_sql(8, "v", Scope::All, false).contains("$4::bigint[] is null"));
        assert!(
            vector_sql(8, "v", Scope::All, true).contains("d.collection_id = any($4::bigint[])")
        );
    }

    #[test]
    fn centred_sql_reads_each_vector_from_the_index_scan_alone() {
        let sql = centred_sql(384, "v", Scope::All, true);
        assert_eq!(sql.matches("from embeddings").count(), 1, "{sql}");
        assert_eq!(sql.matches("join embeddings").count(), 0, "{sql}");
        assert!(
            sql.contains("select document_id, chunk_index, embedding"),
            "{sql}"
        );
        assert!(sql.contains("left(c.text, 400)"), "{sql}");
        assert!(sql.contains("order by (embedding::vector(384)) <=> $1::vector(384)"));
    }
}
