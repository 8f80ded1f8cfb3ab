//! The embedded fields' vectors (`embeddings.<field>.parquet`) as searchable
//! stores. A text unit split into pieces at index time also has its pieces'
//! vectors, and scores as the best of its whole vector and its pieces (MaxP,
//! Dai & Callan 2019): averaging the pieces of a long unit blurs the one
//! passage a question is about with the rest of it.

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};

use anyhow::{bail, Context};
use arrow_array::cast::AsArray;
use arrow_array::types::{Float32Type, Float64Type};
use arrow_array::{Array, FixedSizeListArray, RecordBatch};
use arrow_schema::DataType;
use graphrag_engine::store::read_table;
use graphrag_engine::table::{column_of, strings};
use graphrag_vectors::{Collection, EmbeddedStore, HnswParams, VectorStore};

/// The embedded fields (`embeddings.<field>.parquet`), as the index writes them.
pub use graphrag_engine::embedded_fields::EmbeddedField as Field;

/// The field's place in the per-field caches (`Field::ALL`'s order).
pub(crate) fn slot(field: Field) -> usize {
    field as usize
}

/// The vectors of the pieces long texts were split into, each with the
/// vector row of its text.
pub struct Pieces {
    /// One row per piece, named by its text's id (ids repeat).
    collection: Collection,
    /// The whole-text vector row of each piece.
    owner: Vec<usize>,
    /// The most pieces any one text has.
    most_per_text: usize,
}

/// The vectors of one field: `None` when the table is empty (nothing embedded).
pub struct Vectors {
    pub store: Option<EmbeddedStore>,
    /// Pieces' vectors of the texts that were split (text units only).
    pub pieces: Option<Pieces>,
    pub path: PathBuf,
}

impl Vectors {
    /// Vectors with no pieces (an empty field, or embedded at query time).
    pub fn whole(store: Option<EmbeddedStore>, path: PathBuf) -> Vectors {
        Vectors { store, pieces: None, path }
    }

    pub fn dimension(&self) -> usize {
        self.store.as_ref().map_or(0, |s| s.dimension())
    }

    /// Top `k` (row id, similarity), best first; `allowed`: only these vector
    /// rows. A text with pieces scores as the best of its whole vector and
    /// its pieces'.
    pub fn search(
        &self,
        query: &[f32],
        k: usize,
        allowed: Option<&HashSet<usize>>,
    ) -> anyhow::Result<Vec<(String, f32)>> {
        let Some(store) = &self.store else { return Ok(Vec::new()) };
        let whole = store.search(query, k, allowed)?;
        let Some(pieces) = &self.pieces else {
            return Ok(whole.into_iter().map(|h| (h.id, h.score)).collect());
        };
        let allowed_pieces: Option<HashSet<usize>> = allowed
            .map(|rows| pieces.owner.iter().enumerate().filter(|(_, o)| rows.contains(o)).map(|(i, _)| i).collect());
        // Enough pieces that k distinct texts are among them, whatever their split.
        let piece_hits =
            pieces.collection.exact_search(query, k.saturating_mul(pieces.most_per_text), allowed_pieces.as_ref())?;
        // A text outside the whole-vector top k enters only by a piece that
        // beats its whole score, so the top k of these maxima is exact.
        let mut best: HashMap<usize, f32> = whole.iter().map(|h| (h.index, h.score)).collect();
        for hit in piece_hits {
            let score = best.entry(pieces.owner[hit.index]).or_insert(f32::NEG_INFINITY);
            *score = score.max(hit.score);
        }
        let mut ranked: Vec<(usize, f32)> = best.into_iter().collect();
        ranked.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
        ranked.truncate(k);
        let ids = store.collection().ids();
        Ok(ranked.into_iter().map(|(row, score)| (ids[row].clone(), score)).collect())
    }

    /// The vector row of a table row id.
    pub fn row_of(&self, id: &str) -> Option<usize> {
        self.store.as_ref()?.collection().index_of(id)
    }

