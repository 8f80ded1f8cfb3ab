use std::collections::HashSet;

use super::*;
use crate::hnsw::SplitMix64;

/// Seeded test data: the index's own SplitMix64, normal values by Box–Muller.
struct Rng(SplitMix64);

impl Rng {
    fn below(&mut self, n: usize) -> usize {
        (self.0.next_u64() % n as u64) as usize
    }
    fn gauss(&mut self) -> f32 {
        let (u, v) = (self.0.next_open01(), self.0.next_open01());
        ((-2.0 * u.ln()).sqrt() * (2.0 * std::f64::consts::PI * v).cos()) as f32
    }
    fn vector(&mut self, dim: usize) -> Vec<f32> {
        (0..dim).map(|_| self.gauss()).collect()
    }
}

fn random_collection(rng: &mut Rng, n: usize, dim: usize) -> Collection {
    let ids = (0..n).map(|i| format!("id-{i}")).collect();
    let vectors = (0..n).map(|_| rng.vector(dim)).collect();
    Collection::new(ids, vectors).unwrap()
}

/// Brute force: score every allowed row with the crate's dot product,
/// sort everything, take k.
fn reference(c: &Collection, query: &[f32], k: usize, allowed: Option<&HashSet<usize>>) -> Vec<Hit> {
    let q = c.prepare_query(query).unwrap();
    let mut all: Vec<Hit> = (0..c.len())
        .filter(|i| allowed.is_none_or(|a| a.contains(i)))
        .map(|i| Hit { index: i, id: c.ids()[i].clone(), score: simd::dot(&q, c.vector(i)) })
        .collect();
    all.sort_by(|a, b| b.score.total_cmp(&a.score).then(a.index.cmp(&b.index)));
    all.truncate(k);
    all
}

fn recall(exact: &[Hit], approx: &[Hit]) -> f64 {
    let truth: HashSet<usize> = exact.iter().map(|h| h.index).collect();
    approx.iter().filter(|h| truth.contains(&h.index)).count() as f64 / exact.len().max(1) as f64
}

#[test]
fn exact_matches_brute_force_with_ties_and_large_k() {
    let mut rng = Rng(SplitMix64(1));
    // 3000 × 96 is above the parallel threshold; 50 × 8 is below it.
    for &(n, dim) in &[(50usize, 8usize), (3000, 96), (700, 384)] {
        let mut vectors: Vec<Vec<f32>> = (0..n).map(|_| rng.vector(dim)).collect();
        // Ties: copies of earlier rows (same scores, lower index must win),
        // and scaled copies (same direction).
        for i in (0..n).step_by(7) {
            let src = rng.below(n);
            vectors[i] = vectors[src].clone();
        }
        for i in (3..n).step_by(11) {
            vectors[i] = vectors[i - 3].iter().map(|x| x * 2.0).collect();
        }
        let ids = (0..n).map(|i| format!("n{i}")).collect();
        let c = Collection::new(ids, vectors).unwrap();
        for qi in 0..20 {
            let query = if qi % 4 == 0 { c.vector(rng.below(n)).to_vec() } else { rng.vector(dim) };
            for &k in &[1usize, 10, 37, n, n + 5] {
                let got = c.exact_search(&query, k, None).unwrap();
                let want = reference(&c, &query, k, None);
                assert_eq!(got.len(), k.min(n));
                assert_eq!(got, want, "n={n} dim={dim} k={k}");
            }
        }
    }
}

