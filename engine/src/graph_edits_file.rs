//! The project's graph edits file (`graph_edits.yaml`): the entity and
//! relationship edits a user made (through the server's LightRAG graph
//! paths, or by hand), applied in order by `finalize_graph` on every index
//! and update, so that a re-index keeps them (as `aliases.yaml` keeps
//! merges).
//!
//! ```yaml
//! edits:
//!   - {action: edit_entity, name: SCROOGE, type: MISER, description: A miser.}
//!   - {action: create_entity, name: FRED, type: PERSON, description: Scrooge's nephew.}
//!   - {action: merge_entities, from: [EBENEZER], into: SCROOGE}
//!   - {action: create_relationship, source: FRED, target: SCROOGE, description: uncle, weight: 1}
//!   - {action: delete_relationship, source: BOB, target: TIM}
//! ```
//!
//! Errors name the file, line and key: of YAML that does not parse, and of
//! values no edit can mean (an empty entity name; a weight that is not a
//! finite number at least 0, the server's rule for the weights it records).
//!
//! # In detail
//!
//! The user's graph edits (the project's `graph_edits.yaml`: entity and relationship create / edit /
//! delete, entity merges, in order; `engine/src/graph_edits_file.rs` parses it,
//! `operations/src/graph_edits.rs` applies it, `project/src/graph_edits.rs` adds an edit for the server and
//! the Python package) are applied by `finalize_graph` before ids and degrees, and the file's hash is that
//! step's external fingerprint: every index and update keeps them.

use std::path::Path;

use graphrag_operations::graph_edits::GraphEdit;
use serde::{Deserialize, Serialize};

use crate::config_error::ConfigError;
use crate::yaml_lines;

/// Where the project keeps it, relative to its root.
pub const FILE: &str = "graph_edits.yaml";

const HEADER: &str = "# Graph edits: applied in order to the final graph of every index and update\n\
# (graphrag-rs; written by the server's graph editing paths, and editable by hand).\n";

/// The graph edits file: edits applied, in order, to the final graph of
/// every index and update.
#[derive(Debug, Default, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GraphEditsFile {
    /// The edits, in the order they apply.
    #[serde(default)]
    pub edits: Vec<GraphEdit>,
}

/// Parses the file's text; `file` names it in errors.
pub fn parse(text: &str, file: &Path) -> Result<GraphEditsFile, ConfigError> {
    let Some(doc) = serde_yaml_ng::Deserializer::from_str(text).next() else {
        return Ok(GraphEditsFile::default());
    };
    let parsed = match serde_path_to_error::deserialize::<_, Option<GraphEditsFile>>(doc) {
        Ok(parsed) => parsed.unwrap_or_default(),
        Err(e) => return Err(ConfigError::from_yaml(file, e)),
    };
    for (i, edit) in parsed.edits.iter().enumerate() {
        check_edit(edit).map_err(|(key, message)| {
            let path = format!("edits[{i}].{key}");
            ConfigError::new(file, yaml_lines::line_of(text, &path), path, message)
        })?;
    }
    Ok(parsed)
}

/// An edit's values: `Err((key, why))` for an empty entity name or a
/// weight that is not a finite number at least 0 (NaN, -1e308).
fn check_edit(edit: &GraphEdit) -> Result<(), (String, String)> {
    let mut names: Vec<(String, &str)> = Vec::new();
    let mut weight = None;
    match edit {
        GraphEdit::EditEntity { name, rename, .. } => {
            names.push(("name".into(), name));
            names.extend(rename.as_deref().map(|r| ("rename".into(), r)));
        }
        GraphEdit::CreateEntity { name, .. } | GraphEdit::DeleteEntity { name } => names.push(("name".into(), name)),
        GraphEdit::MergeEntities { from, into } => {
            names.extend(from.iter().enumerate().map(|(k, f)| (format!("from[{k}]"), f.as_str())));
            names.push(("into".into(), into));
        }
        GraphEdit::EditRelationship { source, target, weight: w, .. } => {
            names.extend([("source".into(), source.as_str()), ("target".into(), target.as_str())]);
            weight = *w;
        }
        GraphEdit::CreateRelationship { source, target, weight: w, .. } => {
            names.extend([("source".into(), source.as_str()), ("target".into(), target.as_str())]);
            weight = Some(*w);
        }
        GraphEdit::DeleteRelationship { source, target } => {
            names.extend([("source".into(), source.as_str()), ("target".into(), target.as_str())]);
        }
    }
    if let Some((key, _)) = names.into_iter().find(|(_, name)| name.trim().is_empty()) {
        return Err((key, "an entity name must not be empty".into()));
    }
    if let Some(w) = weight.filter(|w| !(w.is_finite() && *w >= 0.0)) {
        return Err(("weight".into(), format!("{w} is not a valid weight: it must be a number at least 0")));
    }
    Ok(())
}

