//! The rankings that decide what goes into a context first: relationships,
//! text units, neighbours, report levels, interleavings.

use std::collections::{HashMap, HashSet};
use std::hash::Hash;

/// The graph's relationships as the rankings need them (indexes into the
/// relationships table; ends are entity indexes, `None` for a dangling end).
pub struct RelView<'a> {
    pub ends: &'a [(Option<u32>, Option<u32>)],
    /// Entity titles at each end (a dangling end has its name, not an index).
    pub source: &'a [String],
    pub target: &'a [String],
    /// GraphRAG's relationship rank: combined_degree.
    pub rank: &'a [i64],
    /// Relationship indexes of each entity.
    pub adjacency: &'a [Vec<u32>],
}

pub(super) fn cmp_desc_f64(a: f64, b: f64) -> std::cmp::Ordering {
    b.partial_cmp(&a).unwrap_or(std::cmp::Ordering::Equal)
}

/// A float as Python's `str` writes it (what GraphRAG's context tables hold):
/// `2.0`, `0.25`, `1e-05`, `1e+16`, `nan`, `inf`.
pub fn python_float(x: f64) -> String {
    if x.is_nan() {
        return "nan".into();
    }
    if x.is_infinite() {
        return if x > 0.0 { "inf" } else { "-inf" }.into();
    }
    let magnitude = x.abs();
    if magnitude != 0.0 && !(1e-4..1e16).contains(&magnitude) {
        // Rust writes `1e-5`, Python `1e-05`: a signed exponent of two digits at least.
        let sci = format!("{x:e}");
        let (mantissa, exponent) = sci.split_once('e').unwrap_or((&sci, "0"));
        let exponent: i32 = exponent.parse().unwrap_or(0);
        let sign = if exponent < 0 { '-' } else { '+' };
        return format!("{mantissa}e{sign}{:02}", exponent.abs());
    }
    if x.fract() == 0.0 {
        format!("{x:.1}")
    } else {
        format!("{x}")
    }
}

/// GraphRAG local search's relationship selection for `selected` entities:
/// in-network relationships (both ends selected) first, by rank; then
/// out-of-network ones (one end selected), preferring those whose outside
/// entity links to more selected entities, then rank, at most
/// `top_k × |selected|` of them. Ties keep GraphRAG's order (its sorts are
/// stable): table order, and out of the network those whose source is
/// selected before those whose target is.
///
/// `links` receives GraphRAG's `links` of every out-of-network relationship
/// (how many selected entities its outside entity is related to) when there
/// are two or more of them, overwriting earlier values: GraphRAG writes it
/// into the relationship's attributes, where it stays for the rest of the
/// question (its context grows one entity at a time, and a relationship that
/// later joins the network keeps the value it had), so the caller keeps one
/// map per question.
pub fn rank_relationships(
    selected: &[usize],
    g: &RelView,
    top_k: usize,
    links: &mut HashMap<usize, usize>,
) -> Vec<usize> {
    let sel: HashSet<usize> = selected.iter().copied().collect();
    let mut seen: HashSet<u32> = HashSet::new();
    let mut inside: Vec<usize> = Vec::new();
    // (relationship, outside entity's name, selected entity's name, whether the target is the selected end)
    let mut outside: Vec<(usize, &str, &str, bool)> = Vec::new();
    for &e in selected {
        let Some(adj) = g.adjacency.get(e) else { continue };
        for &r in adj {
            if !seen.insert(r) {
                continue;
            }
            let r = r as usize;
            let (s, t) = g.ends[r];
            let s_in = s.is_some_and(|x| sel.contains(&(x as usize)));
            let t_in = t.is_some_and(|x| sel.contains(&(x as usize)));
            match (s_in, t_in) {
                (true, true) => inside.push(r),
                (true, false) => outside.push((r, &g.target[r], &g.source[r], false)),
                (false, true) => outside.push((r, &g.source[r], &g.target[r], true)),
                (false, false) => {}
            }
        }
    }
    inside.sort_by_key(|&r| (std::cmp::Reverse(g.rank[r]), r));
    let by_rank = |&(a, _, _, a_target): &(usize, &str, &str, bool),
                   &(b, _, _, b_target): &(usize, &str, &str, bool)| {
        g.rank[b].cmp(&g.rank[a]).then(a_target.cmp(&b_target)).then(a.cmp(&b))
    };
    if outside.len() <= 1 {
        // GraphRAG returns a lone out-of-network relationship as it is: no
        // `links`, no budget.
        return inside.into_iter().chain(outside.into_iter().map(|(r, ..)| r)).collect();
    }
    let mut linked: HashMap<&str, HashSet<&str>> = HashMap::new();
    for &(_, other, own, _) in &outside {
        linked.entry(other).or_default().insert(own);
    }
    for &(r, other, ..) in &outside {
        links.insert(r, linked[other].len());
    }
    outside.sort_by(|a, b| linked[b.1].len().cmp(&linked[a.1].len()).then(by_rank(a, b)));
    let budget = top_k.saturating_mul(selected.len());
    inside.into_iter().chain(outside.into_iter().take(budget).map(|(r, ..)| r)).collect()
}

