//! The GraphRAG output tables (shared/graphrag-schema.md): Arrow schemas and
//! column builders, so every verb writes exactly the same columns and types.

use std::sync::Arc;

use arrow_array::builder::{Int64Builder, LargeStringBuilder, ListBuilder, StringBuilder, StructBuilder};
use arrow_array::types::Int32Type;
use arrow_array::{
    Array, ArrayRef, DictionaryArray, Float64Array, Int32Array, Int64Array, LargeStringArray, ListArray, RecordBatch,
    StringArray,
};
use arrow_buffer::OffsetBuffer;
use arrow_schema::{ArrowError, DataType, Field, Fields, Schema, SchemaRef};

use crate::table::{IdNumbers, StringLists};

/// `string` columns are Arrow large_string, as in GraphRAG's files.
pub fn text_field(name: &str) -> Field {
    Field::new(name, DataType::LargeUtf8, true)
}

/// `list<string>` id columns.
pub fn id_list_field(name: &str) -> Field {
    Field::new(name, DataType::List(Arc::new(Field::new("item", DataType::Utf8, true))), true)
}

pub(crate) fn int_field(name: &str) -> Field {
    Field::new(name, DataType::Int64, true)
}

/// documents.parquet (GraphRAG); `raw_data` is the type of the column that
/// keeps a CSV or JSON record's other fields (a struct of strings; null
/// when no document has any).
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

/// text_units.parquet (GraphRAG).
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

/// `double` columns.
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

/// Per-chunk relationship records (entity_extract's second output).
pub fn raw_relationships() -> SchemaRef {
    Arc::new(Schema::new(vec![
        text_field("text_unit_id"),
        text_field("source"),
        text_field("target"),
        text_field("description"),
        float_field("weight"),
    ]))
}

/// The merged graph before summarisation: every distinct description kept,
/// and which text units gave it (`description_sources`: flat pairs of an
/// index into `descriptions` and one into `text_unit_ids`).
pub fn graph_entities() -> SchemaRef {
    Arc::new(Schema::new(vec![
        text_field("title"),
        text_field("type"),
        id_list_field("descriptions"),
        id_list_field("text_unit_ids"),
        int_field("frequency"),
        int_list_field("description_sources"),
    ]))
}

