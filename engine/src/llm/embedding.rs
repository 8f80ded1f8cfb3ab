//! Embedding models: an OpenAI-compatible endpoint (batched by count and by
//! tokens, concurrent batches) or the in-process local model. Vectors are
//! cached per text, so re-runs and updates embed only new texts.

use std::path::PathBuf;
use std::sync::{Arc, OnceLock};

use futures_util::stream::{self, StreamExt};
use graphrag_local_embed::{Kernel, LocalEmbedder, PreparedWeights};

use super::cache::{Checked, ResponseCache};
use super::http::Transport;
use super::retry::{CallScope, Policy};
use super::{LlmError, UsageCounters};
use crate::settings::{ModelConfig, Provider};
use graphrag_operations::tokenizer::Encoding;

enum Backend {
    Http {
        transport: Box<Transport>,
        policy: Box<Policy>,
    },
    /// `kernel`: the setting's precision resolved for this CPU, once.
    Local {
        dir: Option<PathBuf>,
        kernel: Kernel,
        model: OnceLock<Result<Arc<LocalEmbedder>, String>>,
    },
}

/// One embedding model of the settings: over HTTP (batched, retried,
/// limited) or in process (`model_provider: local`), its vectors cached.
pub struct EmbeddingModel {
    id: String,
    config: ModelConfig,
    backend: Arc<Backend>,
    cache: Option<Arc<ResponseCache>>,
    scope: CallScope,
}

impl EmbeddingModel {
    /// The model `id` of the settings; errors when its settings cannot make
    /// a client (a local model loads at its first use).
    pub fn new(id: &str, config: &ModelConfig, cache: Option<Arc<ResponseCache>>) -> Result<Self, LlmError> {
        let backend = if config.model_provider == Provider::Local {
            Backend::Local {
                dir: config.model_path.as_ref().map(PathBuf::from),
                kernel: config.precision.kernel(),
                model: OnceLock::new(),
            }
        } else {
            Backend::Http {
                transport: Box::new(Transport::new(id, config)?),
                policy: Box::new(Policy::new(id, config)),
            }
        };
        let scope = CallScope::default();
        Ok(EmbeddingModel { id: id.to_string(), config: config.clone(), backend: Arc::new(backend), cache, scope })
    }

    /// The same model caching its vectors in the partition `name` of the
    /// cache (the embed step's `model_instance_name`).
    pub(crate) fn in_partition(&self, name: &str) -> EmbeddingModel {
        EmbeddingModel {
            id: self.id.clone(),
            config: self.config.clone(),
            backend: self.backend.clone(),
            cache: self.cache.as_ref().map(|c| Arc::new(c.partition(name))),
            scope: self.scope.clone(),
        }
    }

    /// The same model whose calls are bounded by `scope` (see `ChatModel::within`).
    pub fn within(&self, scope: &CallScope) -> EmbeddingModel {
        EmbeddingModel {
            id: self.id.clone(),
            config: self.config.clone(),
            backend: self.backend.clone(),
            cache: self.cache.clone(),
            scope: scope.clone(),
        }
    }

    /// Its id in the settings (`embedding_models`).
    pub fn id(&self) -> &str {
        &self.id
    }

    /// What the vectors depend on (provider, model, local model folder and
    /// precision), for step hashes: a change of precision re-embeds.
    pub fn fingerprint(&self) -> String {
        let dir = match self.backend.as_ref() {
            Backend::Local { dir, .. } => dir.as_ref().map(|d| d.display().to_string()).unwrap_or_default(),
            Backend::Http { .. } => String::new(),
        };
        format!("{}|{}|{}{}", self.config.model_provider, self.config.model, dir, self.precision_suffix())
    }

