//! Ranking: how the lists of one search become one. Pure functions over candidates, no SQL.
//!
//! **Fusion** of the vector and keyword lists is one of three methods, chosen by measurement on
//! the development set (`docket bench search-quality`, BENCHMARKS.md): reciprocal rank fusion
//! (ranks only), or a weighted sum of each list's scores normalised by min-max or by z-score.
//! Published BEIR results (pyserini) put min-max score fusion above RRF, and RRF above a raw
//! score sum, which mixes a cosine in [-1, 1] with an unbounded BM25; min-max also gives a score
//! in [0, 1] that reads as "how good a match, relative to the best one".
//!
//! **Grouping** keeps one long document from filling a page of results: hits are gathered under
//! their document, documents ordered by their best hit.

use std::collections::HashMap;

use serde::Serialize;

use super::Candidate;

/// How the vector and keyword lists of a hybrid search are fused.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
#[serde(tag = "method", rename_all = "snake_case")]
pub enum Fusion {
    /// Reciprocal rank fusion: each list adds `1 / (k + rank)`, rank from 1.
    Rrf { k: f64 },
    /// `(1 - text) · vector + text · keyword`, each list's scores scaled to [0, 1] by its own
    /// minimum and maximum; a chunk missing from a list gets 0 from it.
    MinMax { text: f64 },
    /// The same weighted sum over z-scores (a chunk missing from a list gets that list's lowest).
    ZScore { text: f64 },
    /// Both lists' chunks ordered by their relevance ([`super::relevance`]): the probability,
    /// fitted on the development set, that a chunk answers the question given its cosine and
    /// its share of the query's keyword weight.
    Relevance,
}

/// The method hybrid search uses with an embedder that captures meaning: order by the
/// calibrated relevance, so that the order and the number shown agree (measured against the
/// score fusions on the development set, BENCHMARKS.md "Issue 23").
pub const DEFAULT_FUSION: Fusion = Fusion::Relevance;

/// The method with the hashing embedder, whose vectors only see spellings: keywords carry the
/// ranking and the vector list breaks ties (also measured, BENCHMARKS.md).
pub const SPELLING_FUSION: Fusion = Fusion::MinMax { text: 0.8 };

impl Fusion {
    /// The default for an embedder that does (`semantic`) or does not capture meaning.
    pub fn default_for(semantic: bool) -> Fusion {
        if semantic {
            DEFAULT_FUSION
        } else {
            SPELLING_FUSION
        }
    }

    /// Parses `rrf:K`, `minmax:W`, `zscore:W` (W the keyword list's weight, 0 to 1) or
    /// `relevance:1`.
    pub fn parse(text: &str) -> Option<Fusion> {
        let (method, value) = text.split_once(':')?;
        let value: f64 = value.parse().ok()?;
        match method {
            "rrf" if value >= 0.0 => Some(Fusion::Rrf { k: value }),
            "minmax" if (0.0..=1.0).contains(&value) => Some(Fusion::MinMax { text: value }),
            "zscore" if (0.0..=1.0).contains(&value) => Some(Fusion::ZScore { text: value }),
            "relevance" => Some(Fusion::Relevance),
            _ => None,
        }
    }

    /// The form [`Fusion::parse`] reads.
    pub fn name(self) -> String {
        match self {
            Fusion::Rrf { k } => format!("rrf:{k}"),
            Fusion::MinMax { text } => format!("minmax:{text}"),
            Fusion::ZScore { text } => format!("zscore:{text}"),
            Fusion::Relevance => "relevance:1".to_owned(),
        }
    }
}