/// Text units ranked for a context: by how many of the selected entities
/// mention them, then by how many of the context's relationships cite them,
/// then by first appearance (entity order). `entity_units[i]`: text units of
/// the i-th selected entity; `relationship_units`: those of each relationship.
pub fn rank_text_units<K: Copy + Eq + Hash>(entity_units: &[&[K]], relationship_units: &[&[K]]) -> Vec<K> {
    let mut order: Vec<K> = Vec::new();
    let mut score: HashMap<K, (usize, usize, usize)> = HashMap::new();
    for units in entity_units {
        let mut here: HashSet<K> = HashSet::new();
        for &u in units.iter() {
            if !here.insert(u) {
                continue;
            }
            let n = order.len();
            let e = score.entry(u).or_insert_with(|| {
                order.push(u);
                (0, 0, n)
            });
            e.0 += 1;
        }
    }
    for units in relationship_units {
        let mut here: HashSet<K> = HashSet::new();
        for &u in units.iter() {
            if here.insert(u) {
                if let Some(e) = score.get_mut(&u) {
                    e.1 += 1;
                }
            }
        }
    }
    let mut ranked: Vec<(usize, usize, usize)> = score.into_values().collect();
    ranked.sort_by(|a, b| b.0.cmp(&a.0).then(b.1.cmp(&a.1)).then(a.2.cmp(&b.2)));
    ranked.into_iter().map(|(_, _, i)| order[i]).collect()
}

/// The entities at the ends of `relationships` that are not `selected`, in
/// order of first appearance (`ends`: per relationship, its source and
/// target entity when known).
pub fn neighbour_entities(
    selected: &[usize],
    relationships: &[usize],
    ends: &[(Option<u32>, Option<u32>)],
) -> Vec<usize> {
    let mut seen: HashSet<usize> = selected.iter().copied().collect();
    relationships
        .iter()
        .flat_map(|&r| [ends[r].0, ends[r].1])
        .flatten()
        .map(|e| e as usize)
        .filter(|&e| seen.insert(e))
        .collect()
}

/// `ranked` reordered by similarity to the question: the ids in `hits`
/// (id, similarity; best first) first in that order, the others after them
/// in their `ranked` order.
pub fn order_by_similarity(ranked: Vec<String>, hits: &[(String, f32)]) -> Vec<String> {
    let position: HashMap<&str, usize> = hits.iter().enumerate().map(|(i, (id, _))| (id.as_str(), i)).collect();
    let (mut scored, unscored): (Vec<String>, Vec<String>) =
        ranked.into_iter().partition(|id| position.contains_key(id.as_str()));
    scored.sort_by_key(|id| position[id.as_str()]);
    scored.extend(unscored);
    scored
}

