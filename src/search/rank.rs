//! Ranking: how the lists of one search become one. Pure functions over candidates, no SQL.

use std::collections::HashMap;

use super::Candidate;

/// The constant of reciprocal rank fusion, as in the original paper (Cormack et al., 2009).
const RRF_K: f64 = 60.0;

/// Reciprocal rank fusion: each list adds `1 / (RRF_K + rank)` (rank from 1) to a chunk.
pub(super) fn fuse(lists: &[Vec<Candidate>], k: i64) -> Vec<Candidate> {
    let mut fused: Vec<Candidate> = Vec::new();
    let mut position: HashMap<(i64, i32), usize> = HashMap::new();
    for list in lists {
        for (rank, candidate) in list.iter().enumerate() {
            let add = 1.0 / (RRF_K + rank as f64 + 1.0);
            let key = (candidate.document_id, candidate.chunk_index);
            match position.get(&key) {
                Some(&at) => {
                    fused[at].score += add;
                    // A text match of a chunk a vector list also found keeps that version.
                    fused[at].route = fused[at].route.or(candidate.route);
                }
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

/// The active version's list with the older versions' hits put at the places their own
/// version ranks them among all its vectors (`older`: (0-based place, hit)); see the module docs.
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

    #[test]
    fn fusion_rewards_chunks_both_lists_rank_high() {
        let c = |d, i| Candidate {
            document_id: d,
            chunk_index: i,
            score: 0.0,
            route: None,
        };
        let vector = vec![c(1, 0), c(2, 0), c(3, 0)];
        let text = vec![c(2, 0), c(4, 0), c(1, 0)];
        let fused = fuse(&[vector, text], 3);
        let order: Vec<i64> = fused.iter().map(|c| c.document_id).collect();
        assert_eq!(order, vec![2, 1, 4]);
        assert!((fused[0].score - (1.0 / 62.0 + 1.0 / 61.0)).abs() < 1e-12);
    }

    #[test]
    fn older_hits_take_the_places_their_version_ranks_them() {
        let c = |d| Candidate {
            document_id: d,
            chunk_index: 0,
            score: 0.0,
            route: None,
        };
        // The old version ranked document 10 first overall and 11 fifth.
        let merged = place(
            vec![c(1), c(2), c(3), c(4)],
            vec![(4, c(11)), (0, c(10))],
            5,
        );
        let order: Vec<i64> = merged.iter().map(|c| c.document_id).collect();
        assert_eq!(order, vec![10, 1, 2, 3, 11]);
        // A straggler ranked far down stays out; a short active list leaves room for it.
        let merged = place(vec![c(1), c(2)], vec![(40, c(10))], 2);
        assert_eq!(merged.len(), 2);
        assert!(merged.iter().all(|c| c.document_id != 10));
        let merged = place(vec![c(1)], vec![(40, c(10))], 5);
        let order: Vec<i64> = merged.iter().map(|c| c.document_id).collect();
        assert_eq!(order, vec![1, 10]);
    }
}
