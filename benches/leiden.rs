//! Leiden benchmark (plain `fn main`, no criterion).
//!
//! Run with `cargo bench --bench leiden`. Graphs:
//!
//! * planted-partition graphs from `graphrag_operations::leiden::planted_partition`
//!   with about 10k, 100k and 1M edges (average degree 20, community sizes
//!   uniform in 20..=200, mixing μ = 0.3 and, for the largest, also μ = 0.1;
//!   fixed seeds), so the ground truth is known;
//! * `../shared/eval/graphs/lfr_n100000_mu0.1_seed42` (632k edges, LFR with
//!   ground truth) when that folder exists; its `edges.csv.gz` is read through
//!   `gzip -dc`.
//!
//! For each graph: flat `leiden` (default config: resolution 1, seed
//! 0xDEADBEEF) time, modularity, community count and NMI against the truth;
//! `hierarchical_leiden` (max_cluster_size 10, use_lcc) time and communities
//! per level. Every timing is the median of 3 runs, single-threaded, printed
//! as a markdown table on stdout: wall-clock seconds, and in parentheses the
//! thread's CPU seconds (Linux `/proc/thread-self/stat`, 10 ms ticks), which
//! stay meaningful when other processes compete for the cores.
//!
//! Environment: `BENCH_LEIDEN_MAX_EDGES` skips generated graphs above that
//! many edges; `BENCH_LEIDEN_DUMP=DIR` also writes each generated graph as
//! `DIR/NAME/edges.csv` (`source,target`) and `DIR/NAME/communities.csv`
//! (`node,community`), the layout of `../shared/eval/graphs`, so other tools
//! can be run on the very same graphs.
//!
//! `BENCH_LEIDEN_GRAPHS=DIR1,DIR2,...` runs on those graphs instead (and
//! only on them): each `DIR` holds `edges.csv` (`source,target[,...]` with
//! non-negative integer node ids; any further column, a weight included, is
//! ignored, so every edge weighs 1 and the modularity is that of the
//! unweighted graph, resolution 1) and optionally `communities.csv`
//! (`node,community`, the ground truth), as `../shared/eval/graphs` and the
//! dumps above lay them out; `edges.csv.gz` / `communities.csv.gz` are read
//! through `gzip -dc`. The graph's name is the folder's name. For these
//! graphs `hierarchical_leiden` runs with `use_lcc: false`, like
//! graspologic-native's `hierarchical_leiden`, which clusters every node it
//! is given.
//!
//! Node ids that appear in no edge (isolated nodes below the largest id)
//! are left out of the community counts and the NMI, which is computed on
//! the nodes that have an edge and a truth label (what the Python scorer
//! `score_partition.py` does, since its graph holds only the nodes of the
//! edge list); they cannot change the modularity.
//!
//! `BENCH_LEIDEN_ITERATIONS=N` caps `LeidenConfig::max_iterations` (default
//! 10; graspologic runs 1 iteration, igraph's `community_leiden` 2) for the
//! flat and the hierarchical runs, to see what the extra iterations cost
//! and buy.
//!
//! `BENCH_LEIDEN_WRITE=DIR` writes each graph's flat partition (of the last
//! timed run) as `DIR/NAME.flat.csv` (`node,community`, nodes with an edge
//! only), for cross-checking with `score_partition.py EDGES PARTITION [TRUTH]`.

use std::hint::black_box;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use graphrag_operations::leiden::{
    hierarchical_leiden, leiden, modularity, nmi, planted_partition, random_community_sizes, Graph, HierarchyConfig,
    LeidenConfig,
};

const REPEATS: usize = 3;

struct Case {
    name: String,
    num_nodes: usize,
    edges: Vec<(usize, usize, f64)>,
    /// Ground-truth community of each node; `NO_TRUTH` for a node the truth
    /// file does not list.
    truth: Option<Vec<usize>>,
    /// Whether the hierarchy keeps only the largest connected component.
    use_lcc: bool,
}

const NO_TRUTH: usize = usize::MAX;

