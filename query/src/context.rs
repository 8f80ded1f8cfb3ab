//! Context building without I/O: GraphRAG-style tables packed under token
//! budgets, and the rankings that decide what goes in first.
//!
//! Every table in a query context has GraphRAG's layout:
//!
//! ```text
//! -----Entities-----
//! id|entity|description|number of relationships
//! 12|SCROOGE|A miser who ...|7
//! ```
//!
//! The column separator is always `|` (GraphRAG's `column_delimiter`), the
//! `id` column is the row's `human_readable_id` (what answers cite as
//! `[Data: Entities (12)]`), and each row is one line: white space in a cell
//! (new lines included) is collapsed to single spaces and a `|` inside a cell
//! is written `¦`, so a table is always parseable by splitting on `|`.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::hash::Hash;

use graphrag_operations::tokenizer::Encoding;
use serde_json::{Map, Value};

/// Counts tokens; [`count_tokens`] in production, anything in tests.
pub type Counter<'a> = &'a dyn Fn(&str) -> usize;

/// o200k_base tokens of `text` (the budget unit of every query setting).
pub fn count_tokens(text: &str) -> usize {
    Encoding::O200kBase.count(text)
}

/// The column separator of every context table.
pub const SEP: &str = "|";

/// A cell value on one line, without the column separator.
pub fn cell(value: &str) -> String {
    let mut out = String::with_capacity(value.len());
    for word in value.split_whitespace() {
        if !out.is_empty() {
            out.push(' ');
        }
        out.push_str(word);
    }
    if out.contains('|') {
        out = out.replace('|', "¦");
    }
    out
}

/// A table as packed into a context: its text and the rows that fit.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct PackedTable {
    /// Dataset name (`Entities`, `Relationships`, `Sources`, `Reports`, `Claims`).
    pub name: String,
    pub header: Vec<String>,
    /// The rows included (cells already cleaned with [`cell`]).
    pub rows: Vec<Vec<String>>,
    /// `-----Name-----\nheader\nrow\n...`; empty when no row fits.
    pub text: String,
    /// Tokens of `text` (sum over its lines).
    pub tokens: usize,
    /// Whether rows were left out for lack of budget.
    pub truncated: bool,
}

impl PackedTable {
    pub fn is_empty(&self) -> bool {
        self.rows.is_empty()
    }

    /// The rows as JSON objects keyed by the header (GraphRAG's context records).
    pub fn records(&self) -> Value {
        Value::Array(
            self.rows
                .iter()
                .map(|r| {
                    let mut m = Map::new();
                    for (h, v) in self.header.iter().zip(r) {
                        m.insert(h.clone(), Value::String(v.clone()));
                    }
                    Value::Object(m)
                })
                .collect(),
        )
    }

    /// The values of the `id` column.
    pub fn ids(&self) -> Vec<String> {
        self.rows.iter().filter_map(|r| r.first().cloned()).collect()
    }
}

fn table_head(name: &str, header: &[&str]) -> String {
    format!("-----{name}-----\n{}\n", header.join(SEP))
}

fn row_line(row: &[String]) -> String {
    let mut line = row.join(SEP);
    line.push('\n');
    line
}

/// Packs rows (in order) into one table of at most `max_tokens` tokens: rows
/// are added while they fit; the first that does not fit ends the table
/// (GraphRAG's rule: the order is the ranking). Rows are produced lazily, so
/// ranking work after the budget is spent is never done. No row fits → an
/// empty table (no header either).
pub fn pack_table<I>(name: &str, header: &[&str], rows: I, max_tokens: usize, count: Counter) -> PackedTable
where
    I: IntoIterator<Item = Vec<String>>,
{
    let head = table_head(name, header);
    let head_tokens = count(&head);
    let mut table = PackedTable {
        name: name.to_string(),
        header: header.iter().map(|h| h.to_string()).collect(),
        ..PackedTable::default()
    };
    let mut text = head;
    let mut tokens = head_tokens;
    for raw in rows {
        let row: Vec<String> = raw.iter().map(|c| cell(c)).collect();
        let line = row_line(&row);
        let t = count(&line);
        if tokens + t > max_tokens {
            table.truncated = true;
            break;
        }
        tokens += t;
        text.push_str(&line);
        table.rows.push(row);
    }
    if !table.rows.is_empty() {
        table.text = text.trim_end().to_string();
        table.tokens = tokens;
    }
    table
}

