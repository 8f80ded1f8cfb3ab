//! The BERT encoder forward pass (inference only, CPU) and the weights it
//! needs, read from a `model.safetensors` file. The dense layers run in f32,
//! dynamically quantized in int8 (`int8` module) or in bf16 (`bf16`
//! module); attention runs in int8 at int8, else in f32; embeddings,
//! softmax, GELU and LayerNorm always run in f32.
//!
//! Sequences of one batch are packed one after another (no padding): the
//! dense layers run over all tokens of the batch at once, attention runs per
//! sequence and head. That is exactly what a padded batch with an attention
//! mask computes, without the wasted work.

use anyhow::{bail, Context, Result};
use memmap2::Mmap;
use sha2::{Digest, Sha256};
use std::collections::HashMap;
use std::fs::File;
use std::path::Path;
use std::sync::Arc;

use crate::attention::{attention_head, quantize_queries, AttentionScratch, HeadShape};
use crate::bf16::{Bf16Kernel, Bf16Linear, Bf16Scratch};
use crate::buf::Buf;
use crate::int8::{Int8Kernel, QuantLinear, QuantScratch};
use crate::weight_cache::{Arrays, Reader, Slot};
use crate::{Kernel, PreparedWeights};

/// The part of `config.json` the forward pass needs.
#[derive(Debug, Clone, serde::Deserialize)]
pub struct BertConfig {
    pub vocab_size: usize,
    pub hidden_size: usize,
    pub num_hidden_layers: usize,
    pub num_attention_heads: usize,
    pub intermediate_size: usize,
    pub max_position_embeddings: usize,
    #[serde(default = "default_type_vocab")]
    pub type_vocab_size: usize,
    #[serde(default = "default_eps")]
    pub layer_norm_eps: f64,
    #[serde(default = "default_act")]
    pub hidden_act: String,
    #[serde(default)]
    pub model_type: Option<String>,
    #[serde(default)]
    pub position_embedding_type: Option<String>,
}

fn default_type_vocab() -> usize {
    2
}
fn default_eps() -> f64 {
    1e-12
}
fn default_act() -> String {
    "gelu".to_string()
}

/// A dense layer; the weight is stored transposed (`[in, out]`, row-major).
struct Linear {
    w_t: Buf<f32>,
    b: Buf<f32>,
    n_in: usize,
    n_out: usize,
}

/// A dense layer as the forward pass runs it.
enum Dense {
    F32(Linear),
    Int8(QuantLinear, Int8Kernel),
    Bf16(Bf16Linear, Bf16Kernel),
}

impl Dense {
    /// From PyTorch's layout (`w`: `[n_out, n_in]`, row-major).
    fn new(w: &[f32], b: Vec<f32>, n_in: usize, n_out: usize, kernel: Kernel) -> Dense {
        match kernel {
            Kernel::F32 => Dense::F32(Linear { w_t: transpose(w, n_out, n_in).into(), b: b.into(), n_in, n_out }),
            Kernel::Int8(k) => Dense::Int8(QuantLinear::new(w, &b, n_in, n_out), k),
            Kernel::Bf16(k) => Dense::Bf16(Bf16Linear::new(w, &b, n_in, n_out), k),
        }
    }

    /// The prepared arrays, for the weight cache.
    fn arrays<'a>(&'a self, out: &mut Arrays<'a>) {
        match self {
            Dense::F32(l) => {
                out.push(&l.w_t);
                out.push(&l.b);
            }
            Dense::Int8(q, _) => q.arrays(out),
            Dense::Bf16(l, _) => l.arrays(out),
        }
    }

    /// The layer as `arrays` stored it, viewed in the cache file.
    fn read(r: &mut Reader, n_in: usize, n_out: usize, kernel: Kernel) -> Result<Dense> {
        Ok(match kernel {
            Kernel::F32 => Dense::F32(Linear { w_t: r.take(n_in * n_out)?, b: r.take(n_out)?, n_in, n_out }),
            Kernel::Int8(k) => Dense::Int8(QuantLinear::read(r, n_in, n_out)?, k),
            Kernel::Bf16(k) => Dense::Bf16(Bf16Linear::read(r, n_in, n_out)?, k),
        })
    }
}

/// The dense layers of one encoder layer, in the order they are stored:
/// query, key and value fused, attention output, intermediate, output.
type LayerDense = [Dense; 4];

/// `(n_in, n_out)` of the four dense layers of an encoder layer.
fn dense_shapes(cfg: &BertConfig) -> [(usize, usize); 4] {
    let (h, i) = (cfg.hidden_size, cfg.intermediate_size);
    [(h, 3 * h), (h, h), (h, i), (i, h)]
}

struct LayerNorm {
    w: Vec<f32>,
    b: Vec<f32>,
}

struct Layer {
    /// Query, key and value fused into one `[hidden, 3 * hidden]` layer.
    qkv: Dense,
    attn_out: Dense,
    attn_ln: LayerNorm,
    inter: Dense,
    out: Dense,
    out_ln: LayerNorm,
}

pub struct BertModel {
    cfg: BertConfig,
    /// The embedding tables, viewed in the mapped model file where it holds
    /// them as aligned f32: a query reads only its tokens' rows of the
    /// 47 MB word table.
    word: Buf<f32>,
    position: Buf<f32>,
    token_type: Buf<f32>,
    emb_ln: LayerNorm,
    layers: Vec<Layer>,
    eps: f32,
    kernel: Kernel,
}

