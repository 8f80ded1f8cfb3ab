//! bf16 dense layers: weights rounded to bfloat16 once at load, each input
//! row rounded to bfloat16 as it is read, products accumulated in f32.
//! Attention, softmax, GELU and LayerNorm stay f32 (`bert` module): the
//! dense layers are about nine tenths of the multiply-adds.
//!
//! Kernel paths, chosen at run time: AVX-512 BF16 (`vdpbf16ps`, 32
//! multiply-adds per instruction on 512-bit registers, against 16 for an
//! f32 FMA) and a portable loop for every other CPU. `vdpbf16ps` adds, per
//! f32 lane, the product of the odd bf16 pair first, then of the even one,
//! each rounded to nearest even (a bf16 product is exact in f32, so each
//! step is one f32 addition). The portable loop does the same additions in
//! the same order, so the two paths agree bit for bit except where the
//! hardware flushes a subnormal result (below 2⁻¹²⁶) to zero.

use anyhow::Result;

use crate::buf::Buf;
use crate::int8::RowMap;
use crate::weight_cache::{Arrays, Reader};

/// Output channels per packed panel: one 512-bit register of f32.
const PANEL: usize = 16;
/// Inputs per `vdpbf16ps` lane.
const PAIR: usize = 2;
/// Rows per block of both kernels (registers of the AVX-512 one).
const ROWS: usize = 4;
/// Panels per register block of the AVX-512 kernel.
const PANELS: usize = 4;
/// Input pairs per chunk of the AVX-512 kernel: four panels of 128 pairs
/// are 32 KB, to stay in a 48 KB L1 with the rows' bf16 values.
const K_CHUNK: usize = 128;

/// Which kernel computes the bf16 products.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Bf16Kernel {
    Avx512,
    Portable,
}

impl Bf16Kernel {
    /// The fastest kernel this CPU runs.
    pub fn best() -> Bf16Kernel {
        Self::available()[0]
    }

    /// Every kernel this CPU runs, fastest first (always ends with `Portable`).
    pub fn available() -> Vec<Bf16Kernel> {
        let mut out = Vec::new();
        #[cfg(target_arch = "x86_64")]
        if std::arch::is_x86_feature_detected!("avx512f") && std::arch::is_x86_feature_detected!("avx512bf16") {
            out.push(Bf16Kernel::Avx512);
        }
        out.push(Bf16Kernel::Portable);
        out
    }

    pub fn name(self) -> &'static str {
        match self {
            Bf16Kernel::Avx512 => "avx512",
            Bf16Kernel::Portable => "portable",
        }
    }
}

/// f32 to bf16, rounded to nearest even, as `vcvtneps2bf16` does it:
/// subnormal inputs become (signed) zero, NaN stays a quiet NaN.
#[inline(always)]
fn to_bf16(x: f32) -> u16 {
    let bits = x.to_bits();
    if bits & 0x7f80_0000 == 0 {
        return ((bits >> 16) & 0x8000) as u16;
    }
    if bits & 0x7fff_ffff > 0x7f80_0000 {
        return ((bits >> 16) | 0x0040) as u16;
    }
    let round = 0x7fff + ((bits >> 16) & 1);
    (bits.wrapping_add(round) >> 16) as u16
}

#[inline(always)]
fn from_bf16(h: u16) -> f32 {
    f32::from_bits(u32::from(h) << 16)
}

multiversion! {
    /// A row of f32 to bf16 (`to_bf16` on each value; vectorises).
    fn row_to_bf16(row: &[f32], out: &mut [u16]) {
        for (o, &v) in out.iter_mut().zip(row) {
            *o = to_bf16(v);
        }
    }
}

/// A dense layer with bf16 weights packed `[n_out / 16][n_in / 2][16][2]`
/// (padded with zeros): one 64-byte load holds two consecutive inputs of
/// sixteen output channels, `vdpbf16ps`'s operand.
pub struct Bf16Linear {
    n_in: usize,
    n_out: usize,
    /// `n_in` rounded up to a multiple of 2.
    k_pad: usize,
    /// `n_out` rounded up to a multiple of 16.
    n_pad: usize,
    packed: Buf<u16>,
    bias: Buf<f32>,
}

/// The bf16 input rows of one product (reused across products).
#[derive(Default)]
pub struct Bf16Scratch {
    x: Vec<u16>,
    /// One row of `forward_mapped`'s mapped input.
    mapped: Vec<f32>,
}

