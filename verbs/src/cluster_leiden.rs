//! `cluster_leiden`: hierarchical Leiden communities of the entity graph
//! (GraphRAG's cluster_graph), as communities.parquet.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use arrow_array::RecordBatch;
use serde::Deserialize;

use graphrag_engine::context::VerbContext;
use graphrag_engine::schema;
use graphrag_engine::settings::ClusterGraphConfig;
use graphrag_engine::table::{floats, ints, string_column, strings, StringLists};
use graphrag_engine::verb::{Verb, VerbDef, VerbInfo};
use graphrag_operations::ids::stable_uuid;
use graphrag_operations::leiden::{
    carry_over_ids, hierarchical_leiden, hierarchical_leiden_from, Community, Graph, HierarchyConfig, LeidenConfig,
    PriorClustering, PriorCommunity,
};

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ClusterLeiden {
    pub max_cluster_size: usize,
    pub use_lcc: bool,
    pub seed: u64,
    pub resolution: f64,
}

impl Default for ClusterLeiden {
    fn default() -> Self {
        let s = ClusterGraphConfig::default();
        ClusterLeiden {
            max_cluster_size: s.max_cluster_size,
            use_lcc: s.use_lcc,
            seed: s.seed,
            resolution: s.resolution,
        }
    }
}

impl VerbDef for ClusterLeiden {
    const INFO: VerbInfo = VerbInfo {
        name: "cluster_leiden",
        about: "hierarchical Leiden communities of the entity graph",
        inputs: &["entities", "relationships", "documents"],
        outputs: &["communities"],
    };

    fn check(&self) -> Result<(), String> {
        if self.max_cluster_size == 0 {
            return Err("max_cluster_size must be at least 1".into());
        }
        if self.resolution <= 0.0 {
            return Err("resolution must be positive".into());
        }
        Ok(())
    }
}

impl Verb for ClusterLeiden {
    /// In an update, the result also depends on the previous clustering.
    fn external_fingerprint(&self, ctx: &VerbContext) -> anyhow::Result<Option<String>> {
        Ok(ctx
            .previous()
            .map(|p| ["communities", "relationships"].map(|t| p.fingerprint(t).unwrap_or_default()).join(":")))
    }

