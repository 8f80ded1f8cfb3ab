//! Self-attention of one sequence and head in int8, for the int8 precision:
//! the two attention products run on the same integer dot-product
//! instructions as the dense layers (`int8` module) instead of f32 FMAs.
//!
//! - `Q Kᵀ`: each query row (one token's slice of the head, 32 values) as
//!   asymmetric u8 (`q ≈ min + s·u`, as the dense layers' activations), each
//!   key row as symmetric int8 (`k ≈ t·k̂`), so that
//!   `q·k ≈ t · (s · Σ u·k̂ + min · Σ k̂)`; the `1/√d` of attention and
//!   `log₂e` (the exponential is a power of two) are folded into `t`.
//! - softmax: `2^(x - max)` from a degree-3 polynomial (relative error
//!   1e-4, far below the step of what follows), written straight as u8
//!   probabilities `p̂ = round(255 · 2^(x - max))` (the row's largest score
//!   gives exactly 255), and their integer row sum `S`.
//! - `P V`: `p̂` (u8) against each value column as symmetric int8 with one
//!   scale `c` per column: `ctx ≈ c · Σ p̂·v̂ / S`.
//!
//! Work goes in blocks of four query rows, so a block's scores and
//! probabilities stay in L1 and no `len × len` matrix is written. The
//! integer sums are exact and the f32 operations are the same on every path
//! (no fused multiply-adds), so the AVX-512 VNNI, AVX-VNNI and portable
//! kernels give bit-identical results.

// The packed layout and the row quantization are the dense layers': the
// kernels of `int8` read these operands.
use crate::int8::{max_abs, packed_index, quantize_row_with, symmetric_scale, Int8Kernel, GROUP, PANEL};

/// Query rows per block.
const ROWS: usize = 4;
/// Key panels per register block of the AVX-512 scores kernel.
const PANELS: usize = 4;

/// The head's quantized operands and one block's scores, reused across
/// heads, layers and sequences of a batch.
#[derive(Default)]
pub struct AttentionScratch {
    /// The sequence's queries as u8, `[len][h]`, one scale and minimum per token.
    q: Vec<u8>,
    q_scales: Vec<f32>,
    q_mins: Vec<f32>,
    /// Keys as int8, `[len16 / 16][dq / 4][16][4]`.
    k: Vec<i8>,
    /// Per key: its scale times `log₂e / √d` (scores in log₂ units), and
    /// `Σ k̂` (both 0 for padding keys).
    k_weights: Vec<f32>,
    k_sums: Vec<f32>,
    /// Values as int8, `[dv / 16][len4 / 4][16][4]` (`dv`: head width rounded up to 16).
    v: Vec<i8>,
    /// Per value column: its scale (0 for padding columns).
    v_scales: Vec<f32>,
    /// One block's scores, `[ROWS][len16]`, and u8 probabilities, `[ROWS][len4]`.
    scores: Vec<f32>,
    p: Vec<u8>,
    /// K or V quantized, row-major, before packing.
    rows: Vec<i8>,
    /// One block's `1 / S` per row.
    p_inv_sums: [f32; ROWS],
    /// One block's largest score per row (AVX-512 path: taken in the scores' epilogue).
    row_max: [f32; ROWS],
}

/// The shape of one head's attention: `len` tokens of width `dh`; rows of
/// K and V `stride` apart, rows of the output `ctx_stride` apart.
#[derive(Clone, Copy)]
pub struct HeadShape {
    pub len: usize,
    pub dh: usize,
    /// The head's first column in a query row, and the query rows' width.
    pub q_offset: usize,
    pub q_width: usize,
    pub stride: usize,
    pub ctx_stride: usize,
    /// `1/√dh`.
    pub scale: f32,
}

impl HeadShape {
    fn dq(self) -> usize {
        self.dh.next_multiple_of(GROUP)
    }
    fn dv(self) -> usize {
        self.dh.next_multiple_of(PANEL)
    }
    fn len4(self) -> usize {
        self.len.next_multiple_of(GROUP)
    }
    fn len16(self) -> usize {
        self.len.next_multiple_of(PANEL)
    }
}

/// `ctx = softmax(scale · Q Kᵀ) V` for one head, the sequence's queries
/// quantized by [`quantize_queries`], `k` and `v` starting at the head's
/// first column of the first token, `ctx` likewise.
pub fn attention_head(
    kernel: Int8Kernel,
    shape: HeadShape,
    (k, v): (&[f32], &[f32]),
    ctx: &mut [f32],
    s: &mut AttentionScratch,
) {
    if shape.len == 0 {
        return;
    }
    prepare(kernel, shape, k, v, s);
    let mut i = 0;
    while i < shape.len {
        let rows = if i + ROWS <= shape.len { ROWS } else { 1 };
        scores_block(kernel, shape, i, rows, s);
        for r in 0..rows {
            s.p_inv_sums[r] = softmax_to_u8(
                kernel,
                &s.scores[r * shape.len16()..r * shape.len16() + shape.len],
                &mut s.p[r * shape.len4()..(r + 1) * shape.len4()],
                s.row_max[r],
            );
        }
        values_block(kernel, shape, i, rows, ctx, s);
        i += rows;
    }
}

