//! The GraphRAG output tables (shared/graphrag-schema.md): Arrow schemas and
//! column builders, so every verb writes exactly the same columns and types.

use std::sync::Arc;

use arrow_array::builder::{Int64Builder, LargeStringBuilder, ListBuilder, StringBuilder, StructBuilder};
use arrow_array::{ArrayRef, Float64Array, Int64Array, LargeStringArray};
use arrow_schema::{DataType, Field, Fields, Schema, SchemaRef};

/// `string` columns are Arrow large_string, as in GraphRAG's files.
pub fn text_field(name: &str) -> Field {
    Field::new(name, DataType::LargeUtf8, true)
}

/// `list<string>` id columns.
pub fn id_list_field(name: &str) -> Field {
    Field::new(name, DataType::List(Arc::new(Field::new("item", DataType::Utf8, true))), true)
}

pub fn int_field(name: &str) -> Field {
    Field::new(name, DataType::Int64, true)
}

pub fn documents(raw_data: DataType) -> SchemaRef {
    Arc::new(Schema::new(vec![
        text_field("id"),
        int_field("human_readable_id"),
        text_field("title"),
        text_field("text"),
        id_list_field("text_unit_ids"),
        text_field("creation_date"),
        Field::new("raw_data", raw_data, true),
    ]))
}

pub fn text_units() -> SchemaRef {
    Arc::new(Schema::new(vec![
        text_field("id"),
        int_field("human_readable_id"),
        text_field("text"),
        int_field("n_tokens"),
        text_field("document_id"),
        id_list_field("entity_ids"),
        id_list_field("relationship_ids"),
        id_list_field("covariate_ids"),
    ]))
}

pub fn float_field(name: &str) -> Field {
    Field::new(name, DataType::Float64, true)
}

/// Per-chunk extraction records (entity_extract's first output).
pub fn raw_entities() -> SchemaRef {
    Arc::new(Schema::new(vec![
        text_field("text_unit_id"),
        text_field("title"),
        text_field("type"),
        text_field("description"),
    ]))
}

pub fn raw_relationships() -> SchemaRef {
    Arc::new(Schema::new(vec![
        text_field("text_unit_id"),
        text_field("source"),
        text_field("target"),
        text_field("description"),
        float_field("weight"),
    ]))
}

/// The merged graph before summarisation: every distinct description kept.
pub fn graph_entities() -> SchemaRef {
    Arc::new(Schema::new(vec![
        text_field("title"),
        text_field("type"),
        id_list_field("descriptions"),
        id_list_field("text_unit_ids"),
        int_field("frequency"),
    ]))
}

pub fn graph_relationships() -> SchemaRef {
    Arc::new(Schema::new(vec![
        text_field("source"),
        text_field("target"),
        id_list_field("descriptions"),
        float_field("weight"),
        id_list_field("text_unit_ids"),
    ]))
}

/// The graph after summarisation: one description each.
pub fn summarized_entities() -> SchemaRef {
    Arc::new(Schema::new(vec![
        text_field("title"),
        text_field("type"),
        text_field("description"),
        id_list_field("text_unit_ids"),
        int_field("frequency"),
    ]))
}

pub fn summarized_relationships() -> SchemaRef {
    Arc::new(Schema::new(vec![
        text_field("source"),
        text_field("target"),
        text_field("description"),
        float_field("weight"),
        id_list_field("text_unit_ids"),
    ]))
}

/// entities.parquet (GraphRAG).
pub fn entities() -> SchemaRef {
    Arc::new(Schema::new(vec![
        text_field("id"),
        int_field("human_readable_id"),
        text_field("title"),
        text_field("type"),
        text_field("description"),
        id_list_field("text_unit_ids"),
        int_field("frequency"),
        int_field("degree"),
    ]))
}

/// relationships.parquet (GraphRAG).
pub fn relationships() -> SchemaRef {
    Arc::new(Schema::new(vec![
        text_field("id"),
        int_field("human_readable_id"),
        text_field("source"),
        text_field("target"),
        text_field("description"),
        float_field("weight"),
        int_field("combined_degree"),
        id_list_field("text_unit_ids"),
    ]))
}

