//! Test support: in-memory input files and running a verb outside the engine.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::SystemTime;

use arrow_array::RecordBatch;
use graphrag_engine::context::{StepCounters, VerbContext};
use graphrag_engine::storage::files::{FileEntry, FileSource};
use graphrag_engine::verb::Verb;

pub struct MemFiles(Vec<(String, Vec<u8>)>);

impl MemFiles {
    pub fn new(files: &[(&str, &[u8])]) -> Self {
        let mut v: Vec<_> = files.iter().map(|(p, b)| (p.to_string(), b.to_vec())).collect();
        v.sort();
        MemFiles(v)
    }
}

impl FileSource for MemFiles {
    fn list(&self) -> anyhow::Result<Vec<FileEntry>> {
        Ok(self
            .0
            .iter()
            .map(|(p, b)| FileEntry { path: p.clone(), size: b.len() as u64, modified: SystemTime::UNIX_EPOCH })
            .collect())
    }

    fn read(&self, path: &str) -> anyhow::Result<Vec<u8>> {
        self.0.iter().find(|(p, _)| p == path).map(|(_, b)| b.clone()).ok_or_else(|| anyhow::anyhow!("no file {path}"))
    }

    fn describe(&self) -> String {
        "memory".into()
    }
}

/// Runs `verb` and returns its outputs and the number of warnings it counted.
pub fn run_verb(
    verb: &dyn Verb,
    inputs: &[Arc<RecordBatch>],
    files: &dyn FileSource,
) -> anyhow::Result<(Vec<RecordBatch>, u64)> {
    let counters = StepCounters::default();
    let ctx = VerbContext::new("test", files, &counters);
    let out = verb.run(inputs, &ctx)?;
    Ok((out, counters.warnings.load(Ordering::Relaxed)))
}

/// A file of tests/fixtures/inputs/ (small PDF, DOCX and Parquet inputs).
pub fn input_fixture(name: &str) -> Vec<u8> {
    std::fs::read(format!("{}/../tests/fixtures/inputs/{name}", env!("CARGO_MANIFEST_DIR"))).unwrap()
}

/// Runs `verb` and returns its outputs (or error) with every counter it set.
pub fn run_verb_counters(
    verb: &dyn Verb,
    inputs: &[Arc<RecordBatch>],
    files: &dyn FileSource,
) -> (anyhow::Result<Vec<RecordBatch>>, StepCounters) {
    let counters = StepCounters::default();
    let out = verb.run(inputs, &VerbContext::new("test", files, &counters));
    (out, counters)
}

/// Project files in memory: prompts to read, outputs written.
#[derive(Default)]
pub struct MemProject {
    pub written: std::sync::Mutex<Vec<(String, Vec<u8>)>>,
}

impl graphrag_engine::context::ProjectFiles for MemProject {
    fn read_text(&self, rel_path: &str) -> anyhow::Result<Option<String>> {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("..").join(rel_path);
        Ok(Some(std::fs::read_to_string(path)?))
    }

    fn write_output(&self, name: &str, bytes: &[u8]) -> anyhow::Result<()> {
        self.written.lock().unwrap().push((name.to_string(), bytes.to_vec()));
        Ok(())
    }

    fn write_table(&self, name: &str, table: &arrow_array::RecordBatch) -> anyhow::Result<()> {
        let dir = tempfile::tempdir()?;
        let path = dir.path().join("t.parquet");
        graphrag_engine::store::write_table(&path, table)?;
        self.write_output(&format!("{name}.parquet"), &std::fs::read(path)?)
    }
}
