//! The verbs of graphrag-rs, one file each (a serde config struct and a
//! function from input tables to output tables), and the registry that
//! hands them to the engine.

pub mod chunk;
pub mod cluster_leiden;
pub mod community_report;
pub mod embed;
pub mod entity_extract;
pub mod extract_claims;
pub mod extract_graph_nlp;
pub mod finalize_graph;
mod graph_tables;
pub mod lexical_index;
mod llm_steps;
pub mod load_documents;
pub mod merge_graphs;
pub mod resolve_entities;
pub mod summarize;
#[cfg(test)]
mod testing;

use graphrag_engine::verb::Registry;

/// Every verb this build knows.
pub fn registry() -> Registry {
    let mut r = Registry::default();
    r.register::<load_documents::LoadDocuments>()
        .register::<chunk::Chunk>()
        .register::<entity_extract::EntityExtract>()
        .register::<extract_graph_nlp::ExtractGraphNlp>()
        .register::<merge_graphs::MergeGraphs>()
        .register::<resolve_entities::ResolveEntities>()
        .register::<summarize::Summarize>()
        .register::<extract_claims::ExtractClaims>()
        .register::<finalize_graph::FinalizeGraph>()
        .register::<cluster_leiden::ClusterLeiden>()
        .register::<community_report::CommunityReport>()
        .register::<embed::Embed>()
        .register::<lexical_index::LexicalIndex>();
    r
}
