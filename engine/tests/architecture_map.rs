//! docs/architecture.md's list of crates and their dependencies is the
//! workspace's: every workspace crate has its line, and each line names
//! exactly the workspace crates its Cargo.toml's `[dependencies]` name (after
//! `→`) and those its `[dev-dependencies]` name (in `(tests: …)`), both ways.
//! Crates are named by their folder; the root package (`graphrag-rs`, whose
//! binary source is cli/) is `cli`.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::{Path, PathBuf};

type Deps = BTreeSet<String>;

/// Per crate: its dependencies and its dev-dependencies among the workspace's crates.
type Map = BTreeMap<String, (Deps, Deps)>;

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap().to_path_buf()
}

/// The key = value lines of one `[section]` of a Cargo.toml.
fn section<'a>(toml: &'a str, name: &str) -> Vec<&'a str> {
    let header = format!("[{name}]");
    let mut lines = toml.lines().skip_while(|l| l.trim() != header);
    lines.next();
    lines.map(str::trim).take_while(|l| !l.starts_with('[')).filter(|l| !l.is_empty() && !l.starts_with('#')).collect()
}

/// The key of a dependency line (`name.workspace = true`, `name = { … }`).
fn key(line: &str) -> &str {
    line.split(['=', '.']).next().unwrap().trim()
}

fn cargo_map() -> Map {
    let root = fs::read_to_string(repo().join("Cargo.toml")).unwrap();
    let members = section(&root, "workspace").into_iter().find(|l| key(l) == "members").expect("workspace members");
    let mut folders: Vec<String> = members.split('"').skip(1).step_by(2).map(str::to_string).collect::<Vec<_>>();
    folders.push(".".to_string());
    let manifests: Vec<(String, String)> = folders
        .iter()
        .map(|folder| {
            let text = fs::read_to_string(repo().join(folder).join("Cargo.toml")).unwrap();
            let label = if folder == "." { "cli".to_string() } else { folder.clone() };
            (label, text)
        })
        .collect();
    // Package name → the crate's label.
    let labels: BTreeMap<String, String> = manifests
        .iter()
        .map(|(label, text)| {
            let name = section(text, "package").into_iter().find(|l| key(l) == "name").expect("a package name");
            (name.split('"').nth(1).unwrap().to_string(), label.clone())
        })
        .collect();
    let internal = |text: &str, name: &str| -> Deps {
        section(text, name)
            .into_iter()
            .inspect(|l| assert!(!l.contains("package ="), "a renamed dependency is not read here: {l}"))
            .filter_map(|l| labels.get(key(l)).cloned())
            .collect()
    };
    manifests
        .iter()
        .map(|(label, text)| (label.clone(), (internal(text, "dependencies"), internal(text, "dev-dependencies"))))
        .collect()
}

/// `a, b` or `(none)`.
fn names(list: &str) -> Deps {
    let list = list.trim();
    if list == "(none)" {
        return Deps::new();
    }
    list.split(',').map(|n| n.trim().to_string()).collect()
}

/// The lines `- crate → deps (tests: deps)` of the section "Crates and their dependencies".
fn doc_map(doc: &str) -> Map {
    let section = doc.split("\n## Crates and their dependencies\n").nth(1).expect("the section is there");
    let section = section.split("\n## ").next().unwrap();
    let mut map = Map::new();
    for line in section.lines().filter_map(|l| l.strip_prefix("- ")) {
        let (name, rest) = line.split_once(" → ").unwrap_or_else(|| panic!("not `crate → deps`: {line}"));
        let (deps, dev) = match rest.split_once(" (tests: ") {
            Some((deps, dev)) => (deps, dev.strip_suffix(')').unwrap_or_else(|| panic!("unclosed: {line}"))),
            None => (rest, "(none)"),
        };
        let earlier = map.insert(name.trim().to_string(), (names(deps), names(dev)));
        assert!(earlier.is_none(), "{name} is listed twice");
    }
    map
}

#[test]
fn the_documented_dependencies_are_the_workspace_s() {
    let doc = fs::read_to_string(repo().join("docs/architecture.md")).unwrap();
    let documented = doc_map(&doc);
    let actual = cargo_map();
    assert_eq!(documented.keys().collect::<Vec<_>>(), actual.keys().collect::<Vec<_>>(), "the crates listed");
    for (name, (deps, dev)) in &actual {
        let (doc_deps, doc_dev) = &documented[name];
        assert_eq!(doc_deps, deps, "{name}'s [dependencies] in docs/architecture.md");
        assert_eq!(doc_dev, dev, "{name}'s [dev-dependencies] in docs/architecture.md");
    }
}

#[test]
fn a_line_of_the_list_reads_as_written() {
    let doc =
        "x\n## Crates and their dependencies\n\nintro\n\n- a → (none)\n- b → a, c (tests: d)\n\nSo\n## Next\n- z → y\n";
    let map = doc_map(doc);
    assert_eq!(map.len(), 2, "{map:?}");
    assert_eq!(map["a"], (Deps::new(), Deps::new()));
    assert_eq!(map["b"], (names("a, c"), names("d")));
}
