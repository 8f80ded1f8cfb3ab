//! How an embedding vector is kept in the answer cache: `#f32le:` then the
//! base64 (standard alphabet, padded) of its floats as little-endian f32,
//! about 5.3 bytes a float where decimal JSON took about 13 (a 3,072-float
//! vector: 16 KB, not 39 KB), and read without parsing decimals. The bytes
//! are the f32 values the engine computed or decoded, so a vector reads back
//! bit for bit (and the outputs built from it byte for byte).
//!
//! `#` starts no JSON text, so the form is told apart from the decimal
//! JSON array that older versions wrote (`[0.1,…]`), which still reads.
//! Neither holds a line break or a tab: both fit a segment's line.

use base64::engine::general_purpose::STANDARD;
use base64::Engine as _;

const PREFIX: &[u8] = b"#f32le:";

/// The cached form of `vector`.
pub(super) fn encode(vector: &[f32]) -> Vec<u8> {
    let raw: Vec<u8> = vector.iter().flat_map(|f| f.to_le_bytes()).collect();
    let mut out = Vec::with_capacity(PREFIX.len() + raw.len().div_ceil(3) * 4);
    out.extend_from_slice(PREFIX);
    out.extend_from_slice(STANDARD.encode(raw).as_bytes());
    out
}

/// The vector a cached form holds: this module's, or an older decimal JSON
/// array; why not when it reads as neither.
pub(super) fn decode(bytes: &[u8]) -> Result<Vec<f32>, String> {
    let Some(encoded) = bytes.strip_prefix(PREFIX) else {
        return serde_json::from_slice(bytes).map_err(|e| e.to_string());
    };
    let raw = STANDARD.decode(encoded).map_err(|e| format!("not base64: {e}"))?;
    if raw.len() % 4 != 0 {
        return Err(format!("{} bytes: not a whole number of f32", raw.len()));
    }
    Ok(raw.chunks_exact(4).map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]])).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_vector_reads_back_bit_for_bit_in_about_a_third_of_the_decimal_bytes() {
        let vector: Vec<f32> = (0..3072).map(|i| ((i as f32) * 0.618_034).sin() / 7.0).collect();
        let odd = vec![f32::MIN_POSITIVE, -0.0, f32::from_bits(1), f32::MAX, 0.1, -1.0 / 3.0];
        for v in [&vector, &odd, &Vec::new()] {
            let back = decode(&encode(v)).unwrap();
            assert_eq!(
                back.iter().map(|f| f.to_bits()).collect::<Vec<_>>(),
                v.iter().map(|f| f.to_bits()).collect::<Vec<_>>()
            );
        }
        let (compact, decimal) = (encode(&vector).len(), serde_json::to_vec(&vector).unwrap().len());
        assert!(compact * 2 < decimal, "{compact} bytes, as decimal JSON {decimal}");
        assert!(!encode(&vector).iter().any(|&b| b == b'\n' || b == b'\t'), "fits a segment's line");
    }

    #[test]
    fn an_older_decimal_entry_still_reads_and_a_damaged_one_is_refused() {
        assert_eq!(decode(b"[0.5,-2.25]").unwrap(), [0.5, -2.25]);
        let mut cut = encode(&[1.0, 2.0]);
        cut.truncate(cut.len() - 3);
        assert!(decode(&cut).is_err(), "cut short");
        assert!(decode(b"#f32le:AAAA").is_err(), "3 bytes: no whole f32");
        assert!(decode(b"[0.5,").is_err());
    }
}
