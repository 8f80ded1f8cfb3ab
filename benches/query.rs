//! Query latency benchmark (issue 7): context building (`context_only`, no
//! chat model call) for local, basic, mix, hybrid, global and ppr on a
//! synthetic index of N entities (default 100 000) and on the example corpus
//! index, plus global map-reduce wall time with the mock LLM at 200 ms per
//! request; optionally on an existing project (e.g. a dev set's index).
//!
//! `cargo bench --bench query` (env: BENCH_ENTITIES (0: no synthetic index), BENCH_DIM, BENCH_QUERIES,
//! BENCH_BIN = the graphrag-rs binary for the example index, default
//! target/release/graphrag-rs of BENCH_REPO (default: this package); the example part is skipped when it is missing;
//! BENCH_PROJECT = a project folder whose index to measure too, with its own
//! settings (local embeddings included), asked the `question`s of the JSON list
//! BENCH_QUESTIONS, e.g. ../shared/eval/twowiki-101/dev/questions.json).
//!
//! Every query embeds the question through the in-process mock server over
//! HTTP; that round trip is part of the measured time.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use arrow_array::builder::{FixedSizeListBuilder, Float32Builder};
use arrow_array::{ArrayRef, RecordBatch};
use graphrag_engine::schema;
use graphrag_engine::store::{read_table, write_table};
use graphrag_mock_llm::{embed, MockConfig, MockServer};
use graphrag_query::{Method, QueryEngine, QueryRequest};
use rayon::prelude::*;

const WORDS: &[&str] = &[
    "amber",
    "harbor",
    "falcon",
    "granite",
    "meadow",
    "copper",
    "lantern",
    "orchard",
    "quartz",
    "river",
    "saffron",
    "timber",
    "velvet",
    "willow",
    "beacon",
    "cobalt",
    "delta",
    "ember",
    "fjord",
    "glacier",
    "hollow",
    "indigo",
    "juniper",
    "kestrel",
    "lagoon",
    "marble",
    "nectar",
    "onyx",
    "pioneer",
    "quill",
    "raven",
    "summit",
    "tundra",
    "umber",
    "vortex",
    "warden",
    "yarrow",
    "zephyr",
    "anchor",
    "bramble",
    "canyon",
    "dune",
    "estuary",
    "forge",
    "garnet",
    "heron",
    "island",
    "jasper",
    "kiln",
    "ledger",
    "mill",
    "nomad",
    "ore",
    "pylon",
    "quarry",
    "ridge",
    "spruce",
    "tide",
    "union",
    "valley",
    "wharf",
    "signal",
    "bank",
    "foundry",
    "railway",
    "market",
    "council",
    "guild",
    "observatory",
    "library",
    "clinic",
    "academy",
    "brewery",
    "shipyard",
    "vineyard",
    "mine",
    "bridge",
    "tower",
];
const TYPES: &[&str] = &["ORGANIZATION", "PERSON", "GEO", "EVENT"];

/// splitmix64: cheap deterministic pseudo-random numbers.
fn mix(mut x: u64) -> u64 {
    x = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
    x = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    x ^ (x >> 31)
}
fn word(seed: u64) -> &'static str {
    WORDS[(mix(seed) % WORDS.len() as u64) as usize]
}

fn env_usize(name: &str, default: usize) -> usize {
    std::env::var(name).ok().and_then(|v| v.parse().ok()).unwrap_or(default)
}

fn vectors_table(ids: Vec<String>, texts: &[String], dim: usize) -> RecordBatch {
    let vecs: Vec<Vec<f32>> = texts.par_iter().map(|t| embed(t, dim)).collect();
    let mut list = FixedSizeListBuilder::with_capacity(Float32Builder::with_capacity(vecs.len() * dim), dim as i32, 0);
    for v in &vecs {
        list.values().append_slice(v);
        list.append(true);
    }
    RecordBatch::try_from_iter(vec![("id", schema::text_col(ids)), ("vector", Arc::new(list.finish()) as ArrayRef)])
        .unwrap()
}

