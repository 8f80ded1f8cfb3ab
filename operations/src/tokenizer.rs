//! tiktoken-compatible token counting and encoding, offline (ranks are embedded).
//!
//! The byte-pair tables are bpe-openai's, stored by `build.rs` in postcard's
//! format (see there why); the pre-tokenizer patterns are tiktoken's, as
//! bpe-openai writes them (a test holds both to bpe-openai's tokenizers).

use std::cell::RefCell;
use std::collections::HashMap;
use std::fmt;
use std::str::FromStr;
use std::sync::LazyLock;

use bpe_openai::Tokenizer;

/// Pieces longer than this (bytes) are counted, never remembered.
const MAX_REMEMBERED_PIECE: usize = 48;
/// Remembered pieces per encoding and thread; the memory is cleared when full.
const MAX_REMEMBERED_PIECES: usize = 1 << 16;

thread_local! {
    /// Token counts of the pre-tokenizer pieces this thread has counted, per
    /// encoding. Counting a piece runs the BPE over it from scratch (a fresh
    /// encoder, merge-table lookups): that was most of a query's CPU, while
    /// the pieces of natural text are mostly recurring words.
    static PIECE_COUNTS: RefCell<[HashMap<Box<str>, u32>; 2]> = RefCell::new([HashMap::new(), HashMap::new()]);
}

/// The tiktoken encodings graphrag-rs can chunk and count with.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Encoding {
    O200kBase,
    Cl100kBase,
}

impl Encoding {
    pub const NAMES: [&'static str; 2] = ["o200k_base", "cl100k_base"];

    pub fn name(self) -> &'static str {
        match self {
            Encoding::O200kBase => "o200k_base",
            Encoding::Cl100kBase => "cl100k_base",
        }
    }

    pub fn tokenizer(self) -> &'static Tokenizer {
        match self {
            Encoding::O200kBase => &O200K_BASE,
            Encoding::Cl100kBase => &CL100K_BASE,
        }
    }

    /// Number of tokens `text` encodes to: the sum over its pre-tokenizer
    /// pieces, each counted once per thread (see `PIECE_COUNTS`).
    pub fn count(self, text: &str) -> usize {
        let tok = self.tokenizer();
        PIECE_COUNTS.with(|memory| {
            let mut memory = memory.borrow_mut();
            let seen = &mut memory[self as usize];
            tok.split(text)
                .map(|piece| {
                    if piece.len() > MAX_REMEMBERED_PIECE {
                        return tok.bpe.count(piece.as_bytes());
                    }
                    if let Some(&n) = seen.get(piece) {
                        return n as usize;
                    }
                    let n = tok.bpe.count(piece.as_bytes());
                    if seen.len() >= MAX_REMEMBERED_PIECES {
                        seen.clear();
                    }
                    seen.insert(piece.into(), n as u32);
                    n
                })
                .sum()
        })
    }

    /// Token ids of `text`.
    pub fn encode(self, text: &str) -> Vec<u32> {
        self.tokenizer().encode(text)
    }

    /// Byte length of each token id (o200k/cl100k do not normalise, so token
    /// bytes map one to one onto the input bytes).
    pub fn token_len(self, token: u32) -> usize {
        self.tokenizer().bpe.token_len(token)
    }
}

/// tiktoken's o200k_base pre-tokenizer with its negative look-ahead
/// `\s+(?!\S)` written as a one-character look-ahead pattern (`\s+\s`),
/// as bpe-openai does.
static O200K_BASE: LazyLock<Tokenizer> = LazyLock::new(|| {
    let words = [
        "[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]*[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?",
        "[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]+[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?",
        "\\p{N}{1,3}",
        " ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*",
        "\\s*[\\r\\n]+",
        "\\s+$",
    ]
    .join("|");
    tokenizer(include_bytes!(concat!(env!("OUT_DIR"), "/o200k_base.postcard")), &words)
});

/// tiktoken's cl100k_base pre-tokenizer, written as for [`O200K_BASE`].
static CL100K_BASE: LazyLock<Tokenizer> = LazyLock::new(|| {
    let words = "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+$";
    tokenizer(include_bytes!(concat!(env!("OUT_DIR"), "/cl100k_base.postcard")), words)
});

