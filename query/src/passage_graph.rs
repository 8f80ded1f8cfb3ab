//! The graph that graph-walk retrieval ranks text units on (HippoRAG 2's
//! design): one node per entity and one per text unit; an edge of weight 1
//! between a unit and each entity it lists (the entities' `text_unit_ids`),
//! and an edge between the two ends of each relationship, weighted by the
//! relationship's weight. Built once per index; entity PageRank (over the
//! entity–entity edges alone, as RAGFlow ranks entities) is computed when
//! first asked for.

use std::sync::OnceLock;

use graphrag_operations::pagerank::{WeightedGraph, MAX_ITERATIONS, TOLERANCE};

use crate::data::{Graph, TextUnits};

/// PageRank's usual damping, for the entity ranking (RAGFlow uses networkx's default).
const ENTITY_PAGERANK_DAMPING: f64 = 0.85;

pub struct PassageGraph {
    /// Nodes `0..entities` are the graph's entities, then one per text unit row.
    pub graph: WeightedGraph,
    pub entities: usize,
    /// Text unit rows of each entity.
    pub entity_units: Vec<Vec<u32>>,
    /// (source, target, weight) of each relationship with both ends known.
    entity_edges: Vec<(u32, u32, f64)>,
    entity_pagerank: OnceLock<Vec<f64>>,
}

/// A relationship weight as an edge weight: missing or nonsense weights count 1.
fn edge_weight(w: f64) -> f64 {
    if w.is_finite() && w > 0.0 {
        w
    } else {
        1.0
    }
}

impl PassageGraph {
    pub fn build(g: &Graph, units: &TextUnits) -> PassageGraph {
        let row_of: Vec<Option<u32>> = g.unit_ids.iter().map(|id| units.by_id.get(id).map(|&r| r as u32)).collect();
        let entity_units: Vec<Vec<u32>> = g
            .entity_units
            .iter()
            .map(|list| {
                let mut rows: Vec<u32> = list.iter().filter_map(|&u| row_of[u as usize]).collect();
                rows.sort_unstable();
                rows.dedup();
                rows
            })
            .collect();
        let entity_edges: Vec<(u32, u32, f64)> =
            g.ends.iter().zip(&g.weight).filter_map(|(&(s, t), &w)| Some((s?, t?, edge_weight(w)))).collect();
        PassageGraph::from_lists(entity_units, units.hrid.len(), entity_edges)
    }

    /// The graph of `units` text unit rows and one entity per list of
    /// `entity_units` (each entity's sorted, distinct rows), with the
    /// `entity_edges` (source, target, weight) between entities.
    pub fn from_lists(entity_units: Vec<Vec<u32>>, units: usize, entity_edges: Vec<(u32, u32, f64)>) -> PassageGraph {
        let entities = entity_units.len();
        let mut edges = entity_edges.clone();
        for (e, rows) in entity_units.iter().enumerate() {
            edges.extend(rows.iter().map(|&r| (e as u32, (entities + r as usize) as u32, 1.0)));
        }
        let graph = WeightedGraph::new(entities + units, &edges);
        PassageGraph { graph, entities, entity_units, entity_edges, entity_pagerank: OnceLock::new() }
    }

    /// The node of a text unit row.
    pub fn unit_node(&self, row: usize) -> usize {
        self.entities + row
    }

    /// Text unit rows, one per unit node.
    pub fn units(&self) -> usize {
        self.graph.nodes() - self.entities
    }

    /// PageRank of each entity on the entity–entity edges (damping 0.85).
    pub fn entity_pagerank(&self) -> &[f64] {
        self.entity_pagerank.get_or_init(|| {
            WeightedGraph::new(self.entities, &self.entity_edges).pagerank(
                ENTITY_PAGERANK_DAMPING,
                TOLERANCE,
                MAX_ITERATIONS,
            )
        })
    }
}