fn scores_block(kernel: Int8Kernel, shape: HeadShape, row0: usize, rows: usize, s: &mut AttentionScratch) {
    match kernel {
        // SAFETY: `Int8Kernel::available` only offers the VNNI kernels on CPUs that have them.
        #[cfg(target_arch = "x86_64")]
        Int8Kernel::Avx512Vnni | Int8Kernel::Amx => unsafe { x86::scores_avx512(shape, row0, rows, s) },
        #[cfg(target_arch = "x86_64")]
        Int8Kernel::AvxVnni => unsafe { x86::scores_avxvnni(shape, row0, rows, s) },
        _ => scores_portable(shape, row0, rows, s),
    }
}

fn values_block(kernel: Int8Kernel, shape: HeadShape, row0: usize, rows: usize, ctx: &mut [f32], s: &AttentionScratch) {
    match kernel {
        // SAFETY: as above.
        #[cfg(target_arch = "x86_64")]
        Int8Kernel::Avx512Vnni | Int8Kernel::Amx => unsafe { x86::values_avx512(shape, row0, rows, ctx, s) },
        #[cfg(target_arch = "x86_64")]
        Int8Kernel::AvxVnni => unsafe { x86::values_avxvnni(shape, row0, rows, ctx, s) },
        _ => values_portable(shape, row0, rows, ctx, s),
    }
}

/// The epilogue of a score: `t · (s · d + min · Σk̂)` (every path, this order).
#[inline(always)]
fn score(d: i32, q_scale: f32, q_min: f32, k_weight: f32, k_sum: f32) -> f32 {
    k_weight * (q_scale * d as f32 + q_min * k_sum)
}

/// The epilogue of a context value: `c · Σ p̂·v̂ · (1 / S)` (every path, this order).
#[inline(always)]
fn context(d: i32, v_scale: f32, inv_sum: f32) -> f32 {
    d as f32 * v_scale * inv_sum
}

#[inline(always)]
fn quantize_symmetric(x: f32, scale: f32) -> i8 {
    // Ties to even, as the SIMD conversion rounds.
    (x / scale).round_ties_even().clamp(-127.0, 127.0) as i8
}

/// Quantizes the queries of a sequence, every head at once: one u8 row
/// per token (`len` rows of width `h`, `stride` apart in `q`), with one
/// scale and minimum per token, shared by its heads.
pub fn quantize_queries(kernel: Int8Kernel, q: &[f32], len: usize, h: usize, stride: usize, s: &mut AttentionScratch) {
    s.q.clear();
    // GROUP bytes of slack: a head whose width is not a multiple of 4 reads
    // past its last query byte (into bytes that meet zero key padding).
    s.q.resize(len * h + GROUP, 0);
    s.q_scales.resize(len, 0.0);
    s.q_mins.resize(len, 0.0);
    for i in 0..len {
        let (row, out) = (&q[i * stride..i * stride + h], &mut s.q[i * h..(i + 1) * h]);
        (s.q_scales[i], s.q_mins[i]) = quantize_row_with(kernel, row, out);
    }
}

