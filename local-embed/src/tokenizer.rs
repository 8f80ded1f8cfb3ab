//! BERT WordPiece tokenizer, behaving like the Hugging Face `tokenizers`
//! pipeline that `tokenizer.json` of all-MiniLM-L6-v2 describes:
//! `BertNormalizer` (clean text, pad CJK ideographs, strip accents via NFD,
//! lower-case) → `BertPreTokenizer` (split on whitespace, isolate punctuation)
//! → `WordPiece` (greedy longest match, `##` continuation, `[UNK]` for
//! unknown or over-long words) → `[CLS] … [SEP]`.
//!
//! The character classes come from the same `unicode_categories` crate that
//! the Hugging Face tokenizer uses, so edge cases (control and format
//! characters, Unicode punctuation, non-spacing marks) agree with it.

use std::collections::HashMap;

use anyhow::{bail, Context, Result};
use unicode_categories::UnicodeCategories;
use unicode_normalization::UnicodeNormalization;

/// Normalisation switches, as in the `BertNormalizer` of `tokenizer.json`.
#[derive(Debug, Clone, Copy)]
pub struct NormalizerOptions {
    pub clean_text: bool,
    pub handle_chinese_chars: bool,
    /// `None` means "same as `lowercase`" (the Hugging Face default).
    pub strip_accents: Option<bool>,
    pub lowercase: bool,
}

impl Default for NormalizerOptions {
    fn default() -> Self {
        NormalizerOptions { clean_text: true, handle_chinese_chars: true, strip_accents: None, lowercase: true }
    }
}

/// A BERT (uncased) WordPiece tokenizer.
#[derive(Debug, Clone)]
pub struct WordPieceTokenizer {
    vocab: HashMap<String, u32>,
    options: NormalizerOptions,
    max_input_chars_per_word: usize,
    continuing_prefix: String,
    unk_id: u32,
    cls_id: u32,
    sep_id: u32,
    pad_id: u32,
}

impl WordPieceTokenizer {
    /// Builds a tokenizer from the lines of `vocab.txt` (one token a line,
    /// the line number is the id).
    pub fn from_vocab_txt(text: &str, options: NormalizerOptions) -> Result<Self> {
        let vocab = text
            .lines()
            .enumerate()
            .map(|(i, line)| (line.trim_end_matches('\r').to_string(), i as u32))
            .collect::<HashMap<_, _>>();
        Self::from_vocab(vocab, options)
    }

    /// Builds a tokenizer from a token → id map.
    pub fn from_vocab(vocab: HashMap<String, u32>, options: NormalizerOptions) -> Result<Self> {
        let id = |t: &str| -> Result<u32> {
            vocab.get(t).copied().with_context(|| format!("the vocabulary has no {t} token"))
        };
        let (unk_id, cls_id, sep_id) = (id("[UNK]")?, id("[CLS]")?, id("[SEP]")?);
        let pad_id = id("[PAD]").unwrap_or(0);
        if vocab.len() < 10 {
            bail!("the vocabulary is too small ({} tokens)", vocab.len());
        }
        Ok(WordPieceTokenizer {
            vocab,
            options,
            max_input_chars_per_word: 100,
            continuing_prefix: "##".to_string(),
            unk_id,
            cls_id,
            sep_id,
            pad_id,
        })
    }

    /// Overrides the WordPiece settings read from `tokenizer.json`.
    pub fn with_wordpiece_options(mut self, max_chars: usize, prefix: &str) -> Self {
        self.max_input_chars_per_word = max_chars;
        self.continuing_prefix = prefix.to_string();
        self
    }

    pub fn vocab_size(&self) -> usize {
        self.vocab.len()
    }
    pub fn cls_id(&self) -> u32 {
        self.cls_id
    }
    pub fn sep_id(&self) -> u32 {
        self.sep_id
    }
    pub fn unk_id(&self) -> u32 {
        self.unk_id
    }
    pub fn pad_id(&self) -> u32 {
        self.pad_id
    }

    /// The normalised text (what the `BertNormalizer` produces).
    pub fn normalize(&self, text: &str) -> String {
        let o = self.options;
        let mut s: String = if o.clean_text {
            text.chars()
                .filter(|&c| !(c == '\0' || c == '\u{fffd}' || is_control(c)))
                .map(|c| if is_whitespace(c) { ' ' } else { c })
                .collect()
        } else {
            text.to_string()
        };
        if o.handle_chinese_chars && s.chars().any(is_chinese_char) {
            let mut out = String::with_capacity(s.len() + 16);
            for c in s.chars() {
                if is_chinese_char(c) {
                    out.push(' ');
                    out.push(c);
                    out.push(' ');
                } else {
                    out.push(c);
                }
            }
            s = out;
        }
        if o.strip_accents.unwrap_or(o.lowercase) && !s.is_ascii() {
            s = s.nfd().filter(|c| !c.is_mark_nonspacing()).collect();
        }
        if o.lowercase {
            s = s.chars().flat_map(char::to_lowercase).collect();
        }
        s
    }

    /// Word-piece ids of `text`, without `[CLS]`/`[SEP]` and without
    /// truncation.
    pub fn tokenize(&self, text: &str) -> Vec<u32> {
        let mut ids = Vec::new();
        self.tokenize_into(text, &mut ids, usize::MAX);
        ids
    }

    /// `[CLS] word-pieces [SEP]`, with at most `max_len` ids in all (the
    /// word-pieces are truncated to `max_len - 2`).
    pub fn encode(&self, text: &str, max_len: usize) -> Vec<u32> {
        let mut ids = vec![self.cls_id];
        self.tokenize_into(text, &mut ids, max_len.saturating_sub(2) + 1);
        ids.push(self.sep_id);
        ids
    }

