//! The weighted undirected graph in compressed sparse row (CSR) form, and
//! the graph operations Leiden needs: induced subgraphs, aggregation of a
//! partition into a smaller graph, connected components.

/// A weighted undirected graph in compressed sparse row form.
///
/// Every undirected edge `{u, v}` with `u != v` is stored twice, once in the
/// adjacency of each end; a self-loop is kept apart, in `self_loops`, and
/// counts twice in its node's strength (the networkx/igraph convention:
/// `A_uu = 2w`). `total_weight` is `m`, the sum of the edge weights (each
/// edge, self-loops included, once), so that the strengths sum to `2m`.
#[derive(Debug, Clone, PartialEq)]
pub struct Graph {
    /// `targets[offsets[v]..offsets[v + 1]]` are the neighbours of `v`.
    pub(super) offsets: Vec<usize>,
    pub(super) targets: Vec<usize>,
    pub(super) weights: Vec<f64>,
    /// Weight of the self-loop of each node (0 when none).
    pub(super) self_loops: Vec<f64>,
    /// Weighted degree `k_v` (self-loop counted twice).
    pub(super) strength: Vec<f64>,
    /// `m`: half the sum of the strengths.
    pub(super) total_weight: f64,
}

impl Graph {
    /// Builds the graph on nodes `0..num_nodes` from undirected weighted
    /// edges. `(u, v, w)` and `(v, u, w)` are the same edge; an edge listed
    /// more than once gets the sum of its weights; self-loops are allowed.
    /// Zero-weight edges are dropped (they do not change any modularity and
    /// do not connect anything).
    ///
    /// # Panics
    /// When an end is `>= num_nodes`, or a weight is negative or not finite.
    pub fn from_edges(num_nodes: usize, edges: &[(usize, usize, f64)]) -> Graph {
        let n = num_nodes;
        let mut degree = vec![0usize; n + 1];
        let mut self_loops = vec![0.0f64; n];
        for &(u, v, w) in edges {
            assert!(u < n && v < n, "edge ({u}, {v}) has an end outside the {n} nodes");
            assert!(w.is_finite() && w >= 0.0, "edge ({u}, {v}) has weight {w}; weights must be finite and >= 0");
            if w == 0.0 {
                continue;
            }
            if u == v {
                self_loops[u] += w;
            } else {
                degree[u] += 1;
                degree[v] += 1;
            }
        }
        // Prefix sums: degree[v] becomes the start of v's slice.
        let mut offsets = vec![0usize; n + 1];
        for v in 0..n {
            offsets[v + 1] = offsets[v] + degree[v];
        }
        let total = offsets[n];
        let mut next: Vec<usize> = offsets[..n].to_vec();
        let mut adjacency = vec![(0usize, 0.0f64); total];
        for &(u, v, w) in edges {
            if w == 0.0 || u == v {
                continue;
            }
            adjacency[next[u]] = (v, w);
            next[u] += 1;
            adjacency[next[v]] = (u, w);
            next[v] += 1;
        }
        drop(next);
        drop(degree);

        // Sort each slice by neighbour (stable, so duplicate weights are
        // summed in input order) and merge duplicates.
        let mut targets = Vec::with_capacity(total);
        let mut weights = Vec::with_capacity(total);
        let mut new_offsets = Vec::with_capacity(n + 1);
        new_offsets.push(0);
        for v in 0..n {
            let slice = &mut adjacency[offsets[v]..offsets[v + 1]];
            slice.sort_by_key(|&(t, _)| t);
            let start = targets.len();
            for &(t, w) in slice.iter() {
                if targets.len() > start && targets[targets.len() - 1] == t {
                    *weights.last_mut().expect("non-empty") += w;
                } else {
                    targets.push(t);
                    weights.push(w);
                }
            }
            new_offsets.push(targets.len());
        }
        targets.shrink_to_fit();
        weights.shrink_to_fit();
        Self::assemble(new_offsets, targets, weights, self_loops)
    }

    /// Computes strengths and the total weight from the CSR arrays.
    fn assemble(offsets: Vec<usize>, targets: Vec<usize>, weights: Vec<f64>, self_loops: Vec<f64>) -> Graph {
        let n = self_loops.len();
        let mut strength = vec![0.0f64; n];
        let mut twice_m = 0.0;
        for v in 0..n {
            let k = weights[offsets[v]..offsets[v + 1]].iter().sum::<f64>() + 2.0 * self_loops[v];
            strength[v] = k;
            twice_m += k;
        }
        Graph { offsets, targets, weights, self_loops, strength, total_weight: twice_m / 2.0 }
    }

    /// Number of nodes.
    pub fn num_nodes(&self) -> usize {
        self.self_loops.len()
    }

    /// `m`: the sum of the edge weights, each undirected edge (and each
    /// self-loop) counted once.
    pub fn total_weight(&self) -> f64 {
        self.total_weight
    }

    /// Number of distinct undirected edges, self-loops included.
    pub fn num_edges(&self) -> usize {
        self.targets.len() / 2 + self.self_loops.iter().filter(|&&w| w > 0.0).count()
    }

    /// Weighted degree of `v` (a self-loop counts twice).
    pub fn strength(&self, v: usize) -> f64 {
        self.strength[v]
    }

