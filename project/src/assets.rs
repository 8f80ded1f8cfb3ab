//! Files shipped inside the library (and so the binary): what `init` writes
//! and the default pipelines used when a project has no workflows/ folder.
//! The prompts themselves are `graphrag_engine::prompts::BUILTIN`.

/// settings.yaml as `init` writes it (before the models asked for are put in).
pub(crate) const SETTINGS_EXAMPLE: &str = include_str!("../../settings.yaml.example");

/// aliases.yaml as `init` writes it: the format, commented out.
pub(crate) const ALIASES_EXAMPLE: &str = include_str!("../../aliases.yaml.example");

/// Writes GraphRAG's LanceDB tables (`graphrag-rs export lancedb`).
pub(crate) const EXPORT_LANCEDB_SCRIPT: &str = include_str!("../../scripts/export_lancedb.py");

/// prompts/README.md, written by `init` beside the prompts
/// (`graphrag_engine::prompts::BUILTIN`).
pub(crate) const PROMPTS_README: &str = include_str!("../../prompts/README.md");

/// (method, pipeline YAML) of the shipped pipelines.
pub(crate) const WORKFLOWS: &[(&str, &str)] = &[
    ("standard", include_str!("../../workflows/standard.yaml")),
    ("fast", include_str!("../../workflows/fast.yaml")),
    ("light", include_str!("../../workflows/light.yaml")),
];
