//! The text fields that are embedded (GraphRAG's text_unit_text,
//! entity_description, community_full_content, and LightRAG's
//! relationship_description): which table each comes from and the text of
//! each row. Shared by the `embed` verb and the query engine.

use arrow_array::RecordBatch;

use crate::table::strings;

pub const FIELDS: [&str; 4] =
    ["text_unit_text", "entity_description", "community_full_content", "relationship_description"];

/// The table whose rows a field's vectors belong to.
pub fn source_table(field: &str) -> &'static str {
    match field {
        "text_unit_text" => "text_units",
        "entity_description" => "entities",
        "community_full_content" => "community_reports",
        _ => "relationships",
    }
}

/// (row ids, texts) of `field` in its source table; None where a row has
/// nothing to embed (an empty text, or a relationship without description).
pub fn texts(field: &str, t: &RecordBatch) -> anyhow::Result<(Vec<String>, Vec<Option<String>>)> {
    let table = source_table(field);
    let own = |v: Vec<&str>| v.into_iter().map(|s| (!s.trim().is_empty()).then(|| s.to_string())).collect::<Vec<_>>();
    let ids = strings(t, table, "id")?;
    let texts: Vec<Option<String>> = match field {
        "text_unit_text" => own(strings(t, table, "text")?),
        "entity_description" => strings(t, table, "title")?
            .iter()
            .zip(strings(t, table, "description")?)
            .map(|(title, d)| Some(format!("{title}:{d}")))
            .collect(),
        "community_full_content" => own(strings(t, table, "full_content")?),
        _ => {
            let (s, g, d) =
                (strings(t, table, "source")?, strings(t, table, "target")?, strings(t, table, "description")?);
            (0..t.num_rows())
                .map(|i| (!d[i].trim().is_empty()).then(|| format!("{} {}:{}", s[i], g[i], d[i])))
                .collect()
        }
    };
    Ok((ids.into_iter().map(str::to_string).collect(), texts))
}

/// Rows with something to embed: (ids, texts).
pub fn embeddable(field: &str, t: &RecordBatch) -> anyhow::Result<(Vec<String>, Vec<String>)> {
    let (ids, texts) = texts(field, t)?;
    Ok(ids.into_iter().zip(texts).filter_map(|(id, t)| t.map(|t| (id, t))).unzip())
}
