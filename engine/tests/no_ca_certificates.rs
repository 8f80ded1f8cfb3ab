//! A machine without CA certificates (a slim container) still reaches plain
//! http:// servers: the system's roots are read at the first TLS handshake,
//! not when a client is made. Its own test binary: it points the root
//! lookup at nothing for the whole process.

use std::time::Duration;

use graphrag_engine::llm::answer;
use graphrag_engine::llm::{ChatModel, Message, UsageCounters};
use graphrag_engine::settings::ModelConfig;
use graphrag_mock_llm::{MockConfig, MockServer};

#[test]
fn http_servers_need_no_ca_certificates() {
    std::env::set_var("SSL_CERT_FILE", "/nonexistent/ca-certificates.crt");
    std::env::set_var("SSL_CERT_DIR", "/nonexistent/certs");
    let mock = MockServer::start(MockConfig { latency: Duration::ZERO, ..MockConfig::default() }).unwrap();
    let cfg = ModelConfig {
        model: "mock-chat".into(),
        api_base: Some(mock.base_url()),
        request_timeout: 5.0,
        ..ModelConfig::default()
    };
    let model = ChatModel::new("default_completion_model", &cfg, None).expect("a client without the system's roots");
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let usage = UsageCounters::default();
    let messages = vec![Message::user("Who is Scrooge?".to_string())];
    let answer = rt.block_on(model.chat(&messages, false, &usage, &answer::text())).expect("answered over http");
    assert!(!answer.completion.content.is_empty());
}
