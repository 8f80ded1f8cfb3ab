//! The answers an older version kept in a local cache folder, one JSON file
//! per answer: `DIR/<xx>/<key>.json` (`xx`: the key's first two hex
//! digits), a step's under `DIR/<name>/…`. Read only, so that a cache
//! written before segments still hits; new answers go to segments
//! ([`super::cache_segments`]), and a key found in both is the segment's.
//!
//! A partition looks in its own folder, then in the root's (which held
//! every answer before caches were partitioned). Whether a folder holds any
//! `<xx>/` subfolder is looked at once, on its first lookup: a cache without
//! the old layout (every new one) costs no file system call per miss. An
//! older version writing into the same folder while this process runs is
//! seen only by later processes.

use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};

use bytes::Bytes;

use super::cache_held::hex_digit;

pub(super) struct LegacyFiles {
    /// This partition's folder, then its fallback (the root's).
    dirs: Vec<Arc<OldFolder>>,
}

struct OldFolder {
    dir: PathBuf,
    /// Whether `dir` holds a `<xx>/` subfolder, looked at on first use.
    has_files: OnceLock<bool>,
}

impl OldFolder {
    fn new(dir: PathBuf) -> Arc<OldFolder> {
        Arc::new(OldFolder { dir, has_files: OnceLock::new() })
    }

    fn path(&self, key: &str) -> PathBuf {
        self.dir.join(&key[..2]).join(format!("{key}.json"))
    }

    fn get(&self, key: &str) -> Option<(PathBuf, Bytes)> {
        if !*self.has_files.get_or_init(|| has_answer_folders(&self.dir)) {
            return None;
        }
        let path = self.path(key);
        std::fs::read(&path).ok().map(|bytes| (path, Bytes::from(bytes)))
    }
}

/// Whether `dir` holds a folder named as two hex digits.
fn has_answer_folders(dir: &Path) -> bool {
    let named = |name: &str| name.len() == 2 && name.bytes().all(|b| hex_digit(b).is_some());
    let entries = std::fs::read_dir(dir).into_iter().flatten().flatten();
    entries.into_iter().any(|e| e.file_name().to_str().is_some_and(named) && e.path().is_dir())
}

impl LegacyFiles {
    pub fn new(dir: &Path) -> LegacyFiles {
        LegacyFiles { dirs: vec![OldFolder::new(dir.to_path_buf())] }
    }

    /// The partition `name`, falling back to this folder.
    pub fn partition(&self, name: &str) -> LegacyFiles {
        let own = OldFolder::new(self.dirs[0].dir.join(name));
        LegacyFiles { dirs: vec![own, self.dirs[0].clone()] }
    }

    /// The file of `key` and its bytes: this folder's, else its fallback's
    /// (`key`: a cache key, 64 hex digits).
    pub fn get(&self, key: &str) -> Option<(PathBuf, Bytes)> {
        self.dirs.iter().find_map(|dir| dir.get(key))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn old_files_are_read_in_the_partition_then_the_root_and_a_folder_without_them_is_not_searched() {
        let dir = tempfile::tempdir().unwrap();
        let key = |n: u32| crate::llm::ResponseCache::key(&[&n.to_string()]);
        let write = |partition: &str, key: &str, json: &str| {
            let folder = dir.path().join(partition).join(&key[..2]);
            std::fs::create_dir_all(&folder).unwrap();
            std::fs::write(folder.join(format!("{key}.json")), json).unwrap();
        };
        write("", &key(1), "\"root\"");
        write("extract_graph", &key(2), "\"own\"");
        write("extract_graph", &key(1), "\"own one\"");
        let root = LegacyFiles::new(dir.path());
        let part = root.partition("extract_graph");
        let got = |files: &LegacyFiles, key: &str| files.get(key).map(|(_, b)| b);
        assert_eq!(got(&part, &key(1)), Some(Bytes::from_static(b"\"own one\"")), "the partition's own first");
        assert_eq!(got(&part, &key(2)), Some(Bytes::from_static(b"\"own\"")));
        assert_eq!(got(&root, &key(2)), None, "the root does not read a partition's");
        assert_eq!(
            part.get(&key(1)).unwrap().0,
            dir.path().join("extract_graph").join(&key(1)[..2]).join(format!("{}.json", key(1)))
        );
        // A partition with no old files: looked at once, then never searched.
        let new = root.partition("summarize");
        assert_eq!(got(&new, &key(3)), None);
        write("summarize", &key(3), "\"later\"");
        assert_eq!(got(&new, &key(3)), None, "written by an older version since: seen by the next process");
        assert_eq!(got(&root.partition("summarize"), &key(3)), Some(Bytes::from_static(b"\"later\"")));
    }
}
