//! Files shipped inside the binary: what `init` writes and the default
//! pipelines used when a project has no workflows/ folder.

pub const SETTINGS_EXAMPLE: &str = include_str!("../settings.yaml.example");

/// Writes GraphRAG's LanceDB tables (`graphrag-rs export lancedb`).
pub const EXPORT_LANCEDB_SCRIPT: &str = include_str!("../scripts/export_lancedb.py");

macro_rules! prompt {
    ($name:literal) => {
        ($name, include_str!(concat!("../prompts/", $name)))
    };
}

/// (file name, template) of every prompt under prompts/.
pub const PROMPTS: &[(&str, &str)] = &[
    prompt!("basic_search_system_prompt.txt"),
    prompt!("community_report_graph.txt"),
    prompt!("community_report_text.txt"),
    prompt!("drift_primer.txt"),
    prompt!("drift_query_expansion.txt"),
    prompt!("drift_reduce_prompt.txt"),
    prompt!("drift_search_system_prompt.txt"),
    prompt!("extract_claims.txt"),
    prompt!("extract_claims_continue.txt"),
    prompt!("extract_claims_loop.txt"),
    prompt!("extract_graph.txt"),
    prompt!("extract_graph_continue.txt"),
    prompt!("extract_graph_loop.txt"),
    prompt!("global_search_knowledge_system_prompt.txt"),
    prompt!("global_search_map_system_prompt.txt"),
    prompt!("global_search_reduce_system_prompt.txt"),
    prompt!("keywords_extraction.txt"),
    prompt!("local_search_system_prompt.txt"),
    prompt!("mix_search_system_prompt.txt"),
    prompt!("question_gen_system_prompt.txt"),
    prompt!("rate_community.txt"),
    prompt!("summarize_descriptions.txt"),
    ("README.md", include_str!("../prompts/README.md")),
];

/// (method, pipeline YAML) of the shipped pipelines.
pub const WORKFLOWS: &[(&str, &str)] =
    &[("standard", include_str!("../workflows/standard.yaml")), ("fast", include_str!("../workflows/fast.yaml"))];
