//! Merge precision and recall of entity resolution by rules (no chat model)
//! on the hand-labelled candidate pairs of tests/data/entity_resolution/
//! (how they were drawn and labelled: its README.md). The pre-resolution
//! graphs of both corpora are resolved as the `resolve_entities` verb does;
//! a pair counts as merged when both names end in one entity.
//!
//! `cargo test -p graphrag-operations --test entity_resolution_sample -- --nocapture`
//! prints the table of docs/benchmarks.md.

use std::collections::HashMap;
use std::path::PathBuf;

use graphrag_operations::entity_resolution::candidates::candidates;
use graphrag_operations::entity_resolution::names::NameForm;
use graphrag_operations::entity_resolution::{group, rule_merges, Entity, Overrides};

fn data(file: &str) -> String {
    let path: PathBuf = [env!("CARGO_MANIFEST_DIR"), "tests", "data", "entity_resolution", file].iter().collect();
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// The entity each title ends in after resolution by rules.
fn resolved(corpus: &str) -> HashMap<String, usize> {
    let text = data(&format!("{corpus}.entities.tsv"));
    let rows: Vec<(String, String, Vec<u32>)> = text
        .lines()
        .skip(1)
        .map(|line| {
            let mut f = line.split('\t');
            let (title, kind, units) = (f.next().unwrap(), f.next().unwrap(), f.next().unwrap_or(""));
            let mut units: Vec<u32> = units.split_whitespace().map(|u| u.parse().unwrap()).collect();
            units.sort_unstable();
            units.dedup();
            (title.to_string(), kind.to_string(), units)
        })
        .collect();
    let unit_doc: Vec<u32> =
        data(&format!("{corpus}.unit_documents.txt")).lines().map(|d| d.trim().parse().unwrap()).collect();
    let entities: Vec<Entity> = rows.iter().map(|(t, k, u)| Entity { title: t, entity_type: k, units: u }).collect();
    let forms: Vec<NameForm> = rows.iter().map(|(t, _, _)| NameForm::parse(t)).collect();
    let merges = rule_merges(candidates(&entities, &forms, &unit_doc));
    let mut entity_of: HashMap<String, usize> = rows.iter().enumerate().map(|(i, (t, _, _))| (t.clone(), i)).collect();
    for c in group(&entities, &forms, &Overrides::default(), merges) {
        for m in c.members {
            entity_of.insert(rows[m.entity].0.clone(), c.canonical);
        }
    }
    entity_of
}

#[derive(Default)]
struct Tally {
    pairs: usize,
    same: usize,
    tp: usize,
    fp: Vec<String>,
    fn_: Vec<String>,
}

impl Tally {
    fn precision(&self) -> f64 {
        self.tp as f64 / (self.tp + self.fp.len()).max(1) as f64
    }
    fn recall(&self) -> f64 {
        self.tp as f64 / self.same.max(1) as f64
    }
}

#[test]
fn rules_merge_the_labelled_pairs_with_high_precision_and_recall() {
    let labels = data("labelled_pairs.tsv");
    let mut by_corpus: Vec<(String, Tally)> = Vec::new();
    let mut resolutions: HashMap<String, HashMap<String, usize>> = HashMap::new();
    for line in labels.lines().skip(1) {
        let f: Vec<&str> = line.split('\t').collect();
        let (corpus, a, b, same) = (f[0], f[1], f[2], f[3] == "yes");
        let entity_of = resolutions.entry(corpus.to_string()).or_insert_with(|| resolved(corpus));
        let merged = entity_of[a] == entity_of[b];
        if !by_corpus.iter().any(|(c, _)| c == corpus) {
            by_corpus.push((corpus.to_string(), Tally::default()));
        }
        let t = &mut by_corpus.iter_mut().find(|(c, _)| c == corpus).unwrap().1;
        t.pairs += 1;
        t.same += same as usize;
        match (same, merged) {
            (true, true) => t.tp += 1,
            (false, true) => t.fp.push(format!("{a} / {b}")),
            (true, false) => t.fn_.push(format!("{a} / {b}")),
            (false, false) => {}
        }
    }
    let mut all = Tally::default();
    println!("| corpus | pairs | same | merged | precision | recall |\n|---|---:|---:|---:|---:|---:|");
    for (corpus, t) in &by_corpus {
        let merged = t.tp + t.fp.len();
        println!("| {corpus} | {} | {} | {merged} | {:.3} | {:.3} |", t.pairs, t.same, t.precision(), t.recall());
        all.pairs += t.pairs;
        all.same += t.same;
        all.tp += t.tp;
        all.fp.extend(t.fp.iter().cloned());
        all.fn_.extend(t.fn_.iter().cloned());
    }
    let merged = all.tp + all.fp.len();
    println!("| all | {} | {} | {merged} | {:.3} | {:.3} |", all.pairs, all.same, all.precision(), all.recall());
    println!("wrongly merged: {:?}\nmissed: {:?}", all.fp, all.fn_);
    assert!(all.pairs >= 60);
    assert!(all.precision() >= 0.95, "precision {:.3}: {:?}", all.precision(), all.fp);
    assert!(all.recall() >= 0.8, "recall {:.3}: {:?}", all.recall(), all.fn_);
}
