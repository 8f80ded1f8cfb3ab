//! The "fast" extraction method without an LLM (GraphRAG's `extract_graph_nlp`):
//! noun phrases per text unit ([`PhraseExtractor`], pluggable; [`RegexEnglishExtractor`]
//! by default), then a co-occurrence graph between phrases of the same sentence
//! window, weighted and pruned like GraphRAG's `prune_graph` ([`build_cooccurrence_graph`]).
//!
//! Everything here is deterministic: equal input gives equal output.

use std::collections::{HashMap, HashSet};

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

/// Rule-based English noun-phrase extraction (no POS tagger, no model), with
/// the filter of GraphRAG's `regex_english` extractor: a phrase is kept when
/// it holds a proper noun, has several words, or is a hyphenated compound — a
/// lone common noun (`room`, `door`) is not an entity.
///
/// The text is split into words (letters and digits by Unicode, with inner
/// apostrophes and hyphens: `Marley's`, `counting-house`) and sentences (`.`,
/// `!`, `?` — not the `.` after `Mr`, `Mrs`, `Dr`, `St`... — or a blank line).
/// Punctuation breaks phrases, and so does a blank line. Candidates are
/// - maximal runs of capitalised words, with the connectors `of`, `the`, `de`,
///   `van`, `von`, `der`, `la`, `du`... allowed inside (`Bank of England`);
/// - maximal runs of lower-case Latin-script words that are not stop words
///   and not verb/adverb-like (`-ed`, `-ly` endings), as adjective/noun runs; a
///   run longer than `max_words` keeps its last `max_words` words (the head noun
///   is last in English).
///
/// Stop words ([`STOP_WORDS`]), numbers, single characters and words longer
/// than `max_word_length` characters break runs. A trailing possessive `'s` is
/// removed from a phrase's last word (`Scrooge's nephew` gives `SCROOGE`). A
/// capitalised run longer than `max_words` is dropped (headings, all-caps
/// lines). Phrases are upper-cased. A capitalised run that starts a sentence or
/// a quotation is flagged [`Mention::sentence_initial`].
///
/// Other scripts: cased scripts (Cyrillic, Greek, accented Latin) give their
/// capitalised runs; lower-case words of non-Latin scripts, caseless scripts
/// and CJK give nothing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RegexEnglishExtractor {
    pub max_word_length: usize,
    pub min_words: usize,
    pub max_words: usize,
}

impl Default for RegexEnglishExtractor {
    fn default() -> Self {
        RegexEnglishExtractor { max_word_length: 15, min_words: 1, max_words: 4 }
    }
}

/// English stop words (sorted, lower-case): function words, pronouns, common
/// verbs in their inflected forms, and a few over-generic nouns.
#[rustfmt::skip]
pub const STOP_WORDS: &[&str] = &[
    "a", "about", "above", "across", "after", "afterwards", "again", "against", "ago", "agree",
    "agreed", "agrees", "ah", "all", "almost", "alone", "along", "already", "also", "although",
    "always", "am", "among", "amongst", "an", "and", "another", "any", "anybody", "anyhow",
    "anyone", "anything", "anyway", "anyways", "anywhere", "appear", "appeared", "appears", "are",
    "aren't", "around", "as", "aside", "ask", "asked", "asks", "at", "ate", "away", "back", "be",
    "became", "because", "become", "becomes", "becoming", "been", "before", "beforehand", "began",
    "begin", "begins", "begun", "behind", "being", "believe", "believed", "believes", "below",
    "beside", "besides", "best", "better", "between", "beyond", "billion", "both", "bought",
    "break", "breaks", "bring", "brings", "broke", "broken", "brought", "build", "builds", "built",
    "but", "buy", "buys", "by", "call", "called", "calls", "came", "can", "can't", "cannot",
    "carried", "carries", "carry", "catch", "catches", "caught", "choose", "chooses", "chose",
    "chosen", "come", "comes", "coming", "consider", "considered", "considers", "continue",
    "continued", "continues", "could", "couldn't", "create", "created", "creates", "cried",
    "cries", "cry", "cut", "cuts", "decide", "decided", "decides", "did", "didn't", "die", "died",
    "dies", "do", "does", "doesn't", "doing", "don't", "done", "doth", "down", "draw", "drawn",
    "draws", "drew", "during", "each", "eat", "eaten", "eats", "eg", "eight", "either", "eleven",
    "else", "elsewhere", "enough", "etc", "even", "ever", "every", "everybody", "everyone",
    "everything", "everywhere", "except", "explain", "explained", "explains", "fall", "fallen",
    "falls", "feel", "feeling", "feels", "fell", "felt", "few", "find", "finding", "finds",
    "first", "five", "follow", "followed", "follows", "for", "former", "formerly", "found", "four",
    "from", "further", "furthermore", "gave", "get", "gets", "getting", "give", "given", "gives",
    "giving", "go", "goes", "going", "gone", "got", "gotten", "grew", "grow", "grown", "grows",
    "had", "hadn't", "happen", "happened", "happens", "has", "hasn't", "hath", "have", "haven't",
    "having", "he", "he'd", "he'll", "he's", "hear", "heard", "hears", "held", "help", "helped",
    "helps", "hence", "her", "here", "here's", "hereafter", "hereby", "herein", "hers", "herself",
    "him", "himself", "his", "hold", "holds", "hope", "hoped", "hopes", "how", "how's", "however",
    "hundred", "i", "i'd", "i'll", "i'm", "i've", "ie", "if", "in", "include", "included",
    "includes", "indeed", "instead", "into", "is", "isn't", "it", "it's", "its", "itself", "just",
    "keep", "keeping", "keeps", "kept", "kill", "killed", "kills", "kind", "knew", "know",
    "knowing", "known", "knows", "last", "later", "latter", "lead", "leads", "least", "leave",
    "leaves", "leaving", "led", "left", "less", "let", "let's", "lets", "like", "likely", "live",
    "lived", "lives", "look", "looked", "looking", "looks", "lose", "loses", "lost", "lot", "lots",
    "made", "make", "makes", "making", "many", "may", "maybe", "me", "mean", "means", "meant",
    "meanwhile", "meet", "meets", "met", "might", "million", "mine", "more", "moreover", "most",
    "mostly", "move", "moved", "moves", "much", "must", "mustn't", "my", "myself", "namely",
    "need", "needed", "needs", "neither", "never", "nevertheless", "next", "nine", "no", "nobody",
    "none", "noone", "nor", "not", "nothing", "now", "nowhere", "of", "off", "offer", "offered",
    "offers", "often", "oh", "ok", "okay", "on", "once", "one", "ones", "only", "onto", "open",
    "opened", "opens", "or", "other", "others", "otherwise", "ought", "our", "ours", "ourselves",
    "out", "over", "own", "paid", "part", "pass", "passed", "passes", "pay", "pays", "per",
    "perhaps", "play", "played", "plays", "please", "put", "puts", "putting", "quite", "raise",
    "raised", "raises", "ran", "rather", "reach", "reached", "reaches", "read", "reads", "really",
    "receive", "received", "receives", "remember", "remembered", "remembers", "replied", "reply",
    "return", "returned", "returns", "run", "running", "runs", "said", "same", "sat", "saw", "say",
    "saying", "says", "second", "see", "seeing", "seem", "seemed", "seems", "seen", "sees", "sell",
    "sells", "send", "sends", "sent", "serve", "served", "serves", "set", "sets", "seven",
    "several", "shall", "shalt", "shan't", "she", "she'd", "she'll", "she's", "should",
    "shouldn't", "show", "showed", "shown", "shows", "since", "sit", "sits", "six", "so", "sold",
    "some", "somebody", "somehow", "someone", "something", "sometime", "sometimes", "somewhat",
    "somewhere", "soon", "sort", "speak", "speaks", "spend", "spends", "spent", "spoke", "spoken",
    "stand", "stands", "stay", "stayed", "stays", "still", "stood", "stop", "stopped", "stops",
    "such", "take", "taken", "takes", "taking", "taught", "teach", "teaches", "tell", "telling",
    "tells", "ten", "than", "that", "that's", "the", "thee", "their", "theirs", "them",
    "themselves", "then", "thence", "there", "there's", "thereafter", "thereby", "therefore",
    "therein", "thereupon", "these", "they", "they'd", "they'll", "they're", "they've", "thine",
    "thing", "things", "think", "thinking", "thinks", "third", "thirty", "this", "those", "thou",
    "though", "thought", "thousand", "three", "through", "throughout", "thus", "thy", "till",
    "time", "times", "to", "together", "told", "too", "took", "toward", "towards", "tried",
    "tries", "try", "trying", "turn", "turned", "turns", "twelve", "twenty", "two", "under",
    "understand", "understands", "understood", "unless", "until", "unto", "up", "upon", "us",
    "use", "used", "uses", "using", "very", "via", "vs", "walk", "walked", "walks", "want",
    "wanted", "wants", "was", "wasn't", "way", "ways", "we", "we'd", "we'll", "we're", "we've",
    "well", "went", "were", "weren't", "what", "what's", "whatever", "when", "when's", "whence",
    "whenever", "where", "where's", "whereas", "whereby", "wherein", "wherever", "whether",
    "which", "while", "whilst", "whither", "who", "who's", "whoever", "whole", "whom", "whose",
    "why", "why's", "will", "wilt", "win", "wins", "with", "within", "without", "won", "won't",
    "work", "worked", "works", "would", "wouldn't", "write", "writes", "written", "wrote", "ye",
    "yes", "yet", "you", "you'd", "you'll", "you're", "you've", "your", "yours", "yourself",
    "yourselves", "zero",
];

