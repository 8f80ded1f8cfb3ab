//! Tests of the Leiden module: graph building, metrics, the algorithm's
//! guarantees (connected communities, determinism), quality on karate,
//! planted partitions and (when present) the shared LFR graphs, and the
//! hierarchy invariants.

use std::path::{Path, PathBuf};

use proptest::prelude::*;

use super::optimise::{self, testing};
use super::*;

const KARATE_EDGES: &str = include_str!("../../fixtures/leiden/karate/edges.csv");
const KARATE_COMMUNITIES: &str = include_str!("../../fixtures/leiden/karate/communities.csv");

/// Parses `a,b[,...]` rows after a header into pairs of integers.
fn parse_pairs(text: &str) -> Vec<(usize, usize)> {
    text.lines()
        .skip(1)
        .filter(|l| !l.trim().is_empty())
        .map(|l| {
            let mut it = l.split(',');
            let a = it.next().unwrap().trim().parse().unwrap();
            let b = it.next().unwrap().trim().parse().unwrap();
            (a, b)
        })
        .collect()
}

fn karate() -> (Graph, Vec<usize>) {
    let edges: Vec<(usize, usize, f64)> = parse_pairs(KARATE_EDGES).into_iter().map(|(a, b)| (a, b, 1.0)).collect();
    let truth: Vec<usize> = parse_pairs(KARATE_COMMUNITIES).into_iter().map(|(_, c)| c).collect();
    (Graph::from_edges(34, &edges), truth)
}

fn planted_1000(seed: u64, mu: f64) -> PlantedGraph {
    planted_partition(&[50; 20], 12.0, mu, seed)
}

/// Checks that `part` is a normalised partition: ids `0..k` by smallest node.
fn assert_normalised(part: &[usize]) {
    let mut next = 0;
    for &c in part {
        assert!(c <= next, "ids must appear in order of smallest member");
        if c == next {
            next += 1;
        }
    }
}

fn shared_graphs() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../shared/eval/graphs")
}

// ---------------------------------------------------------------- graph

#[test]
fn from_edges_merges_duplicates_and_keeps_self_loops() {
    let g = Graph::from_edges(4, &[(0, 1, 1.0), (1, 0, 2.0), (1, 2, 0.5), (2, 2, 1.5), (2, 3, 0.0)]);
    assert_eq!(g.num_nodes(), 4);
    assert_eq!(g.num_edges(), 3);
    assert_eq!(g.total_weight(), 3.0 + 0.5 + 1.5);
    assert_eq!(g.neighbors(0), (&[1usize][..], &[3.0][..]));
    assert_eq!(g.neighbors(1), (&[0usize, 2][..], &[3.0, 0.5][..]));
    assert_eq!(g.strength(2), 0.5 + 3.0);
    assert_eq!(g.strength(3), 0.0, "the zero-weight edge is dropped");
    let sum: f64 = (0..4).map(|v| g.strength(v)).sum();
    assert_eq!(sum, 2.0 * g.total_weight());
}

#[test]
#[should_panic(expected = "outside")]
fn from_edges_rejects_out_of_range_nodes() {
    Graph::from_edges(2, &[(0, 2, 1.0)]);
}

#[test]
#[should_panic(expected = "weights must be finite")]
fn from_edges_rejects_negative_weights() {
    Graph::from_edges(2, &[(0, 1, -1.0)]);
}

#[test]
fn aggregation_preserves_modularity_and_weight() {
    let p = planted_1000(3, 0.3);
    let g = Graph::from_edges(p.num_nodes, &p.edges);
    let mut part = p.truth.clone();
    let k = optimise::normalise(&mut part);
    let agg = g.aggregate(&part, k);
    assert_eq!(agg.num_nodes(), k);
    assert!((agg.total_weight() - g.total_weight()).abs() < 1e-9);
    let singletons: Vec<usize> = (0..k).collect();
    let q_agg = modularity(&agg, &singletons, 1.0);
    let q = modularity(&g, &part, 1.0);
    assert!((q - q_agg).abs() < 1e-12, "{q} vs {q_agg}");
    // Aggregating again, into a single node, keeps everything as a self-loop.
    let one = agg.aggregate(&vec![0; k], 1);
    assert!((one.self_loops[0] - g.total_weight()).abs() < 1e-9);
    assert!(modularity(&one, &[0], 1.0).abs() < 1e-12);
}