/// Fuses the vector and keyword lists (each best first) into the best `limit` candidates.
pub(super) fn fuse(
    vector: &[Candidate],
    text: &[Candidate],
    fusion: Fusion,
    limit: usize,
) -> Vec<Candidate> {
    let (vector_scores, text_scores, weight) = match fusion {
        Fusion::Rrf { k } => {
            let rrf = |list: &[Candidate]| -> Vec<f64> {
                (0..list.len())
                    .map(|rank| 1.0 / (k + rank as f64 + 1.0))
                    .collect()
            };
            (rrf(vector), rrf(text), None)
        }
        Fusion::MinMax { text: w } => (min_max(vector), min_max(text), Some(w)),
        Fusion::ZScore { text: w } => (z_scores(vector), z_scores(text), Some(w)),
        // Ordered afterwards, once every chunk's relevance is known.
        Fusion::Relevance => (vec![0.0; vector.len()], vec![0.0; text.len()], None),
    };
    // What a chunk absent from a list gets from it.
    let floor = |scores: &[f64]| match fusion {
        Fusion::ZScore { .. } => scores
            .iter()
            .copied()
            .fold(f64::INFINITY, f64::min)
            .min(0.0),
        _ => 0.0,
    };
    let (vector_floor, text_floor) = (floor(&vector_scores), floor(&text_scores));
    let mut fused: Vec<(Candidate, Option<f64>, Option<f64>)> = Vec::new();
    let mut position: HashMap<(i64, i32), usize> = HashMap::new();
    for (list, scores, is_text) in [(vector, &vector_scores, false), (text, &text_scores, true)] {
        for (candidate, score) in list.iter().zip(scores.iter()) {
            let key = (candidate.document_id, candidate.chunk_index);
            let at = *position.entry(key).or_insert_with(|| {
                fused.push((*candidate, None, None));
                fused.len() - 1
            });
            let entry = &mut fused[at];
            // A keyword match of a chunk a vector list also found keeps that version.
            entry.0.route = entry.0.route.or(candidate.route);
            let signals = &mut entry.0.signals;
            signals.cosine = signals.cosine.or(candidate.signals.cosine);
            signals.keyword = signals.keyword.or(candidate.signals.keyword);
            if is_text {
                entry.2 = Some(*score);
            } else {
                entry.1 = Some(*score);
            }
        }
    }
    let mut out: Vec<Candidate> = fused
        .into_iter()
        .map(|(candidate, v, t)| {
            let (v, t) = (v.unwrap_or(vector_floor), t.unwrap_or(text_floor));
            let score = match weight {
                None => v + t,
                Some(w) => (1.0 - w) * v + w * t,
            };
            Candidate { score, ..candidate }
        })
        .collect();
    // Stable: among equal scores the vector list's order, then the keyword list's, wins.
    out.sort_by(|a, b| b.score.total_cmp(&a.score));
    out.truncate(limit);
    out
}

fn min_max(list: &[Candidate]) -> Vec<f64> {
    let (lo, hi) = list
        .iter()
        .fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), c| {
            (lo.min(c.score), hi.max(c.score))
        });
    list.iter()
        .map(|c| {
            if hi > lo {
                (c.score - lo) / (hi - lo)
            } else {
                1.0
            }
        })
        .collect()
}

fn z_scores(list: &[Candidate]) -> Vec<f64> {
    let n = list.len() as f64;
    let mean = list.iter().map(|c| c.score).sum::<f64>() / n.max(1.0);
    let sd = (list.iter().map(|c| (c.score - mean).powi(2)).sum::<f64>() / n.max(1.0)).sqrt();
    list.iter()
        .map(|c| if sd > 0.0 { (c.score - mean) / sd } else { 0.0 })
        .collect()
}

/// The candidates gathered by document, documents in the order of their best candidate, at
/// most `documents` of them and `per_document` candidates each.
pub(super) fn group(
    candidates: &[Candidate],
    documents: usize,
    per_document: usize,
) -> Vec<Vec<Candidate>> {
    let mut groups: Vec<Vec<Candidate>> = Vec::new();
    for candidate in candidates {
        match groups
            .iter()
            .position(|g| g[0].document_id == candidate.document_id)
        {
            Some(at) if groups[at].len() < per_document => groups[at].push(*candidate),
            Some(_) => {}
            None if groups.len() < documents => groups.push(vec![*candidate]),
            None => {}
        }
    }
    groups
}

/// The active version's list with the older versions' hits put at the places their own
/// version ranks them among all its vectors (`older`: (0-based place, hit)); see the module docs
/// of `vector`.
pub(super) fn place(
    active: Vec<Candidate>,
    mut older: Vec<(usize, Candidate)>,
    limit: usize,
) -> Vec<Candidate> {
    // Stable: of two older hits wanting one place, the first route's comes first.
    older.sort_by_key(|(at, _)| *at);
    let mut older = older.into_iter().peekable();
    let mut active = active.into_iter().peekable();
    let mut merged = Vec::with_capacity(limit);
    while merged.len() < limit {
        let older_first = match (older.peek(), active.peek()) {
            (Some((at, _)), Some(_)) => *at <= merged.len(),
            (Some(_), None) => true,
            (None, _) => false,
        };
        let next = if older_first {
            older.next().map(|(_, c)| c)
        } else {
            active.next()
        };
        match next {
            Some(candidate) => merged.push(candidate),
            None => break,
        }
    }
    merged
}