    /// Neighbours of `v` (self excluded) and the weights of the edges to them.
    pub fn neighbors(&self, v: usize) -> (&[usize], &[f64]) {
        let range = self.offsets[v]..self.offsets[v + 1];
        (&self.targets[range.clone()], &self.weights[range])
    }

    /// The subgraph induced by `nodes` (distinct), node `nodes[i]` becoming
    /// node `i`. `local` is scratch space of `num_nodes()` entries, all
    /// `usize::MAX` on entry and on return.
    pub(super) fn induced(&self, nodes: &[usize], local: &mut [usize]) -> Graph {
        for (i, &v) in nodes.iter().enumerate() {
            local[v] = i;
        }
        let mut offsets = Vec::with_capacity(nodes.len() + 1);
        offsets.push(0);
        let mut targets = Vec::new();
        let mut weights = Vec::new();
        let mut self_loops = Vec::with_capacity(nodes.len());
        for &v in nodes {
            for idx in self.offsets[v]..self.offsets[v + 1] {
                let l = local[self.targets[idx]];
                if l != usize::MAX {
                    targets.push(l);
                    weights.push(self.weights[idx]);
                }
            }
            offsets.push(targets.len());
            self_loops.push(self.self_loops[v]);
        }
        for &v in nodes {
            local[v] = usize::MAX;
        }
        Self::assemble(offsets, targets, weights, self_loops)
    }

    /// The aggregate graph of a partition (`membership[v] < k`, every id in
    /// `0..k` used): one node per community; the edge between two
    /// communities weighs the sum of the edges between them; a community's
    /// internal edges and self-loops become its self-loop. Strengths and the
    /// total weight are preserved.
    pub(super) fn aggregate(&self, membership: &[usize], k: usize) -> Graph {
        let n = self.num_nodes();
        // Members of each community, by counting sort (ascending node order).
        let mut start = vec![0usize; k + 1];
        for &c in membership {
            start[c + 1] += 1;
        }
        for c in 0..k {
            start[c + 1] += start[c];
        }
        let mut fill = start.clone();
        let mut members = vec![0usize; n];
        for (v, &c) in membership.iter().enumerate() {
            members[fill[c]] = v;
            fill[c] += 1;
        }
        drop(fill);

        let mut acc = vec![0.0f64; k];
        let mut touched: Vec<usize> = Vec::new();
        let mut offsets = Vec::with_capacity(k + 1);
        offsets.push(0);
        let mut targets = Vec::new();
        let mut weights = Vec::new();
        let mut self_loops = vec![0.0f64; k];
        let mut strength = vec![0.0f64; k];
        for c in 0..k {
            let mut internal = 0.0;
            let mut loops = 0.0;
            let mut k_c = 0.0;
            for &v in &members[start[c]..start[c + 1]] {
                loops += self.self_loops[v];
                k_c += self.strength[v];
                for idx in self.offsets[v]..self.offsets[v + 1] {
                    let d = membership[self.targets[idx]];
                    let w = self.weights[idx];
                    if d == c {
                        internal += w;
                    } else {
                        if acc[d] == 0.0 {
                            touched.push(d);
                        }
                        acc[d] += w;
                    }
                }
            }
            // Every internal edge was seen from both ends.
            self_loops[c] = loops + internal / 2.0;
            strength[c] = k_c;
            for &d in &touched {
                targets.push(d);
                weights.push(acc[d]);
                acc[d] = 0.0;
            }
            touched.clear();
            offsets.push(targets.len());
        }
        Graph { offsets, targets, weights, self_loops, strength, total_weight: self.total_weight }
    }

    /// Connected components, using only the edges whose two ends have the
    /// same `partition` label when one is given. Returns the label of each
    /// node (`0..count`, numbered by smallest node) and the count.
    pub(super) fn components(&self, partition: Option<&[usize]>) -> (Vec<usize>, usize) {
        let n = self.num_nodes();
        let mut label = vec![usize::MAX; n];
        let mut stack = Vec::new();
        let mut count = 0;
        for s in 0..n {
            if label[s] != usize::MAX {
                continue;
            }
            label[s] = count;
            stack.push(s);
            while let Some(v) = stack.pop() {
                for &u in &self.targets[self.offsets[v]..self.offsets[v + 1]] {
                    if label[u] == usize::MAX && partition.is_none_or(|p| p[u] == p[v]) {
                        label[u] = count;
                        stack.push(u);
                    }
                }
            }
            count += 1;
        }
        (label, count)
    }

    /// Nodes of the largest connected component, ascending; ties go to the
    /// component holding the smallest node. Empty for the empty graph.
    pub(super) fn largest_component(&self) -> Vec<usize> {
        let (label, count) = self.components(None);
        let mut sizes = vec![0usize; count];
        for &l in &label {
            sizes[l] += 1;
        }
        // Components are numbered by smallest node, so the first maximum wins ties.
        let Some(best) = (0..count).max_by(|&a, &b| sizes[a].cmp(&sizes[b]).then(b.cmp(&a))) else {
            return Vec::new();
        };
        (0..self.num_nodes()).filter(|&v| label[v] == best).collect()
    }
}
