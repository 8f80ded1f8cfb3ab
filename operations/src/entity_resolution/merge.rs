//! The graph after merging: which input rows make each output entity and
//! relationship. Entities keep their input order (an absorbed entity's row
//! goes, its canonical entity's stays where it was); relationships are
//! re-pointed at canonical entities, parallel ones merged (in the order of
//! their first row, oriented as it), and those that became self-loops dropped.

use std::collections::HashMap;
use std::hash::Hash;

use super::cluster::Cluster;

/// Output rows as lists of input rows (the first one leads: the canonical
/// entity, the first relationship of a pair).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct GraphPlan {
    /// Per output entity, its input rows: canonical first, then the members.
    pub entities: Vec<Vec<usize>>,
    /// Per input entity, its output entity.
    pub entity_of: Vec<usize>,
    /// Per output relationship, its input rows.
    pub relationships: Vec<Vec<usize>>,
    /// Per output relationship, its (source, target) as endpoint numbers:
    /// an output entity, or `entity count + k` for the k-th endpoint that
    /// is no entity (kept as it was).
    pub ends: Vec<(usize, usize)>,
    /// Relationships dropped because both ends became one entity.
    pub self_loops: usize,
}

/// Plans the merged graph of `n` entities grouped by `clusters`; a
/// relationship's ends are entity indices, or `n + k` for endpoints that
/// are no entity.
pub fn plan(n: usize, clusters: &[Cluster], relationship_ends: &[(usize, usize)]) -> GraphPlan {
    let mut canonical_of: Vec<usize> = (0..n).collect();
    let mut members_of: HashMap<usize, Vec<usize>> = HashMap::new();
    for c in clusters {
        let rows: Vec<usize> = c.members.iter().map(|m| m.entity).collect();
        for &r in &rows {
            canonical_of[r] = c.canonical;
        }
        members_of.insert(c.canonical, rows);
    }
    let mut entities = Vec::new();
    let mut entity_of = vec![usize::MAX; n];
    for (row, &canonical) in canonical_of.iter().enumerate() {
        if canonical != row {
            continue;
        }
        let mut rows = vec![row];
        rows.extend(members_of.get(&row).into_iter().flatten());
        for &r in &rows {
            entity_of[r] = entities.len();
        }
        entities.push(rows);
    }
    let out_entities = entities.len();
    let end = |x: usize| if x < n { entity_of[x] } else { out_entities + (x - n) };
    let mut relationships: Vec<Vec<usize>> = Vec::new();
    let mut ends = Vec::new();
    let mut by_pair: HashMap<(usize, usize), usize> = HashMap::new();
    let mut self_loops = 0;
    for (row, &(s, t)) in relationship_ends.iter().enumerate() {
        let (s, t) = (end(s), end(t));
        if s == t {
            self_loops += 1;
            continue;
        }
        let k = *by_pair.entry((s.min(t), s.max(t))).or_insert_with(|| {
            relationships.push(Vec::new());
            ends.push((s, t));
            relationships.len() - 1
        });
        relationships[k].push(row);
    }
    GraphPlan { entities, entity_of, relationships, ends, self_loops }
}

/// The distinct items of several lists, in order of first appearance.
pub fn union_in_order<T: Eq + Hash + Clone, L: IntoIterator<Item = T>>(lists: impl IntoIterator<Item = L>) -> Vec<T> {
    let mut seen = std::collections::HashSet::new();
    let mut out = Vec::new();
    for list in lists {
        for item in list {
            if seen.insert(item.clone()) {
                out.push(item);
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::super::cluster::Member;
    use super::super::Method;
    use super::*;

    fn member(entity: usize) -> Member {
        Member { entity, method: Method::SameName, score: 1.0, evidence: String::new() }
    }

    #[test]
    fn merged_graph() {
        // 0 SCROOGE, 1 MARLEY, 2 MR SCROOGE, 3 BOB; endpoint 4 is no entity.
        let clusters = [Cluster { canonical: 0, members: vec![member(2)] }];
        let rels = [(0, 1), (2, 1), (0, 2), (3, 2), (1, 0), (3, 4)];
        let p = plan(4, &clusters, &rels);
        assert_eq!(p.entities, [vec![0, 2], vec![1], vec![3]]);
        assert_eq!(p.entity_of, [0, 1, 0, 2]);
        // SCROOGE-MARLEY three times (parallel edges, both orientations), the
        // SCROOGE / MR SCROOGE edge is a self-loop now.
        assert_eq!(p.relationships, [vec![0, 1, 4], vec![3], vec![5]]);
        assert_eq!(p.ends, [(0, 1), (2, 0), (2, 3)]);
        assert_eq!(p.self_loops, 1);
    }

    #[test]
    fn union_keeps_first_order() {
        assert_eq!(union_in_order([vec![3, 1], vec![1, 2, 3], vec![0]]), [3, 1, 2, 0]);
    }
}
