//! Parquet persistence. Every write is atomic: the bytes go to a temporary
//! file in the same folder, are synced, then renamed over the target, so a
//! crash or Ctrl-C never leaves a partial table.

use std::fs::{self, File};
use std::io::{self, Write};
use std::path::{Path, PathBuf};

use anyhow::Context;
use arrow_array::RecordBatch;
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
use parquet::arrow::ArrowWriter;
use parquet::basic::Compression;
use parquet::file::properties::WriterProperties;

const TMP_MARK: &str = ".tmp-";

/// Writes through `fill` into a temporary file, then renames it to `path`.
/// If `fill` fails, the temporary file is removed and `path` is untouched.
pub fn atomic_write_with(path: &Path, fill: impl FnOnce(&mut File) -> io::Result<()>) -> io::Result<()> {
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

pub fn atomic_write(path: &Path, bytes: &[u8]) -> io::Result<()> {
    atomic_write_with(path, |f| f.write_all(bytes))
}

/// Removes temporary files left in `dir` by a process killed mid-write.
pub fn remove_stale_temp_files(dir: &Path) {
    let Ok(entries) = fs::read_dir(dir) else {
        return;
    };
    for e in entries.flatten() {
        if e.file_name().to_string_lossy().contains(TMP_MARK) {
            let _ = fs::remove_file(e.path());
        }
    }
}

/// Encodes a table as Parquet (snappy, like pandas' default). The bytes are a
/// pure function of the table, so equal tables give byte-identical files.
pub fn parquet_bytes(batch: &RecordBatch) -> anyhow::Result<Vec<u8>> {
    let props = WriterProperties::builder().set_compression(Compression::SNAPPY).build();
    let mut buf = Vec::new();
    let mut w = ArrowWriter::try_new(&mut buf, batch.schema(), Some(props))?;
    w.write(batch)?;
    w.close()?;
    Ok(buf)
}

/// Writes `batch` to `path` atomically; returns the sha256 of the file.
pub fn write_table(path: &Path, batch: &RecordBatch) -> anyhow::Result<String> {
    let bytes = parquet_bytes(batch)?;
    atomic_write(path, &bytes).with_context(|| format!("writing {}", path.display()))?;
    Ok(graphrag_operations::ids::sha256_hex(&[&bytes]))
}

pub fn read_table(path: &Path) -> anyhow::Result<RecordBatch> {
    let file = File::open(path).with_context(|| format!("opening {}", path.display()))?;
    let builder = ParquetRecordBatchReaderBuilder::try_new(file)
        .with_context(|| format!("{} is not a readable Parquet file", path.display()))?;
    let schema = builder.schema().clone();
    let batches = builder.build()?.collect::<Result<Vec<_>, _>>()?;
    match batches.as_slice() {
        [] => Ok(RecordBatch::new_empty(schema)),
        [one] => Ok(one.clone()),
        many => Ok(arrow_select::concat::concat_batches(&schema, many)?),
    }
}

pub fn file_sha256(path: &Path) -> Option<String> {
    fs::read(path).ok().map(|b| graphrag_operations::ids::sha256_hex(&[&b]))
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
        assert_eq!(back, sample());
        let h2 = write_table(&p, &back).unwrap();
        assert_eq!(h1, h2);
        assert_eq!(file_sha256(&p), Some(h1));
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
