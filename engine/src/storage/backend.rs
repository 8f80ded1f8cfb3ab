//! The one interface every backend is reached through, with what each
//! operation guarantees on every backend alike (a folder; S3, Azure Blob and
//! GCS through `object_store`). Names are `/`-separated paths relative to
//! the store; no method shows a local path.
//!
//! - [`Store::put`] writes a file whole: a reader sees the old bytes or the
//!   new, never part (a folder: a temporary file renamed over it; a store:
//!   one PUT). The last writer wins.
//! - [`Store::create`] writes only if the name is free, decided by the
//!   backend itself (a hard link, which fails on an existing name; a
//!   conditional PUT): of two creators exactly one gets `true`.
//! - [`Store::get`], [`Store::exists`] and [`Store::list`] see every whole
//!   file written before they began. A listing is sorted by path and
//!   complete (every page of a store's LIST is read), hidden work files
//!   included (callers filter); a folder not made yet lists nothing.
//! - [`Store::get_all`] reads several files at once (a store: a few GETs
//!   in flight), [`Store::get_range`] part of one (a store: one ranged GET;
//!   a range past the file's end comes back short).
//! - [`Store::delete`] and [`Store::delete_all`] are idempotent: a name
//!   already gone is no error.
//! - [`Store::folders`] names the folders directly below (a store: one LIST
//!   with a delimiter, not a listing of everything under it).
//!
//! What is not here: publication and the writer's lease, whose protocols
//! differ by backend (renames under a lock; versions and a manifest under a
//! lease) and are [`super::Location`]'s (`lock_for_writing`,
//! `open_published`); and the working copy a run writes Parquet in
//! ([`super::WorkingCopy`]).

use std::io::{Read, Seek, SeekFrom};
use std::ops::Range;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::Context;
use bytes::Bytes;

use super::files::{FileEntry, FileSource, LocalFiles};
use super::object::{Conditional, ObjectLocation};
use crate::store;

/// See the module docs.
pub(crate) trait Store: Send + Sync + std::fmt::Debug {
    /// Where, for messages: a folder's path, a store's URL.
    fn describe(&self) -> String;
    /// The store of the files under `rel` (a `/`-separated relative path).
    fn join(&self, rel: &str) -> Arc<dyn Store>;
    /// The file `name`, or `None` when there is none.
    fn get(&self, name: &str) -> anyhow::Result<Option<Vec<u8>>>;
    /// The files `names` (same order; `None` for one that is not there).
    fn get_all(&self, names: &[String]) -> anyhow::Result<Vec<Option<Bytes>>> {
        names.iter().map(|name| Ok(self.get(name)?.map(Bytes::from))).collect()
    }
    /// The bytes `range` of the file `name`, or `None` when there is none.
    fn get_range(&self, name: &str, range: Range<u64>) -> anyhow::Result<Option<Bytes>>;
    /// Writes the file `name` whole.
    fn put(&self, name: &str, bytes: &[u8]) -> anyhow::Result<()>;
    /// Writes the file `name` only if there is none yet: false, and nothing
    /// written, when there is one.
    fn create(&self, name: &str, bytes: &[u8]) -> anyhow::Result<bool>;
    /// Whether the file `name` exists (a store: one HEAD, never a download).
    fn exists(&self, name: &str) -> anyhow::Result<bool>;
    /// Removes the file `name`.
    fn delete(&self, name: &str) -> anyhow::Result<()>;
    /// Removes every file under the store.
    fn delete_all(&self) -> anyhow::Result<()>;
    /// Every file under the store, sorted by path.
    fn list(&self) -> anyhow::Result<Vec<FileEntry>>;
    /// The names of the folders directly under the store, sorted.
    fn folders(&self) -> anyhow::Result<Vec<String>>;
}

/// A local folder as a [`Store`].
#[derive(Debug, Clone)]
pub(super) struct Folder {
    pub(super) dir: PathBuf,
}

impl Folder {
    fn path(&self, name: &str) -> PathBuf {
        name.split('/').filter(|p| !p.is_empty()).fold(self.dir.clone(), |dir, part| dir.join(part))
    }
}

impl Store for Folder {
    fn describe(&self) -> String {
        self.dir.display().to_string()
    }

    fn join(&self, rel: &str) -> Arc<dyn Store> {
        Arc::new(Folder { dir: self.path(rel) })
    }

    fn get(&self, name: &str) -> anyhow::Result<Option<Vec<u8>>> {
        let path = self.path(name);
        match std::fs::read(&path) {
            Ok(bytes) => Ok(Some(bytes)),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(e).with_context(|| format!("reading {}", path.display())),
        }
    }

    fn get_range(&self, name: &str, range: Range<u64>) -> anyhow::Result<Option<Bytes>> {
        let path = self.path(name);
        let read = || -> std::io::Result<Vec<u8>> {
            let mut file = std::fs::File::open(&path)?;
            file.seek(SeekFrom::Start(range.start))?;
            let mut bytes = Vec::new();
            file.take(range.end.saturating_sub(range.start)).read_to_end(&mut bytes)?;
            Ok(bytes)
        };
        match read() {
            Ok(bytes) => Ok(Some(Bytes::from(bytes))),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(e).with_context(|| format!("reading {}", path.display())),
        }
    }

