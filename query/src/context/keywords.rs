//! Keywords and citations: content words, title keys, entities named in a
//! question, the ids an answer cites.

use std::collections::{BTreeMap, HashMap, HashSet};

const STOP_WORDS: &[&str] = &[
    "a",
    "about",
    "above",
    "after",
    "again",
    "against",
    "all",
    "also",
    "am",
    "an",
    "and",
    "any",
    "are",
    "as",
    "at",
    "be",
    "because",
    "been",
    "before",
    "being",
    "below",
    "between",
    "both",
    "but",
    "by",
    "can",
    "could",
    "did",
    "do",
    "does",
    "doing",
    "down",
    "during",
    "each",
    "few",
    "for",
    "from",
    "further",
    "had",
    "has",
    "have",
    "having",
    "he",
    "her",
    "here",
    "hers",
    "herself",
    "him",
    "himself",
    "his",
    "how",
    "i",
    "if",
    "in",
    "into",
    "is",
    "it",
    "its",
    "itself",
    "just",
    "me",
    "more",
    "most",
    "my",
    "myself",
    "no",
    "nor",
    "not",
    "now",
    "of",
    "off",
    "on",
    "once",
    "only",
    "or",
    "other",
    "our",
    "ours",
    "ourselves",
    "out",
    "over",
    "own",
    "same",
    "she",
    "should",
    "so",
    "some",
    "such",
    "than",
    "that",
    "the",
    "their",
    "theirs",
    "them",
    "themselves",
    "then",
    "there",
    "these",
    "they",
    "this",
    "those",
    "through",
    "to",
    "too",
    "under",
    "until",
    "up",
    "very",
    "was",
    "we",
    "were",
    "what",
    "when",
    "where",
    "which",
    "while",
    "who",
    "whom",
    "why",
    "will",
    "with",
    "would",
    "you",
    "your",
    "yours",
    "yourself",
    "tell",
    "describe",
    "explain",
    "give",
    "know",
    "known",
    "many",
    "much",
    "please",
    "role",
    "happen",
    "happened",
    "kind",
    "main",
    "list",
    "show",
    "say",
    "said",
    "like",
    "get",
    "way",
    "thing",
    "things",
    "whose",
    "within",
    "without",
];

/// The query's content words (no stop words, at least 3 characters, first
/// spelling kept, duplicates dropped): the keywords used when no chat model
/// can extract them.
pub fn content_words(text: &str) -> Vec<String> {
    let mut seen = HashSet::new();
    let mut out = Vec::new();
    for w in text.split(|c: char| !c.is_alphanumeric() && c != '-' && c != '\'') {
        let w = w.trim_matches(|c: char| c == '-' || c == '\'');
        let lower = w.to_lowercase();
        if w.chars().count() < 3 || STOP_WORDS.contains(&lower.as_str()) || !seen.insert(lower) {
            continue;
        }
        out.push(w.to_string());
    }
    out
}

/// A title or a text as a lookup key: lower-case alphanumeric words joined
/// by single spaces ("Katsina State," and "KATSINA STATE" agree).
pub fn title_key(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for word in text.split(|c: char| !c.is_alphanumeric()).filter(|w| !w.is_empty()) {
        if !out.is_empty() {
            out.push(' ');
        }
        out.extend(word.chars().flat_map(char::to_lowercase));
    }
    out
}

