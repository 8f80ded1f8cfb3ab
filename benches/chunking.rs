//! Chunking throughput benchmark (plain `fn main`, no criterion).
//!
//! Run with `cargo bench --bench chunking`. The corpus is
//! `examples/christmas-carol/a_christmas_carol.txt` repeated into documents of
//! about 190 KB each (every copy rotated to a different starting point and
//! given its own header, so no two documents are identical) until the corpus
//! reaches `BENCH_MB` megabytes (10^6 bytes; default 12).
//!
//! With `BENCH_EVAL=1`, the JSON corpora under `../shared/eval` (when present)
//! are packed into ~190 KB documents too and placed first in the corpus; the
//! Christmas Carol copies fill the rest up to `BENCH_MB`.
//!
//! Every configuration is timed 3 times and the median is reported, as a
//! markdown table on stdout.

use std::hint::black_box;
use std::path::Path;
use std::time::Instant;

use graphrag_operations::chunking::{chunk_text, ChunkConfig, Strategy};
use graphrag_operations::tokenizer::Encoding;
use rayon::prelude::*;

const REPEATS: usize = 3;
const DOC_TARGET_BYTES: usize = 190_000;
const MB: f64 = 1_000_000.0;

fn main() {
    let bench_mb: f64 = match std::env::var("BENCH_MB") {
        Ok(v) => v.trim().parse().unwrap_or_else(|_| panic!("BENCH_MB must be a number of megabytes, got `{v}`")),
        Err(_) => 12.0,
    };
    assert!(bench_mb > 0.0, "BENCH_MB must be positive");
    let target_bytes = (bench_mb * MB) as usize;

    let docs = build_corpus(target_bytes);
    let total_bytes: usize = docs.iter().map(String::len).sum();
    let mb = total_bytes as f64 / MB;

    let nproc = std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1);
    let pool_threads = rayon::current_num_threads();
    println!("# Chunking throughput");
    println!();
    println!("- nproc: {nproc}");
    println!("- CPU: {}", cpu_model());
    println!("- rayon global pool: {pool_threads} threads");
    println!("- corpus: {} documents, {total_bytes} bytes ({mb:.2} MB), median of {REPEATS} runs", docs.len());
    println!();

    // Load both tokenizers (their ranks are deserialised lazily) outside timing.
    for enc in [Encoding::O200kBase, Encoding::Cl100kBase] {
        black_box(enc.count("warm up the tokenizer"));
    }

    let cfg = |encoding, strategy| ChunkConfig { size: 1200, overlap: 100, encoding, strategy };
    let tokens_o200k = cfg(Encoding::O200kBase, Strategy::Tokens);
    let tokens_cl100k = cfg(Encoding::Cl100kBase, Strategy::Tokens);
    let sentences_o200k = cfg(Encoding::O200kBase, Strategy::Sentences);

    let cases: Vec<Case> = vec![
        Case {
            name: "tokens 1200/100, o200k_base",
            parallel: false,
            unit: "chunks",
            run: Box::new(move |d| chunk_all(d, &tokens_o200k)),
        },
        Case {
            name: "tokens 1200/100, o200k_base, all cores",
            parallel: true,
            unit: "chunks",
            run: Box::new(move |d| chunk_all(d, &tokens_o200k)),
        },
        Case {
            name: "sentences 1200/100, o200k_base",
            parallel: false,
            unit: "chunks",
            run: Box::new(move |d| chunk_all(d, &sentences_o200k)),
        },
        Case {
            name: "tokens 1200/100, cl100k_base",
            parallel: false,
            unit: "chunks",
            run: Box::new(move |d| chunk_all(d, &tokens_cl100k)),
        },
        // Breakdown of the token strategy: `chunk_text` encodes each document
        // once, then counts the tokens of every chunk again (~1.09x the text
        // with a 100 token overlap on 1200); these rows show where time goes.
        Case {
            name: "(part) encode whole documents, o200k_base",
            parallel: false,
            unit: "tokens",
            run: Box::new(|d| Encoding::O200kBase.encode(d).len()),
        },
        Case {
            name: "(part) count whole documents, o200k_base",
            parallel: false,
            unit: "tokens",
            run: Box::new(|d| Encoding::O200kBase.count(d)),
        },
    ];

    let mut rows: Vec<Row> = Vec::new();
    let mut notes: Vec<String> = Vec::new();
    for case in &cases {
        // Untimed warm-up on a few documents (page in the rank tables, caches).
        black_box(run_case(case, &docs[..docs.len().min(4)]));
        let (seconds, times, value) = median_run(|| run_case(case, &docs));
        let threads = if case.parallel { pool_threads } else { 1 };
        notes.push(format!(
            "{}: {value} {}; runs {} s",
            case.name,
            case.unit,
            times.iter().map(|t| format!("{t:.3}")).collect::<Vec<_>>().join(", ")
        ));
        rows.push(Row { name: case.name, mb, threads, seconds });
    }

    println!("| configuration | MB | threads | seconds | MB/s | MB/s per core |");
    println!("|---|---:|---:|---:|---:|---:|");
    for r in &rows {
        println!(
            "| {} | {:.2} | {} | {:.3} | {:.2} | {:.2} |",
            r.name,
            r.mb,
            r.threads,
            r.seconds,
            r.mb_per_s(),
            r.mb_per_s() / r.threads as f64
        );
    }
    println!();
    for n in &notes {
        println!("- {n}");
    }
}

