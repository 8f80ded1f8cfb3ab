//! Content-derived identifiers, so reruns produce identical ids.

use sha2::{Digest, Sha256, Sha512};

/// Hex sha512 of the concatenated parts (GraphRAG hashes document and chunk text with sha512).
pub fn sha512_hex(parts: &[&[u8]]) -> String {
    let mut h = Sha512::new();
    for p in parts {
        h.update(p);
    }
    hex::encode(h.finalize())
}

/// Hex sha256 of the concatenated parts, each length-prefixed so that
/// ("ab","c") and ("a","bc") differ. Used for cache keys and step hashes.
pub fn sha256_hex(parts: &[&[u8]]) -> String {
    let mut h = Sha256::new();
    for p in parts {
        h.update((p.len() as u64).to_le_bytes());
        h.update(p);
    }
    hex::encode(h.finalize())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sha512_matches_reference() {
        // python: hashlib.sha512(b"abc").hexdigest()
        assert!(sha512_hex(&[b"abc"]).starts_with("ddaf35a193617aba"));
        assert_eq!(sha512_hex(&[b"a", b"bc"]), sha512_hex(&[b"abc"]));
    }

    #[test]
    fn sha256_parts_are_unambiguous() {
        assert_ne!(sha256_hex(&[b"ab", b"c"]), sha256_hex(&[b"a", b"bc"]));
    }
}