/// Splits rows into batches (tables) of at most `max_tokens` tokens each, as
/// GraphRAG's global search does; a row larger than a whole batch gets a
/// batch of its own.
pub fn pack_batches<I>(name: &str, header: &[&str], rows: I, max_tokens: usize, count: Counter) -> Vec<PackedTable>
where
    I: IntoIterator<Item = Vec<String>>,
{
    let head = table_head(name, header);
    let head_tokens = count(&head);
    let new_batch = || PackedTable {
        name: name.to_string(),
        header: header.iter().map(|h| h.to_string()).collect(),
        text: head.clone(),
        tokens: head_tokens,
        ..PackedTable::default()
    };
    let mut batches = Vec::new();
    let mut current = new_batch();
    for raw in rows {
        let row: Vec<String> = raw.iter().map(|c| cell(c)).collect();
        let line = row_line(&row);
        let t = count(&line);
        if current.tokens + t > max_tokens && !current.rows.is_empty() {
            batches.push(std::mem::replace(&mut current, new_batch()));
        }
        current.tokens += t;
        current.text.push_str(&line);
        current.rows.push(row);
    }
    if !current.rows.is_empty() {
        batches.push(current);
    }
    for b in &mut batches {
        b.text = b.text.trim_end().to_string();
    }
    batches
}

/// A token counter that remembers the count of every text it saw: context
/// building re-packs the same rows while it grows a table (GraphRAG's
/// incremental entity loop), and BPE counting is the expensive part.
#[derive(Default)]
pub struct MemoCounter {
    seen: std::cell::RefCell<HashMap<String, usize>>,
}

impl MemoCounter {
    pub fn count(&self, text: &str) -> usize {
        if let Some(&n) = self.seen.borrow().get(text) {
            return n;
        }
        let n = count_tokens(text);
        self.seen.borrow_mut().insert(text.to_string(), n);
        n
    }
}

/// Joins non-empty context parts with a blank line.
pub fn join_parts<'a>(parts: impl IntoIterator<Item = &'a str>) -> String {
    parts.into_iter().filter(|p| !p.trim().is_empty()).collect::<Vec<_>>().join("\n\n")
}

// ---------------------------------------------------------------------------
// conversation history
// ---------------------------------------------------------------------------

/// A question and the answers that followed it.
#[derive(Debug, Clone, PartialEq)]
pub struct QaTurn {
    pub user: String,
    pub assistant: Vec<String>,
}

/// Groups (role, content) messages into turns; messages before the first
/// user message (or with other roles) are ignored.
pub fn qa_turns(history: &[(String, String)]) -> Vec<QaTurn> {
    let mut turns: Vec<QaTurn> = Vec::new();
    for (role, content) in history {
        match role.as_str() {
            "user" => turns.push(QaTurn { user: content.clone(), assistant: Vec::new() }),
            "assistant" => {
                if let Some(t) = turns.last_mut() {
                    t.assistant.push(content.clone());
                }
            }
            _ => {}
        }
    }
    turns
}

/// GraphRAG's conversation history table: the last `max_turns` turns, most
/// recent first (recency bias), user questions only when `user_only`, under
/// `max_tokens`.
pub fn history_table(
    history: &[(String, String)],
    max_turns: usize,
    user_only: bool,
    max_tokens: usize,
    count: Counter,
) -> PackedTable {
    let turns = qa_turns(history);
    let mut rows = Vec::new();
    for t in turns.iter().rev().take(max_turns) {
        rows.push(vec!["user".to_string(), t.user.clone()]);
        if !user_only {
            for a in &t.assistant {
                rows.push(vec!["assistant".to_string(), a.clone()]);
            }
        }
    }
    pack_table("Conversation History", &["turn", "content"], rows, max_tokens, count)
}

/// LightRAG's history text: the last `max_turns` turns in order, one
/// `role: content` line per message.
pub fn history_text(history: &[(String, String)], max_turns: usize) -> String {
    let turns = qa_turns(history);
    let start = turns.len().saturating_sub(max_turns);
    let mut out = Vec::new();
    for t in &turns[start..] {
        out.push(format!("user: {}", t.user.trim()));
        for a in &t.assistant {
            out.push(format!("assistant: {}", a.trim()));
        }
    }
    out.join("\n")
}

// ---------------------------------------------------------------------------
// rankings
// ---------------------------------------------------------------------------

/// The graph's relationships as the rankings need them (indexes into the
/// relationships table; ends are entity indexes, `None` for a dangling end).
pub struct RelView<'a> {
    pub ends: &'a [(Option<u32>, Option<u32>)],
    /// Entity titles at each end (a dangling end has its name, not an index).
    pub source: &'a [String],
    pub target: &'a [String],
    /// GraphRAG's relationship rank: combined_degree.
    pub rank: &'a [i64],
    /// Relationship indexes of each entity.
    pub adjacency: &'a [Vec<u32>],
}

fn cmp_desc_f64(a: f64, b: f64) -> std::cmp::Ordering {
    b.partial_cmp(&a).unwrap_or(std::cmp::Ordering::Equal)
}

/// A float as Python's `str` writes it (what GraphRAG's context tables hold):
/// `2.0`, `0.25`, `1e-05`, `1e+16`, `nan`, `inf`.
pub fn python_float(x: f64) -> String {
    if x.is_nan() {
        return "nan".into();
    }
    if x.is_infinite() {
        return if x > 0.0 { "inf" } else { "-inf" }.into();
    }
    let magnitude = x.abs();
    if magnitude != 0.0 && !(1e-4..1e16).contains(&magnitude) {
        // Rust writes `1e-5`, Python `1e-05`: a signed exponent of two digits at least.
        let sci = format!("{x:e}");
        let (mantissa, exponent) = sci.split_once('e').unwrap_or((&sci, "0"));
        let exponent: i32 = exponent.parse().unwrap_or(0);
        let sign = if exponent < 0 { '-' } else { '+' };
        return format!("{mantissa}e{sign}{:02}", exponent.abs());
    }
    if x.fract() == 0.0 {
        format!("{x:.1}")
    } else {
        format!("{x}")
    }
}

