//! Scoring of retrieval and answers against a question set's gold evidence
//! (`graphrag-rs eval`).
//!
//! **Passages.** A gold passage counts as retrieved when its text is in the
//! context after [`normalize`] (case, whitespace, punctuation and quote
//! styles ignored), or, when the index split it across text units, when at
//! least [`SHINGLE_COVERAGE`] of its word [`SHINGLE_WORDS`]-grams occur in
//! the context: both halves of a split passage are then present, while one
//! half alone (about 50%) or a different passage on the same subject is not.
//!
//! **Documents.** A gold document (a title, or a file path such as
//! `LiHua-World/week3/20260121_1000.txt`) counts as retrieved when a source
//! document of the context has that title, or one is a path ending in `/` +
//! the other.
//!
//! **Answer terms** (`eval --gold answer`, for question sets with answers but
//! no gold evidence, such as GraphRAG-Bench's): the distinct BM25 terms of the
//! gold answer ([`crate::lexical::terms`]: lower case, stop words dropped, CJK
//! as characters and bigrams), each found when the context has it; the best
//! over the answer and its aliases. An LLM-free proxy for evidence recall in
//! the manner of DPR's answer recall: a long free-text answer is graded by
//! the share of its words the context holds.
//!
//! **Answers.** SQuAD's exact match and token F1 after SQuAD's normalisation
//! (lower case, no punctuation, no articles a/an/the, single spaces), the best
//! over the answer and its aliases.

use std::collections::HashSet;

/// Words per shingle of the split-passage test: long enough that a shingle
/// is specific to one passage, short enough for a passage of a sentence.
pub const SHINGLE_WORDS: usize = 8;

/// Share of a passage's shingles the context must hold when the passage is
/// not contained whole.
pub const SHINGLE_COVERAGE: f64 = 0.8;

/// Lower case, typographic quotes and dashes as ASCII, every other
/// non-alphanumeric character a separator, single spaces.
pub fn normalize(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut pending_space = false;
    for c in text.chars().flat_map(char::to_lowercase) {
        if c.is_alphanumeric() {
            if pending_space && !out.is_empty() {
                out.push(' ');
            }
            pending_space = false;
            out.push(c);
        } else {
            // Apostrophes (straight or curly) join the word: "king's" and "king’s" agree.
            if matches!(c, '\'' | '\u{2019}' | '\u{2018}' | '`' | '\u{00b4}') {
                continue;
            }
            pending_space = true;
        }
    }
    out
}

/// A context prepared once for testing many passages against it.
pub struct ContextText {
    normalized: String,
    shingles: HashSet<String>,
}

impl ContextText {
    pub fn new(context: &str) -> ContextText {
        let normalized = normalize(context);
        let words: Vec<&str> = normalized.split(' ').filter(|w| !w.is_empty()).collect();
        let shingles = words.windows(SHINGLE_WORDS).map(|w| w.join(" ")).collect();
        ContextText { normalized, shingles }
    }

    /// Share (0 to 1) of the passage found in the context: 1 when its
    /// normalised text is contained, else the share of its word shingles.
    pub fn passage_coverage(&self, passage: &str) -> f64 {
        let p = normalize(passage);
        if p.is_empty() {
            return 0.0;
        }
        if self.normalized.contains(&p) {
            return 1.0;
        }
        let words: Vec<&str> = p.split(' ').collect();
        // A passage shorter than a shingle counts only when contained (above).
        if words.len() < SHINGLE_WORDS {
            return 0.0;
        }
        let shingles: Vec<String> = words.windows(SHINGLE_WORDS).map(|w| w.join(" ")).collect();
        let found = shingles.iter().filter(|s| self.shingles.contains(*s)).count();
        found as f64 / shingles.len() as f64
    }

    /// Whether the passage counts as retrieved (see the module doc).
    pub fn contains_passage(&self, passage: &str) -> bool {
        self.passage_coverage(passage) >= SHINGLE_COVERAGE
    }
}

/// Whether gold document `gold` is among the context's source document titles.
pub fn document_found(gold: &str, titles: &[String]) -> bool {
    let gold = gold.trim();
    titles.iter().map(|t| t.trim()).any(|t| {
        t == gold
            || (!t.is_empty() && !gold.is_empty())
                && (gold.ends_with(t) && gold[..gold.len() - t.len()].ends_with('/')
                    || t.ends_with(gold) && t[..t.len() - gold.len()].ends_with('/'))
    })
}

