//! Reading columns out of tables by name with clear errors.

use std::collections::HashMap;

use arrow_array::cast::AsArray;
use arrow_array::types::{Float64Type, Int32Type, Int64Type};
use arrow_array::{Array, ArrayRef, GenericStringArray, PrimitiveArray, RecordBatch};
use arrow_schema::DataType;

/// A named column as strings (Utf8 or LargeUtf8), with an error naming the
/// table and column when it is missing or of another type.
pub fn strings<'a>(table: &'a RecordBatch, table_name: &str, column: &str) -> anyhow::Result<Vec<&'a str>> {
    let col = string_column(table, table_name, column)?;
    Ok(match col.data_type() {
        DataType::LargeUtf8 => col.as_string::<i64>().iter().map(|v| v.unwrap_or("")).collect(),
        _ => col.as_string::<i32>().iter().map(|v| v.unwrap_or("")).collect(),
    })
}

/// A named string column as it is (shared, not copied), e.g. ids for
/// `schema::id_list_col_of` to index into; errors as [`strings`].
pub fn string_column<'a>(table: &'a RecordBatch, table_name: &str, column: &str) -> anyhow::Result<&'a ArrayRef> {
    let col = named(table, table_name, column)?;
    match col.data_type() {
        DataType::Utf8 | DataType::LargeUtf8 => Ok(col),
        other => anyhow::bail!("table `{table_name}`: column `{column}` is {other}, expected a string column"),
    }
}

/// A named `int64` column (nulls read as 0); errors as [`strings`].
pub fn ints(table: &RecordBatch, table_name: &str, column: &str) -> anyhow::Result<Vec<i64>> {
    let col = column_of(table, table_name, column)?;
    match col.data_type() {
        DataType::Int64 => Ok(col.as_primitive::<Int64Type>().iter().map(|v| v.unwrap_or(0)).collect()),
        other => {
            anyhow::bail!("table `{table_name}`: column `{column}` is {other}, expected int64")
        }
    }
}

/// A named `double` column (nulls read as 0.0); errors as [`strings`].
pub fn floats(table: &RecordBatch, table_name: &str, column: &str) -> anyhow::Result<Vec<f64>> {
    let col = column_of(table, table_name, column)?;
    match col.data_type() {
        DataType::Float64 => Ok(col.as_primitive::<Float64Type>().iter().map(|v| v.unwrap_or(0.0)).collect()),
        other => {
            anyhow::bail!("table `{table_name}`: column `{column}` is {other}, expected double")
        }
    }
}

/// A `list<int64>` column as owned rows (nulls read as 0).
pub fn int_lists(table: &RecordBatch, table_name: &str, column: &str) -> anyhow::Result<Vec<Vec<i64>>> {
    let col = column_of(table, table_name, column)?;
    let lists = col.as_list_opt::<i32>().filter(|l| l.values().data_type() == &DataType::Int64).ok_or_else(|| {
        anyhow::anyhow!("table `{table_name}`: column `{column}` is {}, expected list<int64>", col.data_type())
    })?;
    Ok((0..lists.len())
        .map(|i| lists.value(i).as_primitive::<Int64Type>().iter().map(|v| v.unwrap_or(0)).collect())
        .collect())
}

/// A `list<string>` column as owned rows.
pub fn string_lists(table: &RecordBatch, table_name: &str, column: &str) -> anyhow::Result<Vec<Vec<String>>> {
    let lists = StringLists::new(table, table_name, column)?;
    Ok(lists.rows().map(|row| row.map(str::to_string).collect()).collect())
}

/// A `list<string>` column read in place: each row's strings are borrowed from
/// the table when asked for, so large id lists (a community's relationships)
/// cost nothing beyond the table itself. Reads both forms of an id list: plain
/// strings and the in-memory dictionary form (`schema::id_list_col_of`).
pub struct StringLists<'a> {
    offsets: &'a [i32],
    values: StringValues<'a>,
}

