//! PageRank and Personalized PageRank on an undirected weighted graph, by
//! sparse power iteration.
//!
//! The walk follows an edge with probability `damping` (to a neighbour in
//! proportion to the edge weight) and otherwise restarts at a node drawn
//! from the reset distribution; a node without edges restarts with
//! probability 1 (its mass is handed to the reset distribution). The result
//! is the walk's stationary distribution:
//!
//! `p = (1 − d) · r + d · (Wᵀ p + (Σ_dangling p) · r)`,
//!
//! `W` the row-normalised weights and `r` the reset vector scaled to sum 1
//! (igraph's `personalized_pagerank`, which HippoRAG calls, with
//! `directed=False`; PageRank is the uniform `r`).

use rayon::prelude::*;

/// Stored edges from which an iteration runs on several threads.
const PARALLEL_MIN_EDGES: usize = 1 << 18;
/// Nodes per parallel task.
const PARALLEL_MIN_NODES: usize = 4096;

/// An undirected weighted graph in compressed sparse row form: each edge is
/// stored in both directions; self-loops are dropped.
#[derive(Debug, Clone, Default)]
pub struct WeightedGraph {
    offsets: Vec<usize>,
    targets: Vec<u32>,
    weights: Vec<f64>,
    /// Sum of the weights of each node's edges.
    strength: Vec<f64>,
}

impl WeightedGraph {
    /// A graph of nodes `0..n` with the given edges `(a, b, weight)`;
    /// non-positive or non-finite weights drop the edge, parallel edges
    /// add up. Neighbours are kept in the order the edges came.
    pub fn new(n: usize, edges: &[(u32, u32, f64)]) -> WeightedGraph {
        let keep = |&&(a, b, w): &&(u32, u32, f64)| a != b && w.is_finite() && w > 0.0;
        let mut degree = vec![0usize; n + 1];
        for &(a, b, _) in edges.iter().filter(keep) {
            degree[a as usize + 1] += 1;
            degree[b as usize + 1] += 1;
        }
        for i in 0..n {
            degree[i + 1] += degree[i];
        }
        let offsets = degree;
        let mut next = offsets.clone();
        let total = offsets[n];
        let (mut targets, mut weights) = (vec![0u32; total], vec![0f64; total]);
        let mut strength = vec![0f64; n];
        for &(a, b, w) in edges.iter().filter(keep) {
            for (from, to) in [(a, b), (b, a)] {
                let at = next[from as usize];
                targets[at] = to;
                weights[at] = w;
                next[from as usize] += 1;
                strength[from as usize] += w;
            }
        }
        WeightedGraph { offsets, targets, weights, strength }
    }

    pub fn nodes(&self) -> usize {
        self.strength.len()
    }

    /// Edges stored (each undirected edge twice).
    pub fn stored_edges(&self) -> usize {
        self.targets.len()
    }

