//! Asking a chat model (RAGFlow's approach): candidate pairs in numbered
//! batches, one yes/no answer per pair. Batches are cut where the pairs'
//! hashes say, not by position, so a pair added or removed by an update
//! changes only its own batch: the others' prompts, and cached answers,
//! stay the same.

use std::collections::BTreeMap;
use std::sync::OnceLock;

use regex::Regex;

use crate::ids::sha256_hex;

/// One side of a question: a name, its type, what the graph says of it.
#[derive(Debug, Clone, PartialEq)]
pub struct Side<'a> {
    pub title: &'a str,
    pub entity_type: &'a str,
    pub description: &'a str,
}

/// Characters of an entity's description shown to the model.
pub const DESCRIPTION_CHARS: usize = 300;

fn side_text(s: &Side) -> String {
    let mut d: String = s.description.split_whitespace().collect::<Vec<_>>().join(" ");
    if d.chars().count() > DESCRIPTION_CHARS {
        d = d.chars().take(DESCRIPTION_CHARS).collect::<String>() + "…";
    }
    let kind = if s.entity_type.trim().is_empty() { String::new() } else { format!(" ({})", s.entity_type.trim()) };
    if d.is_empty() {
        format!("\"{}\"{kind}", s.title)
    } else {
        format!("\"{}\"{kind}: {d}", s.title)
    }
}

/// The numbered questions of one batch, for the prompt's `{{ questions }}`.
pub fn questions_text(pairs: &[(Side, Side)]) -> String {
    let mut out = String::new();
    for (i, (a, b)) in pairs.iter().enumerate() {
        out.push_str(&format!("Question {}:\n  A: {}\n  B: {}\n", i + 1, side_text(a), side_text(b)));
    }
    out
}

fn answer_line() -> &'static Regex {
    static RE: OnceLock<Regex> = OnceLock::new();
    RE.get_or_init(|| {
        Regex::new(r"(?im)^[\s>*#\-]*(?:question\s*)?(\d+)\s*\**\s*[:.)\-]?\s*\**\s*(yes|no)\b").expect("valid regex")
    })
}

/// The model's answers to `n` questions: one line per question,
/// `<number>: yes` or `<number>: no` (also `Question 3: No, ...`, `3. yes`).
/// Every question must be answered, and none both ways.
pub fn parse_decisions(answer: &str, n: usize) -> Result<Vec<bool>, String> {
    let mut found: BTreeMap<usize, bool> = BTreeMap::new();
    for cap in answer_line().captures_iter(answer) {
        let Ok(q) = cap[1].parse::<usize>() else { continue };
        if q == 0 || q > n {
            return Err(format!("it answers question {q}, but there are {n}"));
        }
        let yes = cap[2].eq_ignore_ascii_case("yes");
        if found.insert(q, yes).is_some_and(|before| before != yes) {
            return Err(format!("it answers question {q} both yes and no"));
        }
    }
    let missing: Vec<String> = (1..=n).filter(|q| !found.contains_key(q)).map(|q| q.to_string()).collect();
    if !missing.is_empty() {
        return Err(format!("no yes/no answer to question {}", missing.join(", ")));
    }
    Ok(found.into_values().collect())
}

/// Splits items, known by stable keys, into batches of about `target` (at
/// most twice that): items are ordered by the hash of their key and a batch
/// ends after an item whose hash is a multiple of `target`. Returns the
/// items' indices per batch.
pub fn batches(keys: &[String], target: usize) -> Vec<Vec<usize>> {
    let target = target.max(1);
    let mut hashed: Vec<(u64, usize)> = keys
        .iter()
        .enumerate()
        .map(|(i, k)| {
            let h = sha256_hex(&[k.as_bytes()]);
            (u64::from_str_radix(&h[..16], 16).unwrap_or(0), i)
        })
        .collect();
    hashed.sort_unstable();
    let mut out: Vec<Vec<usize>> = Vec::new();
    let mut current = Vec::new();
    for (h, i) in hashed {
        current.push(i);
        if h % target as u64 == 0 || current.len() >= 2 * target {
            out.push(std::mem::take(&mut current));
        }
    }
    if !current.is_empty() {
        out.push(current);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn answers_parse_in_their_usual_shapes() {
        let a = "Question 1: Yes, they are the same person.\n2. no\n**3**: YES\n- 4) No - different";
        assert_eq!(parse_decisions(a, 4), Ok(vec![true, false, true, false]));
        assert!(parse_decisions("1: yes", 2).unwrap_err().contains("question 2"));
        assert!(parse_decisions("1: yes\n1: no", 1).unwrap_err().contains("both"));
        assert!(parse_decisions("1: yes\n7: no", 1).is_err());
        assert!(parse_decisions("", 0).unwrap().is_empty());
    }

    #[test]
    fn questions_show_names_types_and_short_descriptions() {
        let long = "x ".repeat(400);
        let q = questions_text(&[(
            Side { title: "SCROOGE", entity_type: "PERSON", description: "A miser." },
            Side { title: "MR SCROOGE", entity_type: "", description: &long },
        )]);
        assert!(q.starts_with("Question 1:\n  A: \"SCROOGE\" (PERSON): A miser.\n  B: \"MR SCROOGE\": x x"));
        assert!(q.trim_end().ends_with('…'));
    }

    #[test]
    fn batches_are_stable_when_an_item_is_added() {
        let keys: Vec<String> = (0..200).map(|i| format!("pair {i}")).collect();
        let before = batches(&keys, 10);
        assert_eq!(before.iter().map(Vec::len).sum::<usize>(), 200);
        assert!(before.iter().all(|b| b.len() <= 20));
        let mut more = keys.clone();
        more.push("pair new".into());
        let after = batches(&more, 10);
        let as_keys = |bs: &[Vec<usize>], ks: &[String]| -> Vec<Vec<String>> {
            bs.iter().map(|b| b.iter().map(|&i| ks[i].clone()).collect()).collect()
        };
        let (old, new) = (as_keys(&before, &keys), as_keys(&after, &more));
        let changed = new.iter().filter(|b| !old.contains(b)).count();
        assert!(changed <= 2, "{changed} batches changed");
    }
}
