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

mod generate;
mod graph;
mod hierarchy;
mod metrics;
mod optimise;
mod rng;

#[cfg(test)]
mod tests;

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

/// Hierarchical Leiden: level 0 clusters the graph (or its largest
/// connected component); each community larger than `max_cluster_size` is
/// clustered again on its induced subgraph, its communities becoming its
/// children one level down; a community whose clustering comes back as a
/// single community stays a leaf. Sorted by id.
pub fn hierarchical_leiden(graph: &Graph, cfg: &HierarchyConfig) -> Vec<Community> {
    hierarchy::run(graph, cfg)
}
