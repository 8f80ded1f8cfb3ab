//! The three phases of Leiden (Traag, Waltman & van Eck 2019) and the loop
//! that drives them, for the modularity quality function with resolution γ.
//!
//! In the notation of the paper, with `k_v` the strength of node `v`, `K_C`
//! the summed strength of community `C`, `m` the total edge weight and
//! `E(A, B)` the weight of the edges between node sets `A` and `B`, the
//! change of quality when a node `v` taken out of its community joins
//! community `C`, in edge-weight units (`m` times the change of modularity),
//! is
//!
//! ```text
//! ΔH(v → C) = E(v, C) − γ k_v K_C / (2m)
//! ```
//!
//! and the empty community has `ΔH = 0`.

use std::collections::VecDeque;

use super::graph::Graph;
use super::rng::SplitMix64;
use super::LeidenConfig;

/// What a run did, for tests and diagnostics.
#[derive(Debug, Clone, Default, PartialEq)]
pub(super) struct RunStats {
    /// Leiden iterations run (each: local moving, refinement, aggregation
    /// until every community is one aggregate node).
    pub iterations: usize,
    /// Levels where refinement merged nothing although the partition was
    /// not trivial, so aggregation stopped early (not expected in practice).
    pub refinement_stalls: usize,
    /// Disconnected communities split by the final safety net (only after
    /// a refinement stall; expected 0).
    pub splits: usize,
}

/// Renumbers `labels` to `0..k` in order of first appearance; returns `k`.
/// `scratch` is reusable working space.
fn renumber(labels: &mut [usize], scratch: &mut Vec<usize>) -> usize {
    let bound = labels.iter().copied().max().map_or(0, |x| x + 1);
    scratch.clear();
    scratch.resize(bound, usize::MAX);
    let mut k = 0;
    for l in labels.iter_mut() {
        if scratch[*l] == usize::MAX {
            scratch[*l] = k;
            k += 1;
        }
        *l = scratch[*l];
    }
    k
}

/// Renumbers a partition so that community ids are `0..k` ordered by
/// smallest member node; returns `k`.
pub(super) fn normalise(labels: &mut [usize]) -> usize {
    let mut scratch = Vec::new();
    renumber(labels, &mut scratch)
}

/// Fast local moving (Algorithm A.2 of the paper, `MoveNodesFast`): visit
/// nodes from a queue, initially all nodes in random order; move each to the
/// neighbouring (or empty) community with the largest strictly positive
/// quality gain over staying; after a move, queue the neighbours that are not
/// in the new community and not queued yet. `comm[v] < n` on entry.
fn move_nodes_fast(g: &Graph, comm: &mut [usize], gamma: f64, rng: &mut SplitMix64) {
    let n = g.num_nodes();
    let two_m = 2.0 * g.total_weight;
    if n == 0 || two_m <= 0.0 {
        return;
    }
    let factor = gamma / two_m;
    let mut comm_k = vec![0.0f64; n];
    let mut comm_size = vec![0usize; n];
    for v in 0..n {
        comm_k[comm[v]] += g.strength[v];
        comm_size[comm[v]] += 1;
    }
    let mut empty: Vec<usize> = (0..n).rev().filter(|&c| comm_size[c] == 0).collect();

    let mut order: Vec<usize> = (0..n).collect();
    rng.shuffle(&mut order);
    let mut queue: VecDeque<usize> = VecDeque::from(order);
    let mut in_queue = vec![true; n];

    // Sparse accumulator of E(v, C) over the communities C around v.
    let mut acc = vec![0.0f64; n];
    let mut touched: Vec<usize> = Vec::new();

    let offsets = &g.offsets;
    let targets = &g.targets;
    let weights = &g.weights;
    while let Some(v) = queue.pop_front() {
        in_queue[v] = false;
        let (lo, hi) = (offsets[v], offsets[v + 1]);
        for idx in lo..hi {
            let c = comm[targets[idx]];
            if acc[c] == 0.0 {
                touched.push(c);
            }
            acc[c] += weights[idx];
        }
        let cur = comm[v];
        let k = g.strength[v];
        comm_k[cur] -= k;
        comm_size[cur] -= 1;
        if comm_size[cur] == 0 {
            comm_k[cur] = 0.0;
        }

        // Staying wins ties; a community emptied by removing v is the empty
        // community (gain 0).
        let mut best = cur;
        let mut best_gain = acc[cur] - factor * k * comm_k[cur];
        for &c in &touched {
            if c != cur {
                let gain = acc[c] - factor * k * comm_k[c];
                if gain > best_gain {
                    best = c;
                    best_gain = gain;
                }
            }
        }
        if best_gain < 0.0 && comm_size[cur] > 0 {
            // The empty community is strictly better than every other.
            best = empty.pop().expect("n ids and at most n - 1 other nodes: an id is free");
        }
        for &c in &touched {
            acc[c] = 0.0;
        }
        touched.clear();

        comm_k[best] += k;
        comm_size[best] += 1;
        comm[v] = best;
        if best != cur {
            if comm_size[cur] == 0 {
                empty.push(cur);
            }
            for &u in &targets[lo..hi] {
                if !in_queue[u] && comm[u] != best {
                    in_queue[u] = true;
                    queue.push_back(u);
                }
            }
        }
    }
}

