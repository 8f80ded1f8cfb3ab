//! `chunk`: documents → text_units (token windows or sentence packs), and the
//! documents again with their `text_unit_ids` filled.

use std::collections::HashSet;
use std::sync::Arc;

use arrow_array::cast::AsArray;
use arrow_array::{Array, RecordBatch};
use rayon::prelude::*;
use serde::Deserialize;

use graphrag_engine::context::VerbContext;
use graphrag_engine::schema;
use graphrag_engine::settings::ChunkingConfig;
use graphrag_engine::table::strings;
use graphrag_engine::verb::{Verb, VerbDef, VerbInfo};
use graphrag_operations::chunking::{chunk_text, ChunkConfig, Strategy};
use graphrag_operations::ids::sha512_hex;
use graphrag_operations::tokenizer::Encoding;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Chunk {
    pub size: usize,
    pub overlap: usize,
    pub encoding_model: String,
    pub strategy: Strategy,
    /// Document fields written at the head of each chunk as `field: value.`
    /// lines, as GraphRAG's `chunking.prepend_metadata`: `id`, `title`,
    /// `text`, `creation_date`, or a raw_data column (csv/json inputs).
    pub prepend_metadata: Option<Vec<String>>,
}

impl Default for Chunk {
    fn default() -> Self {
        let s = ChunkingConfig::default();
        Chunk {
            size: s.size,
            overlap: s.overlap,
            encoding_model: s.encoding_model,
            strategy: s.strategy,
            prepend_metadata: s.prepend_metadata,
        }
    }
}

impl Chunk {
    fn config(&self) -> Result<ChunkConfig, String> {
        let cfg = ChunkConfig {
            size: self.size,
            overlap: self.overlap,
            encoding: self.encoding_model.parse::<Encoding>()?,
            strategy: self.strategy,
        };
        cfg.validate()?;
        Ok(cfg)
    }
}

impl VerbDef for Chunk {
    const INFO: VerbInfo = VerbInfo {
        name: "chunk",
        about: "split documents into token-bounded text units",
        inputs: &["documents"],
        outputs: &["text_units", "documents"],
    };

    fn check(&self) -> Result<(), String> {
        self.config().map(|_| ())
    }
}

impl Verb for Chunk {
    fn run(&self, inputs: &[Arc<RecordBatch>], ctx: &VerbContext) -> anyhow::Result<Vec<RecordBatch>> {
        let cfg = self.config().map_err(anyhow::Error::msg)?;
        let docs = &inputs[0];
        let doc_ids = strings(docs, "documents", "id")?;
        let texts = strings(docs, "documents", "text")?;
        let heads = metadata_heads(docs, self.prepend_metadata.as_deref().unwrap_or_default())?;
        let bar = ctx.progress(texts.len() as u64, "documents");
        // Chunk documents in parallel; collect keeps document order.
        let per_doc: Vec<Vec<(String, usize)>> = texts
            .par_iter()
            .enumerate()
            .map(|(d, text)| {
                let chunks = chunk_text(text, &cfg)
                    .into_iter()
                    .map(|c| match &heads {
                        Some(heads) => {
                            let unit = format!("{}{}", heads[d], &text[c.range]);
                            let n = cfg.encoding.count(&unit);
                            (unit, n)
                        }
                        None => (text[c.range].to_string(), c.n_tokens),
                    })
                    .collect();
                bar.inc(1);
                chunks
            })
            .collect();
        bar.finish_and_clear();

        let mut ids = Vec::new();
        let mut unit_texts = Vec::new();
        let mut n_tokens = Vec::new();
        let mut owners = Vec::new();
        let mut doc_unit_ids = Vec::with_capacity(texts.len());
        let mut seen = HashSet::new();
        for (doc_id, chunks) in doc_ids.iter().zip(per_doc) {
            let mut mine = Vec::with_capacity(chunks.len());
            for (i, (text, tokens)) in chunks.into_iter().enumerate() {
                let mut id = sha512_hex(&[doc_id.as_bytes(), text.as_bytes()]);
                if !seen.insert(id.clone()) {
                    // The same passage twice in one document: disambiguate by position.
                    id = sha512_hex(&[doc_id.as_bytes(), text.as_bytes(), i.to_string().as_bytes()]);
                    seen.insert(id.clone());
                }
                mine.push(id.clone());
                ids.push(id);
                unit_texts.push(text);
                n_tokens.push(tokens as i64);
                owners.push(doc_id.to_string());
            }
            doc_unit_ids.push(mine);
        }
        let n = ids.len();
        let text_units = RecordBatch::try_new(
            schema::text_units(),
            vec![
                schema::text_col(&ids),
                schema::int_col(0..n as i64),
                schema::text_col(&unit_texts),
                schema::int_col(n_tokens),
                schema::text_col(&owners),
                schema::id_list_col(vec![Vec::<String>::new(); n]),
                schema::id_list_col(vec![Vec::<String>::new(); n]),
                schema::id_list_col(vec![Vec::<String>::new(); n]),
            ],
        )?;
        let mut columns = docs.columns().to_vec();
        let idx = docs.schema().index_of("text_unit_ids")?;
        columns[idx] = schema::id_list_col(doc_unit_ids);
        let documents = schema::batch(docs.schema(), columns)?;
        Ok(vec![text_units, documents])
    }
}