/// Quantizes and packs the head's K and V.
fn prepare(kernel: Int8Kernel, shape: HeadShape, k: &[f32], v: &[f32], s: &mut AttentionScratch) {
    let (len, dh) = (shape.len, shape.dh);
    let (dq, dv, len4, len16) = (shape.dq(), shape.dv(), shape.len4(), shape.len16());
    // K and V, row-major first (vectorised loops), then packed.
    s.k_weights.clear();
    s.k_weights.resize(len16, 0.0);
    s.k_sums.clear();
    s.k_sums.resize(len16, 0.0);
    s.v_scales.clear();
    s.v_scales.resize(dv, 0.0);
    s.rows.clear();
    s.rows.resize(len4 * dv.max(dq), 0);
    #[cfg(target_arch = "x86_64")]
    let simd = kernel.is_avx512() && dh.is_multiple_of(PANEL);
    #[cfg(not(target_arch = "x86_64"))]
    let simd = false;
    if simd {
        // SAFETY: the CPU has AVX-512 (the kernel is only offered then).
        #[cfg(target_arch = "x86_64")]
        unsafe {
            x86::quantize_keys_avx512(shape, k, s)
        };
    } else {
        quantize_keys(shape, k, s);
    }
    s.k.clear();
    s.k.resize(len16 * dq, 0);
    let k_groups = dq / GROUP;
    for j in 0..len {
        for g in 0..k_groups {
            let at = packed_index(j, g * GROUP, k_groups);
            s.k[at..at + GROUP].copy_from_slice(&s.rows[j * dq + g * GROUP..j * dq + (g + 1) * GROUP]);
        }
    }
    s.v.clear();
    s.v.resize(dv * len4, 0);
    if simd {
        // SAFETY: as above.
        #[cfg(target_arch = "x86_64")]
        unsafe {
            x86::quantize_values_avx512(shape, v, s)
        };
    } else {
        quantize_values(shape, v, s);
        let v_groups = len4 / GROUP;
        for j in (0..len).step_by(GROUP) {
            for c in 0..dh {
                let at = packed_index(c, j, v_groups);
                for t in 0..GROUP.min(len - j) {
                    s.v[at + t] = s.rows[(j + t) * dv + c];
                }
            }
        }
    }
    s.scores.resize(ROWS * len16, 0.0);
    s.p.clear();
    s.p.resize(ROWS * len4, 0);
}

multiversion! {
    /// Each key row as symmetric int8 into `s.rows` (`[len][dq]`), its weight and `Σ k̂`.
    fn quantize_keys(shape: HeadShape, k: &[f32], s: &mut AttentionScratch) {
        let (dh, dq) = (shape.dh, shape.dq());
        for j in 0..shape.len {
            let row = &k[j * shape.stride..j * shape.stride + dh];
            let t = symmetric_scale(max_abs(row));
            let out = &mut s.rows[j * dq..j * dq + dh];
            let mut sum = 0i32;
            for (o, &x) in out.iter_mut().zip(row) {
                *o = quantize_symmetric(x, t);
                sum += i32::from(*o);
            }
            s.k_weights[j] = t * shape.scale * std::f32::consts::LOG2_E;
            s.k_sums[j] = sum as f32;
        }
    }

    /// Each value column's scale, and the values as int8 into `s.rows` (`[len][dv]`).
    fn quantize_values(shape: HeadShape, v: &[f32], s: &mut AttentionScratch) {
        let (dh, dv) = (shape.dh, shape.dv());
        let m = &mut s.v_scales[..dh];
        for j in 0..shape.len {
            for (m, x) in m.iter_mut().zip(&v[j * shape.stride..j * shape.stride + dh]) {
                *m = m.max(x.abs());
            }
        }
        m.iter_mut().for_each(|m| *m = symmetric_scale(*m));
        for j in 0..shape.len {
            let out = &mut s.rows[j * dv..j * dv + dh];
            for ((o, &x), &c) in out.iter_mut().zip(&v[j * shape.stride..j * shape.stride + dh]).zip(&s.v_scales) {
                *o = quantize_symmetric(x, c);
            }
        }
    }

    /// Writes `p̂ = round(255 · exp(x - max))` of a row of scores into `p`
    /// (the padding after the row stays 0) and returns `1 / Σ p̂`.
    fn softmax_to_u8_portable(scores: &[f32], p: &mut [u8]) -> f32 {
        let mut m = [f32::NEG_INFINITY; 16];
        let chunks = scores.chunks_exact(16);
        let tail = chunks.remainder().iter().copied().fold(f32::NEG_INFINITY, f32::max);
        for c in chunks {
            for l in 0..16 {
                m[l] = m[l].max(c[l]);
            }
        }
        let max = m.iter().copied().fold(tail, f32::max);
        let mut sum = 0u32;
        for (u, &x) in p.iter_mut().zip(scores) {
            *u = probability_u8(x - max);
            sum += u32::from(*u);
        }
        1.0 / sum as f32
    }
}

/// `softmax_to_u8_portable` on the kernel's SIMD path (the same bytes);
/// `max`: the row's largest score where the kernel's scores epilogue took it (AVX-512).
fn softmax_to_u8(kernel: Int8Kernel, scores: &[f32], p: &mut [u8], max: f32) -> f32 {
    match kernel {
        // SAFETY: the AVX-512 VNNI kernel is only offered on CPUs with AVX-512.
        #[cfg(target_arch = "x86_64")]
        Int8Kernel::Avx512Vnni | Int8Kernel::Amx => unsafe { x86::softmax_to_u8_avx512(scores, p, max) },
        _ => softmax_to_u8_portable(scores, p),
    }
}

/// Coefficients of `255 · 2ᶠ` on [-0.5, 0.5] (a degree-3 minimax fit of `2ᶠ`,
/// relative error 1.0e-4, a fortieth of a u8 step, times 255; the constant
/// term is exactly 255 so that the row's maximum gives 255).
const EXP2_255: [f32; 3] = [14.027_073, 61.763_36, 176.787_13];

