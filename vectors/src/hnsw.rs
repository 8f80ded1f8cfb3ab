//! HNSW graph (Malkov & Yashunin, "Efficient and robust approximate nearest
//! neighbor search using Hierarchical Navigable Small World graphs").
//!
//! * Levels are drawn from a seeded SplitMix64 stream in insertion order
//!   (`level = floor(-ln(u) / ln(M))`).
//! * Neighbours are chosen with the paper's heuristic (Algorithm 4, without
//!   `extendCandidates`/`keepPrunedConnections`, as in hnswlib).
//! * Layer 0 keeps up to `2·M` links per node, upper layers `M`.
//! * The graph is built and walked with 8-bit codes of the vectors; results
//!   are re-scored with `f32`. A search whose beam `ef` is large next to the
//!   node count scans all codes instead (see [`scan_is_cheaper`]).
//!
//! # Deterministic parallel build
//!
//! Nodes are inserted in index order, in batches. For every node of a batch
//! the neighbour search runs in parallel against the graph as it stood
//! before the batch (read-only), and the earlier nodes of the same batch are
//! added to its candidates by brute force, so no node misses a neighbour
//! because it was inserted concurrently. Then the new nodes' own links are
//! written, and the reverse links are merged per target node (each target's
//! new list depends only on its old list and its sorted new sources, so the
//! targets can be processed in parallel). Batch boundaries depend only on
//! the node count, so the same vectors and seed give a byte-identical index
//! whatever the number of threads.

use std::cell::RefCell;
use std::collections::BinaryHeap;

use rayon::prelude::*;

use crate::simd::{dot, dot_i8, dot_rows_i8, prefetch_bytes};
use crate::topk::{better, cmp_rank, BestFirst, Scored, TopK, WorstFirst};

/// Highest level a node can get (bounds file sizes and loops).
pub(crate) const MAX_LEVEL: u8 = 24;
/// Largest batch of the parallel build.
const MAX_BATCH: usize = 256;
/// Rows per block of the 8-bit scan.
const SCAN_BLOCK_ROWS: usize = 256;

/// A graph walk with beam `ef` costs about as much as an 8-bit scan of
/// `SCAN_ROWS_PER_EF · ef` rows (measured at 100k × 384 on 2 cores: about
/// 2.1 µs per unit of `ef` for the walk on one thread, 18 ns per row for the
/// scan on two; at 1M rows the walk's ratio is higher still).
const SCAN_ROWS_PER_EF: usize = 100;

/// Whether scanning every 8-bit code is at most as costly as walking the
/// graph with beam `ef` over `n` nodes. The scan is also the more accurate
/// of the two, so it wins ties. On data of high intrinsic dimension (i.i.d.
/// random vectors) a walk needs an `ef` of several thousand for
/// recall@10 ≥ 0.95 at 100k rows, so there the scan is what reaches it.
pub(crate) fn scan_is_cheaper(ef: usize, n: usize) -> bool {
    ef.saturating_mul(SCAN_ROWS_PER_EF) >= n
}

/// Rows the 8-bit scan re-scores with `f32` for a top `k`: 8-bit scores
/// rank the exact top 10 within their top 16 (measured on 100k random
/// 384-d vectors), so `4k` leaves a wide margin.
pub(crate) fn scan_rescored(k: usize) -> usize {
    (4 * k).max(k + 16)
}

/// Row filter of a search.
pub(crate) type Allowed<'a> = dyn Fn(u32) -> bool + Sync + 'a;

/// Row-major, normalised vectors.
#[derive(Clone, Copy)]
pub(crate) struct Rows<'a> {
    pub data: &'a [f32],
    pub dim: usize,
}

impl<'a> Rows<'a> {
    #[inline(always)]
    pub fn row(&self, i: u32) -> &'a [f32] {
        let i = i as usize;
        &self.data[i * self.dim..(i + 1) * self.dim]
    }
    pub fn len(&self) -> usize {
        self.data.len() / self.dim.max(1)
    }
}

