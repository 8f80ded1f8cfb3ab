//! Partition quality and comparison: modularity, connectivity of
//! communities, normalised mutual information.

use super::graph::Graph;

/// Modularity of `partition` (any labels, one per node) with resolution γ:
///
/// ```text
/// Q = Σ_c [ W_in(c) / m − γ (K_c / 2m)² ]
/// ```
///
/// `W_in(c)`: weight of the edges with both ends in `c` (a self-loop counts
/// once), `K_c`: summed strength (a self-loop adds twice its weight),
/// `m`: total weight — the networkx/igraph convention. 0 for a graph without
/// edges.
///
/// # Panics
/// When `partition.len() != graph.num_nodes()`.
pub fn modularity(graph: &Graph, partition: &[usize], resolution: f64) -> f64 {
    let n = graph.num_nodes();
    assert_eq!(partition.len(), n, "one community label per node");
    let m = graph.total_weight;
    if n == 0 || m <= 0.0 {
        return 0.0;
    }
    let mut labels = partition.to_vec();
    let k = super::optimise::normalise(&mut labels);
    let mut internal = vec![0.0f64; k];
    let mut strength = vec![0.0f64; k];
    for v in 0..n {
        let c = labels[v];
        strength[c] += graph.strength[v];
        // Each internal edge is seen from both ends: count half each time.
        let mut w_in = 0.0;
        for idx in graph.offsets[v]..graph.offsets[v + 1] {
            if labels[graph.targets[idx]] == c {
                w_in += graph.weights[idx];
            }
        }
        internal[c] += graph.self_loops[v] + w_in / 2.0;
    }
    let two_m = 2.0 * m;
    (0..k).map(|c| internal[c] / m - resolution * (strength[c] / two_m).powi(2)).sum()
}

/// Whether every community of `partition` (one label per node) induces a
/// connected subgraph. Zero-weight edges, which `Graph` drops, connect
/// nothing.
///
/// # Panics
/// When `partition.len() != graph.num_nodes()`.
pub fn communities_connected(graph: &Graph, partition: &[usize]) -> bool {
    assert_eq!(partition.len(), graph.num_nodes(), "one community label per node");
    let mut labels = partition.to_vec();
    let communities = super::optimise::normalise(&mut labels);
    let (_, components) = graph.components(Some(&labels));
    components == communities
}

/// Dense ids `0..k` for arbitrary labels (by sorted label value) and the
/// size of each.
fn dense(labels: &[usize]) -> (Vec<usize>, Vec<usize>) {
    let mut values = labels.to_vec();
    values.sort_unstable();
    values.dedup();
    let ids: Vec<usize> = labels.iter().map(|l| values.binary_search(l).expect("present")).collect();
    let mut counts = vec![0usize; values.len()];
    for &i in &ids {
        counts[i] += 1;
    }
    (ids, counts)
}

fn entropy(counts: &[usize], total: f64) -> f64 {
    counts
        .iter()
        .filter(|&&c| c > 0)
        .map(|&c| {
            let p = c as f64 / total;
            -p * p.ln()
        })
        .sum()
}

/// Normalised mutual information of two labelings of the same items, with
/// arithmetic-mean normalisation `I(A; B) / ((H(A) + H(B)) / 2)` (as
/// scikit-learn's `normalized_mutual_info_score`). Labels are arbitrary.
/// Two labelings that each put everything in one class (or are empty)
/// score 1.
///
/// # Panics
/// When the lengths differ.
pub fn nmi(a: &[usize], b: &[usize]) -> f64 {
    assert_eq!(a.len(), b.len(), "labelings of the same items");
    let (ia, ca) = dense(a);
    let (ib, cb) = dense(b);
    if ca.len() == cb.len() && ca.len() <= 1 {
        return 1.0;
    }
    let total = a.len() as f64;
    let ha = entropy(&ca, total);
    let hb = entropy(&cb, total);
    // Contingency cells by sorting the (a, b) pairs.
    let mut pairs: Vec<(usize, usize)> = ia.into_iter().zip(ib).collect();
    pairs.sort_unstable();
    let mut mi = 0.0;
    let mut i = 0;
    while i < pairs.len() {
        let mut j = i + 1;
        while j < pairs.len() && pairs[j] == pairs[i] {
            j += 1;
        }
        let n_ij = (j - i) as f64;
        let (x, y) = pairs[i];
        mi += n_ij / total * (total * n_ij / (ca[x] as f64 * cb[y] as f64)).ln();
        i = j;
    }
    let denom = (ha + hb) / 2.0;
    if denom <= 0.0 {
        return 1.0;
    }
    (mi / denom).clamp(0.0, 1.0)
}