impl Bf16Linear {
    /// From `w` (`[n_out, n_in]`, row-major, PyTorch's layout), each weight
    /// rounded to bf16. The weight cache keeps these bytes: a change here
    /// needs a new `weight_cache::FORMAT_VERSION`.
    pub fn new(w: &[f32], b: &[f32], n_in: usize, n_out: usize) -> Bf16Linear {
        assert_eq!(w.len(), n_in * n_out);
        assert_eq!(b.len(), n_out);
        let k_pad = n_in.next_multiple_of(PAIR);
        let n_pad = n_out.next_multiple_of(PANEL);
        let pairs = k_pad / PAIR;
        let mut packed = vec![0u16; k_pad * n_pad];
        for (j, row) in w.chunks_exact(n_in).enumerate() {
            for (k, &v) in row.iter().enumerate() {
                packed[((j / PANEL * pairs + k / PAIR) * PANEL + j % PANEL) * PAIR + k % PAIR] = to_bf16(v);
            }
        }
        let mut bias = b.to_vec();
        bias.resize(n_pad, 0.0);
        Bf16Linear { n_in, n_out, k_pad, n_pad, packed: packed.into(), bias: bias.into() }
    }

    /// The prepared arrays, for the weight cache.
    pub(crate) fn arrays<'a>(&'a self, out: &mut Arrays<'a>) {
        out.push(&self.packed);
        out.push(&self.bias);
    }

    /// The layer as `arrays` stored it.
    pub(crate) fn read(r: &mut Reader, n_in: usize, n_out: usize) -> Result<Bf16Linear> {
        let (k_pad, n_pad) = (n_in.next_multiple_of(PAIR), n_out.next_multiple_of(PANEL));
        let (packed, bias) = (r.take(k_pad * n_pad)?, r.take(n_pad)?);
        Ok(Bf16Linear { n_in, n_out, k_pad, n_pad, packed, bias })
    }

    /// `out[n, n_out] = bf16(x[n, n_in]) · Wᵀ + b`.
    pub fn forward(&self, kernel: Bf16Kernel, x: &[f32], n: usize, out: &mut [f32], s: &mut Bf16Scratch) {
        self.forward_mapped(kernel, x, None, n, out, s)
    }

    /// `forward` of `map(x)`, `map` applied row by row just before the
    /// row's rounding to bf16 (GELU's output, the widest matrix, is never
    /// written out in f32).
    pub fn forward_mapped(
        &self,
        kernel: Bf16Kernel,
        x: &[f32],
        map: Option<RowMap>,
        n: usize,
        out: &mut [f32],
        s: &mut Bf16Scratch,
    ) {
        debug_assert_eq!(x.len(), n * self.n_in);
        debug_assert_eq!(out.len(), n * self.n_out);
        // The padding input (odd n_in) meets zero weights: its value is moot
        // unless NaN, so it is written as zero once.
        s.x.resize(n * self.k_pad, 0);
        s.mapped.resize(if map.is_some() { self.n_in } else { 0 }, 0.0);
        for (row, xb) in x.chunks_exact(self.n_in).zip(s.x.chunks_exact_mut(self.k_pad)) {
            let row = match map {
                Some(map) => {
                    map(row, &mut s.mapped);
                    &s.mapped[..]
                }
                None => row,
            };
            row_to_bf16(row, &mut xb[..self.n_in]);
            xb[self.n_in..].fill(0);
        }
        match kernel {
            // SAFETY: `Bf16Kernel::available` only offers AVX-512 BF16 on CPUs that have it.
            #[cfg(target_arch = "x86_64")]
            Bf16Kernel::Avx512 => unsafe { x86::forward_avx512(self, &s.x, n, out) },
            _ => forward_portable(self, &s.x, out),
        }
    }
}

multiversion! {
    /// The reference loop: per block of four rows (each panel's weights
    /// read once per block, not once per row) and panel, sixteen f32 sums
    /// per row from the bias, adding per input pair the odd product, then
    /// the even one (`vdpbf16ps`'s order; Rust never fuses the multiply and
    /// the add, and the product of two bf16 values is exact in f32, so each
    /// step rounds once, as the instruction does).
    fn forward_portable(l: &Bf16Linear, x: &[u16], out: &mut [f32]) {
        let blocks = x.chunks(ROWS * l.k_pad).zip(out.chunks_mut(ROWS * l.n_out));
        for (xb, ob) in blocks {
            if xb.len() == ROWS * l.k_pad {
                block_portable::<ROWS>(l, xb, ob);
            } else {
                for (xr, or) in xb.chunks_exact(l.k_pad).zip(ob.chunks_exact_mut(l.n_out)) {
                    block_portable::<1>(l, xr, or);
                }
            }
        }
    }
}

