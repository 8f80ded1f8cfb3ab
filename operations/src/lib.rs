//! Pure operations of graphrag-rs: plain functions over in-memory data.
//!
//! Nothing here touches the filesystem, the network or an LLM, so every
//! function is testable in isolation. Verbs and the query engine call these.

pub mod chunk_selection;
pub mod chunking;
pub mod community_report;
pub mod entity_resolution;
pub mod eval_score;
pub mod extraction_parser;
pub mod graph_edits;
pub mod graph_merge;
pub mod ids;
pub mod json_repair;
pub mod leiden;
pub mod lexical;
pub mod nlp_graph;
pub mod pagerank;
pub mod rank_fusion;
pub mod suggest;
pub mod tokenizer;
