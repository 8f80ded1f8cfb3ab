//! Text helpers shared by the answer generators: hashing, sentence splitting,
//! capitalised-phrase ("entity") detection, and a lenient parser for the
//! `id,...` / `id|...` tables that GraphRAG-style prompts embed.

use sha2::{Digest, Sha256};

/// Stable 64-bit hash (first 8 bytes of SHA-256, little endian).
pub(crate) fn h64(s: &str) -> u64 {
    let d = Sha256::digest(s.as_bytes());
    let mut b = [0u8; 8];
    b.copy_from_slice(&d[..8]);
    u64::from_le_bytes(b)
}

/// Words that start a capitalised phrase only because they start a sentence,
/// or that are too generic to be entities.
#[rustfmt::skip]
const STOP: &[&str] = &[
    "a", "about", "after", "again", "all", "also", "although", "an", "and", "any", "are", "as",
    "at", "be", "because", "been", "before", "both", "but", "by", "can", "could", "did", "do",
    "does", "during", "each", "even", "every", "few", "for", "from", "had", "has", "have", "he",
    "her", "here", "hers", "him", "his", "how", "however", "i", "if", "in", "into", "is", "it",
    "its", "just", "last", "later", "let", "many", "may", "me", "meanwhile", "might", "more",
    "most", "much", "must", "my", "next", "no", "nor", "not", "now", "of", "on", "once", "one",
    "only", "or", "other", "our", "ours", "over", "she", "should", "since", "so", "some", "such",
    "than", "that", "the", "their", "theirs", "them", "then", "there", "therefore", "these",
    "they", "this", "those", "though", "thus", "to", "today", "tomorrow", "too", "under", "until",
    "up", "upon", "us", "very", "was", "we", "were", "what", "when", "where", "whether", "which",
    "while", "who", "whom", "whose", "why", "will", "with", "would", "yes", "yesterday", "yet",
    "you", "your", "yours", "monday", "tuesday", "wednesday", "thursday", "friday", "saturday",
    "sunday", "january", "february", "march", "april", "june", "july", "august", "september",
    "october", "november", "december", "mr", "mrs", "ms", "dr", "according", "ceo", "cfo", "cto",
    "chief", "head",
];

/// Lower-case connectors allowed inside a capitalised phrase ("Bank of England").
const CONNECTORS: &[&str] = &["of", "de", "del", "da", "du", "la", "le", "van", "von", "der"];

pub(crate) fn is_stop(word: &str) -> bool {
    let w = word.to_lowercase();
    STOP.contains(&w.as_str())
}

/// Splits text into sentences at `.`, `!`, `?` followed by white space, and at
/// line breaks. Returned slices are trimmed and non-empty.
pub(crate) fn sentences(text: &str) -> Vec<&str> {
    let mut out = Vec::new();
    for line in text.lines() {
        let mut start = 0;
        let chars: Vec<(usize, char)> = line.char_indices().collect();
        for (k, &(i, c)) in chars.iter().enumerate() {
            if matches!(c, '.' | '!' | '?') {
                let next_ws = chars.get(k + 1).is_none_or(|&(_, n)| n.is_whitespace());
                if next_ws {
                    let end = i + c.len_utf8();
                    let s = line[start..end].trim();
                    if !s.is_empty() {
                        out.push(s);
                    }
                    start = end;
                }
            }
        }
        let s = line[start..].trim();
        if !s.is_empty() {
            out.push(s);
        }
    }
    out
}

/// A capitalised phrase found in a sentence.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Candidate {
    /// Upper-cased name.
    pub name: String,
    /// A single word at the very start of the sentence (may be an ordinary word).
    pub initial_single: bool,
}

fn is_capitalised(w: &str) -> bool {
    w.chars().next().is_some_and(|c| c.is_uppercase()) && w.chars().any(|c| c.is_alphabetic())
}

