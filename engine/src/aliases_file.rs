//! The project's aliases file (`aliases.yaml`): entity merges the user
//! forces or forbids, whatever entity resolution decides.
//!
//! ```yaml
//! same:                                   # each group becomes one entity,
//!   - [EBENEZER SCROOGE, SCROOGE]         # named after its first name
//! different:                              # no two of a group are merged
//!   - [MR FEZZIWIG, MRS FEZZIWIG]
//! ```
//!
//! `same: [A, B]` (one flat list) is one group. Names match entity titles
//! ignoring case and spacing. Errors name the file, line and key.

use std::collections::HashMap;
use std::path::Path;

use serde::Deserialize;
use serde_yaml_ng::Value;

use crate::config_error::ConfigError;
use crate::yaml_lines::line_of;

/// Names that must be one entity, or must stay apart.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AliasGroup {
    /// At least two distinct names, as written.
    pub names: Vec<String>,
    /// Where the group is (for messages and evidence).
    pub line: Option<usize>,
}

/// The aliases file (`resolve_entities.aliases_file`): merges the user
/// forces and merges the user forbids.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AliasesFile {
    /// Groups of names that are one entity (`same:`).
    pub same: Vec<AliasGroup>,
    /// Groups of names none of which may be merged with another (`different:`).
    pub different: Vec<AliasGroup>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Raw {
    #[serde(default)]
    same: Option<Value>,
    #[serde(default)]
    different: Option<Value>,
}

/// How a name of the file meets entity titles: upper case, single spaces,
/// straight apostrophes.
pub fn match_key(name: &str) -> String {
    name.split_whitespace()
        .map(|w| w.chars().map(|c| if c == '\u{2019}' { '\'' } else { c }).flat_map(char::to_uppercase).collect())
        .collect::<Vec<String>>()
        .join(" ")
}

fn scalar(v: &Value) -> Option<String> {
    match v {
        Value::String(s) => Some(s.clone()),
        Value::Number(n) => Some(n.to_string()),
        Value::Bool(b) => Some(b.to_string()),
        _ => None,
    }
}

fn groups(text: &str, file: &Path, key: &str, value: Option<Value>) -> Result<Vec<AliasGroup>, ConfigError> {
    let error = |path: String, message: String| ConfigError::new(file, line_of(text, &path), path, message);
    let items = match value {
        None | Some(Value::Null) => return Ok(Vec::new()),
        Some(Value::Sequence(items)) => items,
        Some(_) => {
            return Err(error(
                key.to_string(),
                "expected a list of groups of names, e.g. `- [SCROOGE, EBENEZER SCROOGE]`".into(),
            ))
        }
    };
    // A flat list of names is one group.
    let nested = items.iter().any(|v| matches!(v, Value::Sequence(_)));
    let lists: Vec<(String, Vec<Value>)> = if nested {
        items
            .into_iter()
            .enumerate()
            .map(|(i, v)| match v {
                Value::Sequence(names) => Ok((format!("{key}[{i}]"), names)),
                _ => Err(error(format!("{key}[{i}]"), "expected a list of names; write every group as a list".into())),
            })
            .collect::<Result<_, _>>()?
    } else {
        vec![(key.to_string(), items)]
    };
    let mut out = Vec::new();
    for (path, values) in lists {
        let mut names: Vec<String> = Vec::new();
        for (j, v) in values.iter().enumerate() {
            let name = scalar(v)
                .map(|s| s.trim().to_string())
                .filter(|s| !s.is_empty())
                .ok_or_else(|| error(format!("{path}[{j}]"), "expected a non-empty entity name".into()))?;
            if !names.iter().any(|n| match_key(n) == match_key(&name)) {
                names.push(name);
            }
        }
        if names.len() < 2 {
            return Err(error(path, "a group needs at least two different names".into()));
        }
        out.push(AliasGroup { names, line: line_of(text, &path) });
    }
    Ok(out)
}

fn find(parent: &mut HashMap<String, String>, x: &str) -> String {
    let mut x = x.to_string();
    while let Some(p) = parent.get(&x).filter(|p| **p != x).cloned() {
        x = p;
    }
    x
}

