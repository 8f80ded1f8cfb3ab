//! Items of a step whose model call failed — a text unit that could not be
//! extracted, a description that could not be summarised, a community
//! without a report. They are never turned into empty results: a step
//! reports them with [`crate::context::VerbContext::item_failures`], which
//! fails the step unless the project tolerates that fraction of failures
//! (`failures.tolerated_fraction`, default 0); either way they are named in
//! stats.json and in the run's summary (a text unit by its document and
//! chunk number), and, as a failed answer is never cached, the next run asks
//! exactly those again.

use std::collections::HashMap;
use std::fmt;

use arrow_array::RecordBatch;
use serde::{Deserialize, Serialize};

use crate::table::{string_lists, strings};

/// What kind of items, e.g. `text unit` (singular; see [`FailedItems`]).
pub const TEXT_UNIT: &str = "text unit";

/// One failed item.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FailedItem {
    /// The step that failed it.
    pub step: String,
    /// Its id (a text unit id, an entity title, a community number).
    pub id: String,
    /// How people know it: `document a.txt, chunk 3 of 7`.
    pub name: String,
    /// Why its call failed.
    pub error: String,
}

/// A step's failed items, beyond what the project tolerates: the step's error.
#[derive(Debug, Clone)]
pub struct FailedItems {
    /// What the items are, singular (`text unit`, `description`, `community report`).
    pub what: &'static str,
    /// The step's items of that kind, failed or not.
    pub total: usize,
    /// `failures.tolerated_fraction`, which they exceeded.
    pub tolerated_fraction: f64,
    /// The failed ones.
    pub items: Vec<FailedItem>,
}

/// The plural of an item kind (`text units`, `entity pair batches`).
pub fn plural(what: &str) -> String {
    if ["s", "x", "ch", "sh"].iter().any(|end| what.ends_with(end)) {
        format!("{what}es")
    } else {
        format!("{what}s")
    }
}

/// How many failed items a message lists before "and N more".
const LISTED: usize = 10;

/// One line: how many failed, and the first of them (the list is
/// [`write_list`]'s, and stats.json's).
impl fmt::Display for FailedItems {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let n = self.items.len();
        write!(f, "{n} of {} {} failed", self.total, plural(self.what))?;
        if self.tolerated_fraction > 0.0 {
            write!(f, " (more than failures.tolerated_fraction: {})", self.tolerated_fraction)?;
        }
        if let Some(first) = self.items.first() {
            write!(f, "; the first, {}: {}", first.name, first.error)?;
        }
        Ok(())
    }
}

impl std::error::Error for FailedItems {}

/// `items` one per line, the first `LISTED` of them.
pub fn write_list(f: &mut impl fmt::Write, items: &[FailedItem]) -> fmt::Result {
    for item in items.iter().take(LISTED) {
        write!(f, "\n  {}: {}", item.name, item.error)?;
    }
    if items.len() > LISTED {
        write!(f, "\n  … and {} more (all in stats.json, `failed_items`)", items.len() - LISTED)?;
    }
    Ok(())
}

/// Renames failed text units after their document and chunk number, from
/// the documents table (`title`, `text_unit_ids` in chunk order).
pub(crate) fn name_text_units(items: &mut [FailedItem], documents: &RecordBatch) -> anyhow::Result<()> {
    let titles = strings(documents, "documents", "title")?;
    let units = string_lists(documents, "documents", "text_unit_ids")?;
    let mut place: HashMap<&str, (usize, usize, usize)> = HashMap::new();
    for (doc, ids) in units.iter().enumerate() {
        for (i, id) in ids.iter().enumerate() {
            place.insert(id.as_str(), (doc, i + 1, ids.len()));
        }
    }
    for item in items.iter_mut() {
        if let Some(&(doc, n, m)) = place.get(item.id.as_str()) {
            item.name = format!("document {}, chunk {n} of {m}", titles[doc]);
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::schema;

    fn item(id: &str) -> FailedItem {
        FailedItem {
            step: "extract_graph".into(),
            id: id.into(),
            name: format!("text unit {id}"),
            error: "malformed answer".into(),
        }
    }

    #[test]
    fn text_units_are_named_by_document_and_chunk_number() {
        let documents = RecordBatch::try_new(
            schema::documents(arrow_schema::DataType::LargeUtf8),
            vec![
                schema::text_col(["d1", "d2"]),
                schema::int_col(0..2),
                schema::text_col(["a.txt", "b.txt"]),
                schema::text_col(["x", "y"]),
                schema::id_list_col(vec![vec!["u1".to_string(), "u2".into(), "u3".into()], vec!["u4".to_string()]]),
                schema::text_col(["2026", "2026"]),
                schema::opt_text_col(vec![None::<String>, None]),
            ],
        )
        .unwrap();
        let mut items = vec![item("u2"), item("u4"), item("elsewhere")];
        name_text_units(&mut items, &documents).unwrap();
        let names: Vec<&str> = items.iter().map(|i| i.name.as_str()).collect();
        assert_eq!(names, ["document a.txt, chunk 2 of 3", "document b.txt, chunk 1 of 1", "text unit elsewhere"]);
    }

    #[test]
    fn the_message_lists_the_first_items_and_counts_the_rest() {
        let failed = FailedItems {
            what: TEXT_UNIT,
            total: 40,
            tolerated_fraction: 0.0,
            items: (0..12).map(|i| item(&format!("u{i}"))).collect(),
        };
        assert_eq!(failed.to_string(), "12 of 40 text units failed; the first, text unit u0: malformed answer");
        assert_eq!(plural("entity pair batch"), "entity pair batches");
        assert_eq!(plural("community report"), "community reports");
        let mut list = String::new();
        write_list(&mut list, &failed.items).unwrap();
        assert!(list.starts_with("\n  text unit u0: malformed answer\n  text unit u1: "), "{list}");
        assert_eq!(list.lines().count(), 1 + LISTED + 1, "{list}");
        assert!(list.ends_with("… and 2 more (all in stats.json, `failed_items`)"), "{list}");
    }
}
