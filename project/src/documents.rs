//! The project's input documents as the server and the Python package add,
//! list, read and remove them: through the input [`Location`], so a document
//! lands where the next `update` lists its input (a folder, or the objects
//! under a bucket prefix), never in a local copy that no run reads.

use std::time::SystemTime;

use graphrag_engine::storage::{Location, Storage};

/// One input document.
#[derive(Debug, Clone, PartialEq)]
pub struct InputDocument {
    /// Its path under the input, `/`-separated (a plain file name for what
    /// the server and Python add).
    pub name: String,
    /// Its length in bytes.
    pub size: u64,
    /// When it was last written, as the storage reports it.
    pub modified: SystemTime,
}

/// What [`InputDocuments::add`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Added {
    /// The document was written (new, or replacing one).
    Written,
    /// A document of that name is there already (and `replace` was false):
    /// nothing written.
    NameTaken,
}

/// The input documents of a project.
#[derive(Debug, Clone)]
pub struct InputDocuments {
    input: Location,
}

impl InputDocuments {
    fn new(input: Location) -> InputDocuments {
        InputDocuments { input }
    }

    /// The input of a project's storage.
    pub fn of(storage: &Storage) -> InputDocuments {
        InputDocuments::new(storage.input.clone())
    }

    /// Where the documents are, for messages: a folder, or a bucket URL.
    pub fn describe(&self) -> String {
        self.input.describe()
    }

    /// The documents, sorted by name: every file under the input but hidden
    /// ones (a name or folder starting with `.`, such as a writer's temporary
    /// files). An input folder that does not exist yet has none.
    pub fn list(&self) -> anyhow::Result<Vec<InputDocument>> {
        Ok(self
            .input
            .list()?
            .into_iter()
            .filter(|f| !f.path.split('/').any(|part| part.starts_with('.')))
            .map(|f| InputDocument { name: f.path, size: f.size, modified: f.modified })
            .collect())
    }

    /// The bytes of the document `name`, None when there is none.
    pub fn read(&self, name: &str) -> anyhow::Result<Option<Vec<u8>>> {
        self.input.read(name)
    }

    /// Adds the document `name` whole (a reader sees all of it or nothing).
    /// An existing document of that name is replaced when `replace`, else
    /// left as it is ([`Added::NameTaken`]), decided by the storage itself,
    /// so two writers of one new name never both win.
    pub fn add(&self, name: &str, bytes: &[u8], replace: bool) -> anyhow::Result<Added> {
        if replace {
            self.input.put(name, bytes)?;
            return Ok(Added::Written);
        }
        Ok(if self.input.create(name, bytes)? { Added::Written } else { Added::NameTaken })
    }

    /// Removes the document `name`: false when there was none.
    pub fn remove(&self, name: &str) -> anyhow::Result<bool> {
        if !self.input.exists(name)? {
            return Ok(false);
        }
        self.input.remove(name)?;
        Ok(true)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn documents_are_added_listed_and_removed_in_a_folder() {
        let dir = tempfile::tempdir().unwrap();
        let docs = InputDocuments::new(Location::folder(dir.path().join("input")));
        assert!(docs.list().unwrap().is_empty(), "no folder yet: no documents");
        assert_eq!(docs.add("a.txt", b"alpha", false).unwrap(), Added::Written);
        assert_eq!(docs.add("a.txt", b"other", false).unwrap(), Added::NameTaken);
        assert_eq!(docs.read("a.txt").unwrap().as_deref(), Some(&b"alpha"[..]), "not replaced");
        assert_eq!(docs.add("a.txt", b"beta", true).unwrap(), Added::Written);
        assert_eq!(docs.read("a.txt").unwrap().as_deref(), Some(&b"beta"[..]));
        std::fs::write(dir.path().join("input/.hidden.txt"), b"x").unwrap();
        let listed: Vec<(String, u64)> = docs.list().unwrap().into_iter().map(|d| (d.name, d.size)).collect();
        assert_eq!(listed, [("a.txt".to_string(), 4)], "hidden and temporary files are not documents");
        assert!(docs.remove("a.txt").unwrap());
        assert!(!docs.remove("a.txt").unwrap());
        assert!(docs.list().unwrap().is_empty());
    }
}
