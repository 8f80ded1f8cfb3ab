//! A size bound on one cache folder (the query answers'): when the entries
//! written there pass `max_bytes`, the least recently used are deleted.
//! "Used" is written or read; a read also sets the file's modification
//! time, so the order survives a restart: the folder is scanned (by that
//! time) on first use. Each process keeps its own account; entries another
//! process writes meanwhile are counted at its next start.

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::SystemTime;

pub(crate) struct ByteBudget {
    dir: PathBuf,
    max_bytes: u64,
    /// Scanned on first use (`None` until then).
    entries: Mutex<Option<Entries>>,
}

#[derive(Default)]
struct Entries {
    total: u64,
    /// Increases with each use: the smallest is the least recently used.
    clock: u64,
    by_path: HashMap<PathBuf, (u64, u64)>,
    by_use: BTreeMap<u64, PathBuf>,
}

impl Entries {
    /// Records a use of `path` (of `size` bytes, when known now).
    fn used(&mut self, path: &Path, size: Option<u64>) {
        self.clock += 1;
        let (old_size, tick) = match self.by_path.get(path) {
            Some(&(s, t)) => (Some(s), t),
            None => (None, 0),
        };
        let Some(size) = size.or(old_size) else { return };
        self.by_use.remove(&tick);
        self.total = self.total - old_size.unwrap_or(0) + size;
        self.by_path.insert(path.to_path_buf(), (size, self.clock));
        self.by_use.insert(self.clock, path.to_path_buf());
    }

    /// Deletes the least recently used entries until `max_bytes` holds them.
    fn evict(&mut self, max_bytes: u64) -> usize {
        let mut deleted = 0;
        while self.total > max_bytes {
            let Some((_, path)) = self.by_use.pop_first() else { break };
            if let Some((size, _)) = self.by_path.remove(&path) {
                self.total -= size;
            }
            match std::fs::remove_file(&path) {
                Ok(()) => deleted += 1,
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => tracing::warn!("could not delete cache entry {}: {e}", path.display()),
            }
        }
        deleted
    }
}

impl ByteBudget {
    pub(crate) fn new(dir: &Path, max_bytes: u64) -> ByteBudget {
        ByteBudget { dir: dir.to_path_buf(), max_bytes, entries: Mutex::new(None) }
    }

    fn with_entries<R>(&self, f: impl FnOnce(&mut Entries) -> R) -> R {
        let mut guard = self.entries.lock().unwrap_or_else(|e| e.into_inner());
        f(guard.get_or_insert_with(|| scan(&self.dir)))
    }

    /// An entry was read: it is now the most recently used.
    pub(crate) fn read(&self, path: &Path) {
        self.with_entries(|e| e.used(path, None));
        // Best effort: only the order after a restart depends on it.
        let _ = std::fs::File::options().write(true).open(path).and_then(|f| f.set_modified(SystemTime::now()));
    }

    /// An entry of `size` bytes was written; older entries go if the folder
    /// is now over its budget.
    pub(crate) fn written(&self, path: &Path, size: u64) {
        let deleted = self.with_entries(|e| {
            e.used(path, Some(size));
            e.evict(self.max_bytes)
        });
        if deleted > 0 {
            tracing::debug!(
                "cache {}: deleted the {deleted} least recently used entries (over {} bytes)",
                self.dir.display(),
                self.max_bytes
            );
        }
    }
}

/// The entries under `dir/<xx>/<key>.json`, oldest first.
fn scan(dir: &Path) -> Entries {
    let mut found: Vec<(SystemTime, u64, PathBuf)> = Vec::new();
    for sub in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        for file in std::fs::read_dir(sub.path()).into_iter().flatten().flatten() {
            let path = file.path();
            let Ok(meta) = file.metadata() else { continue };
            if meta.is_file() && path.extension().is_some_and(|x| x == "json") {
                found.push((meta.modified().unwrap_or(SystemTime::UNIX_EPOCH), meta.len(), path));
            }
        }
    }
    found.sort();
    let mut entries = Entries::default();
    for (_, size, path) in found {
        entries.used(&path, Some(size));
    }
    entries
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(dir: &Path, name: &str, bytes: usize) -> PathBuf {
        let path = dir.join(&name[..2]).join(format!("{name}.json"));
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, vec![b'x'; bytes]).unwrap();
        path
    }

    #[test]
    fn the_least_recently_used_go_first_and_reads_count_as_use() {
        let dir = tempfile::tempdir().unwrap();
        let budget = ByteBudget::new(dir.path(), 250);
        let a = entry(dir.path(), "aa1", 100);
        budget.written(&a, 100);
        let b = entry(dir.path(), "bb1", 100);
        budget.written(&b, 100);
        budget.read(&a);
        let c = entry(dir.path(), "cc1", 100);
        budget.written(&c, 100);
        assert!(a.exists() && c.exists(), "a was read after b was written");
        assert!(!b.exists(), "b was the least recently used");
        // Rewriting an entry replaces its size, not adds to it.
        budget.written(&c, 100);
        assert!(a.exists() && c.exists());
        // An entry larger than the whole budget does not stay.
        let big = entry(dir.path(), "dd1", 400);
        budget.written(&big, 400);
        assert!(!big.exists() && !a.exists() && !c.exists());
    }

    #[test]
    fn a_new_process_counts_what_is_on_disk_oldest_first() {
        let dir = tempfile::tempdir().unwrap();
        let old = entry(dir.path(), "aa2", 100);
        let f = std::fs::File::options().write(true).open(&old).unwrap();
        f.set_modified(SystemTime::UNIX_EPOCH + std::time::Duration::from_secs(1000)).unwrap();
        let recent = entry(dir.path(), "bb2", 100);
        let budget = ByteBudget::new(dir.path(), 250);
        let new = entry(dir.path(), "cc2", 100);
        budget.written(&new, 100);
        assert!(!old.exists(), "the oldest file on disk went first");
        assert!(recent.exists() && new.exists());
    }
}