    /// Empty for f32 and remote models (their cache keys and fingerprints
    /// are those of before precisions existed, so existing caches and
    /// indexes stay valid); for int8 and bf16 the local kernel's identity
    /// (`Kernel::vector_identity`: `@int8-attn`, never the `@int8` of the
    /// earlier int8 with f32 attention, whose vectors differ; `@bf16`).
    fn precision_suffix(&self) -> &'static str {
        match self.backend.as_ref() {
            Backend::Local { kernel, .. } => kernel.vector_identity(),
            Backend::Http { .. } => "",
        }
    }

    /// The model's name in cache keys: the model and its precision suffix.
    fn cache_model_id(&self) -> String {
        format!("{}{}", self.config.model, self.precision_suffix())
    }

    /// The local model, loaded on first use.
    fn local(&self) -> Result<Arc<LocalEmbedder>, LlmError> {
        let Backend::Local { dir, kernel, model } = self.backend.as_ref() else {
            unreachable!("only called for local models")
        };
        model
            .get_or_init(|| {
                let dir = dir
                    .clone()
                    .or_else(LocalEmbedder::find_default_model)
                    .ok_or_else(LocalEmbedder::missing_model_help)?;
                let model = LocalEmbedder::load_with(&dir, *kernel).map_err(|e| format!("{e:#}"))?;
                match model.prepared_weights() {
                    // Every process then prepares the weights again (about
                    // 0.2 CPU-s for MiniLM at int8): say why, once.
                    PreparedWeights::NotKept(Some(why)) => tracing::warn!(
                        "the prepared weights of the embedding model are not kept ({why}); set \
                         GRAPHRAG_MODEL_CACHE_DIR to a writable folder, or to `off` to keep none"
                    ),
                    prepared => tracing::debug!(?prepared, "local embedding model loaded"),
                }
                Ok(Arc::new(model))
            })
            .clone()
            .map_err(|e| LlmError::Config(format!("embedding model `{}`: {e}", self.id)))
    }

    /// Splits a text into pieces the model takes whole (by words; a single
    /// word longer than the limit is its own piece and gets truncated).
    pub fn split_to_fit(&self, text: &str) -> Result<Vec<String>, LlmError> {
        type Counter = Box<dyn Fn(&str) -> usize>;
        let (limit, count): (usize, Counter) = match self.backend.as_ref() {
            Backend::Local { .. } => {
                let model = self.local()?;
                (model.max_tokens(), Box::new(move |t: &str| model.count_tokens(t)))
            }
            Backend::Http { .. } => (8000, Box::new(|t: &str| Encoding::Cl100kBase.count(t))),
        };
        if count(text) <= limit {
            return Ok(vec![text.to_string()]);
        }
        // Words are counted one by one, not the growing piece again per word
        // (that was quadratic in the length: about half the embed step of
        // 1,200-token units). WordPiece never joins tokens across whitespace,
        // so for the local model the sum is exactly the piece's count (see
        // local-embed's `word_counts_add_up`); for BPE it is close (a word's
        // trailing space may count as its own token), and the 8,000 limit
        // leaves 191 tokens of margin to the endpoints' 8,191.
        Ok(graphrag_operations::chunking::pack_words(text, limit, count))
    }

    /// Embeds `texts` (same order). Cached vectors are reused; the rest go to
    /// the model in batches.
    pub async fn embed(&self, texts: &[String], usage: &UsageCounters) -> Result<Vec<Vec<f32>>, LlmError> {
        let model_id = self.cache_model_id();
        let keys: Vec<String> = texts.iter().map(|t| ResponseCache::key(&["embedding", &model_id, t])).collect();
        let mut out: Vec<Option<Vec<f32>>> = keys.iter().map(|k| self.cached(k, usage)).collect();
        let missing: Vec<usize> = (0..texts.len()).filter(|&i| out[i].is_none()).collect();
        for _ in 0..texts.len() - missing.len() {
            usage.record_cache_hit(&self.id);
        }
        if missing.is_empty() {
            return Ok(out.into_iter().flatten().collect());
        }
        let vectors = match self.backend.as_ref() {
            Backend::Local { .. } => {
                let model = self.local()?;
                let batch: Vec<&str> = missing.iter().map(|&i| texts[i].as_str()).collect();
                let vectors = tokio::task::block_in_place(|| model.embed(&batch))
                    .map_err(|e| LlmError::Config(format!("embedding model `{}`: {e:#}", self.id)))?;
                usage.record_call(&self.id, 0, 0);
                usage.record_embedding_kernel(&self.id, &model.kernel().name());
                self.keep_vectors(missing.iter().map(|&i| keys[i].as_str()), vectors)
                    .map_err(|e| LlmError::Config(format!("embedding model `{}`: {e}", self.id)))?
            }
            Backend::Http { transport, policy } => {
                self.embed_http(transport, policy, texts, &keys, &missing, usage).await?
            }
        };
        usage.record_embedded(&self.id, missing.len() as u64);
        for (&i, v) in missing.iter().zip(vectors) {
            out[i] = Some(v);
        }
        Ok(out.into_iter().map(|v| v.expect("every text embedded")).collect())
    }

    /// A usable cached vector for `key`.
    fn cached(&self, key: &str, usage: &UsageCounters) -> Option<Vec<f32>> {
        let hit = self.cache.as_ref()?.get_vector(key, |v| usable_vector(v, None)).hit(usage, &self.id)?;
        Some(hit.into_parts().0)
    }

    /// Checks a batch of vectors (one dimension, finite numbers) and caches
    /// each under its text's key.
    fn keep_vectors<'k>(
        &self,
        keys: impl Iterator<Item = &'k str>,
        vectors: Vec<Vec<f32>>,
    ) -> Result<Vec<Vec<f32>>, String> {
        let dim = vectors.first().map(Vec::len);
        let mut out = Vec::with_capacity(vectors.len());
        for (key, v) in keys.zip(vectors) {
            let checked = Checked::new(v, |v: &Vec<f32>| usable_vector(v, dim)).map_err(|(_, e)| e)?;
            if let Some(c) = &self.cache {
                c.put_vector(key, &checked);
            }
            out.push(checked.into_parts().0);
        }
        Ok(out)
    }

    async fn embed_http(
        &self,
        transport: &Transport,
        policy: &Policy,
        texts: &[String],
        keys: &[String],
        missing: &[usize],
        usage: &UsageCounters,
    ) -> Result<Vec<Vec<f32>>, LlmError> {
        let batches = batches(missing.iter().map(|&i| (texts[i].as_str(), keys[i].as_str())), &self.config);
        let concurrency = self.config.concurrency() as usize;
        let results: Vec<Result<Vec<Vec<f32>>, LlmError>> =
            stream::iter(batches.into_iter().map(|(batch, tokens)| async move {
                let inputs: Vec<&str> = batch.iter().map(|(text, _)| *text).collect();
                let body = super::embedding_request(&self.config, &inputs);
                let keep = |(vectors, reported): (Vec<Vec<f32>>, u64)| {
                    usage.record_call(&self.id, if reported > 0 { reported } else { tokens }, 0);
                    self.keep_vectors(batch.iter().map(|(_, key)| *key), vectors)
                };
                let call = || transport.embed(&body, batch.len());
                policy.settle_checked(usage, policy.send(usage, tokens, &self.scope, call, keep).await)
            }))
            .buffered(concurrency)
            .collect()
            .await;
        let mut all = Vec::with_capacity(missing.len());
        for r in results {
            all.extend(r?);
        }
        Ok(all)
    }
}

