//! A deterministic OpenAI-compatible mock server for graphrag-rs tests and
//! benchmarks, with latency and fault injection. Binds 127.0.0.1 only.
//!
//! ```no_run
//! use graphrag_mock_llm::{MockConfig, MockServer};
//! let server = MockServer::start(MockConfig::default()).unwrap();
//! let base = server.base_url(); // "http://127.0.0.1:PORT/v1"
//! # drop(base);
//! println!("{:?}", server.stats());
//! ```
//!
//! Routes: `POST /v1/chat/completions`, `POST /v1/embeddings` (also without
//! `/v1`, Azure's `/openai/deployments/{name}/...?api-version=...` and
//! Azure AI Foundry's `/models/chat/completions?api-version=...`),
//! Anthropic's `POST /v1/messages`, Gemini's `POST
//! /v1beta/models/{model}:generateContent` (`:streamGenerateContent`,
//! `:embedContent`, `:batchEmbedContents`; also under `/v1`), Bedrock's
//! `POST /model/{modelId}/converse` and `/invoke` (Titan and Cohere
//! embeddings; SigV4-signed), Vertex AI's `POST
//! /v1/projects/{project}/locations/{location}/publishers/google/models/{model}:generateContent`
//! (`:streamGenerateContent`, `:predict`; with an access token of Google's
//! OAuth endpoint, `POST /token`, for the service account of [`google`]),
//! `GET /v1/models`, `GET /stats`, `POST /stats/reset`, `GET /health`.
//! Every answer is a pure function of the request (see [`answers`]).
//!
//! # Modules
//!
//! A deterministic OpenAI-compatible server on 127.0.0.1 for tests and benchmarks: answers every prompt the
//! project sends and Microsoft GraphRAG's own prompt files (classified by phrases of both), under `/v1`
//! only (a base URL without it gets a 404, as from OpenAI or Ollama), embeddings, latency (each answer is
//! made first and sent `latency` after its request arrived, as from a remote server), fault injection (429
//! with Retry-After, 5xx, 400, slow, hang, dropped connections, malformed, truncated, empty, huge and
//! "mixed" output, each every k-th request or always; it answers graphrag-rs's corrective retries like the
//! request before them), request stats, the prompts it was sent by class (`MockConfig::record_prompts`, for
//! tests that check what was asked) and `wait_for_requests` (tests kill a client at an exact request).
//! `answers/`: every answer is a pure function of the messages — `mod.rs` classifies the prompt and
//! dispatches, and makes JSON mode's answers JSON; `extraction`, `reports`, `query` and `tuning` (prompt
//! tuning's questions) answer one family of prompts each.

pub mod answers;
pub mod embed;
pub mod google;
mod providers;
mod rerank;
mod response;
mod server;
mod text;

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

pub use answers::{answer, classify, ChatAnswer, ClassRule, Message, Scope, CLASSIFICATION, OTHER};
pub use embed::embed;

/// Server configuration.
#[derive(Debug, Clone)]
pub struct MockConfig {
    /// Time from a chat/embedding request's arrival to its answer, the
    /// mock's own work included (asynchronous, does not block others).
    pub latency: Duration,
    /// Embedding dimension (default 384).
    pub embed_dim: usize,
    /// Fault rules, checked in order.
    pub faults: Vec<FaultRule>,
    /// Port on 127.0.0.1; 0 = any free port.
    pub port: u16,
    /// Keep every chat request's last message, for [`MockServer::prompts`]
    /// (tests that check what was asked).
    pub record_prompts: bool,
}

impl Default for MockConfig {
    fn default() -> Self {
        MockConfig { latency: Duration::ZERO, embed_dim: 384, faults: Vec::new(), port: 0, record_prompts: false }
    }
}

/// A fault injected into matching requests. Each rule counts the requests it
/// matches (1-based, by endpoint); it fires when the count is within `first`
/// (if set) and a multiple of `every` (if set); with neither it always fires.
/// Rules are checked in order and the first that fires wins.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FaultRule {
    pub kind: FaultKind,
    /// Apply to the first N matching requests.
    pub first: Option<u32>,
    /// Apply to every k-th matching request (1-based count).
    pub every: Option<u32>,
    /// Apply only after the first N matching requests.
    pub after: Option<u32>,
    /// Chat, Embeddings, or None = any.
    pub endpoint: Option<Endpoint>,
}

impl FaultRule {
    /// A rule applying to every request of any endpoint.
    pub fn always(kind: FaultKind) -> FaultRule {
        FaultRule { kind, first: None, every: None, after: None, endpoint: None }
    }

    /// Applies to the first `n` matching requests only.
    pub fn first(mut self, n: u32) -> FaultRule {
        self.first = Some(n);
        self
    }

