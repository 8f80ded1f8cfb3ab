//! The files of a published index to compare byte for byte (used by the
//! workspace's tests and, through `#[path]`, project/tests).

use std::path::Path;

/// Files by name, sorted.
pub type Files = Vec<(String, Vec<u8>)>;

/// The published files of an output folder but the run's record (stats.json:
/// timings; document_status: wall-clock times).
pub fn published(dir: &Path) -> Files {
    let mut files: Files = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.is_file() && !p.file_name().unwrap().to_string_lossy().starts_with('.'))
        .map(|p| (p.file_name().unwrap().to_string_lossy().into_owned(), std::fs::read(&p).unwrap()))
        .filter(|(name, _)| name != "stats.json" && name != "document_status.parquet")
        .collect();
    files.sort();
    files
}
