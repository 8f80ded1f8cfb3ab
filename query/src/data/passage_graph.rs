//! The graph that graph-walk retrieval ranks text units on (HippoRAG 2's
//! design): one node per entity and one per text unit; an edge of weight 1
//! between a unit and each entity it lists (the entities' `text_unit_ids`),
//! and an edge between the two ends of each relationship, weighted by the
//! relationship's weight; with `ppr_search.title_edge_weight` the edge
//! between a unit and the entity its document's title names weighs that
//! much. Built once per index; entity PageRank (over the
//! entity–entity edges alone, as RAGFlow ranks entities) is computed when
//! first asked for.

use std::collections::HashMap;
use std::sync::OnceLock;

use graphrag_operations::lexical::Bm25Index;
use graphrag_operations::pagerank::{WeightedGraph, MAX_ITERATIONS, TOLERANCE};

use super::{Graph, TextUnits, UnitDocuments};
use crate::context::title_key;

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
    /// Text unit rows by the [`title_key`] of each name of their document's
    /// title ([`title_names`]); empty without titles.
    pub units_by_title: HashMap<String, Vec<usize>>,
    /// Words of the longest key of `units_by_title`.
    pub max_title_words: usize,
}

/// A relationship weight as an edge weight: missing or nonsense weights count 1.
fn edge_weight(w: f64) -> f64 {
    if w.is_finite() && w > 0.0 {
        w
    } else {
        1.0
    }
}

/// The (entity, unit row) pairs, sorted, where the entity's name is the
/// title of the unit's document (one of its [`title_names`], keyed as in
/// `units_by_title`) and the entity lists the unit.
fn title_entities(
    g: &Graph,
    units_by_title: &HashMap<String, Vec<usize>>,
    entity_units: &[Vec<u32>],
) -> Vec<(u32, u32)> {
    let mut out = Vec::new();
    for (key, rows) in units_by_title {
        for &e in g.entity_by_key.get(key).into_iter().flatten() {
            for &row in rows {
                if entity_units[e].binary_search(&(row as u32)).is_ok() {
                    out.push((e as u32, row as u32));
                }
            }
        }
    }
    out.sort_unstable();
    out.dedup();
    out
}

/// Text unit rows by the [`title_key`] of each name of their document's
/// title (the whole title, or the title without a trailing "(…)"
/// disambiguation or after its first comma: "Charles III of Spain", "Get
/// Carter (1971 film)", "Gmina Ryki, Lublin Voivodeship"), and the words of
/// the longest key.
fn units_by_title(units: &TextUnits, docs: &UnitDocuments) -> (HashMap<String, Vec<usize>>, usize) {
    let mut by_title: HashMap<String, Vec<usize>> = HashMap::new();
    let mut max_words = 0;
    for (row, hrid) in units.hrid.iter().enumerate() {
        let Some(title) = docs.title_of_unit.get(hrid) else { continue };
        for name in title_names(title) {
            let key = title_key(name);
            if !key.is_empty() {
                max_words = max_words.max(key.split(' ').count());
                let rows = by_title.entry(key).or_default();
                // Rows come in order: a row already listed is the last.
                if rows.last() != Some(&row) {
                    rows.push(row);
                }
            }
        }
    }
    (by_title, max_words)
}

/// The names a document title gives its subject: the title, the title
/// without a trailing parenthesis, and the part before its first comma.
pub fn title_names(title: &str) -> Vec<&str> {
    let mut names = vec![title.trim()];
    if let Some(open) = title.rfind('(') {
        if title.trim_end().ends_with(')') {
            names.push(title[..open].trim());
        }
    }
    if let Some(comma) = title.find(',') {
        names.push(title[..comma].trim());
    }
    names.retain(|n| !n.is_empty());
    names.dedup();
    names
}

impl PassageGraph {
    /// The graph of an index; `docs` (the units' document titles) and
    /// `title_weight` weigh the title edges ([`title_entities`]).
    pub fn build(g: &Graph, units: &TextUnits, docs: Option<&UnitDocuments>, title_weight: f64) -> PassageGraph {
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
        let (by_title, max_title_words) = docs.map(|docs| units_by_title(units, docs)).unwrap_or_default();
        let titled = if title_weight != 1.0 { title_entities(g, &by_title, &entity_units) } else { Vec::new() };
        let mut pg = PassageGraph::from_lists(entity_units, units.hrid.len(), entity_edges, &titled, title_weight);
        pg.units_by_title = by_title;
        pg.max_title_words = max_title_words;
        pg
    }

