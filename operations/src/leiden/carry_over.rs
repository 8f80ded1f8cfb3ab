//! Stable community numbering across re-clusterings: a community that is
//! (mostly) the same as one of the earlier clustering keeps its number, so
//! its report, and everything users built on its id, carries over.

use std::collections::HashMap;

use super::Community;

/// A community of an earlier clustering, its members mapped to the current
/// graph's nodes.
#[derive(Debug, Clone, PartialEq)]
pub struct PriorCommunity {
    pub id: usize,
    pub level: usize,
    /// Members still in the graph (current node ids).
    pub nodes: Vec<usize>,
    /// Members it had, including nodes since removed.
    pub size: usize,
}

/// Renumbers `communities`: each takes the id of the prior community at the
/// same level whose members overlap it with Jaccard index above ½ (so the
/// match is unique in both directions; identical membership always
/// matches); the others get fresh ids above every prior id, in their
/// current order. Parents and children follow the renumbering.
pub fn carry_over_ids(communities: &mut [Community], prior: &[PriorCommunity]) {
    let mut prior_of: HashMap<(usize, usize), usize> = HashMap::new();
    for (i, p) in prior.iter().enumerate() {
        for &v in &p.nodes {
            prior_of.insert((p.level, v), i);
        }
    }
    let mut next = prior.iter().map(|p| p.id + 1).max().unwrap_or(0);
    let mut new_id: HashMap<usize, usize> = HashMap::new();
    for c in communities.iter() {
        let mut overlap: HashMap<usize, usize> = HashMap::new();
        for &v in &c.nodes {
            if let Some(&p) = prior_of.get(&(c.level, v)) {
                *overlap.entry(p).or_default() += 1;
            }
        }
        let matched = overlap.into_iter().find(|&(p, shared)| {
            let union = c.nodes.len() + prior[p].size - shared;
            2 * shared > union
        });
        let id = match matched {
            Some((p, _)) => prior[p].id,
            None => {
                next += 1;
                next - 1
            }
        };
        new_id.insert(c.id, id);
    }
    for c in communities.iter_mut() {
        c.id = new_id[&c.id];
        c.parent = c.parent.map(|p| new_id[&p]);
        for child in &mut c.children {
            *child = new_id[child];
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn community(id: usize, level: usize, parent: Option<usize>, children: &[usize], nodes: &[usize]) -> Community {
        Community { id, level, parent, children: children.to_vec(), nodes: nodes.to_vec() }
    }

    fn prior(id: usize, level: usize, nodes: &[usize], size: usize) -> PriorCommunity {
        PriorCommunity { id, level, nodes: nodes.to_vec(), size }
    }

    #[test]
    fn unchanged_and_mostly_unchanged_communities_keep_their_ids() {
        // Before: 7 = {0,1,2} (with children 9 = {0,1}, 10 = {2}), 8 = {3,4,5}.
        // Now: the first is unchanged, the second gained node 6, and node 7
        // is new and alone.
        let mut now = vec![
            community(0, 0, None, &[3, 4], &[0, 1, 2]),
            community(1, 0, None, &[], &[3, 4, 5, 6]),
            community(2, 0, None, &[], &[7]),
            community(3, 1, Some(0), &[], &[0, 1]),
            community(4, 1, Some(0), &[], &[2]),
        ];
        let before =
            [prior(7, 0, &[0, 1, 2], 3), prior(8, 0, &[3, 4, 5], 3), prior(9, 1, &[0, 1], 2), prior(10, 1, &[2], 1)];
        carry_over_ids(&mut now, &before);
        let ids: Vec<usize> = now.iter().map(|c| c.id).collect();
        assert_eq!(ids, [7, 8, 11, 9, 10]);
        assert_eq!(now[0].children, [9, 10]);
        assert_eq!(now[3].parent, Some(7));
    }

    #[test]
    fn a_community_that_lost_most_members_or_changed_level_gets_a_fresh_id() {
        // The prior community had 4 members; 1 is left (Jaccard 1/4).
        let mut now = vec![community(0, 0, None, &[], &[0]), community(1, 1, None, &[], &[1, 2])];
        let before = [prior(3, 0, &[0], 4), prior(5, 0, &[1, 2], 2)];
        carry_over_ids(&mut now, &before);
        assert_eq!(now.iter().map(|c| c.id).collect::<Vec<_>>(), [6, 7], "levels differ for the second");
    }

    #[test]
    fn exactly_half_is_not_a_match() {
        // {0,1} vs prior {0,1,2,3}: Jaccard 1/2.
        let mut now = vec![community(0, 0, None, &[], &[0, 1])];
        carry_over_ids(&mut now, &[prior(4, 0, &[0, 1, 2, 3], 4)]);
        assert_eq!(now[0].id, 5);
    }

    #[test]
    fn without_a_prior_ids_are_unchanged() {
        let mut now = vec![community(0, 0, None, &[1], &[0, 1]), community(1, 1, Some(0), &[], &[0, 1])];
        let expected = now.clone();
        carry_over_ids(&mut now, &[]);
        assert_eq!(now, expected);
    }
}