/// Words allowed inside a run of capitalised words (`Bank of England`,
/// `Ludwig van Beethoven`), never at its ends.
const CONNECTORS: &[&str] =
    &["al", "bin", "da", "de", "del", "della", "den", "der", "di", "du", "la", "le", "of", "the", "van", "von"];

/// Abbreviations whose trailing `.` does not end a phrase.
const ABBREVIATIONS: &[&str] = &[
    "capt", "col", "dr", "gen", "hon", "jr", "lt", "messrs", "mr", "mrs", "ms", "mt", "prof", "rev", "sgt", "sr", "st",
];

/// `-ly` words that are nouns, not adverbs.
const LY_NOUNS: &[&str] = &[
    "ally",
    "anomaly",
    "assembly",
    "belly",
    "bully",
    "butterfly",
    "family",
    "folly",
    "holly",
    "jelly",
    "lily",
    "melancholy",
    "monopoly",
    "rally",
    "reply",
    "supply",
];

/// Calls `f` with the lower-case form of `w`, without allocating for short
/// ASCII words (nearly all of them: this runs for every word of the corpus).
fn with_lowercase<R>(w: &str, f: impl FnOnce(&str) -> R) -> R {
    let mut buf = [0u8; 32];
    if w.len() <= buf.len() && w.is_ascii() {
        let lower = &mut buf[..w.len()];
        lower.copy_from_slice(w.as_bytes());
        lower.make_ascii_lowercase();
        f(std::str::from_utf8(lower).unwrap_or_default())
    } else {
        f(&w.to_lowercase())
    }
}

fn is_stop_word(w: &str) -> bool {
    STOP_WORDS.binary_search(&w).is_ok()
}

fn is_connector(w: &str) -> bool {
    with_lowercase(w, |l| CONNECTORS.binary_search(&l).is_ok())
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Class {
    Cap,
    Lower,
    Connector,
    Break,
}

fn is_cjk(c: char) -> bool {
    matches!(c as u32,
        0x3040..=0x30FF | 0x3400..=0x4DBF | 0x4E00..=0x9FFF | 0xF900..=0xFAFF | 0xFF66..=0xFF9F
        | 0x20000..=0x2FFFF)
}

fn is_latin(c: char) -> bool {
    c.is_ascii() || matches!(c as u32, 0xC0..=0x24F | 0x1E00..=0x1EFF)
}

/// Removes a trailing possessive `'s` (straight or curly apostrophe).
fn strip_possessive(w: &str) -> &str {
    for suffix in ["'s", "'S", "\u{2019}s", "\u{2019}S"] {
        if let Some(base) = w.strip_suffix(suffix) {
            if !base.is_empty() {
                return base;
            }
        }
    }
    w
}

/// A word of the text and what the gap before it says.
struct Word<'a> {
    text: &'a str,
    /// Punctuation or a blank line precedes it: no phrase spans the gap.
    phrase_break: bool,
    /// Index of its sentence.
    sentence: u32,
    /// First word of a sentence or of a quotation: its capital says nothing.
    initial: bool,
}

impl RegexEnglishExtractor {
    fn classify(&self, word: &str) -> Class {
        let n = word.chars().count();
        if n <= 1 || n > self.max_word_length {
            return Class::Break;
        }
        let mut chars = word.chars();
        let first = chars.next().unwrap_or(' ');
        if first.is_numeric() && word.chars().all(|c| c.is_numeric() || c == '-' || c == '\'' || c == '\u{2019}') {
            return Class::Break;
        }
        if !word.is_ascii() && word.chars().any(is_cjk) {
            return Class::Break;
        }
        let straight;
        let word = if word.contains('\u{2019}') {
            straight = word.replace('\u{2019}', "'");
            straight.as_str()
        } else {
            word
        };
        with_lowercase(word, |lower| {
            if CONNECTORS.binary_search(&lower).is_ok() {
                return Class::Connector;
            }
            let base = strip_possessive(lower);
            if is_stop_word(lower) || is_stop_word(base) {
                return Class::Break;
            }
            if first.is_uppercase() {
                return Class::Cap;
            }
            if first.is_lowercase() && (word.is_ascii() || word.chars().all(is_latin)) {
                let blen = base.chars().count();
                if base.ends_with("ly") && blen > 5 && LY_NOUNS.binary_search(&base).is_err() {
                    return Class::Break; // adverb
                }
                if base.ends_with("ed") && blen > 4 && !base.ends_with("eed") {
                    return Class::Break; // past tense / participle
                }
                return Class::Lower;
            }
            Class::Break
        })
    }