/// One entry of a safetensors header.
#[derive(serde::Deserialize)]
struct TensorInfo {
    dtype: String,
    shape: Vec<usize>,
    data_offsets: [usize; 2],
}

/// The tensors of a safetensors file: an 8-byte little-endian header length,
/// a JSON header `{name: {dtype, shape, data_offsets}, "__metadata__": …}`,
/// then the raw little-endian data the offsets point into.
struct Tensors<'a> {
    infos: HashMap<String, TensorInfo>,
    header: &'a [u8],
    data: &'a [u8],
    /// The mapping the file lies in and where `data` starts in it, when
    /// loaded by mapping: the embedding tables are then viewed, not copied.
    map: Option<(&'a Arc<Mmap>, usize)>,
    prefix: &'static str,
}

impl<'a> Tensors<'a> {
    fn parse(bytes: &'a [u8]) -> Result<Tensors<'a>> {
        let Some((len, rest)) = bytes.split_first_chunk::<8>() else {
            bail!("file too short");
        };
        let len = usize::try_from(u64::from_le_bytes(*len))?;
        if len > rest.len() {
            bail!("header length {len} exceeds the file");
        }
        let (header, data) = rest.split_at(len);
        let mut raw: HashMap<String, serde_json::Value> = serde_json::from_slice(header).context("invalid header")?;
        raw.remove("__metadata__");
        let mut infos = HashMap::with_capacity(raw.len());
        for (name, v) in raw {
            let info: TensorInfo =
                serde_json::from_value(v).with_context(|| format!("invalid header entry for {name}"))?;
            infos.insert(name, info);
        }
        let prefix = if infos.contains_key("embeddings.word_embeddings.weight") { "" } else { "bert." };
        Ok(Tensors { infos, header, data, map: None, prefix })
    }

    /// The tensors of a mapped file.
    fn parse_mapped(map: &'a Arc<Mmap>) -> Result<Tensors<'a>> {
        let mut t = Tensors::parse(map)?;
        t.map = Some((map, 8 + t.header.len()));
        Ok(t)
    }

    /// The bytes of tensor `name`, after checking its shape and extent.
    fn raw(&self, name: &str, shape: &[usize]) -> Result<(&TensorInfo, std::ops::Range<usize>)> {
        let full = format!("{}{name}", self.prefix);
        let t = self.infos.get(&full).with_context(|| format!("model.safetensors has no tensor {full}"))?;
        if t.shape != shape {
            bail!("tensor {full} has shape {:?}, expected {:?}", t.shape, shape);
        }
        let width = match t.dtype.as_str() {
            "F32" => 4,
            "F16" | "BF16" => 2,
            other => bail!("tensor {full} has unsupported dtype {other}"),
        };
        let [start, end] = t.data_offsets;
        let n: usize = shape.iter().product();
        if start > end || end > self.data.len() || end - start != n * width {
            bail!("tensor {full} has invalid data offsets {start}..{end}");
        }
        Ok((t, start..end))
    }

    fn get(&self, name: &str, shape: &[usize]) -> Result<Vec<f32>> {
        let (t, range) = self.raw(name, shape)?;
        let data = &self.data[range];
        let v: Vec<f32> = match t.dtype.as_str() {
            "F32" => data.chunks_exact(4).map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]])).collect(),
            "F16" => data.chunks_exact(2).map(|b| f16_to_f32(u16::from_le_bytes([b[0], b[1]]))).collect(),
            _ => {
                data.chunks_exact(2).map(|b| f32::from_bits((u16::from_le_bytes([b[0], b[1]]) as u32) << 16)).collect()
            }
        };
        Ok(v)
    }

    /// A table read by rows: viewed in the mapping when it is stored as
    /// aligned f32, else converted.
    fn table(&self, name: &str, shape: &[usize]) -> Result<Buf<f32>> {
        let (t, range) = self.raw(name, shape)?;
        if let Some((map, base)) = self.map.filter(|_| t.dtype == "F32") {
            if let Some(b) = Buf::mapped(map, base + range.start, range.len() / 4) {
                return Ok(b);
            }
        }
        Ok(self.get(name, shape)?.into())
    }

    /// What the weight cache knows the file's contents by: the header (names,
    /// shapes, types, offsets) and 256 bytes at the start, middle and end of
    /// every tensor, so that a model with other weights in any tensor gets
    /// another identity. About 100 KB for MiniLM, against the 90 MB a full
    /// hash would read.
    fn fingerprint(&self, h: &mut Sha256) {
        const SAMPLE: usize = 256;
        h.update((self.header.len() as u64).to_le_bytes());
        h.update(self.header);
        let mut ranges: Vec<[usize; 2]> = self.infos.values().map(|t| t.data_offsets).collect();
        ranges.sort_unstable();
        for [start, end] in ranges {
            let end = end.min(self.data.len());
            let start = start.min(end);
            let mid = start + (end - start) / 2;
            for at in [start, mid.saturating_sub(SAMPLE / 2).max(start), end.saturating_sub(SAMPLE).max(start)] {
                h.update(&self.data[at..(at + SAMPLE).min(end)]);
            }
        }
    }

    /// A dense layer's weight (`[n_out, n_in]`, PyTorch's layout) and bias.
    fn linear(&self, name: &str, n_in: usize, n_out: usize) -> Result<(Vec<f32>, Vec<f32>)> {
        let w = self.get(&format!("{name}.weight"), &[n_out, n_in])?;
        let b = self.get(&format!("{name}.bias"), &[n_out])?;
        Ok((w, b))
    }

    fn layer_norm(&self, name: &str, n: usize) -> Result<LayerNorm> {
        // Old checkpoints call the parameters gamma/beta.
        let w = self
            .get(&format!("{name}.weight"), &[n])
            .or_else(|e| self.get(&format!("{name}.gamma"), &[n]).map_err(|_| e))?;
        let b = self
            .get(&format!("{name}.bias"), &[n])
            .or_else(|e| self.get(&format!("{name}.beta"), &[n]).map_err(|_| e))?;
        Ok(LayerNorm { w, b })
    }
}