fn settings_text(mock: &MockServer) -> String {
    format!(
        "completion_models:\n  default_completion_model:\n    model_provider: openai\n    model: mock-chat\n    api_key: test-key\n    api_base: {url}\n    max_retries: 0\nembedding_models:\n  default_embedding_model:\n    model_provider: openai\n    model: mock-embed\n    api_key: test-key\n    api_base: {url}\n    max_retries: 0\ncache:\n  type: none\nvector_store:\n  ann_threshold: 100000000\n",
        url = mock.base_url()
    )
}

/// Synthetic GraphRAG index: n entities, 3n relationships, n/5 text units,
/// communities at level 0 (blocks of 1000 entities) and level 1 (blocks of 100).
fn write_synthetic(dir: &Path, n: usize, dim: usize) -> Vec<String> {
    let out = dir.join("output");
    std::fs::create_dir_all(&out).unwrap();
    let ent_id = |i: usize| format!("e{i}");
    let rel_id = |r: usize| format!("r{r}");
    let unit_id = |u: usize| format!("t{u}");
    let titles: Vec<String> =
        (0..n).map(|i| format!("{} {} {i}", word(i as u64 * 7 + 1), word(i as u64 * 7 + 2)).to_uppercase()).collect();
    let types: Vec<&str> = (0..n).map(|i| TYPES[i % TYPES.len()]).collect();
    let descs: Vec<String> = (0..n)
        .map(|i| {
            let s = i as u64 * 7;
            format!(
                "A {} known for the {} {} near the {} {}, linked to {} trade.",
                types[i].to_lowercase(),
                word(s + 3),
                word(s + 4),
                word(s + 5),
                word(s + 6),
                word(s + 1)
            )
        })
        .collect();
    // relationships: 3 per entity: next entity, one in its block of 100, one anywhere
    let nr = 3 * n;
    let mut src = Vec::with_capacity(nr);
    let mut tgt = Vec::with_capacity(nr);
    for i in 0..n {
        let block = i / 100 * 100;
        let span = (n - block).min(100);
        for (k, t) in
            [(i + 1) % n, block + (mix(i as u64 ^ 0xb10c) as usize % span), mix(i as u64 ^ 0x61ab) as usize % n]
                .into_iter()
                .enumerate()
        {
            let t = if t == i { (i + 2 + k) % n } else { t };
            src.push(i);
            tgt.push(t);
        }
    }
    let mut degree = vec![0i64; n];
    for r in 0..nr {
        degree[src[r]] += 1;
        degree[tgt[r]] += 1;
    }
    // text units: unit u mentions entities 5u..5u+5
    let nu = n.div_ceil(5);
    let unit_of = |i: usize| i / 5;
    let units: Vec<String> = (0..nu)
        .map(|u| {
            (5 * u..(5 * u + 5).min(n))
                .map(|i| format!("{} is {}", titles[i], descs[i].to_lowercase()))
                .collect::<Vec<_>>()
                .join(" ")
        })
        .collect();
    let mut unit_rels: Vec<Vec<String>> = vec![Vec::new(); nu];
    for r in 0..nr {
        unit_rels[unit_of(src[r])].push(rel_id(r));
    }
    write_table(
        &out.join("text_units.parquet"),
        &RecordBatch::try_new(
            schema::text_units(),
            vec![
                schema::text_col((0..nu).map(unit_id)),
                schema::int_col(0..nu as i64),
                schema::text_col(&units),
                schema::int_col(units.iter().map(|t| (t.split_whitespace().count() * 4 / 3) as i64)),
                schema::text_col(vec!["doc-0"; nu]),
                schema::id_list_col((0..nu).map(|u| (5 * u..(5 * u + 5).min(n)).map(ent_id).collect::<Vec<_>>())),
                schema::id_list_col(unit_rels),
                schema::id_list_col((0..nu).map(|_| Vec::<String>::new())),
            ],
        )
        .unwrap(),
    )
    .unwrap();
    write_table(
        &out.join("entities.parquet"),
        &RecordBatch::try_new(
            schema::entities(),
            vec![
                schema::text_col((0..n).map(ent_id)),
                schema::int_col(0..n as i64),
                schema::text_col(&titles),
                schema::text_col(&types),
                schema::text_col(&descs),
                schema::id_list_col((0..n).map(|i| vec![unit_id(unit_of(i))])),
                schema::int_col(vec![1; n]),
                schema::int_col(degree.iter().copied()),
            ],
        )
        .unwrap(),
    )
    .unwrap();
    let rel_desc: Vec<String> = (0..nr)
        .map(|r| {
            format!("{} works with {} on {} {}", titles[src[r]], titles[tgt[r]], word(r as u64), word(r as u64 + 9))
        })
        .collect();
    write_table(
        &out.join("relationships.parquet"),
        &RecordBatch::try_new(
            schema::relationships(),
            vec![
                schema::text_col((0..nr).map(rel_id)),
                schema::int_col(0..nr as i64),
                schema::text_col(src.iter().map(|&i| &titles[i])),
                schema::text_col(tgt.iter().map(|&i| &titles[i])),
                schema::text_col(&rel_desc),
                schema::float_col((0..nr).map(|r| 1.0 + (mix(r as u64) % 5) as f64)),
                schema::int_col((0..nr).map(|r| degree[src[r]] + degree[tgt[r]])),
                schema::id_list_col((0..nr).map(|r| vec![unit_id(unit_of(src[r]))])),
            ],
        )
        .unwrap(),
    )
    .unwrap();

    // communities: level 0 = blocks of 1000 entities, level 1 = blocks of 100
    struct Com {
        level: i64,
        parent: i64,
        children: Vec<i64>,
        lo: usize,
        hi: usize,
    }
    let c0 = n.div_ceil(1000);
    let c1 = n.div_ceil(100);
    let mut coms: Vec<Com> = (0..c0)
        .map(|c| Com {
            level: 0,
            parent: -1,
            children: (c * 10..(c * 10 + 10).min(c1)).map(|k| (c0 + k) as i64).collect(),
            lo: c * 1000,
            hi: (c * 1000 + 1000).min(n),
        })
        .collect();
    coms.extend((0..c1).map(|k| Com {
        level: 1,
        parent: (k / 10) as i64,
        children: vec![],
        lo: k * 100,
        hi: (k * 100 + 100).min(n),
    }));
    let nc = coms.len();
    let rels_in = |c: &Com| -> Vec<String> {
        (3 * c.lo..3 * c.hi).filter(|&r| (c.lo..c.hi).contains(&tgt[r])).map(rel_id).collect()
    };
    let units_in = |c: &Com| -> Vec<String> { (unit_of(c.lo)..=unit_of(c.hi - 1)).map(unit_id).collect() };
    let com_titles: Vec<String> = (0..nc).map(|c| format!("Community {c}")).collect();
    write_table(
        &out.join("communities.parquet"),
        &RecordBatch::try_new(
            schema::communities(),
            vec![
                schema::text_col((0..nc).map(|c| format!("c{c}"))),
                schema::int_col(0..nc as i64),
                schema::int_col(0..nc as i64),
                schema::int_col(coms.iter().map(|c| c.level)),
                schema::int_col(coms.iter().map(|c| c.parent)),
                schema::int_list_col(coms.iter().map(|c| c.children.clone())),
                schema::text_col(&com_titles),
                schema::id_list_col(coms.iter().map(|c| (c.lo..c.hi).map(ent_id).collect::<Vec<_>>())),
                schema::id_list_col(coms.iter().map(rels_in)),
                schema::id_list_col(coms.iter().map(units_in)),
                schema::text_col(vec!["2026-01-01"; nc]),
                schema::int_col(coms.iter().map(|c| (c.hi - c.lo) as i64)),
            ],
        )
        .unwrap(),
    )
    .unwrap();
    let reports: Vec<(String, String, String)> = coms
        .iter()
        .enumerate()
        .map(|(c, com)| {
            let lead = &titles[com.lo];
            let s = c as u64 * 13;
            let title = format!("{lead} and the {} {} network", word(s), word(s + 1));
            let summary = format!(
                "This community of {} entities centres on {lead}, active in {} {} and {} {}.",
                com.hi - com.lo,
                word(s + 2),
                word(s + 3),
                word(s + 4),
                word(s + 5)
            );
            let findings: Vec<String> = (com.lo..com.hi)
                .step_by(((com.hi - com.lo) / 4).max(1))
                .take(4)
                .map(|i| format!("## {}\n\n{} {}", titles[i], titles[i], descs[i].to_lowercase()))
                .collect();
            let full = format!("# {title}\n\n{summary}\n\n{}", findings.join("\n\n"));
            (title, summary, full)
        })
        .collect();
    write_table(
        &out.join("community_reports.parquet"),
        &RecordBatch::try_new(
            schema::community_reports(),
            vec![
                schema::text_col((0..nc).map(|c| format!("rep{c}"))),
                schema::int_col(0..nc as i64),
                schema::int_col(0..nc as i64),
                schema::int_col(coms.iter().map(|c| c.level)),
                schema::int_col(coms.iter().map(|c| c.parent)),
                schema::int_list_col(coms.iter().map(|c| c.children.clone())),
                schema::text_col(reports.iter().map(|r| &r.0)),
                schema::text_col(reports.iter().map(|r| &r.1)),
                schema::text_col(reports.iter().map(|r| &r.2)),
                schema::float_col((0..nc).map(|c| 1.0 + (mix(c as u64) % 9) as f64)),
                schema::text_col(vec!["synthetic"; nc]),
                schema::findings_col((0..nc).map(|_| Vec::new())),
                schema::text_col(vec!["{}"; nc]),
                schema::text_col(vec!["2026-01-01"; nc]),
                schema::int_col(coms.iter().map(|c| (c.hi - c.lo) as i64)),
            ],
        )
        .unwrap(),
    )
    .unwrap();

    let write_vectors = |field: &str, ids: Vec<String>, texts: Vec<String>| {
        write_table(&out.join(format!("embeddings.{field}.parquet")), &vectors_table(ids, &texts, dim)).unwrap();
    };
    write_vectors("text_unit_text", (0..nu).map(unit_id).collect(), units.clone());
    write_vectors(
        "entity_description",
        (0..n).map(ent_id).collect(),
        (0..n).map(|i| format!("{}:{}", titles[i], descs[i])).collect(),
    );
    write_vectors("relationship_description", (0..nr).map(rel_id).collect(), rel_desc);
    write_vectors(
        "community_full_content",
        (0..nc).map(|c| format!("rep{c}")).collect(),
        reports.into_iter().map(|r| r.2).collect(),
    );

    // questions about random entities, with varied templates
    let templates = [
        "What is the relationship between {a} and {b}?",
        "Tell me about {a}.",
        "Which organizations are linked to {a}?",
        "How is {a} involved in {w} trade?",
        "What do {a} and {b} have in common?",
        "Describe the {w} network around {a}.",
        "Who works with {a} near the {w}?",
        "What role does {a} play?",
    ];
    (0..1000u64)
        .map(|q| {
            let a = &titles[(mix(q ^ 0xa) % n as u64) as usize];
            let b = &titles[(mix(q ^ 0xb) % n as u64) as usize];
            templates[q as usize % templates.len()].replace("{a}", a).replace("{b}", b).replace("{w}", word(q ^ 0xc))
        })
        .collect()
}

