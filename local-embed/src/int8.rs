//! Dynamic int8 quantization of the dense layers: int8 weights with one
//! scale per output channel (fixed at load), 8-bit activations with one
//! scale and offset per row (token), computed for every product. The integer
//! dot products are exact, so every kernel path gives bit-identical results;
//! the f32 epilogue is shared code.
//!
//! Kernel paths, chosen at run time: AMX (`tdpbusd` on 16 × 64-byte tiles,
//! 16,384 multiply-adds per instruction; the dense layers only, the rest as
//! AVX-512 VNNI), AVX-512 VNNI (`vpdpbusd` on 512-bit registers, 64
//! multiply-adds per instruction), AVX-VNNI (the same on 256-bit
//! registers), and a portable loop (compiled for AVX2 when the CPU has it,
//! else the baseline) for every other CPU.
//!
//! `vpdpbusd` multiplies unsigned by signed bytes, which suits asymmetric
//! activations: a row is stored as `x ≈ min + s·u` with `u` in 0..=255 (all
//! 256 levels between the row's minimum and maximum, which matters for the
//! GELU outputs, almost all positive), so that
//! `Σ x·w ≈ s_w · (s · Σ u·q + min · Σ q)` with the per-channel weight sums
//! `Σ q` kept from load. Sums stay far inside i32 (1536 · 255 · 127 < 2^26)
//! and `vpdpbusd` does not saturate.

use anyhow::Result;

use crate::buf::Buf;
use crate::weight_cache::{Arrays, Reader};

#[cfg(all(target_arch = "x86_64", target_os = "linux"))]
mod amx;

/// Columns (output channels) per packed panel: one 512-bit register of i32.
pub(crate) const PANEL: usize = 16;
/// Bytes of one input row that `vpdpbusd` sums into one lane.
pub(crate) const GROUP: usize = 4;
/// Rows per register block of the SIMD kernels.
const ROWS: usize = 4;
/// Panels per register block of the AVX-512 kernel.
const PANELS: usize = 4;
/// Steps of four inputs per chunk of the AVX-512 kernel: four panels of
/// 128 steps are 32 KB, to stay in a 48 KB L1 with the rows' bytes.
const K_CHUNK: usize = 128;

/// Which integer kernel computes the products.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Int8Kernel {
    /// AMX tiles for the dense layers, AVX-512 VNNI for attention and the
    /// quantization around them.
    Amx,
    Avx512Vnni,
    AvxVnni,
    Portable,
}

impl Int8Kernel {
    /// The fastest kernel this CPU runs.
    pub fn best() -> Int8Kernel {
        Self::available().into_iter().next().unwrap_or(Int8Kernel::Portable)
    }

    /// Every kernel this CPU runs, fastest first (always ends with `Portable`).
    pub fn available() -> Vec<Int8Kernel> {
        let mut out = Vec::new();
        #[cfg(target_arch = "x86_64")]
        {
            if std::arch::is_x86_feature_detected!("avx512f")
                && std::arch::is_x86_feature_detected!("avx512bw")
                && std::arch::is_x86_feature_detected!("avx512vnni")
            {
                #[cfg(target_os = "linux")]
                if amx::ready() {
                    out.push(Int8Kernel::Amx);
                }
                out.push(Int8Kernel::Avx512Vnni);
            }
            if std::arch::is_x86_feature_detected!("avx2") && std::arch::is_x86_feature_detected!("avxvnni") {
                out.push(Int8Kernel::AvxVnni);
            }
        }
        out.push(Int8Kernel::Portable);
        out
    }

    /// True when the CPU has int8 dot-product instructions (then int8 is
    /// faster than f32; the portable loop is not).
    pub fn is_hardware(self) -> bool {
        self != Int8Kernel::Portable
    }

    /// True when the kernel runs attention and quantization on AVX-512
    /// VNNI (AMX does only the dense layers' products).
    pub(crate) fn is_avx512(self) -> bool {
        matches!(self, Int8Kernel::Amx | Int8Kernel::Avx512Vnni)
    }

    pub fn name(self) -> &'static str {
        match self {
            Int8Kernel::Amx => "amx",
            Int8Kernel::Avx512Vnni => "avx512vnni",
            Int8Kernel::AvxVnni => "avxvnni",
            Int8Kernel::Portable => "portable",
        }
    }
}

/// A dense layer with int8 weights, packed for the kernels:
/// `[n_out / 16][n_in / 4][16][4]` (padded with zeros), so that one 64-byte
/// load holds four consecutive inputs of sixteen output channels.
pub struct QuantLinear {
    n_in: usize,
    n_out: usize,
    /// `n_in` rounded up to a multiple of 4.
    k_pad: usize,
    /// `n_out` rounded up to a multiple of 16.
    n_pad: usize,
    packed: Buf<i8>,
    /// Per output channel: the weight scale and Σ_k q (for the row minima).
    scales: Buf<f32>,
    col_sums: Buf<f32>,
    bias: Buf<f32>,
}

