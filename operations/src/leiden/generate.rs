//! Seeded planted-partition graphs (a stochastic block model with a mixing
//! parameter) for tests and benchmarks.

use super::rng::SplitMix64;

/// A generated graph and its planted communities.
#[derive(Debug, Clone, PartialEq)]
pub struct PlantedGraph {
    pub num_nodes: usize,
    /// Unweighted (`1.0`) undirected edges, each once, `source < target`,
    /// sorted, no self-loops.
    pub edges: Vec<(usize, usize, f64)>,
    /// Planted community of each node.
    pub truth: Vec<usize>,
}

/// Community sizes drawn uniformly in `min..=max` until they add up to
/// `num_nodes` (the last one takes the remainder; if that is below `min`,
/// it is merged into the previous one).
pub fn random_community_sizes(num_nodes: usize, min: usize, max: usize, seed: u64) -> Vec<usize> {
    assert!(min >= 1 && min <= max, "community sizes need 1 <= min <= max");
    let mut rng = SplitMix64::new(seed);
    let mut sizes = Vec::new();
    let mut left = num_nodes;
    while left > 0 {
        let s = (min + rng.below(max - min + 1)).min(left);
        if s < min && !sizes.is_empty() {
            *sizes.last_mut().expect("non-empty") += s;
        } else {
            sizes.push(s);
        }
        left -= s;
    }
    sizes
}

/// A planted-partition graph: communities of the given `sizes`, nodes
/// assigned to them in a random order, each node with expected degree about
/// `avg_degree`, a fraction `mu` of whose edges leave its community. The
/// `n · avg_degree / 2` edges are drawn as uniform random pairs, inside a
/// community (each community gets edges in proportion to its size, at most
/// all of its pairs) or between two different communities; repeated pairs
/// are kept once, so the edge count comes out slightly below the target.
pub fn planted_partition(sizes: &[usize], avg_degree: f64, mu: f64, seed: u64) -> PlantedGraph {
    assert!((0.0..=1.0).contains(&mu), "mu must be in [0, 1]");
    assert!(avg_degree >= 0.0, "avg_degree must be >= 0");
    let n: usize = sizes.iter().sum();
    let mut rng = SplitMix64::new(seed);
    // Random node order, then contiguous blocks of it form the communities.
    let mut order: Vec<usize> = (0..n).collect();
    rng.shuffle(&mut order);
    let mut truth = vec![0usize; n];
    let mut blocks: Vec<&[usize]> = Vec::with_capacity(sizes.len());
    let mut at = 0;
    for (c, &s) in sizes.iter().enumerate() {
        let block = &order[at..at + s];
        for &v in block {
            truth[v] = c;
        }
        blocks.push(block);
        at += s;
    }

    let mut pairs: Vec<(usize, usize)> = Vec::new();
    for block in &blocks {
        let s = block.len();
        if s < 2 {
            continue;
        }
        let possible = s * (s - 1) / 2;
        let want = ((s as f64 * avg_degree * (1.0 - mu) / 2.0).round() as usize).min(possible);
        for _ in 0..want {
            let a = block[rng.below(s)];
            let mut b = block[rng.below(s - 1)];
            if b == a {
                b = block[s - 1];
            }
            pairs.push((a.min(b), a.max(b)));
        }
    }
    if sizes.iter().filter(|&&s| s > 0).count() >= 2 {
        let want = (n as f64 * avg_degree * mu / 2.0).round() as usize;
        let mut made = 0;
        while made < want {
            let a = rng.below(n);
            let b = rng.below(n);
            if truth[a] != truth[b] {
                pairs.push((a.min(b), a.max(b)));
                made += 1;
            }
        }
    }
    pairs.sort_unstable();
    pairs.dedup();
    PlantedGraph { num_nodes: n, edges: pairs.into_iter().map(|(a, b)| (a, b, 1.0)).collect(), truth }
}
