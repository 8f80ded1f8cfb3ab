//! Lexical retrieval: the analyzer that turns text into index terms, and
//! Okapi BM25 over documents given as term counts.
//!
//! **Analyzer** ([`terms`]). Text is cut at Unicode word boundaries in the
//! simple sense: a word is a maximal run of alphanumeric characters
//! (Unicode `Alphabetic` / `Numeric`), lower-cased (Unicode case folding by
//! `char::to_lowercase`); an apostrophe between two letters joins them
//! (`don't` → `dont`) and a possessive `'s` is dropped (`Marley's` →
//! `marley`, as Lucene's EnglishPossessiveFilter); Lucene's 33 English stop
//! words are dropped; there is no stemming. Fullwidth ASCII forms are folded
//! to ASCII (as Lucene's CJKWidthFilter). CJK text has no spaces between
//! words, so a run of Han, Hiragana, Katakana or Hangul characters gives
//! each character and each pair of adjacent characters as terms (unigrams
//! and bigrams, as Lucene's CJKBigramFilter with `outputUnigrams`): a query
//! matches a document on shared characters, ranked higher on shared
//! two-character words.
//!
//! **BM25** ([`Bm25Index`]): Okapi BM25 with Lucene's parameters and idf,
//! `k1 = 1.2`, `b = 0.75`,
//! `idf(t) = ln(1 + (N − df(t) + 0.5) / (df(t) + 0.5))` (never negative),
//! `score(q, d) = Σ_{t ∈ q} idf(t) · tf · (k1 + 1) / (tf + k1 · (1 − b + b · |d| / avgdl))`
//! over the distinct terms of the query, `|d|` the number of terms the
//! analyzer gave for the document (exact, where Lucene stores a one-byte
//! approximation).

use std::collections::HashMap;

/// Names the analyzer, recorded with a persisted index: an index written by
/// another analyzer is rebuilt rather than queried with mismatched terms.
pub const ANALYZER: &str = "words-lower-possessive-stop33+cjk-1-2gram/v1";

/// Lucene's English stop words (`EnglishAnalyzer.ENGLISH_STOP_WORDS_SET`).
pub const STOP_WORDS: [&str; 33] = [
    "a", "an", "and", "are", "as", "at", "be", "but", "by", "for", "if", "in", "into", "is", "it", "no", "not", "of",
    "on", "or", "such", "that", "the", "their", "then", "there", "these", "they", "this", "to", "was", "will", "with",
];

/// Han (with extensions and compatibility ideographs), Hiragana, Katakana
/// (with the phonetic extensions and halfwidth forms) and Hangul: the
/// scripts Lucene's CJKBigramFilter pairs.
pub fn is_cjk(c: char) -> bool {
    matches!(c as u32,
        0x3400..=0x4DBF | 0x4E00..=0x9FFF | 0xF900..=0xFAFF | 0x20000..=0x2FA1F | 0x30000..=0x323AF
        | 0x3040..=0x309F | 0x30A0..=0x30FF | 0x31F0..=0x31FF | 0xFF66..=0xFF9F
        | 0x1100..=0x11FF | 0x3130..=0x318F | 0xAC00..=0xD7AF)
}

fn is_apostrophe(c: char) -> bool {
    matches!(c, '\'' | '\u{2019}')
}

/// Fullwidth ASCII (`Ａ`, `１`) as ASCII.
fn fold_width(c: char) -> char {
    match c as u32 {
        0xFF01..=0xFF5E => char::from_u32(c as u32 - 0xFEE0).unwrap_or(c),
        _ => c,
    }
}

struct Terms<'a> {
    out: &'a mut dyn FnMut(&str),
    word: String,
    cjk: Vec<char>,
}

impl Terms<'_> {
    fn flush_word(&mut self) {
        if self.word.is_empty() {
            return;
        }
        if self.word.ends_with("'s") {
            self.word.truncate(self.word.len() - 2);
        }
        self.word.retain(|c| c != '\'');
        if !self.word.is_empty() && !STOP_WORDS.contains(&self.word.as_str()) {
            (self.out)(&self.word);
        }
        self.word.clear();
    }

    fn flush_cjk(&mut self) {
        let mut buf = [0u8; 8];
        for (i, &c) in self.cjk.iter().enumerate() {
            (self.out)(c.encode_utf8(&mut buf));
            if let Some(&next) = self.cjk.get(i + 1) {
                let pair: String = [c, next].into_iter().collect();
                (self.out)(&pair);
            }
        }
        self.cjk.clear();
    }
}