fn transpose(w: &[f32], rows: usize, cols: usize) -> Vec<f32> {
    let mut t = vec![0.0; w.len()];
    for r in 0..rows {
        for c in 0..cols {
            t[c * rows + r] = w[r * cols + c];
        }
    }
    t
}

fn f16_to_f32(h: u16) -> f32 {
    let sign = ((h >> 15) as u32) << 31;
    let exp = ((h >> 10) & 0x1f) as u32;
    let mant = (h & 0x3ff) as u32;
    let bits = match (exp, mant) {
        (0, 0) => sign,
        (0, m) => {
            // Subnormal: value = m * 2^-24.
            let v = m as f32 * f32::from_bits(0x3380_0000);
            return if sign != 0 { -v } else { v };
        }
        (0x1f, m) => sign | 0x7f80_0000 | (m << 13),
        (e, m) => sign | ((e + 127 - 15) << 23) | (m << 13),
    };
    f32::from_bits(bits)
}

/// Where the prepared dense layers may be kept: a cache folder, and the
/// model file (its path names the cache file, its bytes key it).
pub struct CacheAt<'a> {
    pub dir: &'a Path,
    pub model_path: &'a Path,
    pub file: &'a File,
}

impl BertModel {
    /// Builds the model from the mapped `model.safetensors`, its dense
    /// layers prepared for `kernel`: mapped from the cache when `cache`
    /// holds a valid file for these bytes and this precision, else prepared
    /// from the model's weights and, with a cache, stored for the next load.
    pub fn from_mapped(
        cfg: BertConfig,
        map: &Arc<Mmap>,
        kernel: Kernel,
        cache: Option<CacheAt>,
    ) -> Result<(BertModel, PreparedWeights)> {
        if cfg.hidden_act != "gelu" {
            bail!("unsupported hidden_act {:?} (only exact \"gelu\" BERT models are supported)", cfg.hidden_act);
        }
        if let Some(p) = cfg.position_embedding_type.as_deref().filter(|p| *p != "absolute") {
            bail!("unsupported position_embedding_type {p:?}");
        }
        let h = cfg.hidden_size;
        if cfg.num_attention_heads == 0 || !h.is_multiple_of(cfg.num_attention_heads) {
            bail!("hidden_size {h} is not a multiple of num_attention_heads");
        }
        let t = Tensors::parse_mapped(map).context("model.safetensors is not a valid safetensors file")?;
        let word = t.table("embeddings.word_embeddings.weight", &[cfg.vocab_size, h])?;
        let position = t.table("embeddings.position_embeddings.weight", &[cfg.max_position_embeddings, h])?;
        let token_type = t.table("embeddings.token_type_embeddings.weight", &[cfg.type_vocab_size, h])?;
        let emb_ln = t.layer_norm("embeddings.LayerNorm", h)?;
        let mut norms = Vec::with_capacity(cfg.num_hidden_layers);
        for i in 0..cfg.num_hidden_layers {
            let p = format!("encoder.layer.{i}");
            let attn = t.layer_norm(&format!("{p}.attention.output.LayerNorm"), h)?;
            norms.push((attn, t.layer_norm(&format!("{p}.output.LayerNorm"), h)?));
        }
        let (dense, prepared) = match cache {
            Some(at) => {
                // The precision's name; the kernel path (VNNI or portable) reads the same bytes.
                let layout = kernel.precision().name();
                let slot = Slot::new(at.dir, at.model_path, at.file, layout, |h| t.fingerprint(h));
                Self::cached_dense(&cfg, &t, kernel, &slot)?
            }
            None => (Self::prepare_dense(&cfg, &t, kernel)?, PreparedWeights::NotKept(None)),
        };
        let layers = dense
            .into_iter()
            .zip(norms)
            .map(|([qkv, attn_out, inter, out], (attn_ln, out_ln))| Layer {
                qkv,
                attn_out,
                attn_ln,
                inter,
                out,
                out_ln,
            })
            .collect();
        let eps = cfg.layer_norm_eps as f32;
        Ok((BertModel { cfg, word, position, token_type, emb_ln, layers, eps, kernel }, prepared))
    }