#[test]
fn largest_component_breaks_ties_by_smallest_node() {
    // Components {0,1}, {2,3,4}, {5,6,7}, {8}: the first of size 3 wins.
    let g = Graph::from_edges(9, &[(0, 1, 1.0), (5, 6, 1.0), (6, 7, 1.0), (2, 3, 1.0), (3, 4, 1.0)]);
    assert_eq!(g.largest_component(), vec![2, 3, 4]);
    assert_eq!(Graph::from_edges(3, &[]).largest_component(), vec![0]);
    assert!(Graph::from_edges(0, &[]).largest_component().is_empty());
}

// ---------------------------------------------------------------- metrics

#[test]
fn modularity_matches_known_values() {
    let (g, truth) = karate();
    // networkx: modularity of the club split, unweighted (meta.json).
    assert!((modularity(&g, &truth, 1.0) - 0.358235).abs() < 1e-6);
    // One community: 0 at resolution 1; 1 - γ in general.
    assert!(modularity(&g, &[0; 34], 1.0).abs() < 1e-12);
    assert!((modularity(&g, &[0; 34], 0.5) - 0.5).abs() < 1e-12);
    // Two disjoint triangles split apart: 2 * (3/6 - (6/12)^2) = 0.5.
    let t = Graph::from_edges(6, &[(0, 1, 1.0), (1, 2, 1.0), (0, 2, 1.0), (3, 4, 1.0), (4, 5, 1.0), (3, 5, 1.0)]);
    assert!((modularity(&t, &[0, 0, 0, 1, 1, 1], 1.0) - 0.5).abs() < 1e-12);
    // A self-loop counts once in W_in and twice in the strength:
    // one node, loop of weight 2 → W_in/m = 1, (K/2m)^2 = 1.
    let l = Graph::from_edges(1, &[(0, 0, 2.0)]);
    assert!(modularity(&l, &[0], 1.0).abs() < 1e-12);
    assert_eq!(modularity(&Graph::from_edges(3, &[]), &[0, 1, 2], 1.0), 0.0);
    assert_eq!(modularity(&Graph::from_edges(0, &[]), &[], 1.0), 0.0);
}

#[test]
fn nmi_properties() {
    let a = [0, 0, 1, 1, 2, 2];
    assert!((nmi(&a, &a) - 1.0).abs() < 1e-12);
    assert!((nmi(&a, &[7, 7, 3, 3, 9, 9]) - 1.0).abs() < 1e-12);
    assert_eq!(nmi(&a, &[0; 6]), 0.0);
    assert_eq!(nmi(&[0; 4], &[5; 4]), 1.0);
    assert_eq!(nmi(&[], &[]), 1.0);
    // scikit-learn normalized_mutual_info_score([0,0,1,1], [0,0,0,1]).
    let v = nmi(&[0, 0, 1, 1], &[0, 0, 0, 1]);
    assert!((v - 0.343_711_018_485_450_8).abs() < 1e-9, "{v}");
    assert!((nmi(&[0, 0, 0, 1], &[0, 0, 1, 1]) - v).abs() < 1e-15);
}

#[test]
fn connectivity_check() {
    let g = Graph::from_edges(4, &[(0, 1, 1.0), (2, 3, 1.0)]);
    assert!(communities_connected(&g, &[0, 0, 1, 1]));
    assert!(!communities_connected(&g, &[0, 1, 0, 1]));
    assert!(communities_connected(&g, &[0, 1, 2, 3]));
    assert!(!communities_connected(&g, &[0, 0, 0, 0]));
}

// ---------------------------------------------------------------- leiden

#[test]
fn karate_reaches_near_optimal_modularity() {
    let (g, truth) = karate();
    let cfg = LeidenConfig::default();
    let (part, stats) = optimise::run(&g, &cfg);
    let q = modularity(&g, &part, 1.0);
    let k = part.iter().max().unwrap() + 1;
    println!("karate: modularity {q:.5}, {k} communities, NMI vs club split {:.3}, {stats:?}", nmi(&part, &truth));
    assert!(q >= 0.415, "modularity {q}");
    assert!(communities_connected(&g, &part));
    assert_eq!(stats.splits, 0);
    assert_eq!(stats.refinement_stalls, 0);
    assert_normalised(&part);
    // Most seeds should find (close to) the optimum too.
    let mut good = 0;
    for seed in 0..20 {
        let p = leiden(&g, &LeidenConfig { seed, ..cfg.clone() });
        if modularity(&g, &p, 1.0) >= 0.415 {
            good += 1;
        }
    }
    println!("karate: {good}/20 seeds reach 0.415");
    assert!(good >= 15, "{good}/20 seeds reach 0.415");
}

