//! Binary format of a saved HNSW index (all integers little-endian).
//!
//! ```text
//! offset  size  field
//!      0     8  magic  b"GRVHNSW\0"
//!      8     4  format version (u32) = 1
//!     12     4  dimension (u32)
//!     16     8  vector count n (u64)
//!     24     4  M (u32)
//!     28     4  M0, max links on layer 0 (u32) = 2·M
//!     32     4  ef_construction (u32)
//!     36     4  ef_search (u32)
//!     40     8  level seed (u64)
//!     48     8  checksum of the ids, in row order (u64)
//!     56     8  fingerprint of the vectors (u64, up to 1024 sampled rows)
//!     64     4  entry point (u32)
//!     68     4  max level (u32)
//!     72     n  level of every node (u8 each)
//!      …        layer 0: per node, link count (u32) then the links (u32 each)
//!      …        upper layers: per node with level ≥ 1, for each level 1..=level,
//!               link count (u32) then the links (u32 each)
//!   end-8     8  checksum of every byte before it (u64)
//! ```
//!
//! Loading checks the magic, version, dimension, count, ids checksum, vector
//! fingerprint and trailing checksum, and that every link is in range.

use crate::hnsw::{Hnsw, Quantized, Rows, MAX_LEVEL};
use crate::VectorError;

pub(crate) const MAGIC: &[u8; 8] = b"GRVHNSW\0";
pub(crate) const VERSION: u32 = 1;
const HEADER_LEN: usize = 72;

/// Streaming 64-bit hash over bytes (word-wise multiply/xor, SplitMix
/// finaliser). Not cryptographic: it detects corruption and mismatches.
pub(crate) struct Hasher {
    h: u64,
    buf: [u8; 8],
    fill: usize,
    len: u64,
}

impl Hasher {
    pub fn new() -> Self {
        Hasher { h: 0x243F_6A88_85A3_08D3, buf: [0; 8], fill: 0, len: 0 }
    }

    #[inline]
    fn word(&mut self, w: u64) {
        self.h = (self.h ^ w).wrapping_mul(0x9E37_79B9_7F4A_7C15).rotate_left(29);
    }

    pub fn write(&mut self, mut bytes: &[u8]) {
        self.len += bytes.len() as u64;
        if self.fill > 0 {
            let take = (8 - self.fill).min(bytes.len());
            self.buf[self.fill..self.fill + take].copy_from_slice(&bytes[..take]);
            self.fill += take;
            bytes = &bytes[take..];
            if self.fill < 8 {
                return;
            }
            self.word(u64::from_le_bytes(self.buf));
            self.fill = 0;
        }
        let chunks = bytes.chunks_exact(8);
        let rest = chunks.remainder();
        for c in chunks {
            self.word(u64::from_le_bytes(c.try_into().expect("8 bytes")));
        }
        self.buf[..rest.len()].copy_from_slice(rest);
        self.fill = rest.len();
    }

    pub fn finish(mut self) -> u64 {
        if self.fill > 0 {
            self.buf[self.fill..].fill(0);
            self.word(u64::from_le_bytes(self.buf));
        }
        self.word(self.len);
        let mut z = self.h;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
}

pub(crate) fn hash_bytes(bytes: &[u8]) -> u64 {
    let mut h = Hasher::new();
    h.write(bytes);
    h.finish()
}

pub(crate) fn ids_checksum(ids: &[String]) -> u64 {
    let mut h = Hasher::new();
    for id in ids {
        h.write(&(id.len() as u64).to_le_bytes());
        h.write(id.as_bytes());
    }
    h.finish()
}

/// Hash of the bit patterns of up to 1024 evenly spaced rows.
pub(crate) fn vectors_fingerprint(data: &[f32], dim: usize, n: usize) -> u64 {
    let mut h = Hasher::new();
    h.write(&(n as u64).to_le_bytes());
    if n > 0 && dim > 0 {
        let samples = n.min(1024);
        for s in 0..samples {
            let i = s * n / samples;
            for x in &data[i * dim..(i + 1) * dim] {
                h.write(&x.to_bits().to_le_bytes());
            }
        }
    }
    h.finish()
}

pub(crate) fn encode(g: &Hnsw, dim: usize, ids_sum: u64, vec_sum: u64) -> Vec<u8> {
    let n = g.len();
    let mut out: Vec<u8> = Vec::with_capacity(HEADER_LEN + n * (1 + 4 * (g.m + 1)) + 8);
    out.extend_from_slice(MAGIC);
    out.extend_from_slice(&VERSION.to_le_bytes());
    out.extend_from_slice(&(dim as u32).to_le_bytes());
    out.extend_from_slice(&(n as u64).to_le_bytes());
    out.extend_from_slice(&(g.m as u32).to_le_bytes());
    out.extend_from_slice(&(g.m0 as u32).to_le_bytes());
    out.extend_from_slice(&(g.ef_construction as u32).to_le_bytes());
    out.extend_from_slice(&(g.ef_search as u32).to_le_bytes());
    out.extend_from_slice(&g.seed.to_le_bytes());
    out.extend_from_slice(&ids_sum.to_le_bytes());
    out.extend_from_slice(&vec_sum.to_le_bytes());
    out.extend_from_slice(&g.entry.to_le_bytes());
    out.extend_from_slice(&(g.max_level as u32).to_le_bytes());
    debug_assert_eq!(out.len(), HEADER_LEN);
    out.extend_from_slice(&g.levels);
    let put_list = |out: &mut Vec<u8>, links: &[u32]| {
        out.extend_from_slice(&(links.len() as u32).to_le_bytes());
        for l in links {
            out.extend_from_slice(&l.to_le_bytes());
        }
    };
    for u in 0..n as u32 {
        put_list(&mut out, g.neighbours(u, 0));
    }
    for u in 0..n as u32 {
        for l in 1..=g.levels[u as usize] as usize {
            put_list(&mut out, g.neighbours(u, l));
        }
    }
    let sum = hash_bytes(&out);
    out.extend_from_slice(&sum.to_le_bytes());
    out
}

struct Reader<'a> {
    bytes: &'a [u8],
    pos: usize,
}

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8], VectorError> {
        if self.bytes.len() - self.pos < n {
            return Err(corrupt("the index data is truncated"));
        }
        let s = &self.bytes[self.pos..self.pos + n];
        self.pos += n;
        Ok(s)
    }
    fn u32(&mut self) -> Result<u32, VectorError> {
        Ok(u32::from_le_bytes(self.take(4)?.try_into().expect("4")))
    }
    fn u64(&mut self) -> Result<u64, VectorError> {
        Ok(u64::from_le_bytes(self.take(8)?.try_into().expect("8")))
    }
}