fn christmas_questions() -> Vec<String> {
    let who = [
        "Scrooge",
        "Bob Cratchit",
        "Tiny Tim",
        "Jacob Marley",
        "Fred",
        "Fezziwig",
        "Belle",
        "the Ghost of Christmas Past",
        "the Ghost of Christmas Present",
        "the Ghost of Christmas Yet to Come",
        "Mrs. Cratchit",
        "London",
    ];
    let templates = [
        "Who is {a}?",
        "What is the relationship between {a} and {b}?",
        "How does {a} change over the story?",
        "What does {a} show Scrooge?",
        "What happens to {a} at Christmas?",
        "Why is {a} important to the story?",
        "Describe the home of {a}.",
        "What does {a} say about {b}?",
    ];
    let mut qs = Vec::new();
    for q in 0..1000u64 {
        let a = who[(mix(q ^ 1) % who.len() as u64) as usize];
        let b = who[(mix(q ^ 2) % who.len() as u64) as usize];
        qs.push(templates[q as usize % templates.len()].replace("{a}", a).replace("{b}", b));
    }
    qs
}

/// Builds the example corpus index with the release binary (fast method: no LLM).
fn build_example(dir: &Path, mock: &MockServer) -> Result<f64, String> {
    let repo = std::env::var("BENCH_REPO").map(PathBuf::from).unwrap_or_else(|_| env!("CARGO_MANIFEST_DIR").into());
    let bin = std::env::var("BENCH_BIN").map(PathBuf::from).unwrap_or_else(|_| repo.join("target/release/graphrag-rs"));
    if !bin.exists() {
        return Err(format!("{} not built", bin.display()));
    }
    let root = dir.to_str().unwrap();
    let run = |args: &[&str]| -> Result<(), String> {
        let out = std::process::Command::new(&bin).args(args).output().map_err(|e| e.to_string())?;
        if !out.status.success() {
            return Err(format!("{args:?}: {}", String::from_utf8_lossy(&out.stderr)));
        }
        Ok(())
    };
    run(&["init", "--root", root, "-q"])?;
    let corpus = repo.join("examples/christmas-carol");
    for f in std::fs::read_dir(&corpus).map_err(|e| e.to_string())? {
        let f = f.map_err(|e| e.to_string())?.path();
        if f.extension().is_some_and(|e| e == "txt") {
            std::fs::copy(&f, dir.join("input").join(f.file_name().unwrap())).map_err(|e| e.to_string())?;
        }
    }
    std::fs::write(dir.join("settings.yaml"), settings_text(mock)).map_err(|e| e.to_string())?;
    let t = Instant::now();
    run(&["index", "--root", root, "--method", "fast", "-q"])?;
    Ok(t.elapsed().as_secs_f64())
}