    /// The neighbours of `node` with the edge weights.
    pub fn neighbours(&self, node: usize) -> impl Iterator<Item = (usize, f64)> + '_ {
        let range = self.offsets[node]..self.offsets[node + 1];
        self.targets[range.clone()].iter().map(|&t| t as usize).zip(self.weights[range].iter().copied())
    }

    /// Personalized PageRank for the `reset` weights (one per node, any
    /// non-negative scale): iterates until the L1 change is below `tolerance`
    /// or `max_iterations` are done. All-zero reset weights give all zeros.
    /// Each step gathers every node's new mass from its neighbours (the
    /// graph is undirected, so a node's in-edges are its edges), on several
    /// threads for large graphs; each node's sum has one order, so the
    /// result does not depend on the threads.
    pub fn personalized_pagerank(
        &self,
        reset: &[f64],
        damping: f64,
        tolerance: f64,
        max_iterations: usize,
    ) -> Vec<f64> {
        let n = self.nodes();
        assert_eq!(reset.len(), n, "one reset weight per node");
        let total: f64 = reset.iter().filter(|w| w.is_finite() && **w > 0.0).sum();
        if total <= 0.0 {
            return vec![0.0; n];
        }
        let r: Vec<f64> = reset.iter().map(|&w| if w.is_finite() && w > 0.0 { w / total } else { 0.0 }).collect();
        let mut p = r.clone();
        let mut next = vec![0f64; n];
        // Mass each node sends along one unit of edge weight.
        let mut share = vec![0f64; n];
        for _ in 0..max_iterations {
            let mut dangling = 0.0;
            for ((s, &mass), &strength) in share.iter_mut().zip(&p).zip(&self.strength) {
                if strength > 0.0 {
                    *s = damping * mass / strength;
                } else {
                    *s = 0.0;
                    dangling += mass;
                }
            }
            let restart = 1.0 - damping + damping * dangling;
            let gather = |(j, x): (usize, &mut f64)| {
                let range = self.offsets[j]..self.offsets[j + 1];
                let incoming: f64 = self.targets[range.clone()]
                    .iter()
                    .zip(&self.weights[range])
                    .map(|(&i, &w)| w * share[i as usize])
                    .sum();
                *x = restart * r[j] + incoming;
            };
            if self.targets.len() >= PARALLEL_MIN_EDGES {
                next.par_iter_mut().enumerate().with_min_len(PARALLEL_MIN_NODES).for_each(gather);
            } else {
                next.iter_mut().enumerate().for_each(gather);
            }
            let change: f64 = next.iter().zip(&p).map(|(a, b)| (a - b).abs()).sum();
            std::mem::swap(&mut p, &mut next);
            if change < tolerance {
                break;
            }
        }
        p
    }

    /// PageRank (uniform reset).
    pub fn pagerank(&self, damping: f64, tolerance: f64, max_iterations: usize) -> Vec<f64> {
        self.personalized_pagerank(&vec![1.0; self.nodes()], damping, tolerance, max_iterations)
    }
}

/// Tolerance and iteration cap of the power iterations callers use: the
/// error shrinks by `damping` per iteration (27 iterations at HippoRAG's
/// 0.5), so the cap is never reached; the remaining L1 error is below a
/// hundredth of the mass of an average node of a 100,000-node graph.
pub const TOLERANCE: f64 = 1e-8;
pub const MAX_ITERATIONS: usize = 100;

#[cfg(test)]
mod tests {
    use super::*;

    fn close(a: &[f64], b: &[f64]) {
        assert_eq!(a.len(), b.len());
        for (x, y) in a.iter().zip(b) {
            assert!((x - y).abs() < 1e-9, "{a:?} vs {b:?}");
        }
    }

    /// Path 0 – 1 – 2, restart at 0, damping 1/2. The stationary equations
    /// p0 = 1/2 + 1/2 · p1/2, p1 = 1/2 · (p0 + p2), p2 = 1/2 · p1/2 give
    /// p = (7/12, 1/3, 1/12).
    #[test]
    fn ppr_on_a_path_matches_the_hand_solved_stationary_values() {
        let g = WeightedGraph::new(3, &[(0, 1, 1.0), (1, 2, 1.0)]);
        let p = g.personalized_pagerank(&[2.0, 0.0, 0.0], 0.5, 1e-13, MAX_ITERATIONS);
        close(&p, &[7.0 / 12.0, 1.0 / 3.0, 1.0 / 12.0]);
    }

    /// Weighted edges 0 – 1 (3) and 0 – 2 (1), node 3 without edges; reset
    /// (1/2, 0, 0, 1/2), damping 1/2. Node 3's mass restarts by the reset:
    /// p3 = 1/4 + 1/2 · p3/2 → 1/3; p1 = 1/2 · 3/4 · p0, p2 = 1/2 · 1/4 · p0,
    /// p0 = 1/4 + 1/2 · (p1 + p2) + 1/2 · p3/2 → 4/9; so (4/9, 1/6, 1/18, 1/3).
    #[test]
    fn weights_and_dangling_nodes_follow_the_hand_solved_values() {
        let g = WeightedGraph::new(4, &[(0, 1, 3.0), (2, 0, 1.0), (1, 1, 5.0), (2, 3, 0.0)]);
        assert_eq!(g.stored_edges(), 4, "self-loop and zero-weight edge dropped");
        let p = g.personalized_pagerank(&[1.0, 0.0, 0.0, 1.0], 0.5, 1e-13, MAX_ITERATIONS);
        close(&p, &[4.0 / 9.0, 1.0 / 6.0, 1.0 / 18.0, 1.0 / 3.0]);
        assert!((p.iter().sum::<f64>() - 1.0).abs() < 1e-12);
    }

