//! The models of a project, built from settings.yaml, and the async runtime
//! their calls run on. Verbs are synchronous: they hand futures to
//! [`LlmService::block_on`].

use std::collections::BTreeMap;
use std::future::Future;
use std::path::Path;
use std::sync::Arc;

use super::{CallScope, ChatModel, EmbeddingModel, LlmError, RerankModel, ResponseCache};
use crate::interrupt::StopFlag;
use crate::settings::Settings;
use crate::storage::{Location, Storage};

/// The cache partition of query answers (size-bounded: see [`LlmService::for_queries`]).
pub const QUERY_PARTITION: &str = "query";

/// A project's models by id (chat, embedding, rerank), the answer cache
/// they share, and the tokio runtime on which synchronous callers (verbs)
/// run their calls.
pub struct LlmService {
    runtime: tokio::runtime::Runtime,
    chat: BTreeMap<String, Result<Arc<ChatModel>, String>>,
    embedding: BTreeMap<String, Result<Arc<EmbeddingModel>, String>>,
    rerank: BTreeMap<String, Result<Arc<RerankModel>, String>>,
    cache: Option<Arc<ResponseCache>>,
}

/// The answer cache's location (`cache.storage`): a folder, or a bucket.
fn cache_location(settings: &Settings, root: &Path) -> Result<Location, LlmError> {
    Storage::cache(root, settings).map_err(|e| LlmError::Config(format!("{e:#}")))
}

impl LlmService {
    /// Builds every model of `settings`; the cache lives under `ROOT/<cache folder>`
    /// unless `cache.type: none`. A model that cannot be built only fails when used.
    pub fn from_settings(settings: &Settings, root: &Path) -> Result<Self, LlmError> {
        let cache = match settings.cache.enabled() {
            true => Some(cache_location(settings, root)?),
            false => None,
        };
        LlmService::with_cache(settings, cache.as_ref())
    }

    /// [`LlmService::from_settings`] with the cache at `cache` (None: no
    /// cache), for a caller that opened the project's storage already (an
    /// object store is then connected once per run).
    pub fn with_cache(settings: &Settings, cache: Option<&Location>) -> Result<Self, LlmError> {
        LlmService::build(settings, cache.map(|at| Arc::new(ResponseCache::at(at))))
    }

    /// The models as queries call them (settings `query`): each request
    /// bounded by `query.request_timeout` (a model's own where shorter); no
    /// circuit breaker, since every query is bounded on its own (its
    /// `CallScope` stops retrying at `query.max_retry_time`) and a server's
    /// engine outlives a model's outage; answers cached in the partition
    /// `query` of the cache, at most `query.cache_max_bytes`.
    pub fn for_queries(settings: &Settings, root: &Path) -> Result<Self, LlmError> {
        let q = &settings.query;
        let mut bounded = settings.clone();
        let models = bounded.completion_models.values_mut().chain(bounded.embedding_models.values_mut());
        for model in models.chain(bounded.rerank_models.values_mut()) {
            model.request_timeout = model.request_timeout.min(q.request_timeout);
            model.max_consecutive_failures = u32::MAX;
        }
        let cache = match settings.cache.enabled() && q.cache_max_bytes > 0 {
            true => {
                let root_cache = ResponseCache::at(&cache_location(settings, root)?);
                Some(Arc::new(root_cache.partition(QUERY_PARTITION).bounded(q.cache_max_bytes)))
            }
            false => None,
        };
        LlmService::build(&bounded, cache)
    }

