//! Deterministic, meaningful embeddings: a signed hashed bag of lower-cased word
//! unigrams and character trigrams, L2-normalised. Texts sharing words (or
//! word pieces) get a higher cosine similarity than unrelated texts.

/// FNV-1a over bytes followed by a splitmix64 finaliser (fast, stable).
fn hash(prefix: u8, bytes: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for &b in std::iter::once(&prefix).chain(bytes) {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    h = (h ^ (h >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    h = (h ^ (h >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    h ^ (h >> 31)
}

fn add(v: &mut [f32], h: u64, weight: f32) {
    let dim = v.len() as u64;
    let idx = (h % dim) as usize;
    let sign = if h >> 63 == 0 { 1.0 } else { -1.0 };
    v[idx] += sign * weight;
}

/// The embedding of `text` with `dim` dimensions (unit length; `dim` ≥ 1).
pub fn embed(text: &str, dim: usize) -> Vec<f32> {
    let dim = dim.max(1);
    let mut v = vec![0f32; dim];
    let lower = text.to_lowercase();
    let mut buf: Vec<char> = Vec::new();
    let mut tri = String::new();
    for word in lower.split(|c: char| !c.is_alphanumeric()).filter(|w| !w.is_empty()) {
        add(&mut v, hash(b'w', word.as_bytes()), 1.0);
        buf.clear();
        buf.push('#');
        buf.extend(word.chars());
        buf.push('#');
        for t in buf.windows(3) {
            tri.clear();
            tri.extend(t);
            add(&mut v, hash(b't', tri.as_bytes()), 0.5);
        }
    }
    let norm = v.iter().map(|x| f64::from(*x) * f64::from(*x)).sum::<f64>().sqrt();
    if norm > 0.0 {
        for x in &mut v {
            *x = (f64::from(*x) / norm) as f32;
        }
    } else {
        // no words at all: a fixed unit vector
        v[(hash(b'e', text.as_bytes()) % dim as u64) as usize] = 1.0;
    }
    v
}

/// Standard base64 (with padding) of the little-endian f32 bytes, as OpenAI's
/// `encoding_format: "base64"` returns.
pub fn to_base64(v: &[f32]) -> String {
    use base64::Engine as _;
    let bytes: Vec<u8> = v.iter().flat_map(|x| x.to_le_bytes()).collect();
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cos(a: &[f32], b: &[f32]) -> f32 {
        a.iter().zip(b).map(|(x, y)| x * y).sum()
    }

    #[test]
    fn normalised_and_deterministic() {
        for t in ["", "hello world", "Ünïcode tëxt ✓"] {
            let v = embed(t, 64);
            assert_eq!(v.len(), 64);
            let n: f32 = v.iter().map(|x| x * x).sum();
            assert!((n - 1.0).abs() < 1e-4, "{t}: {n}");
            assert_eq!(v, embed(t, 64));
        }
    }

    #[test]
    fn similar_texts_are_closer() {
        let a = embed("The port authority expands the container terminal", 384);
        let b = embed("Port authority expanding a container terminal", 384);
        let c = embed("Quantum chromodynamics of gluons", 384);
        assert!(cos(&a, &b) > cos(&a, &c) + 0.3);
    }

    #[test]
    fn base64_roundtrip_len() {
        assert_eq!(to_base64(&[1.0]), "AACAPw==");
        assert_eq!(to_base64(&[0.0; 3]).len(), 16);
    }
}