/// Calls `out` with each term of `text`, in order (see the module docs).
pub fn each_term(text: &str, out: &mut dyn FnMut(&str)) {
    let mut t = Terms { out, word: String::new(), cjk: Vec::new() };
    let mut chars = text.chars().map(fold_width).peekable();
    while let Some(c) = chars.next() {
        if is_cjk(c) {
            t.flush_word();
            t.cjk.push(c);
        } else if c.is_alphanumeric() {
            t.flush_cjk();
            t.word.extend(c.to_lowercase());
        } else if is_apostrophe(c)
            && !t.word.is_empty()
            && chars.peek().is_some_and(|&n| n.is_alphanumeric() && !is_cjk(n))
        {
            t.word.push('\'');
        } else {
            t.flush_word();
            t.flush_cjk();
        }
    }
    t.flush_word();
    t.flush_cjk();
}

/// The terms of `text`, in order, repeats kept.
pub fn terms(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    each_term(text, &mut |t| out.push(t.to_string()));
    out
}

/// A document as BM25 sees it: its distinct terms with their counts, sorted
/// by term, and its length (the number of terms, repeats counted).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TermCounts {
    pub terms: Vec<String>,
    pub counts: Vec<u32>,
    pub length: u32,
}

impl TermCounts {
    pub fn of(text: &str) -> TermCounts {
        let mut counts: HashMap<String, u32> = HashMap::new();
        let mut length = 0u32;
        each_term(text, &mut |t| {
            length += 1;
            match counts.get_mut(t) {
                Some(n) => *n += 1,
                None => {
                    counts.insert(t.to_string(), 1);
                }
            }
        });
        let mut pairs: Vec<(String, u32)> = counts.into_iter().collect();
        pairs.sort_unstable();
        let (terms, counts) = pairs.into_iter().unzip();
        TermCounts { terms, counts, length }
    }
}

/// BM25's free parameters.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Bm25Params {
    pub k1: f64,
    pub b: f64,
}

impl Default for Bm25Params {
    /// Lucene's defaults.
    fn default() -> Self {
        Bm25Params { k1: 1.2, b: 0.75 }
    }
}

/// An inverted index of documents `0..n` for BM25 ranking.
#[derive(Debug, Clone, Default)]
pub struct Bm25Index {
    params: Bm25Params,
    term_ids: HashMap<String, u32>,
    /// Per term id: (document, term frequency), by document.
    postings: Vec<Vec<(u32, u32)>>,
    doc_len: Vec<u32>,
    avgdl: f64,
}

impl Bm25Index {
    /// An empty index of Lucene's parameters; add documents with [`Bm25Index::add`].
    pub fn new(params: Bm25Params) -> Bm25Index {
        Bm25Index { params, ..Bm25Index::default() }
    }

