//! Embedded vector store for graphrag-rs.
//!
//! * [`Collection`]: ids plus row-major, L2-normalised `f32` vectors, searched
//!   by cosine similarity. [`Collection::exact_search`] scans every row with
//!   SIMD dot products (AVX2+FMA detected at run time, portable fallback),
//!   split over threads with rayon above a size threshold, keeping a bounded
//!   heap per thread instead of sorting all scores.
//! * An optional HNSW index ([`Collection::build_ann`],
//!   [`Collection::ann_search`]) that is deterministic (same vectors, params
//!   and seed give the same bytes) and persists to/from bytes
//!   ([`Collection::ann_to_bytes`], [`Collection::load_ann`]); the format is
//!   described in `format.rs`.
//! * [`VectorStore`]: the trait the query engine searches through, so
//!   external stores can be plugged in; [`EmbeddedStore`] is the in-process
//!   implementation (exact below a size threshold, HNSW above).
//!
//! Nothing here touches the filesystem or the network.

use std::collections::{HashMap, HashSet};

use rayon::prelude::*;

mod format;
mod hnsw;
mod simd;
mod topk;

#[cfg(test)]
mod tests;

pub use simd::{dot, has_avx2_fma};

use hnsw::{Hnsw, Rows};
use topk::{Scored, TopK};

/// Default for [`EmbeddedStore::new`]'s `ann_threshold`: collections with at
/// least this many vectors are searched through the HNSW index.
pub const DEFAULT_ANN_THRESHOLD: usize = 100_000;

/// Rows × dimension above which exact search is split over threads.
const PARALLEL_MIN_FLOATS: usize = 1 << 18;
/// Rows scored per inner block of exact search.
const BLOCK_ROWS: usize = 256;

/// One search result.
#[derive(Debug, Clone, PartialEq)]
pub struct Hit {
    /// Row index in the collection.
    pub index: usize,
    pub id: String,
    /// Cosine similarity to the query, in [-1, 1].
    pub score: f32,
}

/// Errors of the vector store.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum VectorError {
    /// The query's dimension differs from the collection's.
    #[error(
        "the query embedding has dimension {got} but the vector index has dimension {expected}: \
         the index was built with another embedding model. Set `embed_text.embedding_model_id` \
         in the settings to the model the index was built with, or re-run `graphrag-rs index` \
         to re-embed with the current model"
    )]
    DimensionMismatch { expected: usize, got: usize },
    /// Invalid input data or a damaged / mismatching saved index.
    #[error("invalid vector data: {0}")]
    Corrupt(String),
    /// A collection was created from no vectors (its dimension is unknown).
    #[error(
        "the vector collection is empty (nothing was embedded); re-run `graphrag-rs index` \
         to embed the texts"
    )]
    Empty,
}

/// A searchable collection of vectors; external stores (pgvector, Qdrant,
/// LanceDB) implement this too.
pub trait VectorStore: Send + Sync {
    /// Length of every vector.
    fn dimension(&self) -> usize;
    /// Number of vectors.
    fn len(&self) -> usize;
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// Top-`k` by cosine similarity, best first; ties broken by lower index.
    /// `allowed`: restrict to these row indexes (filtering by an id set is
    /// done by the caller, mapping ids to indexes with
    /// [`Collection::index_of`]); indexes out of range are ignored.
    fn search(&self, query: &[f32], k: usize, allowed: Option<&HashSet<usize>>) -> Result<Vec<Hit>, VectorError>;
}

/// HNSW build and search parameters.
#[derive(Debug, Clone, PartialEq)]
pub struct HnswParams {
    /// Links per node on the upper layers (layer 0 keeps up to `2·m`).
    pub m: usize,
    /// Candidate list size while building.
    pub ef_construction: usize,
    /// Candidate list size while searching (raised to `k` when smaller).
    pub ef_search: usize,
    /// Seed of the level generator.
    pub seed: u64,
}

impl Default for HnswParams {
    fn default() -> Self {
        // ef_search 128: recall@10 ≈ 0.96 on text-like vectors at 100k rows
        // (64 gives ≈ 0.87), at ~0.25 ms a query; see docs/benchmarks.md.
        HnswParams { m: 16, ef_construction: 200, ef_search: 128, seed: 0x5EED_6AA9_0001 }
    }
}

/// Ids plus row-major, L2-normalised `f32` vectors, with an optional HNSW
/// index.
#[derive(Clone)]
pub struct Collection {
    ids: Vec<String>,
    index: HashMap<String, usize>,
    dim: usize,
    data: Vec<f32>,
    ann: Option<Hnsw>,
}

