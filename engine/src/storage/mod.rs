//! Where a project's documents, index and model answers live: one
//! [`Storage`] of three [`Location`]s, opened once from the project root and
//! its settings. This is the only place that joins the root with a settings
//! `base_dir`, and (with [`crate::store::table_path`]) the only place that
//! knows a table's file name; callers name tables, never files.
//!
//! A location is a local folder: the input reader walks it (non-UTF-8 names,
//! symbolic links), the runner stages and publishes in it (flock, commit
//! marker, renames: `staging`), the answer cache keeps one file per answer.

pub mod counting;
pub mod remote;

use std::path::{Path, PathBuf};

use arrow_array::RecordBatch;

use crate::settings::Settings;
use crate::store;

/// The input, output (index) and cache locations of a project.
#[derive(Debug, Clone)]
pub struct Storage {
    pub input: Location,
    pub output: Location,
    pub cache: Location,
}

impl Storage {
    /// The locations `settings` name, relative to the project `root`.
    pub fn open(root: &Path, settings: &Settings) -> Storage {
        Storage {
            input: Location::folder(root.join(&settings.input_storage.base_dir)),
            output: Location::folder(root.join(&settings.output_storage.base_dir)),
            cache: Location::folder(root.join(settings.cache.dir())),
        }
    }
}

/// One place files are kept.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Location {
    dir: PathBuf,
}

/// The table every published index has.
const INDEX_TABLE: &str = "documents";

impl Location {
    /// A local folder (made when first written to).
    pub fn folder(dir: impl Into<PathBuf>) -> Location {
        Location { dir: dir.into() }
    }

    /// The local folder the location's files are read from and written to.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Where the published table `name` is kept.
    pub fn table_file(&self, name: &str) -> PathBuf {
        store::table_path(&self.dir, name, true)
    }

    /// Whether the published table `name` exists.
    pub fn has_table(&self, name: &str) -> bool {
        self.table_file(name).is_file()
    }

    /// The published table `name`, or `None` when there is none.
    pub fn read_table(&self, name: &str) -> anyhow::Result<Option<RecordBatch>> {
        let path = self.table_file(name);
        if !path.exists() {
            return Ok(None);
        }
        store::read_table(&path).map(Some)
    }

    /// Whether the location holds a published index.
    pub fn has_index(&self) -> bool {
        self.has_table(INDEX_TABLE)
    }

    /// The location for messages.
    pub fn describe(&self) -> String {
        self.dir.display().to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn locations_follow_the_settings_base_dirs() {
        let mut settings = Settings::default();
        settings.input_storage.base_dir = "docs".into();
        settings.output_storage.base_dir = "/abs/index".into();
        let storage = Storage::open(Path::new("/p"), &settings);
        assert_eq!(storage.input.dir(), Path::new("/p/docs"));
        assert_eq!(storage.output.dir(), Path::new("/abs/index"), "an absolute base_dir is kept");
        assert_eq!(storage.cache.dir(), Path::new("/p/cache"));
        assert_eq!(storage.output.table_file("entities"), Path::new("/abs/index/entities.parquet"));
    }

    #[test]
    fn tables_are_read_by_name() {
        let dir = tempfile::tempdir().unwrap();
        let out = Location::folder(dir.path());
        assert!(!out.has_index());
        assert!(out.read_table("documents").unwrap().is_none());
        let t = RecordBatch::try_new(
            crate::schema::documents(arrow_schema::DataType::LargeUtf8),
            vec![
                crate::schema::text_col(["d1"]),
                crate::schema::int_col([0]),
                crate::schema::text_col(["a.txt"]),
                crate::schema::text_col(["text"]),
                crate::schema::id_list_col([Vec::<String>::new()]),
                crate::schema::text_col(["2026"]),
                crate::schema::opt_text_col([None::<String>]),
            ],
        )
        .unwrap();
        store::write_table(&out.table_file("documents"), &t).unwrap();
        assert!(out.has_index());
        assert_eq!(out.read_table("documents").unwrap().unwrap().num_rows(), 1);
    }
}