#[test]
fn exact_filtering_by_allowed_set() {
    let mut rng = Rng(SplitMix64(2));
    let c = random_collection(&mut rng, 2000, 160);
    let query = rng.vector(160);
    let mut allowed: HashSet<usize> = (0..2000).filter(|i| i % 3 == 0).collect();
    allowed.insert(5000); // out of range: ignored
    for &k in &[1usize, 10, 700, 1000] {
        let got = c.exact_search(&query, k, Some(&allowed)).unwrap();
        assert!(got.iter().all(|h| h.index % 3 == 0 && h.index < 2000));
        assert_eq!(got, reference(&c, &query, k, Some(&allowed)));
    }
    let empty = HashSet::new();
    assert!(c.exact_search(&query, 10, Some(&empty)).unwrap().is_empty());
    let one: HashSet<usize> = [17].into_iter().collect();
    let got = c.exact_search(&query, 10, Some(&one)).unwrap();
    assert_eq!(got.len(), 1);
    assert_eq!(got[0].id, "id-17");
    assert_eq!(c.index_of("id-17"), Some(17));
    assert_eq!(c.index_of("nope"), None);
}

#[test]
fn dimension_mismatch_names_the_setting() {
    let mut rng = Rng(SplitMix64(3));
    let c = random_collection(&mut rng, 10, 8);
    let err = c.exact_search(&[1.0; 4], 3, None).unwrap_err();
    assert_eq!(err, VectorError::DimensionMismatch { expected: 8, got: 4 });
    let msg = err.to_string();
    assert!(msg.contains("another embedding model"), "{msg}");
    assert!(msg.contains("`embed_text.embedding_model_id`"), "{msg}");
    assert!(msg.contains("graphrag-rs index"), "{msg}");
    assert!(msg.contains('8') && msg.contains('4'), "{msg}");
    let store = EmbeddedStore::new(c, 5, HnswParams::default());
    assert!(store.uses_ann());
    assert!(matches!(store.search(&[0.0; 9], 1, None), Err(VectorError::DimensionMismatch { expected: 8, got: 9 })));
}

#[test]
fn construction_errors() {
    assert_eq!(Collection::new(vec![], vec![]).unwrap_err(), VectorError::Empty);
    assert!(matches!(Collection::new(vec!["a".into()], vec![]), Err(VectorError::Corrupt(_))));
    let e = Collection::new(vec!["a".into(), "b".into()], vec![vec![1.0, 2.0], vec![1.0]]).unwrap_err();
    assert!(matches!(&e, VectorError::Corrupt(m) if m.contains("`b`")), "{e}");
    let e = Collection::new(vec!["a".into()], vec![vec![f32::NAN, 1.0]]).unwrap_err();
    assert!(matches!(e, VectorError::Corrupt(_)));
    let e = Collection::new(vec!["a".into()], vec![vec![]]).unwrap_err();
    assert!(matches!(e, VectorError::Corrupt(_)));
    // An empty collection with a known dimension is searchable.
    let c = Collection::from_flat(vec![], 4, vec![]).unwrap();
    assert!(c.is_empty());
    assert!(c.exact_search(&[1.0; 4], 5, None).unwrap().is_empty());
    assert!(c.exact_search(&[1.0; 3], 5, None).is_err());
    // Huge values are normalised without overflow.
    let c = Collection::new(vec!["a".into()], vec![vec![f32::MAX, f32::MAX]]).unwrap();
    assert!((c.vector(0)[0] - std::f32::consts::FRAC_1_SQRT_2).abs() < 1e-6);
    assert!(matches!(c.exact_search(&[f32::INFINITY, 0.0], 1, None), Err(VectorError::Corrupt(_))));
}

