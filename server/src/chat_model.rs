//! Whether the server has a usable chat model, and what it does without one.
//!
//! A chat model is usable when its entry in `completion_models` can reach a
//! server (an API key or an api_base: `ModelConfig::chat_configured`, the
//! test the query engine applies). Without one — none configured, or a fast
//! project with no key — a question that asks for an answer (`/query`,
//! `/query/stream`, `/api/chat`, `/api/generate`, `/v1/chat/completions`) is
//! refused with 503 naming the setting to fix, rather than answered with the
//! retrieved context passed off as a reply. Asking for the context is served
//! as before: `only_need_context` on `/query`, a `/localcontext`-style
//! prefix in a chat message. `/health` and the start-up log say which it is.
//!
//! A configured model may still not answer (a wrong key, a server that is
//! down): `serve` runs the project's start-up check on it, one tiny request
//! on its own thread ([`check_in_background`]), logs a failure and shows the
//! outcome in `/health`. A failed check refuses nothing: the model server
//! may come up later, and each question then says what went wrong.

use std::sync::Arc;

use graphrag_engine::llm::preflight::{self, ModelKind};
use graphrag_engine::settings::{self, Settings};
use graphrag_query::Method;
use hyper::StatusCode;
use serde_json::{json, Value};

use crate::http::{ApiError, Result};
use crate::state::{CheckState, StartupCheck, State};

/// The method a question without one is answered with (LightRAG's default).
pub const DEFAULT_METHOD: Method = Method::Mix;

/// The chat model of the default method, as settings describe it.
pub struct ChatModelStatus {
    /// Its id in `completion_models`.
    pub id: String,
    /// The model name it calls, when it is usable.
    pub model: Option<String>,
    /// Why it is not usable.
    pub problem: Option<String>,
}

impl ChatModelStatus {
    /// The default method's chat model (`keyword_search.completion_model_id`:
    /// mix and hybrid answer with it).
    pub fn of(settings: &Settings) -> ChatModelStatus {
        let id = settings.keyword_search.completion_model_id.clone();
        let (model, problem) = match settings.completion_models.get(&id) {
            Some(m) if m.chat_configured() => (Some(m.model.clone()), None),
            Some(_) => (None, Some(not_configured(&id))),
            None => {
                (None, Some(format!("completion model `{id}` is not defined in settings.yaml (completion_models)")))
            }
        };
        ChatModelStatus { id, model, problem }
    }

    pub fn usable(&self) -> bool {
        self.problem.is_none()
    }

    /// `/health`'s report, with the start-up check's outcome: no secret,
    /// only ids, model names and the check's message.
    pub fn to_json(&self, check: &StartupCheck) -> Value {
        json!({
            "configured": self.usable(),
            "model_id": self.id,
            "model": self.model,
            "detail": self.problem,
            "startup_check": check.to_json(),
            "without_it": (!self.usable()).then_some(
                "questions are refused with 503; context-only requests (only_need_context, a /mixcontext prefix) are served"
            ),
        })
    }
}

/// Runs the start-up check of a configured chat model on its own thread
/// (the project's check: one request of one token, its own 4 s limit, no
/// retries); its outcome goes to the log and `/health`. Nothing to check
/// without a configured model.
pub fn check_in_background(state: Arc<State>) -> Option<std::thread::JoinHandle<()>> {
    let status = ChatModelStatus::of(&state.settings);
    if !status.usable() {
        return None;
    }
    state.chat_check.set(CheckState::Running);
    let run = move || {
        let outcome = settings::load(&state.root)
            .and_then(|loaded| preflight::check(&loaded, &[(ModelKind::Chat, status.id.clone())]))
            .map_err(|e| e.to_string())
            .and_then(|report| if report.warnings.is_empty() { Ok(()) } else { Err(report.warnings.join("; ")) });
        match outcome {
            Ok(()) => {
                tracing::info!("chat model completion_models.{} answers", status.id);
                state.chat_check.set(CheckState::Passed);
            }
            Err(why) => {
                tracing::warn!("the chat model's start-up check failed: {why}; questions will fail until it answers");
                state.chat_check.set(CheckState::Failed(why));
            }
        }
    };
    Some(std::thread::Builder::new().name("chat-model-check".into()).spawn(run).expect("a thread starts"))
}

fn not_configured(id: &str) -> String {
    format!(
        "no chat model: completion_models.{id} has no api_key and no api_base (set GRAPHRAG_API_KEY in the project's .env, or api_base for a local server, and restart `serve`)"
    )
}

/// Refuses a question (by `method`) that asks for an answer when its method
/// has no usable chat model (503). Context-only questions pass, and so does
/// any question before an index exists (the query itself says that there is none).
pub fn require(state: &State, method: Method, context_only: bool) -> Result<()> {
    if context_only {
        return Ok(());
    }
    let snapshot = state.snapshot();
    let Some(engine) = snapshot.engine.as_ref() else { return Ok(()) };
    if engine.can_answer(method) {
        return Ok(());
    }
    Err(refusal(method, &engine.chat_model_id(method)))
}

fn refusal(method: Method, id: &str) -> ApiError {
    ApiError::new(
        StatusCode::SERVICE_UNAVAILABLE,
        format!(
            "{method} search cannot answer: {}. The retrieved context is served without a chat model: send \"only_need_context\": true to /query, or start a chat message with /{method}context",
            not_configured(id)
        ),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settings(yaml: &str) -> Settings {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("settings.yaml"), yaml).unwrap();
        graphrag_engine::settings::load(dir.path()).unwrap().settings
    }

    #[test]
    fn a_model_without_key_or_base_is_not_usable() {
        let s = settings("completion_models:\n  default_completion_model:\n    model: gpt-4.1-mini\n");
        let status = ChatModelStatus::of(&s);
        assert!(!status.usable());
        assert_eq!(status.to_json(&StartupCheck::default())["model"], Value::Null);
        assert!(status.problem.unwrap().contains("completion_models.default_completion_model has no api_key"));
    }

    #[test]
    fn a_key_or_a_base_makes_it_usable() {
        for extra in ["api_key: sk-x", "api_base: http://127.0.0.1:1/v1"] {
            let s = settings(&format!("completion_models:\n  default_completion_model:\n    model: m1\n    {extra}\n"));
            let status = ChatModelStatus::of(&s);
            assert!(status.usable(), "{extra}");
            let report = status.to_json(&StartupCheck::default());
            assert_eq!(report["model"], "m1");
            assert_eq!(report["startup_check"], "not run");
            assert!(!report.to_string().contains("sk-x"));
        }
    }

    #[test]
    fn the_refusal_names_the_setting_and_the_context_only_way() {
        let e = refusal(Method::Local, "default_completion_model");
        assert_eq!(e.status, StatusCode::SERVICE_UNAVAILABLE);
        assert!(e.message.contains("completion_models.default_completion_model"), "{}", e.message);
        assert!(e.message.contains("/localcontext") && e.message.contains("only_need_context"), "{}", e.message);
    }
}