/// 8-bit copies of the rows, used to build and walk the graph: a quarter of
/// the memory traffic of `f32`, and exact integer dot products (so the graph
/// is the same with or without SIMD). Search results are re-scored with the
/// `f32` vectors. Row `i` ≈ `codes[i] · scales[i]`, `scales[i] = max|x| / 127`.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Quantized {
    dim: usize,
    codes: Vec<i8>,
    scales: Vec<f32>,
}

/// A quantised query: codes and scale.
#[derive(Clone, Copy)]
pub(crate) struct Query<'a> {
    codes: &'a [i8],
    scale: f32,
}

fn quantize(v: &[f32], out: &mut [i8]) -> f32 {
    let max = v.iter().fold(0.0f32, |m, x| m.max(x.abs()));
    if max == 0.0 {
        out.iter_mut().for_each(|c| *c = 0);
        return 0.0;
    }
    let f = 127.0 / max;
    for (c, x) in out.iter_mut().zip(v) {
        *c = (x * f).round().clamp(-127.0, 127.0) as i8;
    }
    max / 127.0
}

impl Quantized {
    pub fn from_rows(rows: Rows) -> Quantized {
        let (n, dim) = (rows.len(), rows.dim);
        let mut codes = vec![0i8; n * dim];
        let mut scales = vec![0.0f32; n];
        codes
            .par_chunks_mut(dim.max(1))
            .zip(scales.par_iter_mut())
            .enumerate()
            .for_each(|(i, (c, s))| *s = quantize(rows.row(i as u32), c));
        Quantized { dim, codes, scales }
    }

    #[inline(always)]
    fn node(&self, i: u32) -> Query<'_> {
        let i = i as usize;
        Query { codes: &self.codes[i * self.dim..(i + 1) * self.dim], scale: self.scales[i] }
    }

    #[inline(always)]
    fn prefetch(&self, i: u32) {
        let i = i as usize;
        prefetch_bytes(&self.codes[i * self.dim..(i + 1) * self.dim]);
    }

    /// The `r` best rows passing `allowed` by 8-bit score, scanning every
    /// code (a quarter of the bytes of an `f32` scan), split over threads.
    fn scan(&self, q: Query, r: usize, allowed: Option<&Allowed<'_>>) -> Vec<Scored> {
        let dim = self.dim.max(1);
        let block = SCAN_BLOCK_ROWS * dim;
        self.codes
            .par_chunks(block)
            .enumerate()
            .fold(
                || (TopK::new(r), vec![0i32; SCAN_BLOCK_ROWS]),
                |(mut top, mut buf), (b, chunk)| {
                    let rows = chunk.len() / dim;
                    let first = b * SCAN_BLOCK_ROWS;
                    dot_rows_i8(q.codes, chunk, &mut buf[..rows]);
                    for (j, &d) in buf[..rows].iter().enumerate() {
                        let index = (first + j) as u32;
                        if allowed.is_none_or(|f| f(index)) {
                            top.push(Scored { score: d as f32 * (q.scale * self.scales[first + j]), index });
                        }
                    }
                    (top, buf)
                },
            )
            .map(|(top, _)| top)
            .reduce(|| TopK::new(r), TopK::merge)
            .into_sorted()
    }

    /// Approximate cosine similarity of `q` and row `i`.
    #[inline(always)]
    fn score(&self, q: Query, i: u32) -> f32 {
        let n = self.node(i);
        dot_i8(q.codes, n.codes) as f32 * (q.scale * n.scale)
    }
}

#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Hnsw {
    pub m: usize,
    pub m0: usize,
    pub ef_construction: usize,
    pub ef_search: usize,
    pub seed: u64,
    pub levels: Vec<u8>,
    /// `n × (m0 + 1)` words: `[count, neighbours..]` per node.
    pub layer0: Vec<u32>,
    /// Per node, `level × (m + 1)` words for levels `1..=level`.
    pub upper: Vec<Vec<u32>>,
    pub entry: u32,
    pub max_level: u8,
    /// Derived from the vectors (not saved).
    pub quant: Quantized,
}

/// SplitMix64.
pub(crate) struct SplitMix64(pub u64);

