//! The input documents as a run reads them: a [`FileSource`] lists and
//! reads files by `/`-separated path, over a local folder (`LocalFiles`)
//! or an object store prefix (`ObjectFiles`, in this module's parent).

use std::collections::{BTreeMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::SystemTime;

use anyhow::Context;

/// One file of the input storage.
#[derive(Debug, Clone)]
pub struct FileEntry {
    /// Path relative to the input folder, `/`-separated.
    pub path: String,
    /// Bytes.
    pub size: u64,
    /// The file's (or object's) modification time.
    pub modified: SystemTime,
}

/// Read-only access to the input documents.
pub trait FileSource: Send + Sync {
    /// Every file, sorted by path.
    fn list(&self) -> anyhow::Result<Vec<FileEntry>>;
    /// The bytes of the file `path` (as [`FileEntry::path`] lists it).
    fn read(&self, path: &str) -> anyhow::Result<Vec<u8>>;
    /// Where the files are, for messages.
    fn describe(&self) -> String;
}

/// Files under a local folder. Symbolic links are followed (a link to a
/// folder already walked, e.g. a loop, is skipped with a warning); what is
/// neither a file nor a folder (a FIFO, a socket, a device such as a link to
/// /dev/zero) is skipped with a warning, never opened. A name that is not
/// UTF-8 is listed with each byte that is not as `\xNN` (`caf\xE9.txt`: no
/// other file's name, unlike a lossy `caf\u{FFFD}.txt`), and read under its
/// real name.
pub(crate) struct LocalFiles {
    pub root: PathBuf,
    /// Listed paths that differ from the real ones (a name not UTF-8).
    renamed: Mutex<BTreeMap<String, PathBuf>>,
}

impl LocalFiles {
    pub fn new(root: impl Into<PathBuf>) -> Self {
        LocalFiles { root: root.into(), renamed: Mutex::new(BTreeMap::new()) }
    }
}

impl FileSource for LocalFiles {
    fn list(&self) -> anyhow::Result<Vec<FileEntry>> {
        match std::fs::metadata(&self.root) {
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                anyhow::bail!("input folder {} does not exist", self.root.display())
            }
            Err(e) => anyhow::bail!("cannot read input folder {}: {e}", self.root.display()),
            Ok(m) if !m.is_dir() => anyhow::bail!(
                "input folder {} is a file, not a folder: point input_storage.base_dir at the folder that holds the documents",
                self.root.display()
            ),
            Ok(_) => {}
        }
        let mut walk = Walk { out: Vec::new(), seen_dirs: HashSet::new(), renamed: BTreeMap::new() };
        walk.dir(&self.root, &[], false)?;
        walk.out.sort_by(|a, b| a.path.cmp(&b.path));
        if let Some(pair) = walk.out.windows(2).find(|w| w[0].path == w[1].path) {
            anyhow::bail!(
                "input: two files are listed as `{}`: one's name is not UTF-8 (its bytes written as \\xNN) and the other's is written that way: rename one",
                pair[0].path
            );
        }
        *self.renamed.lock().unwrap() = walk.renamed;
        Ok(walk.out)
    }

    fn read(&self, path: &str) -> anyhow::Result<Vec<u8>> {
        let full = match self.renamed.lock().unwrap().get(path) {
            Some(real) => real.clone(),
            None => self.root.join(path),
        };
        std::fs::read(&full).with_context(|| format!("reading {}", full.display()))
    }

    fn describe(&self) -> String {
        self.root.display().to_string()
    }
}

/// A walk of the input folder.
struct Walk {
    out: Vec<FileEntry>,
    /// Folders walked, by canonical path (link loops end here).
    seen_dirs: HashSet<PathBuf>,
    renamed: BTreeMap<String, PathBuf>,
}

impl Walk {
    /// Lists `dir`, whose path under the input folder is `rel` (`escaped`:
    /// a folder of it has a name that is not UTF-8, listed escaped).
    fn dir(&mut self, dir: &Path, rel: &[String], escaped: bool) -> anyhow::Result<()> {
        let canonical = std::fs::canonicalize(dir).with_context(|| format!("resolving {}", dir.display()))?;
        if !self.seen_dirs.insert(canonical.clone()) {
            tracing::warn!(
                "input: skipping {}: a link to the folder {}, which is already read (a link loop, or the same folder twice)",
                dir.display(),
                canonical.display()
            );
            return Ok(());
        }
        for entry in std::fs::read_dir(dir).with_context(|| format!("listing {}", dir.display()))? {
            let entry = entry.with_context(|| format!("listing {}", dir.display()))?;
            let p = entry.path();
            // Follows symbolic links.
            let meta = match std::fs::metadata(&p) {
                Ok(m) => m,
                Err(e) => {
                    tracing::warn!("input: skipping {}: {e} (a broken link?)", p.display());
                    continue;
                }
            };
            let os_name = entry.file_name();
            let (name, not_utf8) = match os_name.to_str() {
                Some(name) => (name.to_string(), false),
                None => (escape_non_utf8(os_name.as_encoded_bytes()), true),
            };
            let mut path = rel.to_vec();
            path.push(name);
            let listed = path.join("/");
            if not_utf8 {
                tracing::warn!("input: the name {} is not UTF-8; it is listed as `{listed}`", p.display());
            }
            if meta.is_dir() {
                self.dir(&p, &path, escaped || not_utf8)?;
            } else if meta.is_file() {
                if escaped || not_utf8 {
                    self.renamed.insert(listed.clone(), p.clone());
                }
                self.out.push(FileEntry {
                    path: listed,
                    size: meta.len(),
                    modified: meta.modified().unwrap_or(SystemTime::UNIX_EPOCH),
                });
            } else {
                tracing::warn!(
                    "input: skipping {}: not a regular file (a FIFO, a socket or a device; a link is followed to what it points at)",
                    p.display()
                );
            }
        }
        Ok(())
    }
}