impl Collection {
    /// Builds a collection; every vector is L2-normalised (zero vectors stay
    /// zero and score 0 against every query). Errors: [`VectorError::Empty`]
    /// when there are no vectors, [`VectorError::Corrupt`] when the counts or
    /// dimensions differ or a value is NaN or infinite. Duplicate ids are
    /// kept; [`Collection::index_of`] returns the first.
    pub fn new(ids: Vec<String>, vectors: Vec<Vec<f32>>) -> Result<Collection, VectorError> {
        if ids.len() != vectors.len() {
            return Err(VectorError::Corrupt(format!("{} ids but {} vectors", ids.len(), vectors.len())));
        }
        let Some(first) = vectors.first() else {
            return Err(VectorError::Empty);
        };
        let dim = first.len();
        if let Some((i, v)) = vectors.iter().enumerate().find(|(_, v)| v.len() != dim) {
            return Err(VectorError::Corrupt(format!(
                "vector {i} (id `{}`) has dimension {}, the first has {dim}",
                ids[i],
                v.len()
            )));
        }
        let mut data = Vec::with_capacity(dim * vectors.len());
        for v in vectors {
            data.extend_from_slice(&v);
        }
        Collection::from_flat(ids, dim, data)
    }

    /// Like [`Collection::new`] from one row-major buffer of
    /// `ids.len() × dimension` values (no copy). Zero rows are allowed here,
    /// since the dimension is known; searching such a collection returns no
    /// hits.
    pub fn from_flat(ids: Vec<String>, dimension: usize, mut data: Vec<f32>) -> Result<Collection, VectorError> {
        let n = ids.len();
        if dimension == 0 {
            return Err(VectorError::Corrupt("vectors of dimension 0".into()));
        }
        if data.len() != n * dimension {
            return Err(VectorError::Corrupt(format!(
                "{} values for {n} vectors of dimension {dimension}",
                data.len()
            )));
        }
        if n > u32::MAX as usize - 1 {
            return Err(VectorError::Corrupt(format!("too many vectors ({n})")));
        }
        let bad = data
            .par_chunks_mut(dimension)
            .enumerate()
            .map(|(i, row)| {
                if row.iter().any(|x| !x.is_finite()) {
                    return Some(i);
                }
                let norm = simd::dot(row, row).sqrt();
                if norm > 0.0 {
                    if !norm.is_finite() {
                        // Values near f32::MAX overflow the squared norm.
                        let scale = row.iter().fold(0.0f32, |m, x| m.max(x.abs()));
                        row.iter_mut().for_each(|x| *x /= scale);
                        let norm = simd::dot(row, row).sqrt();
                        row.iter_mut().for_each(|x| *x /= norm);
                    } else {
                        let inv = 1.0 / norm;
                        row.iter_mut().for_each(|x| *x *= inv);
                    }
                }
                None
            })
            .min_by_key(|x| x.unwrap_or(usize::MAX))
            .flatten();
        if let Some(i) = bad {
            return Err(VectorError::Corrupt(format!("vector {i} (id `{}`) contains NaN or infinite values", ids[i])));
        }
        let mut index = HashMap::with_capacity(n);
        for (i, id) in ids.iter().enumerate() {
            index.entry(id.clone()).or_insert(i);
        }
        Ok(Collection { ids, index, dim: dimension, data, ann: None })
    }

    pub fn ids(&self) -> &[String] {
        &self.ids
    }

    /// The normalised vector of row `i` (panics when out of range).
    pub fn vector(&self, i: usize) -> &[f32] {
        &self.data[i * self.dim..(i + 1) * self.dim]
    }

    pub fn index_of(&self, id: &str) -> Option<usize> {
        self.index.get(id).copied()
    }

    pub fn dimension(&self) -> usize {
        self.dim
    }

    pub fn len(&self) -> usize {
        self.ids.len()
    }

    pub fn is_empty(&self) -> bool {
        self.ids.is_empty()
    }

