//! Persistent response cache, keyed by a hash of the model, parameters and
//! messages (never the API key), with two backends: a local folder, one file
//! per answer ([`super::cache_folder`]), or an object store, many answers to
//! an object ([`super::cache_segments`]).
//!
//! The cache holds only answers that passed their purpose's check: [`put`]
//! takes a [`Checked`] value, which only running a check makes, and [`get`]
//! runs the caller's check again on what it reads (an entry written by an
//! older version, or damaged, is asked again rather than trusted).
//!
//! [`put`]: ResponseCache::put
//! [`get`]: ResponseCache::get

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use serde::de::DeserializeOwned;
use serde::Serialize;

use super::cache_folder::FolderAnswers;
pub use super::cache_segments::Imported;
use super::cache_segments::{import_folder, ObjectAnswers};
use crate::storage::{Backend, Location};
use graphrag_operations::ids::sha256_hex;

/// A stored form `S` (an answer as the server sent it) that passed a check,
/// with the value `T` the check made of it.
#[derive(Debug, Clone, PartialEq)]
pub struct Checked<S, T> {
    stored: S,
    value: T,
}

impl<S, T> Checked<S, T> {
    /// Runs `check` on `stored`; the only way to make a `Checked`. A value
    /// that fails comes back with the reason.
    pub fn new<E>(stored: S, check: impl FnOnce(&S) -> Result<T, E>) -> Result<Self, (S, E)> {
        match check(&stored) {
            Ok(value) => Ok(Checked { stored, value }),
            Err(e) => Err((stored, e)),
        }
    }

    pub fn stored(&self) -> &S {
        &self.stored
    }

    pub fn value(&self) -> &T {
        &self.value
    }

    pub fn into_parts(self) -> (S, T) {
        (self.stored, self.value)
    }
}

/// What a cache lookup found.
#[derive(Debug)]
pub enum Lookup<S, T, E> {
    Hit(Checked<S, T>),
    Miss,
    /// An entry that reads but fails the check (asked again).
    Rejected(E),
    /// An entry that does not read at all (asked again, then rewritten).
    Corrupt,
}

impl<S, T, E: std::fmt::Display> Lookup<S, T, E> {
    /// The hit, counting for `model` an entry that had to be asked again.
    pub fn hit(self, usage: &super::UsageCounters, model: &str) -> Option<Checked<S, T>> {
        match self {
            Lookup::Hit(hit) => Some(hit),
            Lookup::Rejected(e) => {
                // Written before answers were checked, or by a looser check.
                tracing::debug!("model {model}: a cached answer is unusable ({e}); asking again");
                usage.record_cache_rejected(model);
                None
            }
            Lookup::Corrupt => {
                usage.record_cache_corrupt(model);
                None
            }
            Lookup::Miss => None,
        }
    }
}

pub struct ResponseCache {
    answers: Answers,
    /// Corrupt entries met (the root's and its partitions': one warning).
    corrupt: Arc<AtomicU64>,
}

/// Where the answers are kept.
enum Answers {
    Folder(FolderAnswers),
    /// On an object store: this partition's answers (falling back to the root's).
    Segments(ObjectAnswers),
}

impl ResponseCache {
    pub fn new(dir: &Path) -> Self {
        ResponseCache { answers: Answers::Folder(FolderAnswers::new(dir)), corrupt: Arc::default() }
    }

    /// The cache at a storage location: its folder (one file per answer),
    /// or its object store prefix (segments of answers).
    pub fn at(location: &Location) -> Self {
        match location.backend() {
            Backend::Folder(folder) => ResponseCache::new(folder),
            Backend::ObjectStore(remote) => ResponseCache {
                answers: Answers::Segments(ObjectAnswers::new(remote.clone())),
                corrupt: Arc::default(),
            },
        }
    }

    /// Copies the answers of the local cache folder `folder` into the cache
    /// at `to`, an object store location (see [`super::cache_segments`]'s
    /// `import_folder`).
    pub fn import(folder: &Path, to: &Location) -> anyhow::Result<Imported> {
        match to.backend() {
            Backend::ObjectStore(remote) => import_folder(folder, remote),
            Backend::Folder(_) => {
                anyhow::bail!("{} is a local folder: the answers of a folder cache are copied as files", to.describe())
            }
        }
    }

    /// The cache of one pipeline step (GraphRAG's `model_instance_name`):
    /// entries under `DIR/<name>/`, reading older unpartitioned entries too.
    pub fn partition(&self, name: &str) -> Self {
        let answers = match &self.answers {
            Answers::Folder(folder) => Answers::Folder(folder.partition(name)),
            Answers::Segments(segments) => Answers::Segments(segments.partition(name)),
        };
        ResponseCache { answers, corrupt: self.corrupt.clone() }
    }