#[test]
fn zero_vectors_stay_zero() {
    let ids: Vec<String> = (0..5).map(|i| i.to_string()).collect();
    let vectors =
        vec![vec![0.0, 0.0, 0.0], vec![3.0, 0.0, 0.0], vec![0.0, 0.0, 0.0], vec![-1.0, 0.0, 0.0], vec![0.0, 2.0, 0.0]];
    let mut c = Collection::new(ids, vectors).unwrap();
    assert_eq!(c.vector(0), &[0.0, 0.0, 0.0]);
    assert_eq!(c.vector(1), &[1.0, 0.0, 0.0]);
    let hits = c.exact_search(&[1.0, 0.0, 0.0], 5, None).unwrap();
    let order: Vec<usize> = hits.iter().map(|h| h.index).collect();
    assert_eq!(order, vec![1, 0, 2, 4, 3]);
    assert_eq!(hits[1].score, 0.0);
    assert_eq!(hits[4].score, -1.0);
    // A zero query scores 0 everywhere: lowest indexes first.
    let hits = c.exact_search(&[0.0, 0.0, 0.0], 3, None).unwrap();
    assert_eq!(hits.iter().map(|h| h.index).collect::<Vec<_>>(), vec![0, 1, 2]);
    assert!(hits.iter().all(|h| h.score == 0.0));
    c.build_ann(&HnswParams::default());
    let hits = c.ann_search(&[1.0, 0.0, 0.0], 5, 10, None).unwrap();
    assert_eq!(hits.iter().map(|h| h.index).collect::<Vec<_>>(), vec![1, 0, 2, 4, 3]);
}

#[test]
fn hnsw_build_is_deterministic() {
    let mut rng = Rng(SplitMix64(4));
    let c = random_collection(&mut rng, 1500, 32);
    let params = HnswParams { m: 8, ef_construction: 40, ..HnswParams::default() };
    let mut a = c.clone();
    a.build_ann(&params);
    let mut b = c.clone();
    let pool = rayon::ThreadPoolBuilder::new().num_threads(1).build().unwrap();
    pool.install(|| b.build_ann(&params));
    let mut d = c.clone();
    let pool = rayon::ThreadPoolBuilder::new().num_threads(3).build().unwrap();
    pool.install(|| d.build_ann(&params));
    let bytes = a.ann_to_bytes().unwrap();
    assert_eq!(bytes, b.ann_to_bytes().unwrap());
    assert_eq!(bytes, d.ann_to_bytes().unwrap());
    // Another seed gives another graph.
    let mut e = c.clone();
    e.build_ann(&HnswParams { seed: 99, ..params.clone() });
    assert_ne!(bytes, e.ann_to_bytes().unwrap());
}

#[test]
fn ann_bytes_round_trip_and_rejection() {
    let mut rng = Rng(SplitMix64(5));
    let plain = random_collection(&mut rng, 2000, 48);
    let mut built = plain.clone();
    assert!(built.ann_to_bytes().is_none());
    built.build_ann(&HnswParams { m: 12, ef_construction: 60, ..HnswParams::default() });
    let bytes = built.ann_to_bytes().unwrap();
    assert_eq!(&bytes[..8], b"GRVHNSW\0");

    let mut loaded = plain.clone();
    loaded.load_ann(&bytes).unwrap();
    assert!(loaded.has_ann());
    assert_eq!(loaded.ann_to_bytes().unwrap(), bytes);
    let allowed: HashSet<usize> = (0..2000).filter(|i| i % 2 == 1).collect();
    // A small ef, so that the searches walk the loaded graph.
    let ef = 16;
    assert!(!hnsw::scan_is_cheaper(ef, 2000));
    for _ in 0..30 {
        let q = rng.vector(48);
        assert_eq!(built.ann_search(&q, 10, ef, None).unwrap(), loaded.ann_search(&q, 10, ef, None).unwrap());
        assert_eq!(
            built.ann_search(&q, 10, ef, Some(&allowed)).unwrap(),
            loaded.ann_search(&q, 10, ef, Some(&allowed)).unwrap()
        );
    }

    let rejected = |b: &[u8]| {
        let mut c = plain.clone();
        let r = c.load_ann(b);
        assert!(!c.has_ann());
        r.unwrap_err()
    };
    // Flipped bits anywhere (header, levels, links, checksum).
    for pos in [3usize, 9, 20, 60, 80, bytes.len() / 2, bytes.len() - 1] {
        let mut bad = bytes.clone();
        bad[pos] ^= 0x10;
        assert!(matches!(rejected(&bad), VectorError::Corrupt(_)), "pos {pos}");
    }
    assert!(matches!(rejected(&bytes[..bytes.len() - 9]), VectorError::Corrupt(_)));
    assert!(matches!(rejected(&bytes[..10]), VectorError::Corrupt(_)));
    assert!(matches!(rejected(b""), VectorError::Corrupt(_)));
    let mut v2 = bytes.clone();
    v2[8] = 2;
    assert!(matches!(rejected(&v2), VectorError::Corrupt(m) if m.contains("version")));

    // Saved for another collection: other ids, other vectors, other count.
    let mut other_ids = plain.ids().to_vec();
    other_ids.swap(0, 1);
    let vecs: Vec<Vec<f32>> = (0..2000).map(|i| plain.vector(i).to_vec()).collect();
    let mut c = Collection::new(other_ids, vecs.clone()).unwrap();
    let e = c.load_ann(&bytes).unwrap_err();
    assert!(matches!(&e, VectorError::Corrupt(m) if m.contains("ids")), "{e}");
    let mut vecs2 = vecs.clone();
    vecs2[0][0] += 0.5;
    let mut c = Collection::new(plain.ids().to_vec(), vecs2).unwrap();
    let e = c.load_ann(&bytes).unwrap_err();
    assert!(matches!(&e, VectorError::Corrupt(m) if m.contains("vectors")), "{e}");
    let mut c = Collection::new(plain.ids()[..1999].to_vec(), vecs[..1999].to_vec()).unwrap();
    assert!(matches!(c.load_ann(&bytes), Err(VectorError::Corrupt(_))));
    let mut c = random_collection(&mut rng, 2000, 24);
    assert!(matches!(c.load_ann(&bytes), Err(VectorError::Corrupt(m)) if m.contains("dimension")));
}

