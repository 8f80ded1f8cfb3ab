//! Persistent response cache, keyed by a hash of the model, parameters and
//! messages (never the API key). One implementation for a local folder and
//! an object store: a partition's answers are written together, in
//! segments ([`super::cache_segments`], which holds the format and its
//! contracts), through the storage location's [`crate::storage::Store`].
//! A folder also reads the one-file-per-answer layout of older versions
//! ([`super::cache_folder`]), and keeps a bounded cache's segments within
//! its bound ([`ResponseCache::bounded`]).
//!
//! An answer is kept as its JSON, compact; an embedding vector as the
//! base64 of its f32 values ([`super::cache_vector`], through
//! [`ResponseCache::get_vector`] and [`ResponseCache::put_vector`]).
//!
//! The cache holds only answers that passed their purpose's check: [`put`]
//! takes a [`Checked`] value, which only running a check makes, and [`get`]
//! runs the caller's check again on what it reads (an entry written by an
//! older version, or damaged, is asked again rather than trusted).
//!
//! [`put`]: ResponseCache::put
//! [`get`]: ResponseCache::get

use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use bytes::Bytes;
use serde::de::DeserializeOwned;
use serde::Serialize;

use super::cache_folder::LegacyFiles;
pub use super::cache_segments::Imported;
use super::cache_segments::{import_folder, SegmentAnswers};
use super::cache_vector;
use crate::storage::{Backend, Location};
use graphrag_operations::ids::sha256_hex;

/// A stored form `S` (an answer as the server sent it) that passed a check,
/// with the value `T` the check made of it.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Checked<S, T> {
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

    pub(crate) fn stored(&self) -> &S {
        &self.stored
    }

    #[cfg(test)]
    pub fn value(&self) -> &T {
        &self.value
    }

    pub(crate) fn into_parts(self) -> (S, T) {
        (self.stored, self.value)
    }
}

/// What a cache lookup found.
#[derive(Debug)]
pub(crate) enum Lookup<S, T, E> {
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

/// The model answer cache of a project (or of one partition of it): a
/// local folder or an object store prefix, answers in segment files; every
/// entry read is checked again by the caller before use.
pub struct ResponseCache {
    segments: SegmentAnswers,
    /// In a local folder: the answers of older versions, one file each.
    legacy: Option<LegacyFiles>,
    /// Corrupt entries met (the root's and its partitions': one warning).
    corrupt: Arc<AtomicU64>,
}

impl ResponseCache {
    /// The cache in the local folder `dir`.
    pub fn new(dir: &Path) -> Self {
        ResponseCache::at(&Location::folder(dir))
    }

    /// The cache at a storage location: segments of answers in its folder
    /// or under its object store prefix.
    pub(crate) fn at(location: &Location) -> Self {
        let legacy = match location.backend() {
            Backend::Folder(dir) => Some(LegacyFiles::new(dir)),
            Backend::ObjectStore(_) => None,
        };
        ResponseCache { segments: SegmentAnswers::new(location.store()), legacy, corrupt: Arc::default() }
    }

    /// Copies the answers of the local cache folder `folder` (segments, and
    /// files of older versions) into the cache at `to`, an object store
    /// location.
    pub fn import(folder: &Path, to: &Location) -> anyhow::Result<Imported> {
        match to.backend() {
            Backend::ObjectStore(_) => import_folder(folder, to.store().as_ref()),
            Backend::Folder(_) => {
                anyhow::bail!("{} is a local folder: the answers of a folder cache are copied as files", to.describe())
            }
        }
    }

    /// The cache of one pipeline step (GraphRAG's `model_instance_name`):
    /// entries under `DIR/<name>/`, reading older unpartitioned entries too.
    pub(crate) fn partition(&self, name: &str) -> Self {
        ResponseCache {
            segments: self.segments.partition(name),
            legacy: self.legacy.as_ref().map(|legacy| legacy.partition(name)),
            corrupt: self.corrupt.clone(),
        }
    }

