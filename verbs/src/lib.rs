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

#[cfg(test)]
mod tests {
    use graphrag_engine::pipeline;
    use graphrag_engine::settings::Settings;

    /// Loads a one-step pipeline whose step has `args` (YAML flow map).
    fn plan_error(verb: &str, args: &str) -> graphrag_engine::ConfigError {
        let registry = super::registry();
        let info = registry.info(verb).unwrap();
        let tables =
            |roles: &[&str], at: &str| (0..roles.len()).map(|i| format!("{at}{i}")).collect::<Vec<_>>().join(", ");
        let (inputs, outputs) = (tables(&info.inputs[..info.required_inputs()], "in"), tables(info.outputs, "out"));
        let yaml = format!("name: p\noutputs: [out0]\nsteps:\n  - id: s\n    verb: {verb}\n    inputs: [{inputs}]\n    outputs: [{outputs}]\n    args:\n      {args}\n");
        match pipeline::load(std::path::Path::new("p.yaml"), &yaml, &Settings::default(), &registry) {
            Ok(_) => panic!("{verb} {args}: accepted"),
            Err(e) => e,
        }
    }

    #[test]
    fn a_bad_enumerated_arg_is_rejected_when_the_pipeline_is_planned_with_its_key_and_line() {
        for (verb, args, key) in [
            ("community_report", "method: texts", "method"),
            ("community_report", "mode: extract", "mode"),
            ("community_report", "refresh: some", "refresh"),
            ("resolve_entities", "mode: rulez", "mode"),
            ("embed", "field: text_unit", "field"),
            ("embed", "long_text: cut", "long_text"),
            ("chunk", "strategy: words", "strategy"),
            ("extract_graph_nlp", "extractor_type: cfg", "extractor_type"),
        ] {
            let err = plan_error(verb, args);
            assert_eq!((err.path.as_str(), err.line), (format!("steps[0].args.{key}").as_str(), Some(9)), "{err}");
            let value = args.split(": ").nth(1).unwrap();
            assert!(err.message.contains(&format!("unknown variant `{value}`")), "{err}");
        }
        let err = plan_error("community_report", "mode: extractve");
        assert!(err.message.contains("did you mean `extractive`"), "{err}");
    }
}
