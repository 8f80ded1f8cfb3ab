//! `embed`: vectors for one embedded field (GraphRAG's text_unit_text,
//! entity_description, community_full_content, plus LightRAG's
//! relationship_description), as a table of (id, vector) that the query
//! engine loads into its vector store. Long texts are split and their
//! vectors averaged, or truncated. A text unit split into pieces also keeps
//! each piece's vector (`piece_vectors`), so that the query engine can score
//! it by its best piece (MaxP) as well as by the average, which blurs a long
//! unit's one relevant passage with the rest.

use std::sync::Arc;

use arrow_array::builder::{FixedSizeListBuilder, Float32Builder, ListBuilder};
use arrow_array::{ArrayRef, FixedSizeListArray, Float32Array, RecordBatch};
use arrow_schema::{DataType, Field, Schema};
use serde::Deserialize;

use graphrag_engine::context::VerbContext;
use graphrag_engine::embedded_fields::{self, EmbeddedField, LongText};
use graphrag_engine::schema;
use graphrag_engine::settings::{EmbedTextConfig, VectorStoreConfig};
use graphrag_engine::verb::{Verb, VerbDef, VerbInfo};
use graphrag_vectors::{Collection, HnswParams};

/// The step's args; only `field` is required (it has no default: each
/// step embeds its own), the others default to settings.yaml's.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Embed {
    /// The input table must be the field's.
    pub field: EmbeddedField,
    /// The fields settings ask for (embed_text.names): when `field` is not
    /// among them the output is empty and no model is called.
    #[serde(default = "default_names")]
    pub names: Vec<EmbeddedField>,
    #[serde(default = "default_model_id")]
    pub model_id: String,
    /// The cache partition of this step's answers (`cache/<name>/`), as
    /// GraphRAG's `model_instance_name`; none: the cache root.
    #[serde(default)]
    pub model_instance_name: Option<String>,
    #[serde(default = "default_long_text")]
    pub long_text: LongText,
    /// From this many vectors an HNSW index is built and saved as
    /// `output/vectors/<field>.hnsw` for the query engine (0: never).
    #[serde(default = "default_ann_threshold")]
    pub ann_threshold: usize,
}

fn default_names() -> Vec<EmbeddedField> {
    EmbedTextConfig::default().names
}

fn default_model_id() -> String {
    EmbedTextConfig::default().embedding_model_id
}

fn default_long_text() -> LongText {
    EmbedTextConfig::default().long_text
}

fn default_ann_threshold() -> usize {
    VectorStoreConfig::default().ann_threshold
}

impl VerbDef for Embed {
    const INFO: VerbInfo = VerbInfo {
        name: "embed",
        about: "embed one text field (text units, entity descriptions, reports, relationships)",
        inputs: &["table"],
        outputs: &["embeddings"],
    };
}

/// The value field of a vector (Arrow's list item).
fn vector_item() -> Arc<Field> {
    Arc::new(Field::new("item", DataType::Float32, true))
}

/// The type of one `dim`-value vector.
fn vector_type(dim: usize) -> DataType {
    DataType::FixedSizeList(vector_item(), dim as i32)
}

/// The item field of `piece_vectors`: one `dim`-value vector.
fn piece_item(dim: usize) -> Arc<Field> {
    Arc::new(Field::new("item", vector_type(dim), true))
}

/// The schema of an embeddings table: `id`, `vector` (GraphRAG's columns)
/// and `piece_vectors`, the vectors of a text unit's pieces when it was split
/// (null otherwise; GraphRAG's readers select `id` and `vector` by name).
pub fn embeddings_schema(dim: usize) -> Arc<Schema> {
    Arc::new(Schema::new(vec![
        schema::text_field("id"),
        Field::new("vector", vector_type(dim), true),
        Field::new("piece_vectors", DataType::List(piece_item(dim)), true),
    ]))
}

/// The `piece_vectors` column: per text, its pieces' vectors (`dim` values
/// each, concatenated), or null when it has none kept.
fn piece_vectors_col(pieces: &[Vec<f32>], dim: usize) -> ArrayRef {
    let inner = FixedSizeListBuilder::new(Float32Builder::new(), dim as i32).with_field(vector_item());
    let mut col = ListBuilder::new(inner).with_field(piece_item(dim));
    for values in pieces {
        if values.is_empty() {
            col.append(false);
            continue;
        }
        for piece in values.chunks(dim) {
            col.values().values().append_slice(piece);
            col.values().append(true);
        }
        col.append(true);
    }
    Arc::new(col.finish())
}

/// Whether [`save_ann_index`] builds an index of `vectors` vectors: at
/// least `ann_threshold` of them (0: never).
pub fn builds_ann_index(vectors: usize, ann_threshold: usize) -> bool {
    ann_threshold != 0 && vectors >= ann_threshold
}