/// A function applied to each input row before its quantization
/// (`forward_mapped`): `(row, out)`, both `n_in` long.
pub type RowMap = fn(&[f32], &mut [f32]);

/// Reused buffers for one quantized product: the quantized activations,
/// their row scales and minima, and the integer results.
#[derive(Default)]
pub struct QuantScratch {
    x: Vec<u8>,
    /// One row of `forward_mapped`'s mapped input.
    mapped: Vec<f32>,
    row_scales: Vec<f32>,
    row_mins: Vec<f32>,
    dots: Vec<i32>,
}

impl QuantLinear {
    /// Quantizes `w` (`[n_out, n_in]`, row-major, PyTorch's layout): each
    /// output channel gets scale `max |w| / 127`. The weight cache keeps
    /// these bytes: a change here or in the packing needs a new
    /// `weight_cache::FORMAT_VERSION`.
    pub fn new(w: &[f32], b: &[f32], n_in: usize, n_out: usize) -> QuantLinear {
        assert_eq!(w.len(), n_in * n_out);
        assert_eq!(b.len(), n_out);
        let k_pad = n_in.next_multiple_of(GROUP);
        let n_pad = n_out.next_multiple_of(PANEL);
        let mut packed = vec![0i8; k_pad * n_pad];
        let mut scales = vec![0.0f32; n_pad];
        let mut col_sums = vec![0.0f32; n_pad];
        let groups = k_pad / GROUP;
        let mut q_row = vec![0i8; n_in];
        for j in 0..n_out {
            let row = &w[j * n_in..(j + 1) * n_in];
            let scale = symmetric_scale(max_abs(row));
            scales[j] = scale;
            // The row's bytes first (a loop the compiler vectorises), then
            // their places in the panel; the sum in integers, which is
            // exact in f32 too (|Σ q| ≤ 127 · n_in < 2²⁴).
            for (q, &v) in q_row.iter_mut().zip(row) {
                *q = round_half_away(v / scale).clamp(-127.0, 127.0) as i8;
            }
            col_sums[j] = q_row.iter().map(|&q| i32::from(q)).sum::<i32>() as f32;
            for (k, &q) in q_row.iter().enumerate() {
                packed[packed_index(j, k, groups)] = q;
            }
        }
        let mut bias = b.to_vec();
        bias.resize(n_pad, 0.0);
        let (packed, scales, col_sums, bias) = (packed.into(), scales.into(), col_sums.into(), bias.into());
        QuantLinear { n_in, n_out, k_pad, n_pad, packed, scales, col_sums, bias }
    }