    pub(crate) fn load(field: Field, path: &Path, settings: &AnnSettings) -> anyhow::Result<Vectors> {
        let t = read_table(path)?;
        let table = format!("embeddings.{}", field.name());
        let ids = strings(&t, &table, "id")?;
        let col = column_of(&t, &table, "vector")?;
        let Some(list) = col.as_fixed_size_list_opt() else {
            bail!("{}: column `vector` is {}, expected a fixed-size list of float32", path.display(), col.data_type());
        };
        let dim = list.value_length() as usize;
        let flat = float_values(list, path, "vector")?;
        let mut keep_ids = Vec::with_capacity(ids.len());
        let mut rows = Vec::with_capacity(ids.len());
        let mut data = Vec::with_capacity(ids.len() * dim);
        for (i, id) in ids.iter().enumerate() {
            if list.is_null(i) || dim == 0 {
                continue;
            }
            let start = list.value_offset_at(i);
            data.extend_from_slice(&flat[start..start + dim]);
            keep_ids.push(id.to_string());
            rows.push(i);
        }
        if keep_ids.is_empty() {
            return Ok(Vectors::whole(None, path.to_path_buf()));
        }
        let pieces = load_pieces(&t, &rows, &keep_ids, dim, path)?;
        let mut collection = Collection::from_flat(keep_ids, dim, data)
            .with_context(|| format!("loading vectors from {}", path.display()))?;
        // The HNSW index `embed` saved beside the tables, when it matches these vectors.
        let ann = path.parent().map(|out| out.join("vectors").join(format!("{}.hnsw", field.name())));
        if let Some(bytes) = ann.as_deref().filter(|p| p.exists()).and_then(|p| std::fs::read(p).ok()) {
            if let Err(e) = collection.load_ann(&bytes) {
                tracing::warn!("ignoring the saved ANN index of {}: {e}", field.name());
            }
        }
        let store = EmbeddedStore::new(collection, settings.threshold, settings.params());
        Ok(Vectors { store: Some(store), pieces, path: path.to_path_buf() })
    }
}

/// The values of a fixed-size list column of float32 (or float64) as float32.
fn float_values(list: &FixedSizeListArray, path: &Path, column: &str) -> anyhow::Result<Vec<f32>> {
    let values = list.values();
    Ok(match values.data_type() {
        DataType::Float32 => values.as_primitive::<Float32Type>().values().to_vec(),
        DataType::Float64 => values.as_primitive::<Float64Type>().values().iter().map(|&v| v as f32).collect(),
        other => bail!("{}: column `{column}` holds {other}, expected float32", path.display()),
    })
}

/// The `piece_vectors` column (absent in GraphRAG's tables and in indexes
/// built before it): `rows[j]` is the table row of vector row `j`.
fn load_pieces(
    t: &RecordBatch,
    rows: &[usize],
    ids: &[String],
    dim: usize,
    path: &Path,
) -> anyhow::Result<Option<Pieces>> {
    let Some(col) = t.column_by_name("piece_vectors") else { return Ok(None) };
    let Some(lists) = col.as_list_opt::<i32>() else {
        bail!("{}: column `piece_vectors` is {}, expected a list of vectors", path.display(), col.data_type());
    };
    let Some(inner) = lists.values().as_fixed_size_list_opt().filter(|l| l.value_length() as usize == dim) else {
        bail!(
            "{}: column `piece_vectors` is {}, expected lists of {dim}-value vectors",
            path.display(),
            col.data_type()
        );
    };
    let flat = float_values(inner, path, "piece_vectors")?;
    let (mut piece_ids, mut owner, mut data, mut most_per_text) = (Vec::new(), Vec::new(), Vec::new(), 0);
    let offsets = lists.value_offsets();
    for (vector_row, &row) in rows.iter().enumerate() {
        if lists.is_null(row) {
            continue;
        }
        let (first, end) = (offsets[row] as usize, offsets[row + 1] as usize);
        for piece in first..end {
            let start = inner.value_offset_at(piece);
            data.extend_from_slice(&flat[start..start + dim]);
            piece_ids.push(ids[vector_row].clone());
            owner.push(vector_row);
        }
        most_per_text = most_per_text.max(end - first);
    }
    if owner.is_empty() {
        return Ok(None);
    }
    let collection = Collection::from_flat(piece_ids, dim, data)
        .with_context(|| format!("loading piece vectors from {}", path.display()))?;
    Ok(Some(Pieces { collection, owner, most_per_text }))
}

/// `vector_store` settings of the approximate index.
pub(crate) struct AnnSettings {
    pub threshold: usize,
    pub ef_search: usize,
}