#[cfg(test)]
mod tests {
    use super::*;

    fn c(document_id: i64, score: f64) -> Candidate {
        Candidate {
            document_id,
            chunk_index: 0,
            score,
            route: None,
            signals: Default::default(),
            relevance: 0.0,
        }
    }

    fn order(list: &[Candidate]) -> Vec<i64> {
        list.iter().map(|c| c.document_id).collect()
    }

    #[test]
    fn rrf_rewards_chunks_both_lists_rank_high() {
        let vector = vec![c(1, 0.9), c(2, 0.8), c(3, 0.7)];
        let text = vec![c(2, 9.0), c(4, 8.0), c(1, 7.0)];
        let fused = fuse(&vector, &text, Fusion::Rrf { k: 60.0 }, 3);
        assert_eq!(order(&fused), vec![2, 1, 4]);
        assert!((fused[0].score - (1.0 / 62.0 + 1.0 / 61.0)).abs() < 1e-12);
    }

    #[test]
    fn every_method_ranks_a_chunk_both_lists_like_above_chunks_one_list_likes() {
        // Chunk 2 is second in both lists; 1 tops only the vector list, 4 only the keyword one.
        let vector = vec![c(1, 0.90), c(2, 0.85), c(3, 0.40)];
        let text = vec![c(4, 12.0), c(2, 10.0), c(5, 2.0)];
        for fusion in [
            Fusion::Rrf { k: 60.0 },
            Fusion::MinMax { text: 0.5 },
            Fusion::ZScore { text: 0.5 },
            SPELLING_FUSION,
        ] {
            let fused = fuse(&vector, &text, fusion, 5);
            assert_eq!(fused[0].document_id, 2, "{fusion:?}: {:?}", order(&fused));
        }
        // Relevance order is applied after fusion, once every chunk's signals are complete:
        // here fusion only gathers each chunk of both lists once, with both lists' signals.
        let union = fuse(&vector, &text, Fusion::Relevance, usize::MAX);
        let mut chunks = order(&union);
        chunks.sort_unstable();
        assert_eq!(chunks, vec![1, 2, 3, 4, 5]);
    }

    #[test]
    fn min_max_scores_read_as_zero_to_one() {
        let vector = vec![c(1, 0.9), c(2, 0.5)];
        let text = vec![c(1, 4.0), c(3, 1.0)];
        let fused = fuse(&vector, &text, Fusion::MinMax { text: 0.5 }, 3);
        assert_eq!(order(&fused), vec![1, 2, 3]);
        assert!((fused[0].score - 1.0).abs() < 1e-12);
        assert!(fused.iter().all(|c| (0.0..=1.0).contains(&c.score)));
    }

    #[test]
    fn fusion_names_round_trip() {
        for fusion in [Fusion::Rrf { k: 60.0 }, Fusion::MinMax { text: 0.3 }] {
            assert_eq!(Fusion::parse(&fusion.name()), Some(fusion));
        }
        assert_eq!(Fusion::parse("minmax:2"), None);
    }

    #[test]
    fn groups_keep_documents_in_the_order_of_their_best_hit() {
        let list = vec![
            c(1, 9.0),
            c(1, 8.0),
            c(2, 7.0),
            c(1, 6.0),
            c(3, 5.0),
            c(2, 4.0),
        ];
        let groups = group(&list, 2, 2);
        let shape: Vec<Vec<i64>> = groups.iter().map(|g| order(g)).collect();
        assert_eq!(shape, vec![vec![1, 1], vec![2, 2]]);
    }

    #[test]
    fn older_hits_take_the_places_their_version_ranks_them() {
        // The old version ranked document 10 first overall and 11 fifth.
        let merged = place(
            vec![c(1, 0.0), c(2, 0.0), c(3, 0.0), c(4, 0.0)],
            vec![(4, c(11, 0.0)), (0, c(10, 0.0))],
            5,
        );
        assert_eq!(order(&merged), vec![10, 1, 2, 3, 11]);
        // A straggler ranked far down stays out; a short active list leaves room for it.
        let merged = place(vec![c(1, 0.0), c(2, 0.0)], vec![(40, c(10, 0.0))], 2);
        assert_eq!(merged.len(), 2);
        assert!(merged.iter().all(|c| c.document_id != 10));
        let merged = place(vec![c(1, 0.0)], vec![(40, c(10, 0.0))], 5);
        assert_eq!(order(&merged), vec![1, 10]);
    }
}
