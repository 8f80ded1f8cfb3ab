//! Vector store benchmark (plain `fn main`, no criterion).
//!
//! Run with `cargo bench --bench vectors`. For each size (10k, 100k, 1M
//! vectors of dimension 384; `BENCH_MAX_N` caps the sizes) and each data set
//! it reports, as a markdown table on stdout:
//!
//! * exact search: collection build time (copy + normalisation) and query
//!   latency p50/p99 over `BENCH_QUERIES` (default 1000) queries, one query
//!   at a time (each query uses all rayon threads);
//! * HNSW: build time, then for the smallest `ef_search` of 16, 32, … 16384
//!   that reaches recall@10 ≥ 0.95 against exact search (tuned on the first
//!   200 queries, each step's recall and p50 printed on stderr), the latency
//!   p50/p99 and recall@10 over all queries; plus the same at the default
//!   `ef_search` (`HnswParams::default()`). "scan" marks an `ef_search` at which the index scans
//!   its 8-bit codes instead of walking the graph (`ef ≥ n / 100`).
//!
//! Data sets (`BENCH_DATA` = `gaussian`, `lowrank` or `both`, default both):
//!
//! * `gaussian`: i.i.d. N(0, 1) coordinates, normalised. Every point is
//!   almost equidistant from every other, the worst case for any ANN index
//!   (its intrinsic dimension is the full 384).
//! * `lowrank`: `A·z + 0.3·g` with a fixed random 384×32 matrix `A`,
//!   `z ~ N(0, I_32)` and i.i.d. noise `g ~ N(0, I_384/384·32)`, normalised:
//!   an intrinsic dimension of about 32, closer to real text embeddings.
//!
//! Queries are fresh draws from the same distribution (not copies of rows).
//! `BENCH_EF_CONSTRUCTION_1M` (default 200, like the smaller sizes) sets
//! `ef_construction` at 1M rows, to trade index quality for build time.

use std::collections::HashSet;
use std::hint::black_box;
use std::time::{Duration, Instant};

use graphrag_operations::leiden::SplitMix64;
use graphrag_vectors::{has_avx2_fma, Collection, Hit, HnswParams};
use rayon::prelude::*;

const DIM: usize = 384;
const RANK: usize = 32;
const TUNE_QUERIES: usize = 200;
const TARGET_RECALL: f64 = 0.95;

/// Seeded data: SplitMix64 (Leiden's), normal values by Box–Muller.
struct Rng(SplitMix64);

impl Rng {
    /// Uniform in the open interval (0, 1): Box–Muller takes its logarithm.
    fn unit(&mut self) -> f64 {
        ((self.0.next_u64() >> 11) as f64 + 0.5) / (1u64 << 53) as f64
    }
    fn gauss_pair(&mut self) -> (f32, f32) {
        let (u, v) = (self.unit(), self.unit());
        let r = (-2.0 * u.ln()).sqrt();
        let t = 2.0 * std::f64::consts::PI * v;
        ((r * t.cos()) as f32, (r * t.sin()) as f32)
    }
    fn fill_gauss(&mut self, out: &mut [f32]) {
        let mut it = out.chunks_exact_mut(2);
        for pair in &mut it {
            let (a, b) = self.gauss_pair();
            pair[0] = a;
            pair[1] = b;
        }
        for x in it.into_remainder() {
            *x = self.gauss_pair().0;
        }
    }
}

#[derive(Clone, Copy, PartialEq)]
enum Data {
    Gaussian,
    LowRank,
}

impl Data {
    fn name(self) -> &'static str {
        match self {
            Data::Gaussian => "gaussian",
            Data::LowRank => "lowrank",
        }
    }
}

/// Generator of one data set: row `i` of stream `stream` is a pure function
/// of (data set, stream, i), so data are identical whatever the threads.
struct Generator {
    data: Data,
    basis: Vec<f32>, // DIM × RANK
}

impl Generator {
    fn new(data: Data) -> Self {
        let mut rng = Rng(SplitMix64::new(0xBA5E));
        let mut basis = vec![0.0; DIM * RANK];
        rng.fill_gauss(&mut basis);
        Generator { data, basis }
    }

    fn row(&self, stream: u64, i: usize, out: &mut [f32]) {
        let mut rng =
            Rng(SplitMix64::new(stream.wrapping_mul(0x1000_0000_01B3) ^ (i as u64).wrapping_mul(0x9E37_79B9)));
        rng.0.next_u64();
        match self.data {
            Data::Gaussian => rng.fill_gauss(out),
            Data::LowRank => {
                let mut z = [0.0f32; RANK];
                rng.fill_gauss(&mut z);
                rng.fill_gauss(out);
                let noise = 0.3 * (RANK as f32 / DIM as f32).sqrt();
                for (d, o) in out.iter_mut().enumerate() {
                    let a = &self.basis[d * RANK..(d + 1) * RANK];
                    let s: f32 = a.iter().zip(&z).map(|(x, y)| x * y).sum();
                    *o = s + noise * *o;
                }
            }
        }
    }

    fn rows(&self, stream: u64, n: usize) -> Vec<f32> {
        let mut data = vec![0.0f32; n * DIM];
        data.par_chunks_mut(DIM).enumerate().for_each(|(i, row)| self.row(stream, i, row));
        data
    }
}