    /// The prepared arrays, for the weight cache.
    pub(crate) fn arrays<'a>(&'a self, out: &mut Arrays<'a>) {
        out.push(&self.packed);
        out.push(&self.scales);
        out.push(&self.col_sums);
        out.push(&self.bias);
    }

    /// The layer as `arrays` stored it.
    pub(crate) fn read(r: &mut Reader, n_in: usize, n_out: usize) -> Result<QuantLinear> {
        let (k_pad, n_pad) = (n_in.next_multiple_of(GROUP), n_out.next_multiple_of(PANEL));
        let packed = r.take(k_pad * n_pad)?;
        let (scales, col_sums, bias) = (r.take(n_pad)?, r.take(n_pad)?, r.take(n_pad)?);
        Ok(QuantLinear { n_in, n_out, k_pad, n_pad, packed, scales, col_sums, bias })
    }

    /// `out[n, n_out] = x[n, n_in] · Wᵀ + b` with `x` quantized per row.
    pub fn forward(&self, kernel: Int8Kernel, x: &[f32], n: usize, out: &mut [f32], s: &mut QuantScratch) {
        self.forward_mapped(kernel, x, None, n, out, s)
    }

    /// `forward` of `map(x)`, `map` applied row by row into a buffer just
    /// before the row's quantization: the mapped matrix (GELU's output, the
    /// widest) is never written out and read back; the bytes are the same.
    pub fn forward_mapped(
        &self,
        kernel: Int8Kernel,
        x: &[f32],
        map: Option<RowMap>,
        n: usize,
        out: &mut [f32],
        s: &mut QuantScratch,
    ) {
        debug_assert_eq!(x.len(), n * self.n_in);
        debug_assert_eq!(out.len(), n * self.n_out);
        #[cfg(all(target_arch = "x86_64", target_os = "linux"))]
        if kernel == Int8Kernel::Amx && self.k_pad.is_multiple_of(amx::K_STEP) {
            // Whole tiles of rows: the padding rows' sums are computed and never read.
            self.quantize_rows(kernel, x, map, n, n.next_multiple_of(amx::TILE_ROWS), s);
            // SAFETY: `Int8Kernel::available` offers AMX only when `amx::ready`; `s.x`
            // holds the padded rows.
            return unsafe { amx::forward(self, &s.x, &s.row_scales, &s.row_mins, n, out) };
        }
        self.quantize_rows(kernel, x, map, n, n, s);
        #[cfg(target_arch = "x86_64")]
        if kernel.is_avx512() {
            // SAFETY: `Int8Kernel::available` only offers the VNNI kernels on CPUs that have them.
            return unsafe { x86::forward_avx512(self, s, n, out) };
        }
        // Every element is written by the kernels: grow, never clear.
        if s.dots.len() < n * self.n_pad {
            s.dots.resize(n * self.n_pad, 0);
        }
        match kernel {
            #[cfg(target_arch = "x86_64")]
            // SAFETY: as above.
            Int8Kernel::AvxVnni => unsafe { x86::dots_avxvnni(self, &s.x, n, &mut s.dots) },
            _ => dots_portable(self, &s.x, n, &mut s.dots),
        }
        epilogue(self, s, out);
    }

    /// Per row: `x ≈ min + s·u`, `s = (max - min) / 255`, `u` rounded to
    /// 0..=255; padding columns meet zero weights, so their value is moot.
    /// Every path does the same IEEE operations (min, max, sub, mul, add,
    /// clamp, truncate), so the bytes are identical. `s.x` holds `rows ≥ n`
    /// rows; those past `n` keep whatever bytes they had.
    fn quantize_rows(
        &self,
        kernel: Int8Kernel,
        x: &[f32],
        map: Option<RowMap>,
        n: usize,
        rows: usize,
        s: &mut QuantScratch,
    ) {
        // No clearing: every byte a kernel reads is written below, except
        // the padding columns, which meet zero weights, and padding rows,
        // whose sums are not read.
        s.x.resize(rows * self.k_pad, 0);
        s.row_scales.resize(n, 0.0);
        s.row_mins.resize(n, 0.0);
        s.mapped.resize(if map.is_some() { self.n_in } else { 0 }, 0.0);
        let rows = x.chunks_exact(self.n_in).zip(s.x.chunks_exact_mut(self.k_pad));
        for ((row, q), (scale, min)) in rows.zip(s.row_scales.iter_mut().zip(s.row_mins.iter_mut())) {
            let row = match map {
                Some(map) => {
                    map(row, &mut s.mapped);
                    &s.mapped[..]
                }
                None => row,
            };
            (*scale, *min) = quantize_row_with(kernel, row, q);
        }
    }
}

/// `x.round()` (half away from zero) for |x| < 2²³, without the libm call
/// `f32::round` is on baseline x86-64 (it was a tenth of the model's load):
/// truncate, then step away from zero when the dropped fraction (exact) is
/// at least one half.
#[inline(always)]
fn round_half_away(x: f32) -> f32 {
    let t = x as i32 as f32;
    let fraction = x - t;
    if fraction >= 0.5 {
        t + 1.0
    } else if fraction <= -0.5 {
        t - 1.0
    } else {
        t
    }
}

/// A row's scale and minimum: `s = (max - min) / 255` (1 for a constant row).
#[inline(always)]
fn row_scale(lo: f32, hi: f32) -> f32 {
    if hi > lo {
        (hi - lo) / 255.0
    } else {
        1.0
    }
}

/// `u = trunc(clamp((v - min) / s + 0.5, 0, 255))`: non-negative, so
/// adding 0.5 and truncating rounds to nearest; NaN becomes 0.
#[inline(always)]
fn quantize_value(v: f32, lo: f32, inv: f32) -> u8 {
    let t = (v - lo) * inv + 0.5;
    let t = if t > 0.0 { t } else { 0.0 };
    (if t < 255.0 { t } else { 255.0 }) as u8
}

/// Index of element (row `r`, column `c`) of a matrix packed for the
/// kernels as `[rows / 16][cols / 4][16][4]`, `groups = cols / 4`: the
/// weights' layout here and the keys' and values' in `attention`.
#[inline(always)]
pub(crate) fn packed_index(r: usize, c: usize, groups: usize) -> usize {
    ((r / PANEL * groups + c / GROUP) * PANEL + r % PANEL) * GROUP + c % GROUP
}

/// Scale of a symmetric int8 row or column: `max |x| / 127` (1 when all zero).
#[inline(always)]
pub(crate) fn symmetric_scale(max_abs: f32) -> f32 {
    if max_abs > 0.0 {
        max_abs / 127.0
    } else {
        1.0
    }
}

