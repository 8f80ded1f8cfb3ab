//! Tolerant JSON parsing for LLM output.
//!
//! LLMs asked for JSON wrap it in prose and Markdown fences, use Python or
//! JavaScript syntax, and get cut off by token limits. [`parse_lenient`]
//! recovers the value when it can and reports which [`Repair`]s it needed, so
//! callers can count them in their stats.
//!
//! Valid JSON is handed straight to `serde_json`. Anything else goes through a
//! single-pass, non-recursive tokenizer/repairer that starts at the first `{`
//! or `[`, emits valid JSON text for one top-level value and hands that to
//! `serde_json`. When a candidate start turns out not to be JSON (say the `[1]`
//! of a citation that is followed by garbage), scanning resumes at the token
//! where it failed, so the whole search stays linear in the input.

use serde_json::Value;

/// Deepest nesting accepted. `serde_json` refuses deeper documents (its
/// recursion limit is 128), so repairing them would be pointless; the repairer
/// itself never recurses.
const MAX_DEPTH: usize = 127;

/// The parsed value and the repairs applied (empty when the text was valid JSON as is).
#[derive(Debug, Clone, PartialEq)]
pub struct Lenient {
    pub value: serde_json::Value,
    /// Each kind at most once, in the order first needed (fence and prose first).
    pub repairs: Vec<Repair>,
}

/// One kind of damage that [`parse_lenient`] undid.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Repair {
    /// The JSON sat in a Markdown code fence (```` ```json ````).
    CodeFence,
    /// Non-blank text before or after the JSON value.
    SurroundingProse,
    /// Single-quoted strings or keys, or a `\'` escape.
    SingleQuotes,
    /// A comma before `}`/`]` (or a doubled comma).
    TrailingComma,
    /// The text ended inside the value: open strings and containers were
    /// closed and a dangling key, `:` or half-written number dropped.
    Truncated,
    /// An object key written as a bare identifier (or number).
    UnquotedKey,
    /// Python `True`, `False` or `None`.
    PythonLiteral,
    /// A raw control character (newline, tab, ...) in a string, an invalid
    /// escape such as `\d`, or an unpaired UTF-16 surrogate escape.
    ControlCharacter,
    /// A `// ...` or `/* ... */` comment.
    Comment,
    /// Two elements or members with no comma between them.
    MissingComma,
}

impl Repair {
    /// snake_case name for stats.
    pub fn name(self) -> &'static str {
        match self {
            Repair::CodeFence => "code_fence",
            Repair::SurroundingProse => "surrounding_prose",
            Repair::SingleQuotes => "single_quotes",
            Repair::TrailingComma => "trailing_comma",
            Repair::Truncated => "truncated",
            Repair::UnquotedKey => "unquoted_key",
            Repair::PythonLiteral => "python_literal",
            Repair::ControlCharacter => "control_character",
            Repair::Comment => "comment",
            Repair::MissingComma => "missing_comma",
        }
    }
}

/// Parses JSON out of LLM output, repairing it where needed.
///
/// Valid JSON (of any type) is returned as is. Otherwise the first complete
/// top-level object or array is taken, preferring the content of a Markdown
/// code fence. Err carries a short reason, e.g. "no JSON object or array found".
pub fn parse_lenient(text: &str) -> Result<Lenient, String> {
    parse(text, false)
}

/// Like parse_lenient but requires a JSON object at the top level.
///
/// Top-level arrays met while scanning (such as a `[1]` citation in the prose)
/// are skipped, so an object after them is still found.
pub fn parse_object(text: &str) -> Result<Lenient, String> {
    parse(text, true)
}

fn parse(text: &str, want_object: bool) -> Result<Lenient, String> {
    let mut search = Search { want_object, failure: None, non_object: None, repairer: Repairer::default() };
    if let Ok(value) = serde_json::from_str::<Value>(text) {
        if !want_object || value.is_object() {
            return Ok(Lenient { value, repairs: Vec::new() });
        }
        search.non_object = Some(kind_name(&value));
    }
    if let Some(start) = fence_content_start(text) {
        if let Some(found) = search.scan(text, start)? {
            return Ok(found);
        }
    }
    if let Some(found) = search.scan(text, 0)? {
        return Ok(found);
    }
    Err(match (search.failure, search.non_object) {
        (Some(failure), _) => failure,
        (None, Some(kind)) => format!("expected a JSON object at the top level, found {kind}"),
        (None, None) if want_object => "no JSON object found".to_string(),
        (None, None) => "no JSON object or array found".to_string(),
    })
}

