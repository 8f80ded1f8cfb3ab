//! graphrag-rs as a library: open a project, index it, update it, scaffold
//! one, estimate a run, export its vectors for GraphRAG's Python API, tune
//! its prompts to its corpus ([`prompt_tune`]). The
//! `graphrag-rs` binary is argument parsing and printing over this crate;
//! the server and the Python package call it the same way. Questions go to
//! `graphrag_query::QueryEngine`.
//!
//! ```no_run
//! use std::path::Path;
//! use graphrag_project::{index, init, IndexOptions, InitOptions, OpenOptions, Project};
//! let root = Path::new("my-project");
//! init(root, &InitOptions::default())?;
//! // ... put documents in my-project/input/ ...
//! let project = Project::open(root, &OpenOptions::default())?;
//! let report = index(project, &IndexOptions::default()).map_err(|e| anyhow::anyhow!("{e}"))?;
//! println!("{} steps in {:.1} s", report.plan.steps.len(), report.stats.total_runtime);
//! # anyhow::Ok(())
//! ```
//!
//! Runs block the calling thread. Progress goes to an `indicatif`
//! `MultiProgress` and/or a per-step callback ([`RunSettings`]); logs go to
//! `tracing` (install a subscriber to see them). A run is stopped cleanly
//! with its [`RunSettings::stop`] flag from another thread (or with [`stop`],
//! every run of the process: a signal handler): requests in flight are
//! answered and cached, no new step starts, the previous index is left as it
//! was, and the run returns a [`RunError`] whose [`RunError::interrupted`]
//! is true; after [`stop`], call [`clear_stop`] before the next run.
//! One `index` or `update` changes an index at a time (an `flock` on
//! `output/.lock`): a second one fails at once.

pub mod assets;
pub mod doc_status;
pub mod documents;
pub mod export;
pub mod graph_edits;
mod init;
mod project;
pub mod prompt_tune;
mod run;
mod shard;

pub use graphrag_engine::interrupt::StopFlag;
pub use graphrag_engine::runner::{StepEstimate, StepEvent, StepObserver};
pub use graphrag_engine::stats::{RunStatus, StepStatus};
/// Which files the project's input settings read (the server checks uploads against it).
pub use graphrag_verbs::load_documents::InputFiles;
pub use init::{init, InitOptions, InitReport};
pub use project::{log_check, ModelsCheck, OpenOptions, Project, RunLog};
pub use run::{
    index, index_dry_run, update, update_dry_run, Changes, DryRun, IndexOptions, RunError, RunReport, RunSettings,
    UpdateOptions,
};
pub use shard::{
    index_merge, index_merge_graph, run_shard, shard_of, shard_status, update_merge, update_merge_graph, update_shard,
    GraphStaged, ShardPhase, ShardReport, ShardSpec, MAX_SHARDS,
};

/// Asks every run in progress in this process to stop; see the crate docs.
pub fn stop() {
    graphrag_engine::interrupt::request();
}

/// Clears a [`stop`] request once the stopped run has returned.
pub fn clear_stop() {
    graphrag_engine::interrupt::reset();
}
