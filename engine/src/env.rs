//! `${VAR}` substitution in settings.yaml from the environment and DIR/.env.

use std::collections::BTreeMap;
use std::path::Path;

use crate::config_error::ConfigError;

/// Parses a dotenv file: `KEY=value` lines, `#` comments, optional `export `,
/// optional single or double quotes around the value.
pub fn parse_dotenv(text: &str) -> BTreeMap<String, String> {
    let mut vars = BTreeMap::new();
    for line in text.lines() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let line = line.strip_prefix("export ").unwrap_or(line);
        if let Some((key, value)) = line.split_once('=') {
            let value = value.trim();
            let unquoted = value
                .strip_prefix('"')
                .and_then(|v| v.strip_suffix('"'))
                .or_else(|| value.strip_prefix('\'').and_then(|v| v.strip_suffix('\'')))
                .unwrap_or(value);
            vars.insert(key.trim().to_string(), unquoted.to_string());
        }
    }
    vars
}

/// Replaces `${NAME}` in `text`. The process environment wins over `.env`,
/// as in GraphRAG. An unset variable is an error naming its line.
/// Comment lines are left alone so a commented-out key needs no variable.
pub(crate) fn substitute(
    text: &str,
    file: &Path,
    dotenv: &BTreeMap<String, String>,
    lookup: impl Fn(&str) -> Option<String>,
) -> Result<String, ConfigError> {
    let mut out = String::with_capacity(text.len());
    for (i, line) in text.split_inclusive('\n').enumerate() {
        if line.trim_start().starts_with('#') {
            out.push_str(line);
            continue;
        }
        let mut rest = line;
        while let Some(start) = rest.find("${") {
            out.push_str(&rest[..start]);
            let after = &rest[start + 2..];
            let Some(end) = after.find('}') else {
                return Err(ConfigError::new(file, Some(i + 1), "", "unterminated `${` (expected `${NAME}`)"));
            };
            let name = &after[..end];
            let value = lookup(name).or_else(|| dotenv.get(name).cloned()).ok_or_else(|| {
                ConfigError::new(
                    file,
                    Some(i + 1),
                    "",
                    format!("environment variable `{name}` is not set (set it in the environment or in the project's .env file)"),
                )
            })?;
            out.push_str(&value);
            rest = &after[end + 1..];
        }
        out.push_str(rest);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dotenv_forms() {
        let v = parse_dotenv("# c\nA=1\nexport B=\"two\"\nC='3'\nEMPTY=\n");
        assert_eq!(v["A"], "1");
        assert_eq!(v["B"], "two");
        assert_eq!(v["C"], "3");
        assert_eq!(v["EMPTY"], "");
    }

    #[test]
    fn substitutes_env_over_dotenv_and_reports_line() {
        let dotenv = parse_dotenv("KEY=fromfile\nOTHER=x");
        let lookup = |n: &str| (n == "KEY").then(|| "fromenv".to_string());
        let f = Path::new("settings.yaml");
        let s = substitute("a: ${KEY}\nb: ${OTHER}-y\n# c: ${MISSING}\n", f, &dotenv, lookup).unwrap();
        assert_eq!(s, "a: fromenv\nb: x-y\n# c: ${MISSING}\n");
        let err = substitute("a: 1\nb: ${MISSING}\n", f, &dotenv, lookup).unwrap_err();
        assert_eq!(err.line, Some(2));
        assert!(err.to_string().contains("MISSING"));
    }
}