fn kind_name(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// Byte offset just past the first Markdown fence opener (```` ``` ```` at the
/// start of a line plus an optional language tag), if any.
fn fence_content_start(text: &str) -> Option<usize> {
    let bytes = text.as_bytes();
    let mut line_start = true;
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'\n' => line_start = true,
            b' ' | b'\t' | b'\r' => {}
            b'`' if line_start && bytes[i..].starts_with(b"```") => {
                let mut j = i + 3;
                while j < bytes.len() && is_tag_byte(bytes[j]) {
                    j += 1;
                }
                return Some(j);
            }
            _ => line_start = false,
        }
        i += 1;
    }
    None
}

fn is_tag_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || matches!(b, b'_' | b'+' | b'.' | b'-')
}

fn is_blank(s: &str) -> bool {
    s.chars().all(|c| c.is_whitespace() || c == '\u{feff}')
}

/// Fence and prose repairs implied by the text around `text[start..end]`.
fn surroundings(text: &str, start: usize, end: usize) -> Vec<Repair> {
    let prefix = &text[..start];
    let (opened, before) = match prefix.rfind("```") {
        Some(i) => {
            let after = &prefix[i + 3..];
            let tag = after.bytes().take_while(|&b| is_tag_byte(b)).count();
            if is_blank(&after[tag..]) {
                (true, &prefix[..i])
            } else {
                (false, prefix)
            }
        }
        None => (false, prefix),
    };
    let suffix = text[end..].trim_start();
    let (closed, after) = match suffix.strip_prefix("```") {
        Some(rest) => (true, rest),
        None => (false, suffix),
    };
    let mut repairs = Vec::new();
    if opened || closed {
        repairs.push(Repair::CodeFence);
    }
    if !is_blank(before) || !is_blank(after) {
        repairs.push(Repair::SurroundingProse);
    }
    repairs
}

/// State of the search for a top-level value across candidate starts.
struct Search {
    want_object: bool,
    /// Why the first failed candidate failed.
    failure: Option<String>,
    /// What was found instead of an object (parse_object only).
    non_object: Option<&'static str>,
    repairer: Repairer,
}

impl Search {
    /// Tries candidate starts (`{` or `[`) from `from` on. Ok(None): nothing
    /// usable; Err: a reason to give up on the whole text (too deep).
    fn scan(&mut self, text: &str, from: usize) -> Result<Option<Lenient>, String> {
        let bytes = text.as_bytes();
        let mut pos = from;
        while let Some(offset) = bytes[pos..].iter().position(|&b| b == b'{' || b == b'[') {
            let start = pos + offset;
            match self.repairer.run(text, start) {
                Ok(end) => match serde_json::from_str::<Value>(&self.repairer.out) {
                    Ok(value) if self.want_object && !value.is_object() => {
                        self.non_object.get_or_insert(kind_name(&value));
                        pos = end;
                    }
                    Ok(value) => {
                        let mut repairs = surroundings(text, start, end);
                        for &r in &self.repairer.repairs {
                            if !repairs.contains(&r) {
                                repairs.push(r);
                            }
                        }
                        return Ok(Some(Lenient { value, repairs }));
                    }
                    Err(e) => {
                        self.failure.get_or_insert_with(|| e.to_string());
                        pos = end;
                    }
                },
                Err(Fail::TooDeep) => {
                    return Err(format!("JSON nested deeper than {MAX_DEPTH} levels"));
                }
                Err(Fail::At { at, resume }) => {
                    if self.failure.is_none() {
                        self.failure = Some(describe_failure(text, at));
                    }
                    pos = resume.max(start + 1);
                }
            }
        }
        Ok(None)
    }
}