/// Largest |x| of a row, in sixteen lanes (vectorises; max is exact, so the order is moot).
#[inline(always)]
pub(crate) fn max_abs(row: &[f32]) -> f32 {
    let mut m = [0.0f32; 16];
    let chunks = row.chunks_exact(16);
    let tail = chunks.remainder().iter().fold(0.0f32, |a, x| a.max(x.abs()));
    for c in chunks {
        for l in 0..16 {
            m[l] = m[l].max(c[l].abs());
        }
    }
    m.iter().copied().fold(tail, f32::max)
}

/// `quantize_row` on the kernel's SIMD path (the same bytes).
pub(crate) fn quantize_row_with(kernel: Int8Kernel, row: &[f32], q: &mut [u8]) -> (f32, f32) {
    match kernel {
        // SAFETY: the CPU has AVX-512 (the kernel is only offered then).
        #[cfg(target_arch = "x86_64")]
        Int8Kernel::Avx512Vnni | Int8Kernel::Amx => unsafe { x86::quantize_row_avx512(row, q) },
        _ => quantize_row(row, q),
    }
}

/// One row into `q`; returns its scale and minimum.
#[inline(always)]
fn quantize_row(row: &[f32], q: &mut [u8]) -> (f32, f32) {
    let (lo, hi) = row.iter().fold((f32::INFINITY, f32::NEG_INFINITY), |(l, h), &v| (l.min(v), h.max(v)));
    let s = row_scale(lo, hi);
    let inv = 1.0 / s;
    for (q, &v) in q.iter_mut().zip(row) {
        *q = quantize_value(v, lo, inv);
    }
    (s, lo)
}

multiversion! {
    /// `out = s_w · (s · Σu·q + min · Σq) + b` per row and channel.
    fn epilogue(l: &QuantLinear, s: &QuantScratch, out: &mut [f32]) {
        let (scales, col_sums, bias) = (&l.scales[..l.n_out], &l.col_sums[..l.n_out], &l.bias[..l.n_out]);
        for (((out_row, dot_row), &rs), &rm) in
            out.chunks_exact_mut(l.n_out).zip(s.dots.chunks_exact(l.n_pad)).zip(&s.row_scales).zip(&s.row_mins)
        {
            let channels = scales.iter().zip(col_sums).zip(bias);
            for ((o, &d), ((&sw, &cs), &b)) in out_row.iter_mut().zip(&dot_row[..l.n_out]).zip(channels) {
                *o = sw * (rs * d as f32 + rm * cs) + b;
            }
        }
    }
}

/// The reference loop: the same sums Σ u·q as the VNNI kernels, in plain integer
/// arithmetic (vectorised by the compiler for AVX2 when available).
fn dots_portable(l: &QuantLinear, x: &[u8], n: usize, dots: &mut [i32]) {
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("avx2") {
        #[target_feature(enable = "avx2")]
        unsafe fn avx2(l: &QuantLinear, x: &[u8], n: usize, dots: &mut [i32]) {
            dots_loop(l, x, n, dots)
        }
        // SAFETY: the CPU has AVX2.
        return unsafe { avx2(l, x, n, dots) };
    }
    dots_loop(l, x, n, dots)
}

#[inline(always)]
fn dots_loop(l: &QuantLinear, x: &[u8], n: usize, dots: &mut [i32]) {
    let groups = l.k_pad / GROUP;
    for i in 0..n {
        let xr = &x[i * l.k_pad..(i + 1) * l.k_pad];
        for p in 0..l.n_pad / PANEL {
            let mut acc = [0i32; PANEL];
            let panel = &l.packed[p * groups * PANEL * GROUP..(p + 1) * groups * PANEL * GROUP];
            for (g, w) in panel.chunks_exact(PANEL * GROUP).enumerate() {
                let xg = &xr[g * GROUP..(g + 1) * GROUP];
                for (lane, wl) in acc.iter_mut().zip(w.chunks_exact(GROUP)) {
                    for t in 0..GROUP {
                        *lane += i32::from(xg[t]) * i32::from(wl[t]);
                    }
                }
            }
            dots[i * l.n_pad + p * PANEL..i * l.n_pad + (p + 1) * PANEL].copy_from_slice(&acc);
        }
    }
}

#[cfg(target_arch = "x86_64")]
pub(crate) use x86::{dots_block_avx512, dots_block_avxvnni};

#[cfg(target_arch = "x86_64")]
mod x86 {
    use super::{QuantLinear, QuantScratch, GROUP, K_CHUNK, PANEL, PANELS, ROWS};
    use std::arch::x86_64::*;

