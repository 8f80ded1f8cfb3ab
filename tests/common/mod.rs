//! Helpers shared by the end-to-end tests (each tests/*.rs file is its own crate).

use std::path::Path;

/// `len` bytes (to a character boundary) of the example corpus, A Christmas
/// Carol, from the first occurrence of `from`.
pub fn carol_passage(from: &str, len: usize) -> String {
    let full = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/christmas-carol/a_christmas_carol.txt"),
    )
    .unwrap();
    let start = full.find(from).unwrap_or_else(|| panic!("`{from}` is not in the example corpus"));
    let mut end = (start + len).min(full.len());
    while !full.is_char_boundary(end) {
        end -= 1;
    }
    full[start..end].to_string()
}