    /// The dense layers from `slot`'s file when it is valid; else prepared
    /// from the model and stored there (a cache that cannot be written is
    /// no error: the layers are then prepared at every load, as without one).
    fn cached_dense(
        cfg: &BertConfig,
        t: &Tensors,
        kernel: Kernel,
        slot: &Slot,
    ) -> Result<(Vec<LayerDense>, PreparedWeights)> {
        let read = slot.open().and_then(|r| r.map(|r| Self::read_dense(cfg, r, kernel)).transpose());
        let replaced = match read {
            Ok(Some(dense)) => return Ok((dense, PreparedWeights::Mapped(slot.path.clone()))),
            Ok(None) => None,
            Err(e) => Some(format!("{e:#}")),
        };
        let dense = Self::prepare_dense(cfg, t, kernel)?;
        let mut arrays = Arrays::default();
        dense.iter().flatten().for_each(|d| d.arrays(&mut arrays));
        let prepared = match slot.store(&arrays) {
            Ok(()) => PreparedWeights::Stored { path: slot.path.clone(), replaced },
            Err(e) => PreparedWeights::NotKept(Some(format!("{e:#}"))),
        };
        Ok((dense, prepared))
    }

    /// The dense layers as the cache file stores them, checked against
    /// the model's shapes.
    fn read_dense(cfg: &BertConfig, mut r: Reader, kernel: Kernel) -> Result<Vec<LayerDense>> {
        let shapes = dense_shapes(cfg);
        let mut layers = Vec::with_capacity(cfg.num_hidden_layers);
        for _ in 0..cfg.num_hidden_layers {
            let mut layer = shapes.iter().map(|&(n_in, n_out)| Dense::read(&mut r, n_in, n_out, kernel));
            let mut next = || layer.next().expect("four shapes");
            layers.push([next()?, next()?, next()?, next()?]);
        }
        r.finish()?;
        Ok(layers)
    }

    /// The dense layers prepared from the model's f32 (or f16, bf16) weights.
    fn prepare_dense(cfg: &BertConfig, t: &Tensors, kernel: Kernel) -> Result<Vec<LayerDense>> {
        let h = cfg.hidden_size;
        let [qkv, attn_out, inter, out] = dense_shapes(cfg);
        let mut layers = Vec::with_capacity(cfg.num_hidden_layers);
        for i in 0..cfg.num_hidden_layers {
            let p = format!("encoder.layer.{i}");
            let dense = |name: &str, (n_in, n_out)| -> Result<Dense> {
                let (w, b) = t.linear(&format!("{p}.{name}"), n_in, n_out)?;
                Ok(Dense::new(&w, b, n_in, n_out, kernel))
            };
            // Query, key and value: one layer of three times the outputs.
            let (mut w, mut b) = (Vec::with_capacity(3 * h * h), Vec::with_capacity(3 * h));
            for part in ["query", "key", "value"] {
                let (pw, pb) = t.linear(&format!("{p}.attention.self.{part}"), h, h)?;
                w.extend(pw);
                b.extend(pb);
            }
            layers.push([
                Dense::new(&w, b, qkv.0, qkv.1, kernel),
                dense("attention.output.dense", attn_out)?,
                dense("intermediate.dense", inter)?,
                dense("output.dense", out)?,
            ]);
        }
        Ok(layers)
    }

    /// True when the word table is viewed in the model file's mapping.
    #[cfg(test)]
    pub fn word_table_is_mapped(&self) -> bool {
        self.word.is_mapped()
    }

    pub fn config(&self) -> &BertConfig {
        &self.cfg
    }

    pub fn kernel(&self) -> Kernel {
        self.kernel
    }

    /// `out = x · W + b` for `n` rows, in the layer's precision.
    fn dense(l: &Dense, x: &[f32], n: usize, out: &mut [f32], s: &mut DenseScratch) {
        match l {
            Dense::Int8(q, kernel) => q.forward(*kernel, x, n, out, &mut s.quant),
            Dense::Bf16(b, kernel) => b.forward(*kernel, x, n, out, &mut s.bf16),
            Dense::F32(l) => linear(x, n, l, out),
        }
    }

    /// Runs the encoder over a batch of token-id sequences (each already
    /// `[CLS] … [SEP]` and at most `max_position_embeddings` long) and
    /// returns, per sequence, the mean of its last hidden states.
    pub fn mean_pooled(&self, seqs: &[&[u32]], scratch: &mut Scratch) -> Vec<Vec<f32>> {
        let h = self.cfg.hidden_size;
        let total: usize = seqs.iter().map(|s| s.len()).sum();
        let mut x = vec![0.0f32; total * h];
        // Embeddings: word + position + token type 0, then LayerNorm.
        let mut row = 0;
        for seq in seqs {
            for (pos, &id) in seq.iter().enumerate() {
                let id = (id as usize).min(self.cfg.vocab_size - 1);
                let out = &mut x[row * h..(row + 1) * h];
                let w = &self.word[id * h..(id + 1) * h];
                let p = &self.position[pos * h..(pos + 1) * h];
                let t = &self.token_type[..h];
                for j in 0..h {
                    out[j] = w[j] + p[j] + t[j];
                }
                row += 1;
            }
        }
        layer_norm(&mut x, &self.emb_ln, h, self.eps);

        let lens: Vec<usize> = seqs.iter().map(|s| s.len()).collect();
        scratch.fit(total, h, self.cfg.intermediate_size, &lens, self.kernel);
        for layer in &self.layers {
            self.layer_forward(layer, &mut x, &lens, scratch);
        }

        // Mean pooling (every packed token is a real token).
        let mut out = Vec::with_capacity(seqs.len());
        let mut start = 0;
        for &len in &lens {
            let mut v = vec![0.0f32; h];
            for r in start..start + len {
                for (a, b) in v.iter_mut().zip(&x[r * h..(r + 1) * h]) {
                    *a += *b;
                }
            }
            let n = len.max(1) as f32;
            v.iter_mut().for_each(|a| *a /= n);
            out.push(v);
            start += len;
        }
        out
    }