fn describe_failure(text: &str, at: usize) -> String {
    match text[at..].chars().next() {
        Some(c) => format!("unexpected {c:?} at byte {at}"),
        None => format!("unexpected end of input at byte {at}"),
    }
}

/// Why a candidate start did not yield a value.
enum Fail {
    /// Nesting beyond [`MAX_DEPTH`].
    TooDeep,
    /// Unrepairable token at byte `at`; the search for another start resumes
    /// at `resume` (past any trivia already looked through).
    At { at: usize, resume: usize },
}

impl Fail {
    fn at(at: usize) -> Self {
        Fail::At { at, resume: at }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Tok {
    /// `{` (true) or `[` (false).
    Open(bool),
    /// `}` (true) or `]` (false).
    Close(bool),
    Colon,
    Comma,
    /// A string; its escaped body is in `Lexer::scratch`. `closed` is false
    /// when the text ended inside it.
    Str {
        closed: bool,
    },
    /// A run of number characters, `valid` when it is a JSON number.
    Num {
        valid: bool,
    },
    /// A bare word: a literal or an unquoted key.
    Ident,
    /// A character that cannot start a token.
    Bad,
    /// End of input, or a backtick outside a string (a closing code fence).
    Eof,
}

struct Lexer<'a> {
    text: &'a str,
    bytes: &'a [u8],
    pos: usize,
    /// Start of the last token.
    start: usize,
    /// Escaped body of the last string token.
    scratch: String,
    /// Furthest position a failed look-ahead reached.
    resume: usize,
}

impl<'a> Lexer<'a> {
    fn new(text: &'a str, pos: usize, scratch: String) -> Self {
        Lexer { text, bytes: text.as_bytes(), pos, start: pos, scratch, resume: 0 }
    }

    fn peek_byte(&self, at: usize) -> Option<u8> {
        self.bytes.get(at).copied()
    }

    /// Skips whitespace and comments, recording comments when `repairs` is given.
    fn skip_trivia(&mut self, mut repairs: Option<&mut Repairs>) {
        while let Some(b) = self.peek_byte(self.pos) {
            match b {
                b' ' | b'\t' | b'\n' | b'\r' | 0x0c => self.pos += 1,
                b'/' if self.peek_byte(self.pos + 1) == Some(b'/') => {
                    if let Some(r) = repairs.as_deref_mut() {
                        r.add(Repair::Comment);
                    }
                    self.pos = match self.bytes[self.pos..].iter().position(|&b| b == b'\n') {
                        Some(n) => self.pos + n + 1,
                        None => self.bytes.len(),
                    };
                }
                b'/' if self.peek_byte(self.pos + 1) == Some(b'*') => {
                    if let Some(r) = repairs.as_deref_mut() {
                        r.add(Repair::Comment);
                    }
                    self.pos = match self.text[self.pos + 2..].find("*/") {
                        Some(n) => self.pos + 2 + n + 2,
                        None => self.bytes.len(),
                    };
                }
                0x80..=0xff => match self.text[self.pos..].chars().next() {
                    Some(c) if c.is_whitespace() || c == '\u{feff}' => self.pos += c.len_utf8(),
                    _ => return,
                },
                _ => return,
            }
        }
    }

    /// Whether only whitespace, comments and then the end of input follow.
    /// When not, `resume` is set past that trivia: the caller is about to
    /// fail, and a retry must not walk through the same comment again.
    fn at_eof(&mut self) -> bool {
        let saved = self.pos;
        self.skip_trivia(None);
        let eof = matches!(self.peek_byte(self.pos), None | Some(b'`'));
        if !eof {
            self.resume = self.resume.max(self.pos);
        }
        self.pos = saved;
        eof
    }