/// A tokenizer from byte-pair tables stored by `build.rs` and the words
/// pattern of its pre-tokenizer (the whitespace patterns are the same for
/// both encodings). Neither can fail but by a broken build.
fn tokenizer(tables: &[u8], words: &str) -> Tokenizer {
    let bpe = postcard::from_bytes(tables).expect("build.rs stored valid byte-pair tables");
    Tokenizer::new_lookahead(bpe, &[(words, false), ("\\s+\\s", true), ("\\s+", false)], false)
        .expect("the pre-tokenizer patterns compile")
}

/// The pre-tokenizer pieces of a text with their token counts: the exact
/// count of a slice then needs the tokenizer only near the slice's edges,
/// where its pieces may split differently from the whole text's.
#[derive(Debug, Default)]
pub struct Pieces {
    starts: Vec<usize>,
    ends: Vec<usize>,
    /// Tokens before each piece (one more entry than pieces).
    cumulative: Vec<usize>,
}

/// Pieces kept away from a slice's end: the pre-tokenizer looks one
/// character ahead, so the last pieces before the end may split differently.
const TAIL_PIECES: usize = 2;

impl Encoding {
    /// Token ids of `text` and its pieces.
    pub fn encode_with_pieces(self, text: &str) -> (Vec<u32>, Pieces) {
        let tok = self.tokenizer();
        let mut tokens = Vec::with_capacity(text.len() / 3);
        let mut pieces = Pieces { cumulative: vec![0], ..Pieces::default() };
        for piece in tok.split(text) {
            let start = piece.as_ptr() as usize - text.as_ptr() as usize;
            tokens.extend(tok.bpe.encode_via_backtracking(piece.as_bytes()));
            pieces.starts.push(start);
            pieces.ends.push(start + piece.len());
            pieces.cumulative.push(tokens.len());
        }
        (tokens, pieces)
    }

    /// Exact token count of `text[range]` (what `count` would return). The
    /// slice is re-tokenized only until its pieces line up with the whole
    /// text's, and over its last few pieces; the middle comes from `pieces`.
    pub fn count_slice(self, text: &str, range: std::ops::Range<usize>, pieces: &Pieces) -> usize {
        let tok = self.tokenizer();
        let count_from =
            |from: usize| -> usize { tok.split(&text[from..range.end]).map(|p| tok.bpe.count(p.as_bytes())).sum() };
        let slice = &text[range.clone()];
        let mut head = 0;
        for piece in tok.split(slice) {
            let start = range.start + (piece.as_ptr() as usize - slice.as_ptr() as usize);
            let end = start + piece.len();
            let i = pieces.starts.partition_point(|&s| s < start);
            let aligned = pieces.starts.get(i) == Some(&start) && pieces.ends.get(i) == Some(&end);
            if !aligned {
                head += tok.bpe.count(piece.as_bytes());
                continue;
            }
            // From here on the slice splits like the whole text, up to its
            // last pieces: take their counts, re-tokenize the tail.
            let last = pieces.ends.partition_point(|&e| e <= range.end);
            if last < i + 1 + TAIL_PIECES {
                return head + count_from(start);
            }
            let tail_from = last - TAIL_PIECES;
            let middle = pieces.cumulative[tail_from] - pieces.cumulative[i];
            return head + middle + count_from(pieces.starts[tail_from]);
        }
        head
    }
}