    /// Writes the answers an object store cache keeps in memory (a step's,
    /// when it ends); a folder's are written as they come.
    pub fn flush(&self) {
        if let Answers::Segments(segments) = &self.answers {
            segments.flush();
        }
    }

    /// The same cache holding at most `max_bytes` of entries in its own
    /// folder: past that, the least recently used are deleted (for answers
    /// that keep coming, a server's query answers; an index's are never
    /// bounded, they are what makes a rerun cheap).
    /// On an object store the bound is on the answers this process holds in
    /// memory (see [`super::cache_held`]; a bucket's lifecycle rule expires
    /// old segments).
    pub fn bounded(self, max_bytes: u64) -> Self {
        let answers = match self.answers {
            Answers::Folder(folder) => Answers::Folder(folder.bounded(max_bytes)),
            Answers::Segments(segments) => {
                segments.bound(max_bytes);
                Answers::Segments(segments)
            }
        };
        ResponseCache { answers, ..self }
    }

    pub fn key(parts: &[&str]) -> String {
        let bytes: Vec<&[u8]> = parts.iter().map(|p| p.as_bytes()).collect();
        sha256_hex(&bytes)
    }

    /// The entry under `key` if it reads and passes `check`.
    pub fn get<S: DeserializeOwned, T, E>(&self, key: &str, check: impl FnOnce(&S) -> Result<T, E>) -> Lookup<S, T, E> {
        let found = match &self.answers {
            Answers::Folder(folder) => folder.get(key),
            Answers::Segments(segments) => segments.get(key).map(|found| (PathBuf::from(found.name), found.bytes)),
        };
        let Some((path, bytes)) = found else {
            return Lookup::Miss;
        };
        match serde_json::from_slice(&bytes) {
            Ok(stored) => match Checked::new(stored, check) {
                Ok(hit) => {
                    if let Answers::Folder(folder) = &self.answers {
                        folder.used(&path);
                    }
                    Lookup::Hit(hit)
                }
                Err((_, e)) => Lookup::Rejected(e),
            },
            Err(e) => {
                // One line for the first; the rest are counted (stats.json),
                // not listed: a damaged cache can hold thousands.
                if self.corrupt.fetch_add(1, Ordering::Relaxed) == 0 {
                    tracing::warn!(
                        "ignoring corrupt cache entry {} ({e}); its request is sent again (further corrupt entries are counted in stats.json as cache_corrupt, not listed)",
                        path.display()
                    );
                } else {
                    tracing::debug!("ignoring corrupt cache entry {} ({e})", path.display());
                }
                Lookup::Corrupt
            }
        }
    }