    fn run(&self, inputs: &[Arc<RecordBatch>], ctx: &VerbContext) -> anyhow::Result<Vec<RecordBatch>> {
        let (ents, rels, docs) = (&inputs[0], &inputs[1], &inputs[2]);
        let titles = strings(ents, "entities", "title")?;
        let entity_ids = strings(ents, "entities", "id")?;
        let entity_units = StringLists::new(ents, "entities", "text_unit_ids")?;
        let index: HashMap<&str, usize> = titles.iter().enumerate().map(|(i, t)| (*t, i)).collect();
        let (sources, targets) = (strings(rels, "relationships", "source")?, strings(rels, "relationships", "target")?);
        let weights = floats(rels, "relationships", "weight")?;
        let mut edges = Vec::with_capacity(rels.num_rows());
        let mut rel_ends = Vec::with_capacity(rels.num_rows());
        for i in 0..rels.num_rows() {
            let ends = index.get(sources[i]).zip(index.get(targets[i])).map(|(&a, &b)| (a, b));
            if let Some((a, b)) = ends {
                edges.push((a, b, weights[i].max(0.0)));
            }
            rel_ends.push(ends);
        }
        let graph = Graph::from_edges(titles.len(), &edges);
        drop(edges);
        let cfg = HierarchyConfig {
            max_cluster_size: self.max_cluster_size,
            use_lcc: self.use_lcc,
            leiden: LeidenConfig { resolution: self.resolution, seed: self.seed, ..LeidenConfig::default() },
        };
        let mut communities = match previous_clustering(ctx, &entity_ids, &index, (&sources, &targets, &weights))? {
            Some((prior, prior_communities)) => {
                let mut communities = hierarchical_leiden_from(&graph, &cfg, &prior);
                carry_over_ids(&mut communities, &prior_communities);
                communities
            }
            None => hierarchical_leiden(&graph, &cfg),
        };
        drop(graph);
        communities.sort_by_key(|c| (c.level, c.id));

        // The data's date: the newest document's creation date (deterministic,
        // unlike the run date GraphRAG uses).
        let period = strings(docs, "documents", "creation_date")?
            .iter()
            .map(|d| d.get(..10).unwrap_or(d))
            .max()
            .unwrap_or("")
            .to_string();
        let inside = relationships_inside(&communities, titles.len(), &rel_ends);
        drop(rel_ends);
        // Entity and relationship ids as indices into the input tables' id
        // columns, text unit ids each stored once: the lists name millions of
        // ids at 100 MB of input.
        let community_ids = || communities.iter().map(|c| c.id as i64);
        let (entity_id_col, rel_id_col) =
            (string_column(ents, "entities", "id")?.clone(), string_column(rels, "relationships", "id")?.clone());
        let table = schema::batch(
            schema::communities(),
            vec![
                schema::text_col(communities.iter().map(|c| stable_uuid("community", &[&c.id.to_string()]))),
                schema::int_col(community_ids()),
                schema::int_col(community_ids()),
                schema::int_col(communities.iter().map(|c| c.level as i64)),
                schema::int_col(communities.iter().map(|c| c.parent.map(|p| p as i64).unwrap_or(-1))),
                schema::int_list_col(communities.iter().map(|c| c.children.iter().map(|&x| x as i64).collect())),
                schema::text_col(community_ids().map(|c| format!("Community {c}"))),
                schema::id_list_col_of(entity_id_col, communities.iter().map(|c| c.nodes.iter().map(|&n| n as u32))),
                schema::id_list_col_of(rel_id_col, inside),
                schema::interned_id_list_col(communities.iter().map(|c| text_units_of(&c.nodes, &entity_units))),
                schema::text_col(std::iter::repeat_n(period.as_str(), communities.len())),
                schema::int_col(communities.iter().map(|c| c.nodes.len() as i64)),
            ],
        )?;
        Ok(vec![table])
    }
}

/// Per community, the rows of the relationships with both ends in it, in row
/// order. `rel_ends`: each relationship's end nodes, `None` when an end is not
/// an entity.
fn relationships_inside(communities: &[Community], nodes: usize, rel_ends: &[Option<(usize, usize)>]) -> Vec<Vec<u32>> {
    let depth = communities.iter().map(|c| c.level + 1).max().unwrap_or(0);
    // community_at[level][node]: the index in `communities` of the node's
    // community at that level (u32::MAX: none).
    let mut community_at = vec![vec![u32::MAX; nodes]; depth];
    for (ci, c) in communities.iter().enumerate() {
        for &n in &c.nodes {
            community_at[c.level][n] = ci as u32;
        }
    }
    let mut inside = vec![Vec::new(); communities.len()];
    for (r, ends) in rel_ends.iter().enumerate() {
        let Some((a, b)) = *ends else { continue };
        for at in &community_at {
            if at[a] != u32::MAX && at[a] == at[b] {
                inside[at[a] as usize].push(r as u32);
            }
        }
    }
    inside
}

/// The text units of a community's entities, each once, in member order.
fn text_units_of<'a>(nodes: &[usize], entity_units: &StringLists<'a>) -> Vec<&'a str> {
    let mut seen = HashSet::new();
    nodes.iter().flat_map(|&n| entity_units.row(n)).filter(|u| seen.insert(*u)).collect()
}