    /// The whole product with AVX-512 VNNI: blocks of four rows by four
    /// 16-channel panels (16 accumulators; per step of four inputs, four
    /// weight loads and four broadcasts feed 16 `vpdpbusd`), each block's
    /// epilogue applied in registers (no buffer of integer sums, which for
    /// the wide layers would not stay in cache). Long inputs run in chunks of
    /// `K_CHUNK` steps, every row block through one chunk before the next:
    /// four panels of a whole 1,536-input row are 96 KB, which every row block
    /// read again from L2; a chunk's 32 KB stays in L1. Between chunks the
    /// sums wait in `s.dots` (integer sums: the order of the chunks does not
    /// change a bit).
    #[target_feature(enable = "avx512f,avx512bw,avx512vnni")]
    pub(super) unsafe fn forward_avx512(l: &QuantLinear, s: &mut QuantScratch, n: usize, out: &mut [f32]) {
        let panels = l.n_pad / PANEL;
        let groups = l.k_pad / GROUP;
        if groups > K_CHUNK && s.dots.len() < n * PANELS * PANEL {
            s.dots.resize(n * PANELS * PANEL, 0);
        }
        let QuantScratch { x, row_scales, row_mins, dots, .. } = s;
        let rows_in = Quantized { x, scales: row_scales, mins: row_mins };
        let mut p = 0;
        while p < panels {
            let width = if p + PANELS <= panels { PANELS } else { 1 };
            let mut g0 = 0;
            while g0 < groups {
                let steps = (g0, (g0 + K_CHUNK).min(groups));
                let mut i = 0;
                while i < n {
                    let rows = if i + ROWS <= n { ROWS } else { 1 };
                    match (rows, width) {
                        (ROWS, PANELS) => block_avx512::<ROWS, PANELS>(l, &rows_in, (i, p), steps, dots, out),
                        (ROWS, _) => block_avx512::<ROWS, 1>(l, &rows_in, (i, p), steps, dots, out),
                        (_, PANELS) => block_avx512::<1, PANELS>(l, &rows_in, (i, p), steps, dots, out),
                        _ => block_avx512::<1, 1>(l, &rows_in, (i, p), steps, dots, out),
                    }
                    i += rows;
                }
                g0 = steps.1;
            }
            p += width;
        }
    }

    /// `Σ u·w` of `R` u8 rows by `P` packed 16-column panels
    /// (`[groups][16][4]` each) over `groups` steps of four bytes: per step,
    /// `P` panel loads and `R` broadcasts feed `R·P` `vpdpbusd` into as many
    /// accumulators. The dense layers' and attention's products share it.
    #[target_feature(enable = "avx512f,avx512bw,avx512vnni")]
    #[inline]
    pub(crate) unsafe fn dots_block_avx512<const R: usize, const P: usize>(
        rows: [*const u8; R],
        panels: [*const i8; P],
        groups: usize,
    ) -> [[__m512i; P]; R] {
        dots_add_avx512([[_mm512_setzero_si512(); P]; R], rows, panels, groups)
    }

    /// `dots_block_avx512` added to the sums in `acc`.
    #[target_feature(enable = "avx512f,avx512bw,avx512vnni")]
    #[inline]
    unsafe fn dots_add_avx512<const R: usize, const P: usize>(
        mut acc: [[__m512i; P]; R],
        rows: [*const u8; R],
        panels: [*const i8; P],
        groups: usize,
    ) -> [[__m512i; P]; R] {
        for g in 0..groups {
            let wv: [__m512i; P] =
                std::array::from_fn(|q| _mm512_loadu_si512(panels[q].add(g * PANEL * GROUP) as *const _));
            for r in 0..R {
                let xv = _mm512_set1_epi32(std::ptr::read_unaligned(rows[r].add(g * GROUP) as *const i32));
                for q in 0..P {
                    acc[r][q] = _mm512_dpbusd_epi32(acc[r][q], xv, wv[q]);
                }
            }
        }
        acc
    }