/// The merged relationships before summarisation, as [`graph_entities`].
pub fn graph_relationships() -> SchemaRef {
    Arc::new(Schema::new(vec![
        text_field("source"),
        text_field("target"),
        id_list_field("descriptions"),
        float_field("weight"),
        id_list_field("text_unit_ids"),
        int_list_field("description_sources"),
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

/// The relationships after summarisation: one description each.
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

/// entity_aliases.parquet (graphrag-rs): one row per entity merged into
/// another by `resolve_entities`: the title it had, the entity it is now
/// (`entity_id`, `title`), and how that was decided.
pub fn entity_aliases() -> SchemaRef {
    Arc::new(Schema::new(vec![
        text_field("alias"),
        text_field("entity_id"),
        text_field("title"),
        text_field("method"),
        float_field("score"),
        text_field("evidence"),
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

pub(crate) fn int_list_field(name: &str) -> Field {
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

/// The schema-metadata key of lexical_index.parquet that names the analyzer
/// its terms came from (`graphrag_operations::lexical::ANALYZER`).
pub const LEXICAL_ANALYZER_KEY: &str = "graphrag_rs.analyzer";

/// lexical_index.parquet (graphrag-rs): each text unit's distinct terms with
/// their counts, sorted by term, and its length in terms; what BM25 needs.
pub fn lexical_index(analyzer: &str) -> SchemaRef {
    let terms = Field::new("terms", DataType::List(Arc::new(Field::new("item", DataType::Utf8, true))), true);
    Arc::new(Schema::new_with_metadata(
        vec![text_field("id"), int_field("n_terms"), terms, int_list_field("term_counts")],
        std::collections::HashMap::from([(LEXICAL_ANALYZER_KEY.to_string(), analyzer.to_string())]),
    ))
}

/// The struct of one finding in community_reports.findings.
pub(crate) fn finding_fields() -> Fields {
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

/// A `list<int64>` column, a list per row.
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

/// A `double` column without nulls.
pub fn float_col(values: impl IntoIterator<Item = f64>) -> ArrayRef {
    Arc::new(values.into_iter().collect::<Float64Array>())
}

/// A `large_string` column without nulls ([`text_field`]).
pub fn text_col<S: AsRef<str>>(values: impl IntoIterator<Item = S>) -> ArrayRef {
    Arc::new(values.into_iter().map(|v| Some(v.as_ref().to_string())).collect::<LargeStringArray>())
}

/// An `int64` column without nulls.
pub fn int_col(values: impl IntoIterator<Item = i64>) -> ArrayRef {
    Arc::new(values.into_iter().collect::<Int64Array>())
}

/// A plain `list<string>` column ([`id_list_field`]), a list per row; for
/// ids listed by many rows, [`id_list_col_of`] keeps each once.
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

/// The in-memory form of an id list column whose ids are listed by many rows:
/// each distinct id is kept once, in `ids` (a string column, e.g. a table's
/// `id`), and each row lists indices into it (an Arrow dictionary). A text
/// unit id is 128 hex characters, listed ~10 million times at 100 MB of
/// input. Files never hold this form: `store::write_table` writes the plain
/// `list<string>` of [`id_list_field`] (`file_schema`, `file_column`), and
/// `table::StringLists` reads both.
pub fn id_list_col_of<R: IntoIterator<Item = u32>>(ids: ArrayRef, rows: impl IntoIterator<Item = R>) -> ArrayRef {
    let mut keys: Vec<i32> = Vec::new();
    let mut offsets = vec![0i32];
    for row in rows {
        keys.extend(row.into_iter().map(|k| i32::try_from(k).expect("fewer than 2^31 ids")));
        offsets.push(i32::try_from(keys.len()).expect("fewer than 2^31 listed ids in a column"));
    }
    keyed_lists(ids, offsets, keys)
}

/// [`id_list_col_of`] for ids given as strings: each distinct id is stored once.
pub fn interned_id_list_col<'a, R: IntoIterator<Item = &'a str>>(rows: impl IntoIterator<Item = R>) -> ArrayRef {
    let mut numbers = IdNumbers::default();
    let mut keys: Vec<i32> = Vec::new();
    let mut offsets = vec![0i32];
    for row in rows {
        keys.extend(row.into_iter().map(|id| i32::try_from(numbers.number_of(id)).expect("fewer than 2^31 ids")));
        offsets.push(i32::try_from(keys.len()).expect("fewer than 2^31 listed ids in a column"));
    }
    let ids: ArrayRef = Arc::new(StringArray::from_iter_values(numbers.ids()));
    keyed_lists(ids, offsets, keys)
}

fn keyed_lists(ids: ArrayRef, offsets: Vec<i32>, keys: Vec<i32>) -> ArrayRef {
    let items = DictionaryArray::<Int32Type>::try_new(Int32Array::from(keys), ids).expect("keys index the ids");
    let field = Arc::new(Field::new("item", items.data_type().clone(), true));
    Arc::new(ListArray::new(field, OffsetBuffer::new(offsets.into()), Arc::new(items), None))
}

/// `list<string>`: an id list as files hold it.
fn id_list_type() -> DataType {
    id_list_field("").data_type().clone()
}

/// An id list column's type, in either form (plain `list<string>` or keyed).
pub fn is_id_list(data_type: &DataType) -> bool {
    is_keyed_id_list(data_type) || *data_type == id_list_type()
}

/// Whether a column of this type is an id list in its in-memory form
/// ([`id_list_col_of`]), which files never hold.
pub(crate) fn is_keyed_id_list(data_type: &DataType) -> bool {
    matches!(data_type, DataType::List(item) if matches!(item.data_type(), DataType::Dictionary(k, _) if **k == DataType::Int32))
}

/// A table of `schema`'s columns, where an id list column (declared plain or
/// keyed) may come in either form ([`id_list_col_of`]): the field takes the
/// column's.
pub fn batch(schema: SchemaRef, columns: Vec<ArrayRef>) -> Result<RecordBatch, ArrowError> {
    let fields: Vec<Field> = schema
        .fields()
        .iter()
        .zip(&columns)
        .map(|(f, c)| match is_id_list(f.data_type()) && is_id_list(c.data_type()) {
            true => f.as_ref().clone().with_data_type(c.data_type().clone()),
            false => f.as_ref().clone(),
        })
        .collect();
    RecordBatch::try_new(Arc::new(Schema::new_with_metadata(fields, schema.metadata().clone())), columns)
}

/// The id list columns of the tables: in memory they take the form of
/// [`id_list_col_of`], whoever made them (`store::read_table` too).
pub(crate) const ID_LIST_COLUMNS: [&str; 4] = ["text_unit_ids", "entity_ids", "relationship_ids", "covariate_ids"];

/// The schema a table of `file_schema` is read with: its id lists
/// ([`ID_LIST_COLUMNS`] of type `list<string>`) in their in-memory form.
pub(crate) fn in_memory_schema(file_schema: &Schema) -> SchemaRef {
    let keyed = DataType::List(Arc::new(Field::new(
        "item",
        DataType::Dictionary(Box::new(DataType::Int32), Box::new(DataType::Utf8)),
        true,
    )));
    let fields: Vec<Field> = file_schema
        .fields()
        .iter()
        .map(|f| match ID_LIST_COLUMNS.contains(&f.name().as_str()) && *f.data_type() == id_list_type() {
            true => f.as_ref().clone().with_data_type(keyed.clone()),
            false => f.as_ref().clone(),
        })
        .collect();
    Arc::new(Schema::new_with_metadata(fields, file_schema.metadata().clone()))
}

/// The schema a table is written with: id lists as plain `list<string>`.
pub(crate) fn file_schema(schema: &Schema) -> SchemaRef {
    let fields: Vec<Field> = schema
        .fields()
        .iter()
        .map(|f| match is_keyed_id_list(f.data_type()) {
            true => f.as_ref().clone().with_data_type(id_list_type()),
            false => f.as_ref().clone(),
        })
        .collect();
    Arc::new(Schema::new_with_metadata(fields, schema.metadata().clone()))
}

/// A column as it is written: an id list in its in-memory form expanded to
/// plain `list<string>` (the same array [`id_list_col`] builds); others as
/// they are.
pub(crate) fn file_column(column: &ArrayRef) -> ArrayRef {
    match StringLists::of_array(column.as_ref()) {
        Some(lists) if is_keyed_id_list(column.data_type()) => id_list_col(lists.rows()),
        _ => column.clone(),
    }
}

/// A table as it is written: [`file_schema`], [`file_column`]s (for tests
/// comparing tables in either form).
#[cfg(test)]
pub(crate) fn file_form(table: &RecordBatch) -> RecordBatch {
    let columns = table.columns().iter().map(file_column).collect();
    RecordBatch::try_new(file_schema(&table.schema()), columns).expect("file columns fit the file schema")
}

/// A large_string column of nulls and values.
pub fn opt_text_col(values: impl IntoIterator<Item = Option<String>>) -> ArrayRef {
    let mut b = LargeStringBuilder::new();
    for v in values {
        b.append_option(v);
    }
    Arc::new(b.finish())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keyed_id_lists_read_like_plain_ones() {
        let rows = [vec!["u2", "u1"], vec![], vec!["u1", "u3", "u1"]];
        let plain = id_list_col(rows.clone());
        let ids = text_col(["u1", "u2", "u3"]);
        let keyed = id_list_col_of(ids, [vec![1, 0], vec![], vec![0, 2, 0]]);
        let interned = interned_id_list_col(rows.clone());
        for col in [&keyed, &interned] {
            assert!(is_keyed_id_list(col.data_type()) && !is_keyed_id_list(plain.data_type()));
            assert_eq!(file_column(col).as_ref(), plain.as_ref());
            fn read(c: &ArrayRef) -> Vec<Vec<&str>> {
                StringLists::of_array(c.as_ref()).unwrap().rows().map(|r| r.collect()).collect()
            }
            assert_eq!(read(col), rows);
            assert_eq!(read(&col.slice(1, 2)), rows[1..]);
        }
        let table = batch(
            entities(),
            vec![
                text_col(["e"]),
                int_col([0]),
                text_col(["E"]),
                text_col(["T"]),
                text_col([""]),
                id_list_col_of(text_col(["u"]), [vec![0]]),
                int_col([1]),
                int_col([0]),
            ],
        )
        .unwrap();
        assert_eq!(file_schema(&table.schema()), entities());
        // A table read back declares its id lists keyed; fresh columns of either form fit it.
        for lists in [id_list_col([vec!["u"]]), interned_id_list_col([vec!["u"]])] {
            let mut columns = table.columns().to_vec();
            columns[5] = lists;
            assert_eq!(file_form(&batch(in_memory_schema(&entities()), columns).unwrap()), file_form(&table));
        }
    }
}
