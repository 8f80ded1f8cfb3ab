//! `cluster_leiden`: hierarchical Leiden communities of the entity graph
//! (GraphRAG's cluster_graph), as communities.parquet.

use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;

use arrow_array::RecordBatch;
use serde::Deserialize;

use graphrag_engine::context::VerbContext;
use graphrag_engine::schema;
use graphrag_engine::settings::ClusterGraphConfig;
use graphrag_engine::table::{floats, ints, string_lists, strings};
use graphrag_engine::verb::{Verb, VerbDef, VerbInfo};
use graphrag_operations::ids::stable_uuid;
use graphrag_operations::leiden::{
    carry_over_ids, hierarchical_leiden, hierarchical_leiden_from, Graph, HierarchyConfig, LeidenConfig,
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
        let entity_units = string_lists(ents, "entities", "text_unit_ids")?;
        let index: HashMap<&str, usize> = titles.iter().enumerate().map(|(i, t)| (*t, i)).collect();
        let (sources, targets) = (strings(rels, "relationships", "source")?, strings(rels, "relationships", "target")?);
        let rel_ids = strings(rels, "relationships", "id")?;
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
        let cfg = HierarchyConfig {
            max_cluster_size: self.max_cluster_size,
            use_lcc: self.use_lcc,
            leiden: LeidenConfig { resolution: self.resolution, seed: self.seed, ..LeidenConfig::default() },
        };
        let mut communities =
            match previous_clustering(ctx, &entity_ids, &index, &rels_by_end(&sources, &targets, &weights))? {
                Some((prior, prior_communities)) => {
                    let mut communities = hierarchical_leiden_from(&graph, &cfg, &prior);
                    carry_over_ids(&mut communities, &prior_communities);
                    communities
                }
                None => hierarchical_leiden(&graph, &cfg),
            };
        communities.sort_by_key(|c| (c.level, c.id));

        // The data's date: the newest document's creation date (deterministic,
        // unlike the run date GraphRAG uses).
        let period = strings(docs, "documents", "creation_date")?
            .iter()
            .map(|d| d.get(..10).unwrap_or(d))
            .max()
            .unwrap_or("")
            .to_string();
        // Relationships with both ends in the same community, per community.
        let mut at_level: HashMap<(usize, usize), usize> = HashMap::new();
        for (ci, c) in communities.iter().enumerate() {
            for &n in &c.nodes {
                at_level.insert((c.level, n), ci);
            }
        }
        let levels: BTreeSet<usize> = communities.iter().map(|c| c.level).collect();
        let mut inside: Vec<Vec<String>> = vec![Vec::new(); communities.len()];
        for (r, ends) in rel_ends.iter().enumerate() {
            let Some((a, b)) = *ends else { continue };
            for &level in &levels {
                match (at_level.get(&(level, a)), at_level.get(&(level, b))) {
                    (Some(ca), Some(cb)) if ca == cb => inside[*ca].push(rel_ids[r].to_string()),
                    _ => {}
                }
            }
        }
        let mut rows = CommunityRows::default();
        for (c, inside) in communities.iter().zip(inside) {
            let mut units: Vec<&str> = Vec::new();
            let mut seen = BTreeSet::new();
            for &n in &c.nodes {
                for u in &entity_units[n] {
                    if seen.insert(u.as_str()) {
                        units.push(u);
                    }
                }
            }
            rows.id.push(stable_uuid("community", &[&c.id.to_string()]));
            rows.community.push(c.id as i64);
            rows.level.push(c.level as i64);
            rows.parent.push(c.parent.map(|p| p as i64).unwrap_or(-1));
            rows.children.push(c.children.iter().map(|&x| x as i64).collect());
            rows.entity_ids.push(c.nodes.iter().map(|&n| entity_ids[n].to_string()).collect());
            rows.relationship_ids.push(inside);
            rows.text_unit_ids.push(units.iter().map(|s| s.to_string()).collect());
            rows.size.push(c.nodes.len() as i64);
        }
        let n = rows.id.len();
        let table = RecordBatch::try_new(
            schema::communities(),
            vec![
                schema::text_col(&rows.id),
                schema::int_col(rows.community.iter().copied()),
                schema::int_col(rows.community.iter().copied()),
                schema::int_col(rows.level),
                schema::int_col(rows.parent),
                schema::int_list_col(rows.children),
                schema::text_col(rows.community.iter().map(|c| format!("Community {c}"))),
                schema::id_list_col(rows.entity_ids),
                schema::id_list_col(rows.relationship_ids),
                schema::id_list_col(rows.text_unit_ids),
                schema::text_col(std::iter::repeat_n(period.as_str(), n)),
                schema::int_col(rows.size),
            ],
        )?;
        Ok(vec![table])
    }
}

#[derive(Default)]
struct CommunityRows {
    id: Vec<String>,
    community: Vec<i64>,
    level: Vec<i64>,
    parent: Vec<i64>,
    children: Vec<Vec<i64>>,
    entity_ids: Vec<Vec<String>>,
    relationship_ids: Vec<Vec<String>>,
    text_unit_ids: Vec<Vec<String>>,
    size: Vec<i64>,
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
    edges_now: &Adjacency,
) -> anyhow::Result<Option<(PriorClustering, Vec<PriorCommunity>)>> {
    let Some(previous) = ctx.previous() else { return Ok(None) };
    let (Some(comms), Some(rels)) = (previous.table("communities")?, previous.table("relationships")?) else {
        return Ok(None);
    };
    let node_of_id: HashMap<&str, usize> = entity_ids.iter().enumerate().map(|(i, id)| (*id, i)).collect();
    let (levels, ids) = (ints(&comms, "communities", "level")?, ints(&comms, "communities", "community")?);
    let members = string_lists(&comms, "communities", "entity_ids")?;
    let n = entity_ids.len();
    let depth = levels.iter().map(|&l| l as usize + 1).max().unwrap_or(0);
    let mut prior = PriorClustering { levels: vec![vec![None; n]; depth], changed: vec![false; n] };
    let mut prior_communities = Vec::with_capacity(comms.num_rows());
    for ((&level, &id), members) in levels.iter().zip(&ids).zip(&members) {
        let nodes: Vec<usize> = members.iter().filter_map(|m| node_of_id.get(m.as_str()).copied()).collect();
        for &v in &nodes {
            prior.levels[level as usize][v] = Some(id as usize);
        }
        prior_communities.push(PriorCommunity { id: id as usize, level: level as usize, nodes, size: members.len() });
    }
    let (sources, targets) = (strings(&rels, "relationships", "source")?, strings(&rels, "relationships", "target")?);
    let edges_then = rels_by_end(&sources, &targets, &floats(&rels, "relationships", "weight")?);
    for (title, &v) in node_of_title {
        prior.changed[v] = edges_now.get(title) != edges_then.get(title);
    }
    Ok(Some((prior, prior_communities)))
}
