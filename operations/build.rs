//! Stores the byte-pair tables of the tiktoken encodings in postcard's format
//! for `tokenizer.rs` to embed. bpe-openai embeds them in MessagePack, whose
//! decoding (every byte and id parsed one by one) was about half of a cold
//! `query` process's CPU; postcard reads the same tables several times faster.
//! The tables are bpe-openai's own: its version in Cargo.lock decides them.

use std::path::PathBuf;

fn main() {
    let out = PathBuf::from(std::env::var_os("OUT_DIR").expect("cargo sets OUT_DIR"));
    for (name, tokenizer) in [("o200k_base", bpe_openai::o200k_base()), ("cl100k_base", bpe_openai::cl100k_base())] {
        let bytes = postcard::to_allocvec(&tokenizer.bpe).expect("the byte-pair tables serialize");
        std::fs::write(out.join(format!("{name}.postcard")), bytes).expect("OUT_DIR is writable");
    }
    println!("cargo::rerun-if-changed=build.rs");
}