impl SplitMix64 {
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    /// Uniform in the open interval (0, 1).
    pub fn next_open01(&mut self) -> f64 {
        ((self.next_u64() >> 11) as f64 + 0.5) / (1u64 << 53) as f64
    }
}

/// Per-thread visited marks, reset in O(1) by bumping an epoch.
struct Visited {
    marks: Vec<u16>,
    epoch: u16,
}

impl Visited {
    fn prepare(&mut self, n: usize) {
        if self.marks.len() < n {
            self.marks.clear();
            self.marks.resize(n, 0);
            self.epoch = 0;
        }
        self.epoch = self.epoch.wrapping_add(1);
        if self.epoch == 0 {
            self.marks.iter_mut().for_each(|m| *m = 0);
            self.epoch = 1;
        }
    }
    /// Marks `i`; returns `true` when it was not marked yet.
    #[inline(always)]
    fn insert(&mut self, i: u32) -> bool {
        let m = &mut self.marks[i as usize];
        if *m == self.epoch {
            false
        } else {
            *m = self.epoch;
            true
        }
    }
}

thread_local! {
    static VISITED: RefCell<Visited> = const {
        RefCell::new(Visited { marks: Vec::new(), epoch: 0 })
    };
}

fn with_visited<R>(n: usize, f: impl FnOnce(&mut Visited) -> R) -> R {
    VISITED.with(|v| {
        let mut v = v.borrow_mut();
        v.prepare(n);
        f(&mut v)
    })
}

/// Sorts best first (higher score, then lower index).
fn sort_best_first(v: &mut [Scored]) {
    v.sort_by(|a, b| cmp_rank(b, a));
}

/// Heuristic neighbour selection over candidates sorted best first: keep a
/// candidate only if it is closer to the base than to every neighbour kept
/// so far.
fn select_heuristic(quant: &Quantized, cands: &[Scored], m: usize) -> Vec<u32> {
    let mut kept: Vec<u32> = Vec::with_capacity(m);
    for c in cands {
        if kept.len() >= m {
            break;
        }
        let cq = quant.node(c.index);
        if kept.iter().all(|&s| quant.score(cq, s) <= c.score) {
            kept.push(c.index);
        }
    }
    kept
}

impl Hnsw {
    pub fn len(&self) -> usize {
        self.levels.len()
    }

    #[inline(always)]
    pub fn neighbours(&self, node: u32, level: usize) -> &[u32] {
        if level == 0 {
            let base = node as usize * (self.m0 + 1);
            let c = self.layer0[base] as usize;
            &self.layer0[base + 1..base + 1 + c]
        } else {
            let list = &self.upper[node as usize];
            let base = (level - 1) * (self.m + 1);
            let c = list[base] as usize;
            &list[base + 1..base + 1 + c]
        }
    }

    fn set_neighbours(&mut self, node: u32, level: usize, links: &[u32]) {
        let (slot, cap) = if level == 0 {
            let base = node as usize * (self.m0 + 1);
            (&mut self.layer0[base..base + self.m0 + 1], self.m0)
        } else {
            let base = (level - 1) * (self.m + 1);
            (&mut self.upper[node as usize][base..base + self.m + 1], self.m)
        };
        assert!(links.len() <= cap);
        slot[0] = links.len() as u32;
        slot[1..1 + links.len()].copy_from_slice(links);
    }

    /// An empty graph over `n` nodes with seeded levels.
    fn empty(rows: Rows, m: usize, ef_construction: usize, ef_search: usize, seed: u64) -> Hnsw {
        let n = rows.len();
        let m = m.max(2);
        let m0 = 2 * m;
        let ml = 1.0 / (m as f64).ln();
        let mut rng = SplitMix64(seed);
        let levels: Vec<u8> = (0..n)
            .map(|_| {
                let l = (-rng.next_open01().ln() * ml).floor();
                l.min(MAX_LEVEL as f64) as u8
            })
            .collect();
        let upper = levels.iter().map(|&l| vec![0u32; l as usize * (m + 1)]).collect();
        Hnsw {
            m,
            m0,
            ef_construction: ef_construction.max(1),
            ef_search: ef_search.max(1),
            seed,
            levels,
            layer0: vec![0u32; n * (m0 + 1)],
            upper,
            entry: 0,
            max_level: 0,
            quant: Quantized::from_rows(rows),
        }
    }