#[derive(Clone, Copy)]
enum Strings<'a> {
    Utf8(&'a GenericStringArray<i32>),
    LargeUtf8(&'a GenericStringArray<i64>),
}

impl<'a> Strings<'a> {
    fn len(self) -> usize {
        match self {
            Strings::Utf8(v) => v.len(),
            Strings::LargeUtf8(v) => v.len(),
        }
    }

    fn of(array: &'a dyn Array) -> Option<Self> {
        match array.data_type() {
            DataType::Utf8 => Some(Strings::Utf8(array.as_string::<i32>())),
            DataType::LargeUtf8 => Some(Strings::LargeUtf8(array.as_string::<i64>())),
            _ => None,
        }
    }

    /// String `j` ("" for a null).
    fn get(self, j: usize) -> &'a str {
        match self {
            Strings::Utf8(v) if !v.is_null(j) => v.value(j),
            Strings::LargeUtf8(v) if !v.is_null(j) => v.value(j),
            _ => "",
        }
    }
}

#[derive(Clone, Copy)]
enum StringValues<'a> {
    Plain(Strings<'a>),
    /// Each listed string is an index into `dictionary`.
    Keys {
        keys: &'a PrimitiveArray<Int32Type>,
        dictionary: Strings<'a>,
    },
}

impl<'a> StringValues<'a> {
    fn get(self, j: usize) -> &'a str {
        match self {
            StringValues::Plain(strings) => strings.get(j),
            StringValues::Keys { keys, dictionary } if !keys.is_null(j) => dictionary.get(keys.value(j) as usize),
            StringValues::Keys { .. } => "",
        }
    }
}

impl<'a> StringLists<'a> {
    /// The named `list<string>` column of `table`, plain or keyed; errors
    /// naming the table and column when it is missing or of another type.
    pub fn new(table: &'a RecordBatch, table_name: &str, column: &str) -> anyhow::Result<Self> {
        let col = column_of(table, table_name, column)?;
        Self::of_array(col).ok_or_else(|| {
            anyhow::anyhow!("table `{table_name}`: column `{column}` is {}, expected list<string>", col.data_type())
        })
    }

    /// A `list<string>` array (plain or keyed) read in place; None for other types.
    pub(crate) fn of_array(col: &'a dyn Array) -> Option<Self> {
        let lists = col.as_list_opt::<i32>()?;
        let items = lists.values();
        let values = match items.as_dictionary_opt::<Int32Type>() {
            Some(d) => StringValues::Keys { keys: d.keys(), dictionary: Strings::of(d.values().as_ref())? },
            None => StringValues::Plain(Strings::of(items.as_ref())?),
        };
        Some(StringLists { offsets: lists.value_offsets(), values })
    }

    /// Rows of the column.
    pub fn len(&self) -> usize {
        self.offsets.len() - 1
    }

    /// Whether the column has no rows.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Every row's strings, in row order.
    pub fn rows(&self) -> impl Iterator<Item = impl ExactSizeIterator<Item = &'a str> + Clone + 'a> + '_ {
        (0..self.len()).map(|i| self.row(i))
    }

    /// Row `i`'s strings (a null string reads as "").
    pub fn row(&self, i: usize) -> impl ExactSizeIterator<Item = &'a str> + Clone + 'a {
        let values = self.values;
        (self.offsets[i] as usize..self.offsets[i + 1] as usize).map(move |j| values.get(j))
    }
}

/// Numbers for the distinct strings of id-list columns, so that rows can be
/// kept as lists of numbers: a query over a large index holds millions of
/// text unit ids (128 characters each) in its entities' and relationships'
/// lists, but only tens of thousands of distinct ones.
#[derive(Default)]
pub struct IdNumbers<'a> {
    number: HashMap<&'a str, u32>,
    ids: Vec<&'a str>,
}

impl<'a> IdNumbers<'a> {
    /// The number of `id` (the next one when it is new).
    pub fn number_of(&mut self, id: &'a str) -> u32 {
        let next = u32::try_from(self.ids.len()).expect("fewer than 2^32 distinct ids");
        *self.number.entry(id).or_insert_with(|| {
            self.ids.push(id);
            next
        })
    }

