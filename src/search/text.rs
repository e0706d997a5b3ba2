//! Keyword search: BM25 over the postings of [`super::index`].
//!
//! A chunk is scored as the sum over query words of the best form's BM25 weight (k1 = 1.2,
//! b = 0.75, the usual values, Lucene's idf). It needs to share only one informative word with
//! the query to be ranked, and rare words weigh more than common ones. Stop words were never
//! indexed, so they cost nothing and match nothing.
//!
//! Reading every posting of every query word would cost as much as the commonest word is
//! common: a ten-word question over 100,000 chunks read hundreds of thousands of rows. So one
//! statement ranks in two passes.
//! - The first reads each query term's postings in the order of their precomputed impact (the
//!   term-frequency factor at a typical length, `chunk_terms.impact`) and keeps the best
//!   candidates by idf × impact. It reads [`POSTINGS_PER_QUERY`] postings in all, shared out by
//!   [`reads`]: the rarest terms whole, the commoner ones by idf, none more than
//!   [`POSTINGS_PER_TERM`]. So a question of twenty terms reads no more than a phrase of four.
//! - The second scores those candidates exactly from their own postings: one probe of the
//!   primary key per chunk. `offset 0` keeps the planner from joining the other way round (every
//!   posting of every query term, hashed): a Korean question of twenty bigrams cost 100 ms that
//!   way at 100,000 chunks, and a one-word query 280 ms.
//!
//! Where no query term is held by more chunks than its share, the ranking is exact BM25;
//! `docket bench search-quality` compares it with a reference implementation.
//!
//! Document frequencies come from `term_stats`, which triggers keep exact. The collection's
//! size and average chunk length change slowly and cost a scan of `chunks` to count, so each
//! process keeps them for [`STATS_TTL`].
//!
//! A collection filter sits inside the first pass's per-term scan, so each term's postings are
//! read in impact order *among the caller's documents*: the best k it may see, never fewer
//! because other collections' chunks took the places. A reach of few documents is checked
//! against their ids; a larger one by looking up each posting's document. (Document frequencies and the average
//! length stay those of the whole index: the ranking of a caller's hits depends a little on
//! documents it cannot see, and says nothing about any one of them.)
//!
//! Quoted phrases filter the ranked chunks by a case-insensitive regular expression over their
//! text (the words in order, separated by anything that is not a letter or digit; the trigram
//! index serves it), and excluded words by their postings. A hybrid search applies the same
//! filters to its vector list ([`passing`]), so `"a phrase"` and `-word` mean the same there.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use sqlx::PgPool;

use super::{Candidate, Signals};
use crate::analysis::query::Query;

/// How long a process trusts its count of chunks and their average length.
pub const STATS_TTL: Duration = Duration::from_secs(30);

/// BM25's term-frequency saturation and length normalisation (the values `chunk_terms.impact`
/// is computed with).
const K1: f64 = 1.2;
const B: f64 = 0.75;

/// The most of one query term's postings the first pass reads, best impact first. Every posting
/// of a term held by fewer chunks is read; a term held by more contributes its best ones (its
/// weight is small anyway: it is common).
const POSTINGS_PER_TERM: i64 = 1000;
/// The postings the first pass reads for the whole query, shared out by [`reads`]: a two-word
/// phrase reads each word's best [`POSTINGS_PER_TERM`], a ten-word question not ten times that.
const POSTINGS_PER_QUERY: i64 = 4000;
/// The fewest postings of a term the first pass reads (all of them, when it has fewer).
const POSTINGS_PER_TERM_MIN: i64 = 100;
/// How many candidates of the first pass are scored exactly, at least.
const CANDIDATES: i64 = 100;

/// The collection statistics BM25 needs.
#[derive(Debug, Clone, Copy)]
pub struct Stats {
    chunks: f64,
    average_length: f64,
    at: Instant,
}

/// A process-wide cache of [`Stats`].
#[derive(Debug, Default)]
pub struct StatsCache(Mutex<Option<Stats>>);

