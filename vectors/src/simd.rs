//! Dot products: AVX2+FMA when the CPU has them (detected at run time), a
//! portable fallback otherwise.
//!
//! Every score in the crate goes through [`dot`] / [`dot_rows`], so exact
//! search, the HNSW index and the tests all see bit-identical scores for the
//! same pair of vectors within one process.

/// Whether the AVX2+FMA kernels are used on this CPU.
#[inline]
pub fn has_avx2_fma() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        // `is_x86_feature_detected!` caches its answer; this is an atomic load.
        std::is_x86_feature_detected!("avx2") && std::is_x86_feature_detected!("fma")
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        false
    }
}

/// Dot product of two equally long slices (the cosine similarity of two
/// normalised vectors, as every search of this crate scores it).
#[inline]
pub fn dot(a: &[f32], b: &[f32]) -> f32 {
    debug_assert_eq!(a.len(), b.len());
    #[cfg(target_arch = "x86_64")]
    {
        if has_avx2_fma() {
            // SAFETY: the CPU supports AVX2 and FMA (checked above).
            return unsafe { x86::dot(a, b) };
        }
    }
    dot_portable(a, b)
}

/// `out[i] = dot(query, rows[i * dim .. (i + 1) * dim])` for every row.
#[inline]
pub fn dot_rows(query: &[f32], rows: &[f32], out: &mut [f32]) {
    let dim = query.len();
    debug_assert!(dim > 0);
    debug_assert_eq!(rows.len(), dim * out.len());
    #[cfg(target_arch = "x86_64")]
    {
        if has_avx2_fma() {
            // SAFETY: the CPU supports AVX2 and FMA (checked above).
            unsafe { x86::dot_rows(query, rows, out) };
            return;
        }
    }
    for (o, row) in out.iter_mut().zip(rows.chunks_exact(dim)) {
        *o = dot_portable(query, row);
    }
}