/// `R` rows of `forward_portable` (inlined into its compiled versions).
#[inline(always)]
fn block_portable<const R: usize>(l: &Bf16Linear, x: &[u16], out: &mut [f32]) {
    let pairs = l.k_pad / PAIR;
    for (p, panel) in l.packed.chunks_exact(pairs * PANEL * PAIR).enumerate() {
        let bias: &[f32; PANEL] = l.bias[p * PANEL..(p + 1) * PANEL].try_into().expect("a panel");
        let mut acc = [*bias; R];
        for (g, w) in panel.chunks_exact(PANEL * PAIR).enumerate() {
            let (mut w0, mut w1) = ([0.0f32; PANEL], [0.0f32; PANEL]);
            for ((w0, w1), wl) in w0.iter_mut().zip(&mut w1).zip(w.chunks_exact(PAIR)) {
                (*w0, *w1) = (from_bf16(wl[0]), from_bf16(wl[1]));
            }
            for (r, acc) in acc.iter_mut().enumerate() {
                let x0 = from_bf16(x[r * l.k_pad + g * PAIR]);
                let x1 = from_bf16(x[r * l.k_pad + g * PAIR + 1]);
                for ((a, &w0), &w1) in acc.iter_mut().zip(&w0).zip(&w1) {
                    *a += x1 * w1;
                    *a += x0 * w0;
                }
            }
        }
        let c0 = p * PANEL;
        let valid = l.n_out.saturating_sub(c0).min(PANEL);
        for (r, acc) in acc.iter().enumerate() {
            out[r * l.n_out + c0..][..valid].copy_from_slice(&acc[..valid]);
        }
    }
}

#[cfg(target_arch = "x86_64")]
mod x86 {
    use super::{Bf16Linear, K_CHUNK, PAIR, PANEL, PANELS, ROWS};
    use std::arch::x86_64::*;

    /// The whole product with AVX-512 BF16: blocks of four rows by four
    /// 16-channel panels (16 accumulators; per input pair, four weight
    /// loads and four broadcasts feed 16 `vdpbf16ps`). Long inputs run in
    /// chunks of `K_CHUNK` pairs, every row block through one chunk before
    /// the next (a chunk of four panels stays in L1); between chunks the
    /// sums wait in `out`, so each lane still adds its products in input
    /// order, as the portable loop does.
    #[target_feature(enable = "avx512f,avx512bf16")]
    pub(super) unsafe fn forward_avx512(l: &Bf16Linear, x: &[u16], n: usize, out: &mut [f32]) {
        let panels = l.n_pad / PANEL;
        let pairs = l.k_pad / PAIR;
        let mut p = 0;
        while p < panels {
            let width = if p + PANELS <= panels { PANELS } else { 1 };
            let mut g0 = 0;
            while g0 < pairs {
                let steps = (g0, (g0 + K_CHUNK).min(pairs));
                let mut i = 0;
                while i < n {
                    let rows = if i + ROWS <= n { ROWS } else { 1 };
                    match (rows, width) {
                        (ROWS, PANELS) => block::<ROWS, PANELS>(l, x, (i, p), steps, out),
                        (ROWS, _) => block::<ROWS, 1>(l, x, (i, p), steps, out),
                        (_, PANELS) => block::<1, PANELS>(l, x, (i, p), steps, out),
                        _ => block::<1, 1>(l, x, (i, p), steps, out),
                    }
                    i += rows;
                }
                g0 = steps.1;
            }
            p += width;
        }
    }