impl StatsCache {
    async fn get(&self, pool: &PgPool) -> Result<Stats, sqlx::Error> {
        if let Ok(guard) = self.0.lock()
            && let Some(stats) = *guard
            && stats.at.elapsed() < STATS_TTL
        {
            return Ok(stats);
        }
        let row = sqlx::query!(
            r#"select count(*) as "chunks!", avg(term_count)::float8 as average_length
             from chunks
             where analyzer is not null"#,
        )
        .fetch_one(pool)
        .await?;
        let stats = Stats {
            chunks: row.chunks as f64,
            average_length: row.average_length.unwrap_or(1.0).max(1.0),
            at: Instant::now(),
        };
        if let Ok(mut guard) = self.0.lock() {
            *guard = Some(stats);
        }
        Ok(stats)
    }
}

/// The query terms some chunk holds, as the columns of the statement's `q`: each term, the
/// position of the query word it is a form of, and its idf.
#[derive(Debug, Default)]
struct Weighted {
    terms: Vec<String>,
    words: Vec<i32>,
    idfs: Vec<f64>,
    /// How many of each term's postings the first pass reads (see [`reads`]).
    reads: Vec<i64>,
    /// The most any chunk could score for the query: each word at its rarest form with a
    /// saturated term frequency (`idf · (k1 + 1)`), a word no chunk holds at the idf of a term
    /// held by none. A score divided by it says how much of the query's information a chunk
    /// holds, on a scale that means the same for every query.
    ceiling: f64,
}

impl Weighted {
    /// A BM25 score as a share of [`Weighted::ceiling`], in [0, 1].
    fn share(&self, score: f64) -> f64 {
        if self.ceiling > 0.0 {
            (score / self.ceiling).clamp(0.0, 1.0)
        } else {
            0.0
        }
    }
}

/// Which chunks one ranking may return.
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct Within<'a> {
    /// Only this document's.
    pub document: Option<i64>,
    /// Only those of documents in these collections.
    pub collections: Option<&'a [i64]>,
    /// At most this many of one document (so that a grouped search sees more documents than its
    /// longest one).
    pub per_document: Option<i64>,
}

/// The `limit` best chunks for `query` by BM25 `within` what may be returned, best first.
pub(super) async fn rank(
    pool: &PgPool,
    stats: &StatsCache,
    query: &Query,
    within: Within<'_>,
    limit: i64,
) -> Result<Vec<Candidate>, sqlx::Error> {
    let (terms, words) = query.term_pairs();
    if terms.is_empty() {
        return Ok(Vec::new());
    }
    let stats = stats.get(pool).await?;
    let weighted = weigh(pool, &stats, terms, words).await?;
    if weighted.terms.is_empty() {
        return Ok(Vec::new());
    }
    let few = few_documents(pool, within.collections).await?;
    score(
        pool,
        &stats,
        &weighted,
        query,
        within,
        few.as_deref(),
        limit,
    )
    .await
}

/// A reach of at most this many documents is filtered by their ids (a short array each
/// posting is compared with) instead of a lookup of each posting's document.
const FEW_DOCUMENTS: i64 = 64;

/// The documents of `collections` when they are few (see [`FEW_DOCUMENTS`]); `None` when
/// there is no filter or too many for an id list.
async fn few_documents(
    pool: &PgPool,
    collections: Option<&[i64]>,
) -> Result<Option<Vec<i64>>, sqlx::Error> {
    let Some(collections) = collections else {
        return Ok(None);
    };
    let ids = sqlx::query_scalar!(
        "select id from documents where collection_id = any($1) order by id limit $2",
        collections,
        FEW_DOCUMENTS + 1,
    )
    .fetch_all(pool)
    .await?;
    Ok((ids.len() as i64 <= FEW_DOCUMENTS).then_some(ids))
}

