//! Which text chunks prompt tuning reads (GraphRAG's `--selection-method`):
//! the first ones, a seeded random sample, all of them, or — `auto` — one
//! chunk per theme: k-means over the chunks' embeddings, and the chunk
//! nearest each centroid.
//!
//! Samples are seeded, so a rerun on the same corpus reads the same chunks
//! and asks the model the same questions (answered from the cache).

use std::fmt;
use std::str::FromStr;

use crate::leiden::SplitMix64;
use crate::suggest::did_you_mean;

/// GraphRAG 3.3's `DocSelectionType`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SelectionMethod {
    /// A random sample of `limit` chunks.
    Random,
    /// The first `limit` chunks.
    Top,
    /// Every chunk.
    All,
    /// Embed a random subset of `n_subset_max` chunks, cluster them into `k`
    /// groups and take the chunk nearest each group's centre.
    Auto,
}

impl SelectionMethod {
    pub const NAMES: [&'static str; 4] = ["random", "top", "all", "auto"];

    pub fn as_str(self) -> &'static str {
        match self {
            SelectionMethod::Random => "random",
            SelectionMethod::Top => "top",
            SelectionMethod::All => "all",
            SelectionMethod::Auto => "auto",
        }
    }
}

impl fmt::Display for SelectionMethod {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for SelectionMethod {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "random" => Ok(SelectionMethod::Random),
            "top" => Ok(SelectionMethod::Top),
            "all" => Ok(SelectionMethod::All),
            "auto" => Ok(SelectionMethod::Auto),
            other => Err(format!(
                "unknown selection method `{other}`: expected one of {}{}",
                Self::NAMES.join(", "),
                did_you_mean(other, Self::NAMES.iter().copied())
            )),
        }
    }
}

/// The seed of every sample (fixed: the same corpus gives the same chunks).
pub const SEED: u64 = 0x6772_6170_6872_6167;

/// `count` distinct indices of `0..n` drawn at random (all of them when
/// `count >= n`), in increasing order.
pub fn random_sample(n: usize, count: usize, seed: u64) -> Vec<usize> {
    let mut all: Vec<usize> = (0..n).collect();
    let mut rng = SplitMix64::new(seed);
    // A partial Fisher–Yates shuffle: the first `count` places are the sample.
    let count = count.min(n);
    for i in 0..count {
        let j = i + rng.below(n - i);
        all.swap(i, j);
    }
    all.truncate(count);
    all.sort_unstable();
    all
}

/// The chunks `method` picks out of `n` (not [`SelectionMethod::Auto`],
/// which needs embeddings: see [`nearest_to_centroids`]).
pub fn select(n: usize, method: SelectionMethod, limit: usize) -> Vec<usize> {
    match method {
        SelectionMethod::Top => (0..limit.min(n)).collect(),
        SelectionMethod::Random => random_sample(n, limit, SEED),
        SelectionMethod::All | SelectionMethod::Auto => (0..n).collect(),
    }
}

fn squared_distance(a: &[f32], b: &[f32]) -> f64 {
    a.iter().zip(b).map(|(x, y)| f64::from(x - y).powi(2)).sum()
}

/// The most Lloyd iterations k-means runs (it stops earlier once no point
/// changes cluster).
const MAX_ITERATIONS: usize = 100;

/// k-means (k-means++ seeding, then Lloyd's iterations) over `vectors`
/// (all of one dimension); each point's cluster, in `0..min(k, n)`.
pub fn kmeans(vectors: &[Vec<f32>], k: usize, seed: u64) -> Vec<usize> {
    let n = vectors.len();
    let k = k.min(n);
    if k == 0 {
        return Vec::new();
    }
    let dim = vectors[0].len();
    let mut rng = SplitMix64::new(seed);
    // k-means++: each next centre drawn with probability proportional to the
    // squared distance to the nearest centre so far.
    let mut centres: Vec<Vec<f32>> = vec![vectors[rng.below(n)].clone()];
    let mut nearest: Vec<f64> = vectors.iter().map(|v| squared_distance(v, &centres[0])).collect();
    while centres.len() < k {
        let total: f64 = nearest.iter().sum();
        let next = if total <= 0.0 {
            // Every point sits on a centre: the remaining centres are duplicates.
            rng.below(n)
        } else {
            let mut target = rng.next_f64() * total;
            nearest
                .iter()
                .position(|&d| {
                    target -= d;
                    target < 0.0
                })
                .unwrap_or(n - 1)
        };
        centres.push(vectors[next].clone());
        for (d, v) in nearest.iter_mut().zip(vectors) {
            *d = d.min(squared_distance(v, &centres[centres.len() - 1]));
        }
    }
    let closest = |v: &[f32], centres: &[Vec<f32>]| {
        (0..centres.len())
            .min_by(|&a, &b| squared_distance(v, &centres[a]).total_cmp(&squared_distance(v, &centres[b])))
            .expect("k > 0")
    };
    let mut assignment: Vec<usize> = vectors.iter().map(|v| closest(v, &centres)).collect();
    for _ in 0..MAX_ITERATIONS {
        let mut sums = vec![vec![0f64; dim]; k];
        let mut sizes = vec![0usize; k];
        for (v, &c) in vectors.iter().zip(&assignment) {
            sizes[c] += 1;
            for (s, x) in sums[c].iter_mut().zip(v) {
                *s += f64::from(*x);
            }
        }
        for c in 0..k {
            // An emptied cluster keeps its centre.
            if sizes[c] > 0 {
                centres[c] = sums[c].iter().map(|s| (s / sizes[c] as f64) as f32).collect();
            }
        }
        let next: Vec<usize> = vectors.iter().map(|v| closest(v, &centres)).collect();
        if next == assignment {
            break;
        }
        assignment = next;
    }
    assignment
}