    /// Stores a checked answer; a failure to write only costs a future cache miss.
    pub fn put<S: Serialize, T>(&self, key: &str, value: &Checked<S, T>) {
        let bytes = match serde_json::to_vec(value.stored()) {
            Ok(bytes) => bytes,
            Err(e) => {
                tracing::warn!("could not write cache entry {key}: {e}");
                return;
            }
        };
        match &self.answers {
            Answers::Segments(segments) => segments.put(key, bytes.into()),
            Answers::Folder(folder) => {
                if let Err(e) = folder.put(key, &bytes) {
                    tracing::warn!("could not write cache entry {}: {e}", folder.path(key).display());
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[allow(clippy::ptr_arg)] // the check of a stored Vec
    fn short(v: &Vec<u32>) -> Result<usize, String> {
        if v.len() < 4 {
            Ok(v.len())
        } else {
            Err(format!("{} numbers", v.len()))
        }
    }

    #[test]
    fn only_checked_values_go_in_and_only_passing_entries_come_out() {
        let dir = tempfile::tempdir().unwrap();
        let cache = ResponseCache::new(dir.path());
        let key = ResponseCache::key(&["chat", "gpt", "{}"]);
        assert!(matches!(cache.get(&key, short), Lookup::Miss));
        assert!(Checked::new(vec![1u32, 2, 3, 4], short).is_err(), "a failing value cannot be made, so not stored");
        cache.put(&key, &Checked::new(vec![1u32, 2, 3], short).unwrap());
        match cache.get(&key, short) {
            Lookup::Hit(hit) => assert_eq!((hit.stored(), *hit.value()), (&vec![1, 2, 3], 3)),
            other => panic!("{other:?}"),
        }
        // A stricter check rejects what a looser one stored.
        assert!(matches!(
            cache.get(&key, |v: &Vec<u32>| if v.len() < 2 { Ok(()) } else { Err(()) }),
            Lookup::Rejected(())
        ));
        let Answers::Folder(folder) = &cache.answers else { unreachable!() };
        std::fs::write(folder.path(&key), b"{truncated").unwrap();
        assert!(matches!(cache.get(&key, short), Lookup::Corrupt));
        assert!(matches!(cache.get(&key, short), Lookup::Corrupt));
        assert_eq!(cache.corrupt.load(Ordering::Relaxed), 2);
        cache.put(&key, &Checked::new(vec![4u32], short).unwrap());
        assert!(matches!(cache.get(&key, short), Lookup::Hit(_)));
        assert_ne!(key, ResponseCache::key(&["chat", "gpt", "{ }"]));
    }

    #[test]
    fn answers_are_kept_on_an_object_store() {
        let Some(moto) = crate::storage::object::testing::moto() else { return };
        let dir = tempfile::tempdir().unwrap();
        let cache = ResponseCache::at(&Location::object(moto.location("cache", "p/cache"), dir.path()));
        let key = ResponseCache::key(&["chat", "gpt", "{}"]);
        assert!(matches!(cache.get(&key, short), Lookup::Miss));
        cache.put(&key, &Checked::new(vec![1u32, 2], short).unwrap());
        assert!(matches!(cache.get(&key, short), Lookup::Hit(_)));
        let partition = cache.partition("extract_graph");
        assert!(matches!(partition.get(&key, short), Lookup::Hit(_)), "a partition reads the root's entries");
        let other = ResponseCache::key(&["other"]);
        partition.put(&other, &Checked::new(vec![3u32], short).unwrap());
        assert!(matches!(cache.get(&other, short), Lookup::Miss), "the root does not read a partition's");
        assert!(!dir.path().exists() || std::fs::read_dir(dir.path()).unwrap().count() == 0, "nothing written locally");
    }

    #[test]
    fn a_bounded_cache_on_an_object_store_holds_at_most_its_bound_in_memory() {
        let Some(moto) = crate::storage::object::testing::moto() else { return };
        let dir = tempfile::tempdir().unwrap();
        let root = ResponseCache::at(&Location::object(moto.location("bounded-queries", "p/cache"), dir.path()));
        let budget = 16 << 10;
        let queries = root.partition("query").bounded(budget);
        let any = |v: &String| Ok::<usize, ()>(v.len());
        let keys: Vec<String> = (0..40).map(|i| ResponseCache::key(&[&i.to_string()])).collect();
        for key in &keys {
            queries.put(key, &Checked::new("y".repeat(1000), any).unwrap());
        }
        let Answers::Segments(segments) = &queries.answers else { panic!("not on the object store") };
        let held = || segments.held_bytes();
        assert!(held() > 0 && held() <= budget, "{} bytes held", held());
        assert!(keys.iter().all(|k| matches!(queries.get(k, any), Lookup::Hit(_))), "every answer still found");
        assert!(held() <= budget);
    }

    #[test]
    fn a_bounded_cache_deletes_its_least_recently_used_entries() {
        let dir = tempfile::tempdir().unwrap();
        let root = ResponseCache::new(dir.path());
        let any = |v: &String| Ok::<usize, ()>(v.len());
        let old_key = ResponseCache::key(&["root entry"]);
        root.put(&old_key, &Checked::new("x".repeat(500), any).unwrap());
        // Each entry is 102 bytes of JSON: three fit in 350.
        let bounded = root.partition("query").bounded(350);
        let keys: Vec<String> = (0..4).map(|i| ResponseCache::key(&[&i.to_string()])).collect();
        let hit = |key: &str| matches!(bounded.get(key, any), Lookup::Hit(_));
        for key in &keys[..3] {
            bounded.put(key, &Checked::new("y".repeat(100), any).unwrap());
        }
        assert!(hit(&keys[0]), "read: now the most recently used");
        bounded.put(&keys[3], &Checked::new("y".repeat(100), any).unwrap());
        assert_eq!(keys.iter().map(|k| hit(k)).collect::<Vec<_>>(), [true, false, true, true]);
        assert!(hit(&old_key), "entries of the root (unbounded) are read and never deleted");
    }

    #[test]
    fn partitions_write_apart_and_read_older_root_entries() {
        let dir = tempfile::tempdir().unwrap();
        let root = ResponseCache::new(dir.path());
        let part = root.partition("extract_graph");
        let (old, new) = (ResponseCache::key(&["old"]), ResponseCache::key(&["new"]));
        let any = |v: &u32| Ok::<u32, ()>(*v);
        root.put(&old, &Checked::new(1u32, any).unwrap());
        part.put(&new, &Checked::new(2u32, any).unwrap());
        let got = |cache: &ResponseCache, key: &str| match cache.get(key, any) {
            Lookup::Hit(hit) => Some(*hit.value()),
            _ => None,
        };
        assert_eq!(got(&part, &old), Some(1), "an answer cached before partitions still counts");
        assert_eq!(got(&part, &new), Some(2));
        assert_eq!(got(&root, &new), None, "partitions do not leak into the root");
        assert!(dir.path().join("extract_graph").join(&new[..2]).join(format!("{new}.json")).is_file());
    }
}