    fn build(settings: &Settings, cache: Option<Arc<ResponseCache>>) -> Result<Self, LlmError> {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .thread_name("llm")
            .build()
            .map_err(|e| LlmError::Config(format!("cannot start the async runtime: {e}")))?;
        let chat = settings
            .completion_models
            .iter()
            .map(|(id, cfg)| {
                let model = if cfg.chat_configured() {
                    ChatModel::new(id, cfg, cache.clone()).map(Arc::new).map_err(|e| e.to_string())
                } else {
                    let var = cfg.model_provider.key_variable().unwrap_or("GRAPHRAG_API_KEY");
                    Err(format!(
                        "no chat model configured: completion_models.{id} has no api_key (set {var} in the project's .env) and no api_base; `index --method fast` needs no LLM"
                    ))
                };
                (id.clone(), model)
            })
            .collect();
        let embedding = settings
            .embedding_models
            .iter()
            .map(|(id, cfg)| {
                let model = EmbeddingModel::new(id, cfg, cache.clone()).map(Arc::new).map_err(|e| e.to_string());
                (id.clone(), model)
            })
            .collect();
        let rerank = settings
            .rerank_models
            .iter()
            .map(|(id, cfg)| {
                let model = RerankModel::new(id, cfg, cache.clone()).map(Arc::new).map_err(|e| e.to_string());
                (id.clone(), model)
            })
            .collect();
        Ok(LlmService { runtime, chat, embedding, rerank, cache })
    }

    /// Writes the answers the cache keeps in memory (on an object store, at
    /// the end of a step: see [`ResponseCache::flush`]).
    pub(crate) fn flush_cache(&self) {
        if let Some(cache) = &self.cache {
            cache.flush();
        }
    }

    /// The chat model `id` of `completion_models`; an error when it is not
    /// defined or its settings could not make a client.
    pub fn chat_model(&self, id: &str) -> Result<Arc<ChatModel>, LlmError> {
        match self.chat.get(id) {
            Some(Ok(m)) => Ok(m.clone()),
            Some(Err(e)) => Err(LlmError::Config(e.clone())),
            None => Err(LlmError::Config(format!("completion model `{id}` is not defined in settings.yaml"))),
        }
    }

    /// The chat model `id`, caching in the partition `instance` of the cache
    /// when given (a step's `model_instance_name`).
    pub fn chat_model_for(&self, id: &str, instance: Option<&str>) -> Result<Arc<ChatModel>, LlmError> {
        let model = self.chat_model(id)?;
        Ok(match instance {
            Some(name) => Arc::new(model.in_partition(name)),
            None => model,
        })
    }

    /// Whether `id` names a usable chat model (the embedded default works without one).
    pub fn has_chat_model(&self, id: &str) -> bool {
        matches!(self.chat.get(id), Some(Ok(_)))
    }

    /// The embedding model `id` of `embedding_models`; errors as [`Self::chat_model`].
    pub fn embedding_model(&self, id: &str) -> Result<Arc<EmbeddingModel>, LlmError> {
        match self.embedding.get(id) {
            Some(Ok(m)) => Ok(m.clone()),
            Some(Err(e)) => Err(LlmError::Config(e.clone())),
            None => Err(LlmError::Config(format!("embedding model `{id}` is not defined in settings.yaml"))),
        }
    }

    /// The embedding model `id`, caching in the partition `instance` when given.
    pub fn embedding_model_for(&self, id: &str, instance: Option<&str>) -> Result<Arc<EmbeddingModel>, LlmError> {
        let model = self.embedding_model(id)?;
        Ok(match instance {
            Some(name) => Arc::new(model.in_partition(name)),
            None => model,
        })
    }

    /// The rerank model `id` of `rerank_models`; errors as [`Self::chat_model`].
    pub fn rerank_model(&self, id: &str) -> Result<Arc<RerankModel>, LlmError> {
        match self.rerank.get(id) {
            Some(Ok(m)) => Ok(m.clone()),
            Some(Err(e)) => Err(LlmError::Config(e.clone())),
            None => Err(LlmError::Config(format!("rerank model `{id}` is not defined in settings.yaml"))),
        }
    }

    /// Makes every model's calls stop with the run that `stop` belongs to
    /// (a build's own stop, beside the process-wide one).
    pub fn stop_with(&mut self, stop: &StopFlag) {
        let scope = CallScope { stop: stop.clone(), ..CallScope::default() };
        for model in self.chat.values_mut().flatten() {
            *model = Arc::new(model.within(&scope));
        }
        for model in self.embedding.values_mut().flatten() {
            *model = Arc::new(model.within(&scope));
        }
    }

    /// Runs a future to completion on the LLM runtime (from a non-async thread).
    pub fn block_on<F: Future>(&self, future: F) -> F::Output {
        self.runtime.block_on(future)
    }
}