    fn rows(&self) -> Rows<'_> {
        Rows { data: &self.data, dim: self.dim }
    }

    /// Checks the dimension and returns the normalised query (`None` for a
    /// zero query: every score is then 0).
    fn prepare_query(&self, query: &[f32]) -> Result<Vec<f32>, VectorError> {
        if query.len() != self.dim {
            return Err(VectorError::DimensionMismatch { expected: self.dim, got: query.len() });
        }
        if query.iter().any(|x| !x.is_finite()) {
            return Err(VectorError::Corrupt("the query embedding contains NaN or infinite values".into()));
        }
        let mut q = query.to_vec();
        let scale = q.iter().fold(0.0f32, |m, x| m.max(x.abs()));
        if scale > 0.0 {
            q.iter_mut().for_each(|x| *x /= scale);
            let inv = 1.0 / simd::dot(&q, &q).sqrt();
            q.iter_mut().for_each(|x| *x *= inv);
        }
        Ok(q)
    }

    fn hits(&self, found: Vec<Scored>) -> Vec<Hit> {
        found
            .into_iter()
            .map(|s| Hit { index: s.index as usize, id: self.ids[s.index as usize].clone(), score: s.score })
            .collect()
    }

    /// Exact top-`k` by cosine similarity, best first, ties broken by lower
    /// index. `allowed` restricts the rows searched (out-of-range indexes
    /// are ignored).
    pub fn exact_search(
        &self,
        query: &[f32],
        k: usize,
        allowed: Option<&HashSet<usize>>,
    ) -> Result<Vec<Hit>, VectorError> {
        let q = self.prepare_query(query)?;
        if k == 0 || self.is_empty() {
            return Ok(Vec::new());
        }
        let found = match allowed {
            None => self.scan_all(&q, k),
            Some(set) => {
                let mut rows: Vec<u32> = set.iter().filter(|&&i| i < self.len()).map(|&i| i as u32).collect();
                rows.sort_unstable();
                self.scan_subset(&q, k, &rows)
            }
        };
        Ok(self.hits(found))
    }

    fn scan_all(&self, q: &[f32], k: usize) -> Vec<Scored> {
        let dim = self.dim;
        let block = |top: &mut TopK, buf: &mut Vec<f32>, first_row: usize, chunk: &[f32]| {
            let rows = chunk.len() / dim;
            buf.resize(rows, 0.0);
            simd::dot_rows(q, chunk, &mut buf[..rows]);
            for (j, &score) in buf[..rows].iter().enumerate() {
                top.push(Scored { score, index: (first_row + j) as u32 });
            }
        };
        if self.data.len() < PARALLEL_MIN_FLOATS || rayon::current_num_threads() < 2 {
            let mut top = TopK::new(k);
            let mut buf = Vec::with_capacity(BLOCK_ROWS);
            for (b, chunk) in self.data.chunks(BLOCK_ROWS * dim).enumerate() {
                block(&mut top, &mut buf, b * BLOCK_ROWS, chunk);
            }
            return top.into_sorted();
        }
        self.data
            .par_chunks(BLOCK_ROWS * dim)
            .enumerate()
            .fold(
                || (TopK::new(k), Vec::with_capacity(BLOCK_ROWS)),
                |(mut top, mut buf), (b, chunk)| {
                    block(&mut top, &mut buf, b * BLOCK_ROWS, chunk);
                    (top, buf)
                },
            )
            .map(|(top, _)| top)
            .reduce(|| TopK::new(k), TopK::merge)
            .into_sorted()
    }

    fn scan_subset(&self, q: &[f32], k: usize, rows: &[u32]) -> Vec<Scored> {
        let r = self.rows();
        let score = |top: &mut TopK, chunk: &[u32]| {
            for (j, &i) in chunk.iter().enumerate() {
                if let Some(&next) = chunk.get(j + 4) {
                    simd::prefetch(r.row(next));
                }
                top.push(Scored { score: simd::dot(q, r.row(i)), index: i });
            }
        };
        if rows.len() * self.dim < PARALLEL_MIN_FLOATS || rayon::current_num_threads() < 2 {
            let mut top = TopK::new(k);
            score(&mut top, rows);
            return top.into_sorted();
        }
        rows.par_chunks(BLOCK_ROWS)
            .fold(
                || TopK::new(k),
                |mut top, chunk| {
                    score(&mut top, chunk);
                    top
                },
            )
            .reduce(|| TopK::new(k), TopK::merge)
            .into_sorted()
    }

    /// Builds the HNSW index (replacing any existing one). Deterministic:
    /// the same vectors and params give the same index, whatever the number
    /// of threads.
    pub fn build_ann(&mut self, params: &HnswParams) {
        let g = Hnsw::build(self.rows(), params.m, params.ef_construction, params.ef_search, params.seed);
        self.ann = Some(g);
    }

    pub fn has_ann(&self) -> bool {
        self.ann.is_some()
    }

    /// Drops the HNSW index.
    pub fn clear_ann(&mut self) {
        self.ann = None;
    }

    /// Approximate top-`k` through the HNSW index (exact search when there
    /// is none), best first. `ef` is raised to `k` when smaller; from
    /// `ef ≥ len / 100` the index scans its 8-bit codes instead of walking
    /// the graph (cheaper there, and recall ≈ 1). With
    /// `allowed`, small or selective sets (under 10% of the rows, or at most
    /// 4096 rows) are searched exactly; larger ones walk the graph with a
    /// doubled `ef`, keeping only allowed rows, and fall back to exact search
    /// when that finds fewer than `k` rows.
    pub fn ann_search(
        &self,
        query: &[f32],
        k: usize,
        ef: usize,
        allowed: Option<&HashSet<usize>>,
    ) -> Result<Vec<Hit>, VectorError> {
        let Some(g) = &self.ann else {
            return self.exact_search(query, k, allowed);
        };
        let q = self.prepare_query(query)?;
        if k == 0 || self.is_empty() {
            return Ok(Vec::new());
        }
        let found = match allowed {
            None => g.search(self.rows(), &q, k, ef, None),
            Some(set) => {
                let n = self.len();
                let in_range = set.iter().filter(|&&i| i < n).count();
                if in_range <= 4096 || in_range * 10 < n {
                    return self.exact_search(query, k, allowed);
                }
                let pred = |i: u32| set.contains(&(i as usize));
                let found = g.search(self.rows(), &q, k, ef.max(k) * 2, Some(&pred));
                if found.len() < k.min(in_range) {
                    return self.exact_search(query, k, allowed);
                }
                found
            }
        };
        Ok(self.hits(found))
    }

    /// Whether [`Collection::ann_search`] with this `ef` (and no filter)
    /// scans the index's 8-bit codes rather than walking its graph.
    pub fn ann_scans(&self, ef: usize, k: usize) -> bool {
        self.ann.is_some() && hnsw::scan_is_cheaper(ef.max(k), self.len())
    }

    /// The HNSW index in the versioned binary format (`None` without one).
    pub fn ann_to_bytes(&self) -> Option<Vec<u8>> {
        let g = self.ann.as_ref()?;
        Some(format::encode(
            g,
            self.dim,
            format::ids_checksum(&self.ids),
            format::vectors_fingerprint(&self.data, self.dim, self.len()),
        ))
    }

    /// Loads an index saved by [`Collection::ann_to_bytes`]. Rejects, with
    /// [`VectorError::Corrupt`], bytes that are damaged, of another format
    /// version, or saved for other ids, vectors, dimension or count; the
    /// current index (if any) is kept then.
    pub fn load_ann(&mut self, bytes: &[u8]) -> Result<(), VectorError> {
        let g = format::decode(
            bytes,
            self.rows(),
            format::ids_checksum(&self.ids),
            format::vectors_fingerprint(&self.data, self.dim, self.len()),
        )?;
        self.ann = Some(g);
        Ok(())
    }
}

