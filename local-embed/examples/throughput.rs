//! Embedding throughput of the local model on ~20-word sentences.
//!
//! cargo run --release -p graphrag-local-embed --example throughput [-- N]

use std::time::Instant;

use graphrag_local_embed::LocalEmbedder;

const WORDS: &[&str] = &[
    "the",
    "graph",
    "community",
    "report",
    "entity",
    "relationship",
    "river",
    "city",
    "council",
    "approved",
    "a",
    "new",
    "bridge",
    "over",
    "after",
    "years",
    "of",
    "debate",
    "between",
    "engineers",
    "and",
    "residents",
    "who",
    "worried",
    "about",
    "traffic",
    "noise",
    "cost",
    "history",
    "museum",
    "opened",
    "exhibition",
    "ancient",
    "maps",
    "trade",
    "routes",
    "merchants",
    "sailed",
    "across",
    "northern",
    "sea",
    "winter",
    "storms",
    "delayed",
    "ships",
    "harbour",
];

fn sentence(i: usize) -> String {
    text(i, 20)
}

fn text(i: usize, n_words: usize) -> String {
    // A deterministic pseudo-random text of `n_words` words.
    let mut x = (i as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    let mut words = Vec::with_capacity(n_words);
    for _ in 0..n_words {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        words.push(WORDS[(x % WORDS.len() as u64) as usize]);
    }
    let mut s = words.join(" ");
    s.push('.');
    s
}

/// CPU seconds used by this process so far (Linux only; assumes the usual
/// 100 clock ticks per second). On a busy machine, work per CPU-second is a
/// steadier number than wall-clock throughput.
fn cpu_seconds() -> Option<f64> {
    let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
    let fields: Vec<&str> = stat.rsplit_once(')')?.1.split_whitespace().collect();
    let ticks: f64 = fields.get(11)?.parse::<f64>().ok()? + fields.get(12)?.parse::<f64>().ok()?;
    Some(ticks / 100.0)
}

fn per_cpu(items: usize, cpu0: Option<f64>) -> String {
    match (cpu0, cpu_seconds()) {
        (Some(a), Some(b)) if b > a => format!(" [{:.2} CPU-s, {:.0} per CPU-second]", b - a, items as f64 / (b - a)),
        _ => String::new(),
    }
}

fn main() -> anyhow::Result<()> {
    let n: usize = std::env::args().nth(1).map(|a| a.parse()).transpose()?.unwrap_or(1000);
    let dir =
        LocalEmbedder::find_default_model().ok_or_else(|| anyhow::anyhow!(LocalEmbedder::missing_model_help()))?;
    let t = Instant::now();
    let e = LocalEmbedder::load(&dir)?;
    println!("loaded {} in {:.2?}", dir.display(), t.elapsed());

    let texts: Vec<String> = (0..n).map(sentence).collect();
    let refs: Vec<&str> = texts.iter().map(String::as_str).collect();
    let tokens: usize = refs.iter().map(|t| e.count_tokens(t) + 2).sum();
    e.embed(&refs[..refs.len().min(64)])?; // warm-up

    let cpu0 = cpu_seconds();
    let t = Instant::now();
    let v = e.embed(&refs)?;
    let secs = t.elapsed().as_secs_f64();
    assert_eq!(v.len(), n);
    println!(
        "{n} sentences (~20 words, {:.1} tokens each) with {} threads: {:.2} s, {:.0} sentences/s, {:.0} tokens/s{}",
        tokens as f64 / n as f64,
        rayon::current_num_threads(),
        secs,
        n as f64 / secs,
        tokens as f64 / secs,
        per_cpu(n, cpu0)
    );

    // Chunk-sized texts: ~250 word-pieces, close to the 254 limit.
    let n_long = (n / 8).max(1);
    let long: Vec<String> = (0..n_long).map(|i| text(i, 250)).collect();
    let refs: Vec<&str> = long.iter().map(String::as_str).collect();
    let tokens: usize = refs.iter().map(|t| e.count_tokens(t).min(e.max_tokens()) + 2).sum();
    let cpu0 = cpu_seconds();
    let t = Instant::now();
    e.embed(&refs)?;
    let secs = t.elapsed().as_secs_f64();
    println!(
        "{n_long} long texts ({:.0} tokens each): {:.2} s, {:.1} texts/s, {:.0} tokens/s{}",
        tokens as f64 / n_long as f64,
        secs,
        n_long as f64 / secs,
        tokens as f64 / secs,
        per_cpu(n_long, cpu0)
    );

    let refs: Vec<&str> = texts.iter().map(String::as_str).collect();
    let t = Instant::now();
    let rounds = 50;
    for q in refs.iter().take(rounds) {
        e.embed(&[q])?;
    }
    println!("single-sentence latency: {:.2} ms", t.elapsed().as_secs_f64() * 1000.0 / rounds as f64);
    Ok(())
}
