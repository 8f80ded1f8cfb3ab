//! `extract_graph_nlp`: the fast method's graph without an LLM — noun
//! phrases per text unit, co-occurrence edges, pruning (GraphRAG's
//! extract_graph_nlp + prune_graph). With `document_titles` set (the input's
//! title column) the phrases of each document's title count as mentions in
//! every one of its text units ([`add_title_mentions`]).

use std::collections::HashMap;
use std::sync::Arc;

use arrow_array::RecordBatch;
use rayon::prelude::*;
use serde::Deserialize;

use graphrag_engine::context::VerbContext;
use graphrag_engine::schema;
use graphrag_engine::settings::ExtractGraphNlpConfig;
use graphrag_engine::table::{string_column, strings};
use graphrag_engine::verb::{Verb, VerbDef, VerbInfo};
use graphrag_operations::nlp_graph::{
    add_title_mentions, build_cooccurrence_graph, resolve_sentence_initial, ExtractorType, NlpGraphConfig,
    PhraseExtractor, RegexEnglishExtractor, UnitPhrases,
};

/// Declares the verb's arguments: `Default` from their defaults, unknown
/// keys refused.
macro_rules! verb_args {
    ($(#[$m:meta])* $name:ident { $($(#[$fm:meta])* $field:ident : $ty:ty = $default:expr,)* }) => {
        $(#[$m])*
        #[derive(Debug, Deserialize)]
        #[serde(deny_unknown_fields, default)]
        pub struct $name { $($(#[$fm])* pub $field: $ty,)* }
        impl Default for $name {
            fn default() -> Self {
                $name { $($field: $default,)* }
            }
        }
    };
}

/// The defaults of settings.yaml's `extract_graph_nlp` section.
fn settings() -> ExtractGraphNlpConfig {
    ExtractGraphNlpConfig::default()
}

graphrag_operations::nlp_prune_options!(struct verb_args!(
    /// `extract_graph_nlp`'s arguments: settings.yaml's `extract_graph_nlp`
    /// and `prune_graph` sections (the fast pipeline passes them), flat; the
    /// defaults are theirs.
    ExtractGraphNlp {
        /// The noun phrase extractor.
        extractor_type: ExtractorType = settings().text_analyzer.extractor_type,
        /// Normalised PMI edge weights instead of co-occurrence counts.
        normalize_edge_weights: bool = settings().normalize_edge_weights,
        /// The sentence window of a co-occurrence (0: the whole text unit).
        cooccurrence_window: u32 = settings().cooccurrence_window,
        /// Words longer than this many characters break phrases.
        max_word_length: usize = settings().text_analyzer.max_word_length,
        /// The fewest words of a phrase.
        min_phrase_words: usize = settings().text_analyzer.min_phrase_words,
        /// The most words of a phrase.
        max_phrase_words: usize = settings().text_analyzer.max_phrase_words,
    } {
        /// The input's title column (`input.title_column`): the documents carry
        /// titles of their own, whose phrases join their units' mentions. None:
        /// titles are file names (text input), not names of what units are about.
        document_titles: Option<String> = None,
    }
));

impl ExtractGraphNlp {
    fn extractor(&self) -> Box<dyn PhraseExtractor> {
        match self.extractor_type {
            ExtractorType::RegexEnglish => Box::new(RegexEnglishExtractor {
                max_word_length: self.max_word_length,
                min_words: self.min_phrase_words,
                max_words: self.max_phrase_words,
            }),
        }
    }
}

impl VerbDef for ExtractGraphNlp {
    const INFO: VerbInfo = VerbInfo {
        name: "extract_graph_nlp",
        about: "noun-phrase graph with co-occurrence edges, no LLM (the fast method)",
        inputs: &["text_units", "documents?"],
        outputs: &["graph_entities", "graph_relationships"],
    };

    fn check(&self) -> Result<(), String> {
        if self.min_phrase_words == 0 || self.min_phrase_words > self.max_phrase_words {
            return Err("min_phrase_words must be between 1 and max_phrase_words".into());
        }
        Ok(())
    }
}

impl Verb for ExtractGraphNlp {
    fn run(&self, inputs: &[Arc<RecordBatch>], ctx: &VerbContext) -> anyhow::Result<Vec<RecordBatch>> {
        let extractor = self.extractor();
        let units = &inputs[0];
        let unit_ids = string_column(units, "text_units", "id")?.clone();
        let texts = strings(units, "text_units", "text")?;
        let bar = ctx.progress(texts.len() as u64, "chunks");
        let mut phrases: Vec<UnitPhrases> = texts
            .par_iter()
            .map(|t| {
                let p = extractor.extract(t);
                bar.inc(1);
                p
            })
            .collect();
        bar.finish_and_clear();
        if let (Some(_), Some(documents)) = (&self.document_titles, inputs.get(1)) {
            let titles: HashMap<&str, UnitPhrases> = strings(documents, "documents", "id")?
                .into_par_iter()
                .zip(strings(documents, "documents", "title")?)
                .map(|(id, title)| (id, extractor.extract(title)))
                .collect();
            let owners = strings(units, "text_units", "document_id")?;
            for (unit, owner) in phrases.iter_mut().zip(owners) {
                if let Some(title) = titles.get(owner) {
                    add_title_mentions(unit, title);
                }
            }
        }
        resolve_sentence_initial(&mut phrases);
        ctx.count("phrases", phrases.iter().map(|p| p.mentions.len() as u64).sum());
        let cfg = graphrag_operations::nlp_prune_options!(copy self => NlpGraphConfig {
            cooccurrence_window: self.cooccurrence_window,
            normalize_edge_weights: self.normalize_edge_weights,
        });
        let graph = build_cooccurrence_graph(&phrases, &cfg);
        drop(phrases);
        // The tables are built straight from the graph (the merged-graph
        // layout, no descriptions), text unit ids as indices into the input's
        // id column: at 100 MB of text an owned copy of every title and text
        // unit id would cost gigabytes.
        let chunk_rows = |chunks: &'_ [usize]| chunks.iter().map(|&c| c as u32).collect::<Vec<u32>>();
        let no_descriptions = |n: usize| std::iter::repeat_n(Vec::<&str>::new(), n);
        let entities = schema::batch(
            schema::graph_entities(),
            vec![
                schema::text_col(graph.nodes.iter().map(|n| &n.title)),
                schema::text_col(graph.nodes.iter().map(|_| "NOUN PHRASE")),
                schema::id_list_col(no_descriptions(graph.nodes.len())),
                schema::id_list_col_of(unit_ids.clone(), graph.nodes.iter().map(|n| chunk_rows(&n.chunk_ids))),
                schema::int_col(graph.nodes.iter().map(|n| i64::from(n.frequency))),
                schema::int_list_col(std::iter::repeat_n(Vec::new(), graph.nodes.len())),
            ],
        )?;
        let relationships = schema::batch(
            schema::graph_relationships(),
            vec![
                schema::text_col(graph.edges.iter().map(|e| &e.source)),
                schema::text_col(graph.edges.iter().map(|e| &e.target)),
                schema::id_list_col(no_descriptions(graph.edges.len())),
                schema::float_col(graph.edges.iter().map(|e| e.weight)),
                schema::id_list_col_of(unit_ids, graph.edges.iter().map(|e| chunk_rows(&e.chunk_ids))),
                schema::int_list_col(std::iter::repeat_n(Vec::new(), graph.edges.len())),
            ],
        )?;
        Ok(vec![entities, relationships])
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::chunk::Chunk;
    use crate::load_documents::LoadDocuments;
    use crate::testing::{run_verb, MemFiles};
    use graphrag_engine::table::string_lists;

    /// The text units (as the entity DRACULA lists them) of a graph built
    /// from two titled paragraphs, the first of which never names its title.
    fn dracula_units(args: serde_json::Value, with_documents: bool) -> Vec<String> {
        let json = br#"[{"title": "Dracula", "text": "Harker's fiancee, Mina Murray, is staying with Lucy Westenra in Whitby."},
                        {"title": "Abraham Van Helsing", "text": "Van Helsing is a character of the novel Dracula by Bram Stoker."}]"#;
        let files = MemFiles::new(&[("docs.json", json)]);
        let load: LoadDocuments =
            serde_json::from_value(serde_json::json!({"file_type": "json", "title_column": "title"})).unwrap();
        let docs = run_verb(&load, &[], &files).unwrap().0.remove(0);
        let chunk: Chunk = serde_json::from_value(serde_json::json!({})).unwrap();
        let mut chunked = run_verb(&chunk, &[Arc::new(docs)], &files).unwrap().0;
        let (documents, units) = (Arc::new(chunked.pop().unwrap()), Arc::new(chunked.pop().unwrap()));
        let unit_ids = strings(&units, "text_units", "id").unwrap();
        let mut all = serde_json::json!({"min_node_freq": 1, "min_node_degree": 0, "min_edge_weight_pct": 0.0});
        all.as_object_mut().unwrap().extend(args.as_object().unwrap().clone());
        let verb: ExtractGraphNlp = serde_json::from_value(all).unwrap();
        let inputs = if with_documents { vec![units.clone(), documents] } else { vec![units.clone()] };
        let entities = run_verb(&verb, &inputs, &files).unwrap().0.remove(0);
        let titles = strings(&entities, "entities", "title").unwrap();
        let row = titles.iter().position(|t| *t == "DRACULA").expect("DRACULA is an entity");
        let texts = strings(&units, "text_units", "text").unwrap();
        let first_word = |id: &String| texts[unit_ids.iter().position(|u| u == id).unwrap()].split(' ').next().unwrap();
        string_lists(&entities, "entities", "text_unit_ids").unwrap()[row]
            .iter()
            .map(|id| first_word(id).to_string())
            .collect()
    }

    #[test]
    fn document_titles_name_what_their_units_are_about() {
        let titled = dracula_units(serde_json::json!({"document_titles": "title"}), true);
        assert_eq!(titled, ["Harker's", "Van"]);
        // Titles not asked for (text input: file names), or a pipeline
        // written before the verb took documents: the text alone.
        assert_eq!(dracula_units(serde_json::json!({}), true), ["Van"]);
        assert_eq!(dracula_units(serde_json::json!({"document_titles": "title"}), false), ["Van"]);
    }
}