/// `round(255 · 2ᵗ)` for `t <= 0` (scores are in log₂ units: `log₂e` is
/// folded into the key weights): `2ᵗ = 2ⁿ · 2ᶠ` with `n = round(t)`. Below
/// `2⁻¹⁰` the result rounds to 0 anyway, so `t` is clamped there, which
/// keeps `2ⁿ` a normal float and multiplying by it exact. Branch-free, so
/// it vectorises; at most 255.03 before truncation, so `as u8` never saturates.
#[inline(always)]
fn probability_u8(t: f32) -> u8 {
    const ROUND: f32 = 12_582_912.0; // 1.5 * 2^23: adding it rounds to an integer (ties to even)
    let t = t.max(-10.0);
    let r = t + ROUND;
    let n = r - ROUND;
    let n_bits = r.to_bits().wrapping_sub(ROUND.to_bits());
    let f = t - n;
    let p = ((EXP2_255[0] * f + EXP2_255[1]) * f + EXP2_255[2]) * f + 255.0;
    let y = f32::from_bits(n_bits.wrapping_add(127) << 23) * p;
    (y + 0.5) as u8
}

/// The reference loops: the same integer sums and epilogues as the SIMD
/// kernels, one element at a time.
fn scores_portable(shape: HeadShape, row0: usize, rows: usize, s: &mut AttentionScratch) {
    let (dq, len16) = (shape.dq(), shape.len16());
    let groups = dq / GROUP;
    for r in 0..rows {
        let i = row0 + r;
        let u = &s.q[i * shape.q_width + shape.q_offset..][..dq];
        for j in 0..len16 {
            let d: i32 = (0..dq).map(|c| i32::from(u[c]) * i32::from(s.k[packed_index(j, c, groups)])).sum();
            s.scores[r * len16 + j] = score(d, s.q_scales[i], s.q_mins[i], s.k_weights[j], s.k_sums[j]);
        }
    }
}

fn values_portable(shape: HeadShape, row0: usize, rows: usize, ctx: &mut [f32], s: &AttentionScratch) {
    let len4 = shape.len4();
    let groups = len4 / GROUP;
    for r in 0..rows {
        let p = &s.p[r * len4..(r + 1) * len4];
        let out = &mut ctx[(row0 + r) * shape.ctx_stride..(row0 + r) * shape.ctx_stride + shape.dh];
        for (c, o) in out.iter_mut().enumerate() {
            let d: i32 = (0..len4).map(|j| i32::from(p[j]) * i32::from(s.v[packed_index(c, j, groups)])).sum();
            *o = context(d, s.v_scales[c], s.p_inv_sums[r]);
        }
    }
}

#[cfg(target_arch = "x86_64")]
mod x86 {
    use super::{AttentionScratch, HeadShape, GROUP, PANEL, PANELS, ROWS};
    use crate::int8::{dots_block_avx512, dots_block_avxvnni};
    use std::arch::x86_64::*;

    /// One block's scores with AVX-512 VNNI: `rows` query rows by four
    /// 16-key panels at a time.
    #[target_feature(enable = "avx512f,avx512bw,avx512vnni")]
    pub(super) unsafe fn scores_avx512(shape: HeadShape, row0: usize, rows: usize, s: &mut AttentionScratch) {
        let panels = shape.len16() / PANEL;
        let mut max = [_mm512_set1_ps(f32::NEG_INFINITY); ROWS];
        let mut p = 0;
        while p < panels {
            let width = if p + PANELS <= panels { PANELS } else { 1 };
            match (rows, width) {
                (ROWS, PANELS) => scores_block_avx512::<ROWS, PANELS>(shape, row0, p, s, &mut max),
                (ROWS, _) => scores_block_avx512::<ROWS, 1>(shape, row0, p, s, &mut max),
                (_, PANELS) => scores_block_avx512::<1, PANELS>(shape, row0, p, s, &mut max),
                _ => scores_block_avx512::<1, 1>(shape, row0, p, s, &mut max),
            }
            p += width;
        }
        for (out, m) in s.row_max.iter_mut().zip(&max).take(rows) {
            *out = _mm512_reduce_max_ps(*m);
        }
    }