#[test]
fn degenerate_graphs() {
    let cfg = LeidenConfig::default();
    assert!(leiden(&Graph::from_edges(0, &[]), &cfg).is_empty());
    // No edges: every node alone.
    assert_eq!(leiden(&Graph::from_edges(4, &[]), &cfg), vec![0, 1, 2, 3]);
    // Only zero-weight edges: the same.
    assert_eq!(leiden(&Graph::from_edges(3, &[(0, 1, 0.0), (1, 2, 0.0)]), &cfg), vec![0, 1, 2]);
    // Only self-loops.
    assert_eq!(leiden(&Graph::from_edges(3, &[(0, 0, 1.0), (2, 2, 1.0)]), &cfg), vec![0, 1, 2]);
    // A single edge plus an isolated node.
    assert_eq!(leiden(&Graph::from_edges(3, &[(0, 2, 1.0)]), &cfg), vec![0, 1, 0]);
    // Two triangles joined by one edge, and an isolated node in between.
    let g = Graph::from_edges(
        7,
        &[(0, 1, 1.0), (1, 2, 1.0), (0, 2, 1.0), (4, 5, 1.0), (5, 6, 1.0), (4, 6, 1.0), (2, 4, 1.0)],
    );
    assert_eq!(leiden(&g, &cfg), vec![0, 0, 0, 1, 2, 2, 2]);
}

#[test]
fn planted_partition_is_recovered() {
    let p = planted_1000(42, 0.1);
    let g = Graph::from_edges(p.num_nodes, &p.edges);
    assert!(g.num_edges() > 5000, "{} edges", g.num_edges());
    let (part, stats) = optimise::run(&g, &LeidenConfig::default());
    let score = nmi(&part, &p.truth);
    let q = modularity(&g, &part, 1.0);
    println!(
        "planted 1000/20x50 mu=0.1: NMI {score:.4}, modularity {q:.4} (planted {:.4}), {} communities, {stats:?}",
        modularity(&g, &p.truth, 1.0),
        part.iter().max().unwrap() + 1
    );
    assert!(score >= 0.95, "NMI {score}");
    assert!(communities_connected(&g, &part));
    assert_eq!(stats.splits, 0);
    assert_eq!(stats.refinement_stalls, 0);
    // Harder mixing still gives a sensible answer.
    let p = planted_1000(42, 0.3);
    let g = Graph::from_edges(p.num_nodes, &p.edges);
    let part = leiden(&g, &LeidenConfig::default());
    let score = nmi(&part, &p.truth);
    println!("planted 1000/20x50 mu=0.3: NMI {score:.4}");
    assert!(score >= 0.9, "NMI {score}");
}

#[test]
fn higher_resolution_gives_more_communities() {
    let p = planted_1000(5, 0.1);
    let g = Graph::from_edges(p.num_nodes, &p.edges);
    let count = |gamma: f64| {
        let cfg = LeidenConfig { resolution: gamma, ..LeidenConfig::default() };
        let part = leiden(&g, &cfg);
        assert!(communities_connected(&g, &part));
        part.iter().max().unwrap() + 1
    };
    let (low, mid, high) = (count(0.05), count(1.0), count(20.0));
    assert!(low < mid && mid < high, "{low} {mid} {high}");
}

#[test]
fn same_seed_same_output_and_seeds_matter() {
    let p = planted_1000(9, 0.4);
    let g = Graph::from_edges(p.num_nodes, &p.edges);
    let cfg = LeidenConfig::default();
    let a = leiden(&g, &cfg);
    assert_eq!(a, leiden(&g, &cfg));
    assert_eq!(a, leiden(&g.clone(), &cfg.clone()));
    let distinct: std::collections::BTreeSet<Vec<usize>> =
        (0..4).map(|seed| leiden(&g, &LeidenConfig { seed, ..cfg.clone() })).collect();
    assert!(distinct.len() > 1, "different seeds explore differently");
}