/// CPU time used by this thread so far, in seconds: `utime + stime` from
/// `/proc/thread-self/stat` (assumes the usual 100 ticks per second).
/// `None` where that file does not exist.
fn thread_cpu_seconds() -> Option<f64> {
    let stat = std::fs::read_to_string("/proc/thread-self/stat").ok()?;
    // Fields after the parenthesised command name start with field 3.
    let rest = &stat[stat.rfind(')')? + 1..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let utime: f64 = fields.get(11)?.parse().ok()?;
    let stime: f64 = fields.get(12)?.parse().ok()?;
    Some((utime + stime) / 100.0)
}

/// Runs `f` `REPEATS` times; returns the last result and the median wall
/// and CPU seconds.
fn timed<T>(mut f: impl FnMut() -> T) -> (T, f64, Option<f64>) {
    let mut walls = Vec::new();
    let mut cpus = Vec::new();
    let mut out = None;
    for _ in 0..REPEATS {
        let cpu0 = thread_cpu_seconds();
        let start = Instant::now();
        out = Some(black_box(f()));
        walls.push(start.elapsed().as_secs_f64());
        if let (Some(a), Some(b)) = (cpu0, thread_cpu_seconds()) {
            cpus.push(b - a);
        }
    }
    let cpu = (cpus.len() == REPEATS).then(|| median(cpus));
    (out.expect("REPEATS > 0"), median(walls), cpu)
}

fn seconds(wall: f64, cpu: Option<f64>) -> String {
    match cpu {
        Some(c) => format!("{wall:.3} ({c:.2})"),
        None => format!("{wall:.3}"),
    }
}

fn median(mut xs: Vec<f64>) -> f64 {
    xs.sort_by(|a, b| a.partial_cmp(b).expect("finite"));
    xs[xs.len() / 2]
}

fn planted(name: &str, nodes: usize, mu: f64, seed: u64) -> Case {
    let sizes = random_community_sizes(nodes, 20, 200, seed);
    let g = planted_partition(&sizes, 20.0, mu, seed);
    Case { name: name.to_string(), num_nodes: g.num_nodes, edges: g.edges, truth: Some(g.truth), use_lcc: true }
}

/// Reads `source,target[,...]` rows (after a header) of a CSV text.
fn parse_edges(text: &str) -> Vec<(usize, usize, f64)> {
    text.lines()
        .skip(1)
        .filter(|l| !l.trim().is_empty())
        .map(|l| {
            let mut it = l.split(',');
            let a: usize = it.next().unwrap().trim().parse().unwrap();
            let b: usize = it.next().unwrap().trim().parse().unwrap();
            (a, b, 1.0)
        })
        .collect()
}

fn read_maybe_gz(path: &Path) -> Option<String> {
    if path.exists() {
        return std::fs::read_to_string(path).ok();
    }
    let gz = PathBuf::from(format!("{}.gz", path.display()));
    if !gz.exists() {
        return None;
    }
    let out = Command::new("gzip").arg("-dc").arg(&gz).output().ok()?;
    if !out.status.success() {
        eprintln!("gzip -dc {} failed", gz.display());
        return None;
    }
    String::from_utf8(out.stdout).ok()
}

fn lfr(name: &str) -> Option<Case> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/eval/graphs").join(name);
    load_dir(name, &dir, true)
}

/// Reads `DIR/edges.csv` and, when present, `DIR/communities.csv`.
fn load_dir(name: &str, dir: &Path, use_lcc: bool) -> Option<Case> {
    let Some(edges_text) = read_maybe_gz(&dir.join("edges.csv")) else {
        eprintln!("note: {} not found, skipping {name}", dir.join("edges.csv").display());
        return None;
    };
    let edges = parse_edges(&edges_text);
    let truth = read_maybe_gz(&dir.join("communities.csv")).map(|t| {
        let rows: Vec<(usize, usize)> = parse_edges(&t).into_iter().map(|(a, b, _)| (a, b)).collect();
        let len = rows.iter().map(|&(node, _)| node + 1).max().unwrap_or(0);
        let mut truth = vec![NO_TRUTH; len];
        for (node, c) in rows {
            truth[node] = c;
        }
        truth
    });
    let num_nodes =
        edges.iter().map(|&(a, b, _)| a.max(b) + 1).max().unwrap_or(0).max(truth.as_ref().map_or(0, Vec::len));
    Some(Case { name: name.to_string(), num_nodes, edges, truth, use_lcc })
}

/// `true` for every node that is an end of some edge.
fn has_edge(case: &Case) -> Vec<bool> {
    let mut seen = vec![false; case.num_nodes];
    for &(a, b, _) in &case.edges {
        seen[a] = true;
        seen[b] = true;
    }
    seen
}

/// NMI of `part` against `truth` over the nodes that have an edge and a
/// truth label.
fn nmi_on_edges(part: &[usize], truth: &[usize], seen: &[bool]) -> f64 {
    let (a, b): (Vec<usize>, Vec<usize>) = (0..part.len())
        .filter(|&v| seen[v] && truth.get(v).is_some_and(|&t| t != NO_TRUTH))
        .map(|v| (part[v], truth[v]))
        .unzip();
    nmi(&a, &b)
}

fn write_partition(dir: &Path, name: &str, part: &[usize], seen: &[bool]) {
    std::fs::create_dir_all(dir).expect("create partition dir");
    let path = dir.join(format!("{name}.flat.csv"));
    let mut f = std::io::BufWriter::new(std::fs::File::create(&path).expect("create partition file"));
    writeln!(f, "node,community").unwrap();
    for (v, c) in part.iter().enumerate() {
        if seen[v] {
            writeln!(f, "{v},{c}").unwrap();
        }
    }
}

