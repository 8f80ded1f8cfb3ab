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

/// The shard (0 to `count` - 1) of an item of a sharded run — a document by
/// its id, a model request's item (an entity, a question batch, a
/// community) by its key —, from the key alone, so that it does not depend
/// on what else runs: the first 64 bits of its sha256, modulo `count`.
pub fn shard_of(key: &str, count: usize) -> usize {
    let digest = sha256_hex(&[key.as_bytes()]);
    let head = u64::from_str_radix(&digest[..16], 16).expect("hex digest");
    (head % count.max(1) as u64) as usize
}

/// `sha256_hex(&[bytes])` for the `len` bytes `reader` yields, without holding
/// them all in memory.
pub fn sha256_hex_of_reader(len: u64, mut reader: impl std::io::Read) -> std::io::Result<String> {
    let mut h = Sha256::new();
    h.update(len.to_le_bytes());
    let mut block = vec![0u8; 1 << 16];
    let mut read = 0u64;
    loop {
        let n = reader.read(&mut block)?;
        if n == 0 {
            break;
        }
        h.update(&block[..n]);
        read += n as u64;
    }
    if read != len {
        return Err(std::io::Error::other(format!("expected {len} bytes, read {read}")));
    }
    Ok(hex::encode(h.finalize()))
}

/// A deterministic UUID (version 5 layout, sha256-based) for `kind` and the
/// parts: same graph element → same id on every run.
pub fn stable_uuid(kind: &str, parts: &[&str]) -> String {
    let mut bytes: Vec<&[u8]> = vec![kind.as_bytes()];
    bytes.extend(parts.iter().map(|p| p.as_bytes()));
    let h = sha256_hex(&bytes);
    let mut b: Vec<char> = h[..32].chars().collect();
    b[12] = '5';
    b[16] = ['8', '9', 'a', 'b'][(b[16].to_digit(16).unwrap_or(0) & 3) as usize];
    let s: String = b.into_iter().collect();
    format!("{}-{}-{}-{}-{}", &s[..8], &s[8..12], &s[12..16], &s[16..20], &s[20..32])
}

/// The id of the entity titled `title` (entities.parquet's `id`).
pub fn entity_id(title: &str) -> String {
    stable_uuid("entity", &[title])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reader_hash_matches_in_memory_hash() {
        let bytes: Vec<u8> = (0..200_000u32).map(|i| (i % 251) as u8).collect();
        assert_eq!(sha256_hex_of_reader(bytes.len() as u64, &bytes[..]).unwrap(), sha256_hex(&[&bytes]));
        assert_ne!(sha256_hex(&[b"ab"]), sha256_hex(&[b"a", b"b"]));
        assert!(sha256_hex_of_reader(3, &b"ab"[..]).is_err());
    }

    #[test]
    fn sha512_matches_reference() {
        // python: hashlib.sha512(b"abc").hexdigest()
        assert!(sha512_hex(&[b"abc"]).starts_with("ddaf35a193617aba"));
        assert_eq!(sha512_hex(&[b"a", b"bc"]), sha512_hex(&[b"abc"]));
    }

    #[test]
    fn stable_uuids_look_like_uuids() {
        let a = stable_uuid("entity", &["SCROOGE"]);
        assert_eq!(a, stable_uuid("entity", &["SCROOGE"]));
        assert_ne!(a, stable_uuid("entity", &["MARLEY"]));
        assert_eq!(a.len(), 36);
        assert_eq!(&a[14..15], "5");
        assert!("89ab".contains(&a[19..20]));
    }

    #[test]
    fn sha256_parts_are_unambiguous() {
        assert_ne!(sha256_hex(&[b"ab", b"c"]), sha256_hex(&[b"a", b"bc"]));
    }
}