    /// Number of word-pieces of `text` (no special tokens).
    pub fn count(&self, text: &str) -> usize {
        self.tokenize(text).len()
    }

    /// Appends word-piece ids to `out` until it holds `limit` ids.
    fn tokenize_into(&self, text: &str, out: &mut Vec<u32>, limit: usize) {
        let normalized = self.normalize(text);
        let mut buf = String::new();
        for word in pre_tokenize(&normalized) {
            if out.len() >= limit {
                break;
            }
            self.word_piece(word, out, &mut buf);
        }
        out.truncate(limit);
    }

    /// Greedy longest-match-first WordPiece of one pre-token.
    fn word_piece(&self, word: &str, out: &mut Vec<u32>, buf: &mut String) {
        if word.chars().count() > self.max_input_chars_per_word {
            out.push(self.unk_id);
            return;
        }
        let first = out.len();
        let mut start = 0;
        while start < word.len() {
            let mut end = word.len();
            let mut found = None;
            while start < end {
                let piece = &word[start..end];
                let id = if start > 0 {
                    buf.clear();
                    buf.push_str(&self.continuing_prefix);
                    buf.push_str(piece);
                    self.vocab.get(buf.as_str())
                } else {
                    self.vocab.get(piece)
                };
                if let Some(&id) = id {
                    found = Some(id);
                    break;
                }
                end -= piece.chars().next_back().map_or(1, char::len_utf8);
            }
            match found {
                Some(id) => out.push(id),
                None => {
                    out.truncate(first);
                    out.push(self.unk_id);
                    return;
                }
            }
            start = end;
        }
    }
}

/// `BertPreTokenizer`: split on whitespace (removed), then isolate each
/// punctuation character.
fn pre_tokenize(text: &str) -> impl Iterator<Item = &str> {
    text.split(char::is_whitespace).filter(|w| !w.is_empty()).flat_map(split_punctuation)
}

fn split_punctuation(word: &str) -> impl Iterator<Item = &str> {
    let mut rest = word;
    std::iter::from_fn(move || {
        if rest.is_empty() {
            return None;
        }
        let len = match rest.char_indices().find(|&(_, c)| is_bert_punc(c)) {
            Some((0, c)) => c.len_utf8(),
            Some((i, _)) => i,
            None => rest.len(),
        };
        let (piece, tail) = rest.split_at(len);
        rest = tail;
        Some(piece)
    })
}

fn is_bert_punc(c: char) -> bool {
    c.is_ascii_punctuation() || c.is_punctuation()
}

fn is_whitespace(c: char) -> bool {
    matches!(c, '\t' | '\n' | '\r') || c.is_whitespace()
}

fn is_control(c: char) -> bool {
    match c {
        '\t' | '\n' | '\r' => false,
        _ => c.is_other(),
    }
}

fn is_chinese_char(c: char) -> bool {
    matches!(
        c as u32,
        0x4E00..=0x9FFF
            | 0x3400..=0x4DBF
            | 0x20000..=0x2A6DF
            | 0x2A700..=0x2B73F
            | 0x2B740..=0x2B81F
            | 0x2B920..=0x2CEAF
            | 0xF900..=0xFAFF
            | 0x2F800..=0x2FA1F
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tiny() -> WordPieceTokenizer {
        let vocab = "[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\nun\n##aff\n##able\nhello\n,\n!\ncafe\n圣\n诞\nworld\n##s\na\n";
        WordPieceTokenizer::from_vocab_txt(vocab, NormalizerOptions::default()).unwrap()
    }

    #[test]
    fn normalizes_like_bert_uncased() {
        let t = tiny();
        assert_eq!(t.normalize("Café NAÏVE"), "cafe naive");
        assert_eq!(t.normalize("a\tb\nc\u{0007}d\u{200b}e"), "a b cde");
        assert_eq!(t.normalize("圣诞x"), " 圣  诞 x");
        assert_eq!(t.normalize("Straße"), "straße");
    }

    #[test]
    fn splits_whitespace_and_punctuation() {
        let words: Vec<&str> = pre_tokenize("hello,world!!  it's  (x)").collect();
        assert_eq!(words, ["hello", ",", "world", "!", "!", "it", "'", "s", "(", "x", ")"]);
        assert!(pre_tokenize("   ").next().is_none());
    }

    #[test]
    fn word_pieces() {
        let t = tiny();
        // unaffable -> un ##aff ##able; an unknown word -> [UNK].
        assert_eq!(t.tokenize("Unaffable, worlds!"), [5, 6, 7, 9, 14, 15, 10]);
        assert_eq!(t.tokenize("unknownword"), [1]);
        assert_eq!(t.tokenize("圣诞"), [12, 13]);
        let long = "a".repeat(101);
        assert_eq!(t.tokenize(&long), [1]);
        assert_eq!(t.count("hello hello"), 2);
        assert_eq!(t.tokenize(""), Vec::<u32>::new());
    }

    #[test]
    fn encode_adds_special_tokens_and_truncates() {
        let t = tiny();
        assert_eq!(t.encode("", 256), [2, 3]);
        assert_eq!(t.encode("hello world", 256), [2, 8, 14, 3]);
        // Truncation can cut a word's pieces, as the reference tokenizer does.
        assert_eq!(t.encode("unaffable hello", 4), [2, 5, 6, 3]);
        assert_eq!(t.encode("hello hello hello", 3), [2, 8, 3]);
    }
}