/// Per document, the `field: value.` lines `prepend_metadata` asks for
/// (GraphRAG's format: fields in the order given, those without a value
/// left out); `None` when no field is asked for.
fn metadata_heads(docs: &RecordBatch, fields: &[String]) -> anyhow::Result<Option<Vec<String>>> {
    if fields.is_empty() {
        return Ok(None);
    }
    let raw = docs.column_by_name("raw_data").and_then(|c| c.as_struct_opt());
    let column = |field: &str| -> anyhow::Result<Vec<Option<String>>> {
        if ["id", "title", "text", "creation_date"].contains(&field) {
            return Ok(strings(docs, "documents", field)?.into_iter().map(|v| Some(v.to_string())).collect());
        }
        let values = raw.and_then(|r| r.column_by_name(field)).and_then(|c| c.as_string_opt::<i64>().map(|s| (c, s)));
        Ok(match values {
            Some((c, s)) => (0..docs.num_rows()).map(|i| c.is_valid(i).then(|| s.value(i).to_string())).collect(),
            None => vec![None; docs.num_rows()],
        })
    };
    let columns = fields.iter().map(|f| column(f).map(|c| (f, c))).collect::<anyhow::Result<Vec<_>>>()?;
    Ok(Some(
        (0..docs.num_rows())
            .map(|i| {
                columns.iter().filter_map(|(f, c)| c[i].as_ref().map(|v| format!("{f}: {v}.\n"))).collect::<String>()
            })
            .collect(),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::load_documents::LoadDocuments;
    use crate::testing::{run_verb, MemFiles};
    use arrow_array::cast::AsArray;
    use arrow_array::Array;
    use graphrag_engine::table::ints;

    fn chunked(args: serde_json::Value, files: &[(&str, &[u8])]) -> (RecordBatch, RecordBatch) {
        let files = MemFiles::new(files);
        let load: LoadDocuments = serde_json::from_value(serde_json::json!({})).unwrap();
        let docs = run_verb(&load, &[], &files).unwrap().0.remove(0);
        let chunk: Chunk = serde_json::from_value(args).unwrap();
        let mut out = run_verb(&chunk, &[Arc::new(docs)], &files).unwrap().0;
        let documents = out.pop().unwrap();
        (out.pop().unwrap(), documents)
    }

    #[test]
    fn units_never_cross_documents_and_ids_link_back() {
        let a = "Scrooge was a tight-fisted hand at the grindstone. ".repeat(40);
        let b = "鬼魂来访。圣诞快乐！🎄 ".repeat(30);
        let (units, docs) = chunked(
            serde_json::json!({"size": 50, "overlap": 10}),
            &[("a.txt", a.as_bytes()), ("b.txt", b.as_bytes())],
        );
        let owners = strings(&units, "t", "document_id").unwrap();
        let texts = strings(&units, "t", "text").unwrap();
        let doc_ids = strings(&docs, "d", "id").unwrap();
        let doc_texts = strings(&docs, "d", "text").unwrap();
        for (owner, text) in owners.iter().zip(&texts) {
            let d = doc_ids.iter().position(|i| i == owner).unwrap();
            assert!(doc_texts[d].contains(text), "unit text is a slice of its own document");
        }
        let tokens = ints(&units, "t", "n_tokens").unwrap();
        for (t, n) in texts.iter().zip(&tokens) {
            assert_eq!(*n as usize, Encoding::O200kBase.count(t));
        }
        let lists = docs.column_by_name("text_unit_ids").unwrap().as_list::<i32>();
        let total: usize = (0..lists.len()).map(|i| lists.value(i).len()).sum();
        assert_eq!(total, units.num_rows());
        assert_eq!(ints(&units, "t", "human_readable_id").unwrap(), (0..units.num_rows() as i64).collect::<Vec<_>>());
    }

    #[test]
    fn metadata_is_prepended_to_every_chunk() {
        let text = "Marley was dead, to begin with. ".repeat(30);
        let args = serde_json::json!({"size": 40, "overlap": 0, "prepend_metadata": ["title", "nothing"]});
        let (units, _) = chunked(args, &[("carol.txt", text.as_bytes())]);
        let texts = strings(&units, "t", "text").unwrap();
        assert!(texts.len() > 1);
        for t in &texts {
            assert!(t.starts_with("title: carol.txt.\n"), "{t:?}");
        }
        let tokens = ints(&units, "t", "n_tokens").unwrap();
        assert_eq!(tokens[0] as usize, Encoding::O200kBase.count(texts[0]), "the head is counted");
    }

    #[test]
    fn repeated_passages_get_distinct_ids() {
        let text = "Same words again. ".repeat(100);
        let (units, _) = chunked(serde_json::json!({"size": 12, "overlap": 0}), &[("r.txt", text.as_bytes())]);
        let ids = strings(&units, "t", "id").unwrap();
        let unique: HashSet<_> = ids.iter().collect();
        assert_eq!(unique.len(), ids.len());
    }

    #[test]
    fn bad_args_are_rejected() {
        let bad = |v| serde_json::from_value::<Chunk>(v).unwrap().check().unwrap_err();
        assert!(bad(serde_json::json!({"size": 10, "overlap": 10})).contains("overlap"));
        assert!(bad(serde_json::json!({"encoding_model": "p50k"})).contains("unknown encoding"));
        let unknown = serde_json::from_value::<Chunk>(serde_json::json!({"strategy": "words"})).unwrap_err();
        assert!(unknown.to_string().contains("unknown variant `words`"), "{unknown}");
    }
}