    fn layer_forward(&self, l: &Layer, x: &mut [f32], lens: &[usize], s: &mut Scratch) {
        let h = self.cfg.hidden_size;
        let heads = self.cfg.num_attention_heads;
        let dh = h / heads;
        let n = x.len() / h;
        let scale = 1.0 / (dh as f32).sqrt();

        // Q | K | V for all tokens: [n, 3h].
        Self::dense(&l.qkv, x, n, &mut s.qkv, &mut s.dense);
        // Attention per sequence and head, written into ctx: [n, h].
        let qkv = &s.qkv;
        let mut start = 0;
        for &len in lens {
            let base = start * 3 * h;
            if let Kernel::Int8(kernel) = self.kernel {
                quantize_queries(kernel, &qkv[base..], len, h, 3 * h, &mut s.attention);
            }
            for head in 0..heads {
                let q = &qkv[base + head * dh..];
                let k = &qkv[base + h + head * dh..];
                let v = &qkv[base + 2 * h + head * dh..];
                let ctx = &mut s.ctx[start * h + head * dh..];
                match self.kernel {
                    Kernel::Int8(kernel) => {
                        let shape =
                            HeadShape { len, dh, q_offset: head * dh, q_width: h, stride: 3 * h, ctx_stride: h, scale };
                        attention_head(kernel, shape, (k, v), ctx, &mut s.attention);
                    }
                    Kernel::F32 | Kernel::Bf16(_) => {
                        attention_head_f32(len, dh, h, scale, (q, k, v), ctx, &mut s.scores)
                    }
                }
            }
            start += len;
        }
        // Output projection, residual, LayerNorm.
        Self::dense(&l.attn_out, &s.ctx, n, &mut s.proj, &mut s.dense);
        add_layer_norm(x, &s.proj, &l.attn_ln, h, self.eps);
        // Feed-forward: GELU(x W1 + b1) W2 + b2, residual, LayerNorm.
        Self::dense(&l.inter, x, n, &mut s.inter, &mut s.dense);
        match &l.out {
            Dense::F32(out) => {
                gelu_all(&mut s.inter);
                linear(&s.inter, n, out, &mut s.proj);
            }
            // GELU (the coarse erf: its output is rounded to 8 bits next)
            // row by row as the rows are quantized.
            Dense::Int8(out, kernel) => {
                out.forward_mapped(*kernel, &s.inter, Some(gelu_coarse_row), n, &mut s.proj, &mut s.dense.quant)
            }
            // The same for bf16 (its rounding step on values near 1, about 4e-3, is
            // far above the coarse erf's absolute error, about 6e-5).
            Dense::Bf16(out, kernel) => {
                out.forward_mapped(*kernel, &s.inter, Some(gelu_coarse_row), n, &mut s.proj, &mut s.dense.bf16)
            }
        }
        add_layer_norm(x, &s.proj, &l.out_ln, h, self.eps);
    }
}

/// `ctx = softmax(scale · Q Kᵀ) V` for one head in f32 (rows of Q, K and
/// V `3 * h` apart, of `ctx` `h` apart).
fn attention_head_f32(
    len: usize,
    dh: usize,
    h: usize,
    scale: f32,
    (q, k, v): (&[f32], &[f32], &[f32]),
    ctx: &mut [f32],
    scores: &mut [f32],
) {
    let scores = &mut scores[..len * len];
    // SAFETY (both products): the dimensions and strides describe the slices.
    // scores = scale * Q_h K_hᵀ
    unsafe {
        matrixmultiply::sgemm(
            len,
            dh,
            len,
            scale,
            q.as_ptr(),
            (3 * h) as isize,
            1,
            k.as_ptr(),
            1,
            (3 * h) as isize,
            0.0,
            scores.as_mut_ptr(),
            len as isize,
            1,
        );
    }
    softmax_rows(scores, len);
    // ctx_h = P V_h
    unsafe {
        matrixmultiply::sgemm(
            len,
            len,
            dh,
            1.0,
            scores.as_ptr(),
            len as isize,
            1,
            v.as_ptr(),
            (3 * h) as isize,
            1,
            0.0,
            ctx.as_mut_ptr(),
            h as isize,
            1,
        );
    }
}

/// Buffers reused across layers and, by one worker, across batches (every
/// element is written before it is read, so growing them never clears).
#[derive(Default)]
pub struct Scratch {
    qkv: Vec<f32>,
    ctx: Vec<f32>,
    proj: Vec<f32>,
    inter: Vec<f32>,
    /// The f32 attention's `len × len` scores (empty at int8).
    scores: Vec<f32>,
    attention: AttentionScratch,
    dense: DenseScratch,
}

