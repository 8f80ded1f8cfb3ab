//! Merging per-chunk extractions into one graph (GraphRAG's merge step in
//! `extract_graph`): entities by normalised title (and type, optionally),
//! relationships by their unordered pair of endpoints.

use std::collections::{HashMap, HashSet};

use crate::extraction_parser::{normalize_name, Extraction};

#[derive(Debug, Clone, PartialEq)]
pub struct MergedEntity {
    /// [`normalize_name`] of the extracted names.
    pub title: String,
    /// With `by_type`: the merge key's type. Otherwise the most frequent
    /// non-empty type (ties: first seen); empty when none was given.
    pub entity_type: String,
    /// Distinct non-empty descriptions, in first-seen order.
    pub descriptions: Vec<String>,
    /// Distinct, in first-seen order.
    pub text_unit_ids: Vec<String>,
    /// Where each description came from: (index into `descriptions`, index
    /// into `text_unit_ids`) for every text unit that gave it, in order. An
    /// update tells the descriptions new text units brought by these.
    pub description_sources: Vec<(u32, u32)>,
    /// Number of distinct text units.
    pub frequency: u32,
}

#[derive(Debug, Clone, PartialEq)]
pub struct MergedRelationship {
    /// Orientation of the first occurrence of the pair.
    pub source: String,
    pub target: String,
    /// Distinct non-empty descriptions, in first-seen order.
    pub descriptions: Vec<String>,
    /// Sum of the strengths of all occurrences (in either orientation).
    pub weight: f64,
    /// Distinct, in first-seen order.
    pub text_unit_ids: Vec<String>,
    /// As [`MergedEntity::description_sources`].
    pub description_sources: Vec<(u32, u32)>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct MergeOptions {
    /// Merge key includes the entity type (GraphRAG's own grouping). Default
    /// false: title only, type = most frequent.
    pub by_type: bool,
}

/// Distinct values in first-seen order.
#[derive(Default)]
struct Ordered {
    items: Vec<String>,
    seen: HashMap<String, u32>,
}

impl Ordered {
    /// Adds `s` unless it is empty; its index among the items, if kept.
    fn add(&mut self, s: &str) -> Option<u32> {
        if s.is_empty() {
            return None;
        }
        if let Some(&i) = self.seen.get(s) {
            return Some(i);
        }
        let i = self.items.len() as u32;
        self.seen.insert(s.to_string(), i);
        self.items.push(s.to_string());
        Some(i)
    }
}

/// Records that description `d` came from text unit `u`, once. A text unit's
/// records are merged one after another, so a repeat can only be among the
/// trailing pairs of the same unit.
fn add_source(sources: &mut Vec<(u32, u32)>, d: Option<u32>, u: Option<u32>) {
    let (Some(d), Some(u)) = (d, u) else { return };
    if !sources.iter().rev().take_while(|(_, su)| *su == u).any(|&(sd, _)| sd == d) {
        sources.push((d, u));
    }
}

struct EntityAcc {
    title: String,
    key_type: Option<String>,
    /// (type, votes), in first-seen order.
    types: Vec<(String, u32)>,
    descriptions: Ordered,
    units: Ordered,
    sources: Vec<(u32, u32)>,
}

struct RelAcc {
    source: String,
    target: String,
    descriptions: Ordered,
    weight: f64,
    units: Ordered,
    sources: Vec<(u32, u32)>,
}

/// Merges the extractions of all text units (`(text_unit_id, extraction)`,
/// in text-unit order).
///
/// - Entities are keyed by [`normalize_name`] of the name (plus the
///   upper-cased, trimmed type when `by_type`); records with an empty name are
///   skipped.
/// - Relationships are keyed by the unordered pair of normalised endpoints;
///   the first occurrence fixes `source`/`target`, strengths are summed.
///   Self-loops and empty endpoints are skipped.
/// - An endpoint that is no entity's title becomes an entity with an empty
///   type and no description, whose text units are those of the
///   relationships touching it; these come after the extracted entities, in
///   order of first appearance among the merged relationships.
///
/// Output order: first-seen order, so equal input gives equal output.
pub fn merge_extractions(
    units: &[(String, Extraction)],
    opts: &MergeOptions,
) -> (Vec<MergedEntity>, Vec<MergedRelationship>) {
    let mut entities: Vec<EntityAcc> = Vec::new();
    let mut entity_index: HashMap<(String, Option<String>), usize> = HashMap::new();
    let mut titles: HashSet<String> = HashSet::new();

    for (unit, ex) in units {
        for e in &ex.entities {
            let title = normalize_name(&e.name);
            if title.is_empty() {
                continue;
            }
            let etype = normalize_name(&e.entity_type);
            let key_type = opts.by_type.then(|| etype.clone());
            let idx = *entity_index.entry((title.clone(), key_type.clone())).or_insert_with(|| {
                titles.insert(title.clone());
                entities.push(EntityAcc {
                    title,
                    key_type,
                    types: Vec::new(),
                    descriptions: Ordered::default(),
                    units: Ordered::default(),
                    sources: Vec::new(),
                });
                entities.len() - 1
            });
            let acc = &mut entities[idx];
            if !etype.is_empty() {
                match acc.types.iter_mut().find(|(t, _)| *t == etype) {
                    Some((_, n)) => *n += 1,
                    None => acc.types.push((etype, 1)),
                }
            }
            let (d, u) = (acc.descriptions.add(e.description.trim()), acc.units.add(unit));
            add_source(&mut acc.sources, d, u);
        }
    }

    let mut rels: Vec<RelAcc> = Vec::new();
    let mut rel_index: HashMap<(String, String), usize> = HashMap::new();
    for (unit, ex) in units {
        for r in &ex.relationships {
            let source = normalize_name(&r.source);
            let target = normalize_name(&r.target);
            if source.is_empty() || target.is_empty() || source == target {
                continue;
            }
            let key = if source < target { (source.clone(), target.clone()) } else { (target.clone(), source.clone()) };
            let idx = *rel_index.entry(key).or_insert_with(|| {
                rels.push(RelAcc {
                    source,
                    target,
                    descriptions: Ordered::default(),
                    weight: 0.0,
                    units: Ordered::default(),
                    sources: Vec::new(),
                });
                rels.len() - 1
            });
            let acc = &mut rels[idx];
            let d = acc.descriptions.add(r.description.trim());
            if r.strength.is_finite() {
                acc.weight += r.strength;
            }
            let u = acc.units.add(unit);
            add_source(&mut acc.sources, d, u);
        }
    }

    // Endpoints missing from the entities.
    let mut created: Vec<(String, Ordered)> = Vec::new();
    let mut created_index: HashMap<String, usize> = HashMap::new();
    for r in &rels {
        for end in [&r.source, &r.target] {
            if titles.contains(end.as_str()) {
                continue;
            }
            let idx = *created_index.entry(end.clone()).or_insert_with(|| {
                created.push((end.clone(), Ordered::default()));
                created.len() - 1
            });
            for u in &r.units.items {
                created[idx].1.add(u);
            }
        }
    }

    let mut merged: Vec<MergedEntity> = entities
        .into_iter()
        .map(|e| {
            let entity_type = match e.key_type {
                Some(t) => t,
                None => {
                    // Most votes; the first seen wins ties (max_by keeps the last max, so rev).
                    e.types.iter().rev().max_by_key(|(_, n)| *n).map(|(t, _)| t.clone()).unwrap_or_default()
                }
            };
            MergedEntity {
                title: e.title,
                entity_type,
                frequency: e.units.items.len() as u32,
                descriptions: e.descriptions.items,
                text_unit_ids: e.units.items,
                description_sources: e.sources,
            }
        })
        .collect();
    merged.extend(created.into_iter().map(|(title, units)| MergedEntity {
        title,
        entity_type: String::new(),
        descriptions: Vec::new(),
        frequency: units.items.len() as u32,
        text_unit_ids: units.items,
        description_sources: Vec::new(),
    }));
    let relationships = rels
        .into_iter()
        .map(|r| MergedRelationship {
            source: r.source,
            target: r.target,
            descriptions: r.descriptions.items,
            weight: r.weight,
            text_unit_ids: r.units.items,
            description_sources: r.sources,
        })
        .collect();
    (merged, relationships)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::extraction_parser::{EntityRecord, RelationshipRecord};

    fn ent(name: &str, t: &str, d: &str) -> EntityRecord {
        EntityRecord { name: name.into(), entity_type: t.into(), description: d.into() }
    }

    fn rel(s: &str, t: &str, d: &str, w: f64) -> RelationshipRecord {
        RelationshipRecord { source: s.into(), target: t.into(), description: d.into(), strength: w }
    }

    fn unit(id: &str, entities: Vec<EntityRecord>, relationships: Vec<RelationshipRecord>) -> (String, Extraction) {
        (id.into(), Extraction { entities, relationships, ..Extraction::default() })
    }

    fn sample() -> Vec<(String, Extraction)> {
        vec![
            unit(
                "t1",
                vec![
                    ent("Ebenezer Scrooge", "PERSON", "A miser"),
                    ent("BOB CRATCHIT", "PERSON", "Scrooge's clerk"),
                    ent("LONDON", "GEO", "A city"),
                ],
                vec![
                    rel("BOB CRATCHIT", "EBENEZER SCROOGE", "Bob works for Scrooge", 8.0),
                    rel("EBENEZER SCROOGE", "LONDON", "Scrooge lives in London", 3.0),
                ],
            ),
            unit(
                "t2",
                vec![
                    ent("EBENEZER SCROOGE", "PERSON", "A miser"),
                    ent(" ebenezer  scrooge ", "ORGANIZATION", "Senior partner of Scrooge and Marley"),
                    ent("TINY TIM", "PERSON", "Bob's son"),
                ],
                vec![
                    rel("EBENEZER SCROOGE", "bob cratchit", "Scrooge pays Bob fifteen shillings", 6.0),
                    rel("EBENEZER SCROOGE", "JACOB MARLEY", "Former partners", 9.0),
                ],
            ),
            unit(
                "t3",
                vec![ent("\"Bob Cratchit\"", "PERSON", "Scrooge's clerk"), ent("LONDON", "", "")],
                vec![
                    rel("BOB CRATCHIT", "EBENEZER SCROOGE", "Bob works for Scrooge", 2.5),
                    rel("TINY TIM", "BOB CRATCHIT", "", 5.0),
                    rel("JACOB MARLEY", "GHOST OF CHRISTMAS PAST", "Marley announces the spirits", 4.0),
                    rel("TINY TIM", "tiny tim", "self loop", 1.0),
                ],
            ),
        ]
    }

    #[test]
    fn duplicates_across_chunks_merge() {
        let (ents, _) = merge_extractions(&sample(), &MergeOptions::default());
        let titles: Vec<&str> = ents.iter().map(|e| e.title.as_str()).collect();
        assert_eq!(
            titles,
            ["EBENEZER SCROOGE", "BOB CRATCHIT", "LONDON", "TINY TIM", "JACOB MARLEY", "GHOST OF CHRISTMAS PAST"]
        );
        let scrooge = &ents[0];
        assert_eq!(scrooge.entity_type, "PERSON");
        assert_eq!(scrooge.descriptions, ["A miser", "Senior partner of Scrooge and Marley"]);
        assert_eq!(scrooge.text_unit_ids, ["t1", "t2"]);
        assert_eq!(scrooge.frequency, 2);
        let bob = &ents[1];
        assert_eq!(bob.descriptions, ["Scrooge's clerk"]);
        assert_eq!(bob.text_unit_ids, ["t1", "t3"]);
        // Which text units gave each description (repeats once).
        assert_eq!(scrooge.description_sources, [(0, 0), (0, 1), (1, 1)]);
        assert_eq!(bob.description_sources, [(0, 0), (0, 1)]);
        // An empty type does not vote; an empty description is not kept.
        assert_eq!(ents[2].entity_type, "GEO");
        assert_eq!(ents[2].descriptions, ["A city"]);
        assert_eq!(ents[2].frequency, 2);
    }

    #[test]
    fn type_is_most_frequent_ties_first_seen() {
        let units = vec![
            unit("a", vec![ent("X", "ORGANIZATION", "")], vec![]),
            unit("b", vec![ent("X", "PERSON", "")], vec![]),
            unit("c", vec![ent("X", "person", "")], vec![]),
            unit("d", vec![ent("Y", "GEO", ""), ent("Y", "EVENT", "")], vec![]),
        ];
        let (ents, _) = merge_extractions(&units, &MergeOptions::default());
        assert_eq!(ents[0].entity_type, "PERSON");
        assert_eq!(ents[1].entity_type, "GEO");
        assert_eq!(ents[1].frequency, 1);
    }

    #[test]
    fn relationships_merge_reversed_pairs_and_sum_weights() {
        let (_, rels) = merge_extractions(&sample(), &MergeOptions::default());
        let pairs: Vec<(&str, &str, f64)> =
            rels.iter().map(|r| (r.source.as_str(), r.target.as_str(), r.weight)).collect();
        assert_eq!(
            pairs,
            [
                ("BOB CRATCHIT", "EBENEZER SCROOGE", 16.5),
                ("EBENEZER SCROOGE", "LONDON", 3.0),
                ("EBENEZER SCROOGE", "JACOB MARLEY", 9.0),
                ("TINY TIM", "BOB CRATCHIT", 5.0),
                ("JACOB MARLEY", "GHOST OF CHRISTMAS PAST", 4.0),
            ]
        );
        assert_eq!(rels[0].descriptions, ["Bob works for Scrooge", "Scrooge pays Bob fifteen shillings"]);
        assert_eq!(rels[0].text_unit_ids, ["t1", "t2", "t3"]);
        assert_eq!(rels[0].description_sources, [(0, 0), (1, 1), (0, 2)]);
        assert!(rels[3].descriptions.is_empty());
        assert!(rels[3].description_sources.is_empty(), "an empty description has no source");
    }

    #[test]
    fn missing_endpoints_created() {
        let (ents, rels) = merge_extractions(&sample(), &MergeOptions::default());
        let marley = ents.iter().find(|e| e.title == "JACOB MARLEY").unwrap();
        assert_eq!(marley.entity_type, "");
        assert!(marley.descriptions.is_empty());
        assert_eq!(marley.text_unit_ids, ["t2", "t3"]);
        assert_eq!(marley.frequency, 2);
        let ghost = ents.iter().find(|e| e.title == "GHOST OF CHRISTMAS PAST").unwrap();
        assert_eq!(ghost.text_unit_ids, ["t3"]);
        // Every endpoint is an entity.
        for r in &rels {
            assert!(ents.iter().any(|e| e.title == r.source));
            assert!(ents.iter().any(|e| e.title == r.target));
        }
    }

    #[test]
    fn by_type_keeps_types_apart() {
        let (ents, _) = merge_extractions(&sample(), &MergeOptions { by_type: true });
        let keys: Vec<(&str, &str)> = ents.iter().map(|e| (e.title.as_str(), e.entity_type.as_str())).collect();
        assert_eq!(
            keys,
            [
                ("EBENEZER SCROOGE", "PERSON"),
                ("BOB CRATCHIT", "PERSON"),
                ("LONDON", "GEO"),
                ("EBENEZER SCROOGE", "ORGANIZATION"),
                ("TINY TIM", "PERSON"),
                ("LONDON", ""),
                ("JACOB MARLEY", ""),
                ("GHOST OF CHRISTMAS PAST", ""),
            ]
        );
        assert_eq!(ents[0].text_unit_ids, ["t1", "t2"]);
        assert_eq!(ents[3].descriptions, ["Senior partner of Scrooge and Marley"]);
    }

    #[test]
    fn empty_and_deterministic() {
        assert_eq!(merge_extractions(&[], &MergeOptions::default()), (vec![], vec![]));
        let a = merge_extractions(&sample(), &MergeOptions::default());
        let b = merge_extractions(&sample(), &MergeOptions::default());
        assert_eq!(a, b);
        let units = vec![unit("u", vec![ent("  ", "PERSON", "blank")], vec![rel("", "X", "", 1.0)])];
        assert_eq!(merge_extractions(&units, &MergeOptions::default()), (vec![], vec![]));
    }

    #[test]
    fn parsed_output_merges() {
        use crate::extraction_parser::{parse_graph_records, Delimiters};
        let d = Delimiters::default();
        let a = parse_graph_records(
            "(\"entity\"<|>Scrooge<|>PERSON<|>A miser)##(\"relationship\"<|>Scrooge<|>Marley<|>Partners<|>7)",
            &d,
        );
        let b = parse_graph_records("entity<|#|>Marley<|#|>person<|#|>A ghost\nrelation<|#|>Marley<|#|>Scrooge<|#|>warning<|#|>Marley warns Scrooge", &d);
        let (ents, rels) = merge_extractions(&[("c1".into(), a), ("c2".into(), b)], &MergeOptions::default());
        assert_eq!(ents.len(), 2);
        assert_eq!(ents[1].title, "MARLEY");
        assert_eq!(ents[1].entity_type, "PERSON");
        assert_eq!(rels.len(), 1);
        assert_eq!((rels[0].source.as_str(), rels[0].target.as_str(), rels[0].weight), ("SCROOGE", "MARLEY", 8.0));
        assert_eq!(rels[0].descriptions, ["Partners", "Marley warns Scrooge"]);
    }
}