    fn next(&mut self, repairs: &mut Repairs) -> Tok {
        self.skip_trivia(Some(repairs));
        self.start = self.pos;
        let Some(b) = self.peek_byte(self.pos) else {
            return Tok::Eof;
        };
        match b {
            b'`' => Tok::Eof,
            b'{' | b'[' | b'}' | b']' | b':' | b',' => {
                self.pos += 1;
                match b {
                    b'{' => Tok::Open(true),
                    b'[' => Tok::Open(false),
                    b'}' => Tok::Close(true),
                    b']' => Tok::Close(false),
                    b':' => Tok::Colon,
                    _ => Tok::Comma,
                }
            }
            b'"' => self.string(b'"', repairs),
            b'\'' => {
                repairs.add(Repair::SingleQuotes);
                self.string(b'\'', repairs)
            }
            b'-' | b'0'..=b'9' => {
                let len = self.bytes[self.pos..]
                    .iter()
                    .take_while(|&&b| matches!(b, b'0'..=b'9' | b'-' | b'+' | b'.' | b'e' | b'E'))
                    .count();
                self.pos += len;
                Tok::Num { valid: is_json_number(&self.bytes[self.start..self.pos]) }
            }
            _ => {
                let mut chars = self.text[self.pos..].chars();
                match chars.next() {
                    Some(c) if c.is_alphabetic() || c == '_' || c == '$' => {
                        self.pos += c.len_utf8();
                        for c in chars {
                            if c.is_alphanumeric() || c == '_' || c == '$' {
                                self.pos += c.len_utf8();
                            } else {
                                break;
                            }
                        }
                        Tok::Ident
                    }
                    _ => Tok::Bad,
                }
            }
        }
    }

    /// Text of the last token.
    fn token(&self) -> &'a str {
        &self.text[self.start..self.pos]
    }

    /// Whether a single quote at `self.pos` ends the string: it does when a
    /// structural character, a comment, a line break or the end follows;
    /// otherwise it is an apostrophe inside the text.
    fn single_quote_closes(&self) -> bool {
        let mut i = self.pos + 1;
        while let Some(b) = self.peek_byte(i) {
            match b {
                b'\n' | b'\r' => return true,
                b' ' | b'\t' => i += 1,
                b',' | b':' | b'}' | b']' | b'`' => return true,
                b'/' => return matches!(self.peek_byte(i + 1), Some(b'/' | b'*')),
                _ => return false,
            }
        }
        true
    }

    /// Lexes a string opened by `quote` at `self.pos` into `scratch` as a
    /// valid JSON string body.
    fn string(&mut self, quote: u8, repairs: &mut Repairs) -> Tok {
        self.scratch.clear();
        self.pos += 1;
        let mut run = self.pos;
        loop {
            let Some(b) = self.peek_byte(self.pos) else {
                self.scratch.push_str(&self.text[run..]);
                return Tok::Str { closed: false };
            };
            match b {
                _ if b == quote && (quote == b'"' || self.single_quote_closes()) => {
                    self.scratch.push_str(&self.text[run..self.pos]);
                    self.pos += 1;
                    return Tok::Str { closed: true };
                }
                b'\'' => {
                    // Apostrophe inside a single-quoted string: kept as is.
                    self.pos += 1;
                }
                b'"' => {
                    // Double quote inside a single-quoted string.
                    self.scratch.push_str(&self.text[run..self.pos]);
                    self.scratch.push_str("\\\"");
                    self.pos += 1;
                    run = self.pos;
                }
                b'\\' => {
                    self.scratch.push_str(&self.text[run..self.pos]);
                    if !self.escape(repairs) {
                        // The text ended inside the escape: drop it.
                        self.pos = self.bytes.len();
                        return Tok::Str { closed: false };
                    }
                    run = self.pos;
                }
                0x00..=0x1f => {
                    repairs.add(Repair::ControlCharacter);
                    self.scratch.push_str(&self.text[run..self.pos]);
                    match b {
                        b'\n' => self.scratch.push_str("\\n"),
                        b'\r' => self.scratch.push_str("\\r"),
                        b'\t' => self.scratch.push_str("\\t"),
                        0x08 => self.scratch.push_str("\\b"),
                        0x0c => self.scratch.push_str("\\f"),
                        _ => self.scratch.push_str(&format!("\\u{b:04x}")),
                    }
                    self.pos += 1;
                    run = self.pos;
                }
                _ => self.pos += 1,
            }
        }
    }