/// GraphRAG local search's relationship selection for `selected` entities:
/// in-network relationships (both ends selected) first, by rank; then
/// out-of-network ones (one end selected), preferring those whose outside
/// entity links to more selected entities, then rank, at most
/// `top_k × |selected|` of them. Ties keep GraphRAG's order (its sorts are
/// stable): table order, and out of the network those whose source is
/// selected before those whose target is.
///
/// `links` receives GraphRAG's `links` of every out-of-network relationship
/// (how many selected entities its outside entity is related to) when there
/// are two or more of them, overwriting earlier values: GraphRAG writes it
/// into the relationship's attributes, where it stays for the rest of the
/// question (its context grows one entity at a time, and a relationship that
/// later joins the network keeps the value it had), so the caller keeps one
/// map per question.
pub fn rank_relationships(
    selected: &[usize],
    g: &RelView,
    top_k: usize,
    links: &mut HashMap<usize, usize>,
) -> Vec<usize> {
    let sel: HashSet<usize> = selected.iter().copied().collect();
    let mut seen: HashSet<u32> = HashSet::new();
    let mut inside: Vec<usize> = Vec::new();
    // (relationship, outside entity's name, selected entity's name, whether the target is the selected end)
    let mut outside: Vec<(usize, &str, &str, bool)> = Vec::new();
    for &e in selected {
        let Some(adj) = g.adjacency.get(e) else { continue };
        for &r in adj {
            if !seen.insert(r) {
                continue;
            }
            let r = r as usize;
            let (s, t) = g.ends[r];
            let s_in = s.is_some_and(|x| sel.contains(&(x as usize)));
            let t_in = t.is_some_and(|x| sel.contains(&(x as usize)));
            match (s_in, t_in) {
                (true, true) => inside.push(r),
                (true, false) => outside.push((r, &g.target[r], &g.source[r], false)),
                (false, true) => outside.push((r, &g.source[r], &g.target[r], true)),
                (false, false) => {}
            }
        }
    }
    inside.sort_by_key(|&r| (std::cmp::Reverse(g.rank[r]), r));
    let by_rank = |&(a, _, _, a_target): &(usize, &str, &str, bool),
                   &(b, _, _, b_target): &(usize, &str, &str, bool)| {
        g.rank[b].cmp(&g.rank[a]).then(a_target.cmp(&b_target)).then(a.cmp(&b))
    };
    if outside.len() <= 1 {
        // GraphRAG returns a lone out-of-network relationship as it is: no
        // `links`, no budget.
        return inside.into_iter().chain(outside.into_iter().map(|(r, ..)| r)).collect();
    }
    let mut linked: HashMap<&str, HashSet<&str>> = HashMap::new();
    for &(_, other, own, _) in &outside {
        linked.entry(other).or_default().insert(own);
    }
    for &(r, other, ..) in &outside {
        links.insert(r, linked[other].len());
    }
    outside.sort_by(|a, b| linked[b.1].len().cmp(&linked[a.1].len()).then(by_rank(a, b)));
    let budget = top_k.saturating_mul(selected.len());
    inside.into_iter().chain(outside.into_iter().take(budget).map(|(r, ..)| r)).collect()
}

/// Text units ranked for a context: by how many of the selected entities
/// mention them, then by how many of the context's relationships cite them,
/// then by first appearance (entity order). `entity_units[i]`: text units of
/// the i-th selected entity; `relationship_units`: those of each relationship.
pub fn rank_text_units<K: Copy + Eq + Hash>(entity_units: &[&[K]], relationship_units: &[&[K]]) -> Vec<K> {
    let mut order: Vec<K> = Vec::new();
    let mut score: HashMap<K, (usize, usize, usize)> = HashMap::new();
    for units in entity_units {
        let mut here: HashSet<K> = HashSet::new();
        for &u in units.iter() {
            if !here.insert(u) {
                continue;
            }
            let n = order.len();
            let e = score.entry(u).or_insert_with(|| {
                order.push(u);
                (0, 0, n)
            });
            e.0 += 1;
        }
    }
    for units in relationship_units {
        let mut here: HashSet<K> = HashSet::new();
        for &u in units.iter() {
            if here.insert(u) {
                if let Some(e) = score.get_mut(&u) {
                    e.1 += 1;
                }
            }
        }
    }
    let mut ranked: Vec<(usize, usize, usize)> = score.into_values().collect();
    ranked.sort_by(|a, b| b.0.cmp(&a.0).then(b.1.cmp(&a.1)).then(a.2.cmp(&b.2)));
    ranked.into_iter().map(|(_, _, i)| order[i]).collect()
}