/// A vector worth keeping: not empty, finite, of the batch's dimension.
fn usable_vector(v: &[f32], dim: Option<usize>) -> Result<(), String> {
    if v.is_empty() {
        return Err("an empty embedding".into());
    }
    if dim.is_some_and(|d| d != v.len()) {
        return Err(format!("embeddings of different dimensions in one answer ({} and {})", dim.unwrap_or(0), v.len()));
    }
    if !v.iter().all(|x| x.is_finite()) {
        return Err("an embedding with a non-finite number".into());
    }
    Ok(())
}

/// Groups (text, cache key) pairs into batches of at most `batch_size`
/// texts and `batch_max_tokens` tokens (a single longer text is a batch of
/// its own), with their token counts.
fn batches<'a>(
    texts: impl Iterator<Item = (&'a str, &'a str)>,
    config: &ModelConfig,
) -> Vec<(Vec<(&'a str, &'a str)>, u64)> {
    let (max_count, max_tokens) = (config.batch_size, config.batch_max_tokens);
    let mut out: Vec<(Vec<(&str, &str)>, u64)> = Vec::new();
    for (text, key) in texts {
        let tokens = Encoding::Cl100kBase.count(text) as u64;
        match out.last_mut() {
            Some((batch, sum)) if batch.len() < max_count.max(1) as usize && *sum + tokens <= max_tokens as u64 => {
                batch.push((text, key));
                *sum += tokens;
            }
            _ => out.push((vec![(text, key)], tokens)),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use graphrag_local_embed::Precision;

    #[test]
    fn batches_respect_count_and_tokens() {
        let texts = ["one two three", "four", "five six", "seven", "eight nine ten eleven"];
        let config =
            |batch_size, batch_max_tokens| ModelConfig { batch_size, batch_max_tokens, ..ModelConfig::default() };
        let b = batches(texts.iter().map(|t| (*t, "")), &config(2, 1000));
        assert_eq!(b.iter().map(|(x, _)| x.len()).collect::<Vec<_>>(), [2, 2, 1]);
        let b = batches(texts.iter().map(|t| (*t, "")), &config(10, 4));
        assert!(b.iter().all(|(x, t)| *t <= 4 || x.len() == 1));
        assert_eq!(b.iter().map(|(x, _)| x.len()).sum::<usize>(), 5);
    }

    /// A change of precision, or of what int8 computes, is a change of
    /// model: cache keys and step fingerprints differ, so `index` and
    /// `update` re-embed instead of mixing vectors.
    #[test]
    fn each_precision_is_a_model_of_its_own() {
        let local = |precision| ModelConfig {
            model_provider: "local".into(),
            model: "all-MiniLM-L6-v2".into(),
            precision,
            ..ModelConfig::default()
        };
        let f32_model = EmbeddingModel::new("e", &local(Precision::F32), None).unwrap();
        // f32 keeps the keys of before precisions existed.
        assert_eq!(f32_model.cache_model_id(), "all-MiniLM-L6-v2");
        assert_eq!(f32_model.fingerprint(), "local|all-MiniLM-L6-v2|");
        let int8 = EmbeddingModel::new("e", &local(Precision::Int8), None).unwrap();
        // Not the `@int8` of the earlier int8 (f32 attention), whose vectors differ.
        assert_eq!(int8.cache_model_id(), "all-MiniLM-L6-v2@int8-attn");
        assert_eq!(int8.fingerprint(), "local|all-MiniLM-L6-v2|@int8-attn");
        let key = |m: &str| ResponseCache::key(&["embedding", m, "a text"]);
        assert_ne!(key(&int8.cache_model_id()), key("all-MiniLM-L6-v2@int8"));
        let bf16 = EmbeddingModel::new("e", &local(Precision::Bf16), None).unwrap();
        assert_eq!(bf16.cache_model_id(), "all-MiniLM-L6-v2@bf16");
        assert_eq!(bf16.fingerprint(), "local|all-MiniLM-L6-v2|@bf16");
        let keys = [&f32_model, &int8, &bf16].map(|m| key(&m.cache_model_id()));
        assert!(keys[0] != keys[1] && keys[1] != keys[2] && keys[0] != keys[2], "{keys:?}");
        // `auto` is one of the two, by this CPU's instructions.
        let auto = EmbeddingModel::new("e", &local(Precision::Auto), None).unwrap();
        let want = if Precision::Auto.kernel() == Kernel::F32 { &f32_model } else { &int8 };
        assert_eq!(auto.fingerprint(), want.fingerprint());
    }
}
