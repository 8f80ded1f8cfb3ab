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
}

impl ResponseCache {
    pub fn new(dir: &Path) -> Self {
        ResponseCache { dir: dir.to_path_buf() }
    }

    pub fn key(parts: &[&str]) -> String {
        let bytes: Vec<&[u8]> = parts.iter().map(|p| p.as_bytes()).collect();
        sha256_hex(&bytes)
    }

    fn path(&self, key: &str) -> PathBuf {
        self.dir.join(&key[..2]).join(format!("{key}.json"))
    }

    pub fn get<T: DeserializeOwned>(&self, key: &str) -> Option<T> {
        let path = self.path(key);
        let bytes = std::fs::read(&path).ok()?;
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
}
