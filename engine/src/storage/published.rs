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

use super::Location;
use crate::staging::{self, WriterLock};

/// What [`Location::open_published`] finds.
pub enum Published {
    /// Nothing is published yet; the token of that state.
    Nothing(String),
    /// A writer is publishing into this folder now: look again later.
    Busy,
    Version(PublishedVersion),
}

/// One published version, held still until dropped.
pub struct PublishedVersion {
    dir: PathBuf,
    token: String,
    _lock: Option<WriterLock>,
}

impl PublishedVersion {
    /// The folder the version's tables are read from (read them before the
    /// version is dropped: a folder may be published over after that).
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The token of this version ([`Location::published_token`] gives the
    /// current one: they differ once a newer version is published).
    pub fn token(&self) -> &str {
        &self.token
    }
}

impl Location {
    /// The current published version, held still to be read whole (see the
    /// module docs): for a folder without waiting on a writer.
    pub fn open_published(&self) -> anyhow::Result<Published> {
        if self.remote.is_some() {
            return Ok(match self.published()? {
                Some((dir, token)) => Published::Version(PublishedVersion { dir, token, _lock: None }),
                None => Published::Nothing(String::new()),
            });
        }
        let Some(lock) = staging::try_lock_for_writing(&self.dir)? else { return Ok(Published::Busy) };
        staging::recover(&self.dir)?;
        let token = staging::fingerprint(&self.dir);
        if !self.working_copy().has_index() {
            return Ok(Published::Nothing(token));
        }
        Ok(Published::Version(PublishedVersion { dir: self.dir.clone(), token, _lock: Some(lock) }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
