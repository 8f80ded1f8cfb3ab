//! Grouping merges into entities: forced groups first, then the accepted
//! pairs from the surest down, each joining two groups only when no member
//! of one must stay apart from a member of the other (`MR FEZZIWIG` and
//! `MRS FEZZIWIG` never end up together through a bare `FEZZIWIG`).

use std::cmp::Ordering;
use std::collections::{BTreeMap, VecDeque};

use super::Method;

/// A merge of two entities (indices).
#[derive(Debug, Clone, PartialEq)]
pub struct Edge {
    pub a: usize,
    pub b: usize,
    pub method: Method,
    pub score: f64,
    pub evidence: String,
}

/// An entity absorbed into a canonical one, and the merge that brought it
/// (which may link it to another member rather than to the canonical one).
#[derive(Debug, Clone, PartialEq)]
pub struct Member {
    pub entity: usize,
    pub method: Method,
    pub score: f64,
    pub evidence: String,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Cluster {
    pub canonical: usize,
    /// The other members, in the order a walk from the canonical one meets them.
    pub members: Vec<Member>,
}

fn find(parent: &mut [usize], mut x: usize) -> usize {
    while parent[x] != x {
        parent[x] = parent[parent[x]];
        x = parent[x];
    }
    x
}

/// Groups `n` entities. `forced` groups are merged whatever the rules say
/// (their first entity is the canonical one); `edges` are applied from the
/// highest score down (ties: lower indices first), skipped when `apart`
/// holds for a member of each side. The canonical entity of a group without
/// a forced one is the greatest by `better`. Returns the groups of more than
/// one entity, by canonical index.
pub fn cluster(
    n: usize,
    forced: &[(Vec<usize>, String)],
    mut edges: Vec<Edge>,
    apart: impl Fn(usize, usize) -> bool,
    better: impl Fn(usize, usize) -> Ordering,
) -> Vec<Cluster> {
    let mut parent: Vec<usize> = (0..n).collect();
    let mut members: Vec<Vec<usize>> = (0..n).map(|i| vec![i]).collect();
    let mut tree: Vec<Edge> = Vec::new();
    let union = |parent: &mut Vec<usize>, members: &mut Vec<Vec<usize>>, ra: usize, rb: usize| {
        let (keep, gone) = if members[ra].len() >= members[rb].len() { (ra, rb) } else { (rb, ra) };
        parent[gone] = keep;
        let moved = std::mem::take(&mut members[gone]);
        members[keep].extend(moved);
    };
    let mut preferred: Vec<Option<usize>> = vec![None; n];
    for (group, evidence) in forced {
        let Some(&first) = group.first() else { continue };
        if preferred[first].is_none() {
            preferred[first] = Some(first);
        }
        for &other in &group[1..] {
            let (ra, rb) = (find(&mut parent, first), find(&mut parent, other));
            if ra != rb {
                union(&mut parent, &mut members, ra, rb);
                tree.push(Edge {
                    a: first,
                    b: other,
                    method: Method::AliasesFile,
                    score: 1.0,
                    evidence: evidence.clone(),
                });
            }
        }
    }
    edges.sort_by(|x, y| y.score.total_cmp(&x.score).then(x.a.cmp(&y.a)).then(x.b.cmp(&y.b)));
    for e in edges {
        let (ra, rb) = (find(&mut parent, e.a), find(&mut parent, e.b));
        if ra == rb || members[ra].iter().any(|&x| members[rb].iter().any(|&y| apart(x, y))) {
            continue;
        }
        union(&mut parent, &mut members, ra, rb);
        tree.push(e);
    }

    // Each group's tree, walked from its canonical member.
    let mut adjacent: BTreeMap<usize, Vec<usize>> = BTreeMap::new();
    for (k, e) in tree.iter().enumerate() {
        adjacent.entry(e.a).or_default().push(k);
        adjacent.entry(e.b).or_default().push(k);
    }
    let mut out = Vec::new();
    for (root, group) in members.iter().enumerate() {
        if group.len() < 2 || find(&mut parent, root) != root {
            continue;
        }
        // A forced canonical: the first forced group's first entity in it.
        let forced_first = forced.iter().find_map(|(g, _)| g.first().filter(|f| group.contains(f)).copied());
        let canonical = forced_first.unwrap_or_else(|| {
            group.iter().copied().max_by(|&x, &y| better(x, y).then(y.cmp(&x))).expect("a group has members")
        });
        let mut seen = vec![canonical];
        let mut queue = VecDeque::from([canonical]);
        let mut list = Vec::new();
        while let Some(x) = queue.pop_front() {
            let mut next: Vec<(usize, usize)> = adjacent[&x]
                .iter()
                .map(|&k| (if tree[k].a == x { tree[k].b } else { tree[k].a }, k))
                .filter(|(y, _)| !seen.contains(y))
                .collect();
            next.sort_unstable();
            for (y, k) in next {
                seen.push(y);
                queue.push_back(y);
                let e = &tree[k];
                list.push(Member { entity: y, method: e.method, score: e.score, evidence: e.evidence.clone() });
            }
        }
        out.push(Cluster { canonical, members: list });
    }
    out.sort_by_key(|c| c.canonical);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn edge(a: usize, b: usize, score: f64) -> Edge {
        Edge { a, b, method: Method::SameName, score, evidence: format!("{a}-{b}") }
    }

    #[test]
    fn constraints_keep_groups_apart_whatever_the_path() {
        // 0 FEZZIWIG, 1 MR FEZZIWIG, 2 MRS FEZZIWIG: 1 and 2 stay apart.
        let apart = |x: usize, y: usize| (x.min(y), x.max(y)) == (1, 2);
        let c = cluster(3, &[], vec![edge(0, 1, 1.0), edge(0, 2, 0.9)], apart, |x, y| y.cmp(&x));
        assert_eq!(c.len(), 1);
        assert_eq!(c[0].canonical, 0);
        assert_eq!(c[0].members.iter().map(|m| m.entity).collect::<Vec<_>>(), [1]);
    }

    #[test]
    fn surest_first_and_members_carry_the_edge_that_brought_them() {
        let c = cluster(
            4,
            &[],
            vec![edge(2, 3, 0.5), edge(0, 1, 1.0), edge(1, 2, 0.9)],
            |_, _| false,
            |x, y| {
                // Entity 1 is the most frequent.
                (x == 1).cmp(&(y == 1))
            },
        );
        assert_eq!(c.len(), 1);
        assert_eq!(c[0].canonical, 1);
        let got: Vec<(usize, &str)> = c[0].members.iter().map(|m| (m.entity, m.evidence.as_str())).collect();
        assert_eq!(got, [(0, "0-1"), (2, "1-2"), (3, "2-3")]);
    }

    #[test]
    fn forced_groups_win_and_name_the_canonical() {
        let forced = vec![(vec![2, 0], "aliases.yaml".to_string())];
        let apart = |x: usize, y: usize| (x.min(y), x.max(y)) == (0, 2);
        let c = cluster(3, &forced, vec![edge(0, 1, 1.0)], apart, |x, y| x.cmp(&y));
        assert_eq!(c[0].canonical, 2);
        assert_eq!(c[0].members[0].method, Method::AliasesFile);
        assert_eq!(c[0].members.iter().map(|m| m.entity).collect::<Vec<_>>(), [0, 1]);
    }
}
