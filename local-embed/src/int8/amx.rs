//! The dense layers' integer products on AMX (Advanced Matrix Extensions,
//! Intel Xeon since Sapphire Rapids): `tdpbusd` multiplies a 16 × 64-byte
//! tile of u8 rows by a 16 × 64-byte tile of int8 weights into 16 × 16 i32
//! sums — 16,384 multiply-adds per instruction, against 64 for a 512-bit
//! `vpdpbusd`. The sums are the same integers as the VNNI kernels' (exact,
//! no saturation), so the vectors are bit-identical and the shared
//! epilogue turns them into floats.
//!
//! The weights need no repacking: a panel's `[groups][16][4]` bytes are
//! what `tdpbusd` wants of its second tile (rows of four consecutive inputs
//! for sixteen channels), so sixteen steps of a panel are one contiguous
//! 1 KB tile. Rows come straight from the quantized activations (stride
//! `k_pad`), padded to a multiple of 16 rows by the caller.
//!
//! Linux hands out the tile registers' state only on request
//! (`arch_prctl(ARCH_REQ_XCOMP_PERM)`), once per process: [`ready`] asks and
//! says whether it was granted. Rust has no stable AMX intrinsics, so the
//! seven instructions used are written as inline assembly; the compiler
//! itself never emits AMX code, so the tile registers keep their values
//! between the `asm!` blocks.

use std::arch::asm;
use std::sync::OnceLock;

use super::{QuantLinear, GROUP, PANEL};

/// Bytes of input per tile step: one tile row, sixteen steps of four.
pub(super) const K_STEP: usize = 64;
/// Rows of one tile.
pub(super) const TILE_ROWS: usize = 16;

/// True when the CPU has AMX-INT8 and the kernel let this process use its
/// tile registers (asked once).
pub(super) fn ready() -> bool {
    static READY: OnceLock<bool> = OnceLock::new();
    *READY.get_or_init(|| {
        // Leaf 7 is absent on old CPUs, which read as zeros there: no AMX.
        let leaf7 = std::arch::x86_64::__cpuid_count(7, 0);
        let (tile, int8) = (leaf7.edx >> 24 & 1 == 1, leaf7.edx >> 25 & 1 == 1);
        tile && int8 && request_tile_data()
    })
}

/// `arch_prctl(ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA)`: 0 when granted;
/// a kernel without AMX support (before 5.16) or a refusing one answers an
/// error, and the VNNI kernel is used instead.
fn request_tile_data() -> bool {
    const SYS_ARCH_PRCTL: i64 = 158;
    const ARCH_REQ_XCOMP_PERM: i64 = 0x1023;
    const XFEATURE_XTILEDATA: i64 = 18;
    let result: i64;
    // SAFETY: a system call with two integer arguments and no memory
    // operands; `syscall` clobbers rcx and r11.
    unsafe {
        asm!(
            "syscall",
            inlateout("rax") SYS_ARCH_PRCTL => result,
            in("rdi") ARCH_REQ_XCOMP_PERM,
            in("rsi") XFEATURE_XTILEDATA,
            out("rcx") _,
            out("r11") _,
            options(nostack),
        );
    }
    result == 0
}

/// The tile configuration (palette 1): eight tiles of 16 rows × 64 bytes
/// (tmm0–3 the sums of a 2 × 2 block, tmm4–5 rows, tmm6–7 weight panels).
#[repr(C, align(64))]
struct TileConfig([u8; 64]);

impl TileConfig {
    fn full() -> TileConfig {
        let mut c = [0u8; 64];
        c[0] = 1;
        for t in 0..8 {
            c[16 + 2 * t..18 + 2 * t].copy_from_slice(&(K_STEP as u16).to_le_bytes());
            c[48 + t] = TILE_ROWS as u8;
        }
        TileConfig(c)
    }
}

