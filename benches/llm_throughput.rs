//! LLM layer throughput against the mock server: N chat calls at concurrency
//! C with a fixed server latency should take close to N × latency / C.
//!
//! `cargo bench --bench llm_throughput` (env: BENCH_CALLS, BENCH_CONCURRENCY, BENCH_LATENCY_MS)

use std::sync::Arc;
use std::time::{Duration, Instant};

use graphrag_engine::llm::{ChatModel, Message, UsageCounters};
use graphrag_engine::settings::{ModelConfig, Secret};
use graphrag_mock_llm::{MockConfig, MockServer};

fn env(name: &str, default: u64) -> u64 {
    std::env::var(name).ok().and_then(|v| v.parse().ok()).unwrap_or(default)
}

fn main() {
    let latency_ms = env("BENCH_LATENCY_MS", 200);
    let mock = MockServer::start(MockConfig { latency: Duration::from_millis(latency_ms), ..MockConfig::default() })
        .expect("mock server");
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    println!("| calls | concurrency | latency ms | ideal s | measured s | ratio |");
    println!("|---|---|---|---|---|---|");
    for (calls, concurrency) in [(env("BENCH_CALLS", 200), env("BENCH_CONCURRENCY", 25)), (100, 10), (400, 50)] {
        let cfg = ModelConfig {
            model: "mock".into(),
            api_base: Some(mock.base_url()),
            api_key: Secret::from("bench"),
            concurrent_requests: Some(concurrency as u32),
            ..ModelConfig::default()
        };
        let model = Arc::new(ChatModel::new("bench", &cfg, None).unwrap());
        let usage = UsageCounters::default();
        let started = Instant::now();
        rt.block_on(async {
            let tasks = (0..calls).map(|i| {
                let model = model.clone();
                let usage = &usage;
                async move {
                    let msgs = [Message::user(format!("benchmark question {i}: what happened next?"))];
                    model.chat(&msgs, false, usage, &graphrag_engine::llm::answer::text()).await.expect("mock answers")
                }
            });
            futures_util::future::join_all(tasks).await
        });
        let measured = started.elapsed().as_secs_f64();
        let ideal = calls as f64 * latency_ms as f64 / 1000.0 / concurrency as f64;
        println!("| {calls} | {concurrency} | {latency_ms} | {ideal:.2} | {measured:.2} | {:.3} |", measured / ideal);
        assert_eq!(usage.total().calls, calls);
    }
}