/// Mean recall@10 of `ann_search(ef)` against exact search.
fn mean_recall(c: &Collection, queries: &[Vec<f32>], ef: usize) -> f64 {
    let mut total = 0.0;
    for q in queries {
        let exact = c.exact_search(q, 10, None).unwrap();
        let approx = c.ann_search(q, 10, ef, None).unwrap();
        assert_eq!(approx.len(), 10);
        // Scores of the hits are exact cosine similarities.
        for h in &approx {
            let s = simd::dot(&c.prepare_query(q).unwrap(), c.vector(h.index));
            assert_eq!(h.score, s);
        }
        total += recall(&exact, &approx);
    }
    total / queries.len() as f64
}

#[test]
fn hnsw_recall_at_10() {
    // 10k × 384 (the crate is optimised in test builds too, see Cargo.toml).
    let n = 10_000;
    let dim = 384;
    let mut rng = Rng(SplitMix64(6));

    // I.i.d. Gaussian vectors: every point is nearly equidistant from every
    // other (intrinsic dimension 384), the worst case for a graph index: the
    // walk needs an ef of thousands, so a large ef scans the 8-bit codes.
    let mut c = random_collection(&mut rng, n, dim);
    c.build_ann(&HnswParams::default());
    let queries: Vec<Vec<f32>> = (0..100).map(|_| rng.vector(dim)).collect();
    let ef = n / 100;
    assert!(hnsw::scan_is_cheaper(ef, n));
    let r = mean_recall(&c, &queries, ef);
    eprintln!("recall@10 on {n}x{dim} gaussian, ef {ef} (8-bit scan): {r:.4}");
    assert!(r >= 0.95, "gaussian recall@10 = {r}");

    // Low intrinsic dimension (A·z + noise, z in R^32), like real text
    // embeddings: walking the graph with an ef_search of 64 suffices here.
    let rank = 32;
    let basis: Vec<f32> = rng.vector(dim * rank);
    let low_rank = |rng: &mut Rng| -> Vec<f32> {
        let z = rng.vector(rank);
        let noise = rng.vector(dim);
        (0..dim)
            .map(|d| {
                let a = &basis[d * rank..(d + 1) * rank];
                a.iter().zip(&z).map(|(x, y)| x * y).sum::<f32>() + 0.09 * noise[d]
            })
            .collect()
    };
    let ids = (0..n).map(|i| format!("id-{i}")).collect();
    let vectors = (0..n).map(|_| low_rank(&mut rng)).collect();
    let mut c = Collection::new(ids, vectors).unwrap();
    c.build_ann(&HnswParams::default());
    let queries: Vec<Vec<f32>> = (0..100).map(|_| low_rank(&mut rng)).collect();
    let ef = 64;
    assert!(!hnsw::scan_is_cheaper(ef, n));
    let r = mean_recall(&c, &queries, ef);
    eprintln!("recall@10 on {n}x{dim} low-rank, ef {ef} (graph walk): {r:.4}");
    assert!(r >= 0.95, "low-rank recall@10 = {r}");
}