    /// One block (`R` rows from `row0`, `P` panels from `p0`) over the input
    /// pairs `g0..g1`: its sums start from the bias at the first pair, else
    /// from `out`, and go back to `out` (masked to the real channels).
    #[target_feature(enable = "avx512f,avx512bf16")]
    #[inline]
    unsafe fn block<const R: usize, const P: usize>(
        l: &Bf16Linear,
        x: &[u16],
        (row0, p0): (usize, usize),
        (g0, g1): (usize, usize),
        out: &mut [f32],
    ) {
        let pairs = l.k_pad / PAIR;
        let masks: [__mmask16; P] = std::array::from_fn(|q| {
            let valid = l.n_out.saturating_sub((p0 + q) * PANEL).min(PANEL);
            ((1u32 << valid) - 1) as __mmask16
        });
        let at = |r: usize, q: usize| (row0 + r) * l.n_out + (p0 + q) * PANEL;
        let mut acc: [[__m512; P]; R] = std::array::from_fn(|r| {
            std::array::from_fn(|q| {
                if g0 == 0 {
                    _mm512_loadu_ps(l.bias.as_ptr().add((p0 + q) * PANEL))
                } else {
                    _mm512_maskz_loadu_ps(masks[q], out.as_ptr().add(at(r, q)))
                }
            })
        });
        let xs: [*const u16; R] = std::array::from_fn(|r| x.as_ptr().add((row0 + r) * l.k_pad));
        let ws: [*const u16; P] = std::array::from_fn(|q| l.packed.as_ptr().add((p0 + q) * pairs * PANEL * PAIR));
        for g in g0..g1 {
            let wv: [__m512bh; P] = std::array::from_fn(|q| {
                std::mem::transmute::<__m512i, __m512bh>(_mm512_loadu_si512(ws[q].add(g * PANEL * PAIR) as *const _))
            });
            for r in 0..R {
                let pair = std::ptr::read_unaligned(xs[r].add(g * PAIR) as *const i32);
                let xv = std::mem::transmute::<__m512i, __m512bh>(_mm512_set1_epi32(pair));
                for q in 0..P {
                    acc[r][q] = _mm512_dpbf16_ps(acc[r][q], xv, wv[q]);
                }
            }
        }
        for (r, row) in acc.iter().enumerate() {
            for (q, a) in row.iter().enumerate() {
                _mm512_mask_storeu_ps(out.as_mut_ptr().add(at(r, q)), masks[q], *a);
            }
        }
    }

    /// `vcvtneps2bf16` on sixteen values (the tests check `to_bf16` against it).
    #[cfg(test)]
    #[target_feature(enable = "avx512f,avx512bf16")]
    pub(super) unsafe fn to_bf16_hardware(v: &[f32; 16]) -> [u16; 16] {
        std::mem::transmute::<__m256bh, [u16; 16]>(_mm512_cvtneps_pbh(_mm512_loadu_ps(v.as_ptr())))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Deterministic values in about ±2 (a linear congruential sequence).
    fn values(n: usize, seed: u64) -> Vec<f32> {
        let mut s = seed;
        (0..n)
            .map(|_| {
                s = s.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1_442_695_040_888_963_407);
                ((s >> 40) as f32 / (1u64 << 24) as f32 - 0.5) * 4.0
            })
            .collect()
    }

    #[test]
    fn rounds_to_nearest_even() {
        assert_eq!(to_bf16(1.0), 0x3f80);
        assert_eq!(to_bf16(-2.0), 0xc000);
        // Halfway between 1.0 (0x3f80) and the next bf16: to the even one.
        assert_eq!(to_bf16(f32::from_bits(0x3f80_8000)), 0x3f80);
        assert_eq!(to_bf16(f32::from_bits(0x3f81_8000)), 0x3f82);
        // Just above halfway: up.
        assert_eq!(to_bf16(f32::from_bits(0x3f80_8001)), 0x3f81);
        // Subnormals flush to signed zero; NaN stays NaN; overflow to infinity.
        assert_eq!(to_bf16(f32::from_bits(0x0000_0001)), 0x0000);
        assert_eq!(to_bf16(-f32::from_bits(0x007f_ffff)), 0x8000);
        assert!(from_bf16(to_bf16(f32::NAN)).is_nan());
        assert_eq!(to_bf16(f32::MAX), 0x7f80);
        assert_eq!(to_bf16(f32::INFINITY), 0x7f80);
        for v in values(1000, 3) {
            let r = from_bf16(to_bf16(v));
            assert!((r - v).abs() <= v.abs() / 256.0, "{v} -> {r}");
        }
    }

