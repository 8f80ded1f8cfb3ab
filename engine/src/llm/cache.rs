//! Persistent response cache: one file per request under DIR/cache (or a
//! step's partition of it), keyed by a hash of the model, parameters and
//! messages (never the API key); on an object store, many answers to an
//! object ([`super::cache_segments`]). Writes are atomic but not synced to disk
//! (a sync per answer cost milliseconds on the request path): an entry a
//! machine crash left torn is unreadable, which counts as a miss and is
//! rewritten.
//!
//! The cache holds only answers that passed their purpose's check: [`put`]
//! takes a [`Checked`] value, which only running a check makes, and [`get`]
//! runs the caller's check again on what it reads (an entry written by an
//! older version, or damaged on disk, is asked again rather than trusted).
//!
//! [`put`]: ResponseCache::put
//! [`get`]: ResponseCache::get

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use serde::de::DeserializeOwned;
use serde::Serialize;

use super::cache_budget::ByteBudget;
use super::cache_segments::ObjectAnswers;
use crate::storage::Location;
use crate::store::atomic_write_unsynced;
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
    dir: PathBuf,
    /// Where a partition also looks for an answer it does not have: the
    /// cache root, which held every answer before caches were partitioned.
    fallback: Option<PathBuf>,
    /// Corrupt entries met (the root's and its partitions': one warning).
    corrupt: Arc<AtomicU64>,
    /// The size bound of `dir`, if it has one (see [`ResponseCache::bounded`]).
    budget: Option<Arc<ByteBudget>>,
    /// On an object store: this partition's answers (falling back to the
    /// root's), instead of `dir` and `fallback`.
    objects: Option<ObjectAnswers>,
}

impl ResponseCache {
    pub fn new(dir: &Path) -> Self {
        ResponseCache { dir: dir.to_path_buf(), fallback: None, corrupt: Arc::default(), budget: None, objects: None }
    }

    /// The cache at a storage location: its folder (one file per answer),
    /// or its object store prefix (segments of answers).
    pub fn at(location: &Location) -> Self {
        let objects = location.remote().map(|remote| ObjectAnswers::new(remote.clone()));
        ResponseCache { objects, ..ResponseCache::new(location.dir()) }
    }

    /// The cache of one pipeline step (GraphRAG's `model_instance_name`):
    /// entries under `DIR/<name>/`, reading older unpartitioned entries too.
    pub fn partition(&self, name: &str) -> Self {
        ResponseCache {
            dir: self.dir.join(name),
            fallback: Some(self.dir.clone()),
            corrupt: self.corrupt.clone(),
            budget: None,
            objects: self.objects.as_ref().map(|answers| answers.partition(name)),
        }
    }

    /// Writes the answers an object store cache keeps in memory (a step's,
    /// when it ends); a folder's are written as they come.
    pub fn flush(&self) {
        if let Some(answers) = &self.objects {
            answers.flush();
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
        if let Some(answers) = &self.objects {
            answers.bound(max_bytes);
            return self;
        }
        let budget = Some(Arc::new(ByteBudget::new(&self.dir, max_bytes)));
        ResponseCache { budget, ..self }
    }

    pub fn key(parts: &[&str]) -> String {
        let bytes: Vec<&[u8]> = parts.iter().map(|p| p.as_bytes()).collect();
        sha256_hex(&bytes)
    }

    fn path(&self, key: &str) -> PathBuf {
        entry_path(&self.dir, key)
    }

    /// The entry under `key` if it reads and passes `check`.
    pub fn get<S: DeserializeOwned, T, E>(&self, key: &str, check: impl FnOnce(&S) -> Result<T, E>) -> Lookup<S, T, E> {
        let path = self.path(key);
        let older = self.fallback.as_ref().map(|root| entry_path(root, key));
        let found = match &self.objects {
            Some(answers) => answers.get(key).map(|found| (PathBuf::from(found.name), found.bytes)),
            None => [Some(path), older]
                .into_iter()
                .flatten()
                .find_map(|p| std::fs::read(&p).ok().map(|b| (p, bytes::Bytes::from(b)))),
        };
        let Some((path, bytes)) = found else {
            return Lookup::Miss;
        };
        match serde_json::from_slice(&bytes) {
            Ok(stored) => match Checked::new(stored, check) {
                Ok(hit) => {
                    if let Some(budget) = self.budget.as_ref().filter(|_| path.starts_with(&self.dir)) {
                        budget.read(&path);
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
        if let Some(answers) = &self.objects {
            match serde_json::to_vec(value.stored()) {
                Ok(bytes) => answers.put(key, bytes.into()),
                Err(e) => tracing::warn!("could not write cache entry {key} to {}: {e}", answers.url()),
            }
            return;
        }
        let path = self.path(key);
        let result = serde_json::to_vec(value.stored()).map_err(std::io::Error::other).and_then(|bytes| {
            atomic_write_unsynced(&path, &bytes)?;
            Ok(bytes.len() as u64)
        });
        match result {
            Ok(size) => {
                if let Some(budget) = &self.budget {
                    budget.written(&path, size);
                }
            }
            Err(e) => tracing::warn!("could not write cache entry {}: {e}", path.display()),
        }
    }
}

fn entry_path(dir: &Path, key: &str) -> PathBuf {
    dir.join(&key[..2]).join(format!("{key}.json"))
}

/// [`entry_path`]'s form as an object key.
pub(super) fn entry_key(key: &str) -> String {
    format!("{}/{key}.json", &key[..2])
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
        std::fs::write(cache.path(&key), b"{truncated").unwrap();
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
        let held = || queries.objects.as_ref().unwrap().held_bytes();
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