/// The entities at the ends of `relationships` that are not `selected`, in
/// order of first appearance (`ends`: per relationship, its source and
/// target entity when known).
pub fn neighbour_entities(
    selected: &[usize],
    relationships: &[usize],
    ends: &[(Option<u32>, Option<u32>)],
) -> Vec<usize> {
    let mut seen: HashSet<usize> = selected.iter().copied().collect();
    relationships
        .iter()
        .flat_map(|&r| [ends[r].0, ends[r].1])
        .flatten()
        .map(|e| e as usize)
        .filter(|&e| seen.insert(e))
        .collect()
}

/// `ranked` reordered by similarity to the question: the ids in `hits`
/// (id, similarity; best first) first in that order, the others after them
/// in their `ranked` order.
pub fn order_by_similarity(ranked: Vec<String>, hits: &[(String, f32)]) -> Vec<String> {
    let position: HashMap<&str, usize> = hits.iter().enumerate().map(|(i, (id, _))| (id.as_str(), i)).collect();
    let (mut scored, unscored): (Vec<String>, Vec<String>) =
        ranked.into_iter().partition(|id| position.contains_key(id.as_str()));
    scored.sort_by_key(|id| position[id.as_str()]);
    scored.extend(unscored);
    scored
}

/// The community reports used at `level`, as GraphRAG 3.3 selects them
/// (`read_indexer_reports`): every report at a level ≤ `level`. (Its
/// roll-up groups the communities by their title, one group per community,
/// so parents stay beside their children.) Returns report indexes in order.
pub fn reports_up_to_level(levels: &[i64], level: i64) -> Vec<usize> {
    (0..levels.len()).filter(|&i| levels[i] <= level).collect()
}

/// Items of several ranked lists interleaved (first of each, then second of
/// each, ...), duplicates dropped — LightRAG's merge of local and global results.
pub fn round_robin<T: Clone + Eq + Hash>(lists: &[Vec<T>]) -> Vec<T> {
    let mut seen = HashSet::new();
    let mut out = Vec::new();
    let longest = lists.iter().map(Vec::len).max().unwrap_or(0);
    for i in 0..longest {
        for l in lists {
            if let Some(x) = l.get(i) {
                if seen.insert(x.clone()) {
                    out.push(x.clone());
                }
            }
        }
    }
    out
}

/// A deterministic permutation of `0..n` (Fisher–Yates with splitmix64), so
/// global search batches mix high- and low-ranked reports the same way every run.
pub fn shuffled(n: usize, seed: u64) -> Vec<usize> {
    let mut state = seed;
    let mut next = || {
        state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = state;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    };
    let mut v: Vec<usize> = (0..n).collect();
    for i in (1..n).rev() {
        let j = (next() % (i as u64 + 1)) as usize;
        v.swap(i, j);
    }
    v
}

// ---------------------------------------------------------------------------
// global search: map answers and the reduce context
// ---------------------------------------------------------------------------

/// One key point of a map answer.
#[derive(Debug, Clone, PartialEq)]
pub struct Point {
    /// 1-based batch number (GraphRAG's analyst).
    pub analyst: usize,
    pub description: String,
    pub score: f64,
}

fn number(v: &Value) -> Option<f64> {
    match v {
        Value::Number(n) => n.as_f64(),
        Value::String(s) => s.trim().parse().ok(),
        _ => None,
    }
}

/// The points of a map answer (`{"points": [{"description", "score"}]}`);
/// `None` when the answer has no `points` list. Points without a description
/// are skipped; a missing or unreadable score counts as 0.
pub fn parse_points(answer: &Value, analyst: usize) -> Option<Vec<Point>> {
    let list = answer.get("points")?.as_array()?;
    Some(
        list.iter()
            .filter_map(|p| {
                let description = p.get("description").or_else(|| p.get("answer"))?.as_str()?.trim().to_string();
                if description.is_empty() {
                    return None;
                }
                let score = p.get("score").and_then(number).unwrap_or(0.0);
                Some(Point { analyst, description, score })
            })
            .collect(),
    )
}

fn score_text(s: f64) -> String {
    if s.fract() == 0.0 && s.abs() < 1e15 {
        format!("{}", s as i64)
    } else {
        format!("{s}")
    }
}

/// GraphRAG's reduce context: points with a score above 0, best first (ties
/// keep their order), each as `----Analyst N----\nImportance Score: S\ntext`,
/// added while they fit in `max_tokens`. Returns the text and the points used.
pub fn pack_points(mut points: Vec<Point>, max_tokens: usize, count: Counter) -> (String, Vec<Point>) {
    points.retain(|p| p.score > 0.0);
    points.sort_by(|a, b| cmp_desc_f64(a.score, b.score));
    let mut parts: Vec<String> = Vec::new();
    let mut used = Vec::new();
    let mut tokens = 0;
    for p in points {
        let text =
            format!("----Analyst {}----\nImportance Score: {}\n{}", p.analyst, score_text(p.score), p.description);
        let t = count(&text);
        if tokens + t > max_tokens {
            break;
        }
        tokens += t;
        parts.push(text);
        used.push(p);
    }
    (parts.join("\n\n"), used)
}