/// The file's text for these edits.
pub fn render(file: &GraphEditsFile) -> anyhow::Result<String> {
    Ok(format!("{HEADER}{}", serde_yaml_ng::to_string(file)?))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_and_errors_name_line_and_key() {
        let text = "edits:\n  - {action: edit_entity, name: SCROOGE, type: MISER}\n  - {action: delete_relationship, source: A, target: B}\n";
        let parsed = parse(text, Path::new(FILE)).unwrap();
        assert_eq!(parsed.edits.len(), 2);
        assert_eq!(parse(&render(&parsed).unwrap(), Path::new(FILE)).unwrap(), parsed);
        assert_eq!(parse("", Path::new(FILE)).unwrap(), GraphEditsFile::default());
        assert_eq!(parse("# none yet\n", Path::new(FILE)).unwrap(), GraphEditsFile::default());
        let e = parse(
            "edits:\n  - {action: edit_entity, name: A}\n  - {action: rename_entity, name: B}\n",
            Path::new(FILE),
        )
        .unwrap_err();
        assert_eq!(e.line, Some(3), "{e}");
        assert!(e.to_string().contains("rename_entity"), "{e}");
        let e = parse("edits:\n  - {action: delete_entity, name: A, colour: red}\n", Path::new(FILE)).unwrap_err();
        assert!(e.to_string().contains("colour"), "{e}");
        assert!(e.to_string().contains(FILE), "{e}");
        let e = parse("edit:\n  - {action: delete_entity, name: A}\n", Path::new(FILE)).unwrap_err();
        assert_eq!(e.line, Some(1), "{e}");
    }

    #[test]
    fn values_no_edit_can_mean_name_their_line_and_key() {
        // Issue #47: these were accepted.
        let head = "edits:\n  - {action: delete_entity, name: A}\n";
        for (edit, key, says) in [
            (
                "{action: create_relationship, source: A, target: B, weight: .nan}",
                "weight",
                "NaN is not a valid weight",
            ),
            ("{action: create_relationship, source: A, target: B, weight: -1e308}", "weight", "at least 0"),
            ("{action: edit_relationship, source: A, target: B, weight: .inf}", "weight", "inf is not a valid weight"),
            ("{action: create_entity, name: ''}", "name", "must not be empty"),
            ("{action: edit_entity, name: A, rename: '  '}", "rename", "must not be empty"),
            ("{action: merge_entities, from: [B, ''], into: A}", "from[1]", "must not be empty"),
            ("{action: delete_relationship, source: '', target: B}", "source", "must not be empty"),
        ] {
            let e = parse(&format!("{head}  - {edit}\n"), Path::new(FILE)).unwrap_err();
            assert_eq!((e.path.as_str(), e.line), (format!("edits[1].{key}").as_str(), Some(3)), "{edit}: {e}");
            assert!(e.to_string().starts_with("graph_edits.yaml:3") && e.message.contains(says), "{edit}: {e}");
        }
        let block = "edits:\n  - action: create_relationship\n    source: A\n    target: B\n    weight: -1\n";
        let e = parse(block, Path::new(FILE)).unwrap_err();
        assert_eq!((e.path.as_str(), e.line), ("edits[0].weight", Some(5)), "{e}");
        let fine = "edits:\n  - {action: create_relationship, source: A, target: B, weight: 0}\n";
        assert!(parse(fine, Path::new(FILE)).is_ok());
    }
}