    /// Adds the next document (its number is the count of documents before
    /// it) from its distinct terms with their counts, and its length.
    pub fn add<'t>(&mut self, terms: impl IntoIterator<Item = (&'t str, u32)>, length: u32) {
        let doc = self.doc_len.len() as u32;
        for (term, tf) in terms {
            if tf == 0 {
                continue;
            }
            let id = match self.term_ids.get(term) {
                Some(&id) => id,
                None => {
                    let id = self.postings.len() as u32;
                    self.term_ids.insert(term.to_string(), id);
                    self.postings.push(Vec::new());
                    id
                }
            };
            self.postings[id as usize].push((doc, tf));
        }
        self.doc_len.push(length);
        let n = self.doc_len.len() as f64;
        self.avgdl += (length as f64 - self.avgdl) / n;
    }

    /// Indexes `texts` with [`TermCounts::of`].
    pub fn of_texts<S: AsRef<str>>(texts: impl IntoIterator<Item = S>) -> Bm25Index {
        let mut index = Bm25Index::new(Bm25Params::default());
        for text in texts {
            let tc = TermCounts::of(text.as_ref());
            index.add(tc.terms.iter().map(String::as_str).zip(tc.counts.iter().copied()), tc.length);
        }
        index
    }

    pub fn len(&self) -> usize {
        self.doc_len.len()
    }

    pub fn is_empty(&self) -> bool {
        self.doc_len.is_empty()
    }

    /// Number of distinct terms.
    pub fn vocabulary(&self) -> usize {
        self.postings.len()
    }

    /// Number of documents holding every term of `text` (in any order and
    /// place: an upper bound on the documents holding `text` as a phrase);
    /// terms the index lacks are skipped, `None` when it has none of them.
    pub fn documents_with_all_terms(&self, text: &str) -> Option<usize> {
        let mut ids = self.term_ids_of(text);
        ids.sort_by_key(|&id| self.postings[id as usize].len());
        let (&rarest, rest) = ids.split_first()?;
        // Postings are in document order: each later list is searched for
        // the rarest term's documents.
        let holds = |id: u32, doc: u32| self.postings[id as usize].binary_search_by_key(&doc, |p| p.0).is_ok();
        Some(self.postings[rarest as usize].iter().filter(|p| rest.iter().all(|&id| holds(id, p.0))).count())
    }

    /// The distinct ids of `text`'s terms the index has, in order of first appearance.
    fn term_ids_of(&self, text: &str) -> Vec<u32> {
        let mut ids: Vec<u32> = Vec::new();
        each_term(text, &mut |t| {
            if let Some(&id) = self.term_ids.get(t) {
                if !ids.contains(&id) {
                    ids.push(id);
                }
            }
        });
        ids
    }

    fn idf(&self, df: usize) -> f64 {
        let n = self.doc_len.len() as f64;
        let df = df as f64;
        (1.0 + (n - df + 0.5) / (df + 0.5)).ln()
    }

    /// Every document sharing a term with `query`, with its score, best
    /// first (ties by document number).
    pub fn search(&self, query: &str) -> Vec<(usize, f64)> {
        let seen = self.term_ids_of(query);
        let Bm25Params { k1, b } = self.params;
        let mut scores = vec![0f64; self.doc_len.len()];
        let mut matched: Vec<usize> = Vec::new();
        for id in seen {
            let postings = &self.postings[id as usize];
            let idf = self.idf(postings.len());
            for &(doc, tf) in postings {
                let tf = tf as f64;
                let norm = 1.0 - b + b * self.doc_len[doc as usize] as f64 / self.avgdl.max(f64::MIN_POSITIVE);
                let slot = &mut scores[doc as usize];
                if *slot == 0.0 {
                    matched.push(doc as usize);
                }
                *slot += idf * tf * (k1 + 1.0) / (tf + k1 * norm);
            }
        }
        let mut ranked: Vec<(usize, f64)> = matched.into_iter().map(|d| (d, scores[d])).collect();
        ranked.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
        ranked
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn english_words_are_lower_cased_without_stop_words_or_possessives() {
        assert_eq!(
            terms("The Ghost of Marley's past — Scrooge’s DOOR, don't it? 1843 A.D."),
            ["ghost", "marley", "past", "scrooge", "door", "dont", "1843", "d"]
        );
        assert_eq!(terms("Café Ünïcode naïve"), ["café", "ünïcode", "naïve"]);
        assert_eq!(terms("'quoted' rock'n'roll"), ["quoted", "rocknroll"]);
        assert!(terms("  ... of the ...").is_empty());
        assert_eq!(terms("ＦＵＬＬ width"), ["full", "width"]);
    }

    #[test]
    fn cjk_runs_give_unigrams_and_bigrams() {
        assert_eq!(terms("李华去北京"), ["李", "李华", "华", "华去", "去", "去北", "北", "北京", "京"]);
        // Runs end at other scripts and punctuation; a lone character is a unigram.
        assert_eq!(terms("Li Hua在北京。好"), ["li", "hua", "在", "在北", "北", "北京", "京", "好"]);
        assert_eq!(terms("カタカナ"), ["カ", "カタ", "タ", "タカ", "カ", "カナ", "ナ"]);
        assert_eq!(terms("서울역"), ["서", "서울", "울", "울역", "역"]);
    }

    #[test]
    fn term_counts_are_sorted_with_length() {
        let tc = TermCounts::of("the cat saw the other cat");
        assert_eq!(tc.terms, ["cat", "other", "saw"]);
        assert_eq!(tc.counts, [2, 1, 1]);
        assert_eq!(tc.length, 4);
        assert_eq!(TermCounts::of(""), TermCounts::default());
    }

    /// Scores computed by hand from the formula in the module docs.
    #[test]
    fn bm25_scores_match_hand_computed_values() {
        // d0: "apple banana apple" → apple 2, banana 1, |d0| = 3
        // d1: "banana cherry" → |d1| = 2
        // d2: "cherry cherry cherry date" → |d2| = 4
        // avgdl = 3, N = 3
        let index = Bm25Index::of_texts(["apple banana apple", "banana cherry", "cherry cherry cherry date"]);
        assert_eq!((index.len(), index.vocabulary()), (3, 4));
        let (k1, b) = (1.2, 0.75);
        let idf = |df: f64| (1.0 + (3.0 - df + 0.5) / (df + 0.5)).ln();
        let part = |tf: f64, dl: f64| tf * (k1 + 1.0) / (tf + k1 * (1.0 - b + b * dl / 3.0));
        // idf(apple, df 1) = ln(1 + 2.5/1.5) = ln(2.6667) = 0.98083
        assert!((idf(1.0) - 0.980_829_253).abs() < 1e-8);
        // d0 for "apple": 0.98083 · 2 · 2.2 / (2 + 1.2) = 1.34864
        let hits = index.search("apple");
        assert_eq!(hits.len(), 1);
        assert_eq!(hits[0].0, 0);
        assert!((hits[0].1 - 1.348_640_223).abs() < 1e-8, "{hits:?}");
        // "banana cherry": idf(df 2) = ln(1 + 1.5/2.5) = 0.47000
        //   d1 = 2 · 0.47000 · 2.2 / (1 + 1.2 · 0.75) = 1.08843
        //   d2 = 0.47000 · 3 · 2.2 / (3 + 1.2 · 1.25) = 0.68934
        //   d0 = 0.47000 · 2.2 / (1 + 1.2) = 0.47000
        let hits = index.search("Banana, cherry! banana");
        let expected =
            [(1, 2.0 * idf(2.0) * part(1.0, 2.0)), (2, idf(2.0) * part(3.0, 4.0)), (0, idf(2.0) * part(1.0, 3.0))];
        assert_eq!(hits.iter().map(|h| h.0).collect::<Vec<_>>(), [1, 2, 0]);
        for ((doc, score), (want_doc, want)) in hits.iter().zip(expected) {
            assert_eq!(*doc, want_doc);
            assert!((score - want).abs() < 1e-12, "{doc}: {score} vs {want}");
        }
        assert!((hits[0].1 - 1.088_429_457).abs() < 1e-8, "{hits:?}");
        assert!(index.search("the unknown").is_empty());
        assert!(Bm25Index::of_texts(Vec::<String>::new()).search("apple").is_empty());
    }

    #[test]
    fn documents_with_all_of_a_names_terms_bound_those_holding_the_name() {
        let index = Bm25Index::of_texts([
            "the film was directed by Marco Ferreri",
            "a film by another director",
            "Film festival",
        ]);
        assert_eq!(index.documents_with_all_terms("FILM"), Some(3), "any case");
        assert_eq!(index.documents_with_all_terms("ferreri"), Some(1));
        assert_eq!(index.documents_with_all_terms("of"), None, "a stop word is no term");
        assert_eq!(index.documents_with_all_terms("MARCO FERRERI"), Some(1));
        assert_eq!(index.documents_with_all_terms("Film by"), Some(3), "a stop word is skipped");
        assert_eq!(index.documents_with_all_terms("Another Film"), Some(1), "both terms, in any order");
        assert_eq!(index.documents_with_all_terms("Festival Director"), Some(0));
        assert_eq!(index.documents_with_all_terms("Unknown Ferreri"), Some(1), "terms not indexed are skipped");
        assert_eq!(index.documents_with_all_terms("the unknown"), None);
    }

    #[test]
    fn ties_rank_by_document_number() {
        let index = Bm25Index::of_texts(["x y", "y x", "z"]);
        let hits = index.search("x");
        assert_eq!(hits.iter().map(|h| h.0).collect::<Vec<_>>(), [0, 1]);
        assert_eq!(hits[0].1, hits[1].1);
    }
}