/// The dense layers' buffers for their precision.
#[derive(Default)]
struct DenseScratch {
    quant: QuantScratch,
    bf16: Bf16Scratch,
}

impl Scratch {
    /// Sizes the buffers for `n` packed tokens.
    fn fit(&mut self, n: usize, h: usize, inter: usize, lens: &[usize], kernel: Kernel) {
        let f32_attention = !matches!(kernel, Kernel::Int8(_));
        let longest = if f32_attention { lens.iter().copied().max().unwrap_or(0) } else { 0 };
        self.qkv.resize(n * 3 * h, 0.0);
        self.ctx.resize(n * h, 0.0);
        self.proj.resize(n * h, 0.0);
        self.inter.resize(n * inter, 0.0);
        self.scores.resize(longest * longest, 0.0);
    }
}

/// out[n, n_out] = x[n, n_in] · W + b
fn linear(x: &[f32], n: usize, l: &Linear, out: &mut [f32]) {
    debug_assert_eq!(x.len(), n * l.n_in);
    debug_assert_eq!(out.len(), n * l.n_out);
    for row in out.chunks_exact_mut(l.n_out) {
        row.copy_from_slice(&l.b);
    }
    if n == 0 {
        return;
    }
    // SAFETY: the dimensions and strides describe the slices exactly.
    unsafe {
        matrixmultiply::sgemm(
            n,
            l.n_in,
            l.n_out,
            1.0,
            x.as_ptr(),
            l.n_in as isize,
            1,
            l.w_t.as_ptr(),
            l.n_out as isize,
            1,
            1.0,
            out.as_mut_ptr(),
            l.n_out as isize,
            1,
        );
    }
}

multiversion! {
    /// Row-wise softmax of a `[rows, len]` matrix.
    fn softmax_rows(scores: &mut [f32], len: usize) {
        for r in scores.chunks_exact_mut(len) {
            softmax(r);
        }
    }

    /// GELU in place.
    fn gelu_all(v: &mut [f32]) {
        v.iter_mut().for_each(|x| *x = gelu(*x));
    }

    /// `out = GELU(x)` with `erf_coarse`, for int8 and bf16 (whose next step
    /// rounds these values to 8 bits, or to an 8-bit mantissa).
    fn gelu_coarse_row(x: &[f32], out: &mut [f32]) {
        for (o, &x) in out.iter_mut().zip(x) {
            *o = 0.5 * x * (1.0 + erf_coarse(x * std::f32::consts::FRAC_1_SQRT_2));
        }
    }

    /// x = LayerNorm(x + y), row by row.
    fn add_layer_norm(x: &mut [f32], y: &[f32], ln: &LayerNorm, h: usize, eps: f32) {
        for (a, b) in x.iter_mut().zip(y) {
            *a += *b;
        }
        layer_norm(x, ln, h, eps);
    }
}

#[inline(always)]
fn layer_norm(x: &mut [f32], ln: &LayerNorm, h: usize, eps: f32) {
    for row in x.chunks_exact_mut(h) {
        let mean = sum(row) / h as f32;
        let mut acc = [0.0f32; 8];
        let chunks = row.chunks_exact(8);
        let tail: f32 = chunks.remainder().iter().map(|v| (v - mean) * (v - mean)).sum();
        for c in chunks {
            for l in 0..8 {
                acc[l] += (c[l] - mean) * (c[l] - mean);
            }
        }
        let var = (acc.iter().sum::<f32>() + tail) / h as f32;
        let inv = 1.0 / (var + eps).sqrt();
        for ((v, w), b) in row.iter_mut().zip(&ln.w).zip(&ln.b) {
            *v = (*v - mean) * inv * w + b;
        }
    }
}

#[inline(always)]
fn softmax(r: &mut [f32]) {
    let mut m = [f32::NEG_INFINITY; 8];
    let chunks = r.chunks_exact(8);
    let mut max = chunks.remainder().iter().copied().fold(f32::NEG_INFINITY, f32::max);
    for c in chunks {
        for l in 0..8 {
            m[l] = m[l].max(c[l]);
        }
    }
    max = m.iter().copied().fold(max, f32::max);
    r.iter_mut().for_each(|v| *v = exp_neg(*v - max));
    let inv = 1.0 / sum(r);
    r.iter_mut().for_each(|v| *v *= inv);
}

/// Sum with eight independent accumulators (vectorises).
#[inline(always)]
fn sum(r: &[f32]) -> f32 {
    let mut acc = [0.0f32; 8];
    let chunks = r.chunks_exact(8);
    let tail: f32 = chunks.remainder().iter().sum();
    for c in chunks {
        for l in 0..8 {
            acc[l] += c[l];
        }
    }
    acc.iter().sum::<f32>() + tail
}