/// `auto` selection: clusters `vectors` into `k` groups (k-means, seeded)
/// and returns, per group, the index of the vector nearest its centre —
/// biggest group first, so the chunks that stand for most of the corpus
/// come first (the first ones become the extraction prompt's examples).
pub fn nearest_to_centroids(vectors: &[Vec<f32>], k: usize) -> Vec<usize> {
    let assignment = kmeans(vectors, k, SEED);
    let clusters = assignment.iter().copied().max().map_or(0, |m| m + 1);
    let mut groups: Vec<Vec<usize>> = vec![Vec::new(); clusters];
    for (i, &c) in assignment.iter().enumerate() {
        groups[c].push(i);
    }
    groups.retain(|g| !g.is_empty());
    groups.sort_by(|a, b| b.len().cmp(&a.len()).then(a[0].cmp(&b[0])));
    groups
        .iter()
        .map(|members| {
            let dim = vectors[members[0]].len();
            let mut centre = vec![0f32; dim];
            for &i in members {
                for (c, x) in centre.iter_mut().zip(&vectors[i]) {
                    *c += x / members.len() as f32;
                }
            }
            *members
                .iter()
                .min_by(|&&a, &&b| {
                    squared_distance(&vectors[a], &centre).total_cmp(&squared_distance(&vectors[b], &centre))
                })
                .expect("groups are not empty")
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn methods_parse_with_a_suggestion() {
        for name in SelectionMethod::NAMES {
            assert_eq!(name.parse::<SelectionMethod>().unwrap().as_str(), name);
        }
        let err = "autoo".parse::<SelectionMethod>().unwrap_err();
        assert!(err.contains("did you mean `auto`"), "{err}");
    }

    #[test]
    fn top_random_and_all() {
        assert_eq!(select(10, SelectionMethod::Top, 3), [0, 1, 2]);
        assert_eq!(select(2, SelectionMethod::Top, 3), [0, 1]);
        assert_eq!(select(4, SelectionMethod::All, 1), [0, 1, 2, 3]);
        let r = select(100, SelectionMethod::Random, 15);
        assert_eq!(r.len(), 15);
        assert!(r.windows(2).all(|w| w[0] < w[1]), "distinct and sorted: {r:?}");
        assert_eq!(r, select(100, SelectionMethod::Random, 15), "seeded");
        assert_ne!(r, (0..15).collect::<Vec<_>>());
        assert_eq!(select(5, SelectionMethod::Random, 15), [0, 1, 2, 3, 4]);
    }

    /// Points around three separated centres: one pick per cluster, each the
    /// member nearest its cluster's mean, the biggest cluster first.
    #[test]
    fn auto_picks_one_chunk_per_cluster() {
        let mut rng = SplitMix64::new(7);
        let centres = [[0.0f32, 0.0], [10.0, 10.0], [-10.0, 10.0]];
        let sizes = [5, 12, 8];
        let mut vectors = Vec::new();
        let mut label = Vec::new();
        for (c, (centre, &size)) in centres.iter().zip(&sizes).enumerate() {
            for _ in 0..size {
                let mut jitter = || (rng.next_f64() as f32 - 0.5) * 2.0;
                vectors.push(vec![centre[0] + jitter(), centre[1] + jitter()]);
                label.push(c);
            }
        }
        let picks = nearest_to_centroids(&vectors, 3);
        assert_eq!(picks.len(), 3);
        let picked_labels: Vec<usize> = picks.iter().map(|&i| label[i]).collect();
        assert_eq!(picked_labels, [1, 2, 0], "biggest cluster first");
        for &p in &picks {
            let members: Vec<usize> = (0..vectors.len()).filter(|&i| label[i] == label[p]).collect();
            let mean: Vec<f32> =
                (0..2).map(|d| members.iter().map(|&i| vectors[i][d]).sum::<f32>() / members.len() as f32).collect();
            let best = members
                .iter()
                .min_by(|&&a, &&b| {
                    squared_distance(&vectors[a], &mean).total_cmp(&squared_distance(&vectors[b], &mean))
                })
                .unwrap();
            assert_eq!(*best, p);
        }
    }

    #[test]
    fn auto_with_fewer_points_than_clusters_or_duplicates() {
        let vectors = vec![vec![1.0f32, 0.0], vec![0.0, 1.0]];
        let mut picks = nearest_to_centroids(&vectors, 15);
        picks.sort_unstable();
        assert_eq!(picks, [0, 1]);
        let same = vec![vec![1.0f32, 1.0]; 4];
        assert_eq!(nearest_to_centroids(&same, 3).len(), 1, "identical points are one theme");
        assert!(nearest_to_centroids(&[], 3).is_empty());
    }
}
