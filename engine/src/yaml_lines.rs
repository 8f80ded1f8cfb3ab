//! Finds the line of a key path (`steps[2].args.size`) in YAML text, so errors
//! found after deserialization (semantic checks, pipeline validation) can
//! still point at a line. Block style only; for flow style (`{a: 1}`) it
//! returns the line of the deepest key it could find.

#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Seg<'a> {
    Key(&'a str),
    Index(usize),
}

/// Parses `a.b[2].c` into segments.
pub(crate) fn parse_path(path: &str) -> Vec<Seg<'_>> {
    let mut segs = Vec::new();
    for part in path.split('.').filter(|p| !p.is_empty()) {
        let mut rest = part;
        if let Some(i) = rest.find('[') {
            if i > 0 {
                segs.push(Seg::Key(&rest[..i]));
            }
            rest = &rest[i..];
            while let Some(stripped) = rest.strip_prefix('[') {
                let end = stripped.find(']').unwrap_or(stripped.len());
                if let Ok(n) = stripped[..end].parse() {
                    segs.push(Seg::Index(n));
                }
                rest = stripped.get(end + 1..).unwrap_or("");
            }
        } else {
            segs.push(Seg::Key(rest));
        }
    }
    segs
}

struct Line<'a> {
    no: usize,
    /// Column of the first character after any `- ` markers.
    indent: usize,
    /// Column of the `-` when the line starts a sequence item.
    dash: Option<usize>,
    key: Option<&'a str>,
}

fn scan(text: &str) -> Vec<Line<'_>> {
    let mut out = Vec::new();
    for (i, raw) in text.lines().enumerate() {
        let trimmed = raw.trim_start();
        if trimmed.is_empty() || trimmed.starts_with('#') {
            continue;
        }
        let mut indent = raw.len() - trimmed.len();
        let mut body = trimmed;
        let mut dash = None;
        while let Some(after) = body.strip_prefix("- ").or_else(|| (body == "-").then_some("")) {
            dash.get_or_insert(indent);
            let skipped = body.len() - after.trim_start().len();
            indent += skipped;
            body = after.trim_start();
        }
        let key = body
            .split_once(':')
            .filter(|(_, v)| v.is_empty() || v.starts_with([' ', '\t']))
            .map(|(k, _)| k.trim().trim_matches(['"', '\'']))
            .filter(|k| !k.is_empty());
        out.push(Line { no: i + 1, indent, dash, key });
    }
    out
}

/// 1-based line of the deepest segment of `path` that could be found.
pub(crate) fn line_of(text: &str, path: &str) -> Option<usize> {
    let lines = scan(text);
    let segs = parse_path(path);
    let (mut lo, mut hi) = (0, lines.len());
    let mut found = None;
    for seg in segs {
        let range = &lines[lo..hi];
        let pos = match seg {
            Seg::Key(k) => {
                let min = range.iter().filter(|l| l.key.is_some()).map(|l| l.indent).min();
                range.iter().position(|l| l.key == Some(k) && Some(l.indent) == min)
            }
            Seg::Index(n) => {
                let min = range.iter().filter_map(|l| l.dash).min();
                range.iter().enumerate().filter(|(_, l)| l.dash.is_some() && l.dash == min).nth(n).map(|(i, _)| i)
            }
        };
        let Some(p) = pos else { break };
        let at = lo + p;
        let this = &lines[at];
        found = Some(this.no);
        // The block of this node: following lines indented deeper than its key
        // (for an item: deeper than its dash).
        let limit = match seg {
            Seg::Index(_) => this.dash.unwrap_or(this.indent),
            Seg::Key(_) => this.indent,
        };
        let end = lines[at + 1..hi]
            .iter()
            .position(|l| l.dash.unwrap_or(l.indent) <= limit)
            .map(|e| at + 1 + e)
            .unwrap_or(hi);
        // For an item, its first key sits on the same line: keep it in range.
        lo = if matches!(seg, Seg::Index(_)) { at } else { at + 1 };
        hi = end;
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    const DOC: &str = concat!(
        "name: standard\n",
        "steps:\n",
        "  - id: load\n",
        "    verb: load_documents\n",
        "    outputs: [documents]\n",
        "  - id: chunk\n",
        "    verb: chunk\n",
        "    args:\n",
        "      size: 10\n",
        "      overlap: 2\n",
        "chunking:\n",
        "  size: 1200\n",
        "  # comment\n",
        "  overlap: 100\n",
    );

    #[test]
    fn finds_keys_and_items() {
        assert_eq!(line_of(DOC, "name"), Some(1));
        assert_eq!(line_of(DOC, "steps[0]"), Some(3));
        assert_eq!(line_of(DOC, "steps[1].verb"), Some(7));
        assert_eq!(line_of(DOC, "steps[1].args.overlap"), Some(10));
        assert_eq!(line_of(DOC, "steps[0].id"), Some(3));
        assert_eq!(line_of(DOC, "chunking.overlap"), Some(14));
        assert_eq!(line_of(DOC, "chunking.size"), Some(12));
        // Deepest known segment when the leaf is missing.
        assert_eq!(line_of(DOC, "chunking.missing"), Some(11));
        assert_eq!(line_of(DOC, "nothing"), None);
    }

    #[test]
    fn parses_paths() {
        assert_eq!(
            parse_path("steps[2].args.size"),
            vec![Seg::Key("steps"), Seg::Index(2), Seg::Key("args"), Seg::Key("size")]
        );
    }
}