/// A name that is not UTF-8, written without loss: its UTF-8 parts as they
/// are, every other byte as `\xNN`.
fn escape_non_utf8(bytes: &[u8]) -> String {
    let mut out = String::with_capacity(bytes.len() + 8);
    for chunk in bytes.utf8_chunks() {
        out.push_str(chunk.valid());
        for b in chunk.invalid() {
            out.push_str(&format!("\\x{b:02X}"));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::ffi::OsStrExt;
    use std::os::unix::fs::symlink;

    fn paths(files: &LocalFiles) -> Vec<String> {
        files.list().unwrap().into_iter().map(|f| f.path).collect()
    }

    #[test]
    fn links_are_followed_and_link_loops_end() {
        let dir = tempfile::tempdir().unwrap();
        let (input, elsewhere) = (dir.path().join("input"), dir.path().join("elsewhere"));
        std::fs::create_dir_all(input.join("sub")).unwrap();
        std::fs::create_dir_all(elsewhere.join("folder")).unwrap();
        std::fs::write(input.join("sub/a.txt"), "A").unwrap();
        std::fs::write(elsewhere.join("b.txt"), "B").unwrap();
        std::fs::write(elsewhere.join("folder/c.txt"), "C").unwrap();
        symlink(elsewhere.join("b.txt"), input.join("b.txt")).unwrap();
        symlink(elsewhere.join("folder"), input.join("linked")).unwrap();
        symlink(&input, input.join("sub/loop")).unwrap();
        symlink(dir.path().join("missing.txt"), input.join("broken.txt")).unwrap();
        let files = LocalFiles::new(&input);
        assert_eq!(paths(&files), ["b.txt", "linked/c.txt", "sub/a.txt"]);
        assert_eq!(files.read("linked/c.txt").unwrap(), b"C");

        // Only links: still found.
        let only_links = dir.path().join("only_links");
        std::fs::create_dir_all(&only_links).unwrap();
        symlink(elsewhere.join("b.txt"), only_links.join("b.txt")).unwrap();
        assert_eq!(paths(&LocalFiles::new(&only_links)), ["b.txt"]);
    }

    #[test]
    fn a_name_that_is_not_utf8_is_listed_apart_from_every_utf8_name_and_read() {
        let dir = tempfile::tempdir().unwrap();
        let os = |b: &[u8]| std::ffi::OsStr::from_bytes(b).to_os_string();
        std::fs::write(dir.path().join(os(b"caf\xe9.txt")), "latin-1 name").unwrap();
        // What a lossy listing would have called the first one.
        std::fs::write(dir.path().join("caf\u{fffd}.txt"), "utf-8 name").unwrap();
        std::fs::create_dir(dir.path().join(os(b"d\xfcr"))).unwrap();
        std::fs::write(dir.path().join(os(b"d\xfcr")).join("a.txt"), "in a latin-1 folder").unwrap();
        let files = LocalFiles::new(dir.path());
        assert_eq!(paths(&files), ["caf\\xE9.txt", "caf\u{fffd}.txt", "d\\xFCr/a.txt"]);
        assert_eq!(files.read("caf\\xE9.txt").unwrap(), b"latin-1 name");
        assert_eq!(files.read("caf\u{fffd}.txt").unwrap(), b"utf-8 name");
        assert_eq!(files.read("d\\xFCr/a.txt").unwrap(), b"in a latin-1 folder");
        // A UTF-8 name written like the escaped one: a named failure, not a lost file.
        std::fs::write(dir.path().join("caf\\xE9.txt"), "literally").unwrap();
        let err = files.list().unwrap_err().to_string();
        assert!(err.contains("two files are listed as `caf\\xE9.txt`"), "{err}");
    }

    #[test]
    fn a_fifo_or_a_device_is_skipped_without_being_opened() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("a.txt"), "A").unwrap();
        let fifo = std::ffi::CString::new(dir.path().join("pipe.txt").as_os_str().as_bytes()).unwrap();
        // SAFETY: a valid NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(fifo.as_ptr(), 0o600) }, 0);
        symlink("/dev/zero", dir.path().join("zero.txt")).unwrap();
        assert_eq!(paths(&LocalFiles::new(dir.path())), ["a.txt"]);
    }

    #[test]
    fn an_input_that_is_a_file_or_missing_says_so() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("input"), "not a folder").unwrap();
        let err = LocalFiles::new(dir.path().join("input")).list().unwrap_err().to_string();
        assert!(err.contains("is a file, not a folder"), "{err}");
        let err = LocalFiles::new(dir.path().join("nothing")).list().unwrap_err().to_string();
        assert!(err.contains("does not exist"), "{err}");
    }
}