    /// Handles the escape whose backslash is at `self.pos`, appending valid
    /// JSON to `scratch`. Returns false when the text ends inside it.
    fn escape(&mut self, repairs: &mut Repairs) -> bool {
        let at = self.pos;
        let Some(b) = self.peek_byte(at + 1) else {
            return false;
        };
        match b {
            b'"' | b'\\' | b'/' | b'b' | b'f' | b'n' | b'r' | b't' => {
                self.scratch.push_str(&self.text[at..at + 2]);
                self.pos = at + 2;
            }
            b'\'' => {
                repairs.add(Repair::SingleQuotes);
                self.scratch.push('\'');
                self.pos = at + 2;
            }
            b'u' => match hex4(self.bytes, at + 2) {
                Some(unit) if (0xD800..0xDC00).contains(&unit) => {
                    let low = match self.bytes.get(at + 6..at + 8) {
                        Some(b"\\u") => hex4(self.bytes, at + 8),
                        _ => None,
                    };
                    match low {
                        Some(low) if (0xDC00..0xE000).contains(&low) => {
                            self.scratch.push_str(&self.text[at..at + 12]);
                            self.pos = at + 12;
                        }
                        // The text ends inside the pair: drop both halves.
                        _ if at + 6 == self.bytes.len() || is_partial_unicode_escape(&self.bytes[at + 6..]) => {
                            return false
                        }
                        _ => {
                            repairs.add(Repair::ControlCharacter);
                            self.scratch.push_str("\\ufffd");
                            self.pos = at + 6;
                        }
                    }
                }
                Some(unit) if (0xDC00..0xE000).contains(&unit) => {
                    repairs.add(Repair::ControlCharacter);
                    self.scratch.push_str("\\ufffd");
                    self.pos = at + 6;
                }
                Some(_) => {
                    self.scratch.push_str(&self.text[at..at + 6]);
                    self.pos = at + 6;
                }
                None if is_partial_unicode_escape(&self.bytes[at..]) => return false,
                None => {
                    repairs.add(Repair::ControlCharacter);
                    self.scratch.push_str("\\\\");
                    self.pos = at + 1;
                }
            },
            _ => {
                // Invalid escape such as `\d`: keep the backslash literally.
                repairs.add(Repair::ControlCharacter);
                self.scratch.push_str("\\\\");
                self.pos = at + 1;
            }
        }
        true
    }
}

/// Four hex digits at `at` as a UTF-16 code unit.
fn hex4(bytes: &[u8], at: usize) -> Option<u16> {
    let digits = bytes.get(at..at + 4)?;
    let mut unit = 0u16;
    for &d in digits {
        unit = unit * 16 + (d as char).to_digit(16)? as u16;
    }
    Some(unit)
}

/// Whether `rest` is a proper prefix of a `\uXXXX` escape running to the end.
fn is_partial_unicode_escape(rest: &[u8]) -> bool {
    rest.len() < 6
        && rest.first() == Some(&b'\\')
        && rest.get(1).is_none_or(|&b| b == b'u')
        && rest.iter().skip(2).all(u8::is_ascii_hexdigit)
}

fn is_json_number(s: &[u8]) -> bool {
    let digits = |i: &mut usize| {
        let from = *i;
        while s.get(*i).is_some_and(u8::is_ascii_digit) {
            *i += 1;
        }
        *i > from
    };
    let mut i = 0;
    if s.first() == Some(&b'-') {
        i += 1;
    }
    match s.get(i) {
        Some(b'0') => i += 1,
        Some(b'1'..=b'9') => {
            digits(&mut i);
        }
        _ => return false,
    }
    if s.get(i) == Some(&b'.') {
        i += 1;
        if !digits(&mut i) {
            return false;
        }
    }
    if matches!(s.get(i), Some(b'e' | b'E')) {
        i += 1;
        if matches!(s.get(i), Some(b'+' | b'-')) {
            i += 1;
        }
        if !digits(&mut i) {
            return false;
        }
    }
    i == s.len()
}