    /// Writes the answers the cache keeps in memory (a step's, when it
    /// ends; otherwise every second, see [`super::cache_segments`]).
    pub(crate) fn flush(&self) {
        self.segments.flush();
    }

    /// The same cache holding at most `max_bytes` of answers in memory (see
    /// [`super::cache_held`]), for answers that keep coming (a server's
    /// query answers; an index's are never bounded, they are what makes a
    /// rerun cheap). In a local folder its segments also take at most
    /// `max_bytes`, the oldest deleted first; on an object store a bucket's
    /// lifecycle rule expires old segments.
    pub(crate) fn bounded(self, max_bytes: u64) -> Self {
        self.segments.bound(max_bytes);
        if self.legacy.is_some() {
            self.segments.keep_at_most(max_bytes);
        }
        self
    }

    pub(crate) fn key(parts: &[&str]) -> String {
        let bytes: Vec<&[u8]> = parts.iter().map(|p| p.as_bytes()).collect();
        sha256_hex(&bytes)
    }

    /// The entry under `key` if it reads and passes `check`.
    pub(crate) fn get<S: DeserializeOwned, T, E>(
        &self,
        key: &str,
        check: impl FnOnce(&S) -> Result<T, E>,
    ) -> Lookup<S, T, E> {
        self.get_as(key, |bytes| serde_json::from_slice(bytes).map_err(|e| e.to_string()), check)
    }

    /// The embedding vector under `key` if it reads and passes `check`.
    pub(crate) fn get_vector<T, E>(
        &self,
        key: &str,
        check: impl FnOnce(&Vec<f32>) -> Result<T, E>,
    ) -> Lookup<Vec<f32>, T, E> {
        self.get_as(key, cache_vector::decode, check)
    }

    fn get_as<S, T, E>(
        &self,
        key: &str,
        decode: impl FnOnce(&[u8]) -> Result<S, String>,
        check: impl FnOnce(&S) -> Result<T, E>,
    ) -> Lookup<S, T, E> {
        let found = self.segments.get(key).map(|found| (found.name, found.bytes)).or_else(|| {
            let (path, bytes) = self.legacy.as_ref()?.get(key)?;
            Some((path.display().to_string(), bytes))
        });
        let Some((name, bytes)) = found else {
            return Lookup::Miss;
        };
        match decode(&bytes) {
            Ok(stored) => match Checked::new(stored, check) {
                Ok(hit) => Lookup::Hit(hit),
                Err((_, e)) => Lookup::Rejected(e),
            },
            Err(e) => {
                // One line for the first; the rest are counted (stats.json),
                // not listed: a damaged cache can hold thousands.
                if self.corrupt.fetch_add(1, Ordering::Relaxed) == 0 {
                    tracing::warn!(
                        "ignoring corrupt cache entry {name} ({e}); its request is sent again (further corrupt entries are counted in stats.json as cache_corrupt, not listed)"
                    );
                } else {
                    tracing::debug!("ignoring corrupt cache entry {name} ({e})");
                }
                Lookup::Corrupt
            }
        }
    }

    /// Stores a checked answer; a failure to write only costs a future cache miss.
    pub(crate) fn put<S: Serialize, T>(&self, key: &str, value: &Checked<S, T>) {
        match serde_json::to_vec(value.stored()) {
            Ok(bytes) => self.segments.put(key, bytes.into()),
            Err(e) => tracing::warn!("could not write cache entry {key}: {e}"),
        }
    }

