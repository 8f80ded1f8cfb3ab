//! Publishing a run all at once. `index` and `update` run their pipeline
//! into `output/.update/`, leaving the live index untouched (and queryable)
//! until every step succeeded; then `commit` writes a marker listing the
//! staged files and moves them into the output folder. A crash after the
//! marker is finished by `recover` (every command that opens the index
//! calls it); a crash, an error, a full disk or Ctrl-C before it leaves the
//! live index as it was, and the staged steps for the next run to resume
//! from. One `index` or `update` changes an index at a time (`lock_for_writing`).

use std::collections::BTreeSet;
use std::fs::{File, OpenOptions};
use std::io;
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};
use std::time::SystemTime;

use anyhow::{anyhow, Context};

use crate::store;

const MARKER: &str = "COMMIT";
const LOCK: &str = ".lock";

/// The right to change an index, held by one `index` or `update` at a time:
/// an `flock` on `output/.lock`, which the system releases however its
/// holder ends (SIGKILL included), so a crash leaves no stale lock.
pub(crate) struct WriterLock {
    _file: File,
}

/// The file times and sizes of the published tables: changes with every
/// publication, and costs a few `stat` calls (a reader compares it before
/// each question to notice a newer index).
pub(crate) fn fingerprint(output_dir: &Path) -> String {
    let mut parts = Vec::new();
    for name in ["documents.parquet", "entities.parquet", "relationships.parquet", "text_units.parquet", "stats.json"] {
        let meta = std::fs::metadata(output_dir.join(name)).ok();
        let modified = meta
            .as_ref()
            .and_then(|m| m.modified().ok())
            .and_then(|t| t.duration_since(SystemTime::UNIX_EPOCH).ok())
            .map_or(0, |d| d.as_nanos());
        parts.push(format!("{name}:{modified}:{}", meta.map_or(0, |m| m.len())));
    }
    parts.join(",")
}

/// Takes the writer lock of `output_dir` (creating the folder), or fails at
/// once, naming the folder, while another process holds it.
pub(crate) fn lock_for_writing(output_dir: &Path) -> anyhow::Result<WriterLock> {
    let file = try_lock(output_dir)?.ok_or_else(|| {
        anyhow!(
            "another `graphrag-rs index` or `update` is changing {}: wait until it ends (its lock goes with its process)",
            output_dir.display()
        )
    })?;
    Ok(WriterLock { _file: file })
}

/// The writer lock of `output_dir` (creating the folder), or None while
/// another process holds it.
pub(crate) fn try_lock_for_writing(output_dir: &Path) -> anyhow::Result<Option<WriterLock>> {
    Ok(try_lock(output_dir)?.map(|file| WriterLock { _file: file }))
}

/// `recover` for readers and dry runs: only while no writer is at work (a
/// writer that is publishing finishes its own publication).
pub fn recover_if_idle(output_dir: &Path) -> anyhow::Result<bool> {
    if !dir(output_dir).join(MARKER).exists() {
        return Ok(false);
    }
    match try_lock(output_dir)? {
        Some(_lock) => recover(output_dir),
        None => Ok(false),
    }
}

/// The locked lock file, or None when another open lock file holds it.
fn try_lock(output_dir: &Path) -> anyhow::Result<Option<File>> {
    std::fs::create_dir_all(output_dir).with_context(|| format!("creating {}", output_dir.display()))?;
    let path = output_dir.join(LOCK);
    let file = OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&path)
        .with_context(|| format!("opening {}", path.display()))?;
    // SAFETY: flock on a descriptor owned by `file`, which outlives the lock.
    if unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } == 0 {
        return Ok(Some(file));
    }
    match io::Error::last_os_error() {
        e if e.raw_os_error() == Some(libc::EWOULDBLOCK) => Ok(None),
        e => Err(e).with_context(|| format!("locking {}", path.display())),
    }
}

/// Where a run stages its outputs.
pub fn dir(output_dir: &Path) -> PathBuf {
    output_dir.join(".update")
}

/// The document status table (`graphrag_project::doc_status`), which a run
/// writes in the live folder as it goes.
pub const DOCUMENT_STATUS_FILE: &str = "document_status.parquet";

/// Files of the live index a run never stages (the status table is kept
/// current in place; the lock is the lock).
const LIVE_ONLY: [&str; 2] = [LOCK, DOCUMENT_STATUS_FILE];