    /// The textbook push form of one PPR iteration, for comparison.
    fn push_ppr(n: usize, edges: &[(u32, u32, f64)], reset: &[f64], damping: f64, iterations: usize) -> Vec<f64> {
        let total: f64 = reset.iter().sum();
        let r: Vec<f64> = reset.iter().map(|w| w / total).collect();
        let mut strength = vec![0.0; n];
        for &(a, b, w) in edges {
            strength[a as usize] += w;
            strength[b as usize] += w;
        }
        let mut p = r.clone();
        for _ in 0..iterations {
            let dangling: f64 = (0..n).filter(|&i| strength[i] == 0.0).map(|i| p[i]).sum();
            let mut next: Vec<f64> = r.iter().map(|x| x * (1.0 - damping + damping * dangling)).collect();
            for &(a, b, w) in edges {
                next[b as usize] += damping * p[a as usize] * w / strength[a as usize];
                next[a as usize] += damping * p[b as usize] * w / strength[b as usize];
            }
            p = next;
        }
        p
    }

    #[test]
    fn large_graphs_iterate_on_threads_with_the_same_result() {
        let n = 60_000u32;
        let mut x = 12345u64;
        let mut rand = || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        let edges: Vec<(u32, u32, f64)> = (0..150_000)
            .map(|_| ((rand() % n as u64) as u32, (rand() % n as u64) as u32, 1.0 + (rand() % 4) as f64))
            .collect();
        let edges: Vec<(u32, u32, f64)> = edges.into_iter().filter(|e| e.0 != e.1).collect();
        let g = WeightedGraph::new(n as usize, &edges);
        assert!(g.stored_edges() >= PARALLEL_MIN_EDGES);
        let reset: Vec<f64> = (0..n).map(|i| if i % 97 == 0 { 1.0 + (i % 5) as f64 } else { 0.0 }).collect();
        let p = g.personalized_pagerank(&reset, 0.5, 0.0, 30);
        assert_eq!(p, g.personalized_pagerank(&reset, 0.5, 0.0, 30), "deterministic");
        let q = push_ppr(n as usize, &edges, &reset, 0.5, 30);
        assert!(p.iter().zip(&q).all(|(a, b)| (a - b).abs() < 1e-12), "gather = push");
    }

    #[test]
    fn pagerank_of_a_star_and_degenerate_inputs() {
        // Star: centre 0 with leaves 1..=3, damping 0.85. By symmetry the
        // leaves share x, centre c = 1 - 3x, and x = 0.15/4 + 0.85 · c/3.
        let g = WeightedGraph::new(4, &[(0, 1, 1.0), (0, 2, 1.0), (0, 3, 1.0)]);
        let p = g.pagerank(0.85, 1e-13, 1000);
        let x = (0.15 / 4.0 + 0.85 / 3.0) / (1.0 + 0.85);
        close(&p, &[1.0 - 3.0 * x, x, x, x]);
        assert_eq!(g.personalized_pagerank(&[0.0; 4], 0.5, TOLERANCE, 10), vec![0.0; 4]);
        assert!(WeightedGraph::new(0, &[]).pagerank(0.5, TOLERANCE, 10).is_empty());
        let neighbours: Vec<(usize, f64)> = g.neighbours(0).collect();
        assert_eq!(neighbours, [(1, 1.0), (2, 1.0), (3, 1.0)]);
    }
}
