//! Parquet persistence. Every write is atomic: the bytes go to a temporary
//! file in the same folder, are synced, then renamed over the target, so a
//! crash or Ctrl-C never leaves a partial table.

use std::fs::{self, File};
use std::io::{self, BufReader, BufWriter, Write};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use anyhow::Context;
use arrow_array::cast::AsArray;
use arrow_array::{Array, ArrayRef, RecordBatch};
use arrow_schema::DataType;
use bytes::Bytes;
use parquet::arrow::arrow_reader::{ArrowReaderMetadata, ArrowReaderOptions, ParquetRecordBatchReaderBuilder};
use parquet::arrow::arrow_writer::{compute_leaves, ArrowWriterOptions};
use parquet::arrow::ArrowWriter;
use parquet::basic::Compression;
use parquet::column::page_store::{PageKey, PageStore, PageStoreArgs, PageStoreFactory};
use parquet::file::properties::WriterProperties;
use parquet::schema::types::ColumnPath;

use crate::schema;

pub(crate) const TMP_MARK: &str = ".tmp-";

/// Writes through `fill` into a temporary file, then renames it to `path`.
/// If `fill` fails, the temporary file is removed and `path` is untouched.
/// The file is synced to disk before the rename.
pub(crate) fn atomic_write_with(path: &Path, fill: impl FnOnce(&mut File) -> io::Result<()>) -> io::Result<()> {
    let dir = path.parent().unwrap_or(Path::new("."));
    fs::create_dir_all(dir)?;
    let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("out");
    let tmp = dir.join(format!(".{name}{TMP_MARK}{}", std::process::id()));
    let result = (|| {
        let mut f = File::create(&tmp)?;
        fill(&mut f)?;
        f.flush()?;
        f.sync_all()?;
        fs::rename(&tmp, path)
    })();
    if result.is_err() {
        let _ = fs::remove_file(&tmp);
    }
    result
}

/// Writes `bytes` to `path` whole or not at all, through a temporary file
/// synced and then renamed: readers never see a torn file.
pub fn atomic_write(path: &Path, bytes: &[u8]) -> io::Result<()> {
    atomic_write_with(path, |f| f.write_all(bytes))
}

/// Whether a file name is one of [`atomic_write`]'s temporary files.
pub(crate) fn is_temp_file(name: &str) -> bool {
    name.contains(TMP_MARK)
}

/// Removes temporary files left in `dir` by a process killed mid-write.
pub(crate) fn remove_stale_temp_files(dir: &Path) {
    let Ok(entries) = fs::read_dir(dir) else {
        return;
    };
    for e in entries.flatten() {
        if is_temp_file(&e.file_name().to_string_lossy()) {
            let _ = fs::remove_file(e.path());
        }
    }
}

/// Id lists with room for a dictionary of 8 MB (the default is 1 MB): the
/// text unit ids of 100 MB of input (23k ids of 128 characters, listed ~10
/// million times) then stay dictionary-encoded instead of being written out
/// in full at every mention.
const ID_LIST_DICTIONARY_BYTES: usize = 8 << 20;

fn writer_properties() -> WriterProperties {
    let mut props = WriterProperties::builder().set_compression(Compression::SNAPPY);
    for column in schema::ID_LIST_COLUMNS {
        let path = ColumnPath::from(vec![column.to_string(), "list".into(), "item".into()]);
        props = props.set_column_dictionary_page_size_limit(path, ID_LIST_DICTIONARY_BYTES);
    }
    props.build()
}