    /// The graph of `units` text unit rows and one entity per list of
    /// `entity_units` (each entity's sorted, distinct rows), with the
    /// `entity_edges` (source, target, weight) between entities.
    /// An edge between a unit and an entity of `titled` (entity, unit row)
    /// weighs `title_weight`, the others 1.
    pub fn from_lists(
        entity_units: Vec<Vec<u32>>,
        units: usize,
        entity_edges: Vec<(u32, u32, f64)>,
        titled: &[(u32, u32)],
        title_weight: f64,
    ) -> PassageGraph {
        let entities = entity_units.len();
        let mut edges = entity_edges.clone();
        for (e, rows) in entity_units.iter().enumerate() {
            edges.extend(rows.iter().map(|&r| {
                let w = if titled.binary_search(&(e as u32, r)).is_ok() { title_weight } else { 1.0 };
                (e as u32, (entities + r as usize) as u32, w)
            }));
        }
        let graph = WeightedGraph::new(entities + units, &edges);
        PassageGraph {
            graph,
            entities,
            entity_units,
            entity_edges,
            entity_pagerank: OnceLock::new(),
            units_by_title: HashMap::new(),
            max_title_words: 0,
        }
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

/// The text units that mention an entity named `name` listed in `own`
/// units, for its specificity (`methods::ppr::specificity`): at least the units whose text holds all
/// of its words (in any case). The fast graph's entities are the extractor's capitalised
/// phrases, so a common word capitalised in two units (FILM, SIMILARLY,
/// NATIVE PLACE) lists two units and looked as rare as a name.
pub fn mention_units(own: usize, name: &str, lexical: &Bm25Index) -> usize {
    lexical.documents_with_all_terms(name).map_or(own, |df| df.max(own))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_title_names_its_subject_with_and_without_its_qualifiers() {
        assert_eq!(title_names("Get Carter"), ["Get Carter"]);
        assert_eq!(title_names("Ranganath (actor)"), ["Ranganath (actor)", "Ranganath"]);
        assert_eq!(
            title_names("Gmina Stężyca, Lublin Voivodeship"),
            ["Gmina Stężyca, Lublin Voivodeship", "Gmina Stężyca"]
        );
        assert_eq!(title_names("(disambiguation)"), ["(disambiguation)"]);
        assert!(title_names("  ").is_empty());
    }

    #[test]
    fn units_are_found_by_each_name_of_their_documents_title_once() {
        let units = TextUnits {
            hrid: vec![1, 2, 3],
            id: vec!["a".into(), "b".into(), "c".into()],
            text: vec![String::new(); 3],
            n_tokens: vec![0; 3],
            by_id: HashMap::new(),
        };
        let docs = UnitDocuments {
            title_of_unit: HashMap::from([
                (1, "Get Carter (1971 film)".to_string()),
                (2, "Get Carter (1971 film)".to_string()),
                (3, "Carter, Get".to_string()),
            ]),
        };
        let (by_title, max_words) = units_by_title(&units, &docs);
        let rows = |key: &str| by_title.get(key).cloned().unwrap_or_default();
        assert_eq!(rows("get carter 1971 film"), [0, 1]);
        assert_eq!(rows("get carter"), [0, 1]);
        assert_eq!(rows("carter get"), [2]);
        assert_eq!(rows("carter"), [2]);
        assert_eq!(by_title.len(), 4);
        assert_eq!(max_words, 4);
    }

    #[test]
    fn title_edges_weigh_more_than_mentions() {
        // Entity 0 lists units 0 and 1 and titles unit 1.
        let pg = PassageGraph::from_lists(vec![vec![0, 1]], 2, vec![], &[(0, 1)], 4.0);
        let edges: Vec<(usize, f64)> = pg.graph.neighbours(0).collect();
        assert_eq!(edges, [(pg.unit_node(0), 1.0), (pg.unit_node(1), 4.0)]);
    }

    #[test]
    fn a_common_word_found_capitalised_is_not_taken_for_a_rare_name() {
        let lexical = Bm25Index::of_texts([
            "Get Carter is a 1971 British crime film.",
            "Film director Hugo Fregonese was born in Mendoza.",
            "The film was directed by Marco Ferreri.",
            "A film by Laurent Tirard.",
        ]);
        // FILM is an entity of the two units that capitalise it; the word is in all four.
        assert_eq!(mention_units(2, "FILM", &lexical), 4);
        assert_eq!(mention_units(1, "MARCO FERRERI", &lexical), 1);
        // Never fewer than the units the entity lists (an alias, another spelling).
        assert_eq!(mention_units(3, "MARCO FERRERI", &lexical), 3);
        assert_eq!(mention_units(2, "ÆTHELRED", &lexical), 2, "no word indexed: its own units");
    }
}