/// Per distinct term of the gold answer that the context's terms hold the
/// largest share of (ties: the first), whether the context has it. Empty
/// when no gold answer has a term.
pub fn answer_terms_found(context: &str, golds: &[String]) -> Vec<bool> {
    let mut have: HashSet<String> = HashSet::new();
    crate::lexical::each_term(context, &mut |t| {
        if !have.contains(t) {
            have.insert(t.to_string());
        }
    });
    let mut best: Vec<bool> = Vec::new();
    let mut best_share = -1.0;
    for gold in golds {
        let mut seen = HashSet::new();
        let found: Vec<bool> = crate::lexical::terms(gold)
            .into_iter()
            .filter(|t| seen.insert(t.clone()))
            .map(|t| have.contains(&t))
            .collect();
        if found.is_empty() {
            continue;
        }
        let share = found.iter().filter(|f| **f).count() as f64 / found.len() as f64;
        if share > best_share {
            (best, best_share) = (found, share);
        }
    }
    best
}

/// SQuAD's answer normalisation: lower case, punctuation removed, articles
/// removed, whitespace collapsed.
pub fn normalize_answer(text: &str) -> String {
    let lower: String =
        text.to_lowercase().chars().filter(|c| !c.is_ascii_punctuation() && !is_unicode_punctuation(*c)).collect();
    lower.split_whitespace().filter(|w| !matches!(*w, "a" | "an" | "the")).collect::<Vec<_>>().join(" ")
}

fn is_unicode_punctuation(c: char) -> bool {
    matches!(c, '\u{2018}' | '\u{2019}' | '\u{201c}' | '\u{201d}' | '\u{2013}' | '\u{2014}' | '\u{2026}')
}

/// 1 when the prediction equals one of the gold answers after normalisation.
pub fn exact_match(prediction: &str, golds: &[String]) -> f64 {
    let p = normalize_answer(prediction);
    if golds.iter().any(|g| normalize_answer(g) == p) {
        1.0
    } else {
        0.0
    }
}

/// SQuAD token F1, the best over the gold answers.
pub fn token_f1(prediction: &str, golds: &[String]) -> f64 {
    golds.iter().map(|g| f1_one(prediction, g)).fold(0.0, f64::max)
}

fn f1_one(prediction: &str, gold: &str) -> f64 {
    let p = normalize_answer(prediction);
    let g = normalize_answer(gold);
    let p: Vec<&str> = p.split_whitespace().collect();
    let g: Vec<&str> = g.split_whitespace().collect();
    if p.is_empty() || g.is_empty() {
        return if p == g { 1.0 } else { 0.0 };
    }
    // Multiset intersection.
    let mut remaining = g.clone();
    let mut common = 0usize;
    for w in &p {
        if let Some(i) = remaining.iter().position(|x| x == w) {
            remaining.swap_remove(i);
            common += 1;
        }
    }
    if common == 0 {
        return 0.0;
    }
    let precision = common as f64 / p.len() as f64;
    let recall = common as f64 / g.len() as f64;
    2.0 * precision * recall / (precision + recall)
}

#[cfg(test)]
mod tests {
    use super::*;

    const PASSAGE: &str = "Maximum Overdrive is a 1986 American science fiction horror comedy film written and directed by Stephen King. The film stars Emilio Estevez, Pat Hingle, Laura Harrington, and Yeardley Smith.";

    #[test]
    fn normalize_ignores_case_whitespace_punctuation_and_quote_styles() {
        assert_eq!(normalize("  The \"King’s\"\n\tSpeech — (2010)! "), "the kings speech 2010");
        assert_eq!(normalize("The 'King's' Speech - 2010"), "the kings speech 2010");
    }

    #[test]
    fn a_passage_with_other_whitespace_and_case_counts() {
        let context = format!(
            "-----Sources-----\nid|text\n7|{}\n8|Something else entirely.",
            PASSAGE.to_uppercase().replace(' ', "  \n ").replace(',', " ,")
        );
        let c = ContextText::new(&context);
        assert_eq!(c.passage_coverage(PASSAGE), 1.0);
        assert!(c.contains_passage(PASSAGE));
    }

