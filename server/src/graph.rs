//! The graph as the explorer shows it: entities with their community (the
//! top level's), relationships, and the text units they come from, read
//! from the published tables with the rest of a snapshot.

use std::collections::{HashMap, HashSet, VecDeque};
use std::path::Path;

use arrow_array::RecordBatch;
use graphrag_engine::store;
use graphrag_engine::table::{floats, ints, string_lists, strings};
use serde_json::{json, Value};

#[derive(Default)]
pub struct Graph {
    pub nodes: Vec<Node>,
    pub edges: Vec<Edge>,
    by_title: HashMap<String, usize>,
    /// Per node: (edge, neighbour).
    adjacency: Vec<Vec<(usize, usize)>>,
    /// Text unit id → (text, document title).
    units: HashMap<String, (String, String)>,
}

pub struct Node {
    pub id: String,
    pub title: String,
    pub kind: String,
    pub description: String,
    pub degree: i64,
    /// The community at the lowest level (0) that holds it, or -1.
    pub community: i64,
    pub text_unit_ids: Vec<String>,
}

pub struct Edge {
    pub id: String,
    pub source: usize,
    pub target: usize,
    pub description: String,
    pub weight: f64,
}

fn table(output_dir: &Path, name: &str) -> anyhow::Result<Option<RecordBatch>> {
    store::read_published_table(output_dir, name)
}

impl Graph {
    pub fn load(output_dir: &Path) -> anyhow::Result<Graph> {
        let mut g = Graph::default();
        let Some(entities) = table(output_dir, "entities")? else { return Ok(g) };
        let name = "entities";
        let (ids, titles, kinds, descriptions) = (
            strings(&entities, name, "id")?,
            strings(&entities, name, "title")?,
            strings(&entities, name, "type")?,
            strings(&entities, name, "description")?,
        );
        let degrees = ints(&entities, name, "degree")?;
        let units = string_lists(&entities, name, "text_unit_ids")?;
        let mut community_of: HashMap<String, i64> = HashMap::new();
        if let Some(c) = table(output_dir, "communities")? {
            let levels = ints(&c, "communities", "level")?;
            let numbers = ints(&c, "communities", "community")?;
            for ((level, number), members) in
                levels.iter().zip(&numbers).zip(string_lists(&c, "communities", "entity_ids")?)
            {
                if *level == 0 {
                    for m in members {
                        community_of.insert(m, *number);
                    }
                }
            }
        }
        for (i, id) in ids.iter().enumerate() {
            g.by_title.insert(titles[i].to_string(), i);
            g.nodes.push(Node {
                id: id.to_string(),
                title: titles[i].to_string(),
                kind: kinds[i].to_string(),
                description: descriptions[i].to_string(),
                degree: degrees[i],
                community: community_of.get(*id).copied().unwrap_or(-1),
                text_unit_ids: units[i].clone(),
            });
        }
        g.adjacency = vec![Vec::new(); g.nodes.len()];
        if let Some(r) = table(output_dir, "relationships")? {
            let name = "relationships";
            let (ids, sources, targets, descriptions) = (
                strings(&r, name, "id")?,
                strings(&r, name, "source")?,
                strings(&r, name, "target")?,
                strings(&r, name, "description")?,
            );
            let weights = floats(&r, name, "weight")?;
            for i in 0..r.num_rows() {
                let (Some(&s), Some(&t)) = (g.by_title.get(sources[i]), g.by_title.get(targets[i])) else { continue };
                let e = g.edges.len();
                g.edges.push(Edge {
                    id: ids[i].to_string(),
                    source: s,
                    target: t,
                    description: descriptions[i].to_string(),
                    weight: weights[i],
                });
                g.adjacency[s].push((e, t));
                g.adjacency[t].push((e, s));
            }
        }
        if let (Some(units), Some(docs)) = (table(output_dir, "text_units")?, table(output_dir, "documents")?) {
            let title_of: HashMap<&str, &str> =
                strings(&docs, "documents", "id")?.into_iter().zip(strings(&docs, "documents", "title")?).collect();
            let (ids, texts, doc_ids) = (
                strings(&units, "text_units", "id")?,
                strings(&units, "text_units", "text")?,
                strings(&units, "text_units", "document_id")?,
            );
            for i in 0..units.num_rows() {
                let title = title_of.get(doc_ids[i]).copied().unwrap_or_default();
                g.units.insert(ids[i].to_string(), (texts[i].to_string(), title.to_string()));
            }
        }
        Ok(g)
    }