    /// The quantized rows of one product, their scales and minima.
    struct Quantized<'a> {
        x: &'a [u8],
        scales: &'a [f32],
        mins: &'a [f32],
    }

    /// One block (rows from `row0`, panels from `p0`) over the steps
    /// `g0..g1`: its sums start from zero at the first step, or from `dots`
    /// (`[n][PANELS · 16]`, sized by `forward_avx512` when it chunks); they
    /// go back there unless the block reached the last step, where the
    /// epilogue writes `out`.
    #[target_feature(enable = "avx512f,avx512bw,avx512vnni")]
    #[inline]
    unsafe fn block_avx512<const R: usize, const P: usize>(
        l: &QuantLinear,
        s: &Quantized,
        (row0, p0): (usize, usize),
        (g0, g1): (usize, usize),
        dots: &mut [i32],
        out: &mut [f32],
    ) {
        let groups = l.k_pad / GROUP;
        let xs: [*const u8; R] = std::array::from_fn(|r| s.x.as_ptr().add((row0 + r) * l.k_pad + g0 * GROUP));
        let ws: [*const i8; P] =
            std::array::from_fn(|q| l.packed.as_ptr().add(((p0 + q) * groups + g0) * PANEL * GROUP));
        let partial = |r: usize, q: usize| (row0 + r) * PANELS * PANEL + q * PANEL;
        let acc = if g0 == 0 {
            dots_block_avx512(xs, ws, g1 - g0)
        } else {
            let acc = std::array::from_fn(|r| {
                std::array::from_fn(|q| _mm512_loadu_si512(dots[partial(r, q)..][..PANEL].as_ptr() as *const _))
            });
            dots_add_avx512(acc, xs, ws, g1 - g0)
        };
        if g1 < groups {
            for (r, row) in acc.iter().enumerate() {
                for (q, a) in row.iter().enumerate() {
                    _mm512_storeu_si512(dots[partial(r, q)..][..PANEL].as_mut_ptr() as *mut _, *a);
                }
            }
            return;
        }
        // `epilogue`'s operations in the same order: sw · (rs · d + rm · cs) + b.
        for (r, row) in acc.iter().enumerate() {
            let rs = _mm512_set1_ps(s.scales[row0 + r]);
            let rm = _mm512_set1_ps(s.mins[row0 + r]);
            for (q, a) in row.iter().enumerate() {
                let c0 = (p0 + q) * PANEL;
                let valid = l.n_out.saturating_sub(c0).min(PANEL);
                let mask: __mmask16 = ((1u32 << valid) - 1) as __mmask16;
                let sw = _mm512_loadu_ps(l.scales.as_ptr().add(c0));
                let cs = _mm512_loadu_ps(l.col_sums.as_ptr().add(c0));
                let b = _mm512_loadu_ps(l.bias.as_ptr().add(c0));
                let d = _mm512_cvtepi32_ps(*a);
                let row_dot = _mm512_add_ps(_mm512_mul_ps(rs, d), _mm512_mul_ps(rm, cs));
                let o = _mm512_add_ps(_mm512_mul_ps(sw, row_dot), b);
                _mm512_mask_storeu_ps(out.as_mut_ptr().add((row0 + r) * l.n_out + c0), mask, o);
            }
        }
    }

    /// `quantize_row` with 16 lanes (the same operations, the same bytes).
    #[target_feature(enable = "avx512f,avx512bw")]
    pub(crate) unsafe fn quantize_row_avx512(row: &[f32], q: &mut [u8]) -> (f32, f32) {
        let chunks = row.len() / 16;
        // Four minima and maxima in flight: one of each waited on the
        // latency of the last `vminps` at every step. The order of min and
        // max does not change their value for finite inputs (a zero's sign
        // may differ, which no byte, scale or output depends on).
        let p = row.as_ptr();
        let mut lo = [_mm512_set1_ps(f32::INFINITY); 4];
        let mut hi = [_mm512_set1_ps(f32::NEG_INFINITY); 4];
        let mut c = 0;
        while c + 4 <= chunks {
            for (j, (lo, hi)) in lo.iter_mut().zip(&mut hi).enumerate() {
                let v = _mm512_loadu_ps(p.add((c + j) * 16));
                (*lo, *hi) = (_mm512_min_ps(*lo, v), _mm512_max_ps(*hi, v));
            }
            c += 4;
        }
        for c in c..chunks {
            let v = _mm512_loadu_ps(p.add(c * 16));
            (lo[0], hi[0]) = (_mm512_min_ps(lo[0], v), _mm512_max_ps(hi[0], v));
        }
        let vlo = _mm512_min_ps(_mm512_min_ps(lo[0], lo[1]), _mm512_min_ps(lo[2], lo[3]));
        let vhi = _mm512_max_ps(_mm512_max_ps(hi[0], hi[1]), _mm512_max_ps(hi[2], hi[3]));
        let (mut lo, mut hi) = (_mm512_reduce_min_ps(vlo), _mm512_reduce_max_ps(vhi));
        for &v in &row[chunks * 16..] {
            (lo, hi) = (lo.min(v), hi.max(v));
        }
        let s = super::row_scale(lo, hi);
        let inv = 1.0 / s;
        let (vlo, vinv) = (_mm512_set1_ps(lo), _mm512_set1_ps(inv));
        let (half, zero, top) = (_mm512_set1_ps(0.5), _mm512_setzero_ps(), _mm512_set1_ps(255.0));
        for c in 0..chunks {
            let v = _mm512_loadu_ps(row.as_ptr().add(c * 16));
            let t = _mm512_add_ps(_mm512_mul_ps(_mm512_sub_ps(v, vlo), vinv), half);
            // max(t, 0) then min(·, 255), NaN to 0 as in `quantize_value`.
            let t = _mm512_min_ps(_mm512_max_ps(t, zero), top);
            let u = _mm512_cvtepi32_epi8(_mm512_cvttps_epi32(t));
            _mm_storeu_si128(q.as_mut_ptr().add(c * 16) as *mut __m128i, u);
        }
        for (q, &v) in q[chunks * 16..].iter_mut().zip(&row[chunks * 16..]) {
            *q = super::quantize_value(v, lo, inv);
        }
        (s, lo)
    }

    /// Σ u·q for every row and output channel with AVX-VNNI on 256-bit
    /// registers: blocks of four rows by one panel (two halves).
    #[target_feature(enable = "avx2,avxvnni")]
    pub(super) unsafe fn dots_avxvnni(l: &QuantLinear, x: &[u8], n: usize, dots: &mut [i32]) {
        let groups = l.k_pad / GROUP;
        for p in 0..l.n_pad / PANEL {
            let w = l.packed.as_ptr().add(p * groups * PANEL * GROUP);
            let mut i = 0;
            while i + ROWS <= n {
                block_avxvnni::<ROWS>(l, x, i, w, groups, p, dots);
                i += ROWS;
            }
            while i < n {
                block_avxvnni::<1>(l, x, i, w, groups, p, dots);
                i += 1;
            }
        }
    }

    #[target_feature(enable = "avx2,avxvnni")]
    #[inline]
    unsafe fn block_avxvnni<const R: usize>(
        l: &QuantLinear,
        x: &[u8],
        row0: usize,
        w: *const i8,
        groups: usize,
        p: usize,
        dots: &mut [i32],
    ) {
        let xs: [*const u8; R] = std::array::from_fn(|r| x.as_ptr().add((row0 + r) * l.k_pad));
        for (r, [lo, hi]) in dots_block_avxvnni(xs, w, groups).into_iter().enumerate() {
            let out = dots.as_mut_ptr().add((row0 + r) * l.n_pad + p * PANEL);
            _mm256_storeu_si256(out as *mut __m256i, lo);
            _mm256_storeu_si256(out.add(8) as *mut __m256i, hi);
        }
    }

    /// `Σ u·w` of `R` u8 rows by one packed 16-column panel
    /// (`[groups][16][4]`) over `groups` steps of four bytes with AVX-VNNI on
    /// 256-bit registers: per step, the panel's two halves and `R`
    /// broadcasts feed `2·R` `vpdpbusd`; per row, the sums of columns 0..8
    /// and 8..16. The dense layers' and attention's products share it.
    #[target_feature(enable = "avx2,avxvnni")]
    #[inline]
    pub(crate) unsafe fn dots_block_avxvnni<const R: usize>(
        rows: [*const u8; R],
        panel: *const i8,
        groups: usize,
    ) -> [[__m256i; 2]; R] {
        let mut acc = [[_mm256_setzero_si256(); 2]; R];
        for g in 0..groups {
            let wp = panel.add(g * PANEL * GROUP);
            let wl = _mm256_loadu_si256(wp as *const __m256i);
            let wh = _mm256_loadu_si256(wp.add(32) as *const __m256i);
            for r in 0..R {
                let xv = _mm256_set1_epi32(std::ptr::read_unaligned(rows[r].add(g * GROUP) as *const i32));
                acc[r][0] = _mm256_dpbusd_avx_epi32(acc[r][0], xv, wl);
                acc[r][1] = _mm256_dpbusd_avx_epi32(acc[r][1], xv, wh);
            }
        }
        acc
    }
}

