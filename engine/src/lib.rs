//! graphrag-rs engine: settings, the workflow DAG (parse, validate, order,
//! run, resume), the Parquet table store, the verb interface and stats.
//!
//! The engine knows no verb by name: verbs arrive through a [`verb::Registry`].

pub mod aliases_file;
pub mod api_base;
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
pub mod yaml_lines;

pub use config_error::ConfigError;