/// e^x for x <= 0 (softmax after subtracting the maximum): Cephes' expf
/// polynomial with Cody–Waite range reduction, branch-free so that loops
/// over it vectorise; relative error about 1e-7 (see the tests), flushes
/// to 0 below -87.
#[inline(always)]
fn exp_neg(x: f32) -> f32 {
    const ROUND: f32 = 12_582_912.0; // 1.5 * 2^23: adding it rounds to an integer
    let x = x.clamp(-87.0, 0.0);
    let t = x * std::f32::consts::LOG2_E + ROUND;
    // n = round(x * log2 e) in -126..=0, as a float and in the low mantissa bits of t.
    let n = t - ROUND;
    let n_bits = t.to_bits().wrapping_sub(ROUND.to_bits());
    let r = x - n * 0.693_359_4 + n * 2.121_944_4e-4;
    let mut p = 1.987_569_1e-4_f32;
    p = p * r + 1.398_199_9e-3;
    p = p * r + 8.333_452e-3;
    p = p * r + 4.166_579_6e-2;
    p = p * r + 1.666_666_5e-1;
    p = p * r + 0.5;
    let y = p * r * r + r + 1.0;
    // 2^n built from its exponent bits.
    f32::from_bits(n_bits.wrapping_add(127) << 23) * y
}

/// Exact (erf-based) GELU, as BERT's `hidden_act: "gelu"`.
#[inline(always)]
fn gelu(x: f32) -> f32 {
    0.5 * x * (1.0 + erf(x * std::f32::consts::FRAC_1_SQRT_2))
}

/// erf for f32: a rational approximation on [-4, 4] (the one Eigen and
/// XNNPACK use for float; |error| < 2e-7 against the exact erf, see the
/// tests), branch-free so that the GELU loop vectorises. Outside [-4, 4]
/// erf is ±1 in f32.
#[inline(always)]
fn erf(x: f32) -> f32 {
    let x = x.clamp(-4.0, 4.0);
    let x2 = x * x;
    let mut p = -2.726_142_3e-10_f32;
    p = p * x2 + 2.770_681_4e-8;
    p = p * x2 - 2.101_024e-6;
    p = p * x2 - 5.692_506_4e-5;
    p = p * x2 - 7.349_906_3e-4;
    p = p * x2 - 2.954_600_1e-3;
    p = p * x2 - 1.609_603_3e-2;
    let mut q = -1.456_607_2e-5_f32;
    q = q * x2 - 2.133_740_6e-4;
    q = q * x2 - 1.682_827e-3;
    q = q * x2 - 7.373_329e-3;
    q = q * x2 - 1.426_474e-2;
    x * p / q
}

/// erf for f32 with fewer terms than `erf`: `x·P(x²)/Q(x²)` of degrees 3
/// and 3 on [-4, 4] (|error| < 3e-5, see the tests), for the int8 and
/// bf16 precisions: GELU's output is then quantized per row to 8 bits
/// (steps of about 0.02), or rounded to bf16's 8-bit mantissa.
#[inline(always)]
fn erf_coarse(x: f32) -> f32 {
    let x = x.clamp(-4.0, 4.0);
    let x2 = x * x;
    let mut p = 6.060_537e-4_f32;
    p = p * x2 + 4.121_338_6e-2;
    p = p * x2 + 1.746_122e-1;
    p = p * x2 + 1.128_249_8;
    let mut q = 8.150_37e-3_f32;
    q = q * x2 + 1.001_439e-1;
    q = q * x2 + 4.873_818_8e-1;
    q = q * x2 + 1.0;
    x * p / q
}

