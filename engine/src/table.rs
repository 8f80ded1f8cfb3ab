//! Reading columns out of tables by name with clear errors.

use arrow_array::cast::AsArray;
use arrow_array::types::{Float64Type, Int64Type};
use arrow_array::{Array, RecordBatch};
use arrow_schema::DataType;

/// A named column as strings (Utf8 or LargeUtf8), with an error naming the
/// table and column when it is missing or of another type.
pub fn strings<'a>(table: &'a RecordBatch, table_name: &str, column: &str) -> anyhow::Result<Vec<&'a str>> {
    let col = column_of(table, table_name, column)?;
    match col.data_type() {
        DataType::LargeUtf8 => Ok(col.as_string::<i64>().iter().map(|v| v.unwrap_or("")).collect()),
        DataType::Utf8 => Ok(col.as_string::<i32>().iter().map(|v| v.unwrap_or("")).collect()),
        other => anyhow::bail!("table `{table_name}`: column `{column}` is {other}, expected a string column"),
    }
}

pub fn ints(table: &RecordBatch, table_name: &str, column: &str) -> anyhow::Result<Vec<i64>> {
    let col = column_of(table, table_name, column)?;
    match col.data_type() {
        DataType::Int64 => Ok(col.as_primitive::<Int64Type>().iter().map(|v| v.unwrap_or(0)).collect()),
        other => {
            anyhow::bail!("table `{table_name}`: column `{column}` is {other}, expected int64")
        }
    }
}

pub fn floats(table: &RecordBatch, table_name: &str, column: &str) -> anyhow::Result<Vec<f64>> {
    let col = column_of(table, table_name, column)?;
    match col.data_type() {
        DataType::Float64 => Ok(col.as_primitive::<Float64Type>().iter().map(|v| v.unwrap_or(0.0)).collect()),
        other => {
            anyhow::bail!("table `{table_name}`: column `{column}` is {other}, expected double")
        }
    }
}

/// A `list<string>` column as owned rows.
pub fn string_lists(table: &RecordBatch, table_name: &str, column: &str) -> anyhow::Result<Vec<Vec<String>>> {
    let col = column_of(table, table_name, column)?;
    let DataType::List(_) = col.data_type() else {
        anyhow::bail!("table `{table_name}`: column `{column}` is {}, expected list<string>", col.data_type());
    };
    let lists = col.as_list::<i32>();
    (0..lists.len())
        .map(|i| {
            let values = lists.value(i);
            match values.data_type() {
                DataType::Utf8 => Ok(values.as_string::<i32>().iter().map(|v| v.unwrap_or("").to_string()).collect()),
                DataType::LargeUtf8 => {
                    Ok(values.as_string::<i64>().iter().map(|v| v.unwrap_or("").to_string()).collect())
                }
                other => anyhow::bail!("table `{table_name}`: column `{column}` holds {other}, expected strings"),
            }
        })
        .collect()
}

/// A `list<string>` column as rows borrowing the table's strings: for large
/// id lists (a community's relationships) where owned copies would cost more
/// than the table itself.
pub fn string_list_refs<'a>(
    table: &'a RecordBatch,
    table_name: &str,
    column: &str,
) -> anyhow::Result<Vec<Vec<&'a str>>> {
    let col = column_of(table, table_name, column)?;
    let DataType::List(_) = col.data_type() else {
        anyhow::bail!("table `{table_name}`: column `{column}` is {}, expected list<string>", col.data_type());
    };
    let lists = col.as_list::<i32>();
    let values = lists.values();
    let value_at: Box<dyn Fn(usize) -> &'a str> = match values.data_type() {
        DataType::Utf8 => {
            let v = values.as_string::<i32>();
            Box::new(move |j| if v.is_null(j) { "" } else { v.value(j) })
        }
        DataType::LargeUtf8 => {
            let v = values.as_string::<i64>();
            Box::new(move |j| if v.is_null(j) { "" } else { v.value(j) })
        }
        other => anyhow::bail!("table `{table_name}`: column `{column}` holds {other}, expected strings"),
    };
    let offsets = lists.value_offsets();
    Ok((0..lists.len()).map(|i| (offsets[i] as usize..offsets[i + 1] as usize).map(&value_at).collect()).collect())
}

pub fn column_of<'a>(table: &'a RecordBatch, table_name: &str, column: &str) -> anyhow::Result<&'a dyn Array> {
    table
        .column_by_name(column)
        .map(|c| c.as_ref())
        .ok_or_else(|| anyhow::anyhow!("table `{table_name}` has no column `{column}`"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn borrowed_and_owned_string_lists_agree() {
        let lists = crate::schema::id_list_col([vec!["a", "b"], vec![], vec!["c"]]);
        let sliced = lists.slice(1, 2);
        for col in [lists, sliced] {
            let schema = std::sync::Arc::new(arrow_schema::Schema::new(vec![arrow_schema::Field::new(
                "ids",
                col.data_type().clone(),
                true,
            )]));
            let t = RecordBatch::try_new(schema, vec![col]).unwrap();
            let owned = string_lists(&t, "t", "ids").unwrap();
            let borrowed = string_list_refs(&t, "t", "ids").unwrap();
            assert_eq!(borrowed, owned);
        }
        let t = RecordBatch::try_new(
            std::sync::Arc::new(arrow_schema::Schema::new(vec![arrow_schema::Field::new("n", DataType::Int64, false)])),
            vec![crate::schema::int_col([1])],
        )
        .unwrap();
        assert!(string_list_refs(&t, "t", "n").unwrap_err().to_string().contains("expected list<string>"));
    }
}
