//! The answer cache in a local folder: one JSON file per answer,
//! `DIR/<xx>/<key>.json` (`xx`: the key's first two hex digits), in a
//! step's partition `DIR/<name>/…`, which also reads the root's answers
//! (written before caches were partitioned). Writes are atomic but not
//! synced to disk (a sync per answer cost milliseconds on the request
//! path): an entry a machine crash left torn is unreadable, which counts as
//! corrupt and is asked again.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use bytes::Bytes;

use super::cache_budget::ByteBudget;
use crate::store::atomic_write_unsynced;

pub(super) struct FolderAnswers {
    dir: PathBuf,
    /// Where a partition also looks for an answer it does not have: the
    /// cache root, which held every answer before caches were partitioned.
    fallback: Option<PathBuf>,
    /// The size bound of `dir`, if it has one (see [`FolderAnswers::bounded`]).
    budget: Option<Arc<ByteBudget>>,
}

impl FolderAnswers {
    pub fn new(dir: &Path) -> FolderAnswers {
        FolderAnswers { dir: dir.to_path_buf(), fallback: None, budget: None }
    }

    pub fn partition(&self, name: &str) -> FolderAnswers {
        FolderAnswers { dir: self.dir.join(name), fallback: Some(self.dir.clone()), budget: None }
    }

    /// The same folder holding at most `max_bytes` of entries, the least
    /// recently used deleted first ([`ByteBudget`]).
    pub fn bounded(self, max_bytes: u64) -> FolderAnswers {
        FolderAnswers { budget: Some(Arc::new(ByteBudget::new(&self.dir, max_bytes))), ..self }
    }

    pub fn path(&self, key: &str) -> PathBuf {
        self.dir.join(&key[..2]).join(format!("{key}.json"))
    }

    /// The file of `key` and its bytes: this folder's, else its fallback's.
    pub fn get(&self, key: &str) -> Option<(PathBuf, Bytes)> {
        let older = self.fallback.as_ref().map(|root| FolderAnswers::new(root).path(key));
        [Some(self.path(key)), older]
            .into_iter()
            .flatten()
            .find_map(|p| std::fs::read(&p).ok().map(|b| (p, Bytes::from(b))))
    }

    /// The entry at `path` (from [`FolderAnswers::get`]) was used: a bounded
    /// folder's own entry is now its most recently used.
    pub fn used(&self, path: &Path) {
        if let Some(budget) = self.budget.as_ref().filter(|_| path.starts_with(&self.dir)) {
            budget.read(path);
        }
    }

    pub fn put(&self, key: &str, answer: &[u8]) -> std::io::Result<()> {
        let path = self.path(key);
        atomic_write_unsynced(&path, answer)?;
        if let Some(budget) = &self.budget {
            budget.written(&path, answer.len() as u64);
        }
        Ok(())
    }
}
