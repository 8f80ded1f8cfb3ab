//! The user's edits of the graph (LightRAG's entity and relation create,
//! edit, delete and merge), applied in order to the final entities and
//! relationships of every run, so that an index or update keeps them.
//! Names match titles ignoring case and spacing. An edit whose entity or
//! relationship is not in the graph (its documents were removed, or it is
//! not extracted yet) changes nothing and is reported.

use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
/// Written `{action: edit_entity, name: …, …}` (an internally tagged enum).
#[serde(tag = "action", rename_all = "snake_case", deny_unknown_fields)]
pub enum GraphEdit {
    EditEntity {
        name: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        rename: Option<String>,
        #[serde(default, rename = "type", skip_serializing_if = "Option::is_none")]
        entity_type: Option<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        description: Option<String>,
    },
    CreateEntity {
        name: String,
        #[serde(default, rename = "type")]
        entity_type: String,
        #[serde(default)]
        description: String,
    },
    DeleteEntity {
        name: String,
    },
    /// Every entity of `from` becomes `into` (LightRAG's merge): text units
    /// and descriptions joined, relationships re-pointed.
    MergeEntities {
        from: Vec<String>,
        into: String,
    },
    EditRelationship {
        source: String,
        target: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        description: Option<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        weight: Option<f64>,
    },
    CreateRelationship {
        source: String,
        target: String,
        #[serde(default)]
        description: String,
        #[serde(default = "one")]
        weight: f64,
    },
    DeleteRelationship {
        source: String,
        target: String,
    },
}

fn one() -> f64 {
    1.0
}

