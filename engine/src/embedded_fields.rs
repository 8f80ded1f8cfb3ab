//! The text fields that are embedded (GraphRAG's text_unit_text,
//! entity_description, community_full_content, and LightRAG's
//! relationship_description): which table each comes from and the text of
//! each row. Shared by the `embed` verb, the settings and the query engine.

use arrow_array::RecordBatch;
use serde::{Deserialize, Serialize};

use crate::table::strings;

/// An embedded field, written by its name (`embeddings.<name>.parquet`).
/// The order is that of the query engine's per-field slots.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum EmbeddedField {
    /// `text_units.text`.
    TextUnitText,
    /// `entities.description`, after the entity's title.
    EntityDescription,
    /// `relationships.description`, after its source and target.
    RelationshipDescription,
    /// `community_reports.full_content`.
    CommunityFullContent,
}

impl EmbeddedField {
    pub(crate) const ALL: [EmbeddedField; 4] = [
        EmbeddedField::TextUnitText,
        EmbeddedField::EntityDescription,
        EmbeddedField::RelationshipDescription,
        EmbeddedField::CommunityFullContent,
    ];

    /// The name settings and file names use.
    pub fn name(self) -> &'static str {
        match self {
            EmbeddedField::TextUnitText => "text_unit_text",
            EmbeddedField::EntityDescription => "entity_description",
            EmbeddedField::RelationshipDescription => "relationship_description",
            EmbeddedField::CommunityFullContent => "community_full_content",
        }
    }

    /// A mark of how [`texts`] makes this field's texts, for the embed
    /// step's fingerprint: a change there changes the mark, so that a run
    /// resumed from before embeds the field again. Empty for fields whose
    /// texts are as they always were.
    pub fn texts_mark(self) -> &'static str {
        match self {
            // Extractive reports are embedded from their head (`report_texts`).
            EmbeddedField::CommunityFullContent => "|extractive-report-head",
            _ => "",
        }
    }

    /// The table whose rows the field's vectors belong to.
    pub fn table(self) -> &'static str {
        match self {
            EmbeddedField::TextUnitText => "text_units",
            EmbeddedField::EntityDescription => "entities",
            EmbeddedField::RelationshipDescription => "relationships",
            EmbeddedField::CommunityFullContent => "community_reports",
        }
    }
}

/// What is done with a text longer than the embedding model takes
/// (`embed_text.long_text`: `split` or `truncate`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum LongText {
    /// Embed the parts and average their vectors.
    Split,
    /// Embed the first part only.
    Truncate,
}

/// (row ids, texts) of `field` in its source table; None where a row has
/// nothing to embed (an empty text, or a relationship without description).
pub fn texts(field: EmbeddedField, t: &RecordBatch) -> anyhow::Result<(Vec<String>, Vec<Option<String>>)> {
    let table = field.table();
    let own = |v: Vec<&str>| v.into_iter().map(|s| (!s.trim().is_empty()).then(|| s.to_string())).collect::<Vec<_>>();
    let ids = strings(t, table, "id")?;
    let texts: Vec<Option<String>> = match field {
        EmbeddedField::TextUnitText => own(strings(t, table, "text")?),
        EmbeddedField::EntityDescription => strings(t, table, "title")?
            .iter()
            .zip(strings(t, table, "description")?)
            .map(|(title, d)| Some(format!("{title}:{d}")))
            .collect(),
        EmbeddedField::CommunityFullContent => own(report_texts(t)?),
        EmbeddedField::RelationshipDescription => {
            let (s, g, d) =
                (strings(t, table, "source")?, strings(t, table, "target")?, strings(t, table, "description")?);
            (0..t.num_rows())
                .map(|i| (!d[i].trim().is_empty()).then(|| format!("{} {}:{}", s[i], g[i], d[i])))
                .collect()
        }
    };
    Ok((ids.into_iter().map(str::to_string).collect(), texts))
}

/// Each report's text to embed: its `full_content`, as GraphRAG embeds it,
/// but for an extractive report (made without a chat model) its head,
/// `# title` and summary as `full_content` starts. An extractive report is
/// its units' own sentences under their entities' names, so embedding it
/// whole embeds those units a second time (on a 10 MB corpus it cost as
/// much as the text units: 217 of 455 CPU-s); its head is what it adds over
/// them, its central entities' names, with its first quote. (The head and
/// every finding's heading ranked worse for DRIFT on the dev sets: the
/// names of peripheral entities blur the vector.) A table without
/// `rating_explanation` (where the mark is) is embedded whole.
fn report_texts(t: &RecordBatch) -> anyhow::Result<Vec<&str>> {
    let table = EmbeddedField::CommunityFullContent.table();
    let full = strings(t, table, "full_content")?;
    if t.column_by_name("rating_explanation").is_none() {
        return Ok(full);
    }
    let why = strings(t, table, "rating_explanation")?;
    Ok(full
        .into_iter()
        .zip(why)
        .map(|(full, why)| match why.starts_with(graphrag_operations::community_report::EXTRACTIVE) {
            true => extractive_head(full),
            false => full,
        })
        .collect())
}

/// `# title\n\nsummary` of an extractive report's `full_content`: up to its
/// first finding's heading (`\n\n## `), the whole text when it has none.
fn extractive_head(full: &str) -> &str {
    full.find("\n\n## ").map_or(full, |end| &full[..end])
}

/// Rows with something to embed: (ids, texts).
pub fn embeddable(field: EmbeddedField, t: &RecordBatch) -> anyhow::Result<(Vec<String>, Vec<String>)> {
    let (ids, texts) = texts(field, t)?;
    Ok(ids.into_iter().zip(texts).filter_map(|(id, t)| t.map(|t| (id, t))).unzip())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn extractive_reports_embed_their_head() {
        use arrow_array::{ArrayRef, StringArray};
        use std::sync::Arc;
        let column = |v: [&str; 2]| Arc::new(StringArray::from(v.to_vec())) as ArrayRef;
        let head = "# SCROOGE, BOB\n\nA community of 2 entities and 1 relationships, centred on SCROOGE, BOB.";
        let extractive = format!(
            "{head}\n\n## SCROOGE (degree 5)\n\n\"Scrooge sat.\" [Data: Sources (7)]\n\n## SCROOGE — BOB\n\nThey meet."
        );
        let written = "# The Cratchits\n\nA family.\n\n## Bob\n\nA clerk.";
        let t = RecordBatch::try_from_iter([
            ("id", column(["a", "b"])),
            ("full_content", column([extractive.as_str(), written])),
            (
                "rating_explanation",
                column([&format!("{} no chat model", graphrag_operations::community_report::EXTRACTIVE), "Central."]),
            ),
        ])
        .unwrap();
        let (_, texts) = embeddable(EmbeddedField::CommunityFullContent, &t).unwrap();
        assert_eq!(texts, [head, written]);
        let without_mark = t.project(&[0, 1]).unwrap();
        let (_, texts) = embeddable(EmbeddedField::CommunityFullContent, &without_mark).unwrap();
        assert_eq!(texts, [extractive.as_str(), written]);
    }

    #[test]
    fn fields_are_written_by_name() {
        for field in EmbeddedField::ALL {
            assert_eq!(serde_json::to_value(field).unwrap(), field.name());
            assert_eq!(serde_json::from_value::<EmbeddedField>(field.name().into()).unwrap(), field);
        }
    }
}