/// Each term's idf from its document frequency in `term_stats`; terms no chunk holds cannot
/// score, so they are left out of the statement.
async fn weigh(
    pool: &PgPool,
    stats: &Stats,
    terms: Vec<String>,
    words: Vec<i32>,
) -> Result<Weighted, sqlx::Error> {
    let frequencies: HashMap<String, i32> = sqlx::query!(
        "select term, chunks
         from term_stats
         where term = any($1)
           and chunks > 0",
        &terms[..],
    )
    .fetch_all(pool)
    .await?
    .into_iter()
    .map(|row| (row.term, row.chunks))
    .collect();
    let mut weighted = Weighted::default();
    // How many chunks hold each term kept: what the first pass's budget is shared by.
    let mut held = Vec::new();
    // Per query word: the best idf of a form some chunk holds, else that of an unseen term.
    let mut best: HashMap<i32, Option<f64>> = HashMap::new();
    for (term, word) in terms.into_iter().zip(words) {
        let seen = best.entry(word).or_default();
        if let Some(&df) = frequencies.get(&term) {
            let weight = idf(stats.chunks, f64::from(df));
            *seen = Some(seen.map_or(weight, |w| w.max(weight)));
            weighted.terms.push(term);
            weighted.words.push(word);
            weighted.idfs.push(weight);
            held.push(i64::from(df));
        }
    }
    weighted.reads = reads(&held, &weighted.idfs, POSTINGS_PER_QUERY);
    let unseen = idf(stats.chunks, 0.0);
    weighted.ceiling = best.values().map(|w| w.unwrap_or(unseen)).sum::<f64>() * (K1 + 1.0);
    Ok(weighted)
}

/// The two-pass ranking statement (see the module docs), with the query's phrase and
/// exclusion filters.
async fn score(
    pool: &PgPool,
    stats: &Stats,
    weighted: &Weighted,
    query: &Query,
    within: Within<'_>,
    few: Option<&[i64]>,
    limit: i64,
) -> Result<Vec<Candidate>, sqlx::Error> {
    // The reach's own filter: its few documents' ids, else a lookup of each posting's document.
    let collections = within.collections.filter(|_| few.is_none());
    let phrases: Vec<String> = query.phrases.iter().map(|p| phrase_regex(p)).collect();
    let candidates = (limit * 4).max(CANDIDATES);
    let rows = sqlx::query!(
        r#"with q (term, word, idf, reads) as (
             select * from unnest($1::text[], $2::int[], $3::float8[], $4::bigint[])
         ),
         first as (
             select p.document_id, p.chunk_index, q.word, max(q.idf * p.impact) as part
             from q
             cross join lateral (
                 select t.document_id, t.chunk_index, t.impact
                 from chunk_terms t
                 where t.term = q.term
                   and ($6::bigint is null or t.document_id = $6)
                   and ($14::bigint[] is null or exists (
                           select 1 from documents d
                           where d.id = t.document_id and d.collection_id = any($14)))
                   and ($15::bigint[] is null or t.document_id = any($15))
                 order by t.impact desc
                 limit q.reads
             ) p
             group by p.document_id, p.chunk_index, q.word
         ),
         candidates as (
             select document_id, chunk_index
             from first
             group by document_id, chunk_index
             order by sum(part) desc
             limit $5
         ),
         exact as (
             select c.document_id, c.chunk_index, q.word,
                    max(q.idf * t.tf * ($8::float8 + 1)
                        / (t.tf + $8::float8 * (1 - $9::float8 + $9::float8 * t.length / $7::float8))) as part
             from candidates c
             cross join lateral (
                 select t.term, t.tf, t.length
                 from chunk_terms t
                 where t.document_id = c.document_id
                   and t.chunk_index = c.chunk_index
                   and t.term = any($1::text[])
                 offset 0
             ) t
             join q on q.term = t.term
             group by c.document_id, c.chunk_index, q.word
         ),
         scored as (
             select document_id, chunk_index, sum(part) as score,
                    row_number() over (partition by document_id order by sum(part) desc) as nth
             from exact
             group by document_id, chunk_index
         )
         select s.document_id as "document_id!", s.chunk_index as "chunk_index!",
                s.score::float8 as "score!"
         from scored s
         where ($12::bigint is null or s.nth <= $12)
           and (cardinality($10::text[]) = 0 or not exists (
                   select 1 from chunk_terms x
                   where x.document_id = s.document_id
                     and x.chunk_index = s.chunk_index
                     and x.term = any($10::text[])))
           and (cardinality($11::text[]) = 0 or exists (
                   select 1 from chunks c
                   where c.document_id = s.document_id
                     and c.chunk_index = s.chunk_index
                     and c.text ~* all($11::text[])))
         order by s.score desc, s.document_id, s.chunk_index
         limit $13"#,
        &weighted.terms[..],
        &weighted.words[..],
        &weighted.idfs[..],
        &weighted.reads[..],
        candidates,
        within.document,
        stats.average_length,
        K1,
        B,
        &query.excluded[..],
        &phrases[..],
        within.per_document,
        limit,
        collections,
        few,
    )
    .fetch_all(pool)
    .await?;
    Ok(rows
        .into_iter()
        .map(|row| Candidate {
            document_id: row.document_id,
            chunk_index: row.chunk_index,
            score: row.score,
            route: None,
            signals: Signals {
                keyword: Some(weighted.share(row.score)),
                ..Signals::default()
            },
            relevance: 0.0,
        })
        .collect())
}