    #[target_feature(enable = "avx512f,avx512bw,avx512vnni")]
    #[inline]
    unsafe fn scores_block_avx512<const R: usize, const P: usize>(
        shape: HeadShape,
        row0: usize,
        p0: usize,
        s: &mut AttentionScratch,
        max: &mut [__m512; ROWS],
    ) {
        let (dq, len16) = (shape.dq(), shape.len16());
        let groups = dq / GROUP;
        let us: [*const u8; R] = std::array::from_fn(|r| s.q.as_ptr().add((row0 + r) * shape.q_width + shape.q_offset));
        let ks: [*const i8; P] = std::array::from_fn(|q| s.k.as_ptr().add((p0 + q) * groups * PANEL * GROUP));
        let acc = dots_block_avx512(us, ks, groups);
        // `score`'s operations in the same order.
        for (r, row) in acc.iter().enumerate() {
            let qs = _mm512_set1_ps(s.q_scales[row0 + r]);
            let qm = _mm512_set1_ps(s.q_mins[row0 + r]);
            for (q, a) in row.iter().enumerate() {
                let c0 = (p0 + q) * PANEL;
                let kw = _mm512_loadu_ps(s.k_weights.as_ptr().add(c0));
                let ks = _mm512_loadu_ps(s.k_sums.as_ptr().add(c0));
                let d = _mm512_add_ps(_mm512_mul_ps(qs, _mm512_cvtepi32_ps(*a)), _mm512_mul_ps(qm, ks));
                let score = _mm512_mul_ps(kw, d);
                _mm512_storeu_ps(s.scores.as_mut_ptr().add(r * len16 + c0), score);
                // The row's maximum over its real keys (padding keys score 0).
                let valid = shape.len.saturating_sub(c0).min(PANEL);
                let mask: __mmask16 = ((1u32 << valid) - 1) as __mmask16;
                max[r] = _mm512_mask_max_ps(max[r], mask, max[r], score);
            }
        }
    }

    /// One block's context rows with AVX-512 VNNI: `rows` rows by every
    /// 16-column panel of the head (two for a 32-wide head).
    #[target_feature(enable = "avx512f,avx512bw,avx512vnni")]
    pub(super) unsafe fn values_avx512(
        shape: HeadShape,
        row0: usize,
        rows: usize,
        ctx: &mut [f32],
        s: &AttentionScratch,
    ) {
        let panels = shape.dv() / PANEL;
        let mut p = 0;
        while p < panels {
            let width = if p + 2 <= panels { 2 } else { 1 };
            match (rows, width) {
                (ROWS, 2) => values_block_avx512::<ROWS, 2>(shape, row0, p, ctx, s),
                (ROWS, _) => values_block_avx512::<ROWS, 1>(shape, row0, p, ctx, s),
                (_, 2) => values_block_avx512::<1, 2>(shape, row0, p, ctx, s),
                _ => values_block_avx512::<1, 1>(shape, row0, p, ctx, s),
            }
            p += width;
        }
    }

    #[target_feature(enable = "avx512f,avx512bw,avx512vnni")]
    #[inline]
    unsafe fn values_block_avx512<const R: usize, const P: usize>(
        shape: HeadShape,
        row0: usize,
        p0: usize,
        ctx: &mut [f32],
        s: &AttentionScratch,
    ) {
        let len4 = shape.len4();
        let groups = len4 / GROUP;
        let ps: [*const u8; R] = std::array::from_fn(|r| s.p.as_ptr().add(r * len4));
        let vs: [*const i8; P] = std::array::from_fn(|q| s.v.as_ptr().add((p0 + q) * groups * PANEL * GROUP));
        let acc = dots_block_avx512(ps, vs, groups);
        // `context`'s operations in the same order.
        for (r, row) in acc.iter().enumerate() {
            let inv = _mm512_set1_ps(s.p_inv_sums[r]);
            for (q, a) in row.iter().enumerate() {
                let c0 = (p0 + q) * PANEL;
                let valid = shape.dh.saturating_sub(c0).min(PANEL);
                let mask: __mmask16 = ((1u32 << valid) - 1) as __mmask16;
                let vs = _mm512_loadu_ps(s.v_scales.as_ptr().add(c0));
                let o = _mm512_mul_ps(_mm512_mul_ps(_mm512_cvtepi32_ps(*a), vs), inv);
                _mm512_mask_storeu_ps(ctx.as_mut_ptr().add((row0 + r) * shape.ctx_stride + c0), mask, o);
            }
        }
    }