#[test]
fn greedy_refinement_and_one_iteration_work() {
    let p = planted_1000(11, 0.1);
    let g = Graph::from_edges(p.num_nodes, &p.edges);
    for cfg in [
        LeidenConfig { randomness: 0.0, ..LeidenConfig::default() },
        LeidenConfig { max_iterations: 1, ..LeidenConfig::default() },
        LeidenConfig { randomness: 10.0, ..LeidenConfig::default() },
    ] {
        let (part, stats) = optimise::run(&g, &cfg);
        assert!(nmi(&part, &p.truth) >= 0.95, "{cfg:?}");
        assert!(communities_connected(&g, &part), "{cfg:?}");
        assert_eq!(stats.splits, 0);
    }
}

#[test]
fn larger_random_graphs_keep_the_guarantee() {
    // Sparse random weighted graphs, many components and isolated nodes
    // among them, with several resolutions and seeds.
    let mut rng = SplitMix64::new(99);
    for case in 0..40u64 {
        let n = 100 + rng.below(400);
        let m = rng.below(3 * n);
        let edges: Vec<(usize, usize, f64)> =
            (0..m).map(|_| (rng.below(n), rng.below(n), (1 + rng.below(5)) as f64)).collect();
        let g = Graph::from_edges(n, &edges);
        let cfg =
            LeidenConfig { seed: case, resolution: [0.5, 1.0, 2.0][case as usize % 3], ..LeidenConfig::default() };
        let (part, stats) = optimise::run(&g, &cfg);
        assert_eq!(stats.splits, 0, "case {case}");
        assert_eq!(stats.refinement_stalls, 0, "case {case}");
        assert!(communities_connected(&g, &part), "case {case}");
    }
}

/// Random small graphs: node count, then edges with small integer weights
/// (0 included, so zero-weight edges occur), self-loops and duplicates.
fn arb_graph() -> impl Strategy<Value = (usize, Vec<(usize, usize, f64)>)> {
    (1usize..40).prop_flat_map(|n| {
        let edge = (0..n, 0..n, 0u8..4).prop_map(|(a, b, w)| (a, b, w as f64));
        (Just(n), proptest::collection::vec(edge, 0..(2 * n + 10)))
    })
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: 300,
        failure_persistence: None,
        ..ProptestConfig::default()
    })]

    #[test]
    fn leiden_communities_are_connected((n, edges) in arb_graph(), seed in 0u64..1000) {
        let g = Graph::from_edges(n, &edges);
        let cfg = LeidenConfig { seed, ..LeidenConfig::default() };
        let (part, stats) = optimise::run(&g, &cfg);
        prop_assert_eq!(part.len(), n);
        assert_normalised(&part);
        // The guarantee comes from the algorithm, not from the safety net.
        prop_assert_eq!(stats.splits, 0);
        prop_assert!(communities_connected(&g, &part));
        // Never worse than the singleton start.
        let singletons: Vec<usize> = (0..n).collect();
        prop_assert!(modularity(&g, &part, 1.0) >= modularity(&g, &singletons, 1.0) - 1e-12);
        // Isolated nodes stay alone.
        for v in 0..n {
            if g.strength(v) == 0.0 {
                prop_assert_eq!(part.iter().filter(|&&c| c == part[v]).count(), 1);
            }
        }
        prop_assert_eq!(part, leiden(&g, &cfg));
    }

    #[test]
    fn refinement_splits_communities_into_connected_parts(
        (n, edges) in arb_graph(),
        seed in 0u64..1000,
        theta in prop_oneof![Just(0.0), Just(0.01), Just(1.0)],
    ) {
        let g = Graph::from_edges(n, &edges);
        // Refine a local-moving partition and an arbitrary one.
        let mut moved: Vec<usize> = (0..n).collect();
        testing::local_moving(&g, &mut moved, 1.0, seed);
        let mut arbitrary: Vec<usize> = (0..n).map(|v| (v * 7 + seed as usize) % 3).collect();
        optimise::normalise(&mut arbitrary);
        for comm in [moved, arbitrary] {
            let refined = testing::refinement(&g, &comm, 1.0, theta, seed);
            for v in 0..n {
                prop_assert_eq!(comm[refined[v]], comm[v], "refined communities nest");
            }
            prop_assert!(communities_connected(&g, &refined));
        }
    }

    #[test]
    fn aggregation_is_exact((n, edges) in arb_graph(), k in 1usize..5) {
        let g = Graph::from_edges(n, &edges);
        let mut part: Vec<usize> = (0..n).map(|v| (v * 5 + 1) % k).collect();
        let count = optimise::normalise(&mut part);
        let agg = g.aggregate(&part, count);
        let q = modularity(&g, &part, 1.3);
        let q_agg = modularity(&agg, &(0..count).collect::<Vec<_>>(), 1.3);
        prop_assert!((q - q_agg).abs() < 1e-9);
    }

    #[test]
    fn hierarchy_invariants_hold(
        (n, edges) in arb_graph(),
        max in 1usize..8,
        use_lcc in any::<bool>(),
    ) {
        let g = Graph::from_edges(n, &edges);
        let cfg = HierarchyConfig { max_cluster_size: max, use_lcc, ..HierarchyConfig::default() };
        check_hierarchy(&g, &cfg);
    }
}