impl fmt::Display for Encoding {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Encoding {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "o200k_base" => Ok(Encoding::O200kBase),
            "cl100k_base" => Ok(Encoding::Cl100kBase),
            other => Err(format!(
                "unknown encoding `{other}`{}; expected one of {}",
                crate::suggest::did_you_mean(other, Encoding::NAMES),
                Encoding::NAMES.join(", ")
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The tables and patterns of `build.rs` and [`O200K_BASE`] /
    /// [`CL100K_BASE`] are bpe-openai's: same pieces and token ids on a long
    /// real text (every kind of character class the patterns name) and on
    /// arbitrary strings.
    #[test]
    fn encodes_as_bpe_openai_does() {
        let text = include_str!("../../examples/christmas-carol/a_christmas_carol.txt");
        let mixed = "Ünïcödé 123456 x\r\n\n  y\t's 'LL ??? /path/to\n\u{00A0}日本語のテキスト 😀 e\u{301}";
        for (ours, theirs) in
            [(Encoding::O200kBase, bpe_openai::o200k_base()), (Encoding::Cl100kBase, bpe_openai::cl100k_base())]
        {
            for t in [text, mixed] {
                assert_eq!(ours.tokenizer().split(t).collect::<Vec<_>>(), theirs.split(t).collect::<Vec<_>>());
                assert_eq!(ours.encode(t), theirs.encode(t), "{ours}");
            }
        }
    }

    proptest::proptest! {
        #[test]
        fn encodes_arbitrary_text_as_bpe_openai_does(t in "\\PC{0,80}") {
            proptest::prop_assert_eq!(Encoding::O200kBase.encode(&t), bpe_openai::o200k_base().encode(t.as_str()));
            proptest::prop_assert_eq!(Encoding::Cl100kBase.encode(&t), bpe_openai::cl100k_base().encode(t.as_str()));
        }
    }

    #[test]
    fn counts_match_known_tiktoken_values() {
        // Reference counts from tiktoken (python) for these strings.
        assert_eq!(Encoding::Cl100kBase.count("hello world"), 2);
        assert_eq!(Encoding::O200kBase.count("hello world"), 2);
        assert_eq!(Encoding::Cl100kBase.encode("hello world"), vec![15339, 1917]);
        assert_eq!(Encoding::O200kBase.encode("hello world"), vec![24912, 2375]);
    }

    #[test]
    fn remembered_piece_counts_equal_fresh_counts() {
        let texts = [
            "Marley was dead: to begin with. There is no doubt whatever about that.",
            "Marley was dead, dead as a door-nail; 東京 🎄 ok, 1234567 ",
            &"x".repeat(MAX_REMEMBERED_PIECE + 5),
        ];
        for enc in [Encoding::O200kBase, Encoding::Cl100kBase] {
            for _ in 0..2 {
                for t in texts {
                    assert_eq!(enc.count(t), enc.tokenizer().count(t), "{t}");
                }
            }
        }
        // A full memory starts over and still counts right.
        let words: Vec<String> = (0..MAX_REMEMBERED_PIECES + 10).map(|i| format!(" w{i}")).collect();
        let text = words.concat();
        assert_eq!(Encoding::O200kBase.count(&text), Encoding::O200kBase.tokenizer().count(text.as_str()));
    }

    proptest::proptest! {
        #[test]
        fn counts_of_any_text_equal_the_tokenizers(text in "\\PC{0,120}") {
            for enc in [Encoding::O200kBase, Encoding::Cl100kBase] {
                let fresh = enc.tokenizer().count(text.as_str());
                proptest::prop_assert_eq!(enc.count(&text), fresh);
                proptest::prop_assert_eq!(enc.count(&text), fresh, "remembered");
            }
        }
    }

    #[test]
    fn token_lengths_cover_the_input_bytes() {
        let text = "Añejo 東京 🎄 ok";
        let enc = Encoding::O200kBase;
        let total: usize = enc.encode(text).iter().map(|&t| enc.token_len(t)).sum();
        assert_eq!(total, text.len());
    }

    #[test]
    fn slice_counts_equal_fresh_counts() {
        let text = "Marley's ghost said: \"I wear the chain I forged in life.\"  Scrooge   trembled.\n\n  東京 🎄 ok  ";
        for enc in [Encoding::O200kBase, Encoding::Cl100kBase] {
            let (tokens, pieces) = enc.encode_with_pieces(text);
            assert_eq!(tokens, enc.encode(text));
            let bounds: Vec<usize> = (0..=text.len()).filter(|&i| text.is_char_boundary(i)).collect();
            for (i, &a) in bounds.iter().enumerate() {
                for &b in &bounds[i..] {
                    assert_eq!(enc.count_slice(text, a..b, &pieces), enc.count(&text[a..b]), "{a}..{b}");
                }
            }
        }
    }

    #[test]
    fn parse_names_and_suggest() {
        assert_eq!("cl100k_base".parse::<Encoding>(), Ok(Encoding::Cl100kBase));
        let err = "o200k".parse::<Encoding>().unwrap_err();
        assert!(err.contains("did you mean `o200k_base`"), "{err}");
    }
}
