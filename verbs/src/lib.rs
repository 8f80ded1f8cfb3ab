//! The verbs of graphrag-rs, one file each (a serde config struct and a
//! function from input tables to output tables), and the registry that
//! hands them to the engine.
//!
//! # Modules
//!
//! One file per verb (`load_documents/` is a folder: the verb, and `formats.rs` for PDF via pdf-extract,
//! DOCX via zip + roxmltree, Parquet rows; a parser panic on a malformed PDF becomes that file's error);
//! `lib.rs` holds the registry (one line per verb): `load_documents`, `chunk`, `entity_extract`,
//! `extract_graph_nlp`, `merge_graphs`, `resolve_entities`, `summarize`, `extract_claims`,
//! `finalize_graph`, `cluster_leiden`, `community_report`, `embed`, `lexical_index`. Shared helpers:
//! `graph_tables.rs` (intermediate graph tables), `llm_steps.rs` (concurrent calls from a sync verb, the
//! extraction answer check, the gleaning conversation, fingerprints, dry-run estimates). An LLM verb never
//! drops an item whose call failed: it reports it (`VerbContext::item_failures`); `summarize` also cuts
//! every stored description to `max_length` words. `merge_graphs` records which text units gave each
//! description (`description_sources`), so that `summarize` can tell, in an update, the descriptions new
//! text units brought: an element whose text units only grew is summarised from its previous description
//! plus those (one call), one whose text units are unchanged keeps its description, one that lost a text
//! unit is summarised from all its descriptions. `community_report` keeps, in an update, the previous
//! report of every community that did not change materially (`update.community_reports`; the policy itself
//! is `operations::community_report::needs_new_report`).

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

    #[test]
    fn the_model_a_step_calls_is_none_where_its_args_rule_calling_one_out() {
        let registry = super::registry();
        for (verb, args, model) in [
            ("entity_extract", serde_json::json!({"model_id": "chat"}), Some("chat")),
            ("summarize", serde_json::json!({"model_id": "chat"}), Some("chat")),
            ("embed", serde_json::json!({"field": "text_unit_text", "model_id": "vectors"}), Some("vectors")),
            ("extract_claims", serde_json::json!({"enabled": true, "model_id": "chat"}), Some("chat")),
            ("extract_claims", serde_json::json!({"enabled": false, "model_id": "chat"}), None),
            ("community_report", serde_json::json!({"mode": "auto", "model_id": "chat"}), Some("chat")),
            ("community_report", serde_json::json!({"mode": "llm", "model_id": "chat"}), Some("chat")),
            ("community_report", serde_json::json!({"mode": "extractive", "model_id": "chat"}), None),
            ("resolve_entities", serde_json::json!({"enabled": true, "mode": "llm", "model_id": "chat"}), Some("chat")),
            (
                "resolve_entities",
                serde_json::json!({"enabled": true, "mode": "auto", "model_id": "chat"}),
                Some("chat"),
            ),
            ("resolve_entities", serde_json::json!({"enabled": true, "mode": "auto", "model_in_auto": false}), None),
            ("resolve_entities", serde_json::json!({"enabled": true, "mode": "rules"}), None),
            ("resolve_entities", serde_json::json!({"enabled": false, "mode": "llm"}), None),
            ("chunk", serde_json::json!({}), None),
        ] {
            let step = registry.build(verb, args.clone()).unwrap().unwrap();
            assert_eq!(step.model_to_call(), model, "{verb} {args}");
        }
    }
}