// ---------------------------------------------------------------- hierarchy

/// Checks the hierarchy invariants and returns the number of communities
/// per level.
fn check_hierarchy(g: &Graph, cfg: &HierarchyConfig) -> Vec<usize> {
    let comms = hierarchical_leiden(g, cfg);
    let n = g.num_nodes();
    let covered: Vec<usize> = if n == 0 {
        Vec::new()
    } else if cfg.use_lcc {
        g.largest_component()
    } else {
        (0..n).collect()
    };
    let mut per_level = Vec::new();
    let mut seen0 = vec![false; n];
    for (i, c) in comms.iter().enumerate() {
        assert_eq!(c.id, i, "ids are indices");
        if i > 0 {
            assert!(comms[i - 1].level <= c.level, "numbered level by level");
        }
        if per_level.len() <= c.level {
            per_level.resize(c.level + 1, 0);
        }
        per_level[c.level] += 1;
        assert!(!c.nodes.is_empty());
        assert!(c.nodes.windows(2).all(|w| w[0] < w[1]), "sorted, distinct");
        match c.parent {
            None => {
                assert_eq!(c.level, 0);
                for &v in &c.nodes {
                    assert!(!seen0[v], "level 0 is a partition");
                    seen0[v] = true;
                }
            }
            Some(p) => {
                assert!(p < i);
                assert_eq!(comms[p].level + 1, c.level);
                assert!(comms[p].children.contains(&c.id));
            }
        }
        if c.children.is_empty() {
            if c.nodes.len() > cfg.max_cluster_size {
                // Unsplittable: clustering it again gives one community.
                let mut local = vec![usize::MAX; n];
                let sub = g.induced(&c.nodes, &mut local);
                let part = leiden(&sub, &cfg.leiden);
                assert!(part.iter().all(|&x| x == 0), "leaf {} could be split", c.id);
            }
        } else {
            assert!(c.nodes.len() > cfg.max_cluster_size);
            assert!(c.children.len() >= 2);
            let mut union: Vec<usize> = c
                .children
                .iter()
                .flat_map(|&ch| {
                    assert_eq!(comms[ch].parent, Some(c.id));
                    comms[ch].nodes.iter().copied()
                })
                .collect();
            union.sort_unstable();
            assert_eq!(union, c.nodes, "children partition their parent");
        }
    }
    let level0: Vec<usize> = (0..n).filter(|&v| seen0[v]).collect();
    assert_eq!(level0, covered, "level 0 covers exactly the (LCC) nodes");
    // Every community induces a connected subgraph.
    for c in &comms {
        let mut local = vec![usize::MAX; n];
        let sub = g.induced(&c.nodes, &mut local);
        assert!(communities_connected(&sub, &vec![0; c.nodes.len()]));
    }
    per_level
}