#[test]
fn ann_with_filter() {
    let mut rng = Rng(SplitMix64(7));
    let n = 8000;
    let mut c = random_collection(&mut rng, n, 32);
    c.build_ann(&HnswParams::default());
    // Large allowed set: graph walk (filtered searches double ef) or 8-bit
    // scan, both keeping allowed rows only.
    let big: HashSet<usize> = (0..n).filter(|i| i % 5 != 0).collect();
    let (walk_ef, scan_ef) = (32, n / 100);
    assert!(!hnsw::scan_is_cheaper(2 * walk_ef, n) && hnsw::scan_is_cheaper(2 * scan_ef, n));
    // Small allowed set: exact fallback.
    let small: HashSet<usize> = (0..n).filter(|i| i % 97 == 0).collect();
    let (mut walk_total, mut scan_total) = (0.0, 0.0);
    for _ in 0..50 {
        let q = rng.vector(32);
        let exact = c.exact_search(&q, 10, Some(&big)).unwrap();
        for (ef, total) in [(walk_ef, &mut walk_total), (scan_ef, &mut scan_total)] {
            let got = c.ann_search(&q, 10, ef, Some(&big)).unwrap();
            assert_eq!(got.len(), 10);
            assert!(got.iter().all(|h| big.contains(&h.index)));
            *total += recall(&exact, &got);
        }
        assert_eq!(c.ann_search(&q, 10, 64, Some(&small)).unwrap(), c.exact_search(&q, 10, Some(&small)).unwrap());
    }
    assert!(walk_total / 50.0 >= 0.95, "filtered walk recall {}", walk_total / 50.0);
    assert!(scan_total / 50.0 >= 0.95, "filtered scan recall {}", scan_total / 50.0);
}

#[test]
fn embedded_store_switches_on_threshold() {
    let mut rng = Rng(SplitMix64(8));
    let c = random_collection(&mut rng, 500, 16);
    let small = EmbeddedStore::new(c.clone(), 1000, HnswParams::default());
    assert!(!small.uses_ann() && !small.collection().has_ann());
    let q = rng.vector(16);
    assert_eq!(small.search(&q, 5, None).unwrap(), c.exact_search(&q, 5, None).unwrap());
    let big = EmbeddedStore::new(c.clone(), 100, HnswParams::default());
    assert!(big.uses_ann());
    assert_eq!(big.len(), 500);
    assert_eq!(big.dimension(), 16);
    let hits = big.search(&q, 5, None).unwrap();
    assert_eq!(hits.len(), 5);
    // A loaded index is used instead of building one.
    let bytes = big.collection().ann_to_bytes().unwrap();
    let mut c2 = c.clone();
    c2.load_ann(&bytes).unwrap();
    let loaded = EmbeddedStore::new(c2, 100, HnswParams::default());
    assert_eq!(loaded.search(&q, 5, None).unwrap(), hits);
    // Trait object use.
    let store: Box<dyn VectorStore> = Box::new(loaded);
    assert!(!store.is_empty());
    assert_eq!(store.search(&q, 0, None).unwrap(), vec![]);
}