/// Capitalised phrases of one sentence, upper-cased, leading/trailing stop words
/// removed ("The Halvard Port Authority" → "HALVARD PORT AUTHORITY").
pub(crate) fn candidates(sentence: &str) -> Vec<Candidate> {
    let mut out = Vec::new();
    let mut cur: Vec<String> = Vec::new();
    let mut cur_start = 0usize;
    let words: Vec<&str> = sentence.split_whitespace().collect();
    let flush = |cur: &mut Vec<String>, start: usize, out: &mut Vec<Candidate>| {
        // trailing connectors never end a phrase
        while cur.last().is_some_and(|w| CONNECTORS.contains(&w.as_str())) {
            cur.pop();
        }
        let mut lead = 0;
        while lead < cur.len() && is_stop(&cur[lead]) {
            lead += 1;
        }
        let mut phrase: Vec<String> = cur[lead..].to_vec();
        while phrase.last().is_some_and(|w| is_stop(w) || CONNECTORS.contains(&w.as_str())) {
            phrase.pop();
        }
        while phrase.first().is_some_and(|w| CONNECTORS.contains(&w.as_str())) {
            phrase.remove(0);
        }
        if !phrase.is_empty() {
            let name = phrase.join(" ").to_uppercase();
            if name.chars().filter(|c| c.is_alphanumeric()).count() >= 2 {
                out.push(Candidate { initial_single: phrase.len() == 1 && start == 0 && lead == 0, name });
            }
        }
        cur.clear();
    };
    for (idx, raw) in words.iter().enumerate() {
        let Some(core_start) = raw.find(|c: char| c.is_alphanumeric()) else {
            flush(&mut cur, cur_start, &mut out);
            continue;
        };
        let core_end =
            raw.char_indices().rev().find(|(_, c)| c.is_alphanumeric()).map_or(raw.len(), |(i, c)| i + c.len_utf8());
        let lead_punct = core_start > 0;
        let trailing_break = core_end < raw.len();
        let core = &raw[core_start..core_end];
        let (w, possessive) = match core.strip_suffix("'s").or_else(|| core.strip_suffix("\u{2019}s")) {
            Some(base) if !base.is_empty() => (base, true),
            _ => (core, false),
        };
        if lead_punct {
            flush(&mut cur, cur_start, &mut out);
        }
        if is_capitalised(w) {
            if cur.is_empty() {
                cur_start = idx;
            }
            cur.push(w.to_string());
        } else if !cur.is_empty()
            && CONNECTORS.contains(&w)
            && words.get(idx + 1).is_some_and(|n| is_capitalised(n.trim_start_matches(|c: char| !c.is_alphanumeric())))
        {
            cur.push(w.to_string());
        } else {
            flush(&mut cur, cur_start, &mut out);
        }
        if possessive || trailing_break {
            flush(&mut cur, cur_start, &mut out);
        }
    }
    flush(&mut cur, cur_start, &mut out);
    out
}

/// Lower-cased alphanumeric words of a text.
pub(crate) fn words_lower(text: &str) -> Vec<String> {
    text.split(|c: char| !c.is_alphanumeric()).filter(|w| !w.is_empty()).map(|w| w.to_lowercase()).collect()
}

/// Content words (not stop words, at least 3 characters), lower-cased, in order,
/// deduplicated.
pub(crate) fn content_words(text: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for w in words_lower(text) {
        if w.chars().count() >= 3 && !is_stop(&w) && !out.contains(&w) {
            out.push(w);
        }
    }
    out
}

/// The first `n` words of `s` (white space collapsed), with "..." when cut.
pub(crate) fn first_words(s: &str, n: usize) -> String {
    let w: Vec<&str> = s.split_whitespace().collect();
    if w.len() > n {
        format!("{} ...", w[..n].join(" "))
    } else {
        w.join(" ")
    }
}

/// Removes the given delimiters and line breaks from a field value.
pub(crate) fn clean_field(s: &str, delims: &[&str]) -> String {
    let mut s = s.to_string();
    for d in delims {
        if !d.is_empty() {
            s = s.replace(d, " ");
        }
    }
    s.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// Title case of an upper-case name ("HALVARD PORT" → "Halvard Port").
pub(crate) fn title_case(s: &str) -> String {
    s.split_whitespace()
        .map(|w| {
            let lower = w.to_lowercase();
            let mut c = lower.chars();
            match c.next() {
                Some(f) => f.to_uppercase().collect::<String>() + c.as_str(),
                None => String::new(),
            }
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// Text after the first occurrence of `start` (or None).
pub(crate) fn after<'a>(text: &'a str, start: &str) -> Option<&'a str> {
    text.find(start).map(|i| &text[i + start.len()..])
}

/// Text after the last occurrence of `start` (or None).
pub(crate) fn after_last<'a>(text: &'a str, start: &str) -> Option<&'a str> {
    text.rfind(start).map(|i| &text[i + start.len()..])
}

/// Text before the first occurrence of `end` (the whole text when absent).
pub(crate) fn before<'a>(text: &'a str, end: &str) -> &'a str {
    text.find(end).map_or(text, |i| &text[..i])
}

/// Text before the last occurrence of `end` (the whole text when absent).
pub(crate) fn before_last<'a>(text: &'a str, end: &str) -> &'a str {
    text.rfind(end).map_or(text, |i| &text[..i])
}

// ---------------------------------------------------------------------------
// tables
// ---------------------------------------------------------------------------