/// Parses the text of an aliases file; `file` names it in errors. A group
/// of `different` whose names `same` joins (directly or through other
/// groups) is an error.
pub fn parse(text: &str, file: &Path) -> Result<AliasesFile, ConfigError> {
    let raw: Raw = match serde_yaml_ng::Deserializer::from_str(text).next() {
        None => return Ok(AliasesFile::default()),
        Some(doc) => match serde_path_to_error::deserialize::<_, Option<Raw>>(doc) {
            Ok(Some(raw)) => raw,
            Ok(None) => return Ok(AliasesFile::default()),
            Err(e) => return Err(ConfigError::from_yaml(file, e)),
        },
    };
    let aliases = AliasesFile {
        same: groups(text, file, "same", raw.same)?,
        different: groups(text, file, "different", raw.different)?,
    };
    let mut parent: HashMap<String, String> = HashMap::new();
    for g in &aliases.same {
        let first = find(&mut parent, &match_key(&g.names[0]));
        for n in &g.names[1..] {
            let root = find(&mut parent, &match_key(n));
            if root != first {
                parent.insert(root, first.clone());
            }
        }
    }
    for (i, g) in aliases.different.iter().enumerate() {
        for (x, a) in g.names.iter().enumerate() {
            for b in &g.names[x + 1..] {
                if find(&mut parent, &match_key(a)) == find(&mut parent, &match_key(b)) {
                    return Err(ConfigError::new(
                        file,
                        g.line,
                        format!("different[{i}]"),
                        format!("`{a}` and `{b}` are also listed as the same entity under `same`"),
                    ));
                }
            }
        }
    }
    Ok(aliases)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(text: &str) -> Result<AliasesFile, ConfigError> {
        parse(text, Path::new("aliases.yaml"))
    }

    #[test]
    fn groups_flat_and_nested() {
        let a = p("same:\n  - [EBENEZER SCROOGE, Scrooge]\n  - [MARLEY, JACOB MARLEY, marley]\ndifferent: [MR FEZZIWIG, MRS FEZZIWIG]\n")
            .unwrap();
        assert_eq!(a.same.len(), 2);
        assert_eq!(a.same[1].names, ["MARLEY", "JACOB MARLEY"], "duplicates by match key dropped");
        assert_eq!(a.same[1].line, Some(3));
        assert_eq!(a.different[0].names, ["MR FEZZIWIG", "MRS FEZZIWIG"]);
        assert_eq!(a.different[0].line, Some(4));
        assert_eq!(p("").unwrap(), AliasesFile::default());
        assert_eq!(p("# nothing yet\n").unwrap(), AliasesFile::default());
        assert_eq!(p("same:\n").unwrap(), AliasesFile::default());
    }

    #[test]
    fn errors_name_line_and_key() {
        let e = p("same:\n  - [A, B]\n  - [C]\n").unwrap_err();
        assert_eq!((e.line, e.path.as_str()), (Some(3), "same[1]"));
        assert!(e.message.contains("two different names"), "{e}");
        let e = p("sames:\n  - [A, B]\n").unwrap_err();
        assert_eq!(e.line, Some(1));
        assert!(e.to_string().contains("did you mean `same`"), "{e}");
        let e = p("same:\n  - [A, B]\n  - [A, '']\n").unwrap_err();
        assert_eq!(e.path, "same[1][1]");
        let e = p("same: A\n").unwrap_err();
        assert_eq!((e.line, e.path.as_str()), (Some(1), "same"));
        let e = p("same:\n  - [A, B]\n  - C\n").unwrap_err();
        assert_eq!(e.path, "same[1]");
        assert!(p("same: [A, B\n").is_err());
    }

    #[test]
    fn contradictions_are_errors() {
        let e = p("same:\n  - [A, B]\n  - [b, C]\ndifferent:\n  - [X, Y]\n  - [a, c]\n").unwrap_err();
        assert_eq!((e.line, e.path.as_str()), (Some(6), "different[1]"));
        assert!(e.message.contains("`a` and `c`"), "{e}");
    }

    #[test]
    fn match_keys() {
        assert_eq!(match_key("  Marley\u{2019}s   ghost "), "MARLEY'S GHOST");
    }
}
