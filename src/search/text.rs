//! Keyword search: BM25 over the postings of [`super::index`].
//!
//! One statement ranks: it reads the postings of every form of every query word (an
//! index-only scan of `chunk_terms_pkey`, which carries `tf` and the chunk's length), counts
//! each term's document frequency from those same rows, and scores each chunk as the sum over
//! query words of the best form's BM25 weight (k1 = 1.2, b = 0.75, the usual values). A chunk
//! needs to share only one informative word with the query to be ranked, and rare words weigh
//! more than common ones. Stop words were never indexed, so they cost nothing and match nothing.
//!
//! The collection's size and average chunk length change slowly and cost a scan of `chunks` to
//! count, so each process keeps them for [`STATS_TTL`]; document frequencies are exact.
//!
//! Quoted phrases filter the ranked chunks by a case-insensitive regular expression over their
//! text (the words in order, separated by anything that is not a letter or digit; the trigram
//! index serves it), and excluded words by their postings.

use std::sync::Mutex;
use std::time::{Duration, Instant};

use sqlx::PgPool;

use super::Candidate;
use crate::analysis::query::Query;

/// How long a process trusts its count of chunks and their average length.
pub const STATS_TTL: Duration = Duration::from_secs(30);

/// BM25's term-frequency saturation and length normalisation.
const K1: f64 = 1.2;
const B: f64 = 0.75;

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
        let (chunks, average_length): (i64, Option<f64>) = sqlx::query_as(
            "select count(*), avg(term_count)::float8
             from chunks
             where analyzer is not null",
        )
        .fetch_one(pool)
        .await?;
        let stats = Stats {
            chunks: chunks as f64,
            average_length: average_length.unwrap_or(1.0).max(1.0),
            at: Instant::now(),
        };
        if let Ok(mut guard) = self.0.lock() {
            *guard = Some(stats);
        }
        Ok(stats)
    }
}

/// The `limit` best chunks for `query` by BM25, best first; with `per_document`, at most that
/// many of one document (so that a grouped search sees more documents than its longest one).
pub(super) async fn rank(
    pool: &PgPool,
    stats: &StatsCache,
    query: &Query,
    document: Option<i64>,
    limit: i64,
    per_document: Option<i64>,
) -> Result<Vec<Candidate>, sqlx::Error> {
    if query.words.is_empty() {
        return Ok(Vec::new());
    }
    let stats = stats.get(pool).await?;
    let (terms, words) = query.term_pairs();
    let phrases: Vec<String> = query.phrases.iter().map(|p| phrase_regex(p)).collect();
    let rows: Vec<(i64, i32, f64)> = sqlx::query_as(
        "with q (term, word) as (
             select * from unnest($1::text[], $2::int[])
         ),
         p as materialized (
             select t.term, q.word, t.document_id, t.chunk_index, t.tf, t.length
             from q
             join chunk_terms t on t.term = q.term
         ),
         df as (
             select term, count(*)::float8 as n
             from p
             group by term
         ),
         best as (
             select p.document_id, p.chunk_index, p.word,
                    max(ln(1 + (greatest($3, df.n) - df.n + 0.5) / (df.n + 0.5))
                        * p.tf * ($7 + 1)
                        / (p.tf + $7 * (1 - $8 + $8 * p.length / $4))) as part
             from p
             join df using (term)
             where $6::bigint is null or p.document_id = $6
             group by p.document_id, p.chunk_index, p.word
         ),
         scored as (
             select document_id, chunk_index, sum(part) as score
             from best
             group by document_id, chunk_index
         ),
         capped as (
             select *, row_number() over (partition by document_id order by score desc) as nth
             from scored
         )
         select s.document_id, s.chunk_index, s.score::float8
         from capped s
         where ($11::bigint is null or s.nth <= $11)
           and (cardinality($9::text[]) = 0 or not exists (
                   select 1 from chunk_terms x
                   where x.term = any($9::text[])
                     and x.document_id = s.document_id
                     and x.chunk_index = s.chunk_index))
           and (cardinality($10::text[]) = 0 or exists (
                   select 1 from chunks c
                   where c.document_id = s.document_id
                     and c.chunk_index = s.chunk_index
                     and c.text ~* all($10::text[])))
         order by s.score desc, s.document_id, s.chunk_index
         limit $5",
    )
    .bind(&terms)
    .bind(&words)
    .bind(stats.chunks)
    .bind(stats.average_length)
    .bind(limit)
    .bind(document)
    .bind(K1)
    .bind(B)
    .bind(&query.excluded)
    .bind(&phrases)
    .bind(per_document)
    .fetch_all(pool)
    .await?;
    Ok(rows
        .into_iter()
        .map(|(document_id, chunk_index, score)| Candidate {
            document_id,
            chunk_index,
            score,
            route: None,
        })
        .collect())
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
    fn a_phrase_regex_allows_any_separator_between_its_words() {
        assert_eq!(
            phrase_regex(&["rate".into(), "limiting".into()]),
            "rate[^[:alnum:]]*limiting"
        );
    }
}