/// covariates.parquet (GraphRAG claims): all strings but human_readable_id.
pub fn covariates() -> SchemaRef {
    let mut fields = vec![text_field("id"), int_field("human_readable_id")];
    for name in [
        "covariate_type",
        "type",
        "description",
        "subject_id",
        "object_id",
        "status",
        "start_date",
        "end_date",
        "source_text",
        "text_unit_id",
    ] {
        fields.push(text_field(name));
    }
    Arc::new(Schema::new(fields))
}

pub fn int_list_field(name: &str) -> Field {
    Field::new(name, DataType::List(Arc::new(Field::new("item", DataType::Int64, true))), true)
}

/// communities.parquet (GraphRAG).
pub fn communities() -> SchemaRef {
    Arc::new(Schema::new(vec![
        text_field("id"),
        int_field("human_readable_id"),
        int_field("community"),
        int_field("level"),
        int_field("parent"),
        int_list_field("children"),
        text_field("title"),
        id_list_field("entity_ids"),
        id_list_field("relationship_ids"),
        id_list_field("text_unit_ids"),
        text_field("period"),
        int_field("size"),
    ]))
}

/// The struct of one finding in community_reports.findings.
pub fn finding_fields() -> Fields {
    Fields::from(vec![Field::new("explanation", DataType::Utf8, true), Field::new("summary", DataType::Utf8, true)])
}

/// community_reports.parquet (GraphRAG).
pub fn community_reports() -> SchemaRef {
    Arc::new(Schema::new(vec![
        text_field("id"),
        int_field("human_readable_id"),
        int_field("community"),
        int_field("level"),
        int_field("parent"),
        int_list_field("children"),
        text_field("title"),
        text_field("summary"),
        text_field("full_content"),
        float_field("rank"),
        text_field("rating_explanation"),
        Field::new(
            "findings",
            DataType::List(Arc::new(Field::new("item", DataType::Struct(finding_fields()), true))),
            true,
        ),
        text_field("full_content_json"),
        text_field("period"),
        int_field("size"),
    ]))
}

pub fn int_list_col(rows: impl IntoIterator<Item = Vec<i64>>) -> ArrayRef {
    let mut b = ListBuilder::new(Int64Builder::new());
    for row in rows {
        for v in row {
            b.values().append_value(v);
        }
        b.append(true);
    }
    Arc::new(b.finish())
}

/// findings: one list of (explanation, summary) pairs per report.
pub fn findings_col(rows: impl IntoIterator<Item = Vec<(String, String)>>) -> ArrayRef {
    let fields = finding_fields();
    let mut b = ListBuilder::new(StructBuilder::from_fields(fields.clone(), 0)).with_field(Arc::new(Field::new(
        "item",
        DataType::Struct(fields),
        true,
    )));
    for row in rows {
        for (explanation, summary) in row {
            let s = b.values();
            s.field_builder::<StringBuilder>(0).expect("explanation").append_value(explanation);
            s.field_builder::<StringBuilder>(1).expect("summary").append_value(summary);
            s.append(true);
        }
        b.append(true);
    }
    Arc::new(b.finish())
}

pub fn float_col(values: impl IntoIterator<Item = f64>) -> ArrayRef {
    Arc::new(values.into_iter().collect::<Float64Array>())
}

pub fn text_col<S: AsRef<str>>(values: impl IntoIterator<Item = S>) -> ArrayRef {
    Arc::new(values.into_iter().map(|v| Some(v.as_ref().to_string())).collect::<LargeStringArray>())
}

pub fn int_col(values: impl IntoIterator<Item = i64>) -> ArrayRef {
    Arc::new(values.into_iter().collect::<Int64Array>())
}

pub fn id_list_col<L, S>(rows: impl IntoIterator<Item = L>) -> ArrayRef
where
    L: IntoIterator<Item = S>,
    S: AsRef<str>,
{
    let mut b = ListBuilder::new(StringBuilder::new());
    for row in rows {
        for id in row {
            b.values().append_value(id.as_ref());
        }
        b.append(true);
    }
    Arc::new(b.finish())
}

/// A large_string column of nulls and values.
pub fn opt_text_col(values: impl IntoIterator<Item = Option<String>>) -> ArrayRef {
    let mut b = LargeStringBuilder::new();
    for v in values {
        b.append_option(v);
    }
    Arc::new(b.finish())
}
