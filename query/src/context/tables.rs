//! GraphRAG's context tables (see the module docs of `context`): cells,
//! rows packed under a token budget, and the token counts they are packed by.

use std::collections::HashMap;

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

/// What the context modules' tests count and pack with.
#[cfg(test)]
pub(super) mod testing {
    /// One token per whitespace-separated word plus one per line: easy to reason about.
    pub fn words(t: &str) -> usize {
        t.split_whitespace().count() + t.matches('\n').count()
    }

    pub fn row(cells: &[&str]) -> Vec<String> {
        cells.iter().map(|c| c.to_string()).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::testing::{row, words};
    use super::*;

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
        let ids: Vec<Vec<String>> = b.iter().map(|t| t.rows.iter().map(|r| r[0].clone()).collect()).collect();
        assert_eq!(ids, vec![vec!["1", "2"], vec!["3"], vec!["4"]]);
        assert!(b[0].tokens <= 10 && b[2].tokens <= 10);
        assert!(b[0].text.starts_with("-----Reports-----\nid|content\n1|a b"));
        assert!(pack_batches("Reports", &["id"], Vec::<Vec<String>>::new(), 10, &words).is_empty());
    }
}
