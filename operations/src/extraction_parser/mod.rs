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
mod tests;