impl AnnSettings {
    pub fn params(&self) -> HnswParams {
        HnswParams { ef_search: self.ef_search, ..HnswParams::default() }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow_array::builder::{FixedSizeListBuilder, Float32Builder, ListBuilder};
    use arrow_array::{ArrayRef, Float32Array};
    use arrow_schema::Field as ArrowField;
    use graphrag_engine::schema;
    use graphrag_engine::settings::VectorStoreConfig;
    use graphrag_engine::store::write_table;
    use std::sync::Arc;

    /// An embeddings table of 2-d vectors; `pieces` per row, empty for none
    /// (`None`: a table without the column, as GraphRAG's).
    fn table(vectors: &[[f32; 2]], pieces: Option<&[Vec<[f32; 2]>]>) -> RecordBatch {
        let item = Arc::new(ArrowField::new("item", DataType::Float32, true));
        let flat: Vec<f32> = vectors.iter().flatten().copied().collect();
        let vector: ArrayRef =
            Arc::new(FixedSizeListArray::new(item.clone(), 2, Arc::new(Float32Array::from(flat)), None));
        let ids: Vec<String> = (0..vectors.len()).map(|i| format!("u{i}")).collect();
        let mut columns = vec![("id", schema::text_col(&ids)), ("vector", vector)];
        if let Some(pieces) = pieces {
            let mut col = ListBuilder::new(FixedSizeListBuilder::new(Float32Builder::new(), 2));
            for row in pieces {
                for piece in row {
                    col.values().values().append_slice(piece);
                    col.values().append(true);
                }
                col.append(!row.is_empty());
            }
            columns.push(("piece_vectors", Arc::new(col.finish()) as ArrayRef));
        }
        RecordBatch::try_from_iter(columns).unwrap()
    }

    fn load(t: &RecordBatch) -> Vectors {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("embeddings.text_unit_text.parquet");
        write_table(&path, t).unwrap();
        Vectors::load(Field::TextUnitText, &path, &AnnSettings { threshold: 1000, ef_search: 50 }).unwrap()
    }

    fn ids(hits: Vec<(String, f32)>) -> Vec<String> {
        hits.into_iter().map(|h| h.0).collect()
    }

    #[test]
    fn a_split_text_scores_as_its_best_piece() {
        // u1 is split: its average leans to the second axis, one piece lies on the first.
        let (p1, p2) = ([0.0, 1.0], [0.8, 0.6]);
        let whole = [[1.0, 0.0], [0.8 / 1.6f32.hypot(0.8), 1.6 / 1.6f32.hypot(0.8)], [0.6, 0.6]];
        let averaged = load(&table(&whole, None));
        assert!(averaged.pieces.is_none());
        assert_eq!(ids(averaged.search(&[1.0, 0.0], 3, None).unwrap()), ["u0", "u2", "u1"]);

        let split = load(&table(&whole, Some(&[vec![], vec![p1, p2], vec![]])));
        let hits = split.search(&[1.0, 0.0], 3, None).unwrap();
        assert_eq!(ids(hits.clone()), ["u0", "u1", "u2"], "u1's piece (0.8) beats u2 (0.707)");
        assert!((hits[1].1 - 0.8).abs() < 1e-6);
        // The whole vector still counts where it is the better match.
        let along_second = split.search(&[0.0, 1.0], 3, None).unwrap();
        assert_eq!(ids(along_second.clone()), ["u1", "u2", "u0"]);
        assert!((along_second[0].1 - 1.0).abs() < 1e-6, "piece (0, 1) matches exactly");
        assert_eq!(ids(split.search(&[1.0, 0.0], 1, None).unwrap()), ["u0"]);
        // Rows left out leave out their pieces too.
        let without_u1: HashSet<usize> = [0, 2].into();
        assert_eq!(ids(split.search(&[1.0, 0.0], 3, Some(&without_u1)).unwrap()), ["u0", "u2"]);
        let only_u1_u2: HashSet<usize> = [1, 2].into();
        assert_eq!(ids(split.search(&[1.0, 0.0], 3, Some(&only_u1_u2)).unwrap()), ["u1", "u2"]);
        // A column of nulls (nothing was split) keeps no pieces.
        assert!(load(&table(&whole, Some(&[vec![], vec![], vec![]]))).pieces.is_none());
    }

    #[test]
    fn vector_store_defaults_are_the_vectors_crate_defaults() {
        let defaults = VectorStoreConfig::default();
        assert_eq!(defaults.ann_ef_search, HnswParams::default().ef_search);
        assert_eq!(defaults.ann_threshold, graphrag_vectors::DEFAULT_ANN_THRESHOLD);
        let ann = AnnSettings { threshold: 10, ef_search: 500 };
        assert_eq!(ann.params(), HnswParams { ef_search: 500, ..HnswParams::default() });
    }
}