/// Hint the CPU to start loading the first cache lines of `row`.
#[inline(always)]
pub fn prefetch(row: &[f32]) {
    #[cfg(target_arch = "x86_64")]
    {
        use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
        let p = row.as_ptr() as *const i8;
        // SAFETY: prefetch never faults; SSE is part of the x86_64 baseline.
        unsafe {
            _mm_prefetch::<_MM_HINT_T0>(p);
            if row.len() > 16 {
                _mm_prefetch::<_MM_HINT_T0>(p.add(64));
            }
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        let _ = row;
    }
}

/// Dot product of two equally long `i8` slices (exact integer sum).
#[inline]
pub fn dot_i8(a: &[i8], b: &[i8]) -> i32 {
    debug_assert_eq!(a.len(), b.len());
    #[cfg(target_arch = "x86_64")]
    {
        if has_avx2_fma() {
            // SAFETY: the CPU supports AVX2 (checked above).
            return unsafe { x86::dot_i8(a, b) };
        }
    }
    dot_i8_portable(a, b)
}

/// `out[i] = dot_i8(query, rows[i * dim .. (i + 1) * dim])` for every row.
#[inline]
pub fn dot_rows_i8(query: &[i8], rows: &[i8], out: &mut [i32]) {
    let dim = query.len();
    debug_assert!(dim > 0);
    debug_assert_eq!(rows.len(), dim * out.len());
    #[cfg(target_arch = "x86_64")]
    {
        if has_avx2_fma() {
            // SAFETY: the CPU supports AVX2 (checked above).
            unsafe { x86::dot_rows_i8(query, rows, out) };
            return;
        }
    }
    for (o, row) in out.iter_mut().zip(rows.chunks_exact(dim)) {
        *o = dot_i8_portable(query, row);
    }
}

pub fn dot_i8_portable(a: &[i8], b: &[i8]) -> i32 {
    let mut acc = [0i32; 16];
    let ca = a.chunks_exact(16);
    let cb = b.chunks_exact(16);
    let (ta, tb) = (ca.remainder(), cb.remainder());
    for (x, y) in ca.zip(cb) {
        for j in 0..16 {
            acc[j] += x[j] as i32 * y[j] as i32;
        }
    }
    let mut sum: i32 = acc.iter().sum();
    for (x, y) in ta.iter().zip(tb) {
        sum += *x as i32 * *y as i32;
    }
    sum
}

/// Hint the CPU to load all of `bytes` (at most 16 cache lines).
#[inline(always)]
pub fn prefetch_bytes(bytes: &[i8]) {
    #[cfg(target_arch = "x86_64")]
    {
        use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
        let p = bytes.as_ptr();
        let lines = bytes.len().div_ceil(64).min(16);
        for l in 0..lines {
            // SAFETY: prefetch never faults; SSE is part of the x86_64 baseline.
            unsafe { _mm_prefetch::<_MM_HINT_T0>(p.add(l * 64)) };
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        let _ = bytes;
    }
}

/// Portable dot product: eight independent accumulators, so the compiler
/// can vectorise it with whatever the target baseline offers.
pub fn dot_portable(a: &[f32], b: &[f32]) -> f32 {
    let n = a.len().min(b.len());
    let (a, b) = (&a[..n], &b[..n]);
    let mut acc = [0.0f32; 8];
    let ca = a.chunks_exact(8);
    let cb = b.chunks_exact(8);
    let (ta, tb) = (ca.remainder(), cb.remainder());
    for (x, y) in ca.zip(cb) {
        for j in 0..8 {
            acc[j] += x[j] * y[j];
        }
    }
    let mut tail = 0.0f32;
    for (x, y) in ta.iter().zip(tb) {
        tail += x * y;
    }
    ((acc[0] + acc[4]) + (acc[1] + acc[5])) + ((acc[2] + acc[6]) + (acc[3] + acc[7])) + tail
}

#[cfg(target_arch = "x86_64")]
mod x86 {
    use std::arch::x86_64::*;

    #[inline]
    #[target_feature(enable = "avx2,fma")]
    unsafe fn hsum(v: __m256) -> f32 {
        let lo = _mm256_castps256_ps128(v);
        let hi = _mm256_extractf128_ps::<1>(v);
        let s = _mm_add_ps(lo, hi);
        let s = _mm_add_ps(s, _mm_movehl_ps(s, s));
        let s = _mm_add_ss(s, _mm_shuffle_ps::<0x55>(s, s));
        _mm_cvtss_f32(s)
    }

    #[inline]
    #[target_feature(enable = "avx2,fma")]
    pub unsafe fn dot(a: &[f32], b: &[f32]) -> f32 {
        let n = a.len().min(b.len());
        let pa = a.as_ptr();
        let pb = b.as_ptr();
        let mut i = 0usize;
        let mut s0 = _mm256_setzero_ps();
        let mut s1 = _mm256_setzero_ps();
        let mut s2 = _mm256_setzero_ps();
        let mut s3 = _mm256_setzero_ps();
        while i + 32 <= n {
            s0 = _mm256_fmadd_ps(_mm256_loadu_ps(pa.add(i)), _mm256_loadu_ps(pb.add(i)), s0);
            s1 = _mm256_fmadd_ps(_mm256_loadu_ps(pa.add(i + 8)), _mm256_loadu_ps(pb.add(i + 8)), s1);
            s2 = _mm256_fmadd_ps(_mm256_loadu_ps(pa.add(i + 16)), _mm256_loadu_ps(pb.add(i + 16)), s2);
            s3 = _mm256_fmadd_ps(_mm256_loadu_ps(pa.add(i + 24)), _mm256_loadu_ps(pb.add(i + 24)), s3);
            i += 32;
        }
        while i + 8 <= n {
            s0 = _mm256_fmadd_ps(_mm256_loadu_ps(pa.add(i)), _mm256_loadu_ps(pb.add(i)), s0);
            i += 8;
        }
        let mut sum = hsum(_mm256_add_ps(_mm256_add_ps(s0, s1), _mm256_add_ps(s2, s3)));
        while i < n {
            sum += *pa.add(i) * *pb.add(i);
            i += 1;
        }
        sum
    }

    #[inline]
    #[target_feature(enable = "avx2,fma")]
    pub unsafe fn dot_i8(a: &[i8], b: &[i8]) -> i32 {
        let n = a.len().min(b.len());
        let pa = a.as_ptr();
        let pb = b.as_ptr();
        let mut i = 0usize;
        let mut s0 = _mm256_setzero_si256();
        let mut s1 = _mm256_setzero_si256();
        while i + 32 <= n {
            let va = _mm256_loadu_si256(pa.add(i) as *const __m256i);
            let vb = _mm256_loadu_si256(pb.add(i) as *const __m256i);
            let a_lo = _mm256_cvtepi8_epi16(_mm256_castsi256_si128(va));
            let a_hi = _mm256_cvtepi8_epi16(_mm256_extracti128_si256::<1>(va));
            let b_lo = _mm256_cvtepi8_epi16(_mm256_castsi256_si128(vb));
            let b_hi = _mm256_cvtepi8_epi16(_mm256_extracti128_si256::<1>(vb));
            s0 = _mm256_add_epi32(s0, _mm256_madd_epi16(a_lo, b_lo));
            s1 = _mm256_add_epi32(s1, _mm256_madd_epi16(a_hi, b_hi));
            i += 32;
        }
        if i + 16 <= n {
            let a16 = _mm256_cvtepi8_epi16(_mm_loadu_si128(pa.add(i) as *const __m128i));
            let b16 = _mm256_cvtepi8_epi16(_mm_loadu_si128(pb.add(i) as *const __m128i));
            s0 = _mm256_add_epi32(s0, _mm256_madd_epi16(a16, b16));
            i += 16;
        }
        let s = _mm256_add_epi32(s0, s1);
        let s = _mm_add_epi32(_mm256_castsi256_si128(s), _mm256_extracti128_si256::<1>(s));
        let s = _mm_add_epi32(s, _mm_shuffle_epi32::<0b01_00_11_10>(s));
        let s = _mm_add_epi32(s, _mm_shuffle_epi32::<0b10_11_00_01>(s));
        let mut sum = _mm_cvtsi128_si32(s);
        while i < n {
            sum += *pa.add(i) as i32 * *pb.add(i) as i32;
            i += 1;
        }
        sum
    }

    /// The query is widened to 16 bits once; each row then costs one
    /// sign-extending load, one multiply-add and one add per 16 values.
    #[target_feature(enable = "avx2,fma")]
    pub unsafe fn dot_rows_i8(query: &[i8], rows: &[i8], out: &mut [i32]) {
        let dim = query.len();
        let blocks = dim / 16;
        let wide: Vec<__m256i> = (0..blocks)
            .map(|b| _mm256_cvtepi8_epi16(_mm_loadu_si128(query.as_ptr().add(b * 16) as *const __m128i)))
            .collect();
        let tail = &query[blocks * 16..];
        for (r, o) in out.iter_mut().enumerate() {
            let row = rows.as_ptr().add(r * dim);
            let mut s0 = _mm256_setzero_si256();
            let mut s1 = _mm256_setzero_si256();
            let mut b = 0;
            while b + 2 <= blocks {
                let r0 = _mm256_cvtepi8_epi16(_mm_loadu_si128(row.add(b * 16) as *const __m128i));
                let r1 = _mm256_cvtepi8_epi16(_mm_loadu_si128(row.add(b * 16 + 16) as *const __m128i));
                s0 = _mm256_add_epi32(s0, _mm256_madd_epi16(*wide.get_unchecked(b), r0));
                s1 = _mm256_add_epi32(s1, _mm256_madd_epi16(*wide.get_unchecked(b + 1), r1));
                b += 2;
            }
            if b < blocks {
                let r0 = _mm256_cvtepi8_epi16(_mm_loadu_si128(row.add(b * 16) as *const __m128i));
                s0 = _mm256_add_epi32(s0, _mm256_madd_epi16(*wide.get_unchecked(b), r0));
            }
            let s = _mm256_add_epi32(s0, s1);
            let s = _mm_add_epi32(_mm256_castsi256_si128(s), _mm256_extracti128_si256::<1>(s));
            let s = _mm_add_epi32(s, _mm_shuffle_epi32::<0b01_00_11_10>(s));
            let s = _mm_add_epi32(s, _mm_shuffle_epi32::<0b10_11_00_01>(s));
            let mut sum = _mm_cvtsi128_si32(s);
            for (j, &x) in tail.iter().enumerate() {
                sum += x as i32 * *row.add(blocks * 16 + j) as i32;
            }
            *o = sum;
        }
    }

    #[target_feature(enable = "avx2,fma")]
    pub unsafe fn dot_rows(query: &[f32], rows: &[f32], out: &mut [f32]) {
        let dim = query.len();
        for (r, o) in out.iter_mut().enumerate() {
            let row = rows.get_unchecked(r * dim..(r + 1) * dim);
            *o = dot(query, row);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn simd_matches_portable() {
        let mut x = 1u64;
        let mut next = || {
            x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            ((x >> 40) as f32 / (1u64 << 24) as f32) - 0.5
        };
        for n in [0usize, 1, 7, 8, 9, 31, 32, 33, 100, 384, 385] {
            let a: Vec<f32> = (0..n).map(|_| next()).collect();
            let b: Vec<f32> = (0..n).map(|_| next()).collect();
            let reference: f64 = a.iter().zip(&b).map(|(x, y)| *x as f64 * *y as f64).sum();
            assert!((dot(&a, &b) as f64 - reference).abs() < 1e-4, "n={n}");
            assert!((dot_portable(&a, &b) as f64 - reference).abs() < 1e-4, "n={n}");
        }
        let q: Vec<f32> = (0..20).map(|_| next()).collect();
        let rows: Vec<f32> = (0..20 * 5).map(|_| next()).collect();
        for n in [0usize, 1, 15, 16, 17, 31, 32, 33, 48, 384, 385] {
            let a: Vec<i8> = (0..n).map(|_| (next() * 254.0) as i8).collect();
            let b: Vec<i8> = (0..n).map(|_| (next() * 254.0) as i8).collect();
            let reference: i32 = a.iter().zip(&b).map(|(x, y)| *x as i32 * *y as i32).sum();
            assert_eq!(dot_i8(&a, &b), reference, "n={n}");
            assert_eq!(dot_i8_portable(&a, &b), reference, "n={n}");
        }
        for dim in [1usize, 15, 16, 17, 32, 33, 48, 384, 385] {
            let q: Vec<i8> = (0..dim).map(|_| (next() * 254.0) as i8).collect();
            let rows: Vec<i8> = (0..dim * 5).map(|_| (next() * 254.0) as i8).collect();
            let mut out = vec![0i32; 5];
            dot_rows_i8(&q, &rows, &mut out);
            for (i, o) in out.iter().enumerate() {
                assert_eq!(*o, dot_i8_portable(&q, &rows[i * dim..(i + 1) * dim]), "dim={dim}");
            }
        }
        let mut out = vec![0.0; 5];
        dot_rows(&q, &rows, &mut out);
        for (i, o) in out.iter().enumerate() {
            assert_eq!(*o, dot(&q, &rows[i * 20..(i + 1) * 20]));
        }
    }
}
