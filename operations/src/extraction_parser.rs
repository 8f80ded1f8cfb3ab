//! Lenient parser of LLM graph-extraction output (GraphRAG's tuple format and
//! LightRAG's newer `entity<|#|>...` line format) and of claim records.
//!
//! The parser never panics and runs in time linear in the input. It accepts
//! what small local models really write: chatty preambles, markdown fences,
//! bullets, quoted or unquoted fields, records spread over several lines,
//! a missing closing parenthesis, record types in any case, extra fields,
//! missing or non-numeric strengths, delimiters with odd spacing, and
//! `<|>`/`<|#|>` records even when the caller's delimiters are different.
//!
//! Records it cannot use are counted in `dropped`; records accepted after a
//! fix are counted in `repaired` (one count per record). Prose lines (no
//! tuple delimiter and no record keyword) and LightRAG `content_keywords`
//! records are ignored without being counted.
//!
//! Entity and relationship names are normalised with [`normalize_name`]
//! (trimmed, unquoted, upper-cased, inner whitespace collapsed), entity types
//! are upper-cased, descriptions are trimmed with inner whitespace (newlines
//! included) collapsed to single spaces.

use std::sync::{Arc, Mutex};

use regex::Regex;

/// The tuple delimiter of LightRAG's newer prompt (`entity<|#|>NAME<|#|>TYPE<|#|>DESC`).
pub const LIGHTRAG_TUPLE_DELIMITER: &str = "<|#|>";
/// GraphRAG's default tuple delimiter.
pub const DEFAULT_TUPLE_DELIMITER: &str = "<|>";
/// GraphRAG's default record delimiter.
pub const DEFAULT_RECORD_DELIMITER: &str = "##";
/// GraphRAG's (and LightRAG's) default completion delimiter.
pub const DEFAULT_COMPLETION_DELIMITER: &str = "<|COMPLETE|>";

/// The delimiters the prompt asked the model to use.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Delimiters {
    pub tuple: String,
    pub record: String,
    pub completion: String,
}