    /// Applies to every `k`-th matching request.
    pub fn every(mut self, k: u32) -> FaultRule {
        self.every = Some(k);
        self
    }

    /// Applies only after the first `n` matching requests.
    pub fn after(mut self, n: u32) -> FaultRule {
        self.after = Some(n);
        self
    }

    /// Restricts the rule to one endpoint.
    pub fn on(mut self, endpoint: Endpoint) -> FaultRule {
        self.endpoint = Some(endpoint);
        self
    }

    /// Parses the command-line form `KIND[:first=N][:every=K][:after=N][:chat|:embeddings]`,
    /// KIND one of `429[=RETRY_AFTER_MS]`, `400`, `500`, `503` (any 5xx),
    /// `slow=MS`, `drop`, `hang`, `malformed`, `truncated`, `empty`, `mixed`,
    /// `huge=BYTES`.
    pub fn parse(spec: &str) -> Result<FaultRule, String> {
        let mut parts = spec.split(':');
        let kind_s = parts.next().unwrap_or("").trim();
        let num = |s: &str, what: &str| -> Result<u64, String> {
            s.trim().parse::<u64>().map_err(|_| format!("fault {spec:?}: bad {what} {s:?}"))
        };
        let kind = match kind_s.split_once('=') {
            Some(("429", ms)) => FaultKind::RateLimit { retry_after_ms: num(ms, "retry-after")? },
            Some(("slow", ms)) => FaultKind::Slow { delay: Duration::from_millis(num(ms, "delay")?) },
            Some(("huge", n)) => FaultKind::Huge { bytes: num(n, "size")? as usize },
            Some(_) => return Err(format!("fault {spec:?}: unknown kind {kind_s:?}")),
            None => match kind_s {
                "429" => FaultKind::RateLimit { retry_after_ms: 1000 },
                "400" => FaultKind::BadRequest,
                "drop" => FaultKind::DropConnection,
                "hang" => FaultKind::Hang,
                "malformed" => FaultKind::Malformed,
                "truncated" => FaultKind::Truncated,
                "empty" => FaultKind::Empty,
                "mixed" => FaultKind::Mixed,
                "slow" => FaultKind::Slow { delay: Duration::from_secs(30) },
                s => match s.parse::<u16>() {
                    Ok(status) if (500..600).contains(&status) => FaultKind::ServerError { status },
                    _ => return Err(format!("fault {spec:?}: unknown kind {s:?}")),
                },
            },
        };
        let mut rule = FaultRule::always(kind);
        for p in parts {
            match p.trim().split_once('=') {
                Some(("first", n)) => rule.first = Some(num(n, "count")? as u32),
                Some(("after", n)) => rule.after = Some(num(n, "count")? as u32),
                Some(("every", n)) => {
                    let k = num(n, "count")? as u32;
                    if k == 0 {
                        return Err(format!("fault {spec:?}: every=0"));
                    }
                    rule.every = Some(k);
                }
                None if p == "chat" => rule.endpoint = Some(Endpoint::Chat),
                None if p == "embeddings" || p == "embedding" => rule.endpoint = Some(Endpoint::Embeddings),
                None if p == "rerank" => rule.endpoint = Some(Endpoint::Rerank),
                _ => return Err(format!("fault {spec:?}: unknown option {p:?}")),
            }
        }
        Ok(rule)
    }
}

/// What a fault does.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FaultKind {
    /// 429 with `Retry-After` (seconds, rounded up), `retry-after-ms` and an
    /// OpenAI error body.
    RateLimit { retry_after_ms: u64 },
    /// That status with an OpenAI error body.
    ServerError { status: u16 },
    /// 400 with `{"error":{"message":..,"type":"invalid_request_error"}}`.
    BadRequest,
    /// Extra delay before a normal answer (to trigger client timeouts).
    Slow { delay: Duration },
    /// Close the connection without a response.
    DropConnection,
    /// Never answer (the request stays open until the client goes away or
    /// the server stops): a client killed mid-run, as seen by the server.
    Hang,
    /// 200 with broken content: chat content is broken JSON plus prose (or
    /// garbage); the embeddings body is broken JSON.
    Malformed,
    /// 200 with the content cut at half (chat: `finish_reason: "length"`;
    /// embeddings: the body cut at half).
    Truncated,
    /// 200 with an empty chat answer (`finish_reason: "stop"`).
    Empty,
    /// Malformed, truncated and empty in turn (the rule's 1st firing is
    /// malformed, the 2nd truncated, the 3rd empty, the 4th malformed, ...).
    Mixed,
    /// 200 with a chat answer of this many bytes (a runaway generation).
    Huge { bytes: usize },
}

/// An API endpoint.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Endpoint {
    Chat,
    Embeddings,
    /// Cohere's and Jina's `/rerank`.
    Rerank,
}

