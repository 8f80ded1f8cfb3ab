//! Graph edits checked against the published index before they are kept:
//! an edit naming an entity or relationship the graph does not have is
//! refused (as LightRAG raises), rather than kept in graph_edits.yaml, where
//! it would change nothing and be reported at every later update.

use std::collections::HashSet;
use std::path::Path;

use graphrag_engine::store::read_published_table;
use graphrag_engine::table::strings;
use graphrag_operations::graph_edits::name_key;
use graphrag_project::graph_edits::GraphEdit;
use pyo3::prelude::*;

use crate::{graph_edit, published_dir, to_py, GraphragError};

/// The published graph's entity titles and relationship ends, as
/// `name_key`s (the way edits find them).
struct Names {
    entities: HashSet<String>,
    pairs: HashSet<(String, String)>,
}

impl Names {
    fn read(dir: &Path) -> anyhow::Result<Names> {
        let mut names = Names { entities: HashSet::new(), pairs: HashSet::new() };
        if let Some(entities) = read_published_table(dir, "entities")? {
            names.entities = strings(&entities, "entities", "title")?.into_iter().map(name_key).collect();
        }
        if let Some(rels) = read_published_table(dir, "relationships")? {
            let (sources, targets) =
                (strings(&rels, "relationships", "source")?, strings(&rels, "relationships", "target")?);
            names.pairs = sources.into_iter().zip(targets).map(|(s, t)| pair_key(s, t)).collect();
        }
        Ok(names)
    }

    fn has_entity(&self, name: &str) -> bool {
        self.entities.contains(&name_key(name))
    }

    fn has_relationship(&self, source: &str, target: &str) -> bool {
        self.pairs.contains(&pair_key(source, target))
    }

    /// Why `edit` cannot apply to this graph, if it cannot.
    fn problem(&self, edit: &GraphEdit, allow_merge: bool) -> Option<String> {
        let no_entity = |verb: &str, name: &str| Some(format!("{verb}: entity '{name}' does not exist in the index"));
        let no_relationship = |verb: &str, s: &str, t: &str| {
            Some(format!("{verb}: relation from '{s}' to '{t}' does not exist in the index"))
        };
        match edit {
            GraphEdit::EditEntity { name, .. } if !self.has_entity(name) => no_entity("edit_entity", name),
            GraphEdit::EditEntity { name, rename: Some(new), .. }
                if !allow_merge && name_key(new) != name_key(name) && self.has_entity(new) =>
            {
                Some(format!(
                    "edit_entity: entity '{new}' exists already: renaming '{name}' onto it merges the two \
                     (allow_merge=True)"
                ))
            }
            GraphEdit::DeleteEntity { name } if !self.has_entity(name) => no_entity("delete_entity", name),
            GraphEdit::MergeEntities { from, .. } => {
                from.iter().find(|f| !self.has_entity(f)).and_then(|f| no_entity("merge_entities", f))
            }
            GraphEdit::CreateRelationship { source, target, .. } => {
                [source, target].into_iter().find(|n| !self.has_entity(n)).and_then(|n| no_entity("create_relation", n))
            }
            GraphEdit::EditRelationship { source, target, .. } if !self.has_relationship(source, target) => {
                no_relationship("edit_relation", source, target)
            }
            GraphEdit::DeleteRelationship { source, target } if !self.has_relationship(source, target) => {
                no_relationship("delete_relation", source, target)
            }
            _ => None,
        }
    }
}

/// Relationships are undirected to edits (either orientation matches).
fn pair_key(a: &str, b: &str) -> (String, String) {
    let (a, b) = (name_key(a), name_key(b));
    if a <= b {
        (a, b)
    } else {
        (b, a)
    }
}

/// Refuses (`GraphragError`) a graph edit, given in graph_edits.yaml's JSON
/// form, that names an entity or relationship the published index of
/// `root` does not have, or (unless `allow_merge`) renames an entity onto
/// another.
#[pyfunction]
#[pyo3(signature = (root, edit_json, allow_merge = false))]
pub fn check_graph_edit(py: Python<'_>, root: std::path::PathBuf, edit_json: &str, allow_merge: bool) -> PyResult<()> {
    let edit = graph_edit(edit_json)?;
    let dir = published_dir(&root)?;
    let names = py.detach(|| Names::read(&dir)).map_err(|e| to_py(&e))?;
    match names.problem(&edit, allow_merge) {
        Some(problem) => Err(GraphragError::new_err(problem)),
        None => Ok(()),
    }
}

/// The published index's entity titles, sorted (LightRAG's `get_graph_labels`).
#[pyfunction]
pub fn entity_titles(py: Python<'_>, root: std::path::PathBuf) -> PyResult<Vec<String>> {
    let dir = published_dir(&root)?;
    let titles = py.detach(|| -> anyhow::Result<Vec<String>> {
        let Some(entities) = read_published_table(&dir, "entities")? else { return Ok(Vec::new()) };
        let mut titles: Vec<String> = strings(&entities, "entities", "title")?.into_iter().map(String::from).collect();
        titles.sort();
        Ok(titles)
    });
    titles.map_err(|e| to_py(&e))
}