    /// Greedy walk at one level towards `q`.
    fn greedy(&self, q: Query, mut cur: Scored, level: usize) -> Scored {
        loop {
            let mut moved = false;
            for &nb in self.neighbours(cur.index, level) {
                let s = Scored { score: self.quant.score(q, nb), index: nb };
                if better(&s, &cur) {
                    cur = s;
                    moved = true;
                }
            }
            if !moved {
                return cur;
            }
        }
    }

    /// Best-first search of one level; returns up to `ef` entries (unsorted)
    /// that pass `allowed`. Exploration goes through all nodes either way.
    fn search_level(
        &self,
        q: Query,
        entry_points: &[Scored],
        ef: usize,
        level: usize,
        allowed: Option<&Allowed<'_>>,
    ) -> Vec<Scored> {
        with_visited(self.len(), |visited| {
            let mut candidates: BinaryHeap<BestFirst> = BinaryHeap::with_capacity(ef * 2);
            let mut results: BinaryHeap<WorstFirst> = BinaryHeap::with_capacity(ef + 1);
            for &ep in entry_points {
                if visited.insert(ep.index) {
                    candidates.push(BestFirst(ep));
                    if allowed.is_none_or(|f| f(ep.index)) {
                        results.push(WorstFirst(ep));
                        if results.len() > ef {
                            results.pop();
                        }
                    }
                }
            }
            let mut fresh: Vec<u32> = Vec::with_capacity(self.m0);
            while let Some(BestFirst(c)) = candidates.pop() {
                if results.len() >= ef {
                    let worst = results.peek().expect("non-empty").0;
                    if c.score < worst.score {
                        break;
                    }
                }
                fresh.clear();
                for &nb in self.neighbours(c.index, level) {
                    if visited.insert(nb) {
                        self.quant.prefetch(nb);
                        fresh.push(nb);
                    }
                }
                for &nb in &fresh {
                    let s = Scored { score: self.quant.score(q, nb), index: nb };
                    if results.len() < ef || better(&s, &results.peek().expect("non-empty").0) {
                        candidates.push(BestFirst(s));
                        if allowed.is_none_or(|f| f(nb)) {
                            results.push(WorstFirst(s));
                            if results.len() > ef {
                                results.pop();
                            }
                        }
                    }
                }
            }
            results.into_iter().map(|w| w.0).collect()
        })
    }

    /// Entry point at level `down_to` for `q`: greedy descent from the top.
    fn descend(&self, q: Query, down_to: usize) -> Scored {
        let mut cur = Scored { score: self.quant.score(q, self.entry), index: self.entry };
        let mut l = self.max_level as usize;
        while l > down_to {
            cur = self.greedy(q, cur, l);
            l -= 1;
        }
        cur
    }

    /// Top `k` for a normalised query, best first: walks the graph with
    /// 8-bit scores, then re-scores the `ef` found rows with `f32`. When
    /// that walk would cost as much as scanning every 8-bit code
    /// ([`scan_is_cheaper`]), scans instead and re-scores the
    /// [`scan_rescored`] best.
    pub fn search(&self, rows: Rows, q: &[f32], k: usize, ef: usize, allowed: Option<&Allowed<'_>>) -> Vec<Scored> {
        if self.len() == 0 || k == 0 {
            return Vec::new();
        }
        let mut codes = vec![0i8; q.len()];
        let scale = quantize(q, &mut codes);
        let qq = Query { codes: &codes, scale };
        let mut found = if scan_is_cheaper(ef.max(k), self.len()) {
            self.quant.scan(qq, scan_rescored(k), allowed)
        } else {
            let ep = self.descend(qq, 0);
            self.search_level(qq, &[ep], ef.max(k), 0, allowed)
        };
        for s in found.iter_mut() {
            s.score = dot(q, rows.row(s.index));
        }
        sort_best_first(&mut found);
        found.truncate(k);
        found
    }