// ---------------------------------------------------------------------------
// keywords and citations
// ---------------------------------------------------------------------------

const STOP_WORDS: &[&str] = &[
    "a",
    "about",
    "above",
    "after",
    "again",
    "against",
    "all",
    "also",
    "am",
    "an",
    "and",
    "any",
    "are",
    "as",
    "at",
    "be",
    "because",
    "been",
    "before",
    "being",
    "below",
    "between",
    "both",
    "but",
    "by",
    "can",
    "could",
    "did",
    "do",
    "does",
    "doing",
    "down",
    "during",
    "each",
    "few",
    "for",
    "from",
    "further",
    "had",
    "has",
    "have",
    "having",
    "he",
    "her",
    "here",
    "hers",
    "herself",
    "him",
    "himself",
    "his",
    "how",
    "i",
    "if",
    "in",
    "into",
    "is",
    "it",
    "its",
    "itself",
    "just",
    "me",
    "more",
    "most",
    "my",
    "myself",
    "no",
    "nor",
    "not",
    "now",
    "of",
    "off",
    "on",
    "once",
    "only",
    "or",
    "other",
    "our",
    "ours",
    "ourselves",
    "out",
    "over",
    "own",
    "same",
    "she",
    "should",
    "so",
    "some",
    "such",
    "than",
    "that",
    "the",
    "their",
    "theirs",
    "them",
    "themselves",
    "then",
    "there",
    "these",
    "they",
    "this",
    "those",
    "through",
    "to",
    "too",
    "under",
    "until",
    "up",
    "very",
    "was",
    "we",
    "were",
    "what",
    "when",
    "where",
    "which",
    "while",
    "who",
    "whom",
    "why",
    "will",
    "with",
    "would",
    "you",
    "your",
    "yours",
    "yourself",
    "tell",
    "describe",
    "explain",
    "give",
    "know",
    "known",
    "many",
    "much",
    "please",
    "role",
    "happen",
    "happened",
    "kind",
    "main",
    "list",
    "show",
    "say",
    "said",
    "like",
    "get",
    "way",
    "thing",
    "things",
    "whose",
    "within",
    "without",
];

/// The query's content words (no stop words, at least 3 characters, first
/// spelling kept, duplicates dropped): the keywords used when no chat model
/// can extract them.
pub fn content_words(text: &str) -> Vec<String> {
    let mut seen = HashSet::new();
    let mut out = Vec::new();
    for w in text.split(|c: char| !c.is_alphanumeric() && c != '-' && c != '\'') {
        let w = w.trim_matches(|c: char| c == '-' || c == '\'');
        let lower = w.to_lowercase();
        if w.chars().count() < 3 || STOP_WORDS.contains(&lower.as_str()) || !seen.insert(lower) {
            continue;
        }
        out.push(w.to_string());
    }
    out
}

/// A title or a text as a lookup key: lower-case alphanumeric words joined
/// by single spaces ("Katsina State," and "KATSINA STATE" agree).
pub fn title_key(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for word in text.split(|c: char| !c.is_alphanumeric()).filter(|w| !w.is_empty()) {
        if !out.is_empty() {
            out.push(' ');
        }
        out.extend(word.chars().flat_map(char::to_lowercase));
    }
    out
}

/// Entities the question names: each run of up to `max_words` consecutive
/// words of the question whose [`title_key`] is an entity's and that holds a
/// content word. Most specific first: fewest text units (`units_of`), then
/// longer titles, then index. An embedding of the whole question is pulled
/// towards generic concepts ("country", "birthplace"); the names it contains
/// are what a question is about.
pub fn entities_named_in(
    question: &str,
    by_key: &HashMap<String, Vec<usize>>,
    max_words: usize,
    units_of: impl Fn(usize) -> usize,
) -> Vec<usize> {
    let key = title_key(question);
    let words: Vec<&str> = key.split(' ').filter(|w| !w.is_empty()).collect();
    let mut found: Vec<(usize, usize)> = Vec::new();
    let mut seen = HashSet::new();
    for n in (1..=max_words.min(words.len())).rev() {
        for window in words.windows(n) {
            if !window.iter().any(|w| w.chars().count() >= 3 && !STOP_WORDS.contains(w)) {
                continue;
            }
            for &e in by_key.get(&window.join(" ")).into_iter().flatten() {
                if seen.insert(e) {
                    found.push((e, n));
                }
            }
        }
    }
    found.sort_by(|&(a, na), &(b, nb)| units_of(a).cmp(&units_of(b)).then(nb.cmp(&na)).then(a.cmp(&b)));
    found.into_iter().map(|(e, _)| e).collect()
}