/// JSON literal for a bare word in value position, and whether it was Python's.
fn literal(word: &str) -> Option<(&'static str, bool)> {
    match word {
        "true" => Some(("true", false)),
        "false" => Some(("false", false)),
        "null" => Some(("null", false)),
        "True" => Some(("true", true)),
        "False" => Some(("false", true)),
        "None" => Some(("null", true)),
        _ => None,
    }
}

/// The literal that a word cut off by the end of input was starting.
fn literal_prefix(word: &str) -> Option<(&'static str, bool)> {
    ["true", "false", "null", "True", "False", "None"]
        .into_iter()
        .find(|full| !word.is_empty() && full.starts_with(word))
        .and_then(literal)
}

/// Repairs recorded once per kind, in first-seen order.
#[derive(Default)]
struct Repairs(Vec<Repair>);

impl Repairs {
    fn add(&mut self, repair: Repair) {
        if !self.0.contains(&repair) {
            self.0.push(repair);
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    /// Just after `{` or `[`.
    Start,
    /// After a complete element or member.
    Value,
    /// After a comma.
    Comma,
    /// After an object key.
    Key,
    /// After a key's colon.
    Colon,
}

struct Frame {
    object: bool,
    state: State,
    /// Complete elements or members so far.
    count: usize,
    /// Output length after the last complete element or member; a dangling
    /// key is cut back to here.
    good: usize,
}

/// What to do with a token in value position.
enum Action {
    Open(bool),
    Emit(&'static str),
    EmitToken,
    EmitString,
    /// A half-written value at the end of input: dropped.
    Skip,
    Fail,
}

/// Buffers reused across candidate starts.
#[derive(Default)]
struct Repairer {
    out: String,
    scratch: String,
    stack: Vec<Frame>,
    repairs: Vec<Repair>,
}

impl Repairer {
    /// Repairs the value starting at `start` (a `{` or `[`) into `self.out`
    /// and returns the byte offset just past it.
    fn run(&mut self, text: &str, start: usize) -> Result<usize, Fail> {
        self.out.clear();
        self.stack.clear();
        let mut repairs = Repairs(std::mem::take(&mut self.repairs));
        repairs.0.clear();
        let mut lexer = Lexer::new(text, start, std::mem::take(&mut self.scratch));
        let result = match self.parse(&mut lexer, &mut repairs) {
            Err(Fail::At { at, resume }) => Err(Fail::At { at, resume: resume.max(lexer.resume) }),
            other => other,
        };
        self.scratch = lexer.scratch;
        self.repairs = repairs.0;
        result
    }

    fn parse(&mut self, lx: &mut Lexer<'_>, repairs: &mut Repairs) -> Result<usize, Fail> {
        // The caller guarantees a `{` or `[` here.
        match lx.next(repairs) {
            Tok::Open(object) => self.open(object)?,
            _ => return Err(Fail::at(lx.start)),
        }
        loop {
            let tok = lx.next(repairs);
            let at = lx.start;
            let Some(top) = self.stack.last_mut() else {
                return Err(Fail::at(at));
            };
            match tok {
                Tok::Eof => {
                    self.close_all(repairs);
                    return Ok(at);
                }
                Tok::Close(object) => {
                    if object != top.object {
                        return Err(Fail::at(at));
                    }
                    match top.state {
                        State::Start | State::Value => {}
                        State::Comma => repairs.add(Repair::TrailingComma),
                        State::Key | State::Colon => return Err(Fail::at(at)),
                    }
                    self.out.push(if object { '}' } else { ']' });
                    self.stack.pop();
                    if self.stack.is_empty() {
                        return Ok(lx.pos);
                    }
                    self.value_done();
                }
                Tok::Comma => match top.state {
                    State::Value => top.state = State::Comma,
                    State::Start | State::Comma => repairs.add(Repair::TrailingComma),
                    State::Key | State::Colon => return Err(Fail::at(at)),
                },
                Tok::Colon => {
                    if top.state != State::Key {
                        return Err(Fail::at(at));
                    }
                    self.out.push(':');
                    top.state = State::Colon;
                }
                Tok::Bad => return Err(Fail::at(at)),
                Tok::Open(_) | Tok::Str { .. } | Tok::Num { .. } | Tok::Ident => {
                    if top.state == State::Value {
                        repairs.add(Repair::MissingComma);
                    }
                    if top.object && top.state != State::Colon {
                        if top.state == State::Key {
                            return Err(Fail::at(at));
                        }
                        self.key(tok, lx, repairs)?;
                    } else {
                        self.value(tok, lx, repairs)?;
                    }
                }
            }
        }
    }

    fn open(&mut self, object: bool) -> Result<(), Fail> {
        if self.stack.len() >= MAX_DEPTH {
            return Err(Fail::TooDeep);
        }
        self.out.push(if object { '{' } else { '[' });
        self.stack.push(Frame { object, state: State::Start, count: 0, good: self.out.len() });
        Ok(())
    }

    /// Marks the value just emitted as an element or member of the top frame.
    fn value_done(&mut self) {
        if let Some(top) = self.stack.last_mut() {
            top.count += 1;
            top.state = State::Value;
            top.good = self.out.len();
        }
    }

    fn key(&mut self, tok: Tok, lx: &mut Lexer<'_>, repairs: &mut Repairs) -> Result<(), Fail> {
        let quoted = match tok {
            Tok::Str { .. } => true,
            Tok::Ident | Tok::Num { valid: true } => false,
            Tok::Num { valid: false } if lx.at_eof() => return Ok(()),
            _ => return Err(Fail::at(lx.start)),
        };
        let Some(top) = self.stack.last_mut() else {
            return Err(Fail::at(lx.start));
        };
        top.state = State::Key;
        if top.count > 0 {
            self.out.push(',');
        }
        self.out.push('"');
        if quoted {
            self.out.push_str(&lx.scratch);
        } else {
            repairs.add(Repair::UnquotedKey);
            self.out.push_str(lx.token());
        }
        self.out.push('"');
        Ok(())
    }

    fn value(&mut self, tok: Tok, lx: &mut Lexer<'_>, repairs: &mut Repairs) -> Result<(), Fail> {
        let action = match tok {
            Tok::Open(object) => Action::Open(object),
            Tok::Str { .. } => Action::EmitString,
            Tok::Num { valid: true } => Action::EmitToken,
            Tok::Num { valid: false } if lx.at_eof() => Action::Skip,
            Tok::Ident => match literal(lx.token()) {
                Some((json, python)) => {
                    if python {
                        repairs.add(Repair::PythonLiteral);
                    }
                    Action::Emit(json)
                }
                None => match literal_prefix(lx.token()) {
                    Some((json, python)) if lx.at_eof() => {
                        if python {
                            repairs.add(Repair::PythonLiteral);
                        }
                        Action::Emit(json)
                    }
                    _ => Action::Fail,
                },
            },
            _ => Action::Fail,
        };
        let Some(top) = self.stack.last() else {
            return Err(Fail::at(lx.start));
        };
        if matches!(action, Action::Fail) {
            return Err(Fail::at(lx.start));
        }
        if matches!(action, Action::Skip) {
            return Ok(());
        }
        if !top.object && top.count > 0 {
            self.out.push(',');
        }
        match action {
            Action::Open(object) => return self.open(object),
            Action::Emit(json) => self.out.push_str(json),
            Action::EmitToken => self.out.push_str(lx.token()),
            Action::EmitString => {
                self.out.push('"');
                self.out.push_str(&lx.scratch);
                self.out.push('"');
            }
            Action::Skip | Action::Fail => {}
        }
        self.value_done();
        Ok(())
    }

    /// At the end of input: drops a dangling key and closes every open container.
    fn close_all(&mut self, repairs: &mut Repairs) {
        if !self.stack.is_empty() {
            repairs.add(Repair::Truncated);
        }
        while let Some(frame) = self.stack.pop() {
            if frame.object && matches!(frame.state, State::Key | State::Colon) {
                self.out.truncate(frame.good);
            }
            self.out.push(if frame.object { '}' } else { ']' });
            self.value_done();
        }
    }
}

#[cfg(test)]
mod tests;