    /// Entity names, most connected first.
    pub fn labels(&self, search: Option<&str>, limit: usize) -> Vec<&str> {
        let needle = search.map(|s| s.trim().to_lowercase()).filter(|s| !s.is_empty());
        let mut hits: Vec<&Node> = self
            .nodes
            .iter()
            .filter(|n| needle.as_deref().is_none_or(|q| n.title.to_lowercase().contains(q)))
            .collect();
        hits.sort_by(|a, b| {
            let exact = |n: &Node| needle.as_deref().is_some_and(|q| n.title.to_lowercase() == q);
            exact(b).cmp(&exact(a)).then(b.degree.cmp(&a.degree)).then(a.title.cmp(&b.title))
        });
        hits.into_iter().take(limit).map(|n| n.title.as_str()).collect()
    }

    pub fn find(&self, title: &str) -> Option<usize> {
        self.by_title.get(title).copied().or_else(|| {
            let lower = title.to_lowercase();
            self.nodes.iter().position(|n| n.title.to_lowercase() == lower)
        })
    }

    /// LightRAG's `/graphs` answer: the neighbourhood of `label` (`*`: the
    /// most connected nodes) breadth first, at most `max_depth` hops and
    /// `max_nodes` nodes, with the edges among them.
    pub fn subgraph(&self, label: &str, max_depth: usize, max_nodes: usize) -> Option<Value> {
        let mut chosen: Vec<usize> = Vec::new();
        let mut seen = HashSet::new();
        let mut truncated = false;
        if label == "*" {
            let mut order: Vec<usize> = (0..self.nodes.len()).collect();
            order.sort_by(|a, b| self.nodes[*b].degree.cmp(&self.nodes[*a].degree).then(a.cmp(b)));
            truncated = order.len() > max_nodes;
            chosen.extend(order.into_iter().take(max_nodes));
            seen.extend(chosen.iter().copied());
        } else {
            let start = self.find(label)?;
            let mut queue = VecDeque::from([(start, 0)]);
            seen.insert(start);
            while let Some((n, depth)) = queue.pop_front() {
                chosen.push(n);
                if depth == max_depth {
                    continue;
                }
                let mut next: Vec<usize> = self.adjacency[n].iter().map(|(_, m)| *m).collect();
                next.sort_by(|a, b| self.nodes[*b].degree.cmp(&self.nodes[*a].degree).then(a.cmp(b)));
                for m in next {
                    if seen.contains(&m) {
                        continue;
                    }
                    if seen.len() >= max_nodes {
                        truncated = true;
                        break;
                    }
                    seen.insert(m);
                    queue.push_back((m, depth + 1));
                }
            }
        }
        let nodes: Vec<Value> = chosen.iter().map(|&i| self.node_json(i)).collect();
        let mut edges = Vec::new();
        let mut done = HashSet::new();
        for &n in &chosen {
            for &(e, m) in &self.adjacency[n] {
                if seen.contains(&m) && done.insert(e) {
                    let edge = &self.edges[e];
                    edges.push(json!({
                        "id": edge.id,
                        "type": "DIRECTED",
                        "source": self.nodes[edge.source].title,
                        "target": self.nodes[edge.target].title,
                        "properties": {"description": edge.description, "weight": edge.weight},
                    }));
                }
            }
        }
        Some(json!({"nodes": nodes, "edges": edges, "is_truncated": truncated}))
    }

