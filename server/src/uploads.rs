//! What the server remembers of the documents it was sent: each upload's
//! track id (LightRAG's `/documents/track_status/{track_id}`) and the
//! uploads it refused after accepting the request (a content duplicate is
//! `failed` with the reason, as LightRAG reports it, and its file is never
//! written). Kept for the server's lifetime: the index and the input folder
//! are the project's record; these are answers to the clients that sent
//! the documents.

use std::collections::HashMap;

use serde_json::{json, Value};

/// The most failed uploads remembered (the oldest are forgotten first).
const MAX_FAILED: usize = 10_000;
/// The most track ids remembered.
const MAX_TRACKS: usize = 10_000;

/// An upload that was accepted and then not written: why, and for whom.
#[derive(Clone)]
pub struct FailedUpload {
    pub id: String,
    pub file_path: String,
    pub content_length: usize,
    pub summary: String,
    pub error: String,
    pub created_at: String,
    pub track_id: String,
    pub metadata: Value,
}

impl FailedUpload {
    /// LightRAG's `DocStatusResponse`.
    pub fn json(&self) -> Value {
        json!({
            "id": self.id,
            "content_summary": self.summary,
            "content_length": self.content_length,
            "status": "failed",
            "created_at": self.created_at,
            "updated_at": self.created_at,
            "track_id": self.track_id,
            "chunks_count": 0,
            "error_msg": self.error,
            "metadata": self.metadata,
            "file_path": self.file_path,
        })
    }
}

#[derive(Default)]
pub struct Uploads {
    /// Input file name → the track id of the request that wrote it.
    track_of_file: HashMap<String, String>,
    /// In the order they were created (to forget the oldest).
    track_order: Vec<String>,
    pub failed: Vec<FailedUpload>,
}

impl Uploads {
    /// Records that `track` wrote these input files.
    pub fn track(&mut self, track: &str, files: &[String]) {
        self.track_order.push(track.to_string());
        if self.track_order.len() > MAX_TRACKS {
            let old = self.track_order.remove(0);
            self.track_of_file.retain(|_, t| *t != old);
            self.failed.retain(|f| f.track_id != old);
        }
        for f in files {
            self.track_of_file.insert(f.clone(), track.to_string());
        }
    }

    pub fn fail(&mut self, failure: FailedUpload) {
        self.failed.push(failure);
        if self.failed.len() > MAX_FAILED {
            self.failed.remove(0);
        }
    }

    pub fn track_of(&self, file: &str) -> Option<&str> {
        self.track_of_file.get(file).map(String::as_str)
    }

    pub fn known_track(&self, track: &str) -> bool {
        self.track_order.iter().any(|t| t == track)
    }

    /// Forgets every file and failure (all documents were cleared).
    pub fn clear(&mut self) {
        self.track_of_file.clear();
        self.failed.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tracks_name_their_files_and_the_oldest_are_forgotten() {
        let mut u = Uploads::default();
        u.track("t1", &["a.txt".into()]);
        u.track("t2", &["b.txt".into(), "a.txt".into()]);
        assert_eq!(u.track_of("a.txt"), Some("t2"));
        assert_eq!(u.track_of("b.txt"), Some("t2"));
        assert!(u.known_track("t1") && !u.known_track("t3"));
        for i in 0..MAX_TRACKS {
            u.track(&format!("n{i}"), &[]);
        }
        assert!(!u.known_track("t1") && !u.known_track("t2"));
        assert_eq!(u.track_of("a.txt"), None);
        u.clear();
        assert!(u.failed.is_empty());
    }
}