    /// The words of `text`, with phrase and sentence boundaries.
    fn words<'a>(&self, text: &'a str) -> Vec<Word<'a>> {
        let mut out: Vec<Word<'a>> = Vec::new();
        let mut chars = text.char_indices().peekable();
        let mut sentence = 0u32;
        // What the gap since the previous word held.
        let mut gap_break = false;
        let mut gap_dots = 0usize;
        let mut gap_end = false; // `!` or `?`
        let mut gap_quote = false;
        let mut gap_newlines = 0usize;
        let is_word = |c: char| c.is_alphanumeric();
        while let Some((i, c)) = chars.next() {
            if is_word(c) {
                // A word: alphanumerics with single inner apostrophes/hyphens.
                let mut end = i + c.len_utf8();
                loop {
                    match chars.peek().copied() {
                        Some((j, d)) if is_word(d) => {
                            chars.next();
                            end = j + d.len_utf8();
                        }
                        Some((_, '\'' | '\u{2019}' | '-')) => {
                            let mut ahead = chars.clone();
                            ahead.next();
                            match ahead.peek().copied() {
                                Some((k, e)) if is_word(e) => {
                                    chars.next();
                                    chars.next();
                                    end = k + e.len_utf8();
                                }
                                _ => break,
                            }
                        }
                        _ => break,
                    }
                }
                let word = &text[i..end];
                let abbreviation_dot = gap_dots == 1
                    && out.last().is_some_and(|w| with_lowercase(w.text, |l| ABBREVIATIONS.binary_search(&l).is_ok()));
                let new_sentence =
                    !out.is_empty() && (gap_end || gap_newlines >= 2 || (gap_dots > 0 && !abbreviation_dot));
                if new_sentence {
                    sentence += 1;
                }
                out.push(Word {
                    text: word,
                    phrase_break: (gap_break && !abbreviation_dot) || gap_newlines >= 2,
                    sentence,
                    initial: out.is_empty() || new_sentence || gap_quote,
                });
                gap_break = false;
                gap_dots = 0;
                gap_end = false;
                gap_quote = false;
                gap_newlines = 0;
            } else if c == '\n' {
                gap_newlines += 1;
            } else if !c.is_whitespace() {
                gap_break = true;
                match c {
                    '.' => gap_dots += 1,
                    '!' | '?' => gap_end = true,
                    '"' | '\'' | '\u{201C}' | '\u{2018}' | ':' => {
                        gap_quote = true;
                        gap_dots += 2; // not an abbreviation's dot
                    }
                    _ => gap_dots += 2,
                }
            }
        }
        out
    }
}

/// A word as phrases hold it: curly apostrophes made straight, upper-cased.
fn normalise_word(w: &str, out: &mut String) {
    for c in w.chars() {
        if c == '\u{2019}' {
            out.push('\'');
        } else {
            out.extend(c.to_uppercase());
        }
    }
}

/// A phrase's words normalised and joined by single spaces, without the
/// possessive of the last word.
fn phrase_text(words: &[&str]) -> String {
    let mut s = String::new();
    for (i, w) in words.iter().enumerate() {
        if i > 0 {
            s.push(' ');
        }
        normalise_word(if i + 1 == words.len() { strip_possessive(w) } else { w }, &mut s);
    }
    s
}

