//! The one local folder of a location that code outside this module may
//! work in: the runner writes its Parquet files there, and a shard's
//! fragments are read from there.
//!
//! For a folder location it is the folder itself, so writing there is
//! writing the location. For an object store it is a copy under the
//! project's `.graphrag-rs/` that only [`WorkingCopy::push`] and
//! [`WorkingCopy::pull_table`] move to and from the store: nothing written
//! there is seen by another machine until pushed. Where the copy is, is
//! this module's business; callers get its path from here and never build
//! one (a `Location` has no path to give).
//!
//! The other local folders storage hands out are a writer's
//! ([`super::Writer`]: the index a run resumes from, and its staging) and a
//! reader's ([`super::PublishedVersion`]: one published version, held).

use std::path::{Path, PathBuf};

use anyhow::Context;
use arrow_array::RecordBatch;

use super::backend::{remove_file_if_present, table_file_name};
use super::object::ObjectLocation;
use crate::store;

/// The table every published index has.
pub(super) const INDEX_TABLE: &str = "documents";

/// A location's local folder (see the module docs).
#[derive(Debug, Clone)]
pub struct WorkingCopy {
    pub(super) dir: PathBuf,
    /// The object store prefix the folder is a copy of; none for a folder location.
    pub(super) remote: Option<ObjectLocation>,
}

impl WorkingCopy {
    /// The folder (made when first written to).
    pub fn path(&self) -> &Path {
        &self.dir
    }

    /// Where the table `name` is kept in the folder.
    pub fn table_path(&self, name: &str) -> PathBuf {
        store::table_path(self.path(), name, true)
    }

    /// The table `name` as the folder holds it, or `None` when it has none.
    pub fn read_table(&self, name: &str) -> anyhow::Result<Option<RecordBatch>> {
        store::read_published_table(self.path(), name)
    }

    /// Whether the folder holds an index (its documents table).
    pub fn has_index(&self) -> bool {
        self.table_path(INDEX_TABLE).is_file()
    }

    /// Makes the file `name`, written in the folder, visible to every
    /// machine: on an object store it is uploaded (whole: a reader sees the
    /// old object or the new one); a folder location is shared as it is.
    pub fn push(&self, name: &str) -> anyhow::Result<()> {
        match &self.remote {
            Some(remote) => remote.upload(&self.path().join(name), name),
            None => Ok(()),
        }
    }

    /// [`WorkingCopy::push`] of the table `name` (written at [`WorkingCopy::table_path`]).
    pub fn push_table(&self, name: &str) -> anyhow::Result<()> {
        self.push(&table_file_name(name))
    }

    /// Writes `bytes` as the file `name` of the folder (whole or not at
    /// all) and [`WorkingCopy::push`]es it.
    pub fn write(&self, name: &str, bytes: &[u8]) -> anyhow::Result<()> {
        self.write_here(name, bytes)?;
        self.push(name)
    }

    /// Puts a copy of the local file `source` as the table `name` (a hard
    /// link where the file system allows: files are replaced, never changed
    /// in place), then pushes it.
    pub fn put_table(&self, name: &str, source: &Path) -> anyhow::Result<()> {
        let name = table_file_name(name);
        let dir = self.path();
        let target = dir.join(&name);
        std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
        let temp = dir.join(format!(".{name}.put"));
        remove_file_if_present(&temp)?;
        if std::fs::hard_link(source, &temp).is_err() {
            std::fs::copy(source, &temp)
                .with_context(|| format!("copying {} to {}", source.display(), temp.display()))?;
        }
        std::fs::rename(&temp, &target)
            .with_context(|| format!("renaming {} to {}", temp.display(), target.display()))?;
        self.push(&name)
    }

    /// Brings the table `name` into the folder (on an object store,
    /// downloads it; a folder location has it or not): false when there is none.
    pub fn pull_table(&self, name: &str) -> anyhow::Result<bool> {
        let file = table_file_name(name);
        match &self.remote {
            Some(remote) => remote.download(&file, &self.path().join(&file)),
            None => Ok(self.path().join(&file).is_file()),
        }
    }

    /// Writes `bytes` as the file `name` of the folder only (whole or not at
    /// all): a note for this machine's next look, never pushed.
    pub fn write_here(&self, name: &str, bytes: &[u8]) -> anyhow::Result<()> {
        let path = self.path().join(name);
        store::atomic_write(&path, bytes).with_context(|| format!("writing {}", path.display()))
    }

    /// The bytes of the file `name` in the folder as it is here (not
    /// pulled), or `None`.
    pub fn read_here(&self, name: &str) -> Option<Vec<u8>> {
        std::fs::read(self.path().join(name)).ok()
    }
}