    /// `softmax_to_u8_portable` with 16 lanes: the same operations in the same order.
    #[target_feature(enable = "avx512f,avx512bw,avx512vl")]
    pub(super) unsafe fn softmax_to_u8_avx512(scores: &[f32], p_bytes: &mut [u8], max: f32) -> f32 {
        let n = scores.len();
        let full = n / 16;
        let tail_mask: __mmask16 = ((1u32 << (n % 16)) - 1) as __mmask16;
        let max = _mm512_set1_ps(max);
        let [c3, c2, c1] = super::EXP2_255.map(|c| _mm512_set1_ps(c));
        let (k255, half) = (_mm512_set1_ps(255.0), _mm512_set1_ps(0.5));
        let mut vsum = _mm512_setzero_si512();
        for c in 0..=full {
            let mask = if c < full { 0xffff } else { tail_mask };
            if mask == 0 {
                break;
            }
            let x = _mm512_maskz_loadu_ps(mask, scores.as_ptr().add(c * 16));
            // Not clamped at -10 as in `probability_u8`: below, both give 0
            // (here 2ⁿ is exact down to far smaller n, and 255 · 2⁻¹⁰ < 0.5).
            let t = _mm512_sub_ps(x, max);
            // Round to nearest, ties to even: the integer `probability_u8` gets by adding 1.5 · 2²³.
            let n = _mm512_roundscale_ps::<{ _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC }>(t);
            let f = _mm512_sub_ps(t, n);
            let p = _mm512_add_ps(_mm512_mul_ps(c3, f), c2);
            let p = _mm512_add_ps(_mm512_mul_ps(p, f), c1);
            let p = _mm512_add_ps(_mm512_mul_ps(p, f), k255);
            // p · 2ⁿ, exact (n in -10..=0; below, tiny or 0), as `probability_u8`'s multiplication by 2ⁿ.
            let y = _mm512_scalef_ps(p, n);
            let u = _mm512_maskz_cvttps_epi32(mask, _mm512_add_ps(y, half));
            vsum = _mm512_add_epi32(vsum, u);
            _mm_mask_storeu_epi8(p_bytes.as_mut_ptr().add(c * 16) as *mut i8, mask, _mm512_cvtepi32_epi8(u));
        }
        1.0 / _mm512_reduce_add_epi32(vsum) as f32
    }

    /// `quantize_keys` with 16 lanes, for a head width that is a multiple
    /// of 16: the same divisions, the same rounding (ties to even), the same bytes.
    #[target_feature(enable = "avx512f,avx512bw")]
    pub(super) unsafe fn quantize_keys_avx512(shape: HeadShape, k: &[f32], s: &mut AttentionScratch) {
        let (dh, dq) = (shape.dh, shape.dq());
        let (lo, hi) = (_mm512_set1_epi32(-127), _mm512_set1_epi32(127));
        for j in 0..shape.len {
            let row = k.as_ptr().add(j * shape.stride);
            let mut m = _mm512_setzero_ps();
            for c in (0..dh).step_by(PANEL) {
                m = _mm512_max_ps(m, _mm512_abs_ps(_mm512_loadu_ps(row.add(c))));
            }
            let t = super::symmetric_scale(_mm512_reduce_max_ps(m));
            let tv = _mm512_set1_ps(t);
            let mut sum = _mm512_setzero_si512();
            for c in (0..dh).step_by(PANEL) {
                let q = _mm512_cvtps_epi32(_mm512_div_ps(_mm512_loadu_ps(row.add(c)), tv));
                let q = _mm512_min_epi32(_mm512_max_epi32(q, lo), hi);
                sum = _mm512_add_epi32(sum, q);
                _mm_storeu_si128(s.rows.as_mut_ptr().add(j * dq + c) as *mut __m128i, _mm512_cvtepi32_epi8(q));
            }
            s.k_weights[j] = t * shape.scale * std::f32::consts::LOG2_E;
            s.k_sums[j] = _mm512_reduce_add_epi32(sum) as f32;
        }
    }

    /// `quantize_values` and the packing of V with 16 lanes, for a head
    /// width that is a multiple of 16 (the same bytes): four tokens of
    /// sixteen columns become one 64-byte block of the packed layout.
    #[target_feature(enable = "avx512f,avx512bw")]
    pub(super) unsafe fn quantize_values_avx512(shape: HeadShape, v: &[f32], s: &mut AttentionScratch) {
        let (len, dh) = (shape.len, shape.dh);
        let groups = shape.len4() / GROUP;
        let (lo, hi, byte) = (_mm512_set1_epi32(-127), _mm512_set1_epi32(127), _mm512_set1_epi32(0xff));
        let (k127, one, zero) = (_mm512_set1_ps(127.0), _mm512_set1_ps(1.0), _mm512_setzero_ps());
        for c in (0..dh).step_by(PANEL) {
            let mut m = _mm512_setzero_ps();
            for j in 0..len {
                m = _mm512_max_ps(m, _mm512_abs_ps(_mm512_loadu_ps(v.as_ptr().add(j * shape.stride + c))));
            }
            // `symmetric_scale` per lane: max / 127, or 1 where the column is all zero.
            let scale = _mm512_mask_blend_ps(_mm512_cmp_ps_mask::<_CMP_GT_OQ>(m, zero), one, _mm512_div_ps(m, k127));
            _mm512_storeu_ps(s.v_scales.as_mut_ptr().add(c), scale);
            for g in 0..groups {
                let mut block = _mm512_setzero_si512();
                for t in 0..GROUP.min(len - g * GROUP) {
                    let x = _mm512_loadu_ps(v.as_ptr().add((g * GROUP + t) * shape.stride + c));
                    let q = _mm512_cvtps_epi32(_mm512_div_ps(x, scale));
                    let q = _mm512_and_si512(_mm512_min_epi32(_mm512_max_epi32(q, lo), hi), byte);
                    block = _mm512_or_si512(block, _mm512_sllv_epi32(q, _mm512_set1_epi32(8 * t as i32)));
                }
                let at = (c / PANEL * groups + g) * PANEL * GROUP;
                _mm512_storeu_si512(s.v.as_mut_ptr().add(at) as *mut _, block);
            }
        }
    }

