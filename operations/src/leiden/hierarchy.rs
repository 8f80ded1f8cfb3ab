//! Hierarchical Leiden as GraphRAG uses it (graspologic's
//! `hierarchical_leiden`): cluster the graph, then cluster again, on its
//! induced subgraph, every community larger than `max_cluster_size`,
//! recursively.

use super::graph::Graph;
use super::{leiden, Community, HierarchyConfig};

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

pub(super) fn run(graph: &Graph, cfg: &HierarchyConfig) -> Vec<Community> {
    let n = graph.num_nodes();
    if n == 0 {
        return Vec::new();
    }
    let mut local = vec![usize::MAX; n];
    let roots: Vec<usize> = if cfg.use_lcc { graph.largest_component() } else { (0..n).collect() };
    let level0 = if roots.len() == n {
        leiden(graph, &cfg.leiden)
    } else {
        leiden(&graph.induced(&roots, &mut local), &cfg.leiden)
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
            let part = leiden(&graph.induced(&nodes, &mut local), &cfg.leiden);
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