/// erf in f64 after W. J. Cody's rational approximations (relative error
/// below 1e-9): the yardstick for the f32 version in the tests.
#[cfg(test)]
fn erf_f64(x: f64) -> f64 {
    let ax = x.abs();
    let r = if ax < 0.468_75 {
        // erf(x) = x * P(x²) / Q(x²)
        const P: [f64; 5] = [
            3.161_123_743_870_565_6,
            113.864_154_151_050_16,
            377.485_237_685_302_1,
            3_209.377_589_138_469_4,
            0.185_777_706_184_603_15,
        ];
        const Q: [f64; 4] =
            [23.601_290_952_344_122, 244.024_637_934_444_17, 1_282.616_526_077_372_3, 2_844.236_833_439_171];
        let z = x * x;
        let mut num = P[4] * z;
        let mut den = z;
        for i in 0..3 {
            num = (num + P[i]) * z;
            den = (den + Q[i]) * z;
        }
        return x * (num + P[3]) / (den + Q[3]);
    } else if ax < 4.0 {
        // erfc(x) = exp(-x²) * P(x) / Q(x)
        const P: [f64; 9] = [
            0.564_188_496_988_670_1,
            8.883_149_794_388_376,
            66.119_190_637_141_63,
            298.635_138_197_400_1,
            881.952_221_241_769,
            1_712.047_612_634_070_7,
            2_051.078_377_826_071_6,
            1_230.339_354_797_997_2,
            2.153_115_354_744_038_3e-8,
        ];
        const Q: [f64; 8] = [
            15.744_926_110_709_835,
            117.693_950_891_312_5,
            537.181_101_862_009_9,
            1_621.389_574_566_690_3,
            3_290.799_235_733_459_7,
            4_362.619_090_143_247,
            3_439.367_674_143_721_6,
            1_230.339_354_803_749_4,
        ];
        let mut num = P[8] * ax;
        let mut den = ax;
        for i in 0..7 {
            num = (num + P[i]) * ax;
            den = (den + Q[i]) * ax;
        }
        let erfc = (-ax * ax).exp() * (num + P[7]) / (den + Q[7]);
        1.0 - erfc
    } else {
        // Beyond 4, 1 - erf(x) < 2e-8: saturated in f32.
        1.0
    };
    if x < 0.0 {
        -r
    } else {
        r
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn erf_matches_known_values() {
        let cases = [
            (0.0, 0.0),
            (0.1, 0.112_462_916_018_284_9),
            (0.5, 0.520_499_877_813_046_5),
            (1.0, 0.842_700_792_949_714_9),
            (2.0, 0.995_322_265_018_952_7),
            (3.0, 0.999_977_909_503_001_4),
            (-1.5, -0.966_105_146_475_310_7),
        ];
        for (x, want) in cases {
            let got = erf_f64(x);
            assert!((got - want).abs() < 1e-9, "erf({x}) = {got}, want {want}");
        }
    }

    #[test]
    fn fast_erf_is_accurate() {
        let mut worst = 0.0f64;
        for i in -60_000..=60_000 {
            let x = i as f32 * 1e-4;
            let err = (erf(x) as f64 - erf_f64(x as f64)).abs();
            worst = worst.max(err);
        }
        assert!(worst < 5e-7, "max |erf error| = {worst}");
        eprintln!("max |erf error| = {worst:e}");
        assert!((erf(10.0) - 1.0).abs() < 1e-6);
        assert!((erf(-10.0) + 1.0).abs() < 1e-6);
    }

    #[test]
    fn coarse_erf_is_accurate_enough() {
        let mut worst = 0.0f64;
        for i in -60_000..=60_000 {
            let x = i as f32 * 1e-4;
            worst = worst.max((erf_coarse(x) as f64 - erf_f64(x as f64)).abs());
        }
        eprintln!("max |coarse erf error| = {worst:e}");
        assert!(worst < 3e-5, "max |coarse erf error| = {worst}");
        assert!((erf_coarse(10.0) - 1.0).abs() < 3e-5);
    }

    #[test]
    fn fast_exp_is_accurate() {
        let mut worst = 0.0f64;
        for i in 0..=870_000 {
            let x = -(i as f32) * 1e-4;
            let want = (x as f64).exp();
            let err = ((exp_neg(x) as f64 - want) / want).abs();
            worst = worst.max(err);
        }
        assert!(worst < 3e-7, "max relative exp error = {worst}");
        assert_eq!(exp_neg(0.0), 1.0);
        assert!(exp_neg(-200.0) < 1e-37);
    }

    /// A safetensors file with the given (name, dtype, shape, bytes).
    fn safetensors(tensors: &[(&str, &str, &[usize], Vec<u8>)]) -> Vec<u8> {
        let mut header = serde_json::Map::new();
        header.insert("__metadata__".into(), serde_json::json!({"format": "pt"}));
        let mut data = Vec::new();
        for (name, dtype, shape, bytes) in tensors {
            let start = data.len();
            data.extend_from_slice(bytes);
            header.insert(
                name.to_string(),
                serde_json::json!({"dtype": dtype, "shape": shape, "data_offsets": [start, data.len()]}),
            );
        }
        let header = serde_json::to_vec(&header).unwrap();
        let mut out = (header.len() as u64).to_le_bytes().to_vec();
        out.extend_from_slice(&header);
        out.extend_from_slice(&data);
        out
    }

    #[test]
    fn reads_safetensors() {
        let f32s: Vec<u8> = [1.0f32, -2.5, 3.25].iter().flat_map(|v| v.to_le_bytes()).collect();
        let f16s: Vec<u8> = [0x3c00u16, 0xc000].iter().flat_map(|v| v.to_le_bytes()).collect();
        let bf16s: Vec<u8> = [0x3f80u16, 0x4040].iter().flat_map(|v| v.to_le_bytes()).collect();
        let file = safetensors(&[
            ("bert.a", "F32", &[3], f32s),
            ("bert.b", "F16", &[1, 2], f16s),
            ("bert.c", "BF16", &[2], bf16s),
            ("bert.embeddings.position_ids", "I64", &[1], vec![0; 8]),
        ]);
        let t = Tensors::parse(&file).unwrap();
        assert_eq!(t.prefix, "bert.");
        assert_eq!(t.get("a", &[3]).unwrap(), vec![1.0, -2.5, 3.25]);
        assert_eq!(t.get("b", &[1, 2]).unwrap(), vec![1.0, -2.0]);
        assert_eq!(t.get("c", &[2]).unwrap(), vec![1.0, 3.0]);
        let err = t.get("a", &[4]).unwrap_err().to_string();
        assert!(err.contains("shape"), "{err}");
        let err = t.get("missing", &[1]).unwrap_err().to_string();
        assert!(err.contains("bert.missing"), "{err}");
        let err = t.get("embeddings.position_ids", &[1]).unwrap_err().to_string();
        assert!(err.contains("dtype"), "{err}");

        let bad = safetensors(&[("x", "F32", &[2], vec![0; 4])]);
        let t = Tensors::parse(&bad).unwrap();
        assert!(t.get("x", &[2]).is_err());
        assert!(Tensors::parse(&file[..4]).is_err());
        assert!(Tensors::parse(&file[..20]).is_err());
    }

    #[test]
    fn f16_conversion() {
        assert_eq!(f16_to_f32(0x3c00), 1.0);
        assert_eq!(f16_to_f32(0xc000), -2.0);
        assert_eq!(f16_to_f32(0x0001), 2f32.powi(-24));
        assert!(f16_to_f32(0x7c00).is_infinite());
    }
}