/// Encodes a table as Parquet (snappy, like pandas' default) into `sink`. The
/// bytes are those `ArrowWriter` gives for the whole batch (same row groups,
/// same column order), so equal tables give byte-identical files; but column
/// chunks are encoded and written one at a time, their pages waiting in a
/// file in `spill_dir`, so no encoded row group is held in memory (a
/// communities table's id lists run to hundreds of MB). Columns of many
/// listed values — id lists, which are also expanded from their in-memory form
/// ([`schema::file_schema`]), and vectors — go to their writer `values_at_most`
/// values at a time: the writer's levels for a whole column of 3072-d vectors
/// would be as large as the vectors.
fn encode_parquet<W: Write + Send>(
    sink: W,
    batch: &RecordBatch,
    props: WriterProperties,
    spill_dir: &Path,
    values_at_most: usize,
) -> anyhow::Result<W> {
    let rows_per_group = props.max_row_group_row_count().unwrap_or(usize::MAX);
    let schema = schema::file_schema(&batch.schema());
    let options = ArrowWriterOptions::new()
        .with_properties(props)
        .with_page_store_factory(Arc::new(SpillPages { dir: spill_dir.to_path_buf() }));
    let (mut file, column_writers) =
        ArrowWriter::try_new_with_options(sink, schema.clone(), options)?.into_serialized_writer()?;
    let (mut start, mut group_index) = (0, 0);
    while start < batch.num_rows() {
        let rows = batch.slice(start, rows_per_group.min(batch.num_rows() - start));
        let mut writers = column_writers.create_column_writers(group_index)?.into_iter();
        let mut group = file.next_row_group()?;
        for (field, column) in schema.fields().iter().zip(rows.columns()) {
            let Some(parts) = slices_listing_at_most(column, values_at_most) else {
                for leaf in compute_leaves(field, column)? {
                    let mut writer = writers.next().context("fewer Parquet column writers than leaf columns")?;
                    writer.write(&leaf)?;
                    writer.close()?.append_to_row_group(&mut group)?;
                }
                continue;
            };
            // A list of strings or numbers: one leaf, written a slice of rows at a time.
            let mut writer = writers.next().context("fewer Parquet column writers than leaf columns")?;
            for part in parts {
                for leaf in compute_leaves(field, &schema::file_column(&part))? {
                    writer.write(&leaf)?;
                }
            }
            writer.close()?.append_to_row_group(&mut group)?;
        }
        group.close()?;
        start += rows.num_rows();
        group_index += 1;
    }
    Ok(file.into_inner()?)
}

/// An id list in its in-memory form or a fixed-size list of numbers (a
/// vector column) cut into consecutive row slices of at most `limit` listed
/// values each (a longer single row makes a slice of its own); None for other
/// columns.
fn slices_listing_at_most(column: &ArrayRef, limit: usize) -> Option<Vec<ArrayRef>> {
    let rows = column.len();
    // Where each slice ends.
    let ends: Vec<usize> = match column.data_type() {
        DataType::FixedSizeList(item, size) if item.data_type().is_primitive() => {
            let step = (limit / (*size).max(1) as usize).max(1);
            (1..=rows.div_ceil(step)).map(|i| (i * step).min(rows)).collect()
        }
        t if schema::is_keyed_id_list(t) => {
            let offsets = column.as_list::<i32>().value_offsets();
            let mut ends = Vec::new();
            let mut start = 0;
            while start < rows {
                let mut end = start + 1;
                while end < rows && (offsets[end + 1] - offsets[start]) as usize <= limit {
                    end += 1;
                }
                ends.push(end);
                start = end;
            }
            ends
        }
        _ => return None,
    };
    let starts = std::iter::once(0).chain(ends.iter().copied());
    Some(starts.zip(&ends).map(|(start, &end)| column.slice(start, end - start)).collect())
}

/// Where the encoded pages of a column chunk wait until the chunk is appended
/// to the file: an unlinked temporary file in `dir` instead of the heap (the
/// text_unit_ids chunk of a communities table is ~0.5 GB at 100 MB of input).
#[derive(Debug)]
struct SpillPages {
    dir: PathBuf,
}

/// One column chunk's spilled pages: (offset, length) per page key.
struct SpilledPages {
    file: File,
    pages: Vec<(u64, usize)>,
    end: u64,
}

static SPILL_FILES: AtomicU64 = AtomicU64::new(0);

impl PageStoreFactory for SpillPages {
    fn create(&self, _: &PageStoreArgs<'_>) -> parquet::errors::Result<Box<dyn PageStore>> {
        let n = SPILL_FILES.fetch_add(1, Ordering::Relaxed);
        let path = self.dir.join(format!(".pages{TMP_MARK}{}-{n}", std::process::id()));
        let file = File::options().read(true).write(true).create_new(true).open(&path)?;
        // Unlinked at once: the file lives while the store holds it, and is
        // gone however the process ends.
        fs::remove_file(&path)?;
        Ok(Box::new(SpilledPages { file, pages: Vec::new(), end: 0 }))
    }
}

