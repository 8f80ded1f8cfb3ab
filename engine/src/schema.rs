//! The GraphRAG output tables (shared/graphrag-schema.md): Arrow schemas and
//! column builders, so every verb writes exactly the same columns and types.

use std::sync::Arc;

use arrow_array::builder::{LargeStringBuilder, ListBuilder, StringBuilder};
use arrow_array::{ArrayRef, Int64Array, LargeStringArray};
use arrow_schema::{DataType, Field, Schema, SchemaRef};

/// `string` columns are Arrow large_string, as in GraphRAG's files.
pub fn text_field(name: &str) -> Field {
    Field::new(name, DataType::LargeUtf8, true)
}

/// `list<string>` id columns.
pub fn id_list_field(name: &str) -> Field {
    Field::new(
        name,
        DataType::List(Arc::new(Field::new("item", DataType::Utf8, true))),
        true,
    )
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

pub fn text_col<S: AsRef<str>>(values: impl IntoIterator<Item = S>) -> ArrayRef {
    Arc::new(
        values
            .into_iter()
            .map(|v| Some(v.as_ref().to_string()))
            .collect::<LargeStringArray>(),
    )
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