    /// `scores_avx512` on 256-bit registers: `rows` query rows by one
    /// 16-key panel (two halves) at a time.
    #[target_feature(enable = "avx2,avxvnni")]
    pub(super) unsafe fn scores_avxvnni(shape: HeadShape, row0: usize, rows: usize, s: &mut AttentionScratch) {
        for p in 0..shape.len16() / PANEL {
            match rows {
                ROWS => scores_block_avxvnni::<ROWS>(shape, row0, p, s),
                _ => scores_block_avxvnni::<1>(shape, row0, p, s),
            }
        }
    }

    #[target_feature(enable = "avx2,avxvnni")]
    #[inline]
    unsafe fn scores_block_avxvnni<const R: usize>(shape: HeadShape, row0: usize, p: usize, s: &mut AttentionScratch) {
        let (dq, len16) = (shape.dq(), shape.len16());
        let groups = dq / GROUP;
        let us: [*const u8; R] = std::array::from_fn(|r| s.q.as_ptr().add((row0 + r) * shape.q_width + shape.q_offset));
        let acc = dots_block_avxvnni(us, s.k.as_ptr().add(p * groups * PANEL * GROUP), groups);
        // `score`'s operations in the same order.
        for (r, halves) in acc.into_iter().enumerate() {
            let qs = _mm256_set1_ps(s.q_scales[row0 + r]);
            let qm = _mm256_set1_ps(s.q_mins[row0 + r]);
            for (half, a) in halves.into_iter().enumerate() {
                let c0 = p * PANEL + half * 8;
                let kw = _mm256_loadu_ps(s.k_weights.as_ptr().add(c0));
                let ks = _mm256_loadu_ps(s.k_sums.as_ptr().add(c0));
                let d = _mm256_add_ps(_mm256_mul_ps(qs, _mm256_cvtepi32_ps(a)), _mm256_mul_ps(qm, ks));
                _mm256_storeu_ps(s.scores.as_mut_ptr().add(r * len16 + c0), _mm256_mul_ps(kw, d));
            }
        }
    }

    /// `values_avx512` on 256-bit registers: `rows` rows by one 16-column
    /// panel (two halves) at a time; the last panel's columns past the head
    /// width are computed into a buffer and dropped.
    #[target_feature(enable = "avx2,avxvnni")]
    pub(super) unsafe fn values_avxvnni(
        shape: HeadShape,
        row0: usize,
        rows: usize,
        ctx: &mut [f32],
        s: &AttentionScratch,
    ) {
        for p in 0..shape.dv() / PANEL {
            match rows {
                ROWS => values_block_avxvnni::<ROWS>(shape, row0, p, ctx, s),
                _ => values_block_avxvnni::<1>(shape, row0, p, ctx, s),
            }
        }
    }