#[test]
fn hierarchy_on_planted_graph() {
    let p = planted_1000(42, 0.1);
    let g = Graph::from_edges(p.num_nodes, &p.edges);
    let cfg = HierarchyConfig::default();
    let per_level = check_hierarchy(&g, &cfg);
    println!("hierarchy planted 1000: communities per level {per_level:?}");
    assert!(per_level.len() >= 2, "communities of 50 are split again");
    // Level 0 is the flat clustering.
    let comms = hierarchical_leiden(&g, &cfg);
    let mut level0 = vec![usize::MAX; g.num_nodes()];
    for c in comms.iter().filter(|c| c.level == 0) {
        for &v in &c.nodes {
            level0[v] = c.id;
        }
    }
    assert_eq!(level0, leiden(&g, &cfg.leiden));
    assert_eq!(comms, hierarchical_leiden(&g, &cfg), "deterministic");
    // A large max_cluster_size leaves only level 0.
    let flat = hierarchical_leiden(&g, &HierarchyConfig { max_cluster_size: 1000, ..cfg.clone() });
    assert!(flat.iter().all(|c| c.level == 0 && c.children.is_empty()));
}

#[test]
fn hierarchy_uses_the_largest_component_only_when_asked() {
    // A 12-clique (unsplittable, larger than 10) and a separate triangle.
    let mut edges = Vec::new();
    for a in 0..12 {
        for b in a + 1..12 {
            edges.push((a, b, 1.0));
        }
    }
    edges.extend([(12, 13, 1.0), (13, 14, 1.0), (12, 14, 1.0)]);
    let g = Graph::from_edges(16, &edges);
    let lcc = hierarchical_leiden(&g, &HierarchyConfig::default());
    assert_eq!(lcc.len(), 1);
    assert_eq!(lcc[0].nodes, (0..12).collect::<Vec<_>>());
    assert!(lcc[0].children.is_empty(), "a clique cannot be split");
    check_hierarchy(&g, &HierarchyConfig::default());

    let all_cfg = HierarchyConfig { use_lcc: false, ..HierarchyConfig::default() };
    let all = hierarchical_leiden(&g, &all_cfg);
    assert_eq!(all.len(), 3, "clique, triangle, isolated node 15");
    assert_eq!(all[2].nodes, vec![15]);
    check_hierarchy(&g, &all_cfg);
    assert!(hierarchical_leiden(&Graph::from_edges(0, &[]), &all_cfg).is_empty());
}

#[test]
fn hierarchy_on_karate() {
    let (g, _) = karate();
    let per_level = check_hierarchy(&g, &HierarchyConfig::default());
    println!("hierarchy karate: communities per level {per_level:?}");
}

// ---------------------------------------------------------------- shared LFR graphs

/// Reads `edges.csv` and `communities.csv` of a shared LFR graph.
fn load_lfr(dir: &Path) -> (Graph, Vec<usize>) {
    let edges = parse_pairs(&std::fs::read_to_string(dir.join("edges.csv")).unwrap());
    let truth_rows = parse_pairs(&std::fs::read_to_string(dir.join("communities.csv")).unwrap());
    let n = truth_rows.len();
    let mut truth = vec![usize::MAX; n];
    for (node, c) in truth_rows {
        truth[node] = c;
    }
    let weighted: Vec<(usize, usize, f64)> = edges.into_iter().map(|(a, b)| (a, b, 1.0)).collect();
    (Graph::from_edges(n, &weighted), truth)
}

/// The shared LFR graphs (`../shared/eval/graphs`), when present: NMI ≥ 0.95
/// against the planted communities at μ = 0.1, and modularity at least the
/// reference Louvain's (networkx, from `SOURCE.md`) − 0.005 on every graph.
#[test]
fn shared_lfr_graphs_are_recovered() {
    let graphs = [
        ("lfr_n1000_mu0.1_seed42", 0.7721, Some(0.95)),
        ("lfr_n10000_mu0.1_seed42", 0.8221, Some(0.95)),
        ("lfr_n1000_mu0.3_seed42", 0.5360, None),
        ("lfr_n10000_mu0.3_seed42", 0.5835, None),
    ];
    for (name, louvain_q, min_nmi) in graphs {
        let dir = shared_graphs().join(name);
        if !dir.join("edges.csv").exists() {
            println!("skipping {name}: {} not found", dir.display());
            continue;
        }
        let (g, truth) = load_lfr(&dir);
        let start = std::time::Instant::now();
        let (part, stats) = optimise::run(&g, &LeidenConfig::default());
        let elapsed = start.elapsed();
        let score = nmi(&part, &truth);
        let q = modularity(&g, &part, 1.0);
        println!(
            "{name}: NMI {score:.4}, modularity {q:.4} (planted {:.4}, Louvain {louvain_q}), {} communities, {stats:?}, {elapsed:?}",
            modularity(&g, &truth, 1.0),
            part.iter().max().unwrap() + 1
        );
        if let Some(min) = min_nmi {
            assert!(score >= min, "{name}: NMI {score}");
        }
        assert!(q >= louvain_q - 0.005, "{name}: modularity {q}");
        assert!(communities_connected(&g, &part));
        assert_eq!(stats.splits, 0);
        let per_level = check_hierarchy(&g, &HierarchyConfig::default());
        println!("{name}: hierarchy, communities per level {per_level:?}");
    }
}

