//! The verbs of graphrag-rs, one file each (a serde config struct and a
//! function from input tables to output tables), and the registry that
//! hands them to the engine.

pub mod chunk;
pub mod load_documents;
#[cfg(test)]
mod testing;

use graphrag_engine::verb::Registry;

/// Every verb this build knows, and the designed ones not built yet.
pub fn registry() -> Registry {
    let mut r = Registry::default();
    r.register::<load_documents::LoadDocuments>()
        .register::<chunk::Chunk>();
    for (name, note) in [
        ("entity_extract", "LLM graph extraction"),
        ("extract_graph_nlp", "noun-phrase graph extraction"),
        ("merge_graphs", "graph merging"),
        ("summarize", "description summaries"),
        ("extract_claims", "claim extraction"),
        ("finalize_graph", "graph finalisation"),
        ("cluster_leiden", "hierarchical Leiden"),
        ("community_report", "community reports"),
        ("embed", "embeddings"),
    ] {
        r.planned(name, note);
    }
    r
}
