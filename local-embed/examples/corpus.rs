//! Tokens per CPU-second of the local model on a real corpus, per
//! precision, and how close the quantized vectors are to f32 ones.
//!
//! cargo run --release -p graphrag-local-embed --example corpus -- PATH [MAX_TEXTS] [f32,int8,bf16,...]
//!
//! PATH is a text file (split into pieces of at most 254 word-pieces at word
//! boundaries, as the embed step splits a text unit) or a JSON list of
//! `{"text": …}` passages (the 2Wiki corpus). With f32 among the
//! precisions, every other precision's vectors are compared with f32's:
//! cosine median, 1st percentile and minimum. Each precision also prints a
//! digest of its vectors' bits, to check that a change keeps them.

use std::time::Instant;

use anyhow::{bail, Context, Result};
use graphrag_local_embed::{LocalEmbedder, Precision};

#[derive(serde::Deserialize)]
struct Passage {
    text: String,
}

/// CPU seconds of this process (user + system; 100 ticks per second).
fn cpu_seconds() -> Result<f64> {
    let stat = std::fs::read_to_string("/proc/self/stat")?;
    let fields: Vec<&str> = stat.rsplit_once(')').context("odd /proc/self/stat")?.1.split_whitespace().collect();
    let ticks: f64 = fields[11].parse::<f64>()? + fields[12].parse::<f64>()?;
    Ok(ticks / 100.0)
}

fn cosine(a: &[f32], b: &[f32]) -> f32 {
    a.iter().zip(b).map(|(x, y)| x * y).sum()
}

/// FNV-1a over every vector's f32 bits, in order.
fn fnv1a(vectors: &[Vec<f32>]) -> u64 {
    vectors
        .iter()
        .flatten()
        .flat_map(|v| v.to_bits().to_le_bytes())
        .fold(0xcbf2_9ce4_8422_2325, |h, b| (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3))
}

fn main() -> Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let Some(path) = args.first() else { bail!("usage: corpus PATH [MAX_TEXTS] [f32,int8,bf16,...]") };
    let max: usize = args.get(1).map(|a| a.parse()).transpose()?.unwrap_or(usize::MAX);
    let precisions: Vec<Precision> = args
        .get(2)
        .map(String::as_str)
        .unwrap_or("f32,int8")
        .split(',')
        .map(|p| serde_json::from_value(serde_json::Value::String(p.to_string())))
        .collect::<Result<_, _>>()?;
    let dir = LocalEmbedder::find_default_model().context(LocalEmbedder::missing_model_help())?;
    let raw = std::fs::read_to_string(path).with_context(|| format!("reading {path}"))?;
    // The model the texts are cut with is the first precision's, and embeds
    // them too: one load per precision, as an index run does.
    let mut probe = Some(LocalEmbedder::load_with(&dir, precisions.first().context("no precision")?.kernel())?);
    let cutter = probe.as_ref().expect("just loaded");
    let mut texts: Vec<String> = if path.ends_with(".json") {
        serde_json::from_str::<Vec<Passage>>(&raw)?.into_iter().map(|p| p.text).collect()
    } else {
        // As the embed step's `split_to_fit` cuts a text unit.
        graphrag_operations::chunking::pack_words(&raw, cutter.max_tokens(), |w| cutter.count_tokens(w))
    };
    texts.truncate(max);
    let refs: Vec<&str> = texts.iter().map(String::as_str).collect();
    let tokens: usize = refs.iter().map(|t| cutter.token_ids(t).len()).sum();
    println!("{path}: {} texts, {tokens} tokens ({} threads)", refs.len(), rayon::current_num_threads());

    let mut f32_vectors: Option<Vec<Vec<f32>>> = None;
    for precision in precisions {
        let kernel = precision.kernel();
        let e = match probe.take() {
            Some(first) => first,
            None => LocalEmbedder::load_with(&dir, kernel)?,
        };
        let (cpu0, t) = (cpu_seconds()?, Instant::now());
        let vectors = e.embed(&refs)?;
        let (cpu, wall) = (cpu_seconds()? - cpu0, t.elapsed().as_secs_f64());
        println!(
            "{:>16}: {wall:.2} s wall, {cpu:.2} CPU-s, {:.0} tokens per CPU-second",
            kernel.name(),
            tokens as f64 / cpu
        );
        // A change meant to keep the vectors' bits is checked by this line.
        println!("{:>16}  vectors' bits, FNV-1a: {:016x}", "", fnv1a(&vectors));
        match &f32_vectors {
            Some(base) => {
                let mut c: Vec<f32> = base.iter().zip(&vectors).map(|(a, b)| cosine(a, b)).collect();
                c.sort_by(f32::total_cmp);
                println!(
                    "{:>16}  cosine to f32: median {:.5}, p1 {:.5}, min {:.5}",
                    "",
                    c[c.len() / 2],
                    c[c.len() / 100],
                    c[0]
                );
            }
            None if kernel.precision() == Precision::F32 => f32_vectors = Some(vectors),
            None => {}
        }
    }
    Ok(())
}
