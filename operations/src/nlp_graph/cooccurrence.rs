//! The co-occurrence graph of the extracted phrases, weighted and pruned.

use std::collections::{HashMap, HashSet};

use super::UnitPhrases;

/// The co-occurrence graph's pruning options (GraphRAG's `prune_graph`),
/// declared once, here, with their docs and defaults; settings.yaml's
/// `prune_graph` section, the `extract_graph_nlp` verb's arguments and
/// [`NlpGraphConfig`] are made with them, so the three have the same keys
/// and defaults and nothing copies them one by one.
///
/// - `nlp_prune_options!(struct m!(Name { before… } { after… }))` expands to
///   `m!(Name { before… <the options> after… })`, each option written
///   `/// doc` `name: Type = default,` (`{ after… }` may be left out): `m`
///   declares the struct (its derives, serde attributes and `Default`).
/// - `nlp_prune_options!(copy from => Target { other… })` is the struct
///   expression `Target { other… name: from.name, … }` of every option.
#[macro_export]
macro_rules! nlp_prune_options {
    (@with [struct $make:ident ! ($(#[$m:meta])* $name:ident { $($before:tt)* } $({ $($after:tt)* })?)]
        $($(#[$fm:meta])* $field:ident : $ty:ty = $default:expr,)*) => {
        $make!($(#[$m])* $name { $($before)* $($(#[$fm])* $field: $ty = $default,)* $($($after)*)? });
    };
    (@with [copy $from:expr => $target:ident { $($other:tt)* }]
        $($(#[$fm:meta])* $field:ident : $ty:ty = $default:expr,)*) => {
        $target { $($other)* $($field: $from.$field,)* }
    };
    ($($how:tt)*) => {
        $crate::nlp_prune_options! { @with [$($how)*]
            /// Nodes mentioned in fewer text units are removed.
            min_node_freq: u32 = 2,
            /// Nodes whose frequency is above mean + k·std (population) are removed.
            max_node_freq_std: Option<f64> = None,
            /// Nodes with fewer edges are removed.
            min_node_degree: u32 = 1,
            /// Nodes whose degree is above mean + k·std (population) are removed.
            max_node_degree_std: Option<f64> = None,
            /// Edges whose weight is below this percentile (0–100, linear
            /// interpolation as numpy's default) of the remaining weights are removed.
            min_edge_weight_pct: f64 = 40.0,
            /// Remove the node with the highest degree (the "ego" node).
            /// GraphRAG: true. The most connected entity is the corpus's
            /// protagonist or hub (SCROOGE in A Christmas Carol), and deleting
            /// it loses retrieval (docs/benchmarks.md, "Entity resolution").
            remove_ego_nodes: bool = false,
            /// Keep only the largest connected component.
            lcc_only: bool = false,
        }
    };
}

/// Declares [`NlpGraphConfig`]: plain fields, `Default` from their defaults.
macro_rules! nlp_graph_config {
    ($(#[$m:meta])* $name:ident { $($(#[$fm:meta])* $field:ident : $ty:ty = $default:expr,)* }) => {
        $(#[$m])*
        #[derive(Debug, Clone, PartialEq)]
        pub struct $name { $($(#[$fm])* pub $field: $ty,)* }
        impl Default for $name {
            fn default() -> Self {
                $name { $($field: $default,)* }
            }
        }
    };
}

crate::nlp_prune_options!(struct nlp_graph_config!(
    /// Graph building and pruning options. The defaults are GraphRAG's
    /// `extract_graph_nlp` / `prune_graph` defaults, except the sentence window
    /// and count weights (with sentence windows, normalised PMI and the 40th
    /// percentile cut keep pairs of rare phrases and drop the strong associations
    /// of frequent ones), and `remove_ego_nodes`; settings.yaml's defaults for
    /// those sections are these.
    NlpGraphConfig {
        /// Phrases co-occur when their sentences are fewer than this many apart
        /// (1: the same sentence, 2: the same or the next one); 0: anywhere in the
        /// same text unit, as GraphRAG does.
        cooccurrence_window: u32 = 2,
        /// Weight edges by normalised PMI instead of raw co-occurrence counts.
        normalize_edge_weights: bool = false,
    }
));

#[derive(Debug, Clone, PartialEq)]
pub struct NlpNode {
    pub title: String,
    /// Number of text units mentioning it.
    pub frequency: u32,
    /// Indices of those text units, ascending.
    pub chunk_ids: Vec<usize>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct NlpEdge {
    /// `source < target` (byte-wise string order).
    pub source: String,
    pub target: String,
    /// `count`, or the normalised PMI weight in (0, 1] (see [`build_cooccurrence_graph`]).
    pub weight: f64,
    /// Number of co-occurrences: text units (window 0) or pairs of sentences
    /// within the window.
    pub count: u32,
    /// Indices of the text units where they co-occur, ascending.
    pub chunk_ids: Vec<usize>,
}

#[derive(Debug, Clone, Default, PartialEq)]
pub struct NlpGraph {
    /// Sorted by title.
    pub nodes: Vec<NlpNode>,
    /// Sorted by (source, target).
    pub edges: Vec<NlpEdge>,
}

struct Edge {
    a: u32,
    b: u32,
    count: u32,
    /// Its text units: `edge_units[units.0..units.1]`.
    units: (usize, usize),
    weight: f64,
    alive: bool,
}

struct Work {
    node_alive: Vec<bool>,
    edges: Vec<Edge>,
}

impl Work {
    fn drop_dead_edges(&mut self) {
        for e in &mut self.edges {
            if e.alive && !(self.node_alive[e.a as usize] && self.node_alive[e.b as usize]) {
                e.alive = false;
            }
        }
    }

    fn degrees(&self) -> Vec<u32> {
        let mut d = vec![0u32; self.node_alive.len()];
        for e in self.edges.iter().filter(|e| e.alive) {
            d[e.a as usize] += 1;
            d[e.b as usize] += 1;
        }
        d
    }

    fn kill_nodes(&mut self, dead: impl Fn(usize) -> bool) {
        for i in 0..self.node_alive.len() {
            if self.node_alive[i] && dead(i) {
                self.node_alive[i] = false;
            }
        }
        self.drop_dead_edges();
    }

    /// mean + k·std (population) of `values` over the live nodes.
    fn upper_threshold(&self, values: &[f64], k: f64) -> f64 {
        let live: Vec<f64> = (0..values.len()).filter(|&i| self.node_alive[i]).map(|i| values[i]).collect();
        if live.is_empty() {
            return f64::INFINITY;
        }
        let n = live.len() as f64;
        let mean = live.iter().sum::<f64>() / n;
        let var = live.iter().map(|v| (v - mean) * (v - mean)).sum::<f64>() / n;
        mean + k * var.sqrt()
    }

    fn prune_by_degree(&mut self, cfg: &NlpGraphConfig) {
        let d = self.degrees();
        self.kill_nodes(|i| d[i] < cfg.min_node_degree);
        if let Some(k) = cfg.max_node_degree_std {
            let d: Vec<f64> = self.degrees().into_iter().map(f64::from).collect();
            let t = self.upper_threshold(&d, k);
            self.kill_nodes(|i| d[i] > t);
        }
    }

    fn prune_edges_by_weight(&mut self, pct: f64) {
        if pct.is_nan() || pct <= 0.0 {
            return;
        }
        let mut w: Vec<f64> = self.edges.iter().filter(|e| e.alive).map(|e| e.weight).collect();
        if w.is_empty() {
            return;
        }
        w.sort_unstable_by(f64::total_cmp);
        let rank = (pct.min(100.0) / 100.0) * (w.len() - 1) as f64;
        let lo = rank.floor() as usize;
        let hi = rank.ceil() as usize;
        let threshold = w[lo] + (w[hi] - w[lo]) * (rank - lo as f64);
        for e in &mut self.edges {
            if e.alive && e.weight < threshold {
                e.alive = false;
            }
        }
    }

    fn remove_ego(&mut self) {
        let d = self.degrees();
        // Highest degree; ties go to the smallest title (lowest index).
        let ego = (0..d.len()).filter(|&i| self.node_alive[i]).max_by(|&x, &y| d[x].cmp(&d[y]).then(y.cmp(&x)));
        if let Some(ego) = ego {
            self.kill_nodes(|i| i == ego);
        }
    }

    fn keep_largest_component(&mut self) {
        let n = self.node_alive.len();
        let mut parent: Vec<usize> = (0..n).collect();
        fn find(p: &mut [usize], mut x: usize) -> usize {
            while p[x] != x {
                p[x] = p[p[x]];
                x = p[x];
            }
            x
        }
        for e in self.edges.iter().filter(|e| e.alive) {
            let (ra, rb) = (find(&mut parent, e.a as usize), find(&mut parent, e.b as usize));
            if ra != rb {
                let (lo, hi) = if ra < rb { (ra, rb) } else { (rb, ra) };
                parent[hi] = lo;
            }
        }
        let mut size = vec![0usize; n];
        let mut roots = vec![0usize; n];
        for i in 0..n {
            roots[i] = find(&mut parent, i);
            if self.node_alive[i] {
                size[roots[i]] += 1;
            }
        }
        // Largest component; ties go to the one holding the smallest title.
        let Some(best) = (0..n).filter(|&r| size[r] > 0).max_by(|&x, &y| size[x].cmp(&size[y]).then(y.cmp(&x))) else {
            return;
        };
        self.kill_nodes(|i| roots[i] != best);
    }
}

/// Normalised PMI of a pair mapped to (0, 1]: with `n` contexts (text units,
/// or sentences with a window), `p(a) = freq(a)/n` and `p(a,b) = count(a,b)/n`,
/// `npmi = ln(p(a,b) / (p(a)·p(b))) / −ln p(a,b)` (in [−1, 1]; 1 when the pair
/// is in every context), weight = (1 + npmi) / 2. Independent phrases get 0.5,
/// phrases that only ever occur together get 1.
pub fn npmi_weight(count: u32, freq_a: u32, freq_b: u32, n_contexts: usize) -> f64 {
    let n = n_contexts.max(1) as f64;
    let p_ab = f64::from(count) / n;
    let p_a = f64::from(freq_a.max(1)) / n;
    let p_b = f64::from(freq_b.max(1)) / n;
    if p_ab <= 0.0 {
        return 0.0;
    }
    let npmi = if p_ab >= 1.0 { 1.0 } else { (p_ab / (p_a * p_b)).ln() / -p_ab.ln() };
    let w = (1.0 + npmi.clamp(-1.0, 1.0)) / 2.0;
    if w.is_finite() {
        w
    } else {
        0.0
    }
}

/// Phrase ids of one text unit grouped by sentence: `(sentence, ids)` with
/// sentences ascending and each `ids` sorted and unique.
fn sentence_groups(unit: &UnitPhrases, index: &HashMap<&str, u32>) -> Vec<(u32, Vec<u32>)> {
    let mut tagged: Vec<(u32, u32)> =
        unit.mentions.iter().filter_map(|m| index.get(m.phrase.as_str()).map(|&id| (m.sentence, id))).collect();
    tagged.sort_unstable();
    tagged.dedup();
    let mut groups: Vec<(u32, Vec<u32>)> = Vec::new();
    for (s, id) in tagged {
        match groups.last_mut() {
            Some((last, ids)) if *last == s => ids.push(id),
            _ => groups.push((s, vec![id])),
        }
    }
    groups
}

fn pair_key(a: u32, b: u32) -> u64 {
    let (lo, hi) = if a < b { (a, b) } else { (b, a) };
    (u64::from(lo) << 32) | u64::from(hi)
}

/// Builds the co-occurrence graph of `units` (one [`UnitPhrases`] per text
/// unit; empty phrases are ignored). Nodes are phrases, with frequency = the
/// number of text units mentioning them. Two phrases co-occur when their
/// sentences are fewer than `cooccurrence_window` apart (window 0: anywhere in
/// the unit); an edge's count is the number of such sentence pairs (window 0:
/// text units). The weight is the count, or [`npmi_weight`] over sentences
/// (window 0: text units) when `normalize_edge_weights`, computed on the whole
/// graph before pruning, as GraphRAG does.
///
/// Pruning, in this order: the ego node (highest degree in the full graph,
/// ties to the smallest title) when `remove_ego_nodes`, as GraphRAG does first;
/// nodes below `min_node_freq`, nodes above the frequency threshold
/// (mean + k·std); nodes below `min_node_degree`, nodes above the degree
/// threshold; edges below the `min_edge_weight_pct` percentile of the
/// remaining weights; the degree pruning once more (nodes left without edges
/// go when `min_node_degree >= 1`); then the largest connected component (ties
/// to the one with the smallest title) when `lcc_only`. Removing a node
/// removes its edges. Degrees and thresholds are recomputed at each step.
///
/// Output is sorted: nodes by title, edges by (source, target), source < target.
/// Memory is one 16-byte record per pair and text unit while building, then
/// one small record per distinct pair.
pub fn build_cooccurrence_graph(units: &[UnitPhrases], cfg: &NlpGraphConfig) -> NlpGraph {
    // Intern phrases; ids follow title order so edge keys sort like titles.
    let mut titles: Vec<&str> = {
        let mut seen: HashSet<&str> = HashSet::new();
        for u in units {
            for m in &u.mentions {
                if !m.phrase.trim().is_empty() {
                    seen.insert(m.phrase.as_str());
                }
            }
        }
        seen.into_iter().collect()
    };
    titles.sort_unstable();
    let index: HashMap<&str, u32> = titles.iter().enumerate().map(|(i, t)| (*t, i as u32)).collect();

    let mut node_units: Vec<Vec<u32>> = vec![Vec::new(); titles.len()];
    let mut node_sentences = vec![0u32; titles.len()];
    let mut contexts = 0usize;
    // One record per pair and text unit: (pair key, text unit, co-occurrences there).
    let mut pairs: Vec<(u64, u32, u32)> = Vec::new();
    let mut unit_pairs: Vec<u64> = Vec::new();
    let mut unit_ids: Vec<u32> = Vec::new();
    for (ui, unit) in units.iter().enumerate() {
        let ui = ui as u32;
        let groups = sentence_groups(unit, &index);
        unit_ids.clear();
        unit_ids.extend(groups.iter().flat_map(|(_, ids)| ids.iter().copied()));
        unit_ids.sort_unstable();
        unit_ids.dedup();
        for &id in &unit_ids {
            node_units[id as usize].push(ui);
        }
        unit_pairs.clear();
        if cfg.cooccurrence_window == 0 {
            contexts += usize::from(!unit_ids.is_empty());
            for (i, &a) in unit_ids.iter().enumerate() {
                unit_pairs.extend(unit_ids[i + 1..].iter().map(|&b| pair_key(a, b)));
            }
        } else {
            contexts += groups.len();
            for (gi, (s, ids)) in groups.iter().enumerate() {
                for &id in ids {
                    node_sentences[id as usize] += 1;
                }
                for (i, &a) in ids.iter().enumerate() {
                    unit_pairs.extend(ids[i + 1..].iter().map(|&b| pair_key(a, b)));
                }
                for (t, later) in &groups[gi + 1..] {
                    if t - s >= cfg.cooccurrence_window {
                        break;
                    }
                    for &a in ids {
                        unit_pairs.extend(later.iter().filter(|&&b| b != a).map(|&b| pair_key(a, b)));
                    }
                }
            }
        }
        // Repeats within a unit collapse into one record.
        unit_pairs.sort_unstable();
        for run in unit_pairs.chunk_by(|x, y| x == y) {
            pairs.push((run[0], ui, run.len() as u32));
        }
    }
    drop(index);
    pairs.sort_unstable();

    let freq: Vec<u32> = node_units.iter().map(|u| u.len() as u32).collect();
    let context_freq = if cfg.cooccurrence_window == 0 { &freq } else { &node_sentences };
    let mut edge_units: Vec<u32> = Vec::new();
    let mut edges: Vec<Edge> = Vec::new();
    for run in pairs.chunk_by(|x, y| x.0 == y.0) {
        let key = run[0].0;
        let start = edge_units.len();
        edge_units.extend(run.iter().map(|p| p.1));
        let (a, b) = ((key >> 32) as u32, key as u32);
        let count: u32 = run.iter().map(|p| p.2).sum();
        let weight = if cfg.normalize_edge_weights {
            npmi_weight(count, context_freq[a as usize], context_freq[b as usize], contexts)
        } else {
            f64::from(count)
        };
        edges.push(Edge { a, b, count, units: (start, edge_units.len()), weight, alive: true });
    }
    drop(pairs);

    let mut w = Work { node_alive: vec![true; titles.len()], edges };
    if cfg.remove_ego_nodes {
        w.remove_ego();
    }
    w.kill_nodes(|i| freq[i] < cfg.min_node_freq);
    if let Some(k) = cfg.max_node_freq_std {
        let f: Vec<f64> = freq.iter().map(|&x| f64::from(x)).collect();
        let t = w.upper_threshold(&f, k);
        w.kill_nodes(|i| f[i] > t);
    }
    w.prune_by_degree(cfg);
    w.prune_edges_by_weight(cfg.min_edge_weight_pct);
    w.prune_by_degree(cfg);
    if cfg.lcc_only {
        w.keep_largest_component();
    }

    let to_usize = |ids: &[u32]| ids.iter().map(|&u| u as usize).collect::<Vec<_>>();
    let nodes = (0..titles.len())
        .filter(|&i| w.node_alive[i])
        .map(|i| NlpNode { title: titles[i].to_string(), frequency: freq[i], chunk_ids: to_usize(&node_units[i]) })
        .collect();
    let edges = w
        .edges
        .iter()
        .filter(|e| e.alive)
        .map(|e| NlpEdge {
            source: titles[e.a as usize].to_string(),
            target: titles[e.b as usize].to_string(),
            weight: e.weight,
            count: e.count,
            chunk_ids: to_usize(&edge_units[e.units.0..e.units.1]),
        })
        .collect();
    NlpGraph { nodes, edges }
}

#[cfg(test)]
mod tests {
    use super::super::{resolve_sentence_initial, unit, PhraseExtractor, RegexEnglishExtractor};
    use super::*;
    use proptest::prelude::*;

    /// Text units whose phrases all share one sentence.
    fn chunks(lists: &[&[&str]]) -> Vec<UnitPhrases> {
        lists.iter().map(|l| unit(&l.iter().map(|p| (*p, 0)).collect::<Vec<_>>())).collect()
    }

    fn no_pruning() -> NlpGraphConfig {
        NlpGraphConfig {
            cooccurrence_window: 1,
            normalize_edge_weights: false,
            min_node_freq: 0,
            max_node_freq_std: None,
            min_node_degree: 0,
            max_node_degree_std: None,
            min_edge_weight_pct: 0.0,
            remove_ego_nodes: false,
            lcc_only: false,
        }
    }

    fn edge_list(g: &NlpGraph) -> Vec<(&str, &str, f64)> {
        g.edges.iter().map(|e| (e.source.as_str(), e.target.as_str(), e.weight)).collect()
    }

    fn node_list(g: &NlpGraph) -> Vec<&str> {
        g.nodes.iter().map(|n| n.title.as_str()).collect()
    }

    #[test]
    fn defaults_match_graphrag() {
        let c = NlpGraphConfig::default();
        assert!(!c.normalize_edge_weights && !c.remove_ego_nodes && !c.lcc_only, "ego nodes kept, unlike GraphRAG");
        assert_eq!(c.cooccurrence_window, 2);
        assert_eq!((c.min_node_freq, c.min_node_degree, c.min_edge_weight_pct), (2, 1, 40.0));
        assert_eq!((c.max_node_freq_std, c.max_node_degree_std), (None, None));
        assert_eq!(
            RegexEnglishExtractor::default(),
            RegexEnglishExtractor { max_word_length: 15, min_words: 1, max_words: 4 }
        );
    }

    #[test]
    fn counts_frequencies_and_chunk_ids() {
        let g = build_cooccurrence_graph(
            &chunks(&[&["C", "A", "B", "A"], &["B", "A", ""], &["C", "B"], &[]]),
            &no_pruning(),
        );
        assert_eq!(
            g.nodes,
            [
                NlpNode { title: "A".into(), frequency: 2, chunk_ids: vec![0, 1] },
                NlpNode { title: "B".into(), frequency: 3, chunk_ids: vec![0, 1, 2] },
                NlpNode { title: "C".into(), frequency: 2, chunk_ids: vec![0, 2] },
            ]
        );
        assert_eq!(edge_list(&g), [("A", "B", 2.0), ("A", "C", 1.0), ("B", "C", 2.0)]);
        assert_eq!(g.edges[0].count, 2);
        assert_eq!(g.edges[0].chunk_ids, [0, 1]);
        assert_eq!(g.edges[2].chunk_ids, [0, 2]);
    }

    #[test]
    fn sentence_window() {
        // A and B share sentence 0, C is in sentence 1, D in sentence 3.
        let units = [unit(&[("A", 0), ("B", 0), ("C", 1), ("D", 3), ("A", 3)])];
        let same_sentence = build_cooccurrence_graph(&units, &no_pruning());
        assert_eq!(edge_list(&same_sentence), [("A", "B", 1.0), ("A", "D", 1.0)]);
        let adjacent = build_cooccurrence_graph(&units, &NlpGraphConfig { cooccurrence_window: 2, ..no_pruning() });
        assert_eq!(edge_list(&adjacent), [("A", "B", 1.0), ("A", "C", 1.0), ("A", "D", 1.0), ("B", "C", 1.0)]);
        // Window 0: the whole text unit, one co-occurrence per unit.
        let whole = build_cooccurrence_graph(&units, &NlpGraphConfig { cooccurrence_window: 0, ..no_pruning() });
        assert_eq!(whole.edges.len(), 6);
        assert!(whole.edges.iter().all(|e| e.count == 1 && e.chunk_ids == [0]));
        // Counts add up over sentences and units; text units are listed once.
        let units = [unit(&[("A", 0), ("B", 0), ("A", 1), ("B", 1)]), unit(&[("B", 4), ("A", 4)])];
        let g = build_cooccurrence_graph(&units, &no_pruning());
        assert_eq!(g.edges[0].count, 3);
        assert_eq!(g.edges[0].chunk_ids, [0, 1]);
    }

    #[test]
    fn npmi_weights() {
        let cfg = NlpGraphConfig { normalize_edge_weights: true, ..no_pruning() };
        let g = build_cooccurrence_graph(&chunks(&[&["A", "B", "C"], &["A", "B"], &["B", "C"]]), &cfg);
        // A-B: p(ab)=2/3, p(a)=2/3, p(b)=1 → pmi 0 → 0.5.
        assert!((g.edges[0].weight - 0.5).abs() < 1e-12);
        // A-C: p(ac)=1/3, p(a)=p(c)=2/3 → npmi = ln(0.75)/ln(3).
        let expect = (1.0 + 0.75f64.ln() / 3f64.ln()) / 2.0;
        assert!((g.edges[1].weight - expect).abs() < 1e-12);
        assert_eq!(g.edges[1].count, 1);
        // Phrases that only occur together: 1.
        assert!((npmi_weight(1, 1, 1, 10) - 1.0).abs() < 1e-12);
        assert_eq!(npmi_weight(3, 3, 3, 3), 1.0);
        assert!(npmi_weight(1, 5, 5, 10) > 0.0 && npmi_weight(1, 5, 5, 10) < 0.5);
        assert_eq!(npmi_weight(0, 1, 1, 0), 0.0);
    }

    #[test]
    fn prune_min_node_freq() {
        let cfg = NlpGraphConfig { min_node_freq: 2, ..no_pruning() };
        let g = build_cooccurrence_graph(&chunks(&[&["A", "B", "X"], &["A", "B"]]), &cfg);
        assert_eq!(node_list(&g), ["A", "B"]);
        assert_eq!(edge_list(&g), [("A", "B", 2.0)]);
    }

    #[test]
    fn prune_max_node_freq_std() {
        // Frequencies A=5, B..E=1: mean 1.8, std 1.6 → threshold 3.4 with k=1.
        let cfg = NlpGraphConfig { max_node_freq_std: Some(1.0), ..no_pruning() };
        let g = build_cooccurrence_graph(&chunks(&[&["A", "B"], &["A", "C"], &["A", "D"], &["A", "E"], &["A"]]), &cfg);
        assert_eq!(node_list(&g), ["B", "C", "D", "E"]);
        assert!(g.edges.is_empty());
    }

    #[test]
    fn prune_by_degree() {
        let cfg = NlpGraphConfig { min_node_degree: 1, ..no_pruning() };
        let g = build_cooccurrence_graph(&chunks(&[&["A", "B"], &["LONE"]]), &cfg);
        assert_eq!(node_list(&g), ["A", "B"]);
        // Star: H has degree 4, leaves 1: mean 1.6, std 1.2 → threshold 2.8.
        let cfg = NlpGraphConfig { max_node_degree_std: Some(1.0), ..no_pruning() };
        let g = build_cooccurrence_graph(&chunks(&[&["H", "A"], &["H", "B"], &["H", "C"], &["H", "D"]]), &cfg);
        assert_eq!(node_list(&g), ["A", "B", "C", "D"]);
        assert!(g.edges.is_empty());
    }

    #[test]
    fn prune_edges_by_percentile() {
        // Counts 1..=5 on five disjoint edges; 40th percentile = 2.6.
        let mut lists: Vec<UnitPhrases> = Vec::new();
        for (i, pair) in [("A", "B"), ("C", "D"), ("E", "F"), ("G", "H"), ("I", "J")].iter().enumerate() {
            for _ in 0..=i {
                lists.push(unit(&[(pair.0, 0), (pair.1, 0)]));
            }
        }
        let cfg = NlpGraphConfig { min_edge_weight_pct: 40.0, ..no_pruning() };
        let g = build_cooccurrence_graph(&lists, &cfg);
        assert_eq!(edge_list(&g), [("E", "F", 3.0), ("G", "H", 4.0), ("I", "J", 5.0)]);
        // Nodes stay unless degree pruning asks otherwise...
        assert_eq!(g.nodes.len(), 10);
        // ...which is re-applied after edge pruning.
        let cfg = NlpGraphConfig { min_node_degree: 1, ..cfg };
        let g = build_cooccurrence_graph(&lists, &cfg);
        assert_eq!(node_list(&g), ["E", "F", "G", "H", "I", "J"]);
        // Equal weights are all kept.
        let g = build_cooccurrence_graph(&chunks(&[&["A", "B"], &["C", "D"]]), &cfg);
        assert_eq!(g.edges.len(), 2);
    }

    #[test]
    fn ego_node_removed_then_degree_pruned() {
        let cfg = NlpGraphConfig { remove_ego_nodes: true, min_node_degree: 1, ..no_pruning() };
        let g = build_cooccurrence_graph(&chunks(&[&["H", "A"], &["H", "B"], &["H", "C"], &["A", "B"]]), &cfg);
        assert_eq!(node_list(&g), ["A", "B"]);
        assert_eq!(edge_list(&g), [("A", "B", 1.0)]);
        // The ego is chosen on the full graph, before edge pruning: H (degree 3)
        // goes although its edges are the weakest.
        let lists = chunks(&[&["H", "A"], &["H", "B"], &["H", "C"], &["A", "B"], &["A", "B"], &["A", "B"]]);
        let cfg = NlpGraphConfig { min_edge_weight_pct: 50.0, ..cfg };
        let g = build_cooccurrence_graph(&lists, &cfg);
        assert_eq!(node_list(&g), ["A", "B"]);
        // Tie on degree: the smallest title goes.
        let g = build_cooccurrence_graph(
            &chunks(&[&["X", "Y"]]),
            &NlpGraphConfig { remove_ego_nodes: true, ..no_pruning() },
        );
        assert_eq!(node_list(&g), ["Y"]);
    }

    #[test]
    fn largest_connected_component() {
        let cfg = NlpGraphConfig { lcc_only: true, ..no_pruning() };
        let g = build_cooccurrence_graph(&chunks(&[&["D", "E"], &["A", "B"], &["B", "C"], &["Z"]]), &cfg);
        assert_eq!(node_list(&g), ["A", "B", "C"]);
        assert_eq!(edge_list(&g), [("A", "B", 1.0), ("B", "C", 1.0)]);
        // Tie: the component with the smallest title.
        let g = build_cooccurrence_graph(&chunks(&[&["X", "Y"], &["B", "C"]]), &cfg);
        assert_eq!(node_list(&g), ["B", "C"]);
    }

    #[test]
    fn default_config_end_to_end() {
        let e = RegexEnglishExtractor::default();
        let text = [
            "Ebenezer Scrooge sat in his counting-house. Bob Cratchit copied letters.",
            "Bob Cratchit shivered; Ebenezer Scrooge kept the coal-box in his own room.",
            "Fred visited Ebenezer Scrooge and Bob Cratchit on Christmas Eve.",
            "Marley's Ghost warned Ebenezer Scrooge on Christmas Eve about the chains.",
            "Fred laughed at his uncle. Christmas Eve was cold and foggy.",
        ];
        let mut lists: Vec<UnitPhrases> = text.iter().map(|t| e.extract(t)).collect();
        resolve_sentence_initial(&mut lists);
        let a = build_cooccurrence_graph(&lists, &NlpGraphConfig::default());
        let b = build_cooccurrence_graph(&lists, &NlpGraphConfig::default());
        assert_eq!(a, b);
        // The ego node (EBENEZER SCROOGE, highest degree) stays by default, and
        // goes with GraphRAG's `remove_ego_nodes: true`; rare phrases go.
        assert!(node_list(&a).contains(&"EBENEZER SCROOGE"));
        let ego = NlpGraphConfig { remove_ego_nodes: true, ..NlpGraphConfig::default() };
        assert!(!node_list(&build_cooccurrence_graph(&lists, &ego)).contains(&"EBENEZER SCROOGE"));
        assert!(a.nodes.iter().all(|n| n.frequency >= 2));
        assert!(a.edges.iter().all(|e| e.weight == f64::from(e.count) && e.source < e.target));
        assert!(!a.edges.is_empty());
    }

    #[test]
    fn order_of_phrases_does_not_matter() {
        let x = build_cooccurrence_graph(&chunks(&[&["A", "B", "C"], &["C", "A"]]), &NlpGraphConfig::default());
        let y = build_cooccurrence_graph(&chunks(&[&["C", "B", "A"], &["A", "C"]]), &NlpGraphConfig::default());
        assert_eq!(x, y);
        assert_eq!(build_cooccurrence_graph(&[], &NlpGraphConfig::default()), NlpGraph::default());
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(512))]

        #[test]
        fn graph_invariants(lists in proptest::collection::vec(proptest::collection::vec("[A-F]", 0..5), 0..8),
                            norm in any::<bool>(), ego in any::<bool>(), lcc in any::<bool>(), pct in 0.0f64..100.0) {
            let cfg = NlpGraphConfig { normalize_edge_weights: norm, remove_ego_nodes: ego, lcc_only: lcc, min_edge_weight_pct: pct, max_node_degree_std: Some(1.0), max_node_freq_std: Some(1.5), ..NlpGraphConfig::default() };
            let lists: Vec<UnitPhrases> = lists.iter().map(|l| unit(&l.iter().enumerate().map(|(i, p)| (p.as_str(), i as u32 / 2)).collect::<Vec<_>>())).collect();
            let g = build_cooccurrence_graph(&lists, &cfg);
            prop_assert_eq!(&g, &build_cooccurrence_graph(&lists, &cfg));
            let titles: Vec<&str> = node_list(&g);
            prop_assert!(titles.windows(2).all(|w| w[0] < w[1]));
            for e in &g.edges {
                prop_assert!(e.source < e.target);
                prop_assert!(titles.contains(&e.source.as_str()) && titles.contains(&e.target.as_str()));
                prop_assert!(e.weight.is_finite() && e.weight > 0.0);
                prop_assert!(e.count as usize >= e.chunk_ids.len() && !e.chunk_ids.is_empty());
            }
        }
    }
}