/// Starts a staging folder from the live index (hard links, or copies where
/// links fail), so that `index --resume` can skip the steps whose outputs are
/// unchanged. Every write replaces a file by renaming, so a staged link
/// never changes the live file it shares.
pub(crate) fn seed(output_dir: &Path) -> anyhow::Result<()> {
    let staging = dir(output_dir);
    for rel in list_files(output_dir)? {
        if rel.starts_with(".update/") || LIVE_ONLY.contains(&rel.as_str()) || store::is_temp_file(&rel) {
            continue;
        }
        let (from, to) = (output_dir.join(&rel), staging.join(&rel));
        if let Some(parent) = to.parent() {
            std::fs::create_dir_all(parent).with_context(|| format!("creating {}", parent.display()))?;
        }
        if std::fs::hard_link(&from, &to).is_err() {
            std::fs::copy(&from, &to).with_context(|| format!("copying {} to {}", from.display(), to.display()))?;
        }
    }
    Ok(())
}

/// Publishes everything staged. Top-level files replace their namesakes;
/// a staged subfolder (`vectors/`, `.steps/`) replaces the live one, files
/// the update did not produce included.
pub(crate) fn commit(output_dir: &Path) -> anyhow::Result<()> {
    let staging = dir(output_dir);
    store::remove_stale_temp_files(&staging);
    let files = list_files(&staging)?;
    store::atomic_write(&staging.join(MARKER), &serde_json::to_vec(&files)?)
        .with_context(|| format!("writing the commit marker in {}", staging.display()))?;
    finish(output_dir, &files)
}

/// Finishes a commit interrupted after its marker was written; `true` if
/// there was one.
pub(crate) fn recover(output_dir: &Path) -> anyhow::Result<bool> {
    let marker = dir(output_dir).join(MARKER);
    let Ok(bytes) = std::fs::read(&marker) else {
        return Ok(false);
    };
    let files: Vec<String> =
        serde_json::from_slice(&bytes).with_context(|| format!("reading the commit marker {}", marker.display()))?;
    tracing::info!("finishing the publication of an interrupted update");
    finish(output_dir, &files)?;
    Ok(true)
}

/// Drops a staged update that was never committed (a full `index`
/// supersedes it).
pub(crate) fn discard(output_dir: &Path) -> anyhow::Result<()> {
    let staging = dir(output_dir);
    if staging.exists() {
        std::fs::remove_dir_all(&staging).with_context(|| format!("removing {}", staging.display()))?;
    }
    Ok(())
}

/// The staging folder of a run that writes a whole index: an interrupted
/// publication is finished first; then the folder starts empty, or, when
/// resuming, from the live index if it is missing.
pub(crate) fn prepare(output_dir: &Path, resume: bool) -> anyhow::Result<PathBuf> {
    recover(output_dir)?;
    let staging = dir(output_dir);
    if !resume {
        discard(output_dir)?;
    } else if !staging.exists() {
        seed(output_dir)?;
    }
    Ok(staging)
}

/// Moves the listed files in (those already moved are skipped, so a rerun
/// after a crash completes the job), prunes the replaced subfolders, then
/// removes the staging folder, marker last.
fn finish(output_dir: &Path, files: &[String]) -> anyhow::Result<()> {
    let staging = dir(output_dir);
    for rel in files {
        let (from, to) = (staging.join(rel), output_dir.join(rel));
        if !from.exists() {
            continue;
        }
        if let Some(parent) = to.parent() {
            std::fs::create_dir_all(parent).with_context(|| format!("creating {}", parent.display()))?;
        }
        std::fs::rename(&from, &to).with_context(|| format!("moving {} to {}", from.display(), to.display()))?;
    }
    let listed: BTreeSet<&str> = files.iter().map(String::as_str).collect();
    let subfolders: BTreeSet<&str> = files.iter().filter_map(|f| f.split_once('/').map(|(d, _)| d)).collect();
    for sub in subfolders {
        for rel in list_files(&output_dir.join(sub))? {
            let rel = format!("{sub}/{rel}");
            if !listed.contains(rel.as_str()) {
                let path = output_dir.join(&rel);
                std::fs::remove_file(&path).with_context(|| format!("removing stale {}", path.display()))?;
            }
        }
    }
    for entry in std::fs::read_dir(&staging).with_context(|| format!("listing {}", staging.display()))? {
        let path = entry?.path();
        if path.is_dir() {
            std::fs::remove_dir_all(&path).with_context(|| format!("removing {}", path.display()))?;
        } else if path.file_name().is_some_and(|n| n != MARKER) {
            std::fs::remove_file(&path).with_context(|| format!("removing {}", path.display()))?;
        }
    }
    std::fs::remove_dir_all(&staging).with_context(|| format!("removing {}", staging.display()))
}