/// Each entity title's edges: (other end, weight bits), sorted.
type Adjacency<'a> = HashMap<&'a str, Vec<(&'a str, u64)>>;

fn rels_by_end<'a>(sources: &[&'a str], targets: &[&'a str], weights: &[f64]) -> Adjacency<'a> {
    let mut adj: Adjacency = HashMap::new();
    for ((&s, &t), &w) in sources.iter().zip(targets).zip(weights) {
        adj.entry(s).or_default().push((t, w.to_bits()));
        adj.entry(t).or_default().push((s, w.to_bits()));
    }
    for edges in adj.values_mut() {
        edges.sort_unstable();
    }
    adj
}

/// The previous index's clustering mapped onto the current entities (by
/// id, a hash of the title), with the entities that are new or whose edges
/// changed marked; `None` outside an update or without previous communities.
fn previous_clustering(
    ctx: &VerbContext,
    entity_ids: &[&str],
    node_of_title: &HashMap<&str, usize>,
    (sources_now, targets_now, weights_now): (&[&str], &[&str], &[f64]),
) -> anyhow::Result<Option<(PriorClustering, Vec<PriorCommunity>)>> {
    let Some(previous) = ctx.previous() else { return Ok(None) };
    let (Some(comms), Some(rels)) = (previous.table("communities")?, previous.table("relationships")?) else {
        return Ok(None);
    };
    let node_of_id: HashMap<&str, usize> = entity_ids.iter().enumerate().map(|(i, id)| (*id, i)).collect();
    let (levels, ids) = (ints(&comms, "communities", "level")?, ints(&comms, "communities", "community")?);
    let members = StringLists::new(&comms, "communities", "entity_ids")?;
    let n = entity_ids.len();
    let depth = levels.iter().map(|&l| l as usize + 1).max().unwrap_or(0);
    let mut prior = PriorClustering { levels: vec![vec![None; n]; depth], changed: vec![false; n] };
    let mut prior_communities = Vec::with_capacity(comms.num_rows());
    for ((&level, &id), members) in levels.iter().zip(&ids).zip(members.rows()) {
        let size = members.len();
        let nodes: Vec<usize> = members.filter_map(|m| node_of_id.get(m).copied()).collect();
        for &v in &nodes {
            prior.levels[level as usize][v] = Some(id as usize);
        }
        prior_communities.push(PriorCommunity { id: id as usize, level: level as usize, nodes, size });
    }
    let (sources, targets) = (strings(&rels, "relationships", "source")?, strings(&rels, "relationships", "target")?);
    let edges_then = rels_by_end(&sources, &targets, &floats(&rels, "relationships", "weight")?);
    let edges_now = rels_by_end(sources_now, targets_now, weights_now);
    for (title, &v) in node_of_title {
        prior.changed[v] = edges_now.get(title) != edges_then.get(title);
    }
    Ok(Some((prior, prior_communities)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn community(id: usize, level: usize, nodes: Vec<usize>) -> Community {
        Community { id, level, parent: None, children: vec![], nodes }
    }

    #[test]
    fn relationships_inside_each_community_at_every_level() {
        // Level 0: {0,1,2} and {3}; level 1 splits the first into {0,1} and {2}.
        let communities = [
            community(0, 0, vec![0, 1, 2]),
            community(1, 0, vec![3]),
            community(2, 1, vec![0, 1]),
            community(3, 1, vec![2]),
        ];
        // Rows: 0-1 (inside at both levels), 1-2 (level 0 only), 2-3 (across), a dangling end, 0-1 again.
        let ends = [Some((0, 1)), Some((1, 2)), Some((2, 3)), None, Some((1, 0))];
        assert_eq!(relationships_inside(&communities, 4, &ends), [vec![0, 1, 4], vec![], vec![0, 4], vec![]]);
    }

    #[test]
    fn text_units_once_in_member_order() {
        let lists = schema::id_list_col([vec!["u2", "u1"], vec!["u1", "u3"], vec!["u9"]]);
        let table = RecordBatch::try_new(
            Arc::new(arrow_schema::Schema::new(vec![schema::id_list_field("text_unit_ids")])),
            vec![lists],
        )
        .unwrap();
        let units = StringLists::new(&table, "entities", "text_unit_ids").unwrap();
        assert_eq!(text_units_of(&[0, 1], &units), ["u2", "u1", "u3"]);
        assert_eq!(text_units_of(&[2, 0], &units), ["u9", "u2", "u1"]);
    }
}