    /// Builds the graph over all rows (see the module docs).
    pub fn build(rows: Rows, m: usize, ef_construction: usize, ef_search: usize, seed: u64) -> Hnsw {
        let n = rows.len();
        let mut g = Hnsw::empty(rows, m, ef_construction, ef_search, seed);
        if n == 0 {
            return g;
        }
        g.entry = 0;
        g.max_level = g.levels[0];
        let mut start = 1usize;
        while start < n {
            let size = (start / 16).clamp(1, MAX_BATCH);
            let end = (start + size).min(n);
            g.insert_batch(start, end);
            start = end;
        }
        g
    }

    /// Neighbour lists (per level, index = level) for node `u`, searching
    /// the graph as it is plus the batch nodes `batch_start..u`.
    fn plan(&self, u: u32, batch_start: u32) -> Vec<Vec<u32>> {
        let q = self.quant.node(u);
        let lu = self.levels[u as usize] as usize;
        let max_level = self.max_level as usize;
        // Brute-force scores against earlier nodes of the same batch.
        let peers: Vec<Scored> = (batch_start..u).map(|v| Scored { score: self.quant.score(q, v), index: v }).collect();
        let ep = self.descend(q, lu);
        let mut eps = vec![ep];
        let mut out = vec![Vec::new(); lu + 1];
        for l in (0..=lu).rev() {
            let mut cands = if l <= max_level {
                let w = self.search_level(q, &eps, self.ef_construction, l, None);
                eps.clone_from(&w);
                w
            } else {
                Vec::new()
            };
            cands.extend(peers.iter().filter(|p| self.levels[p.index as usize] as usize >= l));
            sort_best_first(&mut cands);
            out[l] = select_heuristic(&self.quant, &cands, self.m);
        }
        out
    }

    fn insert_batch(&mut self, start: usize, end: usize) {
        let plans: Vec<Vec<Vec<u32>>> = {
            let this = &*self;
            (start as u32..end as u32).into_par_iter().map(|u| this.plan(u, start as u32)).collect()
        };
        // The new nodes' own links.
        let mut updates: Vec<(u8, u32, u32)> = Vec::new();
        for (i, levels) in plans.iter().enumerate() {
            let u = (start + i) as u32;
            for (l, links) in levels.iter().enumerate() {
                self.set_neighbours(u, l, links);
                updates.extend(links.iter().map(|&t| (l as u8, t, u)));
            }
        }
        // Reverse links, merged per (level, target).
        updates.sort_unstable();
        let mut groups: Vec<(usize, usize)> = Vec::new();
        let mut i = 0;
        while i < updates.len() {
            let mut j = i + 1;
            while j < updates.len() && updates[j].0 == updates[i].0 && updates[j].1 == updates[i].1 {
                j += 1;
            }
            groups.push((i, j));
            i = j;
        }
        let merged: Vec<(u8, u32, Vec<u32>)> = {
            let this = &*self;
            let updates = &updates;
            groups
                .par_iter()
                .map(|&(a, b)| {
                    let (l, t, _) = updates[a];
                    let existing = this.neighbours(t, l as usize);
                    let cap = if l == 0 { this.m0 } else { this.m };
                    let mut links: Vec<u32> = existing.to_vec();
                    links.extend(updates[a..b].iter().map(|x| x.2));
                    if links.len() > cap {
                        let tq = this.quant.node(t);
                        let mut cands: Vec<Scored> =
                            links.iter().map(|&x| Scored { score: this.quant.score(tq, x), index: x }).collect();
                        sort_best_first(&mut cands);
                        links = select_heuristic(&this.quant, &cands, cap);
                    }
                    (l, t, links)
                })
                .collect()
        };
        for (l, t, links) in merged {
            self.set_neighbours(t, l as usize, &links);
        }
        for u in start..end {
            if self.levels[u] > self.max_level {
                self.max_level = self.levels[u];
                self.entry = u as u32;
            }
        }
    }
}