fn dump(case: &Case, dir: &Path) {
    let dir = dir.join(&case.name);
    std::fs::create_dir_all(&dir).expect("create dump dir");
    let mut f = std::io::BufWriter::new(std::fs::File::create(dir.join("edges.csv")).unwrap());
    writeln!(f, "source,target").unwrap();
    for &(a, b, _) in &case.edges {
        writeln!(f, "{a},{b}").unwrap();
    }
    if let Some(truth) = &case.truth {
        let mut f = std::io::BufWriter::new(std::fs::File::create(dir.join("communities.csv")).unwrap());
        writeln!(f, "node,community").unwrap();
        for (v, c) in truth.iter().enumerate().filter(|&(_, &c)| c != NO_TRUTH) {
            writeln!(f, "{v},{c}").unwrap();
        }
    }
}

fn main() {
    let max_edges: usize = std::env::var("BENCH_LEIDEN_MAX_EDGES")
        .ok()
        .map(|v| v.trim().parse().expect("BENCH_LEIDEN_MAX_EDGES: a number"))
        .unwrap_or(usize::MAX);
    let dump_dir = std::env::var_os("BENCH_LEIDEN_DUMP").map(PathBuf::from);

    let write_dir = std::env::var_os("BENCH_LEIDEN_WRITE").map(PathBuf::from);
    let graph_dirs = std::env::var("BENCH_LEIDEN_GRAPHS").ok().filter(|v| !v.trim().is_empty());

    let mut cases: Vec<Case> = Vec::new();
    if let Some(dirs) = graph_dirs {
        for d in dirs.split(',').map(str::trim).filter(|d| !d.is_empty()) {
            let dir = PathBuf::from(d);
            let name = dir.file_name().map_or_else(|| d.to_string(), |n| n.to_string_lossy().into_owned());
            cases.extend(load_dir(&name, &dir, false));
        }
    } else {
        let specs: [(&str, usize, f64, u64); 4] = [
            ("planted_10k_mu0.3", 1_000, 0.3, 1),
            ("planted_100k_mu0.3", 10_000, 0.3, 2),
            ("planted_1M_mu0.3", 100_000, 0.3, 3),
            ("planted_1M_mu0.1", 100_000, 0.1, 4),
        ];
        for (name, nodes, mu, seed) in specs {
            if nodes * 10 > max_edges {
                continue;
            }
            let case = planted(name, nodes, mu, seed);
            if let Some(dir) = &dump_dir {
                dump(&case, dir);
            }
            cases.push(case);
        }
        cases.extend(lfr("lfr_n100000_mu0.1_seed42"));
    }

    let mut flat_cfg = LeidenConfig::default();
    if let Ok(v) = std::env::var("BENCH_LEIDEN_ITERATIONS") {
        flat_cfg.max_iterations = v.trim().parse().expect("BENCH_LEIDEN_ITERATIONS: a number");
        println!("(max_iterations = {})\n", flat_cfg.max_iterations);
    }
    println!(
        "| graph | nodes | edges | flat leiden s (CPU s) | modularity | communities | NMI vs truth | hierarchical s (CPU s) | levels | communities per level |"
    );
    println!("|---|---:|---:|---:|---:|---:|---:|---:|---:|---|");
    for case in &cases {
        let start = Instant::now();
        let graph = Graph::from_edges(case.num_nodes, &case.edges);
        let build = start.elapsed().as_secs_f64();

        let (part, flat_wall, flat_cpu) = timed(|| leiden(&graph, &flat_cfg));
        let q = modularity(&graph, &part, 1.0);
        let seen = has_edge(case);
        let mut labels: Vec<usize> = (0..part.len()).filter(|&v| seen[v]).map(|v| part[v]).collect();
        labels.sort_unstable();
        labels.dedup();
        let k = labels.len();
        let score = case.truth.as_ref().map_or("–".to_string(), |t| format!("{:.4}", nmi_on_edges(&part, t, &seen)));
        if let Some(dir) = &write_dir {
            write_partition(dir, &case.name, &part, &seen);
        }
        let hier_cfg =
            HierarchyConfig { use_lcc: case.use_lcc, leiden: flat_cfg.clone(), ..HierarchyConfig::default() };
        let (comms, hier_wall, hier_cpu) = timed(|| hierarchical_leiden(&graph, &hier_cfg));
        let mut per_level: Vec<usize> = Vec::new();
        for c in &comms {
            if per_level.len() <= c.level {
                per_level.resize(c.level + 1, 0);
            }
            per_level[c.level] += 1;
        }
        let levels = per_level.iter().map(|c| c.to_string()).collect::<Vec<_>>().join(" / ");
        println!(
            "| {} | {} | {} | {} | {q:.4} | {k} | {score} | {} | {} | {levels} |",
            case.name,
            seen.iter().filter(|&&s| s).count(),
            graph.num_edges(),
            seconds(flat_wall, flat_cpu),
            seconds(hier_wall, hier_cpu),
            per_level.len(),
        );
        eprintln!("({}: graph built in {build:.3} s)", case.name);
    }
}