impl PhraseExtractor for RegexEnglishExtractor {
    fn extract(&self, text: &str) -> UnitPhrases {
        let mut mentions: Vec<Mention> = Vec::new();
        let mut capitalised_inside: Vec<u64> = Vec::new();
        let mut lowercase: Vec<u64> = Vec::new();
        let min_words = self.min_words.max(1);
        let max_words = self.max_words.max(min_words);
        let mut run: Vec<&str> = Vec::new();
        let mut run_kind = Class::Break;
        let mut run_sentence = 0u32;
        let mut run_initial = false;

        let mut flush = |run: &mut Vec<&str>, kind: Class, sentence: u32, initial: bool| {
            if kind == Class::Cap {
                while run.last().is_some_and(|w| is_connector(w)) {
                    run.pop();
                }
            }
            let words: &[&str] = match kind {
                Class::Cap if run.len() > max_words => &[],
                Class::Lower if run.len() > max_words => &run[run.len() - max_words..],
                // GraphRAG's filter: a lone common noun is not an entity.
                Class::Lower if run.len() == 1 && !run[0].contains('-') => &[],
                _ => &run[..],
            };
            if !words.is_empty() && words.len() >= min_words {
                let phrase = phrase_text(words);
                if !phrase.is_empty() {
                    let proper = kind == Class::Cap;
                    mentions.push(Mention { phrase, sentence, proper, sentence_initial: proper && initial });
                }
            }
            run.clear();
        };

        for word in self.words(text) {
            if word.phrase_break {
                flush(&mut run, run_kind, run_sentence, run_initial);
                run_kind = Class::Break;
            }
            let class = self.classify(word.text);
            let first = word.text.chars().next().unwrap_or(' ');
            if class == Class::Cap && !word.initial {
                capitalised_inside.push(word_key(word.text));
            } else if first.is_lowercase() && class != Class::Connector {
                lowercase.push(word_key(word.text));
            }
            match class {
                Class::Break => {
                    flush(&mut run, run_kind, run_sentence, run_initial);
                    run_kind = Class::Break;
                }
                Class::Connector => {
                    if run_kind == Class::Cap && !run.is_empty() {
                        run.push(word.text);
                    } else {
                        flush(&mut run, run_kind, run_sentence, run_initial);
                        run_kind = Class::Break;
                    }
                }
                kind => {
                    if run_kind != kind {
                        flush(&mut run, run_kind, run_sentence, run_initial);
                        run_kind = kind;
                        run_sentence = word.sentence;
                        run_initial = word.initial;
                    }
                    run.push(word.text);
                }
            }
        }
        flush(&mut run, run_kind, run_sentence, run_initial);
        for keys in [&mut capitalised_inside, &mut lowercase] {
            keys.sort_unstable();
            keys.dedup();
        }
        UnitPhrases { mentions, capitalised_inside, lowercase }
    }
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

// ---------------------------------------------------------------------------
// Co-occurrence graph.

/// Graph building and pruning options. The defaults are GraphRAG's
/// `extract_graph_nlp` / `prune_graph` defaults, except the sentence window
/// and count weights (with sentence windows, normalised PMI and the 40th
/// percentile cut keep pairs of rare phrases and drop the strong associations
/// of frequent ones); settings.yaml's defaults for those sections are these.
#[derive(Debug, Clone, PartialEq)]
pub struct NlpGraphConfig {
    /// Phrases co-occur when their sentences are fewer than this many apart
    /// (1: the same sentence, 2: the same or the next one); 0: anywhere in the
    /// same text unit, as GraphRAG does.
    pub cooccurrence_window: u32,
    /// Weight edges by normalised PMI instead of raw co-occurrence counts.
    pub normalize_edge_weights: bool,
    /// Nodes mentioned in fewer text units are removed.
    pub min_node_freq: u32,
    /// Nodes whose frequency is above mean + k·std (population) are removed.
    pub max_node_freq_std: Option<f64>,
    /// Nodes with fewer edges are removed.
    pub min_node_degree: u32,
    /// Nodes whose degree is above mean + k·std (population) are removed.
    pub max_node_degree_std: Option<f64>,
    /// Edges whose weight is below this percentile (0–100, linear
    /// interpolation as numpy's default) of the remaining weights are removed.
    pub min_edge_weight_pct: f64,
    /// Remove the node with the highest degree (the "ego" node).
    pub remove_ego_nodes: bool,
    /// Keep only the largest connected component.
    pub lcc_only: bool,
}

impl Default for NlpGraphConfig {
    fn default() -> Self {
        NlpGraphConfig {
            cooccurrence_window: 2,
            normalize_edge_weights: false,
            min_node_freq: 2,
            max_node_freq_std: None,
            min_node_degree: 1,
            max_node_degree_std: None,
            min_edge_weight_pct: 40.0,
            // GraphRAG: true. The most connected entity is the corpus's
            // protagonist or hub (SCROOGE in A Christmas Carol), and deleting
            // it loses retrieval (docs/benchmarks.md, "Entity resolution").
            remove_ego_nodes: false,
            lcc_only: false,
        }
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct NlpNode {
    pub title: String,
    /// Number of text units mentioning it.
    pub frequency: u32,
    /// Indices of those text units, ascending.
    pub chunk_ids: Vec<usize>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct NlpEdge {
    /// `source < target` (byte-wise string order).
    pub source: String,
    pub target: String,
    /// `count`, or the normalised PMI weight in (0, 1] (see [`build_cooccurrence_graph`]).
    pub weight: f64,
    /// Number of co-occurrences: text units (window 0) or pairs of sentences
    /// within the window.
    pub count: u32,
    /// Indices of the text units where they co-occur, ascending.
    pub chunk_ids: Vec<usize>,
}

#[derive(Debug, Clone, Default, PartialEq)]
pub struct NlpGraph {
    /// Sorted by title.
    pub nodes: Vec<NlpNode>,
    /// Sorted by (source, target).
    pub edges: Vec<NlpEdge>,
}

struct Edge {
    a: u32,
    b: u32,
    count: u32,
    /// Its text units: `edge_units[units.0..units.1]`.
    units: (usize, usize),
    weight: f64,
    alive: bool,
}

struct Work {
    node_alive: Vec<bool>,
    edges: Vec<Edge>,
}

impl Work {
    fn drop_dead_edges(&mut self) {
        for e in &mut self.edges {
            if e.alive && !(self.node_alive[e.a as usize] && self.node_alive[e.b as usize]) {
                e.alive = false;
            }
        }
    }

    fn degrees(&self) -> Vec<u32> {
        let mut d = vec![0u32; self.node_alive.len()];
        for e in self.edges.iter().filter(|e| e.alive) {
            d[e.a as usize] += 1;
            d[e.b as usize] += 1;
        }
        d
    }

    fn kill_nodes(&mut self, dead: impl Fn(usize) -> bool) {
        for i in 0..self.node_alive.len() {
            if self.node_alive[i] && dead(i) {
                self.node_alive[i] = false;
            }
        }
        self.drop_dead_edges();
    }

    /// mean + k·std (population) of `values` over the live nodes.
    fn upper_threshold(&self, values: &[f64], k: f64) -> f64 {
        let live: Vec<f64> = (0..values.len()).filter(|&i| self.node_alive[i]).map(|i| values[i]).collect();
        if live.is_empty() {
            return f64::INFINITY;
        }
        let n = live.len() as f64;
        let mean = live.iter().sum::<f64>() / n;
        let var = live.iter().map(|v| (v - mean) * (v - mean)).sum::<f64>() / n;
        mean + k * var.sqrt()
    }

    fn prune_by_degree(&mut self, cfg: &NlpGraphConfig) {
        let d = self.degrees();
        self.kill_nodes(|i| d[i] < cfg.min_node_degree);
        if let Some(k) = cfg.max_node_degree_std {
            let d: Vec<f64> = self.degrees().into_iter().map(f64::from).collect();
            let t = self.upper_threshold(&d, k);
            self.kill_nodes(|i| d[i] > t);
        }
    }

    fn prune_edges_by_weight(&mut self, pct: f64) {
        if pct.is_nan() || pct <= 0.0 {
            return;
        }
        let mut w: Vec<f64> = self.edges.iter().filter(|e| e.alive).map(|e| e.weight).collect();
        if w.is_empty() {
            return;
        }
        w.sort_unstable_by(f64::total_cmp);
        let rank = (pct.min(100.0) / 100.0) * (w.len() - 1) as f64;
        let lo = rank.floor() as usize;
        let hi = rank.ceil() as usize;
        let threshold = w[lo] + (w[hi] - w[lo]) * (rank - lo as f64);
        for e in &mut self.edges {
            if e.alive && e.weight < threshold {
                e.alive = false;
            }
        }
    }

    fn remove_ego(&mut self) {
        let d = self.degrees();
        // Highest degree; ties go to the smallest title (lowest index).
        let ego = (0..d.len()).filter(|&i| self.node_alive[i]).max_by(|&x, &y| d[x].cmp(&d[y]).then(y.cmp(&x)));
        if let Some(ego) = ego {
            self.kill_nodes(|i| i == ego);
        }
    }

    fn keep_largest_component(&mut self) {
        let n = self.node_alive.len();
        let mut parent: Vec<usize> = (0..n).collect();
        fn find(p: &mut [usize], mut x: usize) -> usize {
            while p[x] != x {
                p[x] = p[p[x]];
                x = p[x];
            }
            x
        }
        for e in self.edges.iter().filter(|e| e.alive) {
            let (ra, rb) = (find(&mut parent, e.a as usize), find(&mut parent, e.b as usize));
            if ra != rb {
                let (lo, hi) = if ra < rb { (ra, rb) } else { (rb, ra) };
                parent[hi] = lo;
            }
        }
        let mut size = vec![0usize; n];
        let mut roots = vec![0usize; n];
        for i in 0..n {
            roots[i] = find(&mut parent, i);
            if self.node_alive[i] {
                size[roots[i]] += 1;
            }
        }
        // Largest component; ties go to the one holding the smallest title.
        let Some(best) = (0..n).filter(|&r| size[r] > 0).max_by(|&x, &y| size[x].cmp(&size[y]).then(y.cmp(&x))) else {
            return;
        };
        self.kill_nodes(|i| roots[i] != best);
    }
}

/// Normalised PMI of a pair mapped to (0, 1]: with `n` contexts (text units,
/// or sentences with a window), `p(a) = freq(a)/n` and `p(a,b) = count(a,b)/n`,
/// `npmi = ln(p(a,b) / (p(a)·p(b))) / −ln p(a,b)` (in [−1, 1]; 1 when the pair
/// is in every context), weight = (1 + npmi) / 2. Independent phrases get 0.5,
/// phrases that only ever occur together get 1.
pub fn npmi_weight(count: u32, freq_a: u32, freq_b: u32, n_contexts: usize) -> f64 {
    let n = n_contexts.max(1) as f64;
    let p_ab = f64::from(count) / n;
    let p_a = f64::from(freq_a.max(1)) / n;
    let p_b = f64::from(freq_b.max(1)) / n;
    if p_ab <= 0.0 {
        return 0.0;
    }
    let npmi = if p_ab >= 1.0 { 1.0 } else { (p_ab / (p_a * p_b)).ln() / -p_ab.ln() };
    let w = (1.0 + npmi.clamp(-1.0, 1.0)) / 2.0;
    if w.is_finite() {
        w
    } else {
        0.0
    }
}

/// Phrase ids of one text unit grouped by sentence: `(sentence, ids)` with
/// sentences ascending and each `ids` sorted and unique.
fn sentence_groups(unit: &UnitPhrases, index: &HashMap<&str, u32>) -> Vec<(u32, Vec<u32>)> {
    let mut tagged: Vec<(u32, u32)> =
        unit.mentions.iter().filter_map(|m| index.get(m.phrase.as_str()).map(|&id| (m.sentence, id))).collect();
    tagged.sort_unstable();
    tagged.dedup();
    let mut groups: Vec<(u32, Vec<u32>)> = Vec::new();
    for (s, id) in tagged {
        match groups.last_mut() {
            Some((last, ids)) if *last == s => ids.push(id),
            _ => groups.push((s, vec![id])),
        }
    }
    groups
}

fn pair_key(a: u32, b: u32) -> u64 {
    let (lo, hi) = if a < b { (a, b) } else { (b, a) };
    (u64::from(lo) << 32) | u64::from(hi)
}

/// Builds the co-occurrence graph of `units` (one [`UnitPhrases`] per text
/// unit; empty phrases are ignored). Nodes are phrases, with frequency = the
/// number of text units mentioning them. Two phrases co-occur when their
/// sentences are fewer than `cooccurrence_window` apart (window 0: anywhere in
/// the unit); an edge's count is the number of such sentence pairs (window 0:
/// text units). The weight is the count, or [`npmi_weight`] over sentences
/// (window 0: text units) when `normalize_edge_weights`, computed on the whole
/// graph before pruning, as GraphRAG does.
///
/// Pruning, in this order: the ego node (highest degree in the full graph,
/// ties to the smallest title) when `remove_ego_nodes`, as GraphRAG does first;
/// nodes below `min_node_freq`, nodes above the frequency threshold
/// (mean + k·std); nodes below `min_node_degree`, nodes above the degree
/// threshold; edges below the `min_edge_weight_pct` percentile of the
/// remaining weights; the degree pruning once more (nodes left without edges
/// go when `min_node_degree >= 1`); then the largest connected component (ties
/// to the one with the smallest title) when `lcc_only`. Removing a node
/// removes its edges. Degrees and thresholds are recomputed at each step.
///
/// Output is sorted: nodes by title, edges by (source, target), source < target.
/// Memory is one 16-byte record per pair and text unit while building, then
/// one small record per distinct pair.
pub fn build_cooccurrence_graph(units: &[UnitPhrases], cfg: &NlpGraphConfig) -> NlpGraph {
    // Intern phrases; ids follow title order so edge keys sort like titles.
    let mut titles: Vec<&str> = {
        let mut seen: HashSet<&str> = HashSet::new();
        for u in units {
            for m in &u.mentions {
                if !m.phrase.trim().is_empty() {
                    seen.insert(m.phrase.as_str());
                }
            }
        }
        seen.into_iter().collect()
    };
    titles.sort_unstable();
    let index: HashMap<&str, u32> = titles.iter().enumerate().map(|(i, t)| (*t, i as u32)).collect();

    let mut node_units: Vec<Vec<u32>> = vec![Vec::new(); titles.len()];
    let mut node_sentences = vec![0u32; titles.len()];
    let mut contexts = 0usize;
    // One record per pair and text unit: (pair key, text unit, co-occurrences there).
    let mut pairs: Vec<(u64, u32, u32)> = Vec::new();
    let mut unit_pairs: Vec<u64> = Vec::new();
    let mut unit_ids: Vec<u32> = Vec::new();
    for (ui, unit) in units.iter().enumerate() {
        let ui = ui as u32;
        let groups = sentence_groups(unit, &index);
        unit_ids.clear();
        unit_ids.extend(groups.iter().flat_map(|(_, ids)| ids.iter().copied()));
        unit_ids.sort_unstable();
        unit_ids.dedup();
        for &id in &unit_ids {
            node_units[id as usize].push(ui);
        }
        unit_pairs.clear();
        if cfg.cooccurrence_window == 0 {
            contexts += usize::from(!unit_ids.is_empty());
            for (i, &a) in unit_ids.iter().enumerate() {
                unit_pairs.extend(unit_ids[i + 1..].iter().map(|&b| pair_key(a, b)));
            }
        } else {
            contexts += groups.len();
            for (gi, (s, ids)) in groups.iter().enumerate() {
                for &id in ids {
                    node_sentences[id as usize] += 1;
                }
                for (i, &a) in ids.iter().enumerate() {
                    unit_pairs.extend(ids[i + 1..].iter().map(|&b| pair_key(a, b)));
                }
                for (t, later) in &groups[gi + 1..] {
                    if t - s >= cfg.cooccurrence_window {
                        break;
                    }
                    for &a in ids {
                        unit_pairs.extend(later.iter().filter(|&&b| b != a).map(|&b| pair_key(a, b)));
                    }
                }
            }
        }
        // Repeats within a unit collapse into one record.
        unit_pairs.sort_unstable();
        for run in unit_pairs.chunk_by(|x, y| x == y) {
            pairs.push((run[0], ui, run.len() as u32));
        }
    }
    drop(index);
    pairs.sort_unstable();

    let freq: Vec<u32> = node_units.iter().map(|u| u.len() as u32).collect();
    let context_freq = if cfg.cooccurrence_window == 0 { &freq } else { &node_sentences };
    let mut edge_units: Vec<u32> = Vec::new();
    let mut edges: Vec<Edge> = Vec::new();
    for run in pairs.chunk_by(|x, y| x.0 == y.0) {
        let key = run[0].0;
        let start = edge_units.len();
        edge_units.extend(run.iter().map(|p| p.1));
        let (a, b) = ((key >> 32) as u32, key as u32);
        let count: u32 = run.iter().map(|p| p.2).sum();
        let weight = if cfg.normalize_edge_weights {
            npmi_weight(count, context_freq[a as usize], context_freq[b as usize], contexts)
        } else {
            f64::from(count)
        };
        edges.push(Edge { a, b, count, units: (start, edge_units.len()), weight, alive: true });
    }
    drop(pairs);

    let mut w = Work { node_alive: vec![true; titles.len()], edges };
    if cfg.remove_ego_nodes {
        w.remove_ego();
    }
    w.kill_nodes(|i| freq[i] < cfg.min_node_freq);
    if let Some(k) = cfg.max_node_freq_std {
        let f: Vec<f64> = freq.iter().map(|&x| f64::from(x)).collect();
        let t = w.upper_threshold(&f, k);
        w.kill_nodes(|i| f[i] > t);
    }
    w.prune_by_degree(cfg);
    w.prune_edges_by_weight(cfg.min_edge_weight_pct);
    w.prune_by_degree(cfg);
    if cfg.lcc_only {
        w.keep_largest_component();
    }

    let to_usize = |ids: &[u32]| ids.iter().map(|&u| u as usize).collect::<Vec<_>>();
    let nodes = (0..titles.len())
        .filter(|&i| w.node_alive[i])
        .map(|i| NlpNode { title: titles[i].to_string(), frequency: freq[i], chunk_ids: to_usize(&node_units[i]) })
        .collect();
    let edges = w
        .edges
        .iter()
        .filter(|e| e.alive)
        .map(|e| NlpEdge {
            source: titles[e.a as usize].to_string(),
            target: titles[e.b as usize].to_string(),
            weight: e.weight,
            count: e.count,
            chunk_ids: to_usize(&edge_units[e.units.0..e.units.1]),
        })
        .collect();
    NlpGraph { nodes, edges }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// Phrases of one text as a one-unit corpus, unique, in first-seen order.
    fn phrases_with(e: &RegexEnglishExtractor, text: &str) -> Vec<String> {
        let mut units = [e.extract(text)];
        resolve_sentence_initial(&mut units);
        let mut out: Vec<String> = Vec::new();
        for m in &units[0].mentions {
            if !out.contains(&m.phrase) {
                out.push(m.phrase.clone());
            }
        }
        out
    }

    fn ex(text: &str) -> Vec<String> {
        phrases_with(&RegexEnglishExtractor::default(), text)
    }

    #[test]
    fn title_phrases_join_the_first_sentence_as_names() {
        let e = RegexEnglishExtractor::default();
        let mut units = [
            e.extract("It rained on the green hills. Then Tom left."),
            e.extract("Nobody came."),
            e.extract("The green grass, the green door: religion, religion."),
        ];
        add_title_mentions(&mut units[0], &e.extract("Green Valley"));
        add_title_mentions(&mut units[1], &e.extract("Religion"));
        resolve_sentence_initial(&mut units);
        // "green" is a common word of the corpus, but a title's capitals are
        // its convention, not a sentence's start: the name stays whole.
        assert_eq!(
            units[0].mentions[0],
            Mention { phrase: "GREEN VALLEY".into(), sentence: 0, proper: true, sentence_initial: false }
        );
        assert!(units[0].mentions.iter().any(|m| m.phrase == "TOM" && m.sentence == 1));
        // A one-word title that the corpus writes in lower case is a common word.
        assert!(units[1].mentions.is_empty(), "{:?}", units[1].mentions);
    }

    #[test]
    fn word_lists_are_sorted_lowercase_and_unique() {
        for list in [STOP_WORDS, CONNECTORS, ABBREVIATIONS, LY_NOUNS] {
            assert!(list.windows(2).all(|w| w[0] < w[1]), "{:?}", list.windows(2).find(|w| w[0] >= w[1]));
            assert!(list.iter().all(|w| w.to_lowercase() == *w));
        }
        assert!(STOP_WORDS.len() >= 300);
    }

    #[test]
    fn christmas_carol_sentences() {
        let p = ex("Marley's Ghost visited Ebenezer Scrooge on Christmas Eve.");
        assert_eq!(p, ["MARLEY'S GHOST", "EBENEZER SCROOGE", "CHRISTMAS EVE"]);
        let p = ex("Bob Cratchit worked in the counting-house of Scrooge and Marley.");
        assert_eq!(p, ["BOB CRATCHIT", "COUNTING-HOUSE", "SCROOGE", "MARLEY"]);
        let p = ex("The Bank of England stood in the City of London, where Mr. Fezziwig kept a warehouse.");
        assert_eq!(p, ["BANK OF ENGLAND", "CITY OF LONDON", "MR FEZZIWIG"]);
        let p = ex("Scrooge's nephew Fred wished him a merry Christmas; Scrooge said \"Bah! Humbug!\"");
        assert_eq!(p, ["SCROOGE", "FRED", "CHRISTMAS", "BAH", "HUMBUG"]);
        let p = ex("The cold within him froze his old features, nipped his pointed nose.");
        assert!(p.contains(&"OLD FEATURES".to_string()), "{p:?}");
        assert!(!p.contains(&"NOSE".to_string()), "a lone common noun: {p:?}");
        assert!(!p.iter().any(|x| x.contains("NIPPED")), "{p:?}");
    }

    #[test]
    fn stop_words_numbers_and_letters_excluded() {
        let p = ex("It was the best of times, it was the worst of times. He had 1843 coins and a B.");
        assert!(p.iter().all(|x| !x.split(' ').any(|w| is_stop_word(&w.to_lowercase()))), "{p:?}");
        assert!(!p.iter().any(|x| x.contains("1843") || x == "B" || x == "A"), "{p:?}");
        assert!(p.is_empty(), "{p:?}");
        assert_eq!(ex("the worst of times, the heavy iron coins"), ["HEAVY IRON COINS"]);
        assert!(ex("The and of it is was were to be.").is_empty());
    }

    #[test]
    fn word_length_and_phrase_length_bounds() {
        let e = RegexEnglishExtractor { max_word_length: 6, min_words: 2, max_words: 2 };
        // "supercalifragilistic" breaks the run; single words are too short.
        assert_eq!(phrases_with(&e, "dark cold supercalifragilistic stone wall"), ["DARK COLD", "STONE WALL"]);
        // A lower-case run keeps its last words; a long capitalised run is dropped.
        assert_eq!(phrases_with(&e, "big dark cold house. Anna Maria Lena Sofia"), ["COLD HOUSE"]);
        // Connectors are trimmed from the ends.
        assert_eq!(ex("the Duke of."), ["DUKE"]);
    }

    #[test]
    fn deduplicated_in_first_seen_order() {
        let p = ex("Scrooge met Marley. Marley warned Scrooge. Scrooge's chains rattled.");
        assert_eq!(p[..2], ["SCROOGE", "MARLEY"]);
        assert_eq!(p.iter().filter(|x| *x == "SCROOGE").count(), 1);
    }

    #[test]
    fn lone_common_nouns_are_not_entities() {
        // GraphRAG's regex_english filter: proper noun, several words, or a compound.
        assert_eq!(ex("The door of the counting-house was open."), ["COUNTING-HOUSE"]);
        assert_eq!(ex("a door, a cold door-knocker, an iron door"), ["COLD DOOR-KNOCKER", "IRON DOOR"]);
    }

    #[test]
    fn sentence_initial_capitals_need_corpus_evidence() {
        // "Darkness" is seen in lower case and never capitalised inside a sentence.
        assert_eq!(ex("Darkness is cheap, and Scrooge liked darkness."), ["SCROOGE"]);
        // "Suddenly" likewise; the rest of the run stays.
        assert_eq!(ex("Suddenly Scrooge heard a bell. It rang suddenly."), ["SCROOGE"]);
        // "Marley" is capitalised inside a sentence elsewhere: a name.
        assert_eq!(ex("Marley was dead. Scrooge and Marley were partners."), ["MARLEY", "SCROOGE"]);
        // Never seen in lower case: kept (a name mentioned once).
        assert_eq!(ex("Fezziwig laughed."), ["FEZZIWIG"]);
        // A one-word name more often written in lower case is a common word, anywhere.
        assert_eq!(ex("Well, Yeah, said Bob Cratchit. Yeah. yeah, yeah."), ["BOB CRATCHIT"]);
        // Curly apostrophes: contractions are stop words too.
        assert!(ex("I\u{2019}m sure. I\u{2019}ve said so.").is_empty());
        // After an opening quote, like a sentence start; the evidence is corpus-wide.
        let e = RegexEnglishExtractor::default();
        let mut units = [e.extract("He said \"Humbug!\""), e.extract("What humbug it was.")];
        resolve_sentence_initial(&mut units);
        assert!(units[0].mentions.is_empty(), "{:?}", units[0].mentions);
        assert!(units.iter().all(|u| u.capitalised_inside.is_empty() && u.lowercase.is_empty()));
    }

    #[test]
    fn mentions_carry_their_sentence() {
        let u =
            RegexEnglishExtractor::default().extract("Old Fezziwig danced. Mr. Fezziwig laughed!\n\nDick Wilkins came");
        let got: Vec<(&str, u32, bool)> =
            u.mentions.iter().map(|m| (m.phrase.as_str(), m.sentence, m.sentence_initial)).collect();
        assert_eq!(got, [("OLD FEZZIWIG", 0, true), ("MR FEZZIWIG", 1, true), ("DICK WILKINS", 2, true)]);
        assert!(u.mentions.iter().all(|m| m.proper));
        let u = RegexEnglishExtractor::default().extract("a cold counting-house");
        assert!(!u.mentions[0].proper && !u.mentions[0].sentence_initial);
        assert_eq!(word_key("Fezziwig's"), word_key("FEZZIWIG"));
        assert_ne!(word_key("Fezziwig"), word_key("Fezziwigs"));
    }

    #[test]
    fn blank_lines_break_phrases_but_wrapped_lines_do_not() {
        assert_eq!(ex("the Bank of\nEngland"), ["BANK OF ENGLAND"]);
        assert_eq!(ex("STAVE ONE\n\nMarley was dead"), ["STAVE", "MARLEY"]);
    }

    #[test]
    fn non_english_text() {
        assert_eq!(ex("Лев Толстой написал роман"), ["ЛЕВ ТОЛСТОЙ"]);
        assert_eq!(ex("José García visitó la Ciudad de México."), ["JOSÉ GARCÍA", "CIUDAD DE MÉXICO"]);
        assert!(ex("北京是中国的首都。李白是唐代诗人。").is_empty());
        assert!(ex("東京タワーに行きました").is_empty());
        let _ = ex("مرحبا بالعالم שלום עולם 안녕하세요 세계 🎄🎅 ÿ̶̡͔a\u{0}\u{200b}b");
    }

    #[test]
    fn pluggable_extractor() {
        struct Words;
        impl PhraseExtractor for Words {
            fn extract(&self, text: &str) -> UnitPhrases {
                let words: Vec<(&str, u32)> = text.split_whitespace().map(|w| (w, 0)).collect();
                unit(&words)
            }
        }
        let extractors: Vec<Box<dyn PhraseExtractor>> =
            vec![Box::new(Words), Box::new(RegexEnglishExtractor::default())];
        assert_eq!(extractors[0].extract("a b"), unit(&[("a", 0), ("b", 0)]));
        assert_eq!(extractors[1].extract("Tiny Tim").mentions[0].phrase, "TINY TIM");
    }

    /// Text units whose phrases all share one sentence.
    fn chunks(lists: &[&[&str]]) -> Vec<UnitPhrases> {
        lists.iter().map(|l| unit(&l.iter().map(|p| (*p, 0)).collect::<Vec<_>>())).collect()
    }

    fn unit(mentions: &[(&str, u32)]) -> UnitPhrases {
        UnitPhrases {
            mentions: mentions
                .iter()
                .map(|&(p, sentence)| Mention {
                    phrase: p.to_string(),
                    sentence,
                    proper: true,
                    sentence_initial: false,
                })
                .collect(),
            capitalised_inside: Vec::new(),
            lowercase: Vec::new(),
        }
    }

    fn no_pruning() -> NlpGraphConfig {
        NlpGraphConfig {
            cooccurrence_window: 1,
            normalize_edge_weights: false,
            min_node_freq: 0,
            max_node_freq_std: None,
            min_node_degree: 0,
            max_node_degree_std: None,
            min_edge_weight_pct: 0.0,
            remove_ego_nodes: false,
            lcc_only: false,
        }
    }

    fn edge_list(g: &NlpGraph) -> Vec<(&str, &str, f64)> {
        g.edges.iter().map(|e| (e.source.as_str(), e.target.as_str(), e.weight)).collect()
    }

    fn node_list(g: &NlpGraph) -> Vec<&str> {
        g.nodes.iter().map(|n| n.title.as_str()).collect()
    }

    #[test]
    fn defaults_match_graphrag() {
        let c = NlpGraphConfig::default();
        assert!(!c.normalize_edge_weights && !c.remove_ego_nodes && !c.lcc_only, "ego nodes kept, unlike GraphRAG");
        assert_eq!(c.cooccurrence_window, 2);
        assert_eq!((c.min_node_freq, c.min_node_degree, c.min_edge_weight_pct), (2, 1, 40.0));
        assert_eq!((c.max_node_freq_std, c.max_node_degree_std), (None, None));
        assert_eq!(
            RegexEnglishExtractor::default(),
            RegexEnglishExtractor { max_word_length: 15, min_words: 1, max_words: 4 }
        );
    }

    #[test]
    fn counts_frequencies_and_chunk_ids() {
        let g = build_cooccurrence_graph(
            &chunks(&[&["C", "A", "B", "A"], &["B", "A", ""], &["C", "B"], &[]]),
            &no_pruning(),
        );
        assert_eq!(
            g.nodes,
            [
                NlpNode { title: "A".into(), frequency: 2, chunk_ids: vec![0, 1] },
                NlpNode { title: "B".into(), frequency: 3, chunk_ids: vec![0, 1, 2] },
                NlpNode { title: "C".into(), frequency: 2, chunk_ids: vec![0, 2] },
            ]
        );
        assert_eq!(edge_list(&g), [("A", "B", 2.0), ("A", "C", 1.0), ("B", "C", 2.0)]);
        assert_eq!(g.edges[0].count, 2);
        assert_eq!(g.edges[0].chunk_ids, [0, 1]);
        assert_eq!(g.edges[2].chunk_ids, [0, 2]);
    }

    #[test]
    fn sentence_window() {
        // A and B share sentence 0, C is in sentence 1, D in sentence 3.
        let units = [unit(&[("A", 0), ("B", 0), ("C", 1), ("D", 3), ("A", 3)])];
        let same_sentence = build_cooccurrence_graph(&units, &no_pruning());
        assert_eq!(edge_list(&same_sentence), [("A", "B", 1.0), ("A", "D", 1.0)]);
        let adjacent = build_cooccurrence_graph(&units, &NlpGraphConfig { cooccurrence_window: 2, ..no_pruning() });
        assert_eq!(edge_list(&adjacent), [("A", "B", 1.0), ("A", "C", 1.0), ("A", "D", 1.0), ("B", "C", 1.0)]);
        // Window 0: the whole text unit, one co-occurrence per unit.
        let whole = build_cooccurrence_graph(&units, &NlpGraphConfig { cooccurrence_window: 0, ..no_pruning() });
        assert_eq!(whole.edges.len(), 6);
        assert!(whole.edges.iter().all(|e| e.count == 1 && e.chunk_ids == [0]));
        // Counts add up over sentences and units; text units are listed once.
        let units = [unit(&[("A", 0), ("B", 0), ("A", 1), ("B", 1)]), unit(&[("B", 4), ("A", 4)])];
        let g = build_cooccurrence_graph(&units, &no_pruning());
        assert_eq!(g.edges[0].count, 3);
        assert_eq!(g.edges[0].chunk_ids, [0, 1]);
    }

    #[test]
    fn npmi_weights() {
        let cfg = NlpGraphConfig { normalize_edge_weights: true, ..no_pruning() };
        let g = build_cooccurrence_graph(&chunks(&[&["A", "B", "C"], &["A", "B"], &["B", "C"]]), &cfg);
        // A-B: p(ab)=2/3, p(a)=2/3, p(b)=1 → pmi 0 → 0.5.
        assert!((g.edges[0].weight - 0.5).abs() < 1e-12);
        // A-C: p(ac)=1/3, p(a)=p(c)=2/3 → npmi = ln(0.75)/ln(3).
        let expect = (1.0 + 0.75f64.ln() / 3f64.ln()) / 2.0;
        assert!((g.edges[1].weight - expect).abs() < 1e-12);
        assert_eq!(g.edges[1].count, 1);
        // Phrases that only occur together: 1.
        assert!((npmi_weight(1, 1, 1, 10) - 1.0).abs() < 1e-12);
        assert_eq!(npmi_weight(3, 3, 3, 3), 1.0);
        assert!(npmi_weight(1, 5, 5, 10) > 0.0 && npmi_weight(1, 5, 5, 10) < 0.5);
        assert_eq!(npmi_weight(0, 1, 1, 0), 0.0);
    }

    #[test]
    fn prune_min_node_freq() {
        let cfg = NlpGraphConfig { min_node_freq: 2, ..no_pruning() };
        let g = build_cooccurrence_graph(&chunks(&[&["A", "B", "X"], &["A", "B"]]), &cfg);
        assert_eq!(node_list(&g), ["A", "B"]);
        assert_eq!(edge_list(&g), [("A", "B", 2.0)]);
    }

    #[test]
    fn prune_max_node_freq_std() {
        // Frequencies A=5, B..E=1: mean 1.8, std 1.6 → threshold 3.4 with k=1.
        let cfg = NlpGraphConfig { max_node_freq_std: Some(1.0), ..no_pruning() };
        let g = build_cooccurrence_graph(&chunks(&[&["A", "B"], &["A", "C"], &["A", "D"], &["A", "E"], &["A"]]), &cfg);
        assert_eq!(node_list(&g), ["B", "C", "D", "E"]);
        assert!(g.edges.is_empty());
    }

    #[test]
    fn prune_by_degree() {
        let cfg = NlpGraphConfig { min_node_degree: 1, ..no_pruning() };
        let g = build_cooccurrence_graph(&chunks(&[&["A", "B"], &["LONE"]]), &cfg);
        assert_eq!(node_list(&g), ["A", "B"]);
        // Star: H has degree 4, leaves 1: mean 1.6, std 1.2 → threshold 2.8.
        let cfg = NlpGraphConfig { max_node_degree_std: Some(1.0), ..no_pruning() };
        let g = build_cooccurrence_graph(&chunks(&[&["H", "A"], &["H", "B"], &["H", "C"], &["H", "D"]]), &cfg);
        assert_eq!(node_list(&g), ["A", "B", "C", "D"]);
        assert!(g.edges.is_empty());
    }

    #[test]
    fn prune_edges_by_percentile() {
        // Counts 1..=5 on five disjoint edges; 40th percentile = 2.6.
        let mut lists: Vec<UnitPhrases> = Vec::new();
        for (i, pair) in [("A", "B"), ("C", "D"), ("E", "F"), ("G", "H"), ("I", "J")].iter().enumerate() {
            for _ in 0..=i {
                lists.push(unit(&[(pair.0, 0), (pair.1, 0)]));
            }
        }
        let cfg = NlpGraphConfig { min_edge_weight_pct: 40.0, ..no_pruning() };
        let g = build_cooccurrence_graph(&lists, &cfg);
        assert_eq!(edge_list(&g), [("E", "F", 3.0), ("G", "H", 4.0), ("I", "J", 5.0)]);
        // Nodes stay unless degree pruning asks otherwise...
        assert_eq!(g.nodes.len(), 10);
        // ...which is re-applied after edge pruning.
        let cfg = NlpGraphConfig { min_node_degree: 1, ..cfg };
        let g = build_cooccurrence_graph(&lists, &cfg);
        assert_eq!(node_list(&g), ["E", "F", "G", "H", "I", "J"]);
        // Equal weights are all kept.
        let g = build_cooccurrence_graph(&chunks(&[&["A", "B"], &["C", "D"]]), &cfg);
        assert_eq!(g.edges.len(), 2);
    }

    #[test]
    fn ego_node_removed_then_degree_pruned() {
        let cfg = NlpGraphConfig { remove_ego_nodes: true, min_node_degree: 1, ..no_pruning() };
        let g = build_cooccurrence_graph(&chunks(&[&["H", "A"], &["H", "B"], &["H", "C"], &["A", "B"]]), &cfg);
        assert_eq!(node_list(&g), ["A", "B"]);
        assert_eq!(edge_list(&g), [("A", "B", 1.0)]);
        // The ego is chosen on the full graph, before edge pruning: H (degree 3)
        // goes although its edges are the weakest.
        let lists = chunks(&[&["H", "A"], &["H", "B"], &["H", "C"], &["A", "B"], &["A", "B"], &["A", "B"]]);
        let cfg = NlpGraphConfig { min_edge_weight_pct: 50.0, ..cfg };
        let g = build_cooccurrence_graph(&lists, &cfg);
        assert_eq!(node_list(&g), ["A", "B"]);
        // Tie on degree: the smallest title goes.
        let g = build_cooccurrence_graph(
            &chunks(&[&["X", "Y"]]),
            &NlpGraphConfig { remove_ego_nodes: true, ..no_pruning() },
        );
        assert_eq!(node_list(&g), ["Y"]);
    }

    #[test]
    fn largest_connected_component() {
        let cfg = NlpGraphConfig { lcc_only: true, ..no_pruning() };
        let g = build_cooccurrence_graph(&chunks(&[&["D", "E"], &["A", "B"], &["B", "C"], &["Z"]]), &cfg);
        assert_eq!(node_list(&g), ["A", "B", "C"]);
        assert_eq!(edge_list(&g), [("A", "B", 1.0), ("B", "C", 1.0)]);
        // Tie: the component with the smallest title.
        let g = build_cooccurrence_graph(&chunks(&[&["X", "Y"], &["B", "C"]]), &cfg);
        assert_eq!(node_list(&g), ["B", "C"]);
    }

    #[test]
    fn default_config_end_to_end() {
        let e = RegexEnglishExtractor::default();
        let text = [
            "Ebenezer Scrooge sat in his counting-house. Bob Cratchit copied letters.",
            "Bob Cratchit shivered; Ebenezer Scrooge kept the coal-box in his own room.",
            "Fred visited Ebenezer Scrooge and Bob Cratchit on Christmas Eve.",
            "Marley's Ghost warned Ebenezer Scrooge on Christmas Eve about the chains.",
            "Fred laughed at his uncle. Christmas Eve was cold and foggy.",
        ];
        let mut lists: Vec<UnitPhrases> = text.iter().map(|t| e.extract(t)).collect();
        resolve_sentence_initial(&mut lists);
        let a = build_cooccurrence_graph(&lists, &NlpGraphConfig::default());
        let b = build_cooccurrence_graph(&lists, &NlpGraphConfig::default());
        assert_eq!(a, b);
        // The ego node (EBENEZER SCROOGE, highest degree) stays by default, and
        // goes with GraphRAG's `remove_ego_nodes: true`; rare phrases go.
        assert!(node_list(&a).contains(&"EBENEZER SCROOGE"));
        let ego = NlpGraphConfig { remove_ego_nodes: true, ..NlpGraphConfig::default() };
        assert!(!node_list(&build_cooccurrence_graph(&lists, &ego)).contains(&"EBENEZER SCROOGE"));
        assert!(a.nodes.iter().all(|n| n.frequency >= 2));
        assert!(a.edges.iter().all(|e| e.weight == f64::from(e.count) && e.source < e.target));
        assert!(!a.edges.is_empty());
    }

    #[test]
    fn order_of_phrases_does_not_matter() {
        let x = build_cooccurrence_graph(&chunks(&[&["A", "B", "C"], &["C", "A"]]), &NlpGraphConfig::default());
        let y = build_cooccurrence_graph(&chunks(&[&["C", "B", "A"], &["A", "C"]]), &NlpGraphConfig::default());
        assert_eq!(x, y);
        assert_eq!(build_cooccurrence_graph(&[], &NlpGraphConfig::default()), NlpGraph::default());
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(512))]

        #[test]
        fn extractor_never_panics(s in "\\PC{0,300}") {
            let e = RegexEnglishExtractor::default();
            for p in phrases_with(&e, &s) {
                prop_assert!(!p.is_empty());
                let n = p.split(' ').count();
                prop_assert!((1..=4).contains(&n));
                prop_assert_eq!(p.to_uppercase(), p.clone());
            }
        }

        #[test]
        fn extractor_never_panics_any_chars(s in ".{0,300}", w in 0usize..5, lo in 0usize..3, hi in 0usize..5) {
            let e = RegexEnglishExtractor { max_word_length: w, min_words: lo, max_words: hi };
            let _ = phrases_with(&e, &s);
        }

        #[test]
        fn graph_invariants(lists in proptest::collection::vec(proptest::collection::vec("[A-F]", 0..5), 0..8),
                            norm in any::<bool>(), ego in any::<bool>(), lcc in any::<bool>(), pct in 0.0f64..100.0) {
            let cfg = NlpGraphConfig { normalize_edge_weights: norm, remove_ego_nodes: ego, lcc_only: lcc, min_edge_weight_pct: pct, max_node_degree_std: Some(1.0), max_node_freq_std: Some(1.5), ..NlpGraphConfig::default() };
            let lists: Vec<UnitPhrases> = lists.iter().map(|l| unit(&l.iter().enumerate().map(|(i, p)| (p.as_str(), i as u32 / 2)).collect::<Vec<_>>())).collect();
            let g = build_cooccurrence_graph(&lists, &cfg);
            prop_assert_eq!(&g, &build_cooccurrence_graph(&lists, &cfg));
            let titles: Vec<&str> = node_list(&g);
            prop_assert!(titles.windows(2).all(|w| w[0] < w[1]));
            for e in &g.edges {
                prop_assert!(e.source < e.target);
                prop_assert!(titles.contains(&e.source.as_str()) && titles.contains(&e.target.as_str()));
                prop_assert!(e.weight.is_finite() && e.weight > 0.0);
                prop_assert!(e.count as usize >= e.chunk_ids.len() && !e.chunk_ids.is_empty());
            }
        }
    }
}