impl PageStore for SpilledPages {
    fn put(&mut self, value: Bytes) -> parquet::errors::Result<PageKey> {
        self.file.write_all_at(&value, self.end)?;
        self.pages.push((self.end, value.len()));
        self.end += value.len() as u64;
        Ok(PageKey::new(self.pages.len() as u64 - 1))
    }

    fn take(&mut self, key: PageKey) -> parquet::errors::Result<Bytes> {
        let (offset, len) = self.pages[key.get() as usize];
        let mut page = vec![0; len];
        self.file.read_exact_at(&mut page, offset)?;
        Ok(Bytes::from(page))
    }
}

/// Listed values handed to a column writer at a time (`encode_parquet`):
/// ~130 MB of text unit ids, 4 MB of vector components.
const VALUES_AT_MOST: usize = 1 << 20;

/// Writes `batch` to `path` atomically, streaming the encoded bytes to the
/// file; returns the file's hash (as `file_sha256`).
pub fn write_table(path: &Path, batch: &RecordBatch) -> anyhow::Result<String> {
    atomic_write_with(path, |f| {
        encode_parquet(
            BufWriter::new(f),
            batch,
            writer_properties(),
            path.parent().unwrap_or(Path::new(".")),
            VALUES_AT_MOST,
        )
        .and_then(|mut w| Ok(w.flush()?))
        .map_err(io::Error::other)
    })
    .with_context(|| format!("writing {}", path.display()))?;
    file_sha256(path).with_context(|| format!("reading back {}", path.display()))
}

/// Reads a table written by [`write_table`], its id lists in their in-memory
/// form (`schema::id_list_col_of`): the ids of a dictionary-encoded column
/// chunk are read once, not once per mention.
pub fn read_table(path: &Path) -> anyhow::Result<RecordBatch> {
    let not_parquet = || format!("{} is not a readable Parquet file", path.display());
    let file = File::open(path).with_context(|| format!("opening {}", path.display()))?;
    // The footer is read once: the file's schema decides the one to read with.
    let as_written = ArrowReaderMetadata::load(&file, ArrowReaderOptions::new()).with_context(not_parquet)?;
    let options = ArrowReaderOptions::new().with_schema(schema::in_memory_schema(as_written.schema()));
    let metadata = ArrowReaderMetadata::try_new(as_written.metadata().clone(), options).with_context(not_parquet)?;
    let builder = ParquetRecordBatchReaderBuilder::new_with_metadata(file, metadata);
    let schema = builder.schema().clone();
    // One batch for the whole file: batches of the default size would be
    // concatenated into a copy, twice the table's memory at once.
    let rows = builder.metadata().file_metadata().num_rows().max(1) as usize;
    let batches = builder.with_batch_size(rows).build()?.collect::<Result<Vec<_>, _>>()?;
    match batches.as_slice() {
        [] => Ok(RecordBatch::new_empty(schema)),
        // The reader's batches lack the schema's metadata (e.g. lexical_index's analyzer).
        [one] => Ok(one.clone().with_schema(schema)?),
        many => Ok(arrow_select::concat::concat_batches(&schema, many)?),
    }
}

/// The published table `name` in `output_dir`, or `None` when it has none.
pub fn read_published_table(output_dir: &Path, name: &str) -> anyhow::Result<Option<RecordBatch>> {
    let path = table_path(output_dir, name, true);
    if !path.exists() {
        return Ok(None);
    }
    read_table(&path).map(Some)
}

/// `sha256_hex` of the file's bytes, read in blocks rather than whole (tables
/// run to hundreds of MB).
pub fn file_sha256(path: &Path) -> Option<String> {
    let file = File::open(path).ok()?;
    let len = file.metadata().ok()?.len();
    graphrag_operations::ids::sha256_hex_of_reader(len, BufReader::new(file)).ok()
}