fn corrupt(what: &str) -> VectorError {
    VectorError::Corrupt(format!("HNSW index: {what}"))
}

fn mismatch(what: String) -> VectorError {
    VectorError::Corrupt(format!(
        "HNSW index does not belong to this collection ({what}); \
         delete it or re-run `graphrag-rs index` to rebuild it"
    ))
}

pub(crate) fn decode(bytes: &[u8], rows: Rows, ids_sum: u64, vec_sum: u64) -> Result<Hnsw, VectorError> {
    let (dim, n) = (rows.dim, rows.len());
    if bytes.len() < HEADER_LEN + 8 || &bytes[..8] != MAGIC {
        return Err(corrupt("not an HNSW index file (bad magic number)"));
    }
    let body_len = bytes.len() - 8;
    let stored_sum = u64::from_le_bytes(bytes[body_len..].try_into().expect("8"));
    let mut r = Reader { bytes: &bytes[..body_len], pos: 8 };
    let version = r.u32()?;
    if version != VERSION {
        return Err(corrupt(&format!("unsupported format version {version} (this build reads version {VERSION})")));
    }
    if hash_bytes(&bytes[..body_len]) != stored_sum {
        return Err(corrupt("checksum mismatch (the file is damaged)"));
    }
    let f_dim = r.u32()? as usize;
    let f_n = r.u64()?;
    let m = r.u32()? as usize;
    let m0 = r.u32()? as usize;
    let ef_construction = r.u32()? as usize;
    let ef_search = r.u32()? as usize;
    let seed = r.u64()?;
    let f_ids = r.u64()?;
    let f_vecs = r.u64()?;
    let entry = r.u32()?;
    let max_level = r.u32()?;
    if f_dim != dim {
        return Err(mismatch(format!("index dimension {f_dim}, collection dimension {dim}")));
    }
    if f_n != n as u64 {
        return Err(mismatch(format!("index has {f_n} vectors, collection has {n}")));
    }
    if f_ids != ids_sum {
        return Err(mismatch("the ids differ".to_string()));
    }
    if f_vecs != vec_sum {
        return Err(mismatch("the vectors differ".to_string()));
    }
    if !(2..=4096).contains(&m) || m0 != 2 * m {
        return Err(corrupt(&format!("invalid link limits M={m}, M0={m0}")));
    }
    if max_level > MAX_LEVEL as u32 {
        return Err(corrupt(&format!("invalid max level {max_level}")));
    }
    let levels = r.take(n)?.to_vec();
    if let Some(bad) = levels.iter().find(|&&l| l as u32 > max_level) {
        return Err(corrupt(&format!("node level {bad} above the max level {max_level}")));
    }
    if n > 0 {
        if entry as usize >= n || levels[entry as usize] as u32 != max_level {
            return Err(corrupt("invalid entry point"));
        }
    } else if entry != 0 || max_level != 0 {
        return Err(corrupt("invalid entry point"));
    }
    let read_list = |r: &mut Reader, cap: usize, dst: &mut [u32]| -> Result<(), VectorError> {
        let c = r.u32()? as usize;
        if c > cap {
            return Err(corrupt(&format!("{c} links where at most {cap} are allowed")));
        }
        dst[0] = c as u32;
        for slot in dst[1..=c].iter_mut() {
            let v = r.u32()?;
            if v as usize >= n {
                return Err(corrupt(&format!("link to node {v} of {n}")));
            }
            *slot = v;
        }
        Ok(())
    };
    let mut layer0 = vec![0u32; n * (m0 + 1)];
    for u in 0..n {
        read_list(&mut r, m0, &mut layer0[u * (m0 + 1)..(u + 1) * (m0 + 1)])?;
    }
    let mut upper: Vec<Vec<u32>> = Vec::with_capacity(n);
    for &lvl in &levels {
        let mut list = vec![0u32; lvl as usize * (m + 1)];
        for l in 0..lvl as usize {
            read_list(&mut r, m, &mut list[l * (m + 1)..(l + 1) * (m + 1)])?;
        }
        upper.push(list);
    }
    if r.pos != body_len {
        return Err(corrupt("trailing bytes after the graph"));
    }
    Ok(Hnsw {
        m,
        m0,
        ef_construction,
        ef_search,
        seed,
        levels,
        layer0,
        upper,
        entry,
        max_level: max_level as u8,
        quant: Quantized::from_rows(rows),
    })
}