    fn node_json(&self, i: usize) -> Value {
        let n = &self.nodes[i];
        json!({
            "id": n.title,
            "labels": [n.title],
            "properties": {
                "entity_id": n.title,
                "entity_type": n.kind,
                "description": n.description,
                "degree": n.degree,
                "community": n.community,
                "source_id": n.text_unit_ids.join("<SEP>"),
                "file_path": self.documents_of(n).join("<SEP>"),
            },
        })
    }

    fn documents_of(&self, n: &Node) -> Vec<String> {
        let mut out: Vec<String> = Vec::new();
        for u in &n.text_unit_ids {
            if let Some((_, title)) = self.units.get(u) {
                if !out.contains(title) {
                    out.push(title.clone());
                }
            }
        }
        out
    }

    /// An entity with its relationships and the text units it comes from.
    pub fn entity_detail(&self, title: &str) -> Option<Value> {
        let i = self.find(title)?;
        let n = &self.nodes[i];
        let relationships: Vec<Value> = self.adjacency[i]
            .iter()
            .map(|&(e, m)| json!({"neighbour": self.nodes[m].title, "description": self.edges[e].description, "weight": self.edges[e].weight}))
            .collect();
        let text_units: Vec<Value> = n
            .text_unit_ids
            .iter()
            .filter_map(|u| self.units.get(u).map(|(text, doc)| json!({"id": u, "document": doc, "text": text})))
            .collect();
        Some(json!({
            "id": n.id,
            "title": n.title,
            "type": n.kind,
            "description": n.description,
            "degree": n.degree,
            "community": n.community,
            "relationships": relationships,
            "text_units": text_units,
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A path a - b - c - d and a star b - e.
    fn graph() -> Graph {
        let mut g = Graph::default();
        for (i, name) in ["a", "b", "c", "d", "e"].iter().enumerate() {
            g.by_title.insert(name.to_string(), i);
            g.nodes.push(Node {
                id: format!("id-{name}"),
                title: name.to_string(),
                kind: "PERSON".into(),
                description: String::new(),
                degree: 0,
                community: -1,
                text_unit_ids: Vec::new(),
            });
        }
        g.adjacency = vec![Vec::new(); 5];
        for (s, t) in [(0, 1), (1, 2), (2, 3), (1, 4)] {
            let e = g.edges.len();
            g.edges.push(Edge { id: format!("e{e}"), source: s, target: t, description: String::new(), weight: 1.0 });
            g.adjacency[s].push((e, t));
            g.adjacency[t].push((e, s));
            g.nodes[s].degree += 1;
            g.nodes[t].degree += 1;
        }
        g
    }

    fn ids(v: &Value, key: &str) -> Vec<String> {
        let mut out: Vec<String> =
            v[key].as_array().unwrap().iter().map(|n| n["id"].as_str().unwrap().to_string()).collect();
        out.sort();
        out
    }

    #[test]
    fn neighbourhoods_respect_depth_and_size() {
        let g = graph();
        let one = g.subgraph("a", 1, 100).unwrap();
        assert_eq!(ids(&one, "nodes"), ["a", "b"]);
        assert_eq!(one["edges"].as_array().unwrap().len(), 1);
        assert_eq!(one["is_truncated"], false);
        let two = g.subgraph("A", 2, 100).unwrap();
        assert_eq!(ids(&two, "nodes"), ["a", "b", "c", "e"]);
        let small = g.subgraph("b", 3, 2).unwrap();
        assert_eq!(small["nodes"].as_array().unwrap().len(), 2);
        assert_eq!(small["is_truncated"], true);
        let top = g.subgraph("*", 1, 1).unwrap();
        assert_eq!(ids(&top, "nodes"), ["b"]);
        assert!(g.subgraph("nobody", 2, 10).is_none());
        assert_eq!(g.labels(None, 2), ["b", "c"]);
        assert_eq!(g.labels(Some("D"), 10), ["d"]);
    }
}
