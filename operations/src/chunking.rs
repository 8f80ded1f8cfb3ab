//! Splitting a document's text into token-bounded chunks.
//!
//! Chunks are byte ranges of the original text, always on UTF-8 character
//! boundaries, so a chunk's text is a plain slice and nothing is re-decoded.
//! `n_tokens` is the exact token count of the chunk's own text.

use std::ops::Range;
use std::sync::OnceLock;

use regex::Regex;
use serde::{Deserialize, Serialize};

use crate::tokenizer::Encoding;

/// Written `tokens` or `sentence` (GraphRAG's `chunking.type`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Strategy {
    /// Fixed windows of `size` tokens advancing by `size - overlap` (GraphRAG's `tokens`).
    #[serde(rename = "tokens")]
    Tokens,
    /// Whole sentences packed up to `size` tokens; the overlap is made of whole
    /// trailing sentences. A sentence longer than `size` is split by tokens.
    #[serde(rename = "sentence")]
    Sentences,
}

#[derive(Debug, Clone, Copy)]
pub struct ChunkConfig {
    pub size: usize,
    pub overlap: usize,
    pub encoding: Encoding,
    pub strategy: Strategy,
}

impl ChunkConfig {
    /// Checks the size/overlap relation; the message names the offending values.
    pub fn validate(&self) -> Result<(), String> {
        if self.size == 0 {
            return Err("size must be at least 1 token".into());
        }
        if self.overlap >= self.size {
            return Err(format!("overlap ({}) must be smaller than size ({})", self.overlap, self.size));
        }
        Ok(())
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Chunk {
    /// Byte range in the document text.
    pub range: Range<usize>,
    pub n_tokens: usize,
}

/// Splits `text` into chunks. Whitespace-only chunks are dropped.
pub fn chunk_text(text: &str, cfg: &ChunkConfig) -> Vec<Chunk> {
    let keep = |r: &Range<usize>| !text[r.clone()].trim().is_empty();
    match cfg.strategy {
        Strategy::Tokens => {
            let (tokens, pieces) = cfg.encoding.encode_with_pieces(text);
            token_windows(text, &tokens, 0, cfg)
                .into_iter()
                .filter(keep)
                .map(|range| Chunk { n_tokens: cfg.encoding.count_slice(text, range.clone(), &pieces), range })
                .collect()
        }
        Strategy::Sentences => sentence_packs(text, cfg)
            .into_iter()
            .filter(keep)
            .map(|range| Chunk { n_tokens: cfg.encoding.count(&text[range.clone()]), range })
            .collect(),
    }
}

/// Token windows over `text` (whose tokens are `tokens`), as byte ranges shifted by `base`.
fn token_windows(text: &str, tokens: &[u32], base: usize, cfg: &ChunkConfig) -> Vec<Range<usize>> {
    let n = tokens.len();
    let mut offsets = Vec::with_capacity(n + 1);
    offsets.push(0usize);
    let mut acc = 0;
    for &t in tokens {
        acc += cfg.encoding.token_len(t);
        offsets.push(acc);
    }
    // A token may end inside a multi-byte character (byte-level BPE); only
    // token positions on a character boundary may start or end a chunk.
    let aligned = |i: usize| text.is_char_boundary(offsets[i]);

    let mut out = Vec::new();
    let mut start = 0;
    let mut prev_end = 0;
    while start < n {
        let mut end = (start + cfg.size).min(n);
        while end > start + 1 && !aligned(end) {
            end -= 1;
        }
        if end <= prev_end {
            // Tiny windows over multi-token characters: move past the previous chunk.
            end = prev_end + 1;
        }
        while !aligned(end) {
            // Even one token ends mid-character: extend to the character's end.
            end += 1;
        }
        prev_end = end;
        out.push(base + offsets[start]..base + offsets[end]);
        if end == n {
            break;
        }
        let mut next = end.saturating_sub(cfg.overlap).max(start + 1);
        while next > start + 1 && !aligned(next) {
            next -= 1;
        }
        start = if aligned(next) && next > start { next } else { end };
    }
    out
}

fn sentence_end() -> &'static Regex {
    static RE: OnceLock<Regex> = OnceLock::new();
    RE.get_or_init(|| {
        // A run of terminators (Latin and CJK), optional closing quotes or
        // brackets, then whitespace; or a blank line (paragraph break).
        Regex::new(r#"[.!?。！？]+["'”’»)\]]*(\s+|$)|[。！？]+|\n[ \t]*\n\s*"#).unwrap()
    })
}

/// Sentence byte ranges that together cover `text` exactly.
pub fn sentences(text: &str) -> Vec<Range<usize>> {
    let mut out = Vec::new();
    let mut start = 0;
    for m in sentence_end().find_iter(text) {
        if m.end() > start {
            out.push(start..m.end());
            start = m.end();
        }
    }
    if start < text.len() {
        out.push(start..text.len());
    }
    out
}

fn sentence_packs(text: &str, cfg: &ChunkConfig) -> Vec<Range<usize>> {
    let mut out = Vec::new();
    // (range, tokens) of the sentences in the chunk being built.
    let mut current: Vec<(Range<usize>, usize)> = Vec::new();
    let mut current_tokens = 0;
    let mut has_new = false;

    let flush = |current: &mut Vec<(Range<usize>, usize)>, current_tokens: &mut usize, out: &mut Vec<Range<usize>>| {
        let first = current.first().map(|(r, _)| r.start).unwrap_or(0);
        let last = current.last().map(|(r, _)| r.end).unwrap_or(0);
        out.push(first..last);
        // Carry whole trailing sentences that fit in the overlap.
        let mut kept = 0;
        let mut carry = 0;
        for (_, t) in current.iter().rev() {
            if carry + t > cfg.overlap {
                break;
            }
            carry += t;
            kept += 1;
        }
        current.drain(..current.len() - kept);
        *current_tokens = carry;
    };

    for range in sentences(text) {
        let tokens = cfg.encoding.count(&text[range.clone()]);
        if tokens > cfg.size {
            if has_new {
                flush(&mut current, &mut current_tokens, &mut out);
            }
            let sentence = &text[range.clone()];
            out.extend(token_windows(sentence, &cfg.encoding.encode(sentence), range.start, cfg));
            current.clear();
            current_tokens = 0;
            has_new = false;
            continue;
        }
        if current_tokens + tokens > cfg.size && has_new {
            flush(&mut current, &mut current_tokens, &mut out);
            // The carried overlap plus this sentence may still be too big.
            while current_tokens + tokens > cfg.size && !current.is_empty() {
                let (_, t) = current.remove(0);
                current_tokens -= t;
            }
        }
        current.push((range, tokens));
        current_tokens += tokens;
        has_new = true;
    }
    if has_new {
        flush(&mut current, &mut current_tokens, &mut out);
    }
    out
}

/// `text` cut at whitespace into pieces of at most `limit` tokens, words
/// counted one by one with `count` (not the growing piece again per word,
/// which is quadratic in the length). A single word longer than `limit` is
/// a piece of its own; pieces of whitespace alone are dropped at the end.
pub fn pack_words(text: &str, limit: usize, count: impl Fn(&str) -> usize) -> Vec<String> {
    let mut pieces = Vec::new();
    let mut current = String::new();
    let mut used = 0;
    for word in text.split_inclusive(char::is_whitespace) {
        let n = count(word);
        if used + n > limit && !current.is_empty() {
            pieces.push(std::mem::take(&mut current));
            used = 0;
        }
        current.push_str(word);
        used += n;
    }
    if !current.trim().is_empty() {
        pieces.push(current);
    }
    pieces
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg(size: usize, overlap: usize, strategy: Strategy) -> ChunkConfig {
        ChunkConfig { size, overlap, encoding: Encoding::O200kBase, strategy }
    }

    const PROSE: &str = "Marley was dead: to begin with. There is no doubt whatever about that. \
        The register of his burial was signed by the clergyman, the clerk, the undertaker, and the \
        chief mourner. Scrooge signed it. And Scrooge's name was good upon 'Change, for anything he \
        chose to put his hand to. Old Marley was as dead as a door-nail.";

    #[test]
    fn packed_words_rebuild_the_text_within_the_limit() {
        let words = |t: &str| t.split_whitespace().count();
        let pieces = pack_words(PROSE, 7, words);
        assert_eq!(pieces.concat(), PROSE);
        assert!(pieces.iter().all(|p| words(p) <= 7), "{pieces:?}");
        assert_eq!(pieces.len(), PROSE.split_whitespace().count().div_ceil(7));
        // A word longer than the limit is a piece of its own.
        assert_eq!(pack_words("a bbbbbbbb c", 3, |w| w.trim().len()), ["a ", "bbbbbbbb ", "c"]);
    }

    /// The chunks, minus their overlap with the previous chunk, rebuild the
    /// text (only whitespace-only pieces may be left out).
    fn assert_covers(text: &str, chunks: &[Chunk]) {
        let mut pos = 0;
        for c in chunks {
            assert!(c.range.start <= pos || text[pos..c.range.start].trim().is_empty(), "gap before {:?}", c.range);
            assert!(c.range.end > pos, "chunk {:?} adds nothing", c.range);
            pos = c.range.end;
        }
        assert!(text[pos..].trim().is_empty());
    }

    #[test]
    fn token_windows_respect_size_and_overlap() {
        let c = cfg(20, 5, Strategy::Tokens);
        let chunks = chunk_text(PROSE, &c);
        assert!(chunks.len() > 3);
        assert_covers(PROSE, &chunks);
        let enc = Encoding::O200kBase;
        let all = enc.encode(PROSE);
        // Windows are exact token windows of the document's own encoding.
        let mut starts = vec![0usize];
        let mut offs = 0;
        let mut token_starts = vec![0usize];
        for t in &all {
            offs += enc.token_len(*t);
            token_starts.push(offs);
        }
        for (i, ch) in chunks.iter().enumerate() {
            let s = token_starts.iter().position(|&o| o == ch.range.start).unwrap();
            let e = token_starts.iter().position(|&o| o == ch.range.end).unwrap();
            assert!(e - s <= 20, "window {i} has {} tokens", e - s);
            if i + 1 < chunks.len() {
                assert_eq!(e - s, 20);
            }
            if i > 0 {
                let prev_end = token_starts.iter().position(|&o| o == chunks[i - 1].range.end).unwrap();
                assert_eq!(prev_end - s, 5, "overlap of chunk {i}");
            }
            starts.push(s);
            assert_eq!(ch.n_tokens, enc.count(&PROSE[ch.range.clone()]));
        }
    }

    #[test]
    fn zero_overlap_partitions_the_text() {
        let chunks = chunk_text(PROSE, &cfg(16, 0, Strategy::Tokens));
        for w in chunks.windows(2) {
            assert_eq!(w[0].range.end, w[1].range.start);
        }
        assert_covers(PROSE, &chunks);
    }

    #[test]
    fn never_splits_inside_a_character() {
        let text = "圣诞颂歌是狄更斯的小说。🎄🎅🏽 Ебенезер Скрудж — скупец. 👨‍👩‍👧‍👦 fin";
        for size in 1..12 {
            for overlap in 0..size {
                for strategy in [Strategy::Tokens, Strategy::Sentences] {
                    let chunks = chunk_text(text, &cfg(size, overlap, strategy));
                    assert_covers(text, &chunks);
                    for c in &chunks {
                        assert!(text.is_char_boundary(c.range.start));
                        assert!(text.is_char_boundary(c.range.end));
                        assert_eq!(c.n_tokens, Encoding::O200kBase.count(&text[c.range.clone()]));
                    }
                }
            }
        }
    }

    #[test]
    fn empty_and_short_texts() {
        assert!(chunk_text("", &cfg(10, 2, Strategy::Tokens)).is_empty());
        assert!(chunk_text("  \n\n ", &cfg(10, 2, Strategy::Sentences)).is_empty());
        let one = chunk_text("Hello there.", &cfg(100, 10, Strategy::Tokens));
        assert_eq!(one.len(), 1);
        assert_eq!(one[0].range, 0..12);
    }

    #[test]
    fn sentence_mode_keeps_sentences_whole() {
        let c = cfg(30, 10, Strategy::Sentences);
        let chunks = chunk_text(PROSE, &c);
        assert!(chunks.len() > 1);
        assert_covers(PROSE, &chunks);
        let bounds: Vec<usize> = sentences(PROSE).iter().map(|r| r.start).collect();
        for ch in &chunks {
            assert!(bounds.contains(&ch.range.start), "{:?}", &PROSE[ch.range.clone()]);
            assert!(ch.n_tokens <= 30);
        }
        // Consecutive chunks share whole sentences (overlap) or touch.
        for w in chunks.windows(2) {
            assert!(w[1].range.start <= w[0].range.end);
        }
    }

    #[test]
    fn sentences_cover_text_including_cjk() {
        let text = "第一句。第二句！Third one? Fourth.\n\nNew paragraph";
        let s = sentences(text);
        assert_eq!(s.first().unwrap().start, 0);
        assert_eq!(s.last().unwrap().end, text.len());
        assert!(s.len() >= 5, "{:?}", s.iter().map(|r| &text[r.clone()]).collect::<Vec<_>>());
    }

    #[test]
    fn huge_document_chunks_linearly() {
        let text = PROSE.repeat(2000); // ~700 KB
        let chunks = chunk_text(&text, &cfg(1200, 100, Strategy::Tokens));
        assert_covers(&text, &chunks);
        assert!(chunks.iter().all(|c| c.n_tokens <= 1202));
    }

    #[test]
    fn validate_rejects_bad_sizes() {
        assert!(cfg(10, 10, Strategy::Tokens).validate().is_err());
        assert!(cfg(0, 0, Strategy::Tokens).validate().is_err());
        assert!(cfg(10, 9, Strategy::Tokens).validate().is_ok());
    }
}