impl std::fmt::Debug for Collection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Collection")
            .field("len", &self.len())
            .field("dimension", &self.dim)
            .field("has_ann", &self.has_ann())
            .finish_non_exhaustive()
    }
}

/// Exact search over the collection.
impl VectorStore for Collection {
    fn dimension(&self) -> usize {
        self.dim
    }
    fn len(&self) -> usize {
        self.ids.len()
    }
    fn search(&self, query: &[f32], k: usize, allowed: Option<&HashSet<usize>>) -> Result<Vec<Hit>, VectorError> {
        self.exact_search(query, k, allowed)
    }
}

/// The store the query engine uses: exact search below `ann_threshold`
/// vectors, the HNSW index at or above it.
#[derive(Debug, Clone)]
pub struct EmbeddedStore {
    collection: Collection,
    ann_threshold: usize,
    params: HnswParams,
}

impl EmbeddedStore {
    /// When the collection has at least `ann_threshold` vectors and no index
    /// was loaded into it, builds one now with `params` (this can take a
    /// while for large collections; load a saved index to skip it).
    /// `params.ef_search` is used for every ANN query.
    pub fn new(mut collection: Collection, ann_threshold: usize, params: HnswParams) -> Self {
        if collection.len() >= ann_threshold && !collection.has_ann() {
            collection.build_ann(&params);
        }
        EmbeddedStore { collection, ann_threshold, params }
    }

    pub fn collection(&self) -> &Collection {
        &self.collection
    }

    pub fn into_collection(self) -> Collection {
        self.collection
    }

    /// Whether searches go through the HNSW index.
    pub fn uses_ann(&self) -> bool {
        self.collection.len() >= self.ann_threshold && self.collection.has_ann()
    }
}

impl VectorStore for EmbeddedStore {
    fn dimension(&self) -> usize {
        self.collection.dim
    }
    fn len(&self) -> usize {
        self.collection.len()
    }
    fn search(&self, query: &[f32], k: usize, allowed: Option<&HashSet<usize>>) -> Result<Vec<Hit>, VectorError> {
        if self.uses_ann() {
            self.collection.ann_search(query, k, self.params.ef_search, allowed)
        } else {
            self.collection.exact_search(query, k, allowed)
        }
    }
}
