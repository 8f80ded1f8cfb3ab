//! Pure operations of graphrag-rs: plain functions over in-memory data.
//!
//! Nothing here touches the filesystem, the network or an LLM, so every
//! function is testable in isolation. Verbs and the query engine call these.
//!
//! # Modules
//!
//! Plain functions over in-memory data, unit- and property-tested: `chunking` (token windows / sentence
//! packs as byte ranges on character boundaries, exact `n_tokens`; `pack_words`: a text cut at whitespace
//! under an embedding model's token limit), `tokenizer` (o200k_base / cl100k_base via bpe-openai, ranks
//! embedded), `ids` (sha512 content ids, stable UUIDs), `suggest` ("did you mean"), `json_repair` (tolerant
//! JSON for LLM answers), `extraction_parser` (GraphRAG tuple records and LightRAG `<|#|>` records,
//! claims), `graph_merge` (per-chunk records → one graph), `chunk_selection` (prompt tuning's chunk
//! selection: top, seeded random, all, and `auto`'s seeded k-means with the chunk nearest each centre),
//! `lexical` (the BM25 analyzer — lower-cased words, possessives and Lucene's English stop words dropped,
//! CJK runs as character unigrams + bigrams — and Okapi BM25 with Lucene's k1 = 1.2, b = 0.75 and idf),
//! `pagerank` (an undirected weighted graph in CSR form, PageRank and Personalized PageRank by power
//! iteration), `rank_fusion` (reciprocal rank fusion, min-max normalisation), `eval_score` (`graphrag-rs
//! eval`'s scoring: gold passage found in a context after normalisation or by 8-word shingle coverage, gold
//! document by title or path suffix, SQuAD exact match and token F1), `nlp_graph/` (mention types and the
//! corpus's case evidence; `regex_english`: the noun-phrase extractor; `cooccurrence`: the graph and its
//! pruning), `leiden/` (our Leiden: local moving, refinement, aggregation; hierarchical mode; modularity,
//! NMI; planted-partition generator), `community_report` (context tables under a token budget with
//! sub-report substitution, report validation, markdown, extractive reports), `entity_resolution/`
//! (`names`: name forms — accents, case, possessives, articles, courtesy titles, designators; `candidates`:
//! blocking and the rules' verdicts; `decisions`: the yes/no prompt's questions, answer parsing and
//! hash-cut batches that stay stable under updates; `cluster`: merges grouped under keep-apart constraints;
//! `merge`: the merged graph's rows).
//!
//! **Invariant:** no I/O, no LLM, no global state beyond lazily built tokenizers/regexes.

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