/// One measured configuration: `run` processes one document and returns a
/// count (chunks or tokens) that is summed over the corpus.
struct Case {
    name: &'static str,
    parallel: bool,
    unit: &'static str,
    run: Box<dyn Fn(&str) -> usize + Sync>,
}

/// Runs `case` over `docs`: a sequential loop on this thread, or a rayon
/// `par_iter` over documents on the global pool.
fn run_case(case: &Case, docs: &[String]) -> usize {
    if case.parallel {
        docs.par_iter().map(|d| (case.run)(d)).sum()
    } else {
        docs.iter().map(|d| (case.run)(d)).sum()
    }
}

fn chunk_all(doc: &str, cfg: &ChunkConfig) -> usize {
    black_box(chunk_text(doc, cfg)).len()
}

struct Row {
    name: &'static str,
    mb: f64,
    threads: usize,
    seconds: f64,
}

impl Row {
    fn mb_per_s(&self) -> f64 {
        self.mb / self.seconds
    }
}

/// Runs `f` `REPEATS` times; returns the median wall time in seconds, all the
/// times in run order, and the value of the last run (kept so the work is not
/// optimised away).
fn median_run(mut f: impl FnMut() -> usize) -> (f64, Vec<f64>, usize) {
    let mut times = Vec::with_capacity(REPEATS);
    let mut value = 0;
    for _ in 0..REPEATS {
        let start = Instant::now();
        value = black_box(f());
        times.push(start.elapsed().as_secs_f64());
    }
    let mut sorted = times.clone();
    sorted.sort_by(|a, b| a.total_cmp(b));
    (sorted[sorted.len() / 2], times, value)
}

/// The benchmark corpus: optional eval corpora, then rotated Christmas Carol
/// copies until `target_bytes` is reached.
fn build_corpus(target_bytes: usize) -> Vec<String> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let carol_path = root.join("examples/christmas-carol/a_christmas_carol.txt");
    let carol =
        std::fs::read_to_string(&carol_path).unwrap_or_else(|e| panic!("cannot read {}: {e}", carol_path.display()));
    assert!(!carol.is_empty(), "{} is empty", carol_path.display());

    let mut docs = Vec::new();
    let mut total = 0;
    if std::env::var("BENCH_EVAL").is_ok_and(|v| v == "1") {
        for doc in eval_documents(&root.join("../shared/eval")) {
            if total >= target_bytes {
                break;
            }
            total += doc.len();
            docs.push(doc);
        }
    }

    let mut i = 0usize;
    while total < target_bytes {
        // Rotate the book to a different starting point for every copy.
        let mut cut = (i * 2_999_957) % carol.len();
        while !carol.is_char_boundary(cut) {
            cut += 1;
        }
        let mut doc =
            format!("Document {i}: A Christmas Carol, benchmark copy {i} (edition {}).\n\n", (i * 7919) % 1000);
        doc.reserve(carol.len());
        doc.push_str(&carol[cut..]);
        doc.push_str("\n\n");
        doc.push_str(&carol[..cut]);
        total += doc.len();
        docs.push(doc);
        i += 1;
    }
    docs
}

/// Texts of the JSON corpora under `dir` (`*/corpus/*.json`), packed into
/// documents of about `DOC_TARGET_BYTES`. Missing or unreadable files are skipped.
fn eval_documents(dir: &Path) -> Vec<String> {
    let mut files = Vec::new();
    if let Ok(entries) = std::fs::read_dir(dir) {
        for entry in entries.flatten() {
            if let Ok(inner) = std::fs::read_dir(entry.path().join("corpus")) {
                for f in inner.flatten() {
                    if f.path().extension().is_some_and(|e| e == "json") {
                        files.push(f.path());
                    }
                }
            }
        }
    }
    files.sort();

    let mut docs = Vec::new();
    for file in files {
        let Ok(raw) = std::fs::read_to_string(&file) else {
            continue;
        };
        let Ok(value) = serde_json::from_str::<serde_json::Value>(&raw) else {
            continue;
        };
        let mut texts = Vec::new();
        collect_texts(&value, &mut texts);
        let mut doc = String::new();
        for t in texts {
            doc.push_str(t);
            doc.push_str("\n\n");
            if doc.len() >= DOC_TARGET_BYTES {
                docs.push(std::mem::take(&mut doc));
            }
        }
        if !doc.trim().is_empty() {
            docs.push(doc);
        }
    }
    docs
}

/// Every string of at least 40 bytes in a JSON value (passages, not titles).
fn collect_texts<'a>(value: &'a serde_json::Value, out: &mut Vec<&'a str>) {
    match value {
        serde_json::Value::String(s) if s.len() >= 40 => out.push(s),
        serde_json::Value::Array(items) => items.iter().for_each(|v| collect_texts(v, out)),
        serde_json::Value::Object(map) => map.values().for_each(|v| collect_texts(v, out)),
        _ => {}
    }
}

fn cpu_model() -> String {
    std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|info| {
            info.lines()
                .find(|l| l.starts_with("model name"))
                .and_then(|l| l.split_once(':'))
                .map(|(_, v)| v.trim().to_string())
        })
        .unwrap_or_else(|| "unknown".to_string())
}
