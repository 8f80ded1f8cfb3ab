//! The project's graph edits (`graph_edits.yaml`, see
//! `graphrag_engine::graph_edits_file`): add one, or take one back. The
//! server's LightRAG graph paths and the Python package call this; the next
//! index or update applies the edits (`finalize_graph`), and opening a
//! project checks the file first.

use std::path::{Path, PathBuf};
use std::sync::Mutex;

use graphrag_engine::graph_edits_file::{self, GraphEditsFile};
pub use graphrag_operations::graph_edits::GraphEdit;

/// One writer at a time in this process (the file is replaced whole).
static WRITING: Mutex<()> = Mutex::new(());

/// The edits file of the project at `root`.
fn path(root: &Path) -> PathBuf {
    root.join(graph_edits_file::FILE)
}

/// The project's edits, in the order they apply (none without the file).
pub(crate) fn read(root: &Path) -> anyhow::Result<GraphEditsFile> {
    let path = path(root);
    match std::fs::read_to_string(&path) {
        Ok(text) => Ok(graph_edits_file::parse(&text, Path::new(graph_edits_file::FILE))?),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(GraphEditsFile::default()),
        Err(e) => Err(anyhow::anyhow!("reading {}: {e}", path.display())),
    }
}

/// Appends an edit (written to a temporary file and renamed, so a run
/// reads the old file or the new one); returns how many edits there are.
pub fn add(root: &Path, edit: GraphEdit) -> anyhow::Result<usize> {
    let _one = WRITING.lock().unwrap_or_else(|e| e.into_inner());
    let mut file = read(root)?;
    file.edits.push(edit);
    write(root, &file)?;
    Ok(file.edits.len())
}

/// Takes back the last edit equal to `edit` (one whose update was stopped:
/// a cancelled edit must not be applied by a later update either); whether
/// there was one.
pub fn remove(root: &Path, edit: &GraphEdit) -> anyhow::Result<bool> {
    let _one = WRITING.lock().unwrap_or_else(|e| e.into_inner());
    let mut file = read(root)?;
    let Some(at) = file.edits.iter().rposition(|e| e == edit) else { return Ok(false) };
    file.edits.remove(at);
    write(root, &file)?;
    Ok(true)
}

/// Replaces the file whole, then the project's copy in its bucket (if any).
fn write(root: &Path, file: &GraphEditsFile) -> anyhow::Result<()> {
    let path = path(root);
    let temp = path.with_extension("yaml.tmp");
    std::fs::write(&temp, graph_edits_file::render(file)?)
        .and_then(|_| std::fs::rename(&temp, &path))
        .map_err(|e| anyhow::anyhow!("writing {}: {e}", path.display()))?;
    graphrag_engine::storage::root::write_back(root, &[path])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn edits_accumulate_in_order() {
        let dir = tempfile::tempdir().unwrap();
        assert!(read(dir.path()).unwrap().edits.is_empty());
        add(dir.path(), GraphEdit::DeleteEntity { name: "A".into() }).unwrap();
        let n = add(dir.path(), GraphEdit::DeleteRelationship { source: "B".into(), target: "C".into() }).unwrap();
        assert_eq!(n, 2);
        let edits = read(dir.path()).unwrap().edits;
        assert_eq!(edits[0], GraphEdit::DeleteEntity { name: "A".into() });
        // The last equal edit is taken back; the others stay in order.
        add(dir.path(), GraphEdit::DeleteEntity { name: "A".into() }).unwrap();
        assert!(remove(dir.path(), &GraphEdit::DeleteEntity { name: "A".into() }).unwrap());
        assert_eq!(read(dir.path()).unwrap().edits, edits);
        assert!(!remove(dir.path(), &GraphEdit::DeleteEntity { name: "Z".into() }).unwrap());
        std::fs::write(path(dir.path()), "edits: [oops: 1]\n").unwrap();
        assert!(read(dir.path()).unwrap_err().to_string().contains("graph_edits.yaml"));
    }
}
