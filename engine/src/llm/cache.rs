//! Persistent response cache: one file per request under DIR/cache, keyed by
//! a hash of the model, parameters and messages (never the API key). Writes
//! are atomic; an unreadable entry counts as a miss and is rewritten.

use std::path::{Path, PathBuf};

use serde::de::DeserializeOwned;
use serde::Serialize;

use crate::store::atomic_write;
use graphrag_operations::ids::sha256_hex;

pub struct ResponseCache {
    dir: PathBuf,
    /// Where a partition also looks for an answer it does not have: the
    /// cache root, which held every answer before caches were partitioned.
    fallback: Option<PathBuf>,
}

impl ResponseCache {
    pub fn new(dir: &Path) -> Self {
        ResponseCache { dir: dir.to_path_buf(), fallback: None }
    }

    /// The cache of one pipeline step (GraphRAG's `model_instance_name`):
    /// entries under DIR/<name>/, reading older unpartitioned entries too.
    pub fn partition(&self, name: &str) -> Self {
        ResponseCache { dir: self.dir.join(name), fallback: Some(self.dir.clone()) }
    }

    pub fn key(parts: &[&str]) -> String {
        let bytes: Vec<&[u8]> = parts.iter().map(|p| p.as_bytes()).collect();
        sha256_hex(&bytes)
    }

    fn path(&self, key: &str) -> PathBuf {
        entry_path(&self.dir, key)
    }

    pub fn get<T: DeserializeOwned>(&self, key: &str) -> Option<T> {
        let path = self.path(key);
        let (path, bytes) = match std::fs::read(&path) {
            Ok(bytes) => (path, bytes),
            Err(_) => {
                let older = entry_path(self.fallback.as_ref()?, key);
                let bytes = std::fs::read(&older).ok()?;
                (older, bytes)
            }
        };
        match serde_json::from_slice(&bytes) {
            Ok(v) => Some(v),
            Err(e) => {
                tracing::warn!("ignoring corrupt cache entry {} ({e})", path.display());
                None
            }
        }
    }

    /// Stores `value`; a failure to write only costs a future cache miss.
    pub fn put<T: Serialize>(&self, key: &str, value: &T) {
        let path = self.path(key);
        let result =
            serde_json::to_vec(value).map_err(std::io::Error::other).and_then(|bytes| atomic_write(&path, &bytes));
        if let Err(e) = result {
            tracing::warn!("could not write cache entry {}: {e}", path.display());
        }
    }
}

fn entry_path(dir: &Path, key: &str) -> PathBuf {
    dir.join(&key[..2]).join(format!("{key}.json"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_corrupt_entries_are_misses() {
        let dir = tempfile::tempdir().unwrap();
        let cache = ResponseCache::new(dir.path());
        let key = ResponseCache::key(&["chat", "gpt", "{}"]);
        assert_eq!(cache.get::<Vec<u32>>(&key), None);
        cache.put(&key, &vec![1u32, 2, 3]);
        assert_eq!(cache.get::<Vec<u32>>(&key), Some(vec![1, 2, 3]));
        std::fs::write(cache.path(&key), b"{truncated").unwrap();
        assert_eq!(cache.get::<Vec<u32>>(&key), None);
        cache.put(&key, &vec![4u32]);
        assert_eq!(cache.get::<Vec<u32>>(&key), Some(vec![4]));
        assert_ne!(key, ResponseCache::key(&["chat", "gpt", "{ }"]));
    }

    #[test]
    fn partitions_write_apart_and_read_older_root_entries() {
        let dir = tempfile::tempdir().unwrap();
        let root = ResponseCache::new(dir.path());
        let part = root.partition("extract_graph");
        let (old, new) = (ResponseCache::key(&["old"]), ResponseCache::key(&["new"]));
        root.put(&old, &1u32);
        part.put(&new, &2u32);
        assert_eq!(part.get::<u32>(&old), Some(1), "an answer cached before partitions still counts");
        assert_eq!(part.get::<u32>(&new), Some(2));
        assert_eq!(root.get::<u32>(&new), None, "partitions do not leak into the root");
        assert!(dir.path().join("extract_graph").join(&new[..2]).join(format!("{new}.json")).is_file());
    }
}