/// "N entities, N relationships, ..." of an output folder.
fn sizes(root: &Path) -> String {
    ["entities", "relationships", "text_units", "community_reports"]
        .iter()
        .map(|t| {
            let rows = read_table(&root.join("output").join(format!("{t}.parquet"))).map(|b| b.num_rows()).unwrap_or(0);
            format!("{rows} {t}")
        })
        .collect::<Vec<_>>()
        .join(", ")
}

fn pct(sorted: &[f64], p: f64) -> f64 {
    sorted[((sorted.len() - 1) as f64 * p).round() as usize]
}

struct Row {
    index: String,
    method: Method,
    cold_ms: f64,
    ctx_p50: f64,
    ctx_p99: f64,
    wall_p50: f64,
    wall_p95: f64,
    wall_p99: f64,
    tokens: u64,
}

fn measure(index: &str, root: &Path, method: Method, questions: &[String], nq: usize) -> Row {
    let engine = QueryEngine::open(root).unwrap();
    let ask = |q: &str| {
        let mut req = QueryRequest::new(method, q);
        req.context_only = true;
        let t = Instant::now();
        let r = engine.query(&req, None).unwrap_or_else(|e| panic!("{method} {q}: {e:#}"));
        (t.elapsed().as_secs_f64() * 1e3, r.stats.context_ms, r.stats.context_tokens)
    };
    let (cold_ms, _, _) = ask(&questions[0]);
    let mut ctx = Vec::with_capacity(nq);
    let mut wall = Vec::with_capacity(nq);
    let mut tokens = 0;
    for q in questions.iter().cycle().skip(1).take(nq) {
        let (w, c, t) = ask(q);
        wall.push(w);
        ctx.push(c);
        tokens += t;
    }
    ctx.sort_by(f64::total_cmp);
    wall.sort_by(f64::total_cmp);
    Row {
        index: index.to_string(),
        method,
        cold_ms,
        ctx_p50: pct(&ctx, 0.5),
        ctx_p99: pct(&ctx, 0.99),
        wall_p50: pct(&wall, 0.5),
        wall_p95: pct(&wall, 0.95),
        wall_p99: pct(&wall, 0.99),
        tokens: tokens / nq as u64,
    }
}