/// The community reports used at `level`, as GraphRAG 3.3 selects them
/// (`read_indexer_reports`): every report at a level ≤ `level`. (Its
/// roll-up groups the communities by their title, one group per community,
/// so parents stay beside their children.) Returns report indexes in order.
pub fn reports_up_to_level(levels: &[i64], level: i64) -> Vec<usize> {
    (0..levels.len()).filter(|&i| levels[i] <= level).collect()
}

/// Items of several ranked lists interleaved (first of each, then second of
/// each, ...), duplicates dropped — LightRAG's merge of local and global results.
pub fn round_robin<T: Clone + Eq + Hash>(lists: &[Vec<T>]) -> Vec<T> {
    let mut seen = HashSet::new();
    let mut out = Vec::new();
    let longest = lists.iter().map(Vec::len).max().unwrap_or(0);
    for i in 0..longest {
        for l in lists {
            if let Some(x) = l.get(i) {
                if seen.insert(x.clone()) {
                    out.push(x.clone());
                }
            }
        }
    }
    out
}

/// A deterministic permutation of `0..n` (Fisher–Yates with splitmix64), so
/// global search batches mix high- and low-ranked reports the same way every run.
pub fn shuffled(n: usize, seed: u64) -> Vec<usize> {
    let mut state = seed;
    let mut next = || {
        state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = state;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    };
    let mut v: Vec<usize> = (0..n).collect();
    for i in (1..n).rev() {
        let j = (next() % (i as u64 + 1)) as usize;
        v.swap(i, j);
    }
    v
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The columns a test's [`RelView`] borrows.
    struct Rels {
        ends: Vec<(Option<u32>, Option<u32>)>,
        source: Vec<String>,
        target: Vec<String>,
        rank: Vec<i64>,
        adjacency: Vec<Vec<u32>>,
    }

    impl Rels {
        fn view(&self) -> RelView<'_> {
            RelView {
                ends: &self.ends,
                source: &self.source,
                target: &self.target,
                rank: &self.rank,
                adjacency: &self.adjacency,
            }
        }
    }

    #[test]
    fn relationships_in_network_first_then_linked_out_of_network() {
        // entities 0,1 selected; 2,3 outside. rels: 0: 0-1 (in), 1: 0-2, 2: 1-2 (2 links twice), 3: 0-3 (rank high)
        let names = |ids: [usize; 4]| ids.map(|i| ["A", "B", "C", "D"][i].to_string()).to_vec();
        let rels = Rels {
            ends: vec![(Some(0), Some(1)), (Some(0), Some(2)), (Some(1), Some(2)), (Some(0), Some(3))],
            source: names([0, 0, 1, 0]),
            target: names([1, 2, 2, 3]),
            rank: vec![2, 3, 3, 9],
            adjacency: vec![vec![0, 1, 3], vec![0, 2], vec![1, 2], vec![3]],
        };
        let g = rels.view();
        let mut links = HashMap::new();
        assert_eq!(rank_relationships(&[0, 1], &g, 10, &mut links), vec![0, 1, 2, 3]);
        // C is related to both selected entities, D to one; the in-network relationship has none.
        assert_eq!(links, HashMap::from([(1, 2), (2, 2), (3, 1)]));
        // budget: top_k 1 × 2 selected = 2 out-of-network
        assert_eq!(rank_relationships(&[0, 1], &g, 1, &mut links), vec![0, 1, 2]);
        // A lone out-of-network relationship gets no links; earlier values stay (GraphRAG's attributes).
        let mut lone = HashMap::from([(3, 7)]);
        assert_eq!(rank_relationships(&[3], &g, 10, &mut lone), vec![3]);
        assert_eq!(lone, HashMap::from([(3, 7)]));
        // Out of the network again: the value is overwritten.
        assert_eq!(rank_relationships(&[0], &g, 10, &mut lone), vec![3, 1, 0]);
        assert_eq!(lone, HashMap::from([(0, 1), (1, 1), (3, 1)]));
        assert!(rank_relationships(&[], &g, 10, &mut links).is_empty());
    }

    #[test]
    fn floats_are_written_as_python_writes_them() {
        let cases = [
            (2.0, "2.0"),
            (-3.0, "-3.0"),
            (0.0, "0.0"),
            (0.25, "0.25"),
            (0.1 + 0.2, "0.30000000000000004"),
            (1e-4, "0.0001"),
            (1e-5, "1e-05"),
            (1.5e-7, "1.5e-07"),
            (1e15, "1000000000000000.0"),
            (1e16, "1e+16"),
            (1.25e100, "1.25e+100"),
            (f64::NAN, "nan"),
            (f64::NEG_INFINITY, "-inf"),
        ];
        for (x, python) in cases {
            assert_eq!(python_float(x), python, "{x}");
        }
    }

    #[test]
    fn links_count_each_selected_entity_once_and_name_dangling_ends() {
        // 0 selected; relationships 0 and 1 end at the same missing entity X, 2 at entity 1.
        let rels = Rels {
            ends: vec![(Some(0), None), (None, Some(0)), (Some(0), Some(1))],
            source: ["A", "X", "A"].map(String::from).to_vec(),
            target: ["X", "A", "B"].map(String::from).to_vec(),
            rank: vec![1, 1, 5],
            adjacency: vec![vec![0, 1, 2], vec![2]],
        };
        let g = rels.view();
        let mut links = HashMap::new();
        // X relates to A twice, which is one selected entity: rank decides.
        assert_eq!(rank_relationships(&[0], &g, 10, &mut links), vec![2, 0, 1]);
        assert_eq!(links, HashMap::from([(0, 1), (1, 1), (2, 1)]));
    }

    #[test]
    fn similarity_order_puts_hits_first_and_keeps_the_rest() {
        let ranked: Vec<String> = ["u1", "u2", "u3", "u4"].map(String::from).to_vec();
        let hits = vec![("u3".to_string(), 0.9), ("u1".to_string(), 0.5), ("u9".to_string(), 0.4)];
        assert_eq!(order_by_similarity(ranked.clone(), &hits), ["u3", "u1", "u2", "u4"]);
        assert_eq!(order_by_similarity(ranked.clone(), &[]), ranked);
    }

    #[test]
    fn neighbours_are_the_other_ends_once() {
        let ends = vec![(Some(0), Some(5)), (Some(5), Some(7)), (Some(0), None), (Some(1), Some(7))];
        assert_eq!(neighbour_entities(&[0, 1], &[0, 2, 3, 1], &ends), vec![5, 7]);
        assert!(neighbour_entities(&[0, 1], &[], &ends).is_empty());
    }

    #[test]
    fn text_units_by_entity_count_then_relationship_links() {
        let e1: &[&str] = &["u1", "u2", "u3"];
        let e2: &[&str] = &["u3", "u4", "u2"];
        let r1: &[&str] = &["u3"];
        let ranked = rank_text_units(&[e1, e2], &[r1]);
        assert_eq!(ranked, vec!["u3", "u2", "u1", "u4"]);
        assert!(rank_text_units::<u32>(&[], &[]).is_empty());
    }

    #[test]
    fn a_level_selects_every_report_up_to_it() {
        let levels = [0, 0, 1, 1, 2];
        assert_eq!(reports_up_to_level(&levels, 0), vec![0, 1]);
        assert_eq!(reports_up_to_level(&levels, 1), vec![0, 1, 2, 3]);
        assert_eq!(reports_up_to_level(&levels, 9), vec![0, 1, 2, 3, 4]);
    }

    #[test]
    fn round_robin_interleaves_and_dedupes() {
        assert_eq!(round_robin(&[vec![1, 2, 3], vec![4, 2], vec![]]), vec![1, 4, 2, 3]);
    }

    #[test]
    fn shuffle_is_a_deterministic_permutation() {
        let a = shuffled(50, 86);
        assert_eq!(a, shuffled(50, 86));
        let mut s = a.clone();
        s.sort();
        assert_eq!(s, (0..50).collect::<Vec<_>>());
        assert_ne!(a, (0..50).collect::<Vec<_>>());
        assert!(shuffled(0, 1).is_empty());
    }
}