    /// Stores a checked embedding vector, compact ([`super::cache_vector`]).
    pub(crate) fn put_vector<T>(&self, key: &str, value: &Checked<Vec<f32>, T>) {
        self.segments.put(key, Bytes::from(cache_vector::encode(value.stored())));
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

    /// Writes `json` as the answer to `key` in the layout of older versions.
    fn old_file(dir: &Path, partition: &str, key: &str, json: &str) {
        let folder = dir.join(partition).join(&key[..2]);
        std::fs::create_dir_all(&folder).unwrap();
        std::fs::write(folder.join(format!("{key}.json")), json).unwrap();
    }

    /// The segment files of `partition` in the cache folder `dir`.
    fn segment_files(dir: &Path, partition: &str) -> Vec<std::path::PathBuf> {
        let entries = std::fs::read_dir(dir.join(partition).join("segments")).into_iter().flatten().flatten();
        let mut files: Vec<_> =
            entries.map(|e| e.path()).filter(|p| p.extension().is_some_and(|x| x == "answers")).collect();
        files.sort();
        files
    }

    #[test]
    fn only_checked_values_go_in_and_only_passing_entries_come_out() {
        let dir = tempfile::tempdir().unwrap();
        let key = ResponseCache::key(&["chat", "gpt", "{}"]);
        old_file(dir.path(), "", &key, "{truncated");
        let cache = ResponseCache::new(dir.path());
        assert!(matches!(cache.get(&key, short), Lookup::Corrupt), "a damaged entry is asked again");
        assert!(matches!(cache.get(&key, short), Lookup::Corrupt));
        assert_eq!(cache.corrupt.load(Ordering::Relaxed), 2);
        let other = ResponseCache::key(&["chat", "gpt", "{ }"]);
        assert_ne!(key, other);
        assert!(matches!(cache.get(&other, short), Lookup::Miss));
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
        drop(cache);
        let later = ResponseCache::new(dir.path());
        assert!(matches!(later.get(&key, short), Lookup::Hit(_)), "the new answer, written, replaces the damaged one");
    }

    #[test]
    fn a_folder_keeps_answers_in_segments_and_still_reads_the_files_of_older_versions() {
        let dir = tempfile::tempdir().unwrap();
        let any = |v: &u32| Ok::<u32, ()>(*v);
        let keys: Vec<String> = (0..4).map(|i| ResponseCache::key(&[&i.to_string()])).collect();
        old_file(dir.path(), "", &keys[0], "10");
        old_file(dir.path(), "extract_graph", &keys[1], "11");
        old_file(dir.path(), "extract_graph", &keys[2], "12");
        let root = ResponseCache::new(dir.path());
        let part = root.partition("extract_graph");
        part.put(&keys[2], &Checked::new(22u32, any).unwrap());
        part.put(&keys[3], &Checked::new(23u32, any).unwrap());
        root.flush();
        let files = segment_files(dir.path(), "extract_graph");
        assert_eq!(files.len(), 1, "one segment for the step's answers, not a file each");
        assert!(!dir.path().join("extract_graph").join(&keys[3][..2]).exists());
        drop((root, part));
        let root = ResponseCache::new(dir.path());
        let part = root.partition("extract_graph");
        let got = |cache: &ResponseCache, key: &str| match cache.get(key, any) {
            Lookup::Hit(hit) => Some(*hit.value()),
            _ => None,
        };
        assert_eq!(got(&part, &keys[0]), Some(10), "an old file of the root, through the fallback");
        assert_eq!(got(&part, &keys[1]), Some(11), "an old file of the partition");
        assert_eq!(got(&part, &keys[2]), Some(22), "a segment's answer before an old file's");
        assert_eq!(got(&part, &keys[3]), Some(23));
        assert_eq!(got(&root, &keys[3]), None, "partitions do not leak into the root");
    }

    #[test]
    fn a_torn_last_line_is_a_miss_and_the_lines_before_it_still_hit() {
        let dir = tempfile::tempdir().unwrap();
        let any = |v: &String| Ok::<usize, ()>(v.len());
        let keys: Vec<String> = (0..3).map(|i| ResponseCache::key(&[&i.to_string()])).collect();
        let cache = ResponseCache::new(dir.path()).partition("summarize");
        for key in &keys {
            cache.put(key, &Checked::new(format!("answer to {key}"), any).unwrap());
        }
        drop(cache);
        // As a machine crash may leave it: cut in the last line.
        let segment = segment_files(dir.path(), "summarize").pop().unwrap();
        let bytes = std::fs::read(&segment).unwrap();
        std::fs::write(&segment, &bytes[..bytes.len() - 10]).unwrap();
        let cache = ResponseCache::new(dir.path()).partition("summarize");
        let hits: Vec<bool> = keys.iter().map(|k| matches!(cache.get(k, any), Lookup::Hit(_))).collect();
        assert_eq!(hits, [true, true, false]);
        assert_eq!(cache.corrupt.load(Ordering::Relaxed), 0, "a torn line is a miss, not an answer");
    }

    #[test]
    fn vectors_are_kept_compact_and_read_back_bit_for_bit_and_older_decimal_ones_still_read() {
        let dir = tempfile::tempdir().unwrap();
        let any = |v: &Vec<f32>| Ok::<usize, ()>(v.len());
        let (new, old) = (ResponseCache::key(&["new"]), ResponseCache::key(&["old"]));
        old_file(dir.path(), "embed", &old, "[0.25,-1.5]");
        let vector: Vec<f32> = (0..3072).map(|i| (i as f32 * 0.37).cos() / 3.0).collect();
        let cache = ResponseCache::new(dir.path());
        cache.partition("embed").put_vector(&new, &Checked::new(vector.clone(), any).unwrap());
        drop(cache);
        let segment = std::fs::read(segment_files(dir.path(), "embed").pop().unwrap()).unwrap();
        assert!(segment.len() < 3072 * 6, "{} bytes for 3,072 floats", segment.len());
        let embed = ResponseCache::new(dir.path()).partition("embed");
        let read = |key: &str| match embed.get_vector(key, any) {
            Lookup::Hit(hit) => hit.into_parts().0,
            other => panic!("{other:?}"),
        };
        let bits = |v: &[f32]| v.iter().map(|f| f.to_bits()).collect::<Vec<_>>();
        assert_eq!(bits(&read(&new)), bits(&vector));
        assert_eq!(read(&old), [0.25, -1.5]);
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
        let held = || queries.segments.held_bytes();
        assert!(held() > 0 && held() <= budget, "{} bytes held", held());
        assert!(keys.iter().all(|k| matches!(queries.get(k, any), Lookup::Hit(_))), "every answer still found");
        assert!(held() <= budget);
    }

    #[test]
    fn a_bounded_folder_deletes_its_oldest_segments_past_its_bound_and_never_the_root_s() {
        let dir = tempfile::tempdir().unwrap();
        let any = |v: &String| Ok::<usize, ()>(v.len());
        let root = ResponseCache::new(dir.path());
        let old_key = ResponseCache::key(&["root entry"]);
        root.put(&old_key, &Checked::new("x".repeat(500), any).unwrap());
        root.flush();
        // Each answer's line is 168 bytes, a segment each: three fit in 550.
        let bounded = root.partition("query").bounded(550);
        let keys: Vec<String> = (0..5).map(|i| ResponseCache::key(&[&i.to_string()])).collect();
        for key in &keys {
            bounded.put(key, &Checked::new("y".repeat(100), any).unwrap());
            bounded.flush();
            let bytes: u64 = segment_files(dir.path(), "query").iter().map(|f| f.metadata().unwrap().len()).sum();
            assert!(bytes <= 550, "{bytes} bytes of segments");
        }
        assert_eq!(segment_files(dir.path(), "query").len(), 3);
        drop((root, bounded));
        let later = ResponseCache::new(dir.path()).partition("query");
        let hit = |key: &str| matches!(later.get(key, any), Lookup::Hit(_));
        assert_eq!(keys.iter().map(|k| hit(k)).collect::<Vec<_>>(), [false, false, true, true, true]);
        assert!(hit(&old_key), "answers of the root (unbounded) are read and never deleted");
    }
}
