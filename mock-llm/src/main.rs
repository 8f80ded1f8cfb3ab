//! `graphrag-mock-llm`: the deterministic OpenAI-compatible mock server as a
//! process, for benchmarks and manual tests. Serves until killed (SIGINT/SIGTERM).

use std::io::Write;
use std::time::Duration;

use graphrag_mock_llm::{FaultRule, MockConfig, MockServer};

const USAGE: &str = "usage: graphrag-mock-llm [--port 8765] [--latency-ms 0] [--embed-dim 384] \
[--fault KIND[:first=N|:every=K][:chat|:embeddings]]...
  KIND: 429[=RETRY_AFTER_MS] | 500 | 503 | 400 | slow=MS | drop | hang | malformed | truncated | empty
        | mixed (malformed, truncated, empty in turn) | huge=BYTES
  env defaults: MOCK_PORT, MOCK_LATENCY_MS, MOCK_EMBED_DIM, MOCK_FAULTS (comma-separated fault specs)
  binds 127.0.0.1 only; port 0 picks a free port";

fn env_num<T: std::str::FromStr>(name: &str) -> Result<Option<T>, String> {
    match std::env::var(name) {
        Ok(v) if !v.trim().is_empty() => v.trim().parse().map(Some).map_err(|_| format!("{name}: not a number: {v:?}")),
        _ => Ok(None),
    }
}

fn parse_args(args: &[String]) -> Result<MockConfig, String> {
    let mut cfg = MockConfig {
        port: env_num("MOCK_PORT")?.unwrap_or(8765),
        latency: Duration::from_millis(env_num("MOCK_LATENCY_MS")?.unwrap_or(0)),
        embed_dim: env_num("MOCK_EMBED_DIM")?.unwrap_or(384),
        ..MockConfig::default()
    };
    if let Ok(f) = std::env::var("MOCK_FAULTS") {
        for spec in f.split(',').map(str::trim).filter(|s| !s.is_empty()) {
            cfg.faults.push(FaultRule::parse(spec)?);
        }
    }
    let mut it = args.iter();
    while let Some(arg) = it.next() {
        let (flag, inline) = match arg.split_once('=') {
            Some((f, v)) if f.starts_with("--") => (f, Some(v.to_string())),
            _ => (arg.as_str(), None),
        };
        if flag == "-h" || flag == "--help" {
            return Err(String::new());
        }
        let mut value = || -> Result<String, String> {
            inline.clone().or_else(|| it.next().cloned()).ok_or_else(|| format!("{flag} needs a value"))
        };
        let num = |v: String| -> Result<u64, String> { v.parse().map_err(|_| format!("{flag}: not a number: {v:?}")) };
        match flag {
            "--port" => cfg.port = u16::try_from(num(value()?)?).map_err(|_| "--port: out of range")?,
            "--latency-ms" => cfg.latency = Duration::from_millis(num(value()?)?),
            "--embed-dim" => cfg.embed_dim = num(value()?)?.max(1) as usize,
            "--fault" => cfg.faults.push(FaultRule::parse(&value()?)?),
            other => return Err(format!("unknown argument {other:?}")),
        }
    }
    Ok(cfg)
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let cfg = match parse_args(&args) {
        Ok(c) => c,
        Err(e) if e.is_empty() => {
            println!("{USAGE}");
            return;
        }
        Err(e) => {
            eprintln!("graphrag-mock-llm: {e}\n{USAGE}");
            std::process::exit(2);
        }
    };
    // The o200k tables load at their first use (~90 ms): before listening,
    // so that the first request is answered like the others (as a server
    // that has been up a while would), not after the load.
    graphrag_operations::tokenizer::Encoding::O200kBase.tokenizer();
    let server = match MockServer::start(cfg) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("graphrag-mock-llm: cannot listen: {e}");
            std::process::exit(1);
        }
    };
    println!("listening on {}", server.base_url());
    let _ = std::io::stdout().flush();
    // Serve until the process is terminated (SIGINT/SIGTERM end it).
    loop {
        std::thread::park();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use graphrag_mock_llm::{Endpoint, FaultKind};

    fn args(s: &str) -> Vec<String> {
        s.split_whitespace().map(str::to_string).collect()
    }

    #[test]
    fn parses_flags() {
        let c = parse_args(&args(
            "--port 0 --latency-ms=25 --embed-dim 64 --fault 429:first=2 --fault slow=300:every=3:chat --fault drop",
        ))
        .unwrap();
        assert_eq!(c.port, 0);
        assert_eq!(c.latency, Duration::from_millis(25));
        assert_eq!(c.embed_dim, 64);
        assert_eq!(
            c.faults,
            vec![
                FaultRule::always(FaultKind::RateLimit { retry_after_ms: 1000 }).first(2),
                FaultRule::always(FaultKind::Slow { delay: Duration::from_millis(300) }).every(3).on(Endpoint::Chat),
                FaultRule::always(FaultKind::DropConnection),
            ]
        );
        assert!(parse_args(&args("--fault nope")).is_err());
        assert!(parse_args(&args("--bogus")).is_err());
        assert_eq!(parse_args(&args("--help")).unwrap_err(), "");
    }
}
