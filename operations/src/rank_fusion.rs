//! Combining rankings: reciprocal rank fusion and score normalisation.

use std::collections::HashMap;
use std::hash::Hash;

/// The constant of reciprocal rank fusion in Cormack, Clarke and Büttcher
/// (SIGIR 2009), which most hybrid search engines use as their default.
pub const RRF_K: f64 = 60.0;

/// Reciprocal rank fusion: each item scores `Σ 1 / (k + rank)` over the
/// lists it is in (ranks from 1), best first. Ties keep the order in which
/// the items first appear when the lists are read rank by rank (first of
/// each list, then second of each, ...), so the result is deterministic.
pub fn reciprocal_rank_fusion<T: Copy + Eq + Hash>(lists: &[&[T]], k: f64) -> Vec<(T, f64)> {
    let mut score: HashMap<T, (f64, usize)> = HashMap::new();
    let longest = lists.iter().map(|l| l.len()).max().unwrap_or(0);
    for rank in 0..longest {
        for list in lists {
            let Some(&item) = list.get(rank) else { continue };
            let order = score.len();
            score.entry(item).or_insert((0.0, order)).0 += 1.0 / (k + rank as f64 + 1.0);
        }
    }
    let mut fused: Vec<(T, f64, usize)> = score.into_iter().map(|(t, (s, o))| (t, s, o)).collect();
    fused.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.2.cmp(&b.2)));
    fused.into_iter().map(|(t, s, _)| (t, s)).collect()
}

/// Scores scaled to 0..=1 by their minimum and maximum (HippoRAG's
/// `min_max_normalize`); all equal → all 1.
pub fn min_max_normalize(scores: &[f64]) -> Vec<f64> {
    let (lo, hi) = scores.iter().fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), &s| (lo.min(s), hi.max(s)));
    if hi - lo <= 0.0 || !(hi - lo).is_finite() {
        return vec![1.0; scores.len()];
    }
    scores.iter().map(|s| (s - lo) / (hi - lo)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rrf_adds_reciprocal_ranks() {
        // a: 1/61 + 1/63, b: 1/62 + 1/61, c: 1/63, d: 1/62
        let fused = reciprocal_rank_fusion(&[&["a", "b", "c"][..], &["b", "d", "a"][..]], 60.0);
        let names: Vec<&str> = fused.iter().map(|f| f.0).collect();
        assert_eq!(names, ["b", "a", "d", "c"]);
        assert!((fused[0].1 - (1.0 / 62.0 + 1.0 / 61.0)).abs() < 1e-15);
        assert!((fused[3].1 - 1.0 / 63.0).abs() < 1e-15);
        // Equal scores keep the rank-by-rank order of first appearance.
        let tied = reciprocal_rank_fusion(&[&[1, 2][..], &[3, 4][..]], 60.0);
        assert_eq!(tied.iter().map(|t| t.0).collect::<Vec<_>>(), [1, 3, 2, 4]);
        assert!(reciprocal_rank_fusion::<u32>(&[], 60.0).is_empty());
    }

    #[test]
    fn min_max_scales_to_unit_range() {
        assert_eq!(min_max_normalize(&[2.0, 4.0, 3.0]), [0.0, 1.0, 0.5]);
        assert_eq!(min_max_normalize(&[5.0, 5.0]), [1.0, 1.0]);
        assert!(min_max_normalize(&[]).is_empty());
    }
}