/// Deterministic pseudo-random values in [-amp, amp) (xorshift), for the kernels' tests here and in
/// `attention`.
#[cfg(test)]
pub(crate) fn test_values(n: usize, seed: u64, amp: f32) -> Vec<f32> {
    let mut s = seed.max(1);
    (0..n)
        .map(|_| {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            ((s >> 40) as f32 / (1u64 << 23) as f32 - 1.0) * amp
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn values(n: usize, seed: u64) -> Vec<f32> {
        test_values(n, seed, 1.0)
    }

    fn f32_linear(w: &[f32], b: &[f32], x: &[f32], n_in: usize, n_out: usize) -> Vec<f32> {
        let n = x.len() / n_in;
        let mut out = vec![0.0; n * n_out];
        for i in 0..n {
            for j in 0..n_out {
                let dot: f64 = (0..n_in).map(|k| f64::from(x[i * n_in + k]) * f64::from(w[j * n_in + k])).sum();
                out[i * n_out + j] = dot as f32 + b[j];
            }
        }
        out
    }

    #[test]
    fn kernels_agree_exactly_and_track_f32() {
        // Odd sizes exercise the padding of inputs, channels and row blocks;
        // inputs past `K_CHUNK` steps the AVX-512 kernel's chunks (1,100: two
        // whole and a short one, with a block of four panels and a lone one).
        // 37 × 448 × 80 on AMX: a block of 32 rows and one of 16 (padded), two
        // pairs of panels and a lone one.
        for (n, n_in, n_out) in
            [(7, 384, 48), (5, 37, 21), (1, 4, 16), (9, 1536, 32), (6, 1100, 80), (37, 448, 80), (64, 1536, 384)]
        {
            let w = values(n_in * n_out, 7 + n_in as u64);
            let b = values(n_out, 11);
            let x = values(n * n_in, 13 + n as u64);
            let q = QuantLinear::new(&w, &b, n_in, n_out);
            let want = f32_linear(&w, &b, &x, n_in, n_out);
            let mut reference: Option<Vec<f32>> = None;
            for kernel in Int8Kernel::available() {
                let mut out = vec![0.0; n * n_out];
                q.forward(kernel, &x, n, &mut out, &mut QuantScratch::default());
                match &reference {
                    None => reference = Some(out.clone()),
                    Some(r) => assert_eq!(r, &out, "{} differs from the first kernel", kernel.name()),
                }
                // int8 rounding error: about sqrt(n_in) · (1/127)² relative to the typical |dot|.
                let worst = want.iter().zip(&out).map(|(a, b)| (a - b).abs()).fold(0.0f32, f32::max);
                let bound = 0.02 * (n_in as f32).sqrt();
                assert!(worst < bound, "{}: max error {worst} for {n}x{n_in}x{n_out}", kernel.name());
            }
        }
    }

    /// The mapped product equals the product of the mapped matrix, bit for
    /// bit, on every kernel.
    #[test]
    fn mapped_rows_equal_mapping_first() {
        fn shifted_square(x: &[f32], out: &mut [f32]) {
            for (o, &x) in out.iter_mut().zip(x) {
                *o = x * x - 0.3;
            }
        }
        let (n, n_in, n_out) = (6, 1100, 80);
        let q = QuantLinear::new(&values(n_in * n_out, 3), &values(n_out, 5), n_in, n_out);
        let x = values(n * n_in, 17);
        let mut mapped = vec![0.0; x.len()];
        shifted_square(&x, &mut mapped);
        for kernel in Int8Kernel::available() {
            let (mut want, mut got) = (vec![0.0; n * n_out], vec![0.0; n * n_out]);
            q.forward(kernel, &mapped, n, &mut want, &mut QuantScratch::default());
            q.forward_mapped(kernel, &x, Some(shifted_square), n, &mut got, &mut QuantScratch::default());
            assert_eq!(want, got, "{}", kernel.name());
        }
    }

    #[test]
    fn rounding_matches_f32_round() {
        let mut cases: Vec<f32> = values(100_000, 17).iter().map(|v| v * 130.0).collect();
        for i in -300..=300 {
            let half = i as f32 * 0.5;
            cases.extend([half, half.next_up(), half.next_down()]);
        }
        for x in cases {
            // Equal as numbers (`-0.0 == 0.0`; both become the byte 0).
            assert_eq!(round_half_away(x), x.round(), "{x}");
            assert_eq!(round_half_away(x).clamp(-127.0, 127.0) as i8, x.round().clamp(-127.0, 127.0) as i8, "{x}");
        }
    }

    #[test]
    fn zero_rows_and_channels_are_exact() {
        let (n_in, n_out) = (8, 16);
        let mut w = values(n_in * n_out, 3);
        w[..n_in].iter_mut().for_each(|v| *v = 0.0);
        let b: Vec<f32> = (0..n_out).map(|j| j as f32).collect();
        let q = QuantLinear::new(&w, &b, n_in, n_out);
        let x = vec![0.0; 2 * n_in];
        let mut out = vec![1.0; 2 * n_out];
        q.forward(Int8Kernel::best(), &x, 2, &mut out, &mut QuantScratch::default());
        assert_eq!(&out[..n_out], &b[..]);
        assert_eq!(&out[n_out..], &b[..]);
    }

    #[test]
    fn portable_is_always_available_and_last() {
        let all = Int8Kernel::available();
        assert_eq!(all.last(), Some(&Int8Kernel::Portable));
        assert_eq!(Int8Kernel::best(), all[0]);
    }
}