impl Default for Delimiters {
    fn default() -> Self {
        Delimiters {
            tuple: DEFAULT_TUPLE_DELIMITER.to_string(),
            record: DEFAULT_RECORD_DELIMITER.to_string(),
            completion: DEFAULT_COMPLETION_DELIMITER.to_string(),
        }
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct EntityRecord {
    /// Normalised (see [`normalize_name`]).
    pub name: String,
    /// Upper-cased; may be empty when the model left it out.
    pub entity_type: String,
    pub description: String,
}

#[derive(Debug, Clone, PartialEq)]
pub struct RelationshipRecord {
    /// Normalised (see [`normalize_name`]); never equal to `target`.
    pub source: String,
    pub target: String,
    pub description: String,
    /// The model's strength; 1.0 when missing or not a number.
    pub strength: f64,
}

#[derive(Debug, Clone, Default, PartialEq)]
pub struct Extraction {
    pub entities: Vec<EntityRecord>,
    pub relationships: Vec<RelationshipRecord>,
    /// Records that could not be used.
    pub dropped: usize,
    /// Records accepted after fixing (missing paren, bad strength, lowercase type...).
    pub repaired: usize,
}

#[derive(Debug, Clone, PartialEq)]
pub struct ClaimRecord {
    /// Normalised (see [`normalize_name`]).
    pub subject: String,
    /// Normalised; `NONE` when the model left it empty.
    pub object: String,
    /// Upper-cased.
    pub claim_type: String,
    /// Upper-cased (`TRUE`, `FALSE`, `SUSPECTED` as the prompt asks).
    pub status: String,
    /// As written (ISO-8601 or `NONE`); empty when missing.
    pub start_date: String,
    pub end_date: String,
    pub description: String,
    pub source_text: String,
}

/// Normalises an entity name as GraphRAG does: trim, strip surrounding
/// quotes, upper-case, collapse inner whitespace (control characters removed).
pub fn normalize_name(s: &str) -> String {
    let t = strip_quotes(s);
    let t = t.trim_matches(|c: char| c.is_whitespace() || c == '"' || c == '\u{201c}' || c == '\u{201d}');
    let mut out = String::with_capacity(t.len());
    for word in t.split_whitespace() {
        if !out.is_empty() {
            out.push(' ');
        }
        for c in word.chars().filter(|c| !c.is_control()) {
            out.extend(c.to_uppercase());
        }
    }
    out
}

/// Parses entity and relationship records. See the module documentation.
pub fn parse_graph_records(text: &str, d: &Delimiters) -> Extraction {
    let syntax = Syntax::of(d);
    let mut out = Extraction::default();
    for raw in segment(text, &syntax, Mode::Graph) {
        parse_graph_raw(&raw, &syntax, &mut out);
    }
    out
}

/// Parses claim records `(SUBJECT<|>OBJECT<|>TYPE<|>STATUS<|>START<|>END<|>DESCRIPTION<|>SOURCE)`.
/// Returns the claims and the number of records dropped (no subject, fewer
/// than three fields). Missing trailing fields are left empty.
pub fn parse_claim_records(text: &str, d: &Delimiters) -> (Vec<ClaimRecord>, usize) {
    let syntax = Syntax::of(d);
    let mut claims = Vec::new();
    let mut dropped = 0;
    for raw in segment(text, &syntax, Mode::Claims) {
        let Some((body, _)) = unwrap_record(&raw.text) else {
            continue;
        };
        let Some((re, _)) = syntax.tuple_for(body) else {
            if raw.keyword.is_some() {
                dropped += 1;
            }
            continue;
        };
        let mut fields: Vec<String> = re.split(body).map(clean_field).collect();
        if fields.first().and_then(|f| keyword_of(f)) == Some(Kind::Claim) {
            fields.remove(0);
        }
        if fields.len() < 3 {
            dropped += 1;
            continue;
        }
        let subject = normalize_name(&fields[0]);
        if subject.is_empty() {
            dropped += 1;
            continue;
        }
        let mut object = normalize_name(&fields[1]);
        if object.is_empty() {
            object = "NONE".to_string();
        }
        let get = |i: usize| fields.get(i).cloned().unwrap_or_default();
        claims.push(ClaimRecord {
            subject,
            object,
            claim_type: get(2).to_uppercase(),
            status: get(3).to_uppercase(),
            start_date: get(4),
            end_date: get(5),
            description: get(6),
            source_text: get(7),
        });
    }
    (claims, dropped)
}

// ---------------------------------------------------------------------------
// Syntax: the compiled delimiters.

struct Syntax {
    /// Candidate tuple delimiters in priority order; `true` marks LightRAG's.
    tuples: Vec<(Regex, bool)>,
    /// Any candidate tuple delimiter.
    any_tuple: Regex,
    /// Any candidate tuple delimiter at the start (after blanks).
    any_tuple_start: Regex,
    record_sep: Option<Regex>,
    completion: Option<Regex>,
    /// `)` directly followed by the `(` of a new entity/relationship record.
    boundary: Regex,
    /// The `(` opening an entity/relationship record somewhere in a line.
    record_open: Regex,
}

/// A regex matching `delim` with any blanks between its characters (and a
/// full-width `｜` for `|`, as DeepSeek-style models write it).
fn tolerant(delim: &str) -> Option<String> {
    let parts: Vec<String> = delim
        .chars()
        .filter(|c| !c.is_whitespace())
        .map(|c| match c {
            '|' => "[|\u{FF5C}]".to_string(),
            _ => regex::escape(&c.to_string()),
        })
        .collect();
    if parts.is_empty() {
        None
    } else {
        Some(parts.join("[ \t]*"))
    }
}

impl Syntax {
    /// The syntax of `d`, compiled once per delimiters: every answer of an
    /// extraction step is parsed (for its check and its records) with the
    /// same ones, and compiling the regexes cost more than parsing.
    fn of(d: &Delimiters) -> Arc<Syntax> {
        static LAST: Mutex<Option<(Delimiters, Arc<Syntax>)>> = Mutex::new(None);
        let mut last = LAST.lock().unwrap_or_else(|e| e.into_inner());
        match &*last {
            Some((known, syntax)) if known == d => syntax.clone(),
            _ => {
                let syntax = Arc::new(Syntax::new(d));
                *last = Some((d.clone(), syntax.clone()));
                syntax
            }
        }
    }

    fn new(d: &Delimiters) -> Syntax {
        // LightRAG's and the default delimiter first: a caller delimiter that
        // matches inside them (e.g. "|") must not split them apart.
        let mut patterns: Vec<(String, bool)> = Vec::new();
        let lightrag = tolerant(LIGHTRAG_TUPLE_DELIMITER).unwrap_or_default();
        for (delim, is_lr) in
            [(LIGHTRAG_TUPLE_DELIMITER, true), (DEFAULT_TUPLE_DELIMITER, false), (d.tuple.as_str(), false)]
        {
            if let Some(p) = tolerant(delim) {
                if !patterns.iter().any(|(q, _)| *q == p) {
                    patterns.push((p.clone(), is_lr || p == lightrag));
                }
            }
        }
        let tuples: Vec<(Regex, bool)> =
            patterns.iter().filter_map(|(p, lr)| Regex::new(p).ok().map(|r| (r, *lr))).collect();
        let alt = patterns.iter().map(|(p, _)| format!("(?:{p})")).collect::<Vec<_>>().join("|");
        let any_tuple = Regex::new(&alt).unwrap_or_else(|_| never());
        let any_tuple_start = Regex::new(&format!("^[ \t]*(?:{alt})")).unwrap_or_else(|_| never());

        let mut seps: Vec<String> = vec![regex::escape(DEFAULT_RECORD_DELIMITER)];
        if !d.record.trim().is_empty() && d.record != DEFAULT_RECORD_DELIMITER {
            seps.push(regex::escape(&d.record));
        }
        let record_sep = Regex::new(&seps.join("|")).ok();

        let mut comps: Vec<String> = Vec::new();
        for c in [d.completion.as_str(), DEFAULT_COMPLETION_DELIMITER] {
            if let Some(p) = tolerant(c) {
                if !comps.contains(&p) {
                    comps.push(p);
                }
            }
        }
        let completion = Regex::new(&format!("(?i:{})", comps.join("|"))).ok();

        let boundary = Regex::new(r#"\)[ \t]*\([ \t]*["'*`]*[ \t]*(?i:entity|relationship|relation)\b"#)
            .unwrap_or_else(|_| never());
        let record_open =
            Regex::new(r#"\([ \t]*["'*`]*[ \t]*(?i:entity|relationship|relation)\b"#).unwrap_or_else(|_| never());
        Syntax { tuples, any_tuple, any_tuple_start, record_sep, completion, boundary, record_open }
    }

    /// The first candidate tuple delimiter that occurs in `s`.
    fn tuple_for(&self, s: &str) -> Option<(&Regex, bool)> {
        self.tuples.iter().find(|(r, _)| r.is_match(s)).map(|(r, lr)| (r, *lr))
    }
}

/// A regex that matches nothing (fallback; the patterns above always compile).
fn never() -> Regex {
    Regex::new(r"[^\s\S]").expect("valid regex")
}

// ---------------------------------------------------------------------------
// Segmentation: text → raw records.

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    Graph,
    Claims,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Entity,
    Relationship,
    /// LightRAG's content keywords: recognised, not used, not counted.
    Ignored,
    Claim,
}

/// The record type named by a (cleaned) first field, if it is a known keyword.
fn keyword_of(field: &str) -> Option<Kind> {
    let w = field.trim_matches(|c: char| !(c.is_alphanumeric() || c == '_')).to_ascii_lowercase();
    match w.as_str() {
        "entity" | "entities" | "node" => Some(Kind::Entity),
        "relationship" | "relationships" | "relation" | "relations" | "edge" => Some(Kind::Relationship),
        "content_keywords" | "keywords" | "high_level_keywords" | "low_level_keywords" => Some(Kind::Ignored),
        "claim" | "claims" => Some(Kind::Claim),
        _ => None,
    }
}

/// A misspelt record type ("entitiy", "relatioship"), recognised with a small edit distance.
fn fuzzy_keyword(field: &str) -> Option<Kind> {
    let w = field.trim_matches(|c: char| !(c.is_alphanumeric() || c == '_')).to_ascii_lowercase();
    if w.len() < 4 || w.len() > 16 || !w.bytes().all(|b| b.is_ascii_lowercase()) {
        return None;
    }
    if strsim::levenshtein(&w, "entity") <= 2 {
        Some(Kind::Entity)
    } else if strsim::levenshtein(&w, "relationship") <= 3 || strsim::levenshtein(&w, "relation") <= 2 {
        Some(Kind::Relationship)
    } else {
        None
    }
}

#[derive(Debug)]
struct Raw {
    text: String,
    keyword: Option<Kind>,
}

struct Open {
    text: String,
    keyword: Option<Kind>,
    paren: bool,
    opens: usize,
    closes: usize,
    fields: usize,
    expected: usize,
    /// A parenthesised record whose closing parenthesis was seen.
    closed: bool,
}

impl Open {
    fn new(line: &str, keyword: Option<Kind>, mode: Mode, syntax: &Syntax) -> Open {
        let expected = match (mode, keyword) {
            (Mode::Claims, _) => 8,
            (_, Some(Kind::Entity)) => 4,
            (_, Some(Kind::Relationship)) => 5,
            (_, Some(Kind::Ignored)) => 2,
            _ => 4,
        };
        let mut o = Open {
            text: String::new(),
            keyword,
            paren: line.starts_with('('),
            opens: 0,
            closes: 0,
            fields: 1,
            expected,
            closed: false,
        };
        o.push(line, syntax);
        o
    }

    fn push(&mut self, line: &str, syntax: &Syntax) {
        if !self.text.is_empty() {
            self.text.push('\n');
        }
        self.text.push_str(line);
        self.opens += line.matches('(').count();
        self.closes += line.matches(')').count();
        self.fields += syntax.any_tuple.find_iter(line).count();
        let end = line.trim_end_matches(|c: char| c.is_whitespace() || c == ',' || c == ';');
        self.closed = self.paren && end.ends_with(')') && self.closes >= self.opens;
    }

    /// Whether the record looks finished: closed by its parenthesis, or (for
    /// records without one) holding all the fields its type needs.
    fn complete(&self) -> bool {
        if self.paren {
            self.closed
        } else {
            self.fields >= self.expected
        }
    }

    fn finish(self) -> Raw {
        Raw { text: self.text, keyword: self.keyword }
    }
}

/// Removes a list bullet or number ("- ", "* ", "1. ", "2) ") from a line start.
fn strip_bullet(t: &str) -> &str {
    for b in ["- ", "* ", "+ ", "\u{2022} ", "> "] {
        if let Some(rest) = t.strip_prefix(b) {
            return rest.trim_start();
        }
    }
    let digits = t.bytes().take_while(|b| b.is_ascii_digit()).count();
    if digits > 0 && digits < 4 {
        let rest = &t[digits..];
        for p in [". ", ") ", ".(", ")("] {
            if rest.starts_with(p) {
                return rest[1..].trim_start();
            }
        }
    }
    t
}

/// The record keyword a line starts with (`("entity"<|>`, `entity<|#|>`,
/// `**relationship**<|>`...): a keyword followed by a tuple delimiter, or any
/// keyword when the line opens with a parenthesis.
fn leading_keyword(core: &str, syntax: &Syntax) -> Option<Kind> {
    let paren = core.starts_with('(');
    let s = core
        .trim_start_matches(|c: char| c == '(' || c == '[' || c == '*' || c == '`' || is_quote(c) || c.is_whitespace());
    let end = s.find(|c: char| !(c.is_ascii_alphabetic() || c == '_')).unwrap_or(s.len());
    let kind = keyword_of(&s[..end])?;
    let rest =
        s[end..].trim_start_matches(|c: char| c == ']' || c == '*' || c == '`' || is_quote(c) || c.is_whitespace());
    if paren || syntax.any_tuple_start.is_match(rest) {
        Some(kind)
    } else {
        None
    }
}

fn looks_like_heading(t: &str) -> bool {
    t.starts_with('#') || t.ends_with(':') || (t.starts_with("**") && t.ends_with("**"))
}

/// Splits the output into raw records (see the module documentation).
fn segment(text: &str, syntax: &Syntax, mode: Mode) -> Vec<Raw> {
    let text = match syntax.completion.as_ref().and_then(|r| r.find(text)) {
        Some(m) => &text[..m.start()],
        None => text,
    };
    let mut pieces: Vec<&str> = Vec::new();
    let sep_pieces: Vec<&str> = match &syntax.record_sep {
        Some(r) => r.split(text).collect(),
        None => vec![text],
    };
    for piece in sep_pieces {
        if mode == Mode::Claims {
            pieces.push(piece);
            continue;
        }
        let mut start = 0;
        for m in syntax.boundary.find_iter(piece) {
            let cut = m.start() + 1; // after the ')'
            pieces.push(&piece[start..cut]);
            start = cut;
        }
        pieces.push(&piece[start..]);
    }

    let mut out = Vec::new();
    for piece in pieces {
        let mut open: Option<Open> = None;
        for line in piece.lines() {
            let t = line.trim();
            if t.is_empty() {
                continue;
            }
            if t.starts_with("```") || t.starts_with("~~~") {
                if let Some(o) = open.take() {
                    out.push(o.finish());
                }
                continue;
            }
            let core = strip_bullet(t);
            let keyword = leading_keyword(core, syntax);
            let clear_start = keyword.is_some() || core.starts_with('(');
            let has_delim = syntax.any_tuple.is_match(t);
            if clear_start {
                if let Some(o) = open.take() {
                    out.push(o.finish());
                }
                open = Some(Open::new(core, keyword, mode, syntax));
                continue;
            }
            let delim_first = has_delim && syntax.any_tuple_start.is_match(t);
            match open.take() {
                Some(mut o) => {
                    let new_record = has_delim && !delim_first && (o.complete() || (o.paren && o.fields >= o.expected));
                    if new_record {
                        out.push(o.finish());
                        open = Some(start_mid_line(t, mode, syntax));
                    } else if o.complete() && !has_delim {
                        // Prose after a finished record.
                        out.push(o.finish());
                    } else if !has_delim && o.fields >= o.expected && looks_like_heading(t) {
                        out.push(o.finish());
                    } else {
                        o.push(t, syntax);
                        open = Some(o);
                    }
                }
                None => {
                    if has_delim {
                        open = Some(start_mid_line(t, mode, syntax));
                    }
                }
            }
        }
        if let Some(o) = open.take() {
            out.push(o.finish());
        }
    }
    out
}

/// Starts a record on a line that holds a delimiter but does not open like a
/// record: prose before a `("entity"` on the same line is skipped.
fn start_mid_line(t: &str, mode: Mode, syntax: &Syntax) -> Open {
    if mode == Mode::Graph {
        if let Some(m) = syntax.record_open.find(t) {
            let core = &t[m.start()..];
            let keyword = leading_keyword(core, syntax);
            return Open::new(core, keyword, mode, syntax);
        }
    }
    Open::new(t, None, mode, syntax)
}

// ---------------------------------------------------------------------------
// Fields.

fn is_quote(c: char) -> bool {
    matches!(c, '"' | '\'' | '`' | '\u{201c}' | '\u{201d}' | '\u{2018}' | '\u{2019}')
}

fn closing_quote(c: char) -> Option<char> {
    match c {
        '"' => Some('"'),
        '\'' => Some('\''),
        '`' => Some('`'),
        '\u{201c}' => Some('\u{201d}'),
        '\u{2018}' => Some('\u{2019}'),
        _ => None,
    }
}

/// Strips matching pairs of surrounding quotes (and markdown `**`), repeatedly.
fn strip_quotes(s: &str) -> &str {
    let mut t = s.trim();
    loop {
        let before = t.len();
        if t.len() >= 4 && t.starts_with("**") && t.ends_with("**") {
            t = t[2..t.len() - 2].trim();
        }
        let mut cs = t.chars();
        if let (Some(first), Some(last)) = (cs.next(), cs.next_back()) {
            if closing_quote(first) == Some(last) {
                t = t[first.len_utf8()..t.len() - last.len_utf8()].trim();
            }
        }
        if t.len() == before {
            return t;
        }
    }
}

/// Cleans one field: surrounding quotes removed, a lone unbalanced quote at
/// either end removed, whitespace (newlines included) collapsed.
fn clean_field(s: &str) -> String {
    let mut t = strip_quotes(s);
    for q in ['"', '\u{201c}', '\u{201d}'] {
        if t.matches(q).count() == 1 {
            if let Some(r) = t.strip_prefix(q) {
                t = r.trim();
            } else if let Some(r) = t.strip_suffix(q) {
                t = r.trim();
            }
        }
    }
    let mut out = String::with_capacity(t.len());
    for w in t.split_whitespace() {
        if !out.is_empty() {
            out.push(' ');
        }
        out.push_str(w);
    }
    out
}

/// A number written as the whole field ("8", "7.5", "'9'", "**6**").
fn strict_number(s: &str) -> Option<f64> {
    let t = s.trim_matches(|c: char| c.is_whitespace() || is_quote(c) || c == '*');
    if t.is_empty() || t.len() > 32 {
        return None;
    }
    t.parse::<f64>().ok().filter(|v| v.is_finite())
}

/// A number inside a short field ("8/10", "strength: 7", "9 (strong)").
fn lenient_number(s: &str) -> Option<f64> {
    if s.len() > 40 {
        return None;
    }
    let start = s.find(|c: char| c.is_ascii_digit())?;
    let rest = &s[start..];
    let mut end = rest.find(|c: char| !c.is_ascii_digit()).unwrap_or(rest.len());
    if rest[end..].starts_with('.') {
        let frac = rest[end + 1..].find(|c: char| !c.is_ascii_digit()).unwrap_or(rest.len() - end - 1);
        if frac > 0 {
            end += 1 + frac;
        }
    }
    let v: f64 = rest[..end].parse().ok()?;
    let negative = s[..start].ends_with('-');
    Some(if negative { -v } else { v }).filter(|v| v.is_finite())
}

/// Strips the parentheses around a record. Returns the body and whether the
/// record was missing its closing (or opening) parenthesis.
fn unwrap_record(text: &str) -> Option<(&str, bool)> {
    let mut s = text.trim();
    let opens = s.matches('(').count();
    let closes = s.matches(')').count();
    let paren = s.starts_with('(');
    if paren {
        s = &s[1..];
    }
    s = s.trim_end_matches(|c: char| c.is_whitespace() || c == ',' || c == ';');
    let mut fixed = false;
    let balanced = if paren { closes >= opens } else { closes > opens };
    if s.ends_with(')') && balanced {
        // A record without its opening parenthesis counts as repaired.
        s = &s[..s.len() - 1];
        fixed = !paren;
    } else if paren {
        fixed = true;
    }
    let s = s.trim();
    if s.is_empty() {
        None
    } else {
        Some((s, fixed))
    }
}

// ---------------------------------------------------------------------------
// Graph records.

fn parse_graph_raw(raw: &Raw, syntax: &Syntax, out: &mut Extraction) {
    let Some((body, mut repaired)) = unwrap_record(&raw.text) else {
        if raw.keyword.is_some() {
            out.dropped += 1;
        }
        return;
    };
    let Some((re, lightrag)) = syntax.tuple_for(body) else {
        // No delimiter at all: prose, unless it announced itself as a record.
        if raw.keyword.is_some() {
            out.dropped += 1;
        }
        return;
    };
    let fields: Vec<String> = re.split(body).map(clean_field).collect();
    let (kind, data): (Option<Kind>, &[String]) = match keyword_of(&fields[0]) {
        Some(k) => (Some(k), &fields[1..]),
        None => match fuzzy_keyword(&fields[0]) {
            Some(k) => {
                repaired = true;
                (Some(k), &fields[1..])
            }
            None => {
                // No record type: infer it from the shape.
                repaired = true;
                let n = fields.len();
                let last_numeric = fields.last().and_then(|f| strict_number(f)).is_some();
                if n == 3 && !last_numeric {
                    (Some(Kind::Entity), &fields[..])
                } else if n >= 3 && last_numeric {
                    (Some(Kind::Relationship), &fields[..])
                } else {
                    (None, &fields[..])
                }
            }
        },
    };
    match kind {
        Some(Kind::Entity) => match entity(data, lightrag, &mut repaired) {
            Some(e) => {
                out.repaired += usize::from(repaired);
                out.entities.push(e);
            }
            None => out.dropped += 1,
        },
        Some(Kind::Relationship) => match relationship(data, lightrag, &mut repaired) {
            Some(r) => {
                out.repaired += usize::from(repaired);
                out.relationships.push(r);
            }
            None => out.dropped += 1,
        },
        Some(Kind::Ignored) => {}
        Some(Kind::Claim) | None => out.dropped += 1,
    }
}

fn entity(data: &[String], lightrag: bool, repaired: &mut bool) -> Option<EntityRecord> {
    let name = normalize_name(data.first()?);
    if name.is_empty() || data.len() < 2 {
        return None;
    }
    let raw_type = data[1].trim_matches(|c: char| matches!(c, '<' | '>' | '[' | ']' | '{' | '}') || c.is_whitespace());
    let entity_type = normalize_name(raw_type);
    if raw_type.is_empty() || (!lightrag && raw_type.chars().any(|c| c.is_lowercase())) {
        *repaired = true;
    }
    let description = match data.get(2) {
        Some(d) => d.clone(),
        None => {
            *repaired = true;
            String::new()
        }
    };
    Some(EntityRecord { name, entity_type, description })
}

fn relationship(data: &[String], lightrag: bool, repaired: &mut bool) -> Option<RelationshipRecord> {
    if data.len() < 2 {
        return None;
    }
    let source = normalize_name(&data[0]);
    let target = normalize_name(&data[1]);
    if source.is_empty() || target.is_empty() || source == target {
        return None;
    }
    let rest = &data[2..];
    let (description, strength) = if lightrag {
        // relation<|#|>SRC<|#|>TGT<|#|>KEYWORDS<|#|>DESCRIPTION[<|#|>STRENGTH]
        let num_at = rest.iter().rposition(|f| strict_number(f).is_some());
        let strength = num_at.and_then(|i| strict_number(&rest[i])).unwrap_or(1.0);
        let texts: Vec<&String> = rest.iter().enumerate().filter(|(i, _)| Some(*i) != num_at).map(|(_, f)| f).collect();
        let description = match texts.last() {
            Some(d) if !d.is_empty() => (*d).clone(),
            _ => texts.first().map(|k| (*k).clone()).unwrap_or_default(),
        };
        (description, strength)
    } else {
        match rest {
            [] => {
                *repaired = true;
                (String::new(), 1.0)
            }
            [only] => {
                *repaired = true;
                match strict_number(only) {
                    Some(v) => (String::new(), v),
                    None => (only.clone(), 1.0),
                }
            }
            [desc, extra @ ..] => {
                let last = extra.len() - 1;
                match extra.iter().rposition(|f| strict_number(f).is_some()) {
                    Some(i) => {
                        if i != last {
                            *repaired = true;
                        }
                        (desc.clone(), strict_number(&extra[i]).unwrap_or(1.0))
                    }
                    None => {
                        *repaired = true;
                        (desc.clone(), lenient_number(&extra[last]).unwrap_or(1.0))
                    }
                }
            }
        }
    };
    Some(RelationshipRecord { source, target, description, strength })
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn parse(text: &str) -> Extraction {
        parse_graph_records(text, &Delimiters::default())
    }

    fn names(x: &Extraction) -> Vec<&str> {
        x.entities.iter().map(|e| e.name.as_str()).collect()
    }

    fn pairs(x: &Extraction) -> Vec<(&str, &str, f64)> {
        x.relationships.iter().map(|r| (r.source.as_str(), r.target.as_str(), r.strength)).collect()
    }

    const GOOD: &str = r#"("entity"<|>EBENEZER SCROOGE<|>PERSON<|>Ebenezer Scrooge is a cold, miserly businessman who owns a counting-house in London)
##
("entity"<|>BOB CRATCHIT<|>PERSON<|>Bob Cratchit is Scrooge's underpaid clerk)
##
("entity"<|>JACOB MARLEY<|>PERSON<|>Jacob Marley was Scrooge's business partner, dead seven years, who returns as a ghost)
##
("entity"<|>LONDON<|>GEO<|>London is the city where Scrooge lives and works)
##
("relationship"<|>BOB CRATCHIT<|>EBENEZER SCROOGE<|>Bob Cratchit works as a clerk for Ebenezer Scrooge<|>9)
##
("relationship"<|>JACOB MARLEY<|>EBENEZER SCROOGE<|>Jacob Marley was Scrooge's partner and warns him as a ghost<|>8)
##
("relationship"<|>EBENEZER SCROOGE<|>LONDON<|>Scrooge's counting-house is in London<|>4)
<|COMPLETE|>"#;

    #[test]
    fn default_delimiters() {
        let d = Delimiters::default();
        assert_eq!((d.tuple.as_str(), d.record.as_str(), d.completion.as_str()), ("<|>", "##", "<|COMPLETE|>"));
    }

    #[test]
    fn well_formed_output() {
        let x = parse(GOOD);
        assert_eq!(names(&x), ["EBENEZER SCROOGE", "BOB CRATCHIT", "JACOB MARLEY", "LONDON"]);
        assert_eq!(x.entities[3].entity_type, "GEO");
        assert_eq!(x.entities[1].description, "Bob Cratchit is Scrooge's underpaid clerk");
        assert_eq!(
            pairs(&x),
            [
                ("BOB CRATCHIT", "EBENEZER SCROOGE", 9.0),
                ("JACOB MARLEY", "EBENEZER SCROOGE", 8.0),
                ("EBENEZER SCROOGE", "LONDON", 4.0)
            ]
        );
        assert_eq!(x.relationships[2].description, "Scrooge's counting-house is in London");
        assert_eq!((x.dropped, x.repaired), (0, 0));
    }

    #[test]
    fn records_on_one_line_and_newline_separated() {
        let one_line = GOOD.replace('\n', "");
        let x = parse(&one_line);
        assert_eq!((x.entities.len(), x.relationships.len(), x.dropped, x.repaired), (4, 3, 0, 0));
        let newline_only = GOOD.replace("##\n", "");
        let x = parse(&newline_only);
        assert_eq!((x.entities.len(), x.relationships.len(), x.dropped, x.repaired), (4, 3, 0, 0));
        // Adjacent records with neither a record delimiter nor a newline.
        let glued = GOOD.replace("\n##\n", "");
        let x = parse(&glued);
        assert_eq!((x.entities.len(), x.relationships.len(), x.dropped, x.repaired), (4, 3, 0, 0));
    }

    #[test]
    fn completion_and_anything_after_it_ignored() {
        let text = format!("{GOOD}\n(\"entity\"<|>AFTER<|>PERSON<|>should not appear)\nThanks!");
        let x = parse(&text);
        assert!(!names(&x).contains(&"AFTER"));
        let lower = GOOD.replace("<|COMPLETE|>", "<|complete|>\n(\"entity\"<|>AFTER<|>PERSON<|>no)");
        assert!(!names(&parse(&lower)).contains(&"AFTER"));
    }

    #[test]
    fn chatty_preamble_and_markdown_fences() {
        let text = format!(
            "Sure! Here are the entities and relationships I found in the text:\n\n```\n{GOOD}\n```\n\nLet me know if you need anything else."
        );
        let x = parse(&text);
        assert_eq!((x.entities.len(), x.relationships.len(), x.dropped, x.repaired), (4, 3, 0, 0));
        // Preamble on the same line as the first record, bullets, headings.
        let text = "Output: (\"entity\"<|>FRED<|>PERSON<|>Fred is Scrooge's nephew)\n\
                    ## Relationships:\n\
                    - (\"relationship\"<|>FRED<|>EBENEZER SCROOGE<|>Fred invites his uncle to dinner<|>7)\n\
                    1. (\"entity\"<|>EBENEZER SCROOGE<|>PERSON<|>A miser)\n";
        let x = parse(text);
        assert_eq!(names(&x), ["FRED", "EBENEZER SCROOGE"]);
        assert_eq!(pairs(&x), [("FRED", "EBENEZER SCROOGE", 7.0)]);
        assert_eq!((x.dropped, x.repaired), (0, 0));
    }

    #[test]
    fn quoted_and_unquoted_fields() {
        let text = r#"("entity"<|>"Bob Cratchit"<|>"PERSON"<|>"Scrooge's clerk")##(entity<|>'Tiny Tim'<|>PERSON<|>Bob's youngest son)##("relationship"<|>"Tiny Tim"<|>"bob cratchit"<|>"Tim is Bob's son"<|>"10")"#;
        let x = parse(text);
        assert_eq!(names(&x), ["BOB CRATCHIT", "TINY TIM"]);
        assert_eq!(x.entities[0].description, "Scrooge's clerk");
        assert_eq!(x.entities[0].entity_type, "PERSON");
        assert_eq!(pairs(&x), [("TINY TIM", "BOB CRATCHIT", 10.0)]);
        assert_eq!(x.relationships[0].description, "Tim is Bob's son");
        assert_eq!((x.dropped, x.repaired), (0, 0));
    }

    #[test]
    fn stray_whitespace_and_newlines_inside_records() {
        let text = "(  \"entity\" <|>  EBENEZER   SCROOGE <|> PERSON <|>\n  A squeezing, wrenching, grasping,\n scraping, clutching, covetous old sinner\n)\n##\n(\"relationship\"<|>EBENEZER SCROOGE\n<|>JACOB MARLEY<|>Partners in business\n<|> 8 )";
        let x = parse(text);
        assert_eq!(names(&x), ["EBENEZER SCROOGE"]);
        assert_eq!(
            x.entities[0].description,
            "A squeezing, wrenching, grasping, scraping, clutching, covetous old sinner"
        );
        assert_eq!(pairs(&x), [("EBENEZER SCROOGE", "JACOB MARLEY", 8.0)]);
        assert_eq!((x.dropped, x.repaired), (0, 0));
    }

    #[test]
    fn missing_closing_parenthesis_is_repaired() {
        let text = "(\"entity\"<|>BELLE<|>PERSON<|>Belle was once engaged to Scrooge (long ago)\n(\"entity\"<|>FEZZIWIG<|>PERSON<|>Scrooge's old employer)\n(\"relationship\"<|>FEZZIWIG<|>EBENEZER SCROOGE<|>Fezziwig employed young Scrooge<|>6";
        let x = parse(text);
        assert_eq!(names(&x), ["BELLE", "FEZZIWIG"]);
        assert_eq!(x.entities[0].description, "Belle was once engaged to Scrooge (long ago)");
        assert_eq!(pairs(&x), [("FEZZIWIG", "EBENEZER SCROOGE", 6.0)]);
        assert_eq!((x.dropped, x.repaired), (0, 2));
    }

    #[test]
    fn record_type_in_any_case() {
        let text = "(ENTITY<|>A<|>PERSON<|>a)##(Entity<|>B<|>PERSON<|>b)##(\"Relationship\"<|>A<|>B<|>ab<|>3)##(relation<|>B<|>C<|>bc<|>2)##(RELATIONSHIPS<|>C<|>A<|>ca<|>1)";
        let x = parse(text);
        assert_eq!(names(&x), ["A", "B"]);
        assert_eq!(pairs(&x), [("A", "B", 3.0), ("B", "C", 2.0), ("C", "A", 1.0)]);
        assert_eq!((x.dropped, x.repaired), (0, 0));
    }

    #[test]
    fn lowercase_entity_type_is_repaired() {
        let x = parse("(\"entity\"<|>Scrooge<|>person<|>a miser)##(\"entity\"<|>London<|>Geo<|>a city)");
        assert_eq!(names(&x), ["SCROOGE", "LONDON"]);
        assert_eq!(x.entities[0].entity_type, "PERSON");
        assert_eq!(x.entities[1].entity_type, "GEO");
        assert_eq!((x.dropped, x.repaired), (0, 2));
    }

    #[test]
    fn extra_fields_and_strength_position() {
        // Old LightRAG: description, keywords, strength.
        let x = parse("(\"relationship\"<|>A<|>B<|>A knows B<|>friendship, trust<|>7)");
        assert_eq!(pairs(&x), [("A", "B", 7.0)]);
        assert_eq!(x.relationships[0].description, "A knows B");
        assert_eq!((x.dropped, x.repaired), (0, 0));
        // Junk after the strength: the last numeric field is used, repaired.
        let x = parse("(\"relationship\"<|>A<|>B<|>A knows B<|>5<|>end)");
        assert_eq!(pairs(&x), [("A", "B", 5.0)]);
        assert_eq!(x.repaired, 1);
        // Extra entity fields are ignored.
        let x = parse("(\"entity\"<|>A<|>PERSON<|>desc<|>more<|>9)");
        assert_eq!(x.entities[0].description, "desc");
        assert_eq!((x.dropped, x.repaired), (0, 0));
    }

    #[test]
    fn bad_or_missing_strength_defaults_to_one() {
        let text = "(\"relationship\"<|>A<|>B<|>ab<|>strong)\n(\"relationship\"<|>B<|>C<|>bc)\n(\"relationship\"<|>C<|>D<|>cd<|>8/10)\n(\"relationship\"<|>D<|>E<|>de<|>NaN)\n(\"relationship\"<|>E<|>F<|>ef<|>**6**)\n(\"relationship\"<|>F<|>G<|>7.5)";
        let x = parse(text);
        assert_eq!(
            pairs(&x),
            [("A", "B", 1.0), ("B", "C", 1.0), ("C", "D", 8.0), ("D", "E", 1.0), ("E", "F", 6.0), ("F", "G", 7.5)]
        );
        assert_eq!(x.relationships[5].description, "");
        assert_eq!((x.dropped, x.repaired), (0, 5));
    }

    #[test]
    fn unusable_records_are_dropped() {
        let text = "(\"entity\"<|><|>PERSON<|>no name)\n(\"entity\"<|>\"\"<|>PERSON<|>quoted empty name)\n(\"entity\"<|>LONELY)\n(\"relationship\"<|>A<|>A<|>self loop<|>5)\n(\"relationship\"<|>A<|><|>no target<|>5)\n(\"relationship\"<|>A)\n(\"widget\"<|>X<|>Y<|>Z<|>W)\n(\"entity\" BROKEN PERSON no delimiters)\n(\"entity\"<|>OK<|>PERSON<|>fine)";
        let x = parse(text);
        assert_eq!(names(&x), ["OK"]);
        assert!(x.relationships.is_empty());
        assert_eq!((x.dropped, x.repaired), (8, 0));
    }

    #[test]
    fn missing_record_type_is_inferred() {
        let x = parse(
            "(SCROOGE<|>PERSON<|>A miser)##(SCROOGE<|>MARLEY<|>Partners<|>8)##(entitiy<|>MARLEY<|>PERSON<|>A ghost)",
        );
        assert_eq!(names(&x), ["SCROOGE", "MARLEY"]);
        assert_eq!(pairs(&x), [("SCROOGE", "MARLEY", 8.0)]);
        assert_eq!((x.dropped, x.repaired), (0, 3));
    }

    #[test]
    fn lightrag_new_format_detected_automatically() {
        let text = "entity<|#|>Alex<|#|>person<|#|>Alex is a character who experiences frustration.\n\
                    entity<|#|>Taylor<|#|>person<|#|>Taylor is portrayed with authoritarian certainty.\n\
                    relation<|#|>Alex<|#|>Taylor<|#|>power dynamics, observation<|#|>Alex observes Taylor's authoritarian behavior.\n\
                    relation<|#|>Taylor<|#|>Jordan<|#|>shared goals<|#|>\n\
                    <|COMPLETE|>";
        let x = parse(text);
        assert_eq!(names(&x), ["ALEX", "TAYLOR"]);
        assert_eq!(x.entities[0].entity_type, "PERSON");
        assert_eq!(pairs(&x), [("ALEX", "TAYLOR", 1.0), ("TAYLOR", "JORDAN", 1.0)]);
        assert_eq!(x.relationships[0].description, "Alex observes Taylor's authoritarian behavior.");
        // Empty description: the keywords stand in.
        assert_eq!(x.relationships[1].description, "shared goals");
        assert_eq!((x.dropped, x.repaired), (0, 0));
        // Same with the caller's LightRAG delimiters.
        let d = Delimiters { tuple: "<|#|>".into(), record: "\n".into(), completion: "<|COMPLETE|>".into() };
        let y = parse_graph_records(text, &d);
        assert_eq!(x, y);
    }

    #[test]
    fn old_lightrag_content_keywords_ignored() {
        let text = "(\"entity\"<|>\"Alex\"<|>\"person\"<|>\"Alex is frustrated.\")##\n(\"content_keywords\"<|>\"power dynamics, discovery\")<|COMPLETE|>";
        let x = parse(text);
        assert_eq!(names(&x), ["ALEX"]);
        assert_eq!(x.dropped, 0);
    }

    #[test]
    fn delimiter_spacing_tolerated() {
        let x = parse("(\"entity\"< | >A<| >PERSON< |>desc)##(\"relationship\" <|> A <|> B <|> ab <|> 2)");
        assert_eq!(names(&x), ["A"]);
        assert_eq!(x.entities[0].description, "desc");
        assert_eq!(pairs(&x), [("A", "B", 2.0)]);
    }

    #[test]
    fn full_width_bar_accepted() {
        let x = parse("(\"entity\"<\u{FF5C}>A<\u{FF5C}>PERSON<\u{FF5C}>desc)\n<\u{FF5C}COMPLETE\u{FF5C}>\n(\"entity\"<|>B<|>P<|>d)");
        assert_eq!(names(&x), ["A"]);
        assert_eq!(x.entities[0].description, "desc");
    }

    fn fixture(name: &str) -> Extraction {
        let text = match name {
            "gpt_clean" => include_str!("../fixtures/extraction/gpt_clean.txt"),
            "llama_chatty" => include_str!("../fixtures/extraction/llama_chatty.txt"),
            "small_model_broken" => include_str!("../fixtures/extraction/small_model_broken.txt"),
            "lightrag_zh" => include_str!("../fixtures/extraction/lightrag_zh.txt"),
            _ => unreachable!(),
        };
        parse(text)
    }

    #[test]
    fn fixture_gpt_clean() {
        let x = fixture("gpt_clean");
        assert_eq!(names(&x), ["HALVARD PORT AUTHORITY", "INES OKAFOR", "BRENNICK", "COASTAL DEVELOPMENT BANK"]);
        assert_eq!(x.relationships.len(), 3);
        assert_eq!((x.dropped, x.repaired), (0, 0));
    }

    #[test]
    fn fixture_llama_chatty() {
        let x = fixture("llama_chatty");
        assert_eq!(names(&x), ["TOMAS REYES", "LUMEN SYMPOSIUM", "KESTREL SENSOR", "MEI LINDQVIST"]);
        assert_eq!(x.entities[2].entity_type, "TECHNOLOGY");
        assert_eq!(
            x.entities[2].description,
            "The Kestrel sensor is a low-power chip that detects methane leaks; its design builds on research in thin-film optics"
        );
        assert_eq!(
            pairs(&x),
            [
                ("TOMAS REYES", "KESTREL SENSOR", 8.0),
                ("TOMAS REYES", "LUMEN SYMPOSIUM", 5.0),
                ("MEI LINDQVIST", "TOMAS REYES", 1.0)
            ]
        );
        assert_eq!((x.dropped, x.repaired), (0, 1));
    }

    #[test]
    fn fixture_small_model_broken() {
        let x = fixture("small_model_broken");
        assert_eq!(names(&x), ["HALVARD PORT AUTHORITY", "INES OKAFOR", "BRENNICK", "BRENNICK"]);
        assert_eq!(x.entities[0].entity_type, "ORGANIZATION");
        assert_eq!(x.entities[0].description, "The port authority of Halvard");
        assert_eq!(x.entities[2].description, "A town (on the coast)");
        assert_eq!(x.entities[3].description, "");
        assert_eq!(
            pairs(&x),
            [
                ("INES OKAFOR", "HALVARD PORT AUTHORITY", 9.0),
                ("INES OKAFOR", "BRENNICK", 1.0),
                ("COASTAL DEVELOPMENT BANK", "HALVARD PORT AUTHORITY", 8.0)
            ]
        );
        assert_eq!(x.relationships[2].description, "The bank lends money to the port authority");
        assert_eq!((x.dropped, x.repaired), (3, 5));
    }

    #[test]
    fn fixture_lightrag_chinese() {
        let x = fixture("lightrag_zh");
        assert_eq!(names(&x), ["李白", "杜甫", "长安"]);
        assert_eq!(x.entities[2].entity_type, "LOCATION");
        assert_eq!(x.entities[0].description, "李白是唐代最著名的浪漫主义诗人之一，被后人誉为“诗仙”。");
        assert_eq!(pairs(&x), [("李白", "杜甫", 1.0), ("李白", "长安", 1.0), ("杜甫", "长安", 1.0)]);
        assert_eq!(x.relationships[0].description, "李白与杜甫在洛阳相识，结下深厚友谊。");
        assert_eq!((x.dropped, x.repaired), (0, 0));
    }

    #[test]
    fn default_delimiters_recognised_when_callers_differ() {
        let d = Delimiters { tuple: "{TD}".into(), record: "{RD}".into(), completion: "{CD}".into() };
        // The text uses the caller's delimiters.
        let x = parse_graph_records("(\"entity\"{TD}A{TD}PERSON{TD}a){RD}(\"relationship\"{TD}A{TD}B{TD}ab{TD}4){CD}(\"entity\"{TD}Z{TD}P{TD}z)", &d);
        assert_eq!(names(&x), ["A"]);
        assert_eq!(pairs(&x), [("A", "B", 4.0)]);
        // The model ignored them and used GraphRAG's defaults.
        let x = parse_graph_records(GOOD, &d);
        assert_eq!((x.entities.len(), x.relationships.len(), x.dropped), (4, 3, 0));
        // A caller delimiter that occurs inside the default one does not split it.
        let bar = Delimiters { tuple: "|".into(), ..Delimiters::default() };
        let x = parse_graph_records(GOOD, &bar);
        assert_eq!((x.entities.len(), x.relationships.len(), x.dropped), (4, 3, 0));
        let x = parse_graph_records("(\"entity\"|A|PERSON|a)##(\"relationship\"|A|B|ab|4)", &bar);
        assert_eq!(names(&x), ["A"]);
        assert_eq!(pairs(&x), [("A", "B", 4.0)]);
    }

    #[test]
    fn small_model_messy_output() {
        // Qwen-0.5B-style: numbered, bold record types, smart quotes, a missing
        // paren, Chinese names, a trailing explanation.
        let text = "Here is the extracted information:\n\n\
            1. (**entity**<|>“李白”<|>PERSON<|>李白是唐代诗人)\n\
            2. (**entity**<|>长安<|>geo<|>Chang'an, capital of the Tang dynasty\n\
            3. (**relationship**<|>李白<|>长安<|>Li Bai lived in Chang'an for a time<|>relationship strength: 6)\n\
            4. (**relationship**<|>李白<|>李白<|>self<|>3)\n\n\
            Note: I have extracted all entities.\n";
        let x = parse(text);
        assert_eq!(names(&x), ["李白", "长安"]);
        assert_eq!(x.entities[0].description, "李白是唐代诗人");
        assert_eq!(x.entities[1].entity_type, "GEO");
        assert_eq!(x.entities[1].description, "Chang'an, capital of the Tang dynasty");
        assert_eq!(pairs(&x), [("李白", "长安", 6.0)]);
        // Repaired: lowercase type + missing paren (one count), bad strength; dropped: self loop.
        assert_eq!((x.dropped, x.repaired), (1, 2));
    }

    #[test]
    fn missing_delimiters_between_records() {
        // The model forgot the record delimiter and one record lost its parens.
        let text = "(\"entity\"<|>A<|>PERSON<|>a) (\"entity\"<|>B<|>PERSON<|>b)\n\"entity\"<|>C<|>PERSON<|>c\n(\"relationship\"<|>A<|>C<|>ac<|>2)";
        let x = parse(text);
        assert_eq!(names(&x), ["A", "B", "C"]);
        assert_eq!(pairs(&x), [("A", "C", 2.0)]);
        assert_eq!(x.dropped, 0);
    }

    #[test]
    fn normalize_name_cases() {
        assert_eq!(normalize_name("  \"Ebenezer   Scrooge\" "), "EBENEZER SCROOGE");
        assert_eq!(normalize_name("'bob\ncratchit'"), "BOB CRATCHIT");
        assert_eq!(normalize_name("“Marley”"), "MARLEY");
        assert_eq!(normalize_name("O'Brien"), "O'BRIEN");
        assert_eq!(normalize_name("москва"), "МОСКВА");
        assert_eq!(normalize_name("\"\""), "");
        assert_eq!(normalize_name("a\u{0}b"), "AB");
    }

    #[test]
    fn claims() {
        let text = "(NORTHWIND LOGISTICS<|>MARITIME SAFETY BOARD<|>FALSIFIED RECORDS<|>TRUE<|>2021-01-01T00:00:00<|>2022-06-30T00:00:00<|>Northwind Logistics falsified inspection records<|>A report published on 2023-03-14 states that Northwind Logistics was fined (heavily).)\n##\n(dara quinn<|><|>falsified records<|>suspected<|>NONE<|>NONE<|>Dara Quinn is under investigation<|>The report adds...\n##\n(<|>X<|>Y<|>TRUE)\n##\n(ONLY<|>TWO)\n<|COMPLETE|>\n(AFTER<|>X<|>Y<|>TRUE)";
        let (claims, dropped) = parse_claim_records(text, &Delimiters::default());
        assert_eq!(dropped, 2);
        assert_eq!(claims.len(), 2);
        assert_eq!(claims[0].subject, "NORTHWIND LOGISTICS");
        assert_eq!(claims[0].object, "MARITIME SAFETY BOARD");
        assert_eq!(claims[0].status, "TRUE");
        assert_eq!(claims[0].start_date, "2021-01-01T00:00:00");
        assert_eq!(claims[0].end_date, "2022-06-30T00:00:00");
        assert_eq!(
            claims[0].source_text,
            "A report published on 2023-03-14 states that Northwind Logistics was fined (heavily)."
        );
        assert_eq!(claims[1].subject, "DARA QUINN");
        assert_eq!(claims[1].object, "NONE");
        assert_eq!(claims[1].claim_type, "FALSIFIED RECORDS");
        assert_eq!(claims[1].status, "SUSPECTED");
        assert_eq!(claims[1].source_text, "The report adds...");
    }

    #[test]
    fn claims_multiline_without_record_delimiter() {
        let text = "(A<|>B<|>FRAUD<|>TRUE<|>NONE<|>NONE<|>A defrauded\nB over years<|>quote one)\n(C<|>NONE<|>FRAUD<|>FALSE<|>NONE<|>NONE<|>desc<|>quote two)";
        let (claims, dropped) = parse_claim_records(text, &Delimiters::default());
        assert_eq!(dropped, 0);
        assert_eq!(claims.len(), 2);
        assert_eq!(claims[0].description, "A defrauded B over years");
        assert_eq!(claims[1].subject, "C");
    }

    #[test]
    fn degenerate_inputs() {
        for t in [
            "",
            "(",
            ")",
            "<|>",
            "##",
            "<|COMPLETE|>",
            "(\"entity\"",
            "((((",
            "<|><|><|>",
            "entity<|#|>",
            "\u{0}",
            "(<|>)",
        ] {
            let x = parse(t);
            assert!(x.entities.is_empty() && x.relationships.is_empty(), "{t:?}");
            let _ = parse_claim_records(t, &Delimiters::default());
        }
        let weird = Delimiters { tuple: String::new(), record: " ".into(), completion: String::new() };
        let x = parse_graph_records(GOOD, &weird);
        assert_eq!(x.entities.len(), 4);
    }

    #[test]
    fn linear_time_on_large_input() {
        let mut big = String::new();
        for i in 0..20_000 {
            big.push_str(&format!("(\"entity\"<|>E{i}<|>PERSON<|>desc {i})##\n"));
        }
        big.push_str(&"(".repeat(100_000));
        big.push_str(&"<|>".repeat(100_000));
        let start = std::time::Instant::now();
        let x = parse(&big);
        assert_eq!(x.entities.len(), 20_000);
        assert!(start.elapsed().as_secs() < 20);
    }

    /// Valid output to mutate in the property tests.
    fn valid_output() -> String {
        let mut s = GOOD.to_string();
        s.push_str("\nentity<|#|>Alex<|#|>person<|#|>desc\nrelation<|#|>Alex<|#|>Bo<|#|>kw<|#|>desc\n");
        s
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(512))]

        #[test]
        fn never_panics_on_arbitrary_text(s in ".{0,400}") {
            let x = parse(&s);
            for e in &x.entities {
                prop_assert!(!e.name.is_empty());
            }
            for r in &x.relationships {
                prop_assert!(r.source != r.target && !r.source.is_empty() && !r.target.is_empty());
                prop_assert!(r.strength.is_finite());
            }
            let _ = parse_claim_records(&s, &Delimiters::default());
        }

        #[test]
        fn never_panics_on_delimiter_soup(parts in proptest::collection::vec(
            prop_oneof![
                Just("<|>".to_string()), Just("<|#|>".to_string()), Just("##".to_string()),
                Just("(".to_string()), Just(")".to_string()), Just("\"".to_string()),
                Just("\n".to_string()), Just("entity".to_string()), Just("relationship".to_string()),
                Just("<|COMPLETE|>".to_string()), Just("7".to_string()), "[a-zA-Zé李 ]{0,6}",
            ], 0..60)) {
            let s: String = parts.concat();
            let _ = parse(&s);
            let _ = parse_claim_records(&s, &Delimiters::default());
        }

        #[test]
        fn never_panics_on_mutated_output(
            cut in 0usize..2000,
            edits in proptest::collection::vec((0usize..2000, 0usize..8, ".{0,3}"), 0..12),
        ) {
            let mut s = valid_output();
            for (pos, len, insert) in edits {
                let mut p = pos.min(s.len());
                while !s.is_char_boundary(p) { p -= 1; }
                let mut e = (p + len).min(s.len());
                while !s.is_char_boundary(e) { e -= 1; }
                s.replace_range(p..e, &insert);
            }
            let mut c = cut.min(s.len());
            while !s.is_char_boundary(c) { c -= 1; }
            let x = parse(&s[..c]);
            for r in &x.relationships {
                prop_assert!(r.source != r.target && !r.source.is_empty());
            }
            let _ = parse_claim_records(&s[..c], &Delimiters::default());
        }

        #[test]
        fn truncation_keeps_earlier_records(cut in 0usize..1200) {
            let s = GOOD;
            let mut c = cut.min(s.len());
            while !s.is_char_boundary(c) { c -= 1; }
            let x = parse(&s[..c]);
            let full = parse(s);
            // Every entity parsed from a prefix is a prefix of the full list,
            // except possibly the last (truncated) one.
            let n = x.entities.len();
            prop_assert!(n <= full.entities.len());
            for i in 0..n.saturating_sub(1) {
                prop_assert_eq!(&x.entities[i], &full.entities[i]);
            }
        }
    }
}