/// Refinement (Algorithms A.2 `RefinePartition` and `MergeNodesSubset`):
/// start from singletons; visit the nodes in random order; a node `v` of
/// community `S` that is well connected to `S`
/// (`E(v, S − v) ≥ γ k_v (K_S − k_v) / 2m`) and still a singleton joins a
/// refined community `C ⊆ S` that is itself well connected
/// (`E(C, S − C) ≥ γ K_C (K_S − K_C) / 2m`), chosen at random among those with
/// `ΔH ≥ 0` (its own singleton, `ΔH = 0`, included) with probability
/// proportional to `exp(ΔH / θ)`. `θ <= 0` picks the largest gain.
/// Returns the refined membership (refined community ids are node ids).
fn refine(g: &Graph, comm: &[usize], gamma: f64, theta: f64, rng: &mut SplitMix64) -> Vec<usize> {
    let n = g.num_nodes();
    let mut refined: Vec<usize> = (0..n).collect();
    let two_m = 2.0 * g.total_weight;
    if n == 0 || two_m <= 0.0 {
        return refined;
    }
    let factor = gamma / two_m;
    let offsets = &g.offsets;
    let targets = &g.targets;
    let weights = &g.weights;

    let mut comm_k = vec![0.0f64; n];
    for v in 0..n {
        comm_k[comm[v]] += g.strength[v];
    }
    // E(v, S − v) for each node, fixed during refinement.
    let mut node_ext = vec![0.0f64; n];
    for v in 0..n {
        let c = comm[v];
        let mut e = 0.0;
        for idx in offsets[v]..offsets[v + 1] {
            if comm[targets[idx]] == c {
                e += weights[idx];
            }
        }
        node_ext[v] = e;
    }
    // Refined community state: K_C, E(C, S − C), size.
    let mut ref_k = g.strength.clone();
    let mut ref_ext = node_ext.clone();
    let mut ref_size = vec![1usize; n];

    let mut acc = vec![0.0f64; n];
    let mut touched: Vec<usize> = Vec::new();
    let mut cand: Vec<usize> = Vec::new();
    let mut cand_gain: Vec<f64> = Vec::new();

    let mut order: Vec<usize> = (0..n).collect();
    rng.shuffle(&mut order);
    for v in order {
        // Only singletons move: refined[v] == v and nobody joined v.
        if refined[v] != v || ref_size[v] != 1 {
            continue;
        }
        let s = comm[v];
        let k = g.strength[v];
        let k_s = comm_k[s];
        if node_ext[v] < factor * k * (k_s - k) {
            continue;
        }
        let (lo, hi) = (offsets[v], offsets[v + 1]);
        for idx in lo..hi {
            let u = targets[idx];
            if comm[u] == s {
                let c = refined[u];
                if acc[c] == 0.0 {
                    touched.push(c);
                }
                acc[c] += weights[idx];
            }
        }
        // Candidates: v's own singleton (gain 0) and the well-connected
        // refined communities of S around v with a non-negative gain.
        cand.clear();
        cand_gain.clear();
        cand.push(v);
        cand_gain.push(0.0);
        let mut max_gain = 0.0f64;
        let mut max_at = 0;
        for &c in &touched {
            let kc = ref_k[c];
            if ref_ext[c] < factor * kc * (k_s - kc) {
                continue;
            }
            let gain = acc[c] - factor * k * kc;
            if gain >= 0.0 {
                if gain > max_gain {
                    max_gain = gain;
                    max_at = cand.len();
                }
                cand.push(c);
                cand_gain.push(gain);
            }
        }
        let chosen = if cand.len() == 1 {
            v
        } else if theta <= 0.0 {
            cand[max_at]
        } else {
            let mut total = 0.0;
            for gain in cand_gain.iter_mut() {
                // Below e^-40 a weight cannot change the sum (the maximum
                // weighs 1) nor, but with probability 2^-53, the draw.
                let x = (*gain - max_gain) / theta;
                *gain = if x < -40.0 { 0.0 } else { x.exp() };
                total += *gain;
            }
            let mut r = rng.next_f64() * total;
            let mut pick = cand[max_at];
            for (i, &p) in cand_gain.iter().enumerate() {
                if r < p {
                    pick = cand[i];
                    break;
                }
                r -= p;
            }
            pick
        };
        if chosen != v {
            let w_vc = acc[chosen];
            refined[v] = chosen;
            ref_k[chosen] += k;
            ref_ext[chosen] += node_ext[v] - 2.0 * w_vc;
            ref_size[chosen] += 1;
            ref_size[v] = 0;
        }
        for &c in &touched {
            acc[c] = 0.0;
        }
        touched.clear();
    }
    refined
}

