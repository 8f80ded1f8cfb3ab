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
//!
//! # Modules
//!
//! graphrag-rs as a library (documented in `lib.rs`): `project.rs` (`Project::open(root, &OpenOptions)`:
//! settings + models + pipeline for a method, `auto` resolved; aliases.yaml checked before anything is
//! spent; the start-up check of the endpoints the pipeline names), `run.rs` (`index(Project,
//! &IndexOptions)` and `update(root, &UpdateOptions)` → `RunReport` {plan, stats, documents, `Changes`
//! added / changed / removed / unchanged, LanceDB tables} or `RunError` {error, note: failed items and what
//! to rerun, `interrupted()`}; both take the writer lock, stage and publish through `engine::staging` and
//! keep document_status.parquet current (`doc_status.rs`: the document status table and `run_tracked()`,
//! which runs a plan keeping it current (processing once chunked, processed once published, failed with the
//! error — the names of a document's failed chunks —, pending again after Ctrl-C; an input file that could
//! not be read is a failed row, keyed by a hash of its path, while it stays unreadable); an unreadable
//! table is rebuilt from the index.; on an object store the table is marked before the upload, so each
//! published version says `processed` of its documents); `documents.rs` (`InputDocuments`: the input
//! documents the server and the Python package add, list and remove, through the input `Location`, so a
//! bucket's input gets them); `index_dry_run` / `update_dry_run` → `DryRun` with the plan, the steps a
//! resume would skip and the LLM estimate), `init.rs` (`init(root, &InitOptions)`), `shard.rs` (sharded
//! indexing, issue #35: `run_shard` / `update_shard` run one shard of a `ShardPhase` — `index_shard`
//! (`Units`), `embed_shard` (`Embed`) or `model_shard` (`Model`); `index_shard` runs one document shard — the load step's output
//! filtered by `shard_of(document id)`, chunking, and the per-text-unit steps (`entity_extract`,
//! `extract_claims`, `embed` of `text_unit_text`) as a plan of their own in `.shards/<hash of those
//! steps>/K-of-N/` of the output `Location` (run in its `WorkingCopy`, then pushed), resumable, with the
//! per-unit outputs published there as fragments and a `done.json` pushed last (and removed first on a
//! rerun); `index_merge` / `update_merge` run `index` / `update` with those steps' verbs replaced by
//! `FromFragments`, which puts the fragments' rows in the order of the text units the step reads and checks
//! that the shards cover them exactly (the finished shards' fragments are downloaded first unless the local
//! `done.json` is the bucket's, byte for byte), and for the text units' `embed` builds the field's HNSW
//! index over every shard's vectors (the shards' embed steps run with `ann_threshold` 0); claims run again
//! from the cache because their ids count claims corpus-wide; everything else is the merge's;
//! `shard/embed.rs`: the second map — `index_merge_graph` / `update_merge_graph` run the merge's plan
//! without the global tables' `embed` steps into the staging folder and write `graph.json` (the staged
//! input tables' hashes, pushed after a copy of those tables in `.shards/<key>/graph/`), `embed_shard` runs
//! those `embed` steps over the copies' rows whose id hashes to K (a `StagedRows` step per table) in
//! `.shards/<key>/embed/K-of-M/`, the vectors going to the model cache keyed by text; `index_merge` then
//! resumes from the staged steps, and clears `graph.json`, the staged copies and the embed folders once
//! published; `shard/model.rs`: the third map (issue #46) — the graph phase stops before each step whose
//! verb `shards_model_calls` (resolution questions, summaries, reports), copies its input tables to
//! `.shards/<key>/model/<step>-<inputs hash>/inputs/` and writes `model.json` (a `ModelStage`: step,
//! wave, tables); `model_shard` runs that step over them with an `ItemShard` in the `VerbContext`, so
//! the verb asks only its items, into the cache; the next graph phase runs the step from the cache and
//! stops before the next stage, or stages the next wave of reports (the shards count `model_waves`)),
//! `prompt_tune/` (`graphrag-rs prompt-tune`, GraphRAG's auto templating: `mod.rs` options,
//! `generate_prompts` / `dry_run` / `write_prompts` and the check that the written prompts keep their
//! steps' placeholders; `select.rs` runs the pipeline's `chunk` step and the steps before it in memory,
//! then selects; `generate.rs` the questions to the chat model and each answer's check; `templates.rs` +
//! `templates/*.txt` the questions' and the written prompts' texts, corpus text and answers escaped for
//! minijinja; docs/prompt-tune.md), `export.rs` (`export lancedb`, and after `index` / `update` when
//! `vector_store.type: lancedb`: runs scripts/export_lancedb.py with Python's lancedb package, piped to the
//! interpreter's stdin, to write GraphRAG 3.3's LanceDB tables for its Python API), `assets.rs` (settings
//! example, prompts README, pipelines — standard, fast, light —, the aliases.yaml example and the LanceDB
//! export script embedded). A library caller stops a run with its `RunSettings::stop` flag (answers in
//! flight are cached, no new step starts, the previous index stays; other runs of the process go on), or
//! every run with `graphrag_project::stop()` (the engine's process-wide flag, as Ctrl-C) and then
//! `clear_stop()` before the next run; step progress comes through `RunSettings::on_step`
//! (`engine::runner::StepEvent`).

#![warn(missing_docs)]

mod assets;
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
pub use graphrag_engine::stats::StepStatus;
/// Which files the project's input settings read (the server checks uploads against it).
pub use graphrag_verbs::load_documents::InputFiles;
pub use init::{init, InitOptions, InitReport};
pub use project::{log_check, OpenOptions, Project, ProjectError, RunLog};
pub use run::{
    index, index_dry_run, update, update_dry_run, Changes, DryRun, IndexOptions, RunError, RunReport, RunSettings,
    UpdateOptions,
};
pub use shard::{
    index_merge, index_merge_graph, run_shard, shard_status, update_merge, update_merge_graph, update_shard,
    GraphStaged, ModelStage, ShardPhase, ShardReport, ShardSpec, MAX_SHARDS,
};

/// Asks every run in progress in this process to stop; see the crate docs.
pub fn stop() {
    graphrag_engine::interrupt::request();
}

/// Clears a [`stop`] request once the stopped run has returned.
pub fn clear_stop() {
    graphrag_engine::interrupt::reset();
}
