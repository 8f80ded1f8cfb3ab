//! The built-in phrase extractor: English noun phrases by rules.

use super::{word_key, Mention, PhraseExtractor, UnitPhrases};

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

pub(super) fn is_connector(w: &str) -> bool {
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
pub(super) fn strip_possessive(w: &str) -> &str {
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

#[cfg(test)]
mod tests {
    use super::super::{add_title_mentions, resolve_sentence_initial, unit};
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
    }
}
