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
//! Errors name the file, line and key.

use std::path::Path;

use graphrag_operations::graph_edits::GraphEdit;
use serde::{Deserialize, Serialize};

use crate::config_error::ConfigError;

/// Where the project keeps it, relative to its root.
pub const FILE: &str = "graph_edits.yaml";

const HEADER: &str = "# Graph edits: applied in order to the final graph of every index and update\n\
# (graphrag-rs; written by the server's graph editing paths, and editable by hand).\n";

#[derive(Debug, Default, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GraphEditsFile {
    #[serde(default)]
    pub edits: Vec<GraphEdit>,
}

/// Parses the file's text; `file` names it in errors.
pub fn parse(text: &str, file: &Path) -> Result<GraphEditsFile, ConfigError> {
    let Some(doc) = serde_yaml_ng::Deserializer::from_str(text).next() else {
        return Ok(GraphEditsFile::default());
    };
    match serde_path_to_error::deserialize::<_, Option<GraphEditsFile>>(doc) {
        Ok(parsed) => Ok(parsed.unwrap_or_default()),
        Err(e) => Err(ConfigError::from_yaml(file, e)),
    }
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
}