/// A table embedded in a prompt: `-----Entities-----` (or a bare `Entities`
/// line) followed by a header line starting with `id` and rows separated by
/// `,` (CSV, quotes honoured) or `|`.
#[derive(Debug, Clone, Default)]
pub(crate) struct Table {
    /// Canonical dataset name: Entities, Relationships, Claims, Sources, Reports
    /// (or the header text as written when unknown).
    pub name: String,
    pub columns: Vec<String>,
    pub rows: Vec<Vec<String>>,
}

impl Table {
    pub fn ids(&self) -> Vec<String> {
        self.rows.iter().filter_map(|r| r.first().cloned()).collect()
    }

    pub fn col(&self, names: &[&str]) -> Option<usize> {
        names.iter().find_map(|n| self.columns.iter().position(|c| c.eq_ignore_ascii_case(n)))
    }

    /// Cell `(row, one of names)`, empty when missing.
    pub fn cell(&self, row: usize, names: &[&str]) -> String {
        self.col(names).and_then(|c| self.rows.get(row).and_then(|r| r.get(c))).cloned().unwrap_or_default()
    }
}

fn canonical_name(raw: &str) -> Option<&'static str> {
    let n = raw.trim().trim_matches(|c: char| c == '#' || c == ':' || c.is_whitespace());
    let n = n.to_lowercase();
    match n.as_str() {
        "entities" | "entity" => Some("Entities"),
        "relationships" | "relationship" | "relations" => Some("Relationships"),
        "claims" | "claim" | "covariates" => Some("Claims"),
        "sources" | "source" | "text units" | "text_units" | "chunks" => Some("Sources"),
        "reports" | "report" | "community reports" => Some("Reports"),
        _ => None,
    }
}

/// A section header line: `-----Name-----` or a bare known table name.
fn section_header(line: &str) -> Option<String> {
    let t = line.trim();
    if t.starts_with("---") && t.ends_with("---") {
        let inner = t.trim_matches('-').trim();
        if !inner.is_empty() && inner.len() < 60 {
            return Some(canonical_name(inner).map_or_else(|| inner.to_string(), str::to_string));
        }
        return None;
    }
    canonical_name(t).map(str::to_string)
}

fn header_delim(line: &str) -> Option<char> {
    let t = line.trim();
    let lower = t.to_lowercase();
    for d in ['|', ',', '\t'] {
        if let Some(first) = lower.split(d).next() {
            if t.contains(d) && matches!(first.trim(), "id" | "\"id\"" | "short_id" | "human_readable_id") {
                return Some(d);
            }
        }
    }
    None
}

fn split_row(row: &str, delim: char) -> Vec<String> {
    if delim != ',' {
        return row.split(delim).map(|c| c.trim().to_string()).collect();
    }
    let mut cells = Vec::new();
    let mut cur = String::new();
    let mut in_q = false;
    let mut chars = row.chars().peekable();
    while let Some(c) = chars.next() {
        if in_q {
            if c == '"' {
                if chars.peek() == Some(&'"') {
                    cur.push('"');
                    chars.next();
                } else {
                    in_q = false;
                }
            } else {
                cur.push(c);
            }
        } else if c == '"' && cur.trim().is_empty() {
            cur.clear();
            in_q = true;
        } else if c == delim {
            cells.push(cur.trim().to_string());
            cur.clear();
        } else {
            cur.push(c);
        }
    }
    cells.push(cur.trim().to_string());
    cells
}

fn id_like(cell: &str) -> bool {
    let c = cell.trim().trim_matches('"');
    !c.is_empty()
        && c.len() <= 40
        && !c.contains(char::is_whitespace)
        && !c.eq_ignore_ascii_case("id")
        && c.chars().all(|ch| ch.is_alphanumeric() || ch == '-' || ch == '_')
}

fn infer_name(columns: &[String]) -> String {
    let has = |n: &str| columns.iter().any(|c| c.eq_ignore_ascii_case(n));
    if has("source") && has("target") {
        "Relationships"
    } else if has("entity") {
        "Entities"
    } else if has("subject") || has("claim") || has("subject_id") {
        "Claims"
    } else if has("title") {
        "Reports"
    } else {
        "Sources"
    }
    .to_string()
}