/// Node `n` joins the graph with edges to `friends`.
fn with_new_node(g: &PlantedGraph, friends: &[usize]) -> Graph {
    let n = g.num_nodes;
    let mut edges = g.edges.clone();
    edges.extend(friends.iter().map(|&f| (f, n, 1.0)));
    Graph::from_edges(n + 1, &edges)
}

#[test]
fn warm_start_keeps_the_partition_where_the_graph_did_not_change() {
    let planted = planted_1000(3, 0.2);
    let cfg = LeidenConfig::default();
    let before = leiden(&Graph::from_edges(planted.num_nodes, &planted.edges), &cfg);
    // A new node tied to three members of one community.
    let members: Vec<usize> = (0..planted.num_nodes).filter(|&v| before[v] == before[0]).take(3).collect();
    let grown = with_new_node(&planted, &members);
    let mut initial = before.clone();
    initial.push(usize::MAX); // any label of its own
    let after = leiden_from(&grown, &cfg, &initial);
    assert_eq!(after[planted.num_nodes], after[0], "the new node joins the community it is tied to");
    assert_eq!(nmi(&after[..planted.num_nodes], &before), 1.0, "every other node keeps its community");
    assert!(communities_connected(&grown, &after));
}

/// `communities` as the prior of a graph of `n` nodes, none changed.
fn prior_of(communities: &[Community], n: usize) -> PriorClustering {
    let levels = communities.iter().map(|c| c.level).max().unwrap() + 1;
    let mut prior = PriorClustering { levels: vec![vec![None; n]; levels], changed: vec![false; n] };
    for c in communities {
        for &v in &c.nodes {
            prior.levels[c.level][v] = Some(c.id);
        }
    }
    prior
}

#[test]
fn hierarchical_warm_start_keeps_what_did_not_change() {
    let planted = planted_1000(5, 0.3);
    let g = Graph::from_edges(planted.num_nodes, &planted.edges);
    let cfg = HierarchyConfig { max_cluster_size: 30, ..HierarchyConfig::default() };
    let first = hierarchical_leiden(&g, &cfg);
    let prior = prior_of(&first, planted.num_nodes);
    let again = hierarchical_leiden_from(&g, &cfg, &prior);
    let members = |cs: &[Community]| {
        let mut m: Vec<(usize, Vec<usize>)> = cs.iter().map(|c| (c.level, c.nodes.clone())).collect();
        m.sort();
        m
    };
    assert_eq!(members(&again), members(&first));
}

#[test]
fn hierarchical_warm_start_reclusters_only_the_changed_branch() {
    let planted = planted_1000(7, 0.2);
    let g = Graph::from_edges(planted.num_nodes, &planted.edges);
    let cfg = HierarchyConfig { max_cluster_size: 30, ..HierarchyConfig::default() };
    let first = hierarchical_leiden(&g, &cfg);
    let n = planted.num_nodes;
    let mut prior = prior_of(&first, n + 1);
    // A new node tied to two members of the first level-0 community.
    let home = &first[0].nodes;
    let grown = with_new_node(&planted, &home[..2]);
    for v in [home[0], home[1], n] {
        prior.changed[v] = true;
    }
    let again = hierarchical_leiden_from(&grown, &cfg, &prior);
    let untouched = |cs: &[Community]| {
        let mut m: Vec<(usize, Vec<usize>)> = cs
            .iter()
            .filter(|c| !c.nodes.iter().any(|&v| prior.changed[v] || home.contains(&v)))
            .map(|c| (c.level, c.nodes.clone()))
            .collect();
        m.sort();
        m
    };
    assert_eq!(untouched(&again), untouched(&first), "branches without a changed node are kept as they were");
    assert!(again.iter().any(|c| c.level == 0 && c.nodes.contains(&n) && c.nodes.contains(&home[0])));
}
