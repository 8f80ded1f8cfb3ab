//! Hierarchical Leiden as GraphRAG uses it (graspologic's
//! `hierarchical_leiden`): cluster the graph, then cluster again, on its
//! induced subgraph, every community larger than `max_cluster_size`,
//! recursively.

use super::graph::Graph;
use super::optimise::normalise;
use super::{leiden, leiden_from, Community, HierarchyConfig, LeidenConfig, PriorClustering};

/// Groups `nodes[i]` by `part[i]` (ids `0..k` by smallest member, `nodes`
/// ascending), so each group comes out sorted.
fn groups(part: &[usize], nodes: &[usize]) -> Vec<Vec<usize>> {
    let k = part.iter().copied().max().map_or(0, |x| x + 1);
    let mut out = vec![Vec::new(); k];
    for (i, &c) in part.iter().enumerate() {
        out[c].push(nodes[i]);
    }
    out
}

/// Clusters `sub`, the subgraph induced by `nodes`, at `level`: from
/// singletons without a prior; with one, the prior's partition of `nodes`
/// unchanged when none of them changed and the prior clustered exactly
/// this node set at this level (so untouched parts of the hierarchy come
/// out identical), else Leiden warm-started from their prior communities
/// (nodes without one start alone).
fn cluster(
    sub: &Graph,
    cfg: &LeidenConfig,
    prior: Option<&PriorClustering>,
    level: usize,
    nodes: &[usize],
) -> Vec<usize> {
    let Some(labels) = prior.and_then(|p| p.levels.get(level)) else {
        return leiden(sub, cfg);
    };
    let prior = prior.expect("levels came from it");
    let fresh = labels.iter().flatten().max().map_or(0, |m| m + 1);
    let mut part: Vec<usize> =
        nodes.iter().enumerate().map(|(i, &v)| labels.get(v).copied().flatten().unwrap_or(fresh + i)).collect();
    let untouched = nodes.iter().all(|&v| !prior.changed.get(v).copied().unwrap_or(true));
    if untouched && prior.clustered_exactly(level, nodes) {
        normalise(&mut part);
        return part;
    }
    leiden_from(sub, cfg, &part)
}

pub(super) fn run(graph: &Graph, cfg: &HierarchyConfig, prior: Option<&PriorClustering>) -> Vec<Community> {
    let n = graph.num_nodes();
    if n == 0 {
        return Vec::new();
    }
    let mut local = vec![usize::MAX; n];
    let roots: Vec<usize> = if cfg.use_lcc { graph.largest_component() } else { (0..n).collect() };
    let level0 = if roots.len() == n {
        cluster(graph, &cfg.leiden, prior, 0, &roots)
    } else {
        cluster(&graph.induced(&roots, &mut local), &cfg.leiden, prior, 0, &roots)
    };
    let mut out: Vec<Community> = groups(&level0, &roots)
        .into_iter()
        .enumerate()
        .map(|(id, nodes)| Community { id, level: 0, parent: None, children: Vec::new(), nodes })
        .collect();

    let mut frontier: Vec<usize> = (0..out.len()).collect();
    let mut level = 0;
    while !frontier.is_empty() {
        let mut next = Vec::new();
        for &cid in &frontier {
            if out[cid].nodes.len() <= cfg.max_cluster_size {
                continue;
            }
            let nodes = std::mem::take(&mut out[cid].nodes);
            let part = cluster(&graph.induced(&nodes, &mut local), &cfg.leiden, prior, level + 1, &nodes);
            let parts = groups(&part, &nodes);
            out[cid].nodes = nodes;
            if parts.len() < 2 {
                continue; // cannot be split: stays a leaf
            }
            for members in parts {
                let id = out.len();
                out.push(Community { id, level: level + 1, parent: Some(cid), children: Vec::new(), nodes: members });
                out[cid].children.push(id);
                next.push(id);
            }
        }
        frontier = next;
        level += 1;
    }
    out
}