const METHODS: [Method; 6] = [Method::Local, Method::Basic, Method::Mix, Method::Hybrid, Method::Global, Method::Ppr];

/// The methods measured on BENCH_PROJECT: those a fast index answers without a chat model.
const PROJECT_METHODS: [Method; 5] = [Method::Ppr, Method::Basic, Method::Dense, Method::Bm25, Method::Local];

/// The `question` fields of a question file.
fn project_questions(path: &Path) -> Vec<String> {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let list: Vec<serde_json::Value> = serde_json::from_str(&text).unwrap();
    list.iter().filter_map(|q| q["question"].as_str().map(str::to_string)).collect()
}

fn main() {
    let n = env_usize("BENCH_ENTITIES", 100_000);
    let dim = env_usize("BENCH_DIM", 64);
    let nq = env_usize("BENCH_QUERIES", 200);
    let mut rows = Vec::new();

    // example corpus index
    let mock = MockServer::start(MockConfig::default()).unwrap();
    let ex = tempfile::tempdir().unwrap();
    match build_example(ex.path(), &mock) {
        Ok(secs) => {
            eprintln!("example index built in {secs:.1} s: {}", sizes(ex.path()));
            let qs = christmas_questions();
            for m in METHODS {
                rows.push(measure("Christmas Carol", ex.path(), m, &qs, nq));
            }
        }
        Err(e) => eprintln!("skipping the example corpus index: {e}"),
    }
    drop(mock);

    // an existing project
    if let (Ok(project), Ok(questions)) = (std::env::var("BENCH_PROJECT"), std::env::var("BENCH_QUESTIONS")) {
        let root = PathBuf::from(project);
        let qs = project_questions(Path::new(&questions));
        let label = root.file_name().map_or("project".into(), |n| n.to_string_lossy().into_owned());
        eprintln!("{label}: {}; {} questions", sizes(&root), qs.len());
        for m in PROJECT_METHODS {
            rows.push(measure(&label, &root, m, &qs, nq));
        }
    }

    // synthetic index (BENCH_ENTITIES=0: none, e.g. to measure BENCH_PROJECT alone)
    let synthetic = (n > 0).then(|| {
        let mock = MockServer::start(MockConfig { embed_dim: dim, ..MockConfig::default() }).unwrap();
        let dir = tempfile::tempdir().unwrap();
        let t = Instant::now();
        let qs = write_synthetic(dir.path(), n, dim);
        std::fs::write(dir.path().join("settings.yaml"), settings_text(&mock)).unwrap();
        eprintln!("synthetic index of {n} entities (dim {dim}) written in {:.1} s", t.elapsed().as_secs_f64());
        eprintln!("synthetic index: {}", sizes(dir.path()));
        let label = format!("synthetic {}k entities", n / 1000);
        for m in METHODS {
            rows.push(measure(&label, dir.path(), m, &qs, nq));
        }
        (mock, dir, label)
    });

    println!("\n{nq} queries per row after one cold query; times in ms; context_ms = QueryStats.context_ms");
    println!("(tables already loaded, query embedding over HTTP to the in-process mock included)\n");
    println!(
        "| index | method | cold first query | context p50 | context p99 | wall p50 | wall p95 | wall p99 | context tokens |"
    );
    println!("|---|---|---|---|---|---|---|---|---|");
    for r in &rows {
        println!(
            "| {} | {} | {:.1} | {:.2} | {:.2} | {:.2} | {:.2} | {:.2} | {} |",
            r.index, r.method, r.cold_ms, r.ctx_p50, r.ctx_p99, r.wall_p50, r.wall_p95, r.wall_p99, r.tokens
        );
    }

    let Some((mock, dir, label)) = synthetic else { return };
    // global map-reduce with 200 ms per LLM request
    mock.set_latency(Duration::from_millis(200));
    mock.reset_stats();
    let engine = QueryEngine::open(dir.path()).unwrap();
    let req = QueryRequest::new(Method::Global, "What are the main trade networks and who leads them?");
    let t = Instant::now();
    let r = engine.query(&req, None).unwrap();
    let wall = t.elapsed().as_secs_f64();
    let stats = mock.stats();
    println!(
        "\nglobal map-reduce, {label}, mock latency 200 ms: wall {wall:.2} s (tables loaded in the same call), \
         context {:.0} ms, LLM calls {} (map batches + reduce), prompt tokens {}, skipped steps {}, mock stats {stats:?}",
        r.stats.context_ms, r.stats.llm_calls, r.stats.prompt_tokens, r.stats.skipped_steps
    );
}