    /// Each row of `lists` as the numbers of its strings (numbering new ones).
    /// A keyed column's dictionary is numbered once, not every mention.
    pub fn rows(&mut self, lists: &StringLists<'a>) -> Vec<Vec<u32>> {
        // The number of every listed item, in the order of the list values.
        let items: Vec<u32> = match lists.values {
            StringValues::Keys { keys, dictionary } => {
                let numbers: Vec<u32> = (0..dictionary.len()).map(|k| self.number_of(dictionary.get(k))).collect();
                (0..keys.len())
                    .map(|j| if keys.is_null(j) { self.number_of("") } else { numbers[keys.value(j) as usize] })
                    .collect()
            }
            StringValues::Plain(strings) => (0..strings.len()).map(|j| self.number_of(strings.get(j))).collect(),
        };
        (0..lists.len()).map(|i| items[lists.offsets[i] as usize..lists.offsets[i + 1] as usize].to_vec()).collect()
    }

    /// The numbered strings, by number.
    pub fn ids(&self) -> &[&'a str] {
        &self.ids
    }

    /// [`Self::ids`], owned.
    pub fn into_ids(self) -> Vec<String> {
        self.ids.into_iter().map(str::to_string).collect()
    }
}

/// A `list<string>` column as rows borrowing the table's strings.
pub fn string_list_refs<'a>(
    table: &'a RecordBatch,
    table_name: &str,
    column: &str,
) -> anyhow::Result<Vec<Vec<&'a str>>> {
    let lists = StringLists::new(table, table_name, column)?;
    Ok(lists.rows().map(|row| row.collect()).collect())
}

/// A named column of any type, with an error naming the table when it is missing.
pub fn column_of<'a>(table: &'a RecordBatch, table_name: &str, column: &str) -> anyhow::Result<&'a dyn Array> {
    Ok(named(table, table_name, column)?.as_ref())
}

fn named<'a>(table: &'a RecordBatch, table_name: &str, column: &str) -> anyhow::Result<&'a ArrayRef> {
    table.column_by_name(column).ok_or_else(|| anyhow::anyhow!("table `{table_name}` has no column `{column}`"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn id_numbers_give_back_the_strings_of_both_forms() {
        let rows = [vec!["u2", "u1"], vec![], vec!["u1", "u3", "u1"]];
        let plain = crate::schema::id_list_col(rows.clone());
        let keyed = crate::schema::interned_id_list_col(rows.clone());
        let columns = [plain.clone(), keyed, plain.slice(1, 2)];
        let mut numbers = IdNumbers::default();
        let numbered: Vec<Vec<Vec<u32>>> =
            columns.iter().map(|c| numbers.rows(&StringLists::of_array(c.as_ref()).unwrap())).collect();
        let ids = numbers.into_ids();
        let back = |n: &[Vec<u32>]| -> Vec<Vec<&str>> {
            n.iter().map(|r| r.iter().map(|&k| ids[k as usize].as_str()).collect()).collect()
        };
        assert_eq!(back(&numbered[0]), rows);
        assert_eq!(back(&numbered[1]), rows);
        assert_eq!(back(&numbered[2]), rows[1..]);
        let mut distinct = ids.clone();
        distinct.sort();
        distinct.dedup();
        assert_eq!(distinct.len(), ids.len(), "{ids:?}");
    }

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
            let lists = StringLists::new(&t, "t", "ids").unwrap();
            assert_eq!(lists.len(), owned.len());
            assert_eq!(lists.row(0).len(), owned[0].len());
        }
        let t = RecordBatch::try_new(
            std::sync::Arc::new(arrow_schema::Schema::new(vec![arrow_schema::Field::new("n", DataType::Int64, false)])),
            vec![crate::schema::int_col([1])],
        )
        .unwrap();
        assert!(string_list_refs(&t, "t", "n").unwrap_err().to_string().contains("expected list<string>"));
    }
}