/// Those of `chunks` that pass the query's phrase and exclusion filters (the same tests the
/// ranking statement applies), for the vector list of a hybrid search.
pub(super) async fn passing(
    pool: &PgPool,
    query: &Query,
    chunks: &[(i64, i32)],
) -> Result<std::collections::HashSet<(i64, i32)>, sqlx::Error> {
    let phrases: Vec<String> = query.phrases.iter().map(|p| phrase_regex(p)).collect();
    let ids: Vec<i64> = chunks.iter().map(|k| k.0).collect();
    let indexes: Vec<i32> = chunks.iter().map(|k| k.1).collect();
    let rows = sqlx::query!(
        r#"select c.document_id as "document_id!", c.chunk_index as "chunk_index!"
         from unnest($1::bigint[], $2::int[]) as w(document_id, chunk_index)
         join chunks c using (document_id, chunk_index)
         where (cardinality($3::text[]) = 0 or not exists (
                   select 1 from chunk_terms x
                   where x.document_id = c.document_id
                     and x.chunk_index = c.chunk_index
                     and x.term = any($3::text[])))
           and (cardinality($4::text[]) = 0 or c.text ~* all($4::text[]))"#,
        &ids[..],
        &indexes[..],
        &query.excluded[..],
        &phrases[..],
    )
    .fetch_all(pool)
    .await?;
    Ok(rows
        .into_iter()
        .map(|row| (row.document_id, row.chunk_index))
        .collect())
}

/// Each of `chunks`' exact share of the query's keyword weight (see [`Weighted::ceiling`]);
/// a chunk that holds none of the query's terms gets 0.
pub(super) async fn shares(
    pool: &PgPool,
    stats: &StatsCache,
    query: &Query,
    chunks: &[(i64, i32)],
) -> Result<HashMap<(i64, i32), f64>, sqlx::Error> {
    let mut shares: HashMap<(i64, i32), f64> = chunks.iter().map(|&key| (key, 0.0)).collect();
    let (terms, words) = query.term_pairs();
    if terms.is_empty() || chunks.is_empty() {
        return Ok(shares);
    }
    let stats = stats.get(pool).await?;
    let weighted = weigh(pool, &stats, terms, words).await?;
    if weighted.terms.is_empty() {
        return Ok(shares);
    }
    let ids: Vec<i64> = chunks.iter().map(|k| k.0).collect();
    let indexes: Vec<i32> = chunks.iter().map(|k| k.1).collect();
    let rows = sqlx::query!(
        r#"with q (term, word, idf) as (
             select * from unnest($1::text[], $2::int[], $3::float8[])
         ),
         exact as (
             select w.document_id, w.chunk_index, q.word,
                    max(q.idf * t.tf * ($5::float8 + 1)
                        / (t.tf + $5::float8 * (1 - $6::float8 + $6::float8 * t.length / $4::float8))) as part
             from unnest($7::bigint[], $8::int[]) as w(document_id, chunk_index)
             cross join lateral (
                 select t.term, t.tf, t.length
                 from chunk_terms t
                 where t.document_id = w.document_id
                   and t.chunk_index = w.chunk_index
                   and t.term = any($1::text[])
                 offset 0
             ) t
             join q on q.term = t.term
             group by w.document_id, w.chunk_index, q.word
         )
         select document_id as "document_id!", chunk_index as "chunk_index!",
                sum(part)::float8 as "score!"
         from exact
         group by document_id, chunk_index"#,
        &weighted.terms[..],
        &weighted.words[..],
        &weighted.idfs[..],
        stats.average_length,
        K1,
        B,
        &ids[..],
        &indexes[..],
    )
    .fetch_all(pool)
    .await?;
    for row in rows {
        shares.insert(
            (row.document_id, row.chunk_index),
            weighted.share(row.score),
        );
    }
    Ok(shares)
}