/// Counters since start (or the last reset).
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct MockStats {
    /// Chat + embedding requests (including faulted ones).
    pub requests: u64,
    pub chat_requests: u64,
    pub embedding_requests: u64,
    /// Rerank requests (`/v1/rerank`, `/rerank`).
    pub rerank_requests: u64,
    /// Requests whose answer (or injected error) was made; a hung or dropped
    /// request makes none. Counted before the answer is sent, after every
    /// other counter of that request.
    pub answers_made: u64,
    /// Input texts embedded.
    pub embedded_texts: u64,
    /// Embedding requests that asked for `encoding_format: base64`.
    pub base64_embedding_requests: u64,
    pub faults_injected: u64,
    /// Most chat + embedding requests in progress at the same time.
    pub max_in_flight: u64,
    /// o200k tokens of the message contents (and embedding inputs) answered.
    pub prompt_tokens: u64,
    /// o200k tokens of the answers.
    pub completion_tokens: u64,
    /// Answered chat requests per prompt class.
    pub by_kind: BTreeMap<String, u64>,
}

/// State shared between the server tasks and the [`MockServer`] handle.
pub(crate) struct Shared {
    pub latency: Mutex<Duration>,
    pub embed_dim: usize,
    pub stats: Mutex<MockStats>,
    /// Signalled at each request's arrival and each answer made (for
    /// [`MockServer::wait_for_requests`] and [`MockServer::wait_for_answers`]).
    pub counters_changed: std::sync::Condvar,
    pub in_flight: Mutex<u64>,
    /// Rules and their per-rule counters (requests matched, times fired).
    pub faults: Mutex<Vec<(FaultRule, u64, u64)>>,
    /// (prompt class, last message) of each answered chat request, when recorded.
    pub prompts: Option<Mutex<Vec<(String, String)>>>,
    /// (JWT assertion, access token) of each token issued (see `google`).
    pub google_tokens: Mutex<Vec<(String, String)>>,
}

impl Shared {
    fn new(cfg: &MockConfig) -> Shared {
        Shared {
            latency: Mutex::new(cfg.latency),
            embed_dim: cfg.embed_dim.max(1),
            stats: Mutex::new(MockStats::default()),
            counters_changed: std::sync::Condvar::new(),
            in_flight: Mutex::new(0),
            faults: Mutex::new(cfg.faults.iter().cloned().map(|r| (r, 0, 0)).collect()),
            prompts: cfg.record_prompts.then(|| Mutex::new(Vec::new())),
            google_tokens: Mutex::new(Vec::new()),
        }
    }

    /// Counts a request against the rules; the fault to inject, if any.
    pub(crate) fn pick_fault(&self, endpoint: Endpoint) -> Option<FaultKind> {
        let mut rules = self.faults.lock().unwrap();
        let mut fired = None;
        for (rule, count, fires) in rules.iter_mut() {
            if rule.endpoint.is_some_and(|e| e != endpoint) {
                continue;
            }
            *count += 1;
            let c = *count;
            let in_first = rule.first.is_none_or(|n| c <= u64::from(n)) && rule.after.is_none_or(|n| c > u64::from(n));
            let on_every = rule.every.is_none_or(|k| k > 0 && c % u64::from(k) == 0);
            if fired.is_none() && in_first && on_every {
                *fires += 1;
                fired = Some(match rule.kind {
                    FaultKind::Mixed => [FaultKind::Malformed, FaultKind::Truncated, FaultKind::Empty]
                        [(*fires as usize - 1) % 3]
                        .clone(),
                    ref kind => kind.clone(),
                });
            }
        }
        if fired.is_some() {
            self.stats.lock().unwrap().faults_injected += 1;
        }
        fired
    }
}

