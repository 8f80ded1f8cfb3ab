//! The published index as a reader opens it, in one place for the server's
//! snapshots, Python's `Index` and the query engine: which version is
//! current (a token that changes with every publication), and that version
//! held still while it is read whole.
//!
//! A folder is published by renames, so a reader holds the writer lock
//! while it reads (a publication a crashed writer left half done is
//! finished first) and is told [`Published::Busy`] while a writer holds it.
//! An object store's version is a local copy of `v-NNNNNN/` that no later
//! publication changes, so nothing is held.

use std::path::{Path, PathBuf};

use crate::staging::WriterLock;

/// What [`Location::open_published`](super::Location::open_published) finds.
pub enum Published {
    /// Nothing is published yet; the token of that state.
    Nothing(String),
    /// A writer is publishing into this folder now: look again later.
    Busy,
    /// The published version, held until dropped.
    Version(PublishedVersion),
}

/// One published version, held still until dropped.
pub struct PublishedVersion {
    pub(super) dir: PathBuf,
    pub(super) token: String,
    /// A folder's writer lock, held while the version is read.
    pub(super) _lock: Option<WriterLock>,
}

impl PublishedVersion {
    /// The folder the version's tables are read from (read them before the
    /// version is dropped: a folder may be published over after that).
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The token of this version ([`Location::published_token`](super::Location::published_token) gives the
    /// current one: they differ once a newer version is published).
    pub fn token(&self) -> &str {
        &self.token
    }
}

#[cfg(test)]
mod tests {
    use super::super::Location;
    use super::*;
    use crate::staging;

    #[test]
    fn a_folder_is_busy_while_a_writer_holds_it_and_held_while_read() {
        let dir = tempfile::tempdir().unwrap();
        let out = Location::folder(dir.path());
        let Published::Nothing(empty) = out.open_published().unwrap() else { panic!("nothing is published") };
        std::fs::write(out.working_copy().table_path("documents"), b"tables").unwrap();
        let writer = staging::lock_for_writing(dir.path()).unwrap();
        assert!(matches!(out.open_published().unwrap(), Published::Busy));
        drop(writer);
        let Published::Version(version) = out.open_published().unwrap() else { panic!("a version") };
        assert_eq!(version.dir(), dir.path());
        assert_ne!(version.token(), empty, "the token changed with the publication");
        assert!(staging::lock_for_writing(dir.path()).is_err(), "no writer while the version is read");
        drop(version);
        staging::lock_for_writing(dir.path()).unwrap();
    }
}