/// `out = x · Wᵀ + b` for every row (`n` of them, `x` holding them padded to
/// a multiple of 16 rows of `k_pad` bytes) of a layer whose `k_pad` is a
/// multiple of 64: blocks of 32 rows × 32 channels (four sum tiles) where
/// they fit, 16 at the edges. A block's sums go through a 4 KB buffer that
/// stays in L1 to the epilogue, which does `epilogue`'s float operations in
/// the same order: `sw · (rs · d + rm · cs) + b`.
///
/// # Safety
/// [`ready`] returned true on this CPU (which then has AVX-512); `x` holds
/// `n.next_multiple_of(16) · k_pad` bytes, `scales` and `mins` `n` values
/// and `out` `n · n_out`.
#[target_feature(enable = "avx512f")]
pub(super) unsafe fn forward(l: &QuantLinear, x: &[u8], scales: &[f32], mins: &[f32], n: usize, out: &mut [f32]) {
    let n_rows = n.next_multiple_of(TILE_ROWS);
    debug_assert!(l.k_pad.is_multiple_of(K_STEP) && x.len() >= n_rows * l.k_pad);
    debug_assert!(scales.len() == n && mins.len() == n && out.len() == n * l.n_out);
    let config = TileConfig::full();
    asm!("ldtilecfg [{}]", in(reg) config.0.as_ptr(), options(nostack, readonly));
    let panels = l.n_pad / PANEL;
    let groups = l.k_pad / GROUP;
    let x_stride = l.k_pad;
    let mut sums = BlockSums([[0; 2 * PANEL]; 2 * TILE_ROWS]);
    let sums_stride = 2 * PANEL * 4;
    let mut i = 0;
    while i < n_rows {
        let two_rows = i + 2 * TILE_ROWS <= n_rows;
        let x0 = x.as_ptr().add(i * x_stride);
        let x1 = if two_rows { x0.add(TILE_ROWS * x_stride) } else { x0 };
        let mut p = 0;
        while p < panels {
            let two_panels = p + 2 <= panels;
            let w0 = l.packed.as_ptr().add(p * groups * PANEL * GROUP);
            let w1 = if two_panels { w0.add(groups * PANEL * GROUP) } else { w0 };
            asm!("tilezero tmm0", "tilezero tmm1", "tilezero tmm2", "tilezero tmm3", options(nostack, nomem));
            for step in 0..l.k_pad / K_STEP {
                let (a0, a1) = (x0.add(step * K_STEP), x1.add(step * K_STEP));
                let (b0, b1) = (w0.add(step * K_STEP * PANEL), w1.add(step * K_STEP * PANEL));
                asm!(
                    "tileloadd tmm4, [{a0} + {xs}*1]",
                    "tileloadd tmm6, [{b0} + {ws}*1]",
                    "tdpbusd tmm0, tmm4, tmm6",
                    a0 = in(reg) a0, b0 = in(reg) b0, xs = in(reg) x_stride, ws = in(reg) K_STEP,
                    options(nostack, readonly),
                );
                if two_panels {
                    asm!(
                        "tileloadd tmm7, [{b1} + {ws}*1]",
                        "tdpbusd tmm1, tmm4, tmm7",
                        b1 = in(reg) b1, ws = in(reg) K_STEP,
                        options(nostack, readonly),
                    );
                }
                if two_rows {
                    asm!(
                        "tileloadd tmm5, [{a1} + {xs}*1]",
                        "tdpbusd tmm2, tmm5, tmm6",
                        a1 = in(reg) a1, xs = in(reg) x_stride,
                        options(nostack, readonly),
                    );
                    if two_panels {
                        asm!("tdpbusd tmm3, tmm5, tmm7", options(nostack, nomem));
                    }
                }
            }
            let c0 = sums.0.as_mut_ptr() as *mut i32;
            let c1 = c0.add(TILE_ROWS * 2 * PANEL);
            asm!(
                "tilestored [{c0} + {s}*1], tmm0",
                "tilestored [{c0} + {s}*1 + 64], tmm1",
                "tilestored [{c1} + {s}*1], tmm2",
                "tilestored [{c1} + {s}*1 + 64], tmm3",
                c0 = in(reg) c0, c1 = in(reg) c1, s = in(reg) sums_stride,
                options(nostack),
            );
            let rows = (n - i.min(n)).min(if two_rows { 2 * TILE_ROWS } else { TILE_ROWS });
            let width = if two_panels { 2 } else { 1 };
            epilogue(l, &sums, (i, rows), (p, width), scales, mins, out);
            p += width;
        }
        i += if two_rows { 2 * TILE_ROWS } else { TILE_ROWS };
    }
    asm!("tilerelease", options(nostack, nomem));
}

/// The integer sums of one block: 32 rows × 32 channels, 4 KB.
#[repr(C, align(64))]
struct BlockSums([[i32; 2 * PANEL]; 2 * TILE_ROWS]);

/// The block's floats into `out`: `rows` rows from `row0`, `width` panels from `p0`.
#[target_feature(enable = "avx512f")]
#[inline]
unsafe fn epilogue(
    l: &QuantLinear,
    sums: &BlockSums,
    (row0, rows): (usize, usize),
    (p0, width): (usize, usize),
    scales: &[f32],
    mins: &[f32],
    out: &mut [f32],
) {
    use std::arch::x86_64::*;
    for (r, row_sums) in sums.0[..rows].iter().enumerate() {
        let rs = _mm512_set1_ps(scales[row0 + r]);
        let rm = _mm512_set1_ps(mins[row0 + r]);
        for q in 0..width {
            let c0 = (p0 + q) * PANEL;
            let valid = l.n_out.saturating_sub(c0).min(PANEL);
            let mask: __mmask16 = ((1u32 << valid) - 1) as __mmask16;
            let sw = _mm512_loadu_ps(l.scales.as_ptr().add(c0));
            let cs = _mm512_loadu_ps(l.col_sums.as_ptr().add(c0));
            let b = _mm512_loadu_ps(l.bias.as_ptr().add(c0));
            let d = _mm512_cvtepi32_ps(_mm512_loadu_si512(row_sums[q * PANEL..].as_ptr() as *const _));
            let row_dot = _mm512_add_ps(_mm512_mul_ps(rs, d), _mm512_mul_ps(rm, cs));
            let o = _mm512_add_ps(_mm512_mul_ps(sw, row_dot), b);
            _mm512_mask_storeu_ps(out.as_mut_ptr().add((row0 + r) * l.n_out + c0), mask, o);
        }
    }
}