/// A running mock server; dropping it shuts the server down.
pub struct MockServer {
    addr: std::net::SocketAddr,
    shared: Arc<Shared>,
    shutdown: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl MockServer {
    /// Binds 127.0.0.1:`cfg.port` and serves on a background thread with its
    /// own tokio runtime; returns once listening.
    pub fn start(cfg: MockConfig) -> std::io::Result<MockServer> {
        let listener = std::net::TcpListener::bind(("127.0.0.1", cfg.port))?;
        listener.set_nonblocking(true)?;
        let addr = listener.local_addr()?;
        let shared = Arc::new(Shared::new(&cfg));
        let (tx, rx) = tokio::sync::oneshot::channel();
        let (ready_tx, ready_rx) = std::sync::mpsc::channel::<std::io::Result<()>>();
        let s2 = shared.clone();
        let thread = std::thread::Builder::new().name("graphrag-mock-llm".into()).spawn(move || {
            let workers = std::thread::available_parallelism().map_or(2, |n| n.get()).clamp(2, 4);
            let rt = match tokio::runtime::Builder::new_multi_thread()
                .worker_threads(workers)
                .thread_name("graphrag-mock-llm-worker")
                .enable_all()
                .build()
            {
                Ok(rt) => rt,
                Err(e) => {
                    let _ = ready_tx.send(Err(e));
                    return;
                }
            };
            rt.block_on(async move {
                let listener = match tokio::net::TcpListener::from_std(listener) {
                    Ok(l) => l,
                    Err(e) => {
                        let _ = ready_tx.send(Err(e));
                        return;
                    }
                };
                let _ = ready_tx.send(Ok(()));
                server::serve(listener, s2, rx).await;
            });
            rt.shutdown_timeout(Duration::from_secs(1));
        })?;
        match ready_rx.recv() {
            Ok(Ok(())) => {}
            Ok(Err(e)) => return Err(e),
            Err(_) => return Err(std::io::Error::other("mock server thread failed to start")),
        }
        Ok(MockServer { addr, shared, shutdown: Some(tx), thread: Some(thread) })
    }

    /// `http://127.0.0.1:PORT/v1`
    pub fn base_url(&self) -> String {
        format!("http://{}/v1", self.addr)
    }

    /// `http://127.0.0.1:PORT`: the host's address, as Anthropic's and
    /// Gemini's SDKs take their base URL.
    pub fn root_url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Where Google's OAuth token endpoint is (a service account's `token_uri`).
    pub fn token_uri(&self) -> String {
        format!("http://{}/token", self.addr)
    }

    /// The JWT assertion of every access token issued, in order.
    pub fn token_assertions(&self) -> Vec<String> {
        self.shared.google_tokens.lock().unwrap().iter().map(|(assertion, _)| assertion.clone()).collect()
    }

    /// Revokes every access token issued so far (their assertions are kept).
    pub fn revoke_tokens(&self) {
        self.shared.google_tokens.lock().unwrap().iter_mut().for_each(|(_, token)| token.clear());
    }

    /// The bound port.
    pub fn port(&self) -> u16 {
        self.addr.port()
    }

    /// A snapshot of the counters.
    pub fn stats(&self) -> MockStats {
        self.shared.stats.lock().unwrap().clone()
    }

    /// Blocks until `n` requests arrived since the last reset, or `timeout`
    /// passed; whether they did.
    pub fn wait_for_requests(&self, n: u64, timeout: Duration) -> bool {
        let stats = self.shared.stats.lock().unwrap();
        let (stats, _) = self.shared.counters_changed.wait_timeout_while(stats, timeout, |s| s.requests < n).unwrap();
        stats.requests >= n
    }

    /// Blocks until the answers of `n` requests were made since the last
    /// reset (see [`MockStats::answers_made`]), or `timeout` passed; whether
    /// they were. Requests arrive before their answers are counted, so a test
    /// that reads the other counters after [`Self::wait_for_requests`] may
    /// miss an answer still being made on another connection.
    pub fn wait_for_answers(&self, n: u64, timeout: Duration) -> bool {
        let stats = self.shared.stats.lock().unwrap();
        let (stats, _) =
            self.shared.counters_changed.wait_timeout_while(stats, timeout, |s| s.answers_made < n).unwrap();
        stats.answers_made >= n
    }

    /// The last message of every chat request of prompt class `class`
    /// answered since the last reset (with `MockConfig::record_prompts`).
    pub fn prompts(&self, class: &str) -> Vec<String> {
        let Some(prompts) = &self.shared.prompts else { return Vec::new() };
        prompts.lock().unwrap().iter().filter(|(c, _)| c == class).map(|(_, p)| p.clone()).collect()
    }

    /// Zeroes the counters (max_in_flight restarts from the requests now in
    /// flight) and forgets the recorded prompts.
    pub fn reset_stats(&self) {
        reset_stats(&self.shared);
    }

    /// Replaces the fault rules and resets their counters.
    pub fn set_faults(&self, faults: Vec<FaultRule>) {
        *self.shared.faults.lock().unwrap() = faults.into_iter().map(|r| (r, 0, 0)).collect();
    }

    /// Changes the per-request latency.
    pub fn set_latency(&self, latency: Duration) {
        *self.shared.latency.lock().unwrap() = latency;
    }
}

pub(crate) fn reset_stats(shared: &Shared) {
    let now = *shared.in_flight.lock().unwrap();
    *shared.stats.lock().unwrap() = MockStats { max_in_flight: now, ..MockStats::default() };
    if let Some(prompts) = &shared.prompts {
        prompts.lock().unwrap().clear();
    }
}

impl Drop for MockServer {
    fn drop(&mut self) {
        if let Some(tx) = self.shutdown.take() {
            let _ = tx.send(());
        }
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

impl std::fmt::Debug for MockServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MockServer").field("addr", &self.addr).finish()
    }
}