/// How many postings of each term the first pass reads, out of `budget` for the query, given
/// how many chunks hold each term (`held`) and its idf. The rarest terms are served first and
/// take all their postings (they decide the ranking, and cost little); what is left is shared
/// by the commoner ones in proportion to their idf, between [`POSTINGS_PER_TERM_MIN`] and
/// [`POSTINGS_PER_TERM`] each. A common word's best postings beyond its share could only add a
/// small weight to chunks the rarer words did not find; the exact pass still scores every
/// candidate on every term.
fn reads(held: &[i64], idfs: &[f64], budget: i64) -> Vec<i64> {
    let mut order: Vec<usize> = (0..held.len()).collect();
    order.sort_by_key(|&i| held[i]);
    let mut reads = vec![0; held.len()];
    let mut left = budget;
    let mut weight_left: f64 = idfs.iter().sum();
    for i in order {
        let share = if weight_left > 0.0 {
            (left.max(0) as f64 * idfs[i] / weight_left).round() as i64
        } else {
            0
        };
        reads[i] = held[i].min(share.clamp(POSTINGS_PER_TERM_MIN, POSTINGS_PER_TERM));
        left -= reads[i];
        weight_left -= idfs[i];
    }
    reads
}

/// BM25's inverse document frequency (the Lucene form, never negative).
fn idf(chunks: f64, df: f64) -> f64 {
    (1.0 + (chunks.max(df) - df + 0.5) / (df + 0.5)).ln()
}

/// A PostgreSQL regular expression matching the phrase's words in order, whatever separates
/// them. The words are runs of letters, digits and marks, so only they need no escaping; any
/// other character is escaped anyway.
fn phrase_regex(words: &[String]) -> String {
    let escaped: Vec<String> = words
        .iter()
        .map(|word| {
            word.chars()
                .map(|c| {
                    if c.is_alphanumeric() {
                        c.to_string()
                    } else {
                        format!("\\{c}")
                    }
                })
                .collect()
        })
        .collect();
    escaped.join("[^[:alnum:]]*")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rare_terms_are_read_whole_and_common_ones_share_the_rest_by_idf() {
        // A two-word phrase of common words reads each one's best 1,000, as before.
        assert_eq!(reads(&[40_000, 30_000], &[0.9, 1.1], 4000), [1000, 1000]);
        // A question: the rare terms whole, the common ones what is left, by idf.
        let held = [12, 300, 40_000, 40_000, 20_000, 35_000];
        let idfs = [8.0, 5.0, 0.9, 0.9, 1.6, 1.0];
        let reads = reads(&held, &idfs, 4000);
        assert_eq!(&reads[..2], [12, 300]);
        assert!(
            reads[4] > reads[2],
            "the rarer common word reads more: {reads:?}"
        );
        assert!(reads.iter().sum::<i64>() <= 4000, "{reads:?}");
        assert!(reads[2..].iter().all(|&r| r >= POSTINGS_PER_TERM_MIN));
        // Many common terms: each still reads its floor.
        let many = super::reads(&[50_000; 40], &[0.5; 40], 4000);
        assert!(many.iter().all(|&r| r == POSTINGS_PER_TERM_MIN), "{many:?}");
    }

    #[test]
    fn a_phrase_regex_allows_any_separator_between_its_words() {
        assert_eq!(
            phrase_regex(&["rate".into(), "limiting".into()]),
            "rate[^[:alnum:]]*limiting"
        );
    }
}