/// One Leiden iteration (Algorithm A.1 `Leiden`) from the partition `part`
/// of `g0`, which it replaces by the result.
fn leiden_iteration(g0: &Graph, part: &mut [usize], cfg: &LeidenConfig, rng: &mut SplitMix64, stats: &mut RunStats) {
    let n0 = g0.num_nodes();
    let mut scratch = Vec::new();
    let mut aggregate: Option<Graph> = None;
    // Aggregate node holding each original node.
    let mut map: Vec<usize> = (0..n0).collect();
    let mut p: Vec<usize> = part.to_vec();
    renumber(&mut p, &mut scratch);
    loop {
        let g = aggregate.as_ref().unwrap_or(g0);
        let n = g.num_nodes();
        move_nodes_fast(g, &mut p, cfg.resolution, rng);
        let communities = renumber(&mut p, &mut scratch);
        if communities == n {
            break;
        }
        let mut r = refine(g, &p, cfg.resolution, cfg.randomness, rng);
        let refined = renumber(&mut r, &mut scratch);
        if refined == n {
            // Nothing merged: aggregating would not shrink the graph.
            stats.refinement_stalls += 1;
            break;
        }
        let next = g.aggregate(&r, refined);
        // The aggregate starts from the non-refined partition.
        let mut next_p = vec![0usize; refined];
        for v in 0..n {
            next_p[r[v]] = p[v];
        }
        for x in map.iter_mut() {
            *x = r[*x];
        }
        p = next_p;
        aggregate = Some(next);
    }
    for (i, x) in part.iter_mut().enumerate() {
        *x = p[map[i]];
    }
}

/// Splits every community that does not induce a connected subgraph into
/// its connected components (never lowers modularity). Returns how many
/// communities were split.
fn split_disconnected(g: &Graph, part: &mut [usize]) -> usize {
    let communities = normalise(part);
    let (label, count) = g.components(Some(part));
    if count == communities {
        return 0;
    }
    let mut first_label = vec![usize::MAX; communities];
    let mut split = vec![false; communities];
    for v in 0..part.len() {
        let c = part[v];
        if first_label[c] == usize::MAX {
            first_label[c] = label[v];
        } else if first_label[c] != label[v] {
            split[c] = true;
        }
    }
    part.copy_from_slice(&label);
    split.iter().filter(|&&s| s).count()
}

