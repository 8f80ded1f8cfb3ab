//! The "fast" extraction method without an LLM (GraphRAG's `extract_graph_nlp`):
//! noun phrases per text unit ([`PhraseExtractor`], pluggable; [`RegexEnglishExtractor`]
//! by default, in `regex_english`), settled by the corpus's case evidence
//! ([`resolve_sentence_initial`]), then a co-occurrence graph between phrases
//! of the same sentence window, weighted and pruned like GraphRAG's
//! `prune_graph` ([`build_cooccurrence_graph`], in `cooccurrence`).
//!
//! Everything here is deterministic: equal input gives equal output.

mod cooccurrence;
mod regex_english;

use std::collections::HashMap;

use serde::{Deserialize, Serialize};

pub use cooccurrence::{build_cooccurrence_graph, npmi_weight, NlpEdge, NlpGraph, NlpGraphConfig, NlpNode};
use regex_english::{is_connector, strip_possessive};
pub use regex_english::{RegexEnglishExtractor, STOP_WORDS};

/// The phrase extractors by name (`text_analyzer.extractor_type`; GraphRAG's
/// spaCy extractors, `syntactic_parser` and `cfg`, are not available).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ExtractorType {
    /// [`RegexEnglishExtractor`].
    RegexEnglish,
}

/// One noun phrase found in a text unit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mention {
    /// The normalised phrase (upper-case for the built-in extractor).
    pub phrase: String,
    /// Index of its sentence within the text unit (ascending in a unit's list).
    pub sentence: u32,
    /// The phrase is a run of capitalised words (a name, unless its capitals
    /// are the sentence's or the word is a common one: settled by
    /// [`resolve_sentence_initial`]).
    pub proper: bool,
    /// The phrase begins a sentence (or a quotation).
    pub sentence_initial: bool,
}

/// What an extractor finds in one text unit.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct UnitPhrases {
    /// In order of appearance, repeats included.
    pub mentions: Vec<Mention>,
    /// [`word_key`]s of the words seen capitalised inside a sentence (sorted,
    /// unique): evidence that a word is a name.
    pub capitalised_inside: Vec<u64>,
    /// [`word_key`]s of the words seen in lower case (sorted, unique): evidence
    /// that a word is a common word.
    pub lowercase: Vec<u64>,
}

/// A fixed 64-bit key of a word (FNV-1a of its upper-case form, possessive
/// removed): the case evidence of a large corpus in 8 bytes a word, the same
/// on every run and platform.
pub fn word_key(word: &str) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for c in strip_possessive(word).chars().flat_map(char::to_uppercase) {
        let c = if c == '\u{2019}' { '\'' } else { c };
        let mut buf = [0u8; 4];
        for &b in c.encode_utf8(&mut buf).as_bytes() {
            h = (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3);
        }
    }
    h
}

/// Extracts the noun phrases of one text unit.
pub trait PhraseExtractor: Send + Sync {
    fn extract(&self, text: &str) -> UnitPhrases;
}

/// Adds the phrases of the unit's document title (`title`, as the extractor
/// found them in the title alone) to the unit's mentions, in its first
/// sentence: a paragraph is about its title even where its text never names
/// it (a plot summary under `Dracula`), and that name is what other units
/// use to point at it. Titles capitalise by convention, so their case says
/// nothing about which words are names: the title's case evidence is left
/// out, and its first phrase is not treated as sentence-initial (a lone word
/// is still settled by the corpus's case evidence, as every one-word name).
pub fn add_title_mentions(unit: &mut UnitPhrases, title: &UnitPhrases) {
    let heading = title.mentions.iter().map(|m| Mention { sentence: 0, sentence_initial: false, ..m.clone() });
    unit.mentions.splice(0..0, heading);
}

/// Settles capitalised mentions with the case evidence of all text units
/// (truecasing by document frequency): a word written in lower case in more
/// text units than it is capitalised inside a sentence is a common word. Such
/// a word at the start of a sentence-initial name (`Darkness is cheap`,
/// `Suddenly Scrooge said`) is removed with the connectors after it, and a
/// one-word name made of it (`Yeah`, `Thanks` in a transcript) is dropped.
/// A word capitalised inside sentences at least as often (`Marley was dead`
/// where `old Marley` occurs) or never seen in lower case (a name mentioned
/// once) stays. Clears the evidence lists.
pub fn resolve_sentence_initial(units: &mut [UnitPhrases]) {
    // word key -> (text units with it capitalised inside a sentence, text units with it in lower case)
    let mut evidence: HashMap<u64, (u32, u32)> = HashMap::new();
    for u in units.iter_mut() {
        for key in std::mem::take(&mut u.capitalised_inside) {
            evidence.entry(key).or_default().0 += 1;
        }
        for key in std::mem::take(&mut u.lowercase) {
            evidence.entry(key).or_default().1 += 1;
        }
    }
    for u in units.iter_mut() {
        u.mentions.retain_mut(|m| {
            let single = !m.phrase.contains(' ');
            if !(m.proper && (m.sentence_initial || single)) {
                return true;
            }
            m.sentence_initial = false;
            let (first, rest) = m.phrase.split_once(' ').unwrap_or((m.phrase.as_str(), ""));
            let (capitalised, lower) = evidence.get(&word_key(first)).copied().unwrap_or_default();
            if capitalised >= lower {
                return true;
            }
            let mut rest: Vec<&str> = rest.split(' ').filter(|w| !w.is_empty()).collect();
            while rest.first().is_some_and(|w| is_connector(w)) {
                rest.remove(0);
            }
            if rest.is_empty() {
                return false;
            }
            m.phrase = rest.join(" ");
            true
        });
    }
}

/// A text unit of the given (phrase, sentence) mentions, all proper nouns
/// and none sentence-initial: the tests' hand-written extractor output.
#[cfg(test)]
fn unit(mentions: &[(&str, u32)]) -> UnitPhrases {
    UnitPhrases {
        mentions: mentions
            .iter()
            .map(|&(p, sentence)| Mention { phrase: p.to_string(), sentence, proper: true, sentence_initial: false })
            .collect(),
        capitalised_inside: Vec::new(),
        lowercase: Vec::new(),
    }
}