#[derive(Debug, Clone, PartialEq)]
pub struct Entity {
    pub title: String,
    pub entity_type: String,
    pub description: String,
    pub text_unit_ids: Vec<String>,
    pub frequency: i64,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Relationship {
    pub source: String,
    pub target: String,
    pub description: String,
    pub weight: f64,
    pub text_unit_ids: Vec<String>,
}

/// How names meet titles: upper case, single spaces (titles are upper case).
pub fn name_key(name: &str) -> String {
    name.split_whitespace().map(str::to_uppercase).collect::<Vec<_>>().join(" ")
}

/// A new entity's title: as entity extraction writes titles.
fn title(name: &str) -> String {
    name_key(name)
}

fn find(entities: &[Entity], name: &str) -> Option<usize> {
    let key = name_key(name);
    entities.iter().position(|e| name_key(&e.title) == key)
}

fn pair(r: &Relationship, a: &str, b: &str) -> bool {
    let (s, t) = (name_key(&r.source), name_key(&r.target));
    let (a, b) = (name_key(a), name_key(b));
    (s == a && t == b) || (s == b && t == a)
}

fn union(into: &mut Vec<String>, more: &[String]) {
    for u in more {
        if !into.contains(u) {
            into.push(u.clone());
        }
    }
}

fn join(a: &str, b: &str) -> String {
    match (a.is_empty(), b.is_empty() || a.contains(b)) {
        (true, _) => b.to_string(),
        (false, true) => a.to_string(),
        (false, false) => format!("{a}\n{b}"),
    }
}

/// Relationships with the same pair (either orientation) become one;
/// self-loops are dropped (after a rename or a merge).
fn merge_parallel(rels: &mut Vec<Relationship>) {
    let mut out: Vec<Relationship> = Vec::with_capacity(rels.len());
    for r in rels.drain(..) {
        if name_key(&r.source) == name_key(&r.target) {
            continue;
        }
        match out.iter_mut().find(|o| pair(o, &r.source, &r.target)) {
            Some(o) => {
                o.description = join(&o.description, &r.description);
                o.weight += r.weight;
                union(&mut o.text_unit_ids, &r.text_unit_ids);
            }
            None => out.push(r),
        }
    }
    *rels = out;
}

fn rename_in(rels: &mut [Relationship], from: &str, to: &str) {
    let key = name_key(from);
    for r in rels {
        if name_key(&r.source) == key {
            r.source = to.to_string();
        }
        if name_key(&r.target) == key {
            r.target = to.to_string();
        }
    }
}

/// Applies `edits` in order; returns one note per edit that changed
/// nothing (what was missing).
pub fn apply(edits: &[GraphEdit], entities: &mut Vec<Entity>, rels: &mut Vec<Relationship>) -> Vec<String> {
    let mut notes = Vec::new();
    for edit in edits {
        match edit {
            GraphEdit::EditEntity { name, rename, entity_type, description } => {
                let Some(i) = find(entities, name) else {
                    notes.push(format!("edit_entity: no entity `{name}`"));
                    continue;
                };
                if let Some(t) = entity_type {
                    entities[i].entity_type = t.clone();
                }
                if let Some(d) = description {
                    entities[i].description = d.clone();
                }
                if let Some(new) = rename.as_deref().filter(|n| name_key(n) != name_key(name)) {
                    let new = title(new);
                    let old = entities[i].title.clone();
                    match find(entities, &new) {
                        // Renamed onto an existing entity: the two are merged.
                        Some(j) => merge_into(entities, rels, &[old], j),
                        None => {
                            entities[i].title = new.clone();
                            rename_in(rels, &old, &new);
                        }
                    }
                    merge_parallel(rels);
                }
            }
            GraphEdit::CreateEntity { name, entity_type, description } => match find(entities, name) {
                Some(i) => {
                    entities[i].entity_type = entity_type.clone();
                    entities[i].description = description.clone();
                }
                None => entities.push(Entity {
                    title: title(name),
                    entity_type: entity_type.clone(),
                    description: description.clone(),
                    text_unit_ids: Vec::new(),
                    frequency: 0,
                }),
            },
            GraphEdit::DeleteEntity { name } => {
                let Some(i) = find(entities, name) else {
                    notes.push(format!("delete_entity: no entity `{name}`"));
                    continue;
                };
                let key = name_key(&entities[i].title);
                entities.remove(i);
                rels.retain(|r| name_key(&r.source) != key && name_key(&r.target) != key);
            }
            GraphEdit::MergeEntities { from, into } => {
                let missing: Vec<String> =
                    from.iter().filter(|f| find(entities, f).is_none()).map(|m| format!("`{m}`")).collect();
                if !missing.is_empty() {
                    notes.push(format!("merge_entities: no entity {}", missing.join(", ")));
                }
                let target = match find(entities, into) {
                    Some(j) => j,
                    None => {
                        let Some(first) = from.iter().find_map(|f| find(entities, f)) else { continue };
                        // Merged into a new name: the first source takes it.
                        let old = entities[first].title.clone();
                        entities[first].title = title(into);
                        rename_in(rels, &old, &entities[first].title.clone());
                        first
                    }
                };
                merge_into(entities, rels, from, target);
                merge_parallel(rels);
            }
            GraphEdit::EditRelationship { source, target, description, weight } => {
                match rels.iter_mut().find(|r| pair(r, source, target)) {
                    Some(r) => {
                        if let Some(d) = description {
                            r.description = d.clone();
                        }
                        if let Some(w) = weight {
                            r.weight = *w;
                        }
                    }
                    None => notes.push(format!("edit_relationship: no relationship `{source}` - `{target}`")),
                }
            }
            GraphEdit::CreateRelationship { source, target, description, weight } => {
                let (Some(s), Some(t)) = (find(entities, source), find(entities, target)) else {
                    notes.push(format!("create_relationship: `{source}` or `{target}` is no entity"));
                    continue;
                };
                let (s, t) = (entities[s].title.clone(), entities[t].title.clone());
                match rels.iter_mut().find(|r| pair(r, &s, &t)) {
                    Some(r) => {
                        r.description = description.clone();
                        r.weight = *weight;
                    }
                    None => rels.push(Relationship {
                        source: s,
                        target: t,
                        description: description.clone(),
                        weight: *weight,
                        text_unit_ids: Vec::new(),
                    }),
                }
            }
            GraphEdit::DeleteRelationship { source, target } => {
                let before = rels.len();
                rels.retain(|r| !pair(r, source, target));
                if rels.len() == before {
                    notes.push(format!("delete_relationship: no relationship `{source}` - `{target}`"));
                }
            }
        }
    }
    notes
}

/// Folds the entities named `from` (other than `target` itself) into
/// `entities[target]`, re-pointing their relationships.
fn merge_into(entities: &mut Vec<Entity>, rels: &mut [Relationship], from: &[String], target: usize) {
    let into_title = entities[target].title.clone();
    let keys: Vec<String> = from.iter().map(|f| name_key(f)).filter(|k| *k != name_key(&into_title)).collect();
    let mut merged = entities[target].clone();
    for e in entities.iter().filter(|e| keys.contains(&name_key(&e.title))) {
        merged.description = join(&merged.description, &e.description);
        union(&mut merged.text_unit_ids, &e.text_unit_ids);
        merged.frequency += e.frequency;
        if merged.entity_type.is_empty() {
            merged.entity_type = e.entity_type.clone();
        }
    }
    for k in &keys {
        rename_in(rels, k, &into_title);
    }
    entities[target] = merged;
    entities.retain(|e| !keys.contains(&name_key(&e.title)));
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entity(t: &str, units: &[&str]) -> Entity {
        Entity {
            title: t.into(),
            entity_type: "PERSON".into(),
            description: format!("{t} desc"),
            text_unit_ids: units.iter().map(|u| u.to_string()).collect(),
            frequency: 1,
        }
    }

    fn rel(s: &str, t: &str) -> Relationship {
        Relationship {
            source: s.into(),
            target: t.into(),
            description: format!("{s}-{t}"),
            weight: 1.0,
            text_unit_ids: vec!["u1".into()],
        }
    }

    fn graph() -> (Vec<Entity>, Vec<Relationship>) {
        (
            vec![entity("SCROOGE", &["u1"]), entity("EBENEZER", &["u2"]), entity("MARLEY", &["u1"])],
            vec![rel("SCROOGE", "MARLEY"), rel("EBENEZER", "MARLEY"), rel("SCROOGE", "EBENEZER")],
        )
    }

    #[test]
    fn edits_apply_in_order_and_missing_names_are_reported() {
        let (mut es, mut rs) = graph();
        let edits = vec![
            GraphEdit::EditEntity {
                name: "scrooge".into(),
                rename: None,
                entity_type: Some("MISER".into()),
                description: Some("A miser.".into()),
            },
            GraphEdit::CreateEntity { name: "Fred".into(), entity_type: "PERSON".into(), description: "Nephew".into() },
            GraphEdit::CreateRelationship {
                source: "fred".into(),
                target: "Scrooge".into(),
                description: "uncle".into(),
                weight: 2.0,
            },
            GraphEdit::EditRelationship {
                source: "MARLEY".into(),
                target: "SCROOGE".into(),
                description: Some("partners".into()),
                weight: None,
            },
            GraphEdit::DeleteRelationship { source: "EBENEZER".into(), target: "MARLEY".into() },
            GraphEdit::DeleteEntity { name: "nobody".into() },
        ];
        let notes = apply(&edits, &mut es, &mut rs);
        assert_eq!(notes, ["delete_entity: no entity `nobody`"]);
        assert_eq!(es[0].entity_type, "MISER");
        assert_eq!(es[0].description, "A miser.");
        assert_eq!(es[3].title, "FRED");
        assert!(rs.iter().any(|r| r.source == "FRED" && r.target == "SCROOGE" && r.weight == 2.0));
        assert_eq!(rs.iter().find(|r| pair(r, "SCROOGE", "MARLEY")).unwrap().description, "partners");
        assert!(!rs.iter().any(|r| pair(r, "EBENEZER", "MARLEY")));
    }

    #[test]
    fn merges_and_renames_fold_entities_and_relationships() {
        let (mut es, mut rs) = graph();
        let merge = GraphEdit::MergeEntities { from: vec!["EBENEZER".into()], into: "SCROOGE".into() };
        assert!(apply(&[merge], &mut es, &mut rs).is_empty());
        assert_eq!(es.len(), 2);
        assert_eq!(es[0].text_unit_ids, ["u1", "u2"]);
        assert_eq!(es[0].description, "SCROOGE desc\nEBENEZER desc");
        // SCROOGE-MARLEY and EBENEZER-MARLEY became one; the self-loop went.
        assert_eq!(rs.len(), 1);
        assert_eq!(rs[0].weight, 2.0);
        let rename = GraphEdit::EditEntity {
            name: "marley".into(),
            rename: Some("Jacob Marley".into()),
            entity_type: None,
            description: None,
        };
        apply(std::slice::from_ref(&rename), &mut es, &mut rs);
        assert_eq!(es[1].title, "JACOB MARLEY");
        assert_eq!(rs[0].target, "JACOB MARLEY");
        // Applying the same edits again changes nothing more (an update re-applies them).
        let before = (es.clone(), rs.clone());
        let notes = apply(&[rename], &mut es, &mut rs);
        assert_eq!((es, rs), before);
        assert_eq!(notes, ["edit_entity: no entity `marley`"]);
    }
}
