//! The modules of each library crate depend on each other one way: no
//! module reaches (through `crate::` paths, outside its tests) a module that
//! reaches it back. A circle is how storage came to depend on the runner
//! (through the document status) and the model layer on settings and back:
//! this test names the circles a change makes.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// The top-level modules each top-level module of `src` names as `crate::…`.
fn module_graph(src: &Path) -> BTreeMap<String, BTreeSet<String>> {
    let mut graph: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    let mut files = vec![src.to_path_buf()];
    while let Some(path) = files.pop() {
        if path.is_dir() {
            files.extend(std::fs::read_dir(&path).unwrap().map(|e| e.unwrap().path()));
            continue;
        }
        if path.extension().is_none_or(|e| e != "rs") {
            continue;
        }
        let relative = path.strip_prefix(src).unwrap().to_string_lossy().into_owned();
        let module = relative.split('/').next().unwrap().trim_end_matches(".rs").to_string();
        if module == "lib" {
            continue;
        }
        let text = std::fs::read_to_string(&path).unwrap();
        // A module's tests may use anything.
        let code = text.split("#[cfg(test)]\nmod tests").next().unwrap();
        let names = graph.entry(module.clone()).or_default();
        for line in code.lines().map(|l| l.split("//").next().unwrap()) {
            for (i, _) in line.match_indices("crate::") {
                let name: String = line[i + 7..]
                    .chars()
                    .take_while(|c| c.is_ascii_lowercase() || *c == '_' || c.is_ascii_digit())
                    .collect();
                if !name.is_empty() && name != module {
                    names.insert(name);
                }
            }
        }
    }
    graph
}

/// A circle through `start`, as the path of modules, if there is one.
fn circle_through(graph: &BTreeMap<String, BTreeSet<String>>, start: &str) -> Option<Vec<String>> {
    let mut paths = vec![vec![start.to_string()]];
    let mut seen = BTreeSet::new();
    while let Some(path) = paths.pop() {
        for next in graph.get(path.last().unwrap()).into_iter().flatten() {
            if next == start {
                return Some([path.clone(), vec![start.to_string()]].concat());
            }
            if seen.insert(next.clone()) {
                paths.push([path.clone(), vec![next.clone()]].concat());
            }
        }
    }
    None
}

/// The library crates whose modules are held to it, and the mock model
/// server the tests run.
const CRATES: [&str; 9] =
    ["engine", "operations", "verbs", "query", "project", "server", "vectors", "local-embed", "mock-llm"];

#[test]
fn the_modules_of_each_library_crate_form_no_circle() {
    let repo = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap();
    let mut circles = Vec::new();
    for name in CRATES {
        let graph = module_graph(&repo.join(name).join("src"));
        assert!(graph.len() > 1, "{name}'s sources were read: {graph:?}");
        circles.extend(
            graph.keys().filter_map(|m| circle_through(&graph, m)).map(|c| format!("{name}: {}", c.join(" → "))),
        );
    }
    let engine = module_graph(&repo.join("engine/src"));
    assert!(engine["runner"].contains("context"), "the engine's imports were read: {engine:?}");
    assert!(circles.is_empty(), "import circles among a crate's modules:\n{}", circles.join("\n"));
}

#[test]
fn a_circle_is_found() {
    let graph: BTreeMap<String, BTreeSet<String>> = [("a", "b"), ("b", "c"), ("c", "a"), ("d", "a")]
        .into_iter()
        .map(|(from, to)| (from.to_string(), BTreeSet::from([to.to_string()])))
        .collect();
    assert_eq!(circle_through(&graph, "a").unwrap(), ["a", "b", "c", "a"]);
    assert_eq!(circle_through(&graph, "d"), None);
}
