//! graphrag-rs engine: settings, the workflow DAG (parse, validate, order,
//! run, resume), the Parquet table store, the verb interface and stats.
//!
//! The engine knows no verb by name: verbs arrive through a [`verb::Registry`].
//!
//! # Modules
//!
//! - `settings/`, `storage/`, `llm/`, `runner.rs` — settings, where files live, the model layer and running a
//!   plan: each opens with its own module documentation.
//! - `config_error.rs`, `yaml_lines.rs` — every settings/pipeline error is a `ConfigError` with file, line
//!   and key path; `yaml_lines` finds the line of a key path for errors found after parsing.
//! - `pipeline.rs` — parses a pipeline, resolves `${section.key}` references in args, builds each verb from
//!   its args, checks arity, missing inputs, duplicate outputs/ids, cycles; orders the steps.
//! - `prompts.rs` — minijinja templates, or a GraphRAG prompt file as is (`{name}` placeholders); `BUILTIN`
//!   (prompts/ compiled in: what `init` writes) and `project_prompt` (a project's file, else the built-in
//!   stand-in, announced once: GraphRAG projects lack the gleaning prompts GraphRAG keeps in code);
//!   `check_placeholders` names a placeholder a step does not fill before anything is sent.
//! - `embedded_fields.rs` — which text of which table each embedded field is (shared by `embed` and query).
//! - `store.rs` — Parquet encode/decode (arrow-rs, snappy) and `atomic_write`.
//! - `schema.rs`, `table.rs` — the GraphRAG table schemas and column builders; typed column access. Id
//!   lists (`text_unit_ids`, `entity_ids`, …) have two forms: in memory, indices into one copy of the ids
//!   (`id_list_col_of`, `interned_id_list_col`: Arrow dictionaries; `read_table` gives these too); in
//!   files, GraphRAG's plain `list<string>` (`file_schema`, `file_column`). `table::StringLists` reads
//!   both, so verbs see one kind of id list.
//! - `verb.rs` — `Verb`, `VerbDef` (serde args + `VerbInfo`), `Registry`, `LlmEstimate`. Input roles ending
//!   in `?` are optional and trailing, so a verb can take a new input without breaking the workflows/ files
//!   of existing projects (they list fewer inputs; the verb gets fewer tables).
//! - `api_base.rs` — a model's `api_base` parsed once (settings' check and the clients) and shown with its
//!   query values and password masked. `tls.rs` — the one rustls configuration every client (models and
//!   object stores) shares: the system's root certificates read at the first certificate to check — never
//!   for http:// servers, once per process for https://.
//! - `context.rs` — `VerbContext`: input files (`storage::files::FileSource`: a folder's walk, `LocalFiles`
//!   — links followed, non-UTF-8 names escaped —, or an object store prefix's listing), project files
//!   (`ProjectFiles`: prompt templates with their built-in stand-ins, snapshot outputs and tables), the
//!   `LlmService`, progress bars (cleared when dropped), counters (`Waves`: model calls per dependent wave,
//!   cache hits not counted), the previous index of an update (`PreviousIndex`), `item_failures` (below),
//!   and `unreadable_input`: an input file the step goes on without, listed in stats.json
//!   (`unreadable_inputs`) and kept in `state.json` so a step skipped by `--resume` reports it again.
//! - `stats.rs` — stats.json (`status` completed/failed/interrupted, `error`, `failed_items`), written for
//!   failed runs too (beside their staged outputs).
//! - `failures.rs` — `FailedItems`: a step's items whose model call failed (text units, descriptions,
//!   community reports), reported through `VerbContext::item_failures`, which fails the step beyond
//!   `failures.tolerated_fraction`; failed text units are named by document and chunk number.
//! - `interrupt.rs` — stopping a run: `StopFlag`, one run's own (`RunOptions::stop`, and through
//!   `LlmService::stop_with` its models' `CallScope::stop`), and the process-wide flag it also obeys
//!   (SIGINT and SIGTERM handler installed by the CLI; `request()` for library callers). The runner and the
//!   LLM layer check it: no new request or step, answers in flight cached, the run ends with `Interrupted`
//!   (exit 128 + the signal: 130, 143).
//! - `cancel.rs` — `CancelToken`: stops the model calls of one request (a query whose client went away),
//!   not the process; carried by `QueryRequest::cancel` into an `llm::CallScope`, under which a model call
//!   sends nothing new, drops the request in flight and fails with `LlmError::Cancelled`.
//! - `staging.rs` — `fingerprint()` (file times and sizes of the published tables: readers notice a new
//!   publication with a few `stat` calls), the writer lock (`lock_for_writing`: an `flock` on
//!   `output/.lock`, one `index` or `update` at a time) and atomic publication of a run: outputs staged in
//!   `output/.update/` (for `index --resume` first seeded with hard links of the live index, `seed()`), a
//!   commit marker listing them, then renames; `recover()` (index and update, under the lock) and
//!   `recover_if_idle()` (the query engine, dry runs) finish a publication a crash interrupted after its
//!   marker.

#![warn(missing_docs)]

pub mod aliases_file;
pub(crate) mod api_base;
pub mod cancel;
pub mod config_error;
pub mod context;
pub mod embedded_fields;
pub mod env;
pub mod failures;
pub mod graph_edits_file;
pub mod interrupt;
pub mod llm;
pub mod pipeline;
pub mod prompts;
pub mod runner;
pub mod schema;
pub mod settings;
pub mod staging;
pub mod stats;
pub mod storage;
pub mod store;
pub mod table;
#[cfg(test)]
mod test_verbs;
pub(crate) mod tls;
pub mod verb;
pub(crate) mod yaml_lines;

pub use config_error::ConfigError;