/// Files under `dir`, relative and `/`-separated, sorted; none if absent.
fn list_files(dir: &Path) -> anyhow::Result<Vec<String>> {
    fn walk(root: &Path, dir: &Path, out: &mut Vec<String>) -> anyhow::Result<()> {
        for entry in std::fs::read_dir(dir).with_context(|| format!("listing {}", dir.display()))? {
            let path = entry?.path();
            if path.is_dir() {
                walk(root, &path, out)?;
            } else {
                let rel = path.strip_prefix(root).expect("under root");
                let parts: Vec<String> =
                    rel.components().map(|c| c.as_os_str().to_string_lossy().into_owned()).collect();
                out.push(parts.join("/"));
            }
        }
        Ok(())
    }
    let mut out = Vec::new();
    if dir.is_dir() {
        walk(dir, dir, &mut out)?;
    }
    out.retain(|f| f != MARKER);
    out.sort();
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(path: &Path, text: &str) {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    }

    fn read(path: &Path) -> String {
        std::fs::read_to_string(path).unwrap()
    }

    /// A live index and a staged update of it.
    fn live_and_staged() -> tempfile::TempDir {
        let tmp = tempfile::tempdir().unwrap();
        let out = tmp.path();
        write(&out.join("entities.parquet"), "old entities");
        write(&out.join("notes.txt"), "the user's file");
        write(&out.join("vectors/entity_description.hnsw"), "old index");
        write(&out.join("vectors/text_unit_text.hnsw"), "no longer produced");
        write(&out.join(".steps/state.json"), "old state");
        let staging = dir(out);
        write(&staging.join("entities.parquet"), "new entities");
        write(&staging.join("vectors/entity_description.hnsw"), "new index");
        write(&staging.join(".steps/state.json"), "new state");
        tmp
    }

    fn assert_published(out: &Path) {
        assert_eq!(read(&out.join("entities.parquet")), "new entities");
        assert_eq!(read(&out.join("vectors/entity_description.hnsw")), "new index");
        assert_eq!(read(&out.join(".steps/state.json")), "new state");
        assert!(!out.join("vectors/text_unit_text.hnsw").exists(), "a replaced subfolder keeps no stale file");
        assert_eq!(read(&out.join("notes.txt")), "the user's file", "top-level files not staged stay");
        assert!(!dir(out).exists());
    }

    /// The commit marker of everything staged, as a crashed commit leaves it.
    fn write_marker(out: &Path) -> Vec<String> {
        let files = list_files(&dir(out)).unwrap();
        store::atomic_write(&dir(out).join(MARKER), &serde_json::to_vec(&files).unwrap()).unwrap();
        files
    }

    #[test]
    fn one_writer_at_a_time_and_readers_leave_its_publication_alone() {
        let tmp = live_and_staged();
        let out = tmp.path();
        // A writer that has written its commit marker and not yet moved the files.
        write_marker(out);
        let held = lock_for_writing(out).unwrap();
        let refused = lock_for_writing(out).err().expect("a second writer is refused").to_string();
        assert!(refused.contains("another `graphrag-rs index` or `update` is changing"), "{refused}");
        assert!(!recover_if_idle(out).unwrap(), "a reader does not publish under a writer");
        assert_eq!(read(&out.join("entities.parquet")), "old entities");
        drop(held);
        assert!(recover_if_idle(out).unwrap());
        assert_published(out);
        assert!(lock_for_writing(out).is_ok(), "the lock went with its holder");
    }

    #[test]
    fn commit_publishes_the_staged_files() {
        let d = live_and_staged();
        commit(d.path()).unwrap();
        assert_published(d.path());
        assert!(!recover(d.path()).unwrap(), "nothing left to recover");
    }

    #[test]
    fn a_commit_interrupted_after_its_marker_is_finished_by_recover() {
        let d = live_and_staged();
        let out = d.path();
        let files = write_marker(out);
        // The crash came after the first file was moved.
        std::fs::rename(dir(out).join(&files[0]), out.join(&files[0])).unwrap();
        assert!(recover(out).unwrap());
        assert_published(out);
    }

    #[test]
    fn an_update_that_never_committed_leaves_the_live_index_alone() {
        let d = live_and_staged();
        let out = d.path();
        assert!(!recover(out).unwrap());
        assert_eq!(read(&out.join("entities.parquet")), "old entities");
        assert_eq!(read(&out.join("vectors/text_unit_text.hnsw")), "no longer produced");
        assert!(dir(out).join("entities.parquet").exists(), "kept for the next update to resume from");
        discard(out).unwrap();
        assert!(!dir(out).exists());
        assert_eq!(read(&out.join("entities.parquet")), "old entities");
    }
}