    #[test]
    fn a_different_passage_does_not_count() {
        let other = "Stephen King is an American author of horror, supernatural fiction, suspense, crime, science-fiction, and fantasy novels. He directed one film, Maximum Overdrive.";
        let c = ContextText::new(other);
        assert!(!c.contains_passage(PASSAGE));
        assert!(c.passage_coverage(PASSAGE) < 0.2, "{}", c.passage_coverage(PASSAGE));
    }

    #[test]
    fn a_passage_split_across_two_retrieved_units_counts_but_half_does_not() {
        // Token chunks with overlap: the second unit repeats the end of the first.
        let words: Vec<&str> = PASSAGE.split(' ').collect();
        let first = words[..18].join(" ");
        let second = words[14..].join(" ");
        let both = ContextText::new(&format!("1|{first}\n2|{second}"));
        assert!(both.contains_passage(PASSAGE));
        let half = ContextText::new(&first);
        let coverage = half.passage_coverage(PASSAGE);
        assert!(!half.contains_passage(PASSAGE) && coverage > 0.2 && coverage < 0.6, "{coverage}");
    }

    #[test]
    fn short_passages_must_be_contained() {
        let c = ContextText::new("Li Hua met Adam Smith on Monday.");
        assert!(c.contains_passage("adam smith"));
        assert!(!c.contains_passage("Smith Adam"));
        assert_eq!(c.passage_coverage(""), 0.0);
    }

    #[test]
    fn documents_match_by_title_or_path_suffix() {
        let titles = vec!["LiHua-World/week3/20260121_1000.txt".to_string(), "Nicki Minaj".to_string()];
        assert!(document_found("LiHua-World/week3/20260121_1000.txt", &titles));
        assert!(document_found("week3/20260121_1000.txt", &titles));
        assert!(document_found(" Nicki Minaj ", &titles));
        assert!(!document_found("LiHua-World/week3/20260121_1001.txt", &titles));
        assert!(!document_found("0121_1000.txt", &titles), "a suffix must start at a path separator");
        assert!(!document_found("Minaj", &titles));
        assert!(document_found("20260121_1000.txt", &["input/20260121_1000.txt".to_string()]));
    }

    #[test]
    fn answer_terms_are_found_by_word_and_the_best_alias_counts() {
        let golds = vec!["Basal cell carcinoma (BCC) is the most common type of skin cancer.".to_string()];
        // Terms: basal, cell, carcinoma, bcc, most, common, type, skin, cancer ("is", "the", "of" are stop words).
        let found = answer_terms_found("Skin cancers: the most COMMON is basal-cell carcinoma.", &golds);
        assert_eq!(found, vec![true, true, true, false, true, true, false, true, false]);
        // Repeated answer words count once; an alias with a larger share wins.
        let golds = vec!["Paris Paris France".to_string(), "the city of Lyon".to_string()];
        assert_eq!(answer_terms_found("Lyon is a city", &golds), vec![true, true]);
        assert_eq!(answer_terms_found("Paris", &golds), vec![true, false]);
        // CJK answers by characters and bigrams.
        assert_eq!(answer_terms_found("他住在北京。", &["北京".to_string()]), vec![true, true, true]);
        // No terms at all: nothing to score.
        assert!(answer_terms_found("anything", &["the of".to_string()]).is_empty());
        assert!(answer_terms_found("anything", &[]).is_empty());
    }

    #[test]
    fn exact_match_uses_squad_normalisation_and_aliases() {
        let golds = vec!["land-grant university".to_string(), "Land grant univ.".to_string()];
        assert_eq!(exact_match("The Land-Grant University.", &golds), 1.0);
        assert_eq!(exact_match("a land grant univ", &golds), 1.0);
        assert_eq!(exact_match("a public university", &golds), 0.0);
        assert_eq!(exact_match("anything", &[]), 0.0);
    }

    #[test]
    fn token_f1_counts_overlap_and_takes_the_best_alias() {
        let golds = vec!["Stephen King".to_string()];
        assert_eq!(token_f1("Stephen King", &golds), 1.0);
        // precision 2/4, recall 2/2 → 2/3.
        assert!((token_f1("it was Stephen King", &golds) - 2.0 / 3.0).abs() < 1e-9);
        assert_eq!(token_f1("Emilio Estevez", &golds), 0.0);
        let aliases = vec!["USA".to_string(), "United States".to_string()];
        assert_eq!(token_f1("the United States", &aliases), 1.0);
        // Repeated words count once per occurrence in the gold.
        assert!((token_f1("king king", &golds) - 0.5).abs() < 1e-9);
    }
}