/// The record ids cited in an answer's `[Data: Entities (1, 2); Sources (3, +more)]`
/// references, by dataset name (ids that are not integers, like `+more`, are skipped).
pub fn cited_ids(answer: &str) -> BTreeMap<String, Vec<i64>> {
    let mut out: BTreeMap<String, Vec<i64>> = BTreeMap::new();
    let mut rest = answer;
    while let Some(i) = rest.find("[Data:") {
        let tail = &rest[i + 6..];
        let end = tail.find(']').unwrap_or(tail.len());
        for part in tail[..end].split(';') {
            let Some((name, ids)) = part.split_once('(') else { continue };
            let ids = ids.trim_end().trim_end_matches(')');
            let entry = out.entry(name.trim().to_string()).or_default();
            for id in ids.split(',') {
                if let Ok(n) = id.trim().parse::<i64>() {
                    if !entry.contains(&n) {
                        entry.push(n);
                    }
                }
            }
        }
        rest = &tail[end..];
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// One token per whitespace-separated word plus one per line: easy to reason about.
    fn words(t: &str) -> usize {
        t.split_whitespace().count() + t.matches('\n').count()
    }

    fn row(cells: &[&str]) -> Vec<String> {
        cells.iter().map(|c| c.to_string()).collect()
    }

    #[test]
    fn cells_are_single_line_without_separator() {
        assert_eq!(cell("  a\n\nb |  c\t"), "a b ¦ c");
        assert_eq!(cell(""), "");
    }

    #[test]
    fn pack_table_stops_at_budget_and_never_exceeds_it() {
        let rows = (0..10).map(|i| row(&[&i.to_string(), "alpha beta gamma"]));
        // head: "-----T-----\nid|text\n" = 2 words + 2 lines = 4; each row "i|alpha beta gamma\n" = 3 + 1 = 4
        let t = pack_table("T", &["id", "text"], rows.clone(), 13, &words);
        assert_eq!(t.rows.len(), 2);
        assert!(t.truncated);
        assert_eq!(t.tokens, 12);
        assert!(t.tokens <= 13);
        assert_eq!(t.text, "-----T-----\nid|text\n0|alpha beta gamma\n1|alpha beta gamma");
        assert_eq!(t.ids(), vec!["0", "1"]);
        let all = pack_table("T", &["id", "text"], rows.clone(), 1000, &words);
        assert_eq!(all.rows.len(), 10);
        assert!(!all.truncated);
        let none = pack_table("T", &["id", "text"], rows, 5, &words);
        assert!(none.is_empty() && none.text.is_empty() && none.tokens == 0);
    }

    #[test]
    fn pack_table_is_lazy() {
        let mut produced = 0;
        let rows = (0..1000).map(|i| {
            produced += 1;
            row(&[&i.to_string(), "x"])
        });
        let t = pack_table("T", &["id", "text"], rows, 10, &words);
        assert_eq!(t.rows.len(), 3);
        assert_eq!(produced, 4, "only one row past the budget is built");
    }

    #[test]
    fn records_are_keyed_by_header() {
        let t = pack_table("Entities", &["id", "entity"], vec![row(&["3", "A|B"])], 100, &words);
        assert_eq!(t.records(), serde_json::json!([{"id": "3", "entity": "A¦B"}]));
    }

    #[test]
    fn batches_respect_budget_and_oversized_rows_stand_alone() {
        let rows =
            vec![row(&["1", "a b"]), row(&["2", "c d"]), row(&["3", "e f g h i j k l m n o p"]), row(&["4", "q"])];
        let b = pack_batches("Reports", &["id", "content"], rows, 10, &words);
        let ids: Vec<Vec<String>> = b.iter().map(|t| t.ids()).collect();
        assert_eq!(ids, vec![vec!["1", "2"], vec!["3"], vec!["4"]]);
        assert!(b[0].tokens <= 10 && b[2].tokens <= 10);
        assert!(b[0].text.starts_with("-----Reports-----\nid|content\n1|a b"));
        assert!(pack_batches("Reports", &["id"], Vec::<Vec<String>>::new(), 10, &words).is_empty());
    }

    fn hist() -> Vec<(String, String)> {
        [("user", "q1"), ("assistant", "a1"), ("user", "q2"), ("assistant", "a2"), ("user", "q3")]
            .iter()
            .map(|(r, c)| (r.to_string(), c.to_string()))
            .collect()
    }

    #[test]
    fn history_table_is_recent_first_and_limited() {
        let t = history_table(&hist(), 2, true, 1000, &words);
        assert_eq!(t.text, "-----Conversation History-----\nturn|content\nuser|q3\nuser|q2");
        let t = history_table(&hist(), 5, false, 1000, &words);
        assert_eq!(t.rows.len(), 5);
        assert_eq!(t.rows[1], row(&["user", "q2"]));
        assert_eq!(t.rows[2], row(&["assistant", "a2"]));
        assert!(history_table(&[], 5, true, 1000, &words).text.is_empty());
    }

    #[test]
    fn history_text_keeps_order() {
        assert_eq!(history_text(&hist(), 2), "user: q2\nassistant: a2\nuser: q3");
        assert_eq!(history_text(&[], 2), "");
    }

    /// The columns a test's [`RelView`] borrows.
    struct Rels {
        ends: Vec<(Option<u32>, Option<u32>)>,
        source: Vec<String>,
        target: Vec<String>,
        rank: Vec<i64>,
        adjacency: Vec<Vec<u32>>,
    }

    impl Rels {
        fn view(&self) -> RelView<'_> {
            RelView {
                ends: &self.ends,
                source: &self.source,
                target: &self.target,
                rank: &self.rank,
                adjacency: &self.adjacency,
            }
        }
    }

    #[test]
    fn relationships_in_network_first_then_linked_out_of_network() {
        // entities 0,1 selected; 2,3 outside. rels: 0: 0-1 (in), 1: 0-2, 2: 1-2 (2 links twice), 3: 0-3 (rank high)
        let names = |ids: [usize; 4]| ids.map(|i| ["A", "B", "C", "D"][i].to_string()).to_vec();
        let rels = Rels {
            ends: vec![(Some(0), Some(1)), (Some(0), Some(2)), (Some(1), Some(2)), (Some(0), Some(3))],
            source: names([0, 0, 1, 0]),
            target: names([1, 2, 2, 3]),
            rank: vec![2, 3, 3, 9],
            adjacency: vec![vec![0, 1, 3], vec![0, 2], vec![1, 2], vec![3]],
        };
        let g = rels.view();
        let mut links = HashMap::new();
        assert_eq!(rank_relationships(&[0, 1], &g, 10, &mut links), vec![0, 1, 2, 3]);
        // C is related to both selected entities, D to one; the in-network relationship has none.
        assert_eq!(links, HashMap::from([(1, 2), (2, 2), (3, 1)]));
        // budget: top_k 1 × 2 selected = 2 out-of-network
        assert_eq!(rank_relationships(&[0, 1], &g, 1, &mut links), vec![0, 1, 2]);
        // A lone out-of-network relationship gets no links; earlier values stay (GraphRAG's attributes).
        let mut lone = HashMap::from([(3, 7)]);
        assert_eq!(rank_relationships(&[3], &g, 10, &mut lone), vec![3]);
        assert_eq!(lone, HashMap::from([(3, 7)]));
        // Out of the network again: the value is overwritten.
        assert_eq!(rank_relationships(&[0], &g, 10, &mut lone), vec![3, 1, 0]);
        assert_eq!(lone, HashMap::from([(0, 1), (1, 1), (3, 1)]));
        assert!(rank_relationships(&[], &g, 10, &mut links).is_empty());
    }

    #[test]
    fn floats_are_written_as_python_writes_them() {
        let cases = [
            (2.0, "2.0"),
            (-3.0, "-3.0"),
            (0.0, "0.0"),
            (0.25, "0.25"),
            (0.1 + 0.2, "0.30000000000000004"),
            (1e-4, "0.0001"),
            (1e-5, "1e-05"),
            (1.5e-7, "1.5e-07"),
            (1e15, "1000000000000000.0"),
            (1e16, "1e+16"),
            (1.25e100, "1.25e+100"),
            (f64::NAN, "nan"),
            (f64::NEG_INFINITY, "-inf"),
        ];
        for (x, python) in cases {
            assert_eq!(python_float(x), python, "{x}");
        }
    }

    #[test]
    fn links_count_each_selected_entity_once_and_name_dangling_ends() {
        // 0 selected; relationships 0 and 1 end at the same missing entity X, 2 at entity 1.
        let rels = Rels {
            ends: vec![(Some(0), None), (None, Some(0)), (Some(0), Some(1))],
            source: ["A", "X", "A"].map(String::from).to_vec(),
            target: ["X", "A", "B"].map(String::from).to_vec(),
            rank: vec![1, 1, 5],
            adjacency: vec![vec![0, 1, 2], vec![2]],
        };
        let g = rels.view();
        let mut links = HashMap::new();
        // X relates to A twice, which is one selected entity: rank decides.
        assert_eq!(rank_relationships(&[0], &g, 10, &mut links), vec![2, 0, 1]);
        assert_eq!(links, HashMap::from([(0, 1), (1, 1), (2, 1)]));
    }

    #[test]
    fn similarity_order_puts_hits_first_and_keeps_the_rest() {
        let ranked: Vec<String> = ["u1", "u2", "u3", "u4"].map(String::from).to_vec();
        let hits = vec![("u3".to_string(), 0.9), ("u1".to_string(), 0.5), ("u9".to_string(), 0.4)];
        assert_eq!(order_by_similarity(ranked.clone(), &hits), ["u3", "u1", "u2", "u4"]);
        assert_eq!(order_by_similarity(ranked.clone(), &[]), ranked);
    }

    #[test]
    fn neighbours_are_the_other_ends_once() {
        let ends = vec![(Some(0), Some(5)), (Some(5), Some(7)), (Some(0), None), (Some(1), Some(7))];
        assert_eq!(neighbour_entities(&[0, 1], &[0, 2, 3, 1], &ends), vec![5, 7]);
        assert!(neighbour_entities(&[0, 1], &[], &ends).is_empty());
    }

    #[test]
    fn title_keys_ignore_case_and_punctuation() {
        assert_eq!(title_key("  Katsina State, Nigeria!"), "katsina state nigeria");
        assert_eq!(title_key("KATSINA STATE"), title_key("katsina   state"));
        assert_eq!(title_key("--"), "");
    }

    #[test]
    fn named_entities_are_found_whole_and_most_specific_first() {
        let titles = ["COUNTRY", "BAURE", "KATSINA STATE", "KATSINA", "THE", "STATE OF THE ART"];
        let by_key: HashMap<String, Vec<usize>> =
            titles.iter().enumerate().map(|(i, t)| (title_key(t), vec![i])).collect();
        let units = [50, 2, 3, 3, 900, 1];
        let named =
            entities_named_in("What is the country where Baure, in Katsina State, is located?", &by_key, 4, |e| {
                units[e]
            });
        // BAURE (2 units), then the longer of the two 3-unit titles, then the generic COUNTRY;
        // "the" alone is a stop word, "state of the art" is not in the question.
        assert_eq!(named, vec![1, 2, 3, 0]);
        assert!(entities_named_in("Who is it?", &by_key, 4, |e| units[e]).is_empty());
        assert!(entities_named_in("", &by_key, 4, |e| units[e]).is_empty());
    }

    #[test]
    fn text_units_by_entity_count_then_relationship_links() {
        let e1: &[&str] = &["u1", "u2", "u3"];
        let e2: &[&str] = &["u3", "u4", "u2"];
        let r1: &[&str] = &["u3"];
        let ranked = rank_text_units(&[e1, e2], &[r1]);
        assert_eq!(ranked, vec!["u3", "u2", "u1", "u4"]);
        assert!(rank_text_units::<u32>(&[], &[]).is_empty());
    }

    #[test]
    fn a_level_selects_every_report_up_to_it() {
        let levels = [0, 0, 1, 1, 2];
        assert_eq!(reports_up_to_level(&levels, 0), vec![0, 1]);
        assert_eq!(reports_up_to_level(&levels, 1), vec![0, 1, 2, 3]);
        assert_eq!(reports_up_to_level(&levels, 9), vec![0, 1, 2, 3, 4]);
    }

    #[test]
    fn round_robin_interleaves_and_dedupes() {
        assert_eq!(round_robin(&[vec![1, 2, 3], vec![4, 2], vec![]]), vec![1, 4, 2, 3]);
    }

    #[test]
    fn shuffle_is_a_deterministic_permutation() {
        let a = shuffled(50, 86);
        assert_eq!(a, shuffled(50, 86));
        let mut s = a.clone();
        s.sort();
        assert_eq!(s, (0..50).collect::<Vec<_>>());
        assert_ne!(a, (0..50).collect::<Vec<_>>());
        assert!(shuffled(0, 1).is_empty());
    }

    #[test]
    fn points_are_parsed_filtered_sorted_and_packed() {
        let v = serde_json::json!({"points": [
            {"description": "low", "score": 10},
            {"description": "zero", "score": 0},
            {"description": "high", "score": "90"},
            {"description": "", "score": 50},
            {"description": "no score"}
        ]});
        let p = parse_points(&v, 2).unwrap();
        assert_eq!(p.len(), 4);
        assert!(parse_points(&serde_json::json!({"answer": "x"}), 1).is_none());
        let mut all = p;
        all.push(Point { analyst: 1, description: "mid".into(), score: 50.5 });
        let (text, used) = pack_points(all.clone(), 1000, &words);
        assert_eq!(used.iter().map(|p| p.description.as_str()).collect::<Vec<_>>(), ["high", "mid", "low"]);
        assert!(text.starts_with(
            "----Analyst 2----\nImportance Score: 90\nhigh\n\n----Analyst 1----\nImportance Score: 50.5\nmid"
        ));
        let (_, used) = pack_points(all, 8, &words);
        assert_eq!(used.len(), 1);
        let (text, used) = pack_points(vec![Point { analyst: 1, description: "x".into(), score: 0.0 }], 100, &words);
        assert!(text.is_empty() && used.is_empty());
    }

    #[test]
    fn content_words_drop_stop_words() {
        assert_eq!(
            content_words("What did Scrooge say to Marley's ghost about the ghost?"),
            vec!["Scrooge", "Marley's", "ghost"]
        );
        assert!(content_words("Who is it?").is_empty());
    }

    #[test]
    fn citations_are_parsed() {
        let a = "X [Data: Entities (1, 2); Relationships (7, +more)] and [Data: Sources (3); Entities (2, 5)].";
        let c = cited_ids(a);
        assert_eq!(c["Entities"], vec![1, 2, 5]);
        assert_eq!(c["Relationships"], vec![7]);
        assert_eq!(c["Sources"], vec![3]);
        assert!(cited_ids("no refs").is_empty());
    }
}