/// Entities the question names: each run of up to `max_words` consecutive
/// words of the question whose [`title_key`] is an entity's and that holds a
/// content word. Most specific first: fewest text units (`units_of`), then
/// longer titles, then index. An embedding of the whole question is pulled
/// towards generic concepts ("country", "birthplace"); the names it contains
/// are what a question is about.
pub fn entities_named_in(
    question: &str,
    by_key: &HashMap<String, Vec<usize>>,
    max_words: usize,
    units_of: impl Fn(usize) -> usize,
) -> Vec<usize> {
    let key = title_key(question);
    let words: Vec<&str> = key.split(' ').filter(|w| !w.is_empty()).collect();
    let mut found: Vec<(usize, usize)> = Vec::new();
    let mut seen = HashSet::new();
    for n in (1..=max_words.min(words.len())).rev() {
        for window in words.windows(n) {
            if !window.iter().any(|w| w.chars().count() >= 3 && !STOP_WORDS.contains(w)) {
                continue;
            }
            for &e in by_key.get(&window.join(" ")).into_iter().flatten() {
                if seen.insert(e) {
                    found.push((e, n));
                }
            }
        }
    }
    found.sort_by(|&(a, na), &(b, nb)| units_of(a).cmp(&units_of(b)).then(nb.cmp(&na)).then(a.cmp(&b)));
    found.into_iter().map(|(e, _)| e).collect()
}

/// The record ids cited in an answer's `[Data: Entities (1, 2); Sources (3, +more)]`
/// references, by dataset name (ids that are not integers, like `+more`, are skipped).
pub fn cited_ids(answer: &str) -> BTreeMap<String, Vec<i64>> {
    let mut out: BTreeMap<String, Vec<i64>> = BTreeMap::new();
    let mut rest = answer;
    while let Some(i) = rest.find("[Data:") {
        let tail = &rest[i + 6..];
        let end = tail.find(']').unwrap_or(tail.len());
        for part in tail[..end].split(';') {
            let Some((name, ids)) = part.split_once('(') else { continue };
            let ids = ids.trim_end().trim_end_matches(')');
            let entry = out.entry(name.trim().to_string()).or_default();
            for id in ids.split(',') {
                if let Ok(n) = id.trim().parse::<i64>() {
                    if !entry.contains(&n) {
                        entry.push(n);
                    }
                }
            }
        }
        rest = &tail[end..];
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn title_keys_ignore_case_and_punctuation() {
        assert_eq!(title_key("  Katsina State, Nigeria!"), "katsina state nigeria");
        assert_eq!(title_key("KATSINA STATE"), title_key("katsina   state"));
        assert_eq!(title_key("--"), "");
    }

    #[test]
    fn named_entities_are_found_whole_and_most_specific_first() {
        let titles = ["COUNTRY", "BAURE", "KATSINA STATE", "KATSINA", "THE", "STATE OF THE ART"];
        let by_key: HashMap<String, Vec<usize>> =
            titles.iter().enumerate().map(|(i, t)| (title_key(t), vec![i])).collect();
        let units = [50, 2, 3, 3, 900, 1];
        let named =
            entities_named_in("What is the country where Baure, in Katsina State, is located?", &by_key, 4, |e| {
                units[e]
            });
        // BAURE (2 units), then the longer of the two 3-unit titles, then the generic COUNTRY;
        // "the" alone is a stop word, "state of the art" is not in the question.
        assert_eq!(named, vec![1, 2, 3, 0]);
        assert!(entities_named_in("Who is it?", &by_key, 4, |e| units[e]).is_empty());
        assert!(entities_named_in("", &by_key, 4, |e| units[e]).is_empty());
    }

    #[test]
    fn content_words_drop_stop_words() {
        assert_eq!(
            content_words("What did Scrooge say to Marley's ghost about the ghost?"),
            vec!["Scrooge", "Marley's", "ghost"]
        );
        assert!(content_words("Who is it?").is_empty());
    }

    #[test]
    fn citations_are_parsed() {
        let a = "X [Data: Entities (1, 2); Relationships (7, +more)] and [Data: Sources (3); Entities (2, 5)].";
        let c = cited_ids(a);
        assert_eq!(c["Entities"], vec![1, 2, 5]);
        assert_eq!(c["Relationships"], vec![7]);
        assert_eq!(c["Sources"], vec![3]);
        assert!(cited_ids("no refs").is_empty());
    }
}