/// Runs Leiden iterations on `g` from `part` (normalised, of quality
/// `quality`) until one leaves the partition unchanged or does not improve
/// the quality, or `budget` iterations have run.
fn iterate(
    g: &Graph,
    part: &mut [usize],
    mut quality: f64,
    budget: usize,
    cfg: &LeidenConfig,
    rng: &mut SplitMix64,
    stats: &mut RunStats,
) {
    let mut previous = part.to_vec();
    for _ in 0..budget {
        leiden_iteration(g, part, cfg, rng, stats);
        normalise(part);
        stats.iterations += 1;
        if *part == previous[..] {
            break;
        }
        let q = super::modularity(g, part, cfg.resolution);
        let improved = q > quality + 1e-12 * quality.abs().max(1.0);
        quality = q;
        previous.copy_from_slice(part);
        if !improved {
            break;
        }
    }
}

/// Leiden from singletons, iterated until an iteration changes nothing or
/// no longer improves the quality, at most `max_iterations` times (at least
/// once). Returns the normalised partition and what happened.
///
/// After the first iteration the nodes are relabelled community by
/// community (an isomorphic copy of the graph) so that the later
/// iterations, which mostly look up the communities of neighbours in the
/// same community, touch memory that is close together. This changes which
/// random choices fall where, not the algorithm; the result is mapped back.
/// `labels` renumbered `0..k` by first appearance, whatever their range.
fn dense_labels(labels: &[usize]) -> Vec<usize> {
    let mut ids = std::collections::HashMap::new();
    labels
        .iter()
        .map(|&l| {
            let k = ids.len();
            *ids.entry(l).or_insert(k)
        })
        .collect()
}

/// Leiden started from `initial` (any labels) instead of singletons, for
/// re-clustering a graph that changed a little: communities the changes do
/// not reach stay as they were, because a Leiden iteration never lowers
/// the quality of the partition it starts from.
pub(super) fn run_from(g: &Graph, cfg: &LeidenConfig, initial: &[usize]) -> Vec<usize> {
    let mut part = dense_labels(initial);
    if g.num_nodes() == 0 {
        return part;
    }
    let mut rng = SplitMix64::new(cfg.seed);
    let mut stats = RunStats::default();
    let quality = super::modularity(g, &part, cfg.resolution);
    iterate(g, &mut part, quality, cfg.max_iterations.max(1), cfg, &mut rng, &mut stats);
    split_disconnected(g, &mut part);
    normalise(&mut part);
    part
}

pub(super) fn run(g: &Graph, cfg: &LeidenConfig) -> (Vec<usize>, RunStats) {
    let n = g.num_nodes();
    let mut stats = RunStats::default();
    let mut part: Vec<usize> = (0..n).collect();
    if n == 0 {
        return (part, stats);
    }
    let mut rng = SplitMix64::new(cfg.seed);
    let singletons = super::modularity(g, &part, cfg.resolution);
    iterate(g, &mut part, singletons, 1, cfg, &mut rng, &mut stats);
    let budget = cfg.max_iterations.max(1) - 1;
    let communities = part.iter().max().map_or(0, |&c| c + 1);
    if budget > 0 && communities < n {
        // Nodes ordered by (community, node): a counting sort.
        let mut start = vec![0usize; communities + 1];
        for &c in &part {
            start[c + 1] += 1;
        }
        for c in 0..communities {
            start[c + 1] += start[c];
        }
        let mut order = vec![0usize; n];
        for (v, &c) in part.iter().enumerate() {
            order[start[c]] = v;
            start[c] += 1;
        }
        let mut local = vec![usize::MAX; n];
        let relabelled = g.induced(&order, &mut local);
        let mut p: Vec<usize> = order.iter().map(|&v| part[v]).collect();
        let quality = super::modularity(&relabelled, &p, cfg.resolution);
        iterate(&relabelled, &mut p, quality, budget, cfg, &mut rng, &mut stats);
        for (i, &v) in order.iter().enumerate() {
            part[v] = p[i];
        }
    }
    stats.splits = split_disconnected(g, &mut part);
    normalise(&mut part);
    (part, stats)
}

/// The raw steps, for tests of the algorithm's invariants.
#[cfg(test)]
pub(super) mod testing {
    use super::*;

    pub fn local_moving(g: &Graph, comm: &mut [usize], gamma: f64, seed: u64) {
        move_nodes_fast(g, comm, gamma, &mut SplitMix64::new(seed));
    }

    pub fn refinement(g: &Graph, comm: &[usize], gamma: f64, theta: f64, seed: u64) -> Vec<usize> {
        refine(g, comm, gamma, theta, &mut SplitMix64::new(seed))
    }
}