/// All tables found in `text`.
pub(crate) fn parse_tables(text: &str) -> Vec<Table> {
    let lines: Vec<&str> = text.lines().collect();
    let mut tables = Vec::new();
    let mut pending_name: Option<String> = None;
    let mut i = 0;
    while i < lines.len() {
        let line = lines[i];
        if let Some(delim) = header_delim(line) {
            let columns: Vec<String> =
                split_row(line, delim).into_iter().map(|c| c.trim_matches('"').to_string()).collect();
            let name = pending_name.take().unwrap_or_else(|| infer_name(&columns));
            let mut raw_rows: Vec<String> = Vec::new();
            let mut j = i + 1;
            // inside a quoted CSV field that spans lines
            let mut in_quote = false;
            while j < lines.len() {
                let l = lines[j];
                let t = l.trim();
                let quotes_odd = delim == ',' && l.matches('"').count() % 2 == 1;
                if in_quote {
                    if let Some(last) = raw_rows.last_mut() {
                        last.push('\n');
                        last.push_str(l);
                    }
                    in_quote ^= quotes_odd;
                    j += 1;
                    continue;
                }
                if section_header(l).is_some()
                    || header_delim(l).is_some()
                    || t.starts_with("---")
                    || t.starts_with('#')
                    || t == "Output:"
                {
                    break;
                }
                let first = l.split(delim).next().unwrap_or("");
                if l.contains(delim) && id_like(first) {
                    raw_rows.push(l.to_string());
                    in_quote = quotes_odd;
                } else if let Some(last) = raw_rows.last_mut() {
                    if !t.is_empty() {
                        last.push('\n');
                        last.push_str(l);
                    }
                } else if !t.is_empty() {
                    // prose right after the header: not a table after all
                    break;
                }
                j += 1;
            }
            let rows = raw_rows
                .iter()
                .map(|r| {
                    let mut cells = split_row(r, delim);
                    if let Some(c) = cells.first_mut() {
                        *c = c.trim_matches('"').to_string();
                    }
                    cells
                })
                .collect();
            tables.push(Table { name, columns, rows });
            i = j;
            continue;
        }
        if let Some(name) = section_header(line) {
            pending_name = Some(name);
        } else if !line.trim().is_empty() {
            pending_name = None;
        }
        i += 1;
    }
    tables
}

/// `[Data: Entities (1, 2); Relationships (3, 4, 5, 6, 7, +more)]` from
/// (dataset, ids) pairs; at most 5 ids per dataset. Empty when no ids.
pub(crate) fn citation(parts: &[(&str, Vec<String>)]) -> String {
    let mut segs = Vec::new();
    for (name, ids) in parts {
        if ids.is_empty() {
            continue;
        }
        let mut shown: Vec<String> = ids.iter().take(5).cloned().collect();
        if ids.len() > 5 {
            shown.push("+more".into());
        }
        segs.push(format!("{name} ({})", shown.join(", ")));
    }
    if segs.is_empty() {
        String::new()
    } else {
        format!("[Data: {}]", segs.join("; "))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(s: &str) -> Vec<String> {
        candidates(s).into_iter().map(|c| c.name).collect()
    }

    #[test]
    fn capitalised_phrases() {
        assert_eq!(
            names("The Halvard Port Authority said on Monday that its director, Ines Okafor, will lead the expansion in Brennick."),
            vec!["HALVARD PORT AUTHORITY", "INES OKAFOR", "BRENNICK"]
        );
        assert_eq!(names("Reyes credited the Bank of England's report."), vec!["REYES", "BANK OF ENGLAND"]);
        assert_eq!(names("It was late."), Vec::<String>::new());
    }

    #[test]
    fn sentence_split() {
        assert_eq!(sentences("A b. C d? E\nF 3.5 g"), vec!["A b.", "C d?", "E", "F 3.5 g"]);
    }

    #[test]
    fn tables_csv_and_pipe() {
        let t = parse_tables(
            "-----Entities-----\nid,entity,description\n3,\"ACME, INC\",a firm\n8,BOB,a man\n\n-----Relationships-----\nid|source|target|description\n14|ACME|BOB|works\nmore text\n",
        );
        assert_eq!(t.len(), 2);
        assert_eq!(t[0].name, "Entities");
        assert_eq!(t[0].ids(), vec!["3", "8"]);
        assert_eq!(t[0].cell(0, &["entity"]), "ACME, INC");
        assert_eq!(t[1].name, "Relationships");
        assert_eq!(t[1].ids(), vec!["14"]);
        assert!(t[1].rows[0][3].contains("more text"));
        let multi = parse_tables(
            "-----Sources-----\nid,text\n0,\"First line\n2019, a year, \"\"quoted\"\"\n-----\"\n1,second\n",
        );
        assert_eq!(multi[0].ids(), vec!["0", "1"]);
        assert_eq!(multi[0].rows[0][1], "First line\n2019, a year, \"quoted\"\n-----");
        let bare = parse_tables("Entities\n\nid,entity,description\n3,X,y\n");
        assert_eq!(bare[0].name, "Entities");
    }

    #[test]
    fn citations() {
        let ids: Vec<String> = (1..=7).map(|i| i.to_string()).collect();
        assert_eq!(citation(&[("Entities", ids), ("Claims", vec![])]), "[Data: Entities (1, 2, 3, 4, 5, +more)]");
    }
}