    /// The conversion is the instruction's, bit for bit, on edge cases and
    /// on a spread of values (where the CPU has AVX-512 BF16).
    #[test]
    #[cfg(target_arch = "x86_64")]
    fn rounding_matches_the_instruction() {
        if !Bf16Kernel::available().contains(&Bf16Kernel::Avx512) {
            eprintln!("no AVX-512 BF16 on this CPU: the conversion is checked by rounds_to_nearest_even only");
            return;
        }
        let mut inputs: Vec<f32> =
            [0.0, -0.0, 1.0, f32::MAX, f32::MIN, f32::INFINITY, f32::NEG_INFINITY, f32::MIN_POSITIVE, 1e-40, -1e-40]
                .to_vec();
        inputs.extend([0x3f80_8000u32, 0x3f81_8000, 0x3f80_8001, 0x7f7f_8000, 0x7f7f_ffff].map(f32::from_bits));
        inputs.extend(values(4096, 11));
        inputs.extend(values(4096, 12).iter().map(|v| v * 1e-30));
        inputs.resize(inputs.len().next_multiple_of(16), 0.5);
        for chunk in inputs.chunks_exact(16) {
            let chunk: &[f32; 16] = chunk.try_into().unwrap();
            // SAFETY: the CPU has AVX-512 BF16 (checked above).
            let hardware = unsafe { x86::to_bf16_hardware(chunk) };
            let portable: Vec<u16> = chunk.iter().map(|&v| to_bf16(v)).collect();
            assert_eq!(portable, hardware, "{chunk:?}");
        }
    }

    /// Every kernel against an f64 product of the same bf16 inputs, on
    /// shapes with row and panel remainders, an odd input width, and inputs
    /// long enough to be chunked. Tolerance: the f32 accumulation's
    /// rounding, |error| ≤ n_in · 2⁻²³ · Σ|x·w| (measured well below).
    #[test]
    fn kernels_agree_with_the_exact_product() {
        for (n, n_in, n_out) in [(1, 2, 16), (5, 37, 20), (9, 384, 64), (6, 1536, 48), (3, 300, 100)] {
            let w = values(n_in * n_out, n_in as u64);
            let b = values(n_out, 7);
            let x = values(n * n_in, 5);
            let l = Bf16Linear::new(&w, &b, n_in, n_out);
            let round = |v: f32| from_bf16(to_bf16(v)) as f64;
            let mut outputs = Vec::new();
            for kernel in Bf16Kernel::available() {
                let mut out = vec![f32::NAN; n * n_out];
                l.forward(kernel, &x, n, &mut out, &mut Bf16Scratch::default());
                for i in 0..n {
                    for j in 0..n_out {
                        let terms = (0..n_in).map(|k| round(x[i * n_in + k]) * round(w[j * n_in + k]));
                        let (exact, magnitude) =
                            terms.fold((b[j] as f64, b[j].abs() as f64), |(s, m), t| (s + t, m + t.abs()));
                        let bound = n_in as f64 * f64::from(f32::EPSILON) * magnitude;
                        let got = out[i * n_out + j] as f64;
                        assert!(
                            (got - exact).abs() <= bound,
                            "{kernel:?} {n}x{n_in}x{n_out} [{i},{j}]: {got} vs {exact}"
                        );
                    }
                }
                outputs.push((kernel, out));
            }
            // The paths add the same products in the same order, so on
            // Intel's `vdpbf16ps` they agree bit for bit (measured); the
            // assertion is the tolerance above, which also holds for an
            // implementation that rounds the two products' sum once.
            for (kernel, out) in &outputs[1..] {
                let diff = out.iter().zip(&outputs[0].1).map(|(a, b)| (a - b).abs()).fold(0.0f32, f32::max);
                eprintln!("{n}x{n_in}x{n_out}: max |{kernel:?} - {:?}| = {diff:e}", outputs[0].0);
            }
        }
    }

    #[test]
    fn mapped_rows_are_mapped_before_rounding() {
        fn double(x: &[f32], out: &mut [f32]) {
            for (o, v) in out.iter_mut().zip(x) {
                *o = 2.0 * v;
            }
        }
        let (n, n_in, n_out) = (3, 40, 16);
        let (w, b, x) = (values(n_in * n_out, 1), values(n_out, 2), values(n * n_in, 3));
        let l = Bf16Linear::new(&w, &b, n_in, n_out);
        let doubled: Vec<f32> = x.iter().map(|v| 2.0 * v).collect();
        let mut s = Bf16Scratch::default();
        for kernel in Bf16Kernel::available() {
            let (mut a, mut c) = (vec![0.0; n * n_out], vec![0.0; n * n_out]);
            l.forward_mapped(kernel, &x, Some(double), n, &mut a, &mut s);
            l.forward(kernel, &doubled, n, &mut c, &mut s);
            assert_eq!(a, c, "{kernel:?}");
        }
    }
}