    #[target_feature(enable = "avx2,avxvnni")]
    #[inline]
    unsafe fn values_block_avxvnni<const R: usize>(
        shape: HeadShape,
        row0: usize,
        p: usize,
        ctx: &mut [f32],
        s: &AttentionScratch,
    ) {
        let len4 = shape.len4();
        let groups = len4 / GROUP;
        let ps: [*const u8; R] = std::array::from_fn(|r| s.p.as_ptr().add(r * len4));
        let acc = dots_block_avxvnni(ps, s.v.as_ptr().add(p * groups * PANEL * GROUP), groups);
        // `context`'s operations in the same order.
        for (r, halves) in acc.into_iter().enumerate() {
            let inv = _mm256_set1_ps(s.p_inv_sums[r]);
            let mut out = [0.0f32; PANEL];
            for (half, a) in halves.into_iter().enumerate() {
                let vs = _mm256_loadu_ps(s.v_scales.as_ptr().add(p * PANEL + half * 8));
                let o = _mm256_mul_ps(_mm256_mul_ps(_mm256_cvtepi32_ps(a), vs), inv);
                _mm256_storeu_ps(out.as_mut_ptr().add(half * 8), o);
            }
            let c0 = p * PANEL;
            let valid = shape.dh.saturating_sub(c0).min(PANEL);
            let at = (row0 + r) * shape.ctx_stride + c0;
            ctx[at..at + valid].copy_from_slice(&out[..valid]);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::int8::test_values as values;

    /// softmax(scale · Q Kᵀ) V in f64, one head.
    fn reference(shape: HeadShape, q: &[f32], k: &[f32], v: &[f32]) -> Vec<f32> {
        let (len, dh, st) = (shape.len, shape.dh, shape.stride);
        let mut out = vec![0.0; len * dh];
        for i in 0..len {
            let scores: Vec<f64> = (0..len)
                .map(|j| {
                    let d: f64 = (0..dh).map(|c| f64::from(q[i * st + c]) * f64::from(k[j * st + c])).sum();
                    d * f64::from(shape.scale)
                })
                .collect();
            let max = scores.iter().copied().fold(f64::NEG_INFINITY, f64::max);
            let e: Vec<f64> = scores.iter().map(|x| (x - max).exp()).collect();
            let sum: f64 = e.iter().sum();
            for c in 0..dh {
                out[i * dh + c] = ((0..len).map(|j| e[j] * f64::from(v[j * st + c])).sum::<f64>() / sum) as f32;
            }
        }
        out
    }

    #[test]
    fn probabilities_are_rounded_exponentials() {
        assert_eq!(probability_u8(0.0), 255);
        assert_eq!(probability_u8(-10.5), 0);
        assert_eq!(probability_u8(-100.0), 0);
        assert_eq!(probability_u8(f32::NEG_INFINITY), 0);
        for i in 0..=20_000 {
            let x = -(i as f32) * 1e-3;
            let want = 255.0 * f64::from(x).exp2();
            let got = f64::from(probability_u8(x));
            // A degree-3 polynomial: off by at most one step, and only next to a rounding boundary.
            assert!((got - want).abs() <= 0.5 + 255.0 * 1.1e-4, "x = {x}: {got} against {want}");
        }
    }

    #[test]
    fn kernels_agree_exactly_and_track_f64() {
        // Odd lengths and widths exercise the padding of keys, values and row blocks.
        for (len, dh) in [(1, 32), (3, 32), (7, 32), (37, 32), (254, 32), (13, 20), (9, 4), (5, 6)] {
            // Two heads side by side, as in a row of the fused QKV layer.
            let h = 2 * dh;
            let stride = 3 * h + 5;
            // Scores of a few units, as in a trained model's heads.
            let q = values(len * stride, 3 + len as u64, 2.0);
            let k = values(len * stride, 5 + dh as u64, 2.0);
            let v = values(len * stride, 7, 1.0);
            let ctx_stride = h + 3;
            let mut first: Option<Vec<f32>> = None;
            for kernel in Int8Kernel::available() {
                let mut worst = 0.0f32;
                let mut ctx = vec![f32::NAN; len * ctx_stride];
                let mut s = AttentionScratch::default();
                quantize_queries(kernel, &q, len, h, stride, &mut s);
                for head in 0..2 {
                    let (at, scale) = (head * dh, 1.0 / (dh as f32).sqrt());
                    let shape = HeadShape { len, dh, q_offset: at, q_width: h, stride, ctx_stride, scale };
                    let (kh, vh) = (&k[h + at..], &v[2 * h + at..]);
                    attention_head(kernel, shape, (kh, vh), &mut ctx[at..], &mut s);
                    let want = reference(shape, &q[at..], kh, vh);
                    for i in 0..len {
                        for c in 0..dh {
                            let (got, want) = (ctx[i * ctx_stride + at + c], want[i * dh + c]);
                            worst = worst.max((got - want).abs());
                            // Values are within ±1: the error of 8-bit operands is a few hundredths.
                            assert!(
                                (got - want).abs() < 0.05,
                                "{} {len}x{dh} [{i},{c}]: {got} vs {want}",
                                kernel.name()
                            );
                        }
                    }
                }
                for i in 0..len {
                    let pad = &ctx[i * ctx_stride + h..((i + 1) * ctx_stride).min(ctx.len())];
                    assert!(pad.iter().all(|x| x.is_nan()), "wrote past the heads");
                }
                eprintln!("{} {len}x{dh}: max error {worst}", kernel.name());
                match &first {
                    None => first = Some(ctx),
                    Some(f) => {
                        let same = f.iter().zip(&ctx).all(|(a, b)| a.to_bits() == b.to_bits());
                        assert!(same, "{} differs from the first kernel for {len}x{dh}", kernel.name());
                    }
                }
            }
        }
    }
}