/// Builds the HNSW index of a field's vectors (`flat`: `dim` values per id)
/// and saves it as `output/vectors/<field>.hnsw` for the query engine, when
/// [`builds_ann_index`]. The merge of sharded text unit embeddings calls it
/// on the assembled table.
pub fn save_ann_index(
    field: &str,
    ids: &[String],
    flat: &[f32],
    dim: usize,
    ann_threshold: usize,
    ctx: &VerbContext,
) -> anyhow::Result<()> {
    if !builds_ann_index(ids.len(), ann_threshold) {
        return Ok(());
    }
    let vectors: Vec<Vec<f32>> = flat.chunks(dim).map(<[f32]>::to_vec).collect();
    let mut collection = Collection::new(ids.to_vec(), vectors)?;
    collection.build_ann(&HnswParams::default());
    let bytes = collection.ann_to_bytes().expect("index just built");
    ctx.write_output(&format!("vectors/{field}.hnsw"), &bytes)?;
    ctx.count("ann_index_vectors", ids.len() as u64);
    Ok(())
}

/// Texts handed to the embedding model at a time (it batches them further
/// by its own `batch_size` and tokens).
const EMBED_BATCH: usize = 256;

impl Verb for Embed {
    fn model_to_call(&self) -> Option<&str> {
        Some(&self.model_id)
    }

    fn external_fingerprint(&self, ctx: &VerbContext) -> anyhow::Result<Option<String>> {
        if !self.names.contains(&self.field) {
            return Ok(None);
        }
        let model = ctx.llm()?.embedding_model_for(&self.model_id, self.model_instance_name.as_deref())?.fingerprint();
        Ok(Some(format!("{model}{}", self.field.texts_mark())))
    }

    fn calls_model(&self, _ctx: &VerbContext) -> anyhow::Result<bool> {
        Ok(self.names.contains(&self.field))
    }