/// Where a table lives: published tables in the output folder (GraphRAG's
/// layout), intermediate ones under output/.steps/.
pub fn table_path(output_dir: &Path, name: &str, published: bool) -> PathBuf {
    if published {
        output_dir.join(format!("{name}.parquet"))
    } else {
        output_dir.join(".steps").join(format!("{name}.parquet"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::schema;

    fn sample() -> RecordBatch {
        RecordBatch::try_new(
            schema::text_units(),
            vec![
                schema::text_col(["a", "b"]),
                schema::int_col([0, 1]),
                schema::text_col(["hello", "wörld 🎄"]),
                schema::int_col([1, 3]),
                schema::text_col(["d", "d"]),
                schema::id_list_col([Vec::<String>::new(), vec![]]),
                schema::id_list_col([vec!["e1"], vec![]]),
                schema::id_list_col([Vec::<String>::new(), vec![]]),
            ],
        )
        .unwrap()
    }

    #[test]
    fn round_trip_and_deterministic_bytes() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("t.parquet");
        let h1 = write_table(&p, &sample()).unwrap();
        let back = read_table(&p).unwrap();
        assert!(back.columns().iter().any(|c| schema::is_keyed_id_list(c.data_type())), "id lists read keyed");
        assert_eq!(schema::file_form(&back), sample());
        let h2 = write_table(&p, &back).unwrap();
        assert_eq!(h1, h2);
        assert_eq!(file_sha256(&p), Some(h1));
    }

    #[test]
    fn schema_metadata_is_kept() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("lexical_index.parquet");
        let t = RecordBatch::try_new(
            schema::lexical_index("analyzer/v1"),
            vec![
                schema::text_col(["u1"]),
                schema::int_col([2]),
                schema::id_list_col([vec!["a", "b"]]),
                schema::int_list_col([vec![1, 1]]),
            ],
        )
        .unwrap();
        write_table(&p, &t).unwrap();
        let back = read_table(&p).unwrap();
        assert_eq!(back.schema().metadata().get(schema::LEXICAL_ANALYZER_KEY).map(String::as_str), Some("analyzer/v1"));
        assert_eq!(back, t);
    }

    #[test]
    fn column_at_a_time_encoding_matches_arrow_writer() {
        let batch =
            arrow_select::concat::concat_batches(&schema::text_units(), &[sample(), sample(), sample()]).unwrap();
        // Two rows per row group: three row groups, the last one short.
        let props = || {
            WriterProperties::builder()
                .set_compression(Compression::SNAPPY)
                .set_max_row_group_row_count(Some(2))
                .build()
        };
        let mut expected = Vec::new();
        let mut w = ArrowWriter::try_new(&mut expected, batch.schema(), Some(props())).unwrap();
        w.write(&batch).unwrap();
        w.close().unwrap();
        let dir = tempfile::tempdir().unwrap();
        let got = encode_parquet(Vec::new(), &batch, props(), dir.path(), usize::MAX).unwrap();
        assert_eq!(got, expected);
        let empty = batch.slice(0, 0);
        let mut expected = Vec::new();
        ArrowWriter::try_new(&mut expected, empty.schema(), Some(props())).unwrap().close().unwrap();
        assert_eq!(encode_parquet(Vec::new(), &empty, props(), dir.path(), usize::MAX).unwrap(), expected);
        assert_eq!(fs::read_dir(dir.path()).unwrap().count(), 0, "spilled pages left behind");
    }

    #[test]
    fn id_lists_in_memory_form_are_written_as_plain_lists() {
        let ids: Vec<String> = (0..300).map(|i| format!("{i:0128}")).collect();
        let rows: Vec<Vec<u32>> =
            (0..20_000u32).map(|r| (0..r % 6).map(|k| (r * 7 + k * 13) % 300).collect()).collect();
        let as_strings = || rows.iter().map(|r| r.iter().map(|&k| ids[k as usize].as_str()));
        let table = |lists: ArrayRef| {
            let schema = Arc::new(arrow_schema::Schema::new(vec![schema::id_list_field("text_unit_ids")]));
            schema::batch(schema, vec![lists]).unwrap()
        };
        let plain = table(schema::id_list_col(as_strings()));
        let keyed = table(schema::id_list_col_of(schema::text_col(&ids), rows.iter().map(|r| r.iter().copied())));
        let interned = table(schema::interned_id_list_col(as_strings()));
        let dir = tempfile::tempdir().unwrap();
        let encode = |t: &RecordBatch, at_most| encode_parquet(Vec::new(), t, writer_properties(), dir.path(), at_most);
        let expected = encode(&plain, usize::MAX).unwrap();
        let p = dir.path().join("t.parquet");
        for t in [&keyed, &interned] {
            assert_ne!(t.schema(), plain.schema());
            assert_eq!(encode(t, usize::MAX).unwrap(), expected);
            // Expanded a few hundred rows at a time: the same table comes back.
            atomic_write(&p, &encode(t, 1000).unwrap()).unwrap();
            assert_eq!(schema::file_form(&read_table(&p).unwrap()), plain);
        }
    }

    #[test]
    fn slices_bound_the_listed_values() {
        let lists = schema::interned_id_list_col([vec!["a"; 3], vec![], vec!["b"; 5], vec!["c"], vec!["d"]]);
        let lens = |slices: Vec<ArrayRef>| slices.iter().map(|s| s.len()).collect::<Vec<_>>();
        assert_eq!(lens(slices_listing_at_most(&lists, 4).unwrap()), [2, 1, 2]);
        assert_eq!(lens(slices_listing_at_most(&lists, usize::MAX).unwrap()), [5]);
        let item = Arc::new(arrow_schema::Field::new("item", arrow_schema::DataType::Float32, true));
        let values = Arc::new(arrow_array::Float32Array::from(vec![0.5f32; 7 * 3]));
        let vectors: ArrayRef = Arc::new(arrow_array::FixedSizeListArray::new(item, 3, values, None));
        assert_eq!(lens(slices_listing_at_most(&vectors, 6).unwrap()), [2, 2, 2, 1]);
        assert_eq!(lens(slices_listing_at_most(&vectors, 1).unwrap()), [1; 7]);
        assert!(slices_listing_at_most(&schema::id_list_col([vec!["a"]]), 4).is_none(), "plain lists whole");
    }

    #[test]
    fn vectors_written_in_slices_read_back_whole() {
        let dim: i32 = 5;
        let item = Arc::new(arrow_schema::Field::new("item", arrow_schema::DataType::Float32, true));
        let values = Arc::new(arrow_array::Float32Array::from_iter_values((0..1000 * dim).map(|i| i as f32 / 7.0)));
        let vectors: ArrayRef = Arc::new(arrow_array::FixedSizeListArray::new(item.clone(), dim, values, None));
        let field = arrow_schema::Field::new("vector", arrow_schema::DataType::FixedSizeList(item, dim), true);
        let table = RecordBatch::try_new(Arc::new(arrow_schema::Schema::new(vec![field])), vec![vectors]).unwrap();
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("v.parquet");
        atomic_write(&p, &encode_parquet(Vec::new(), &table, writer_properties(), dir.path(), 64).unwrap()).unwrap();
        assert_eq!(read_table(&p).unwrap(), table);
    }

    #[test]
    fn interrupted_write_leaves_old_file_and_no_temp() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("t.parquet");
        atomic_write(&p, b"old complete table").unwrap();
        let err = atomic_write_with(&p, |f| {
            f.write_all(b"half of the new")?;
            Err(io::Error::other("disk full"))
        });
        assert!(err.is_err());
        assert_eq!(fs::read(&p).unwrap(), b"old complete table");
        let names: Vec<_> = fs::read_dir(dir.path()).unwrap().map(|e| e.unwrap().file_name()).collect();
        assert_eq!(names.len(), 1, "{names:?}");
    }

    #[test]
    fn interrupted_first_write_leaves_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("new.parquet");
        let _ = atomic_write_with(&p, |_| Err(io::Error::other("killed")));
        assert!(!p.exists());
        assert_eq!(fs::read_dir(dir.path()).unwrap().count(), 0);
    }

    #[test]
    fn stale_temp_files_are_removed() {
        let dir = tempfile::tempdir().unwrap();
        fs::write(dir.path().join(".t.parquet.tmp-123"), b"partial").unwrap();
        fs::write(dir.path().join("keep.parquet"), b"x").unwrap();
        remove_stale_temp_files(dir.path());
        let names: Vec<_> = fs::read_dir(dir.path()).unwrap().map(|e| e.unwrap().file_name()).collect();
        assert_eq!(names, vec![std::ffi::OsString::from("keep.parquet")]);
    }
}
