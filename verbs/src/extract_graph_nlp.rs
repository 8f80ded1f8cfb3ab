//! `extract_graph_nlp`: the fast method's graph without an LLM — noun
//! phrases per text unit, co-occurrence edges, pruning (GraphRAG's
//! extract_graph_nlp + prune_graph).

use std::sync::Arc;

use arrow_array::RecordBatch;
use rayon::prelude::*;
use serde::Deserialize;

use graphrag_engine::context::VerbContext;
use graphrag_engine::schema;
use graphrag_engine::settings::{ExtractGraphNlpConfig, PruneGraphConfig};
use graphrag_engine::table::{string_column, strings};
use graphrag_engine::verb::{Verb, VerbDef, VerbInfo};
use graphrag_operations::nlp_graph::{
    build_cooccurrence_graph, resolve_sentence_initial, NlpGraphConfig, PhraseExtractor, RegexEnglishExtractor,
    UnitPhrases,
};

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ExtractGraphNlp {
    pub extractor_type: String,
    pub normalize_edge_weights: bool,
    pub cooccurrence_window: u32,
    pub max_word_length: usize,
    pub min_phrase_words: usize,
    pub max_phrase_words: usize,
    pub min_node_freq: u32,
    pub max_node_freq_std: Option<f64>,
    pub min_node_degree: u32,
    pub max_node_degree_std: Option<f64>,
    pub min_edge_weight_pct: f64,
    pub remove_ego_nodes: bool,
    pub lcc_only: bool,
}

impl Default for ExtractGraphNlp {
    fn default() -> Self {
        let (s, p) = (ExtractGraphNlpConfig::default(), PruneGraphConfig::default());
        let t = s.text_analyzer;
        ExtractGraphNlp {
            extractor_type: t.extractor_type,
            normalize_edge_weights: s.normalize_edge_weights,
            cooccurrence_window: s.cooccurrence_window,
            max_word_length: t.max_word_length,
            min_phrase_words: t.min_phrase_words,
            max_phrase_words: t.max_phrase_words,
            min_node_freq: p.min_node_freq,
            max_node_freq_std: p.max_node_freq_std,
            min_node_degree: p.min_node_degree,
            max_node_degree_std: p.max_node_degree_std,
            min_edge_weight_pct: p.min_edge_weight_pct,
            remove_ego_nodes: p.remove_ego_nodes,
            lcc_only: p.lcc_only,
        }
    }
}

/// The phrase extractors by name (`extractor_type`).
const EXTRACTORS: [&str; 1] = ["regex_english"];

impl ExtractGraphNlp {
    fn extractor(&self) -> Result<Box<dyn PhraseExtractor>, String> {
        match self.extractor_type.as_str() {
            "regex_english" => Ok(Box::new(RegexEnglishExtractor {
                max_word_length: self.max_word_length,
                min_words: self.min_phrase_words,
                max_words: self.max_phrase_words,
            })),
            other => Err(format!(
                "extractor_type `{other}` is not one of {}{}",
                EXTRACTORS.join(", "),
                graphrag_operations::suggest::did_you_mean(other, EXTRACTORS)
            )),
        }
    }
}

impl VerbDef for ExtractGraphNlp {
    const INFO: VerbInfo = VerbInfo {
        name: "extract_graph_nlp",
        about: "noun-phrase graph with co-occurrence edges, no LLM (the fast method)",
        inputs: &["text_units"],
        outputs: &["graph_entities", "graph_relationships"],
    };

    fn check(&self) -> Result<(), String> {
        if self.min_phrase_words == 0 || self.min_phrase_words > self.max_phrase_words {
            return Err("min_phrase_words must be between 1 and max_phrase_words".into());
        }
        self.extractor().map(|_| ())
    }
}

impl Verb for ExtractGraphNlp {
    fn run(&self, inputs: &[Arc<RecordBatch>], ctx: &VerbContext) -> anyhow::Result<Vec<RecordBatch>> {
        let extractor = self.extractor().map_err(anyhow::Error::msg)?;
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
        resolve_sentence_initial(&mut phrases);
        ctx.count("phrases", phrases.iter().map(|p| p.mentions.len() as u64).sum());
        let cfg = NlpGraphConfig {
            cooccurrence_window: self.cooccurrence_window,
            normalize_edge_weights: self.normalize_edge_weights,
            min_node_freq: self.min_node_freq,
            max_node_freq_std: self.max_node_freq_std,
            min_node_degree: self.min_node_degree,
            max_node_degree_std: self.max_node_degree_std,
            min_edge_weight_pct: self.min_edge_weight_pct,
            remove_ego_nodes: self.remove_ego_nodes,
            lcc_only: self.lcc_only,
        };
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