    fn put(&self, name: &str, bytes: &[u8]) -> anyhow::Result<()> {
        let path = self.path(name);
        store::atomic_write(&path, bytes).with_context(|| format!("writing {}", path.display()))
    }

    fn create(&self, name: &str, bytes: &[u8]) -> anyhow::Result<bool> {
        let path = self.path(name);
        let parent = path.parent().unwrap_or(&self.dir);
        std::fs::create_dir_all(parent).with_context(|| format!("creating {}", parent.display()))?;
        // Written whole under a name of this call's own, then linked to its
        // name: a reader never sees part of it.
        static CREATED: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        let n = CREATED.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let file_name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
        let temp = parent.join(format!(".{file_name}{}{}-{n}", store::TMP_MARK, std::process::id()));
        let linked =
            std::fs::write(&temp, bytes).with_context(|| format!("writing {}", temp.display())).and_then(|()| {
                match std::fs::hard_link(&temp, &path) {
                    Ok(()) => Ok(true),
                    Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Ok(false),
                    Err(e) => Err(e).with_context(|| format!("writing {}", path.display())),
                }
            });
        remove_file_if_present(&temp)?;
        linked
    }

    fn exists(&self, name: &str) -> anyhow::Result<bool> {
        Ok(self.path(name).is_file())
    }

    fn delete(&self, name: &str) -> anyhow::Result<()> {
        remove_file_if_present(&self.path(name))
    }

    fn delete_all(&self) -> anyhow::Result<()> {
        match std::fs::remove_dir_all(&self.dir) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                Err(e).with_context(|| format!("removing {}", self.dir.display()))
            }
            _ => Ok(()),
        }
    }

    fn list(&self) -> anyhow::Result<Vec<FileEntry>> {
        if !self.dir.exists() {
            return Ok(Vec::new());
        }
        LocalFiles::new(&self.dir).list()
    }

    fn folders(&self) -> anyhow::Result<Vec<String>> {
        let mut names: Vec<String> = match std::fs::read_dir(&self.dir) {
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Vec::new(),
            Err(e) => return Err(e).with_context(|| format!("listing {}", self.dir.display())),
            Ok(entries) => entries
                .flatten()
                .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
                .filter_map(|e| e.file_name().to_str().map(str::to_string))
                .collect(),
        };
        names.sort();
        Ok(names)
    }
}

impl Store for ObjectLocation {
    fn describe(&self) -> String {
        self.url().to_string()
    }

    fn join(&self, rel: &str) -> Arc<dyn Store> {
        Arc::new(ObjectLocation::join(self, rel))
    }

    fn get(&self, name: &str) -> anyhow::Result<Option<Vec<u8>>> {
        Ok(ObjectLocation::get(self, name)?.map(|b| b.to_vec()))
    }

    fn get_all(&self, names: &[String]) -> anyhow::Result<Vec<Option<Bytes>>> {
        ObjectLocation::get_all(self, names)
    }

    fn get_range(&self, name: &str, range: Range<u64>) -> anyhow::Result<Option<Bytes>> {
        ObjectLocation::get_range(self, name, range)
    }

    fn put(&self, name: &str, bytes: &[u8]) -> anyhow::Result<()> {
        ObjectLocation::put(self, name, Bytes::copy_from_slice(bytes))
    }

    fn create(&self, name: &str, bytes: &[u8]) -> anyhow::Result<bool> {
        let written = self.put_if(name, Bytes::copy_from_slice(bytes), None)?;
        Ok(matches!(written, Conditional::Written))
    }

    fn exists(&self, name: &str) -> anyhow::Result<bool> {
        ObjectLocation::exists(self, name)
    }

    fn delete(&self, name: &str) -> anyhow::Result<()> {
        ObjectLocation::delete(self, name)
    }

    fn delete_all(&self) -> anyhow::Result<()> {
        for listed in ObjectLocation::list(self, "")? {
            ObjectLocation::delete(self, &listed.key)?;
        }
        Ok(())
    }

    fn list(&self) -> anyhow::Result<Vec<FileEntry>> {
        let listed = ObjectLocation::list(self, "")?;
        Ok(listed.into_iter().map(|l| FileEntry { path: l.key, size: l.size, modified: l.modified }).collect())
    }

    fn folders(&self) -> anyhow::Result<Vec<String>> {
        let mut names = ObjectLocation::folders(self, "")?;
        names.dedup();
        Ok(names)
    }
}

/// The file name of the published table `name` in a location's folder.
pub(super) fn table_file_name(name: &str) -> String {
    store::table_path(Path::new(""), name, true).to_string_lossy().into_owned()
}

pub(super) fn remove_file_if_present(path: &Path) -> anyhow::Result<()> {
    match std::fs::remove_file(path) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
            Err(e).with_context(|| format!("removing {}", path.display()))
        }
        _ => Ok(()),
    }
}