fn env_usize(name: &str, default: usize) -> usize {
    match std::env::var(name) {
        Ok(v) => v.trim().replace('_', "").parse().unwrap_or_else(|_| panic!("{name} must be a number, got `{v}`")),
        Err(_) => default,
    }
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

fn percentiles(mut v: Vec<Duration>) -> (f64, f64) {
    v.sort();
    let p = |q: f64| ms(v[((v.len() as f64 * q) as usize).min(v.len() - 1)]);
    (p(0.50), p(0.99))
}

fn recall(truth: &[Vec<Hit>], got: &[Vec<Hit>]) -> f64 {
    let mut hit = 0usize;
    let mut total = 0usize;
    for (t, g) in truth.iter().zip(got) {
        let set: HashSet<usize> = t.iter().map(|h| h.index).collect();
        hit += g.iter().filter(|h| set.contains(&h.index)).count();
        total += t.len();
    }
    hit as f64 / total.max(1) as f64
}

/// Runs every query one at a time; returns the results and latencies.
fn run(queries: &[Vec<f32>], f: impl Fn(&[f32]) -> Vec<Hit>) -> (Vec<Vec<Hit>>, Vec<Duration>) {
    let mut out = Vec::with_capacity(queries.len());
    let mut times = Vec::with_capacity(queries.len());
    for q in queries {
        let t = Instant::now();
        let hits = black_box(f(black_box(q)));
        times.push(t.elapsed());
        out.push(hits);
    }
    (out, times)
}

fn secs(d: Duration) -> String {
    if d.as_secs_f64() >= 1.0 {
        format!("{:.1} s", d.as_secs_f64())
    } else {
        format!("{:.0} ms", ms(d))
    }
}

fn main() {
    let max_n = env_usize("BENCH_MAX_N", 1_000_000);
    let n_queries = env_usize("BENCH_QUERIES", 1000).max(TUNE_QUERIES);
    let efc_1m = env_usize("BENCH_EF_CONSTRUCTION_1M", 200);
    let datasets: Vec<Data> = match std::env::var("BENCH_DATA").as_deref() {
        Ok("gaussian") => vec![Data::Gaussian],
        Ok("lowrank") => vec![Data::LowRank],
        Ok("both") | Err(_) => vec![Data::Gaussian, Data::LowRank],
        Ok(other) => panic!("BENCH_DATA must be gaussian, lowrank or both, got `{other}`"),
    };
    let sizes: Vec<usize> = [10_000, 100_000, 1_000_000].into_iter().filter(|&n| n <= max_n).collect();
    eprintln!(
        "dim {DIM}, {} rayon threads, AVX2+FMA: {}, {n_queries} queries, k = 10",
        rayon::current_num_threads(),
        has_avx2_fma()
    );
    println!("| n | data | method | build | p50 | p99 | recall@10 |");
    println!("|---|---|---|---|---|---|---|");
    for &n in &sizes {
        for &data in &datasets {
            let generator = Generator::new(data);
            let raw = generator.rows(1, n);
            let queries: Vec<Vec<f32>> = {
                let flat = generator.rows(2, n_queries);
                flat.chunks_exact(DIM).map(<[f32]>::to_vec).collect()
            };
            let ids: Vec<String> = (0..n).map(|i| format!("row-{i}")).collect();
            let t = Instant::now();
            let mut c = Collection::from_flat(ids, DIM, raw).expect("valid data");
            let load = t.elapsed();

            let (truth, times) = run(&queries, |q| c.exact_search(q, 10, None).unwrap());
            let (p50, p99) = percentiles(times);
            println!("| {n} | {} | exact | {} (normalise) | {p50:.3} ms | {p99:.3} ms | 1 |", data.name(), secs(load));

            let efc = if n >= 1_000_000 { efc_1m } else { 200 };
            let params = HnswParams { ef_construction: efc, ..HnswParams::default() };
            let t = Instant::now();
            c.build_ann(&params);
            let build = t.elapsed();
            eprintln!("n={n} {}: HNSW build {:?}", data.name(), build);

            let tune = &queries[..TUNE_QUERIES];
            let mut chosen = None;
            for ef in [16usize, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384] {
                let (got, times) = run(tune, |q| c.ann_search(q, 10, ef, None).unwrap());
                let r = recall(&truth[..TUNE_QUERIES], &got);
                eprintln!("  ef_search {ef}: recall@10 {r:.4}, p50 {:.3} ms (tuning queries)", percentiles(times).0);
                if r >= TARGET_RECALL {
                    chosen = Some(ef);
                    break;
                }
            }
            // The default ef_search, then the tuned one (or the largest tried).
            let default_ef = HnswParams::default().ef_search;
            let mut efs = vec![default_ef];
            let last = chosen.unwrap_or(16384);
            if last != default_ef {
                efs.push(last);
            }
            for ef in efs {
                let (got, times) = run(&queries, |q| c.ann_search(q, 10, ef, None).unwrap());
                let (p50, p99) = percentiles(times);
                let r = recall(&truth, &got);
                let mode = if c.ann_scans(ef, 10) { " (scan)" } else { "" };
                println!(
                    "| {n} | {} | HNSW M=16 efC={efc} ef={ef}{mode} | {} | {p50:.3} ms | {p99:.3} ms | {r:.3} |",
                    data.name(),
                    secs(build)
                );
            }
            if chosen.is_none() {
                eprintln!("n={n} {}: recall@10 < {TARGET_RECALL} up to ef_search 16384", data.name());
            }
        }
    }
}
