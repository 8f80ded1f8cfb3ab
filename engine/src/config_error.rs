//! Errors for user-written YAML (settings, pipelines): file, line, key path and
//! a "did you mean" where a misspelt key or value is close to a valid one.

use std::fmt;
use std::path::{Path, PathBuf};

/// A mistake in a settings or pipeline file, located for the person who
/// fixes it (shown as `file:line: path: message`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigError {
    /// The file, as messages name it.
    pub file: PathBuf,
    /// 1-based line, when known.
    pub line: Option<usize>,
    /// Dotted key path (`chunking.size`, `steps[2].args`), may be empty.
    pub path: String,
    /// What is wrong, with a "did you mean" where one is close.
    pub message: String,
}

impl ConfigError {
    /// An error at `path` of `file`, on `line` when known.
    pub fn new(file: &Path, line: Option<usize>, path: impl Into<String>, message: impl Into<String>) -> Self {
        ConfigError { file: file.to_path_buf(), line, path: path.into(), message: message.into() }
    }

    /// Builds the error from a serde_yaml_ng deserialization failure tracked by
    /// serde_path_to_error.
    pub(crate) fn from_yaml(file: &Path, err: serde_path_to_error::Error<serde_yaml_ng::Error>) -> Self {
        let path = clean_path(&err.path().to_string());
        let inner = err.into_inner();
        let line = inner.location().map(|l| l.line());
        ConfigError::new(file, line, path, explain(&inner.to_string()))
    }

    /// The same for a settings.json file (serde_json's error knows its line).
    pub(crate) fn from_json(file: &Path, err: serde_path_to_error::Error<serde_json::Error>) -> Self {
        let path = clean_path(&err.path().to_string());
        let inner = err.into_inner();
        let line = (inner.line() > 0).then(|| inner.line());
        ConfigError::new(file, line, path, explain(&inner.to_string()))
    }
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.file.display())?;
        if let Some(line) = self.line {
            write!(f, ":{line}")?;
        }
        if !self.path.is_empty() {
            write!(f, ": `{}`", self.path)?;
        }
        write!(f, ": {}", self.message)
    }
}

impl std::error::Error for ConfigError {}

/// serde_path_to_error writes `.` for the root and `?` for untracked segments.
fn clean_path(path: &str) -> String {
    if path == "." {
        String::new()
    } else {
        path.trim_end_matches(".?").to_string()
    }
}

/// Strips serde_yaml's own location suffix and adds a suggestion to
/// "unknown field/variant `x`, expected one of `a`, `b`" messages.
pub(crate) fn explain(raw: &str) -> String {
    let mut msg = raw.to_string();
    if let Some(i) = msg.find(" at line ") {
        msg.truncate(i);
    }
    // serde_yaml prefixes its own (partial) path: "chunking: unknown field ..."
    if let Some(i) = msg.find(": unknown ") {
        msg = msg[i + 2..].to_string();
    }
    if let Some(rest) = msg.strip_prefix("unknown field `").or_else(|| msg.strip_prefix("unknown variant `")) {
        let typo = rest.split('`').next().unwrap_or("");
        let expected: Vec<&str> = rest.split('`').skip(2).step_by(2).collect();
        let hint = graphrag_operations::suggest::did_you_mean(typo, expected.iter().copied());
        if !hint.is_empty() {
            msg = format!("{msg}{hint}");
        }
    }
    msg
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn explains_unknown_fields() {
        let m = explain("chunking: unknown field `sise`, expected one of `size`, `overlap` at line 3 column 3");
        assert_eq!(m, "unknown field `sise`, expected one of `size`, `overlap` (did you mean `size`?)");
    }
}
