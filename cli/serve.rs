//! `graphrag-rs serve`: the HTTP server (graphrag_server) in the foreground.

use std::path::PathBuf;

use graphrag_server::chat_model::ChatModelStatus;
use graphrag_server::{ServeOptions, Server};

pub struct ServeArgs {
    pub root: PathBuf,
    pub host: String,
    pub port: u16,
    pub api_key: Option<String>,
    pub max_upload_mb: usize,
    pub webui_dir: Option<PathBuf>,
    pub read_only: bool,
    /// No start-up check of the chat model.
    pub skip_validation: bool,
    pub verbosity: i8,
}

pub fn run(args: ServeArgs) -> anyhow::Result<()> {
    let loaded = crate::index::start_logging(&args.root, args.verbosity, true)?;
    drop(loaded);
    if args.max_upload_mb == 0 {
        anyhow::bail!("--max-upload-mb must be at least 1");
    }
    let opts = ServeOptions {
        root: args.root.clone(),
        host: args.host.clone(),
        port: args.port,
        api_key: args.api_key,
        max_upload_bytes: args.max_upload_mb << 20,
        webui_dir: args.webui_dir,
        read_only: args.read_only,
    };
    let server = Server::start(opts)?;
    let open = !matches!(args.host.as_str(), "127.0.0.1" | "localhost" | "::1");
    if args.verbosity >= 0 {
        let role = if args.read_only { " (read-only replica)" } else { "" };
        println!("graphrag-rs serving {}{role} on http://{}", args.root.display(), server.addr());
        println!("  web UI: http://{}/webui/   API: http://{}/openapi.json", server.addr(), server.addr());
        println!(
            "  Ollama model graphrag-rs:latest at http://{}; API key {}",
            server.addr(),
            if server.state().api_key.is_some() { "required" } else { "not set" }
        );
    }
    // Without a usable chat model questions are refused: said once, here.
    let chat = ChatModelStatus::of(&server.state().settings);
    match &chat.problem {
        Some(problem) => tracing::warn!(
            "{problem}: questions to /query, /query/stream, /api/chat, /api/generate and /v1/chat/completions are refused (503); context-only requests are served"
        ),
        None => tracing::info!(
            "chat model: {} (completion_models.{})",
            chat.model.as_deref().unwrap_or_default(),
            chat.id
        ),
    }
    // Whether it answers: logged when known, shown by /health.
    if !args.skip_validation {
        graphrag_server::chat_model::check_in_background(server.state().clone());
    }
    if open && server.state().api_key.is_none() {
        tracing::warn!(
            "listening on {} without an API key: anyone who can reach it can read and change the index (set --api-key)",
            args.host
        );
    }
    server.wait();
    Ok(())
}
