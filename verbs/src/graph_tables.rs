//! Building and reading the intermediate graph tables shared by the graph
//! verbs (merged graph, summarised graph).

use arrow_array::RecordBatch;

use graphrag_engine::schema;
use graphrag_engine::table::{floats, int_lists, ints, string_list_refs, string_lists, strings};
use graphrag_operations::graph_merge::{MergedEntity, MergedRelationship};

pub fn merged_entities_table(entities: &[MergedEntity]) -> anyhow::Result<RecordBatch> {
    Ok(RecordBatch::try_new(
        schema::graph_entities(),
        vec![
            schema::text_col(entities.iter().map(|e| &e.title)),
            schema::text_col(entities.iter().map(|e| &e.entity_type)),
            schema::id_list_col(entities.iter().map(|e| &e.descriptions)),
            schema::id_list_col(entities.iter().map(|e| &e.text_unit_ids)),
            schema::int_col(entities.iter().map(|e| e.frequency as i64)),
            sources_col(entities.iter().map(|e| &e.description_sources)),
        ],
    )?)
}

/// `description_sources` as flat pairs (see `schema::graph_entities`).
fn sources_col<'a>(rows: impl Iterator<Item = &'a Vec<(u32, u32)>>) -> arrow_array::ArrayRef {
    schema::int_list_col(rows.map(|pairs| pairs.iter().flat_map(|&(d, u)| [i64::from(d), i64::from(u)]).collect()))
}

/// `description_sources` of a merged graph table, one list of pairs per row;
/// empty lists for a table without the column (written before it existed):
/// the sources are unknown then, and an update summarises such an element
/// from all its descriptions, as a fresh index does.
fn read_sources(t: &RecordBatch, name: &str) -> anyhow::Result<Vec<Vec<(u32, u32)>>> {
    if t.column_by_name("description_sources").is_none() {
        return Ok(vec![Vec::new(); t.num_rows()]);
    }
    Ok(int_lists(t, name, "description_sources")?
        .into_iter()
        .map(|flat| flat.chunks_exact(2).map(|p| (p[0] as u32, p[1] as u32)).collect())
        .collect())
}

pub fn merged_relationships_table(rels: &[MergedRelationship]) -> anyhow::Result<RecordBatch> {
    Ok(RecordBatch::try_new(
        schema::graph_relationships(),
        vec![
            schema::text_col(rels.iter().map(|r| &r.source)),
            schema::text_col(rels.iter().map(|r| &r.target)),
            schema::id_list_col(rels.iter().map(|r| &r.descriptions)),
            schema::float_col(rels.iter().map(|r| r.weight)),
            schema::id_list_col(rels.iter().map(|r| &r.text_unit_ids)),
            sources_col(rels.iter().map(|r| &r.description_sources)),
        ],
    )?)
}

pub fn read_merged_entities(t: &RecordBatch, name: &str) -> anyhow::Result<Vec<MergedEntity>> {
    let titles = strings(t, name, "title")?;
    let types = strings(t, name, "type")?;
    let descs = descriptions(t, name)?;
    let units = string_lists(t, name, "text_unit_ids")?;
    let freq = ints(t, name, "frequency")?;
    let mut sources = read_sources(t, name)?;
    Ok((0..t.num_rows())
        .map(|i| MergedEntity {
            title: titles[i].to_string(),
            entity_type: types[i].to_string(),
            descriptions: descs[i].clone(),
            text_unit_ids: units[i].clone(),
            description_sources: std::mem::take(&mut sources[i]),
            frequency: freq[i] as u32,
        })
        .collect())
}

pub fn read_merged_relationships(t: &RecordBatch, name: &str) -> anyhow::Result<Vec<MergedRelationship>> {
    let sources = strings(t, name, "source")?;
    let targets = strings(t, name, "target")?;
    let descs = descriptions(t, name)?;
    let weights = floats(t, name, "weight")?;
    let units = string_lists(t, name, "text_unit_ids")?;
    let mut description_sources = read_sources(t, name)?;
    Ok((0..t.num_rows())
        .map(|i| MergedRelationship {
            source: sources[i].to_string(),
            target: targets[i].to_string(),
            descriptions: descs[i].clone(),
            weight: weights[i],
            text_unit_ids: units[i].clone(),
            description_sources: std::mem::take(&mut description_sources[i]),
        })
        .collect())
}

/// Descriptions of a graph table joined by newlines, one string per row: the
/// `descriptions` list of a merged graph or the single `description` of a
/// summarised one.
pub fn joined_descriptions(t: &RecordBatch, name: &str) -> anyhow::Result<Vec<String>> {
    if t.column_by_name("descriptions").is_some() {
        Ok(string_list_refs(t, name, "descriptions")?.iter().map(|d| d.join("\n")).collect())
    } else {
        Ok(strings(t, name, "description")?.into_iter().map(str::to_string).collect())
    }
}

/// Descriptions of a graph table: the `descriptions` list column of a merged
/// graph, or the single `description` of a summarised one.
fn descriptions(t: &RecordBatch, name: &str) -> anyhow::Result<Vec<Vec<String>>> {
    if t.column_by_name("descriptions").is_some() {
        string_lists(t, name, "descriptions")
    } else {
        Ok(strings(t, name, "description")?
            .into_iter()
            .map(|d| if d.is_empty() { Vec::new() } else { vec![d.to_string()] })
            .collect())
    }
}

/// One description per element: the summary (or the only description).
pub fn summarized_entities_table(entities: &[MergedEntity], summaries: &[String]) -> anyhow::Result<RecordBatch> {
    Ok(RecordBatch::try_new(
        schema::summarized_entities(),
        vec![
            schema::text_col(entities.iter().map(|e| &e.title)),
            schema::text_col(entities.iter().map(|e| &e.entity_type)),
            schema::text_col(summaries),
            schema::id_list_col(entities.iter().map(|e| &e.text_unit_ids)),
            schema::int_col(entities.iter().map(|e| e.frequency as i64)),
        ],
    )?)
}

pub fn summarized_relationships_table(
    rels: &[MergedRelationship],
    summaries: &[String],
) -> anyhow::Result<RecordBatch> {
    Ok(RecordBatch::try_new(
        schema::summarized_relationships(),
        vec![
            schema::text_col(rels.iter().map(|r| &r.source)),
            schema::text_col(rels.iter().map(|r| &r.target)),
            schema::text_col(summaries),
            schema::float_col(rels.iter().map(|r| r.weight)),
            schema::id_list_col(rels.iter().map(|r| &r.text_unit_ids)),
        ],
    )?)
}
