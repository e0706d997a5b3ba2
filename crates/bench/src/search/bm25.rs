//! How far the keyword ranking's budgeted first pass strays from exact BM25 at scale.
//!
//! `src/search/text.rs` reads a bounded number of postings per query and scores those
//! candidates exactly; a chunk none of the read postings named cannot be ranked. This module is
//! the reference: the same BM25 (k1 = 1.2, b = 0.75, Lucene's idf, a word scored by its best
//! form) over *every* posting of every query term, written here independently in plain SQL.
//! For each question it compares the API's text-mode top 10 with the exact top 10. A hit
//! counts as agreeing when its exact score is at least the exact 10th score, so ties at the
//! cut are not disagreements; and the share of the exact top 10's summed score that the API's
//! hits hold says how far off the disagreements are.

use std::collections::HashMap;

use docket::analysis::query;

/// What the comparison found over a set of questions.
#[derive(Debug, Default, Clone, Copy)]
pub(super) struct Agreement {
    /// Mean share of the API's top 10 that exact BM25 also ranks in its top 10.
    pub at_10: f64,
    /// Share of questions whose first hit is exact BM25's best (or ties it).
    pub at_1: f64,
    /// Mean over questions of the exact scores of the API's top 10, summed, over those of the
    /// exact top 10 (a hit outside the exact top [`DEEP`] counts 0): how much of the best
    /// attainable BM25 the returned hits hold, which near-ties at the cut barely move.
    pub score_share: f64,
    pub questions: usize,
}

const K: i64 = 10;
/// Exact candidates kept per question, to look the API's hits up in.
const DEEP: i64 = 200;

/// Compares the API's text ranking of `questions` (at `base`) with exact BM25.
pub(super) async fn agreement(
    pool: &sqlx::PgPool,
    client: &reqwest::Client,
    base: &str,
    questions: &[String],
) -> anyhow::Result<Agreement> {
    let (chunks, average): (i64, f64) = sqlx::query_as(
        "select count(*), coalesce(avg(term_count)::float8, 1) from chunks
         where analyzer is not null",
    )
    .fetch_one(pool)
    .await?;
    let mut agreement = Agreement::default();
    for question in questions {
        let exact = exact(pool, question, chunks as f64, average).await?;
        let Some(&(_, kth)) = exact.get(K as usize - 1) else {
            continue;
        };
        let best = exact.first().map_or(0.0, |e| e.1);
        let attainable: f64 = exact.iter().take(K as usize).map(|e| e.1).sum();
        let scores: HashMap<(i64, i32), f64> = exact.into_iter().collect();
        let ranked = text_hits(client, base, question).await?;
        if ranked.is_empty() {
            continue;
        }
        let agrees = |key: &(i64, i32), at_least: f64| {
            scores.get(key).is_some_and(|&s| s >= at_least - 1e-9)
        };
        let found = ranked.iter().filter(|key| agrees(key, kth)).count();
        agreement.at_10 += found as f64 / K as f64;
        agreement.at_1 += f64::from(u8::from(agrees(&ranked[0], best)));
        let held: f64 = ranked.iter().filter_map(|key| scores.get(key)).sum();
        agreement.score_share += held / attainable.max(f64::MIN_POSITIVE);
        agreement.questions += 1;
    }
    let n = agreement.questions.max(1) as f64;
    agreement.at_10 /= n;
    agreement.at_1 /= n;
    agreement.score_share /= n;
    Ok(agreement)
}

/// The [`DEEP`] best chunks for `question` by exact BM25 over every posting, best first.
async fn exact(
    pool: &sqlx::PgPool,
    question: &str,
    chunks: f64,
    average: f64,
) -> anyhow::Result<Vec<((i64, i32), f64)>> {
    let (terms, words) = query::parse(question).term_pairs();
    let rows: Vec<(i64, i32, f64)> = sqlx::query_as(
        "with q (term, word) as (select * from unnest($1::text[], $2::int[])),
         weighted as (
             select q.term, q.word,
                    ln(1 + ($3 - s.chunks + 0.5) / (s.chunks + 0.5)) as idf
             from q join term_stats s on s.term = q.term
             where s.chunks > 0
         ),
         parts as (
             select t.document_id, t.chunk_index, w.word,
                    max(w.idf * t.tf * 2.2 / (t.tf + 1.2 * (0.25 + 0.75 * t.length / $4))) as part
             from weighted w
             join chunk_terms t on t.term = w.term
             group by t.document_id, t.chunk_index, w.word
         )
         select document_id, chunk_index, sum(part)::float8 as score
         from parts
         group by document_id, chunk_index
         order by score desc, document_id, chunk_index
         limit $5",
    )
    .bind(&terms)
    .bind(&words)
    .bind(chunks)
    .bind(average)
    .bind(DEEP)
    .fetch_all(pool)
    .await?;
    Ok(rows
        .into_iter()
        .map(|(document, chunk, score)| ((document, chunk), score))
        .collect())
}

/// The API's text-mode top 10 for `question`, every hit (`min_relevance=0`).
async fn text_hits(
    client: &reqwest::Client,
    base: &str,
    question: &str,
) -> anyhow::Result<Vec<(i64, i32)>> {
    let body: serde_json::Value = client
        .get(format!("{base}/api/search"))
        .query(&[
            ("q", question),
            ("mode", "text"),
            ("k", "10"),
            ("min_relevance", "0"),
        ])
        .send()
        .await?
        .error_for_status()?
        .json()
        .await?;
    Ok(body["hits"]
        .as_array()
        .map(|hits| {
            hits.iter()
                .filter_map(|h| {
                    Some((
                        h["document_id"].as_i64()?,
                        i32::try_from(h["chunk_index"].as_i64()?).ok()?,
                    ))
                })
                .collect()
        })
        .unwrap_or_default())
}
