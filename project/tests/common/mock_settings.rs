//! The settings of a project whose models are the project's mock server
//! (shared by this crate's integration tests).

use graphrag_mock_llm::MockServer;

/// Chat and embedding models on `mock`, small chunks.
pub fn settings(mock: &MockServer) -> String {
    let model = |name: &str| {
        format!(
            "    model: {name}\n    api_base: {}\n    api_key: sk-test\n    retry_base_delay: 0.001\n",
            mock.base_url()
        )
    };
    format!(
        "completion_models:\n  default_completion_model:\n{}embedding_models:\n  default_embedding_model:\n{}chunking:\n  size: 300\n  overlap: 30\n",
        model("mock-gpt"),
        model("mock-embed")
    )
}