    fn run(&self, inputs: &[Arc<RecordBatch>], ctx: &VerbContext) -> anyhow::Result<Vec<RecordBatch>> {
        if !self.names.contains(&self.field) {
            return Ok(vec![RecordBatch::new_empty(embeddings_schema(0))]);
        }
        let llm = ctx.llm()?;
        let model = llm.embedding_model_for(&self.model_id, self.model_instance_name.as_deref())?;
        // Rows with nothing to embed get no vector (e.g. the fast method's
        // relationships, which have no descriptions).
        let (ids, texts) = embedded_fields::embeddable(self.field, &inputs[0])?;
        // Each text becomes one or more pieces; vectors of pieces are averaged.
        let mut pieces: Vec<String> = Vec::new();
        let mut owner: Vec<usize> = Vec::new();
        for (i, text) in texts.iter().enumerate() {
            let parts = model.split_to_fit(text)?;
            let parts = match self.long_text {
                LongText::Truncate => parts.into_iter().take(1).collect(),
                LongText::Split => parts,
            };
            for p in parts {
                pieces.push(p);
                owner.push(i);
            }
        }
        ctx.count("texts", texts.len() as u64);
        ctx.count("pieces", pieces.len() as u64);
        // Text units split in two or more keep their pieces' vectors (MaxP at
        // query time); other fields and single-piece units only the average.
        let keep_pieces = self.field == EmbeddedField::TextUnitText;
        let mut piece_count = vec![0usize; texts.len()];
        owner.iter().for_each(|&o| piece_count[o] += 1);
        let mut kept: Vec<Vec<f32>> = vec![Vec::new(); texts.len()];
        let bar = ctx.progress(pieces.len() as u64, "texts");
        // A text's vector is the normalised sum of its pieces' vectors, summed
        // into its row of one flat buffer as the batches come back: the pieces'
        // vectors are never all held, nor copied into a builder (3072-d
        // vectors of 11k entities made ~0.6 GB of copies).
        let mut flat: Vec<f32> = Vec::new();
        let mut dim = 0;
        for (batch, owners) in pieces.chunks(EMBED_BATCH).zip(owner.chunks(EMBED_BATCH)) {
            for (v, &o) in llm.block_on(model.embed(batch, &ctx.counters.usage))?.iter().zip(owners) {
                if flat.is_empty() {
                    dim = v.len();
                    flat = vec![0f32; texts.len() * dim];
                }
                anyhow::ensure!(
                    v.len() == dim,
                    "embedding model `{}` returned vectors of different sizes",
                    self.model_id
                );
                for (s, x) in flat[o * dim..(o + 1) * dim].iter_mut().zip(v) {
                    *s += x;
                }
                if keep_pieces && piece_count[o] > 1 {
                    kept[o].extend_from_slice(v);
                }
            }
            bar.inc(batch.len() as u64);
        }
        bar.finish_and_clear();
        for v in flat.chunks_mut(dim.max(1)) {
            let norm = v.iter().map(|x| x * x).sum::<f32>().sqrt();
            if norm > 0.0 {
                v.iter_mut().for_each(|x| *x /= norm);
            }
        }
        save_ann_index(self.field.name(), &ids, &flat, dim, self.ann_threshold, ctx)?;
        let list = FixedSizeListArray::try_new(vector_item(), dim as i32, Arc::new(Float32Array::from(flat)), None)?;
        let table = RecordBatch::try_new(
            embeddings_schema(dim),
            vec![schema::text_col(&ids), Arc::new(list), piece_vectors_col(&kept, dim)],
        )?;
        Ok(vec![table])
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::{MemFiles, MemProject};
    use arrow_array::cast::AsArray;
    use arrow_array::types::Float32Type;
    use arrow_array::Array;
    use graphrag_engine::context::StepCounters;
    use graphrag_engine::llm::LlmService;
    use graphrag_engine::settings::{ModelConfig, Secret, Settings};
    use graphrag_engine::table::strings;
    use graphrag_mock_llm::{MockConfig, MockServer};

    fn units(n: usize) -> RecordBatch {
        let ids: Vec<String> = (0..n).map(|i| format!("u{i}")).collect();
        let texts: Vec<String> = (0..n).map(|i| format!("passage {i} about ghosts and misers")).collect();
        RecordBatch::try_new(
            schema::text_units(),
            vec![
                schema::text_col(&ids),
                schema::int_col(0..n as i64),
                schema::text_col(&texts),
                schema::int_col(vec![5; n]),
                schema::text_col(vec!["d"; n]),
                schema::id_list_col(vec![Vec::<String>::new(); n]),
                schema::id_list_col(vec![Vec::<String>::new(); n]),
                schema::id_list_col(vec![Vec::<String>::new(); n]),
            ],
        )
        .unwrap()
    }

    #[test]
    fn an_ann_index_is_built_from_the_threshold_on_and_never_at_zero() {
        assert!(!builds_ann_index(19, 20));
        assert!(builds_ann_index(20, 20));
        assert!(builds_ann_index(21, 20));
        assert!(!builds_ann_index(1_000_000, 0));
    }

    #[test]
    fn embeds_a_field_and_saves_an_ann_index_above_the_threshold() {
        let mock = MockServer::start(MockConfig::default()).unwrap();
        let mut settings = Settings::default();
        settings.embedding_models.insert(
            "default_embedding_model".into(),
            ModelConfig {
                model: "mock-embed".into(),
                api_base: Some(mock.base_url()),
                api_key: Secret::from("k"),
                ..ModelConfig::default()
            },
        );
        settings.cache.kind = "none".into();
        let llm = LlmService::from_settings(&settings, std::path::Path::new("/nonexistent")).unwrap();
        let (files, project, counters) = (MemFiles::new(&[]), MemProject::default(), StepCounters::default());
        let ctx = VerbContext::new("embed", &files, &counters).with_llm(Some(&llm)).with_project(Some(&project));
        let verb: Embed =
            serde_json::from_value(serde_json::json!({"field": "text_unit_text", "ann_threshold": 8})).unwrap();
        let out = verb.run(&[Arc::new(units(12))], &ctx).unwrap();
        assert_eq!(out[0].num_rows(), 12);
        let written = project.written.lock().unwrap();
        assert_eq!(written.len(), 1);
        assert_eq!(written[0].0, "vectors/text_unit_text.hnsw");
        // The query engine rebuilds the collection from the table, then loads the index.
        let ids: Vec<String> = strings(&out[0], "e", "id").unwrap().into_iter().map(String::from).collect();
        let list = out[0].column(1).as_fixed_size_list();
        let vectors: Vec<Vec<f32>> =
            (0..list.len()).map(|i| list.value(i).as_primitive::<Float32Type>().values().to_vec()).collect();
        assert!(vectors.iter().all(|v| v.len() == 384));
        let mut c = Collection::new(ids, vectors).unwrap();
        c.load_ann(&written[0].1).expect("the saved index matches the vectors");

        // Below the threshold no index; a field not asked for is an empty table.
        let small = verb.run(&[Arc::new(units(3))], &ctx).unwrap();
        assert_eq!(small[0].num_rows(), 3);
        let off: Embed =
            serde_json::from_value(serde_json::json!({"field": "text_unit_text", "names": ["entity_description"]}))
                .unwrap();
        assert_eq!(off.run(&[Arc::new(units(3))], &ctx).unwrap()[0].num_rows(), 0);
    }
}
