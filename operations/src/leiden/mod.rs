//! Leiden community detection (Traag, Waltman & van Eck 2019, "From Louvain
//! to Leiden: guaranteeing well-connected communities"), written from the
//! paper, and the hierarchical mode GraphRAG uses.
//!
//! * [`Graph`]: a weighted undirected graph in CSR form.
//! * [`leiden`]: a flat partition maximising modularity with resolution γ.
//!   Each iteration runs the paper's three phases — fast local moving,
//!   refinement of every community into well-connected sub-communities
//!   (randomised merges with parameter θ), aggregation of the *refined*
//!   partition with the aggregate's initial partition taken from the
//!   non-refined one — until every community is a single aggregate node.
//!   Iterations repeat from the previous result until nothing changes (or
//!   the quality stops improving), at most `max_iterations` times. Seeded
//!   (SplitMix64) and single-threaded: same graph, same config → same
//!   output, on every machine.
//! * [`hierarchical_leiden`]: GraphRAG's recursive clustering (graspologic's
//!   `hierarchical_leiden`): communities larger than `max_cluster_size` are
//!   clustered again on their induced subgraph, level by level.
//! * [`modularity`], [`communities_connected`], [`nmi`]: evaluation.
//! * [`planted_partition`]: seeded benchmark graphs with known communities.
//!
//! Every returned community induces a connected subgraph (the paper's
//! guarantee; a final check splits a disconnected community into its
//! components should one ever appear, which cannot lower modularity).
//! Isolated nodes get communities of their own.

mod carry_over;
mod generate;
mod graph;
mod hierarchy;
mod metrics;
mod optimise;
mod rng;

#[cfg(test)]
mod tests;

pub use carry_over::{carry_over_ids, PriorCommunity};
pub use generate::{planted_partition, random_community_sizes, PlantedGraph};
pub use graph::Graph;
pub use metrics::{communities_connected, modularity, nmi};
pub use rng::SplitMix64;

/// Parameters of [`leiden`].
#[derive(Debug, Clone, PartialEq)]
pub struct LeidenConfig {
    /// γ in `Σ_c [e_c/m − γ (K_c/2m)²]`; 1 is standard modularity, larger
    /// values give smaller communities.
    pub resolution: f64,
    /// Seed of the pseudo-random generator (node orders, refinement).
    pub seed: u64,
    /// Cap on full Leiden iterations; iterating stops earlier as soon as an
    /// iteration leaves the partition unchanged or does not improve the
    /// quality. At least one iteration always runs.
    pub max_iterations: usize,
    /// θ, the randomness of the refinement: a node joins a candidate
    /// sub-community with probability ∝ `exp(ΔH / θ)`, `ΔH` in edge-weight
    /// units. `0` makes the refinement greedy.
    pub randomness: f64,
}

impl Default for LeidenConfig {
    fn default() -> Self {
        Self { resolution: 1.0, seed: 0xDEAD_BEEF, max_iterations: 2, randomness: 0.01 }
    }
}

/// Parameters of [`hierarchical_leiden`].
#[derive(Debug, Clone, PartialEq)]
pub struct HierarchyConfig {
    /// Communities with more nodes than this are clustered again.
    pub max_cluster_size: usize,
    /// Cluster only the largest connected component (ties: the one holding
    /// the smallest node); other nodes get no community.
    pub use_lcc: bool,
    /// Parameters of every clustering, the same seed included.
    pub leiden: LeidenConfig,
}

impl Default for HierarchyConfig {
    fn default() -> Self {
        Self { max_cluster_size: 10, use_lcc: true, leiden: LeidenConfig::default() }
    }
}

/// One community of a hierarchy.
#[derive(Debug, Clone, PartialEq)]
pub struct Community {
    /// Unique across levels, numbered level by level (level 0 first; within
    /// a level by parent, then by smallest node); equals the index in the
    /// vector [`hierarchical_leiden`] returns.
    pub id: usize,
    /// 0 for the clustering of the whole graph.
    pub level: usize,
    /// The community at `level - 1` this one was split from.
    pub parent: Option<usize>,
    /// The communities at `level + 1` it was split into (empty for a leaf).
    pub children: Vec<usize>,
    /// Member nodes, ascending.
    pub nodes: Vec<usize>,
}

/// Flat Leiden partition: the community of each node, ids `0..k` numbered
/// by smallest member node.
pub fn leiden(graph: &Graph, cfg: &LeidenConfig) -> Vec<usize> {
    optimise::run(graph, cfg).0
}

/// [`leiden`] starting from the partition `initial` (any labels, one per
/// node) instead of singletons: nodes keep their community unless moving
/// improves the quality, so a slightly changed graph keeps most of an
/// earlier clustering (incremental updates).
pub fn leiden_from(graph: &Graph, cfg: &LeidenConfig, initial: &[usize]) -> Vec<usize> {
    assert_eq!(initial.len(), graph.num_nodes(), "one initial label per node");
    optimise::run_from(graph, cfg, initial)
}

/// Hierarchical Leiden: level 0 clusters the graph (or its largest
/// connected component); each community larger than `max_cluster_size` is
/// clustered again on its induced subgraph, its communities becoming its
/// children one level down; a community whose clustering comes back as a
/// single community stays a leaf. Sorted by id.
pub fn hierarchical_leiden(graph: &Graph, cfg: &HierarchyConfig) -> Vec<Community> {
    hierarchy::run(graph, cfg, None)
}

/// An earlier clustering of (an earlier version of) the graph, mapped to
/// the current node ids, for [`hierarchical_leiden_from`].
#[derive(Debug, Clone, Default, PartialEq)]
pub struct PriorClustering {
    /// `levels[level][node]`: the node's community at that level (`None`:
    /// the node was not clustered at that level, or is new).
    pub levels: Vec<Vec<Option<usize>>>,
    /// Nodes that are new or whose edges (neighbours or weights) changed.
    pub changed: Vec<bool>,
}

impl PriorClustering {
    /// Whether the prior clustered exactly `nodes` at `level`: all of them
    /// in one community of the level above (any community, at level 0),
    /// and no other node there.
    fn clustered_exactly(&self, level: usize, nodes: &[usize]) -> bool {
        let label = |level: usize, v: usize| self.levels.get(level).and_then(|l| l.get(v).copied().flatten());
        if nodes.iter().any(|&v| label(level, v).is_none()) {
            return false;
        }
        let Some(parent_level) = level.checked_sub(1) else {
            let clustered = self.levels.first().map_or(0, |l| l.iter().flatten().count());
            return clustered == nodes.len();
        };
        let Some(parent) = label(parent_level, nodes[0]) else { return false };
        if nodes.iter().any(|&v| label(parent_level, v) != Some(parent)) {
            return false;
        }
        let members = self.levels[parent_level].iter().filter(|&&l| l == Some(parent)).count();
        members == nodes.len()
    }
}

/// [`hierarchical_leiden`] for a graph that changed since `prior`: parts
/// of the hierarchy whose nodes did not change come out as they were, the
/// rest is clustered by Leiden warm-started from the prior communities, so
/// an incremental update keeps most communities (and their reports).
pub fn hierarchical_leiden_from(graph: &Graph, cfg: &HierarchyConfig, prior: &PriorClustering) -> Vec<Community> {
    hierarchy::run(graph, cfg, Some(prior))
}
