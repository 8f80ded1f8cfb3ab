//! Answers to summary, entity resolution and community report prompts.

use serde_json::{json, Value};

use super::extraction::find_entities;
use crate::text::{
    after, after_last, before, before_last, citation, first_words, h64, parse_tables, sentences, title_case, Table,
};

pub(super) fn number_after(text: &str, markers: &[&str]) -> Option<usize> {
    markers.iter().find_map(|m| {
        let rest = after(text, m)?;
        let digits: String = rest.trim_start().chars().take_while(char::is_ascii_digit).collect();
        digits.parse().ok()
    })
}

pub(super) fn summarize(prompt: &str) -> String {
    let data = after_last(prompt, "-Data-").unwrap_or(prompt);
    let name = after(data, "Entities:").map(|r| r.lines().next().unwrap_or("").trim()).unwrap_or("");
    let list = after(data, "Description List:").unwrap_or("");
    let list = before(list, "\n#######").trim();
    let max = number_after(prompt, &["Keep the summary under ", "length to "]).unwrap_or(500);
    let items: Vec<String> = match serde_json::from_str::<Value>(list) {
        Ok(Value::Array(a)) => a.iter().map(|v| v.as_str().map_or_else(|| v.to_string(), str::to_string)).collect(),
        _ => list.lines().map(|l| l.trim().trim_start_matches(['-', '*']).trim().to_string()).collect(),
    };
    let mut seen: Vec<String> = Vec::new();
    let mut parts: Vec<String> = Vec::new();
    for it in items {
        let t = it.split_whitespace().collect::<Vec<_>>().join(" ");
        if t.is_empty() || seen.contains(&t.to_lowercase()) {
            continue;
        }
        seen.push(t.to_lowercase());
        let t = if t.ends_with(['.', '!', '?']) { t } else { format!("{t}.") };
        parts.push(t);
    }
    if parts.is_empty() {
        return format!("{} has no recorded description.", name.trim());
    }
    let joined = parts.join(" ");
    let words: Vec<&str> = joined.split_whitespace().collect();
    words[..words.len().min(max.max(1))].join(" ")
}

/// Entity resolution questions (`Question N:` then `A: "NAME" ...` and
/// `B: "NAME" ...` lines): yes when the two names share a word (ignoring
/// case), one `N: yes|no` line per question.
pub(super) fn resolve_entities(prompt: &str) -> String {
    let questions = after_last(prompt, "-Questions-").unwrap_or(prompt);
    let name = |line: &str| line.split('"').nth(1).unwrap_or("").to_lowercase();
    let mut out = Vec::new();
    let mut a: Option<String> = None;
    for line in questions.lines().map(str::trim) {
        if let Some(rest) = line.strip_prefix("A: ") {
            a = Some(name(rest));
        } else if let (Some(rest), Some(first)) = (line.strip_prefix("B: "), a.take()) {
            let second = name(rest);
            let words: Vec<&str> = first.split_whitespace().collect();
            let same = second.split_whitespace().any(|w| words.contains(&w));
            out.push(format!("{}: {}", out.len() + 1, if same { "yes" } else { "no" }));
        }
    }
    out.join("\n")
}

fn report_input(prompt: &str) -> &str {
    let rd = after(prompt, "# Real Data").unwrap_or(prompt);
    let t = after(rd, "Text:").unwrap_or(rd);
    let t = before(t, "The report should include the following sections");
    before_last(t, "Output:").trim()
}

pub(super) fn find_table<'a>(tables: &'a [Table], name: &str) -> Option<&'a Table> {
    tables.iter().find(|t| t.name == name && !t.rows.is_empty())
}

pub(super) fn rating(input: &str) -> f64 {
    (h64(input) % 101) as f64 / 10.0
}

fn title_from(names: &[String], fallback: &str) -> String {
    match names {
        [] => fallback.to_string(),
        [a] => title_case(a),
        [a, b, ..] => format!("{} and {}", title_case(a), title_case(b)),
    }
}

pub(super) fn list_names(names: &[String], n: usize) -> String {
    let v: Vec<String> = names.iter().take(n).map(|s| title_case(s)).collect();
    match v.len() {
        0 => "no named entities".into(),
        1 => v[0].clone(),
        k => format!("{} and {}", v[..k - 1].join(", "), v[k - 1]),
    }
}

fn report_json(title: String, summary: String, input: &str, expl: String, findings: Vec<(String, String)>) -> String {
    let findings: Vec<Value> = findings.into_iter().map(|(s, e)| json!({"summary": s, "explanation": e})).collect();
    json!({
        "title": title,
        "summary": summary,
        "rating": rating(input),
        "rating_explanation": expl,
        "findings": findings,
    })
    .to_string()
}

pub(super) fn community_report_graph(prompt: &str) -> String {
    let input = report_input(prompt);
    let tables = parse_tables(input);
    let empty = Table::default();
    let ents = find_table(&tables, "Entities").unwrap_or(&empty);
    let rels = find_table(&tables, "Relationships").unwrap_or(&empty);
    let claims = find_table(&tables, "Claims").unwrap_or(&empty);
    let mut names: Vec<String> =
        (0..ents.rows.len()).map(|i| ents.cell(i, &["entity", "title", "name"])).filter(|n| !n.is_empty()).collect();
    if names.is_empty() {
        let found = find_entities(input);
        names = found.ranked.into_iter().take(5).collect();
    }
    let cite_all = citation(&[("Entities", ents.ids()), ("Relationships", rels.ids())]);
    let first_desc = ents.cell(0, &["description"]);
    let summary = format!(
        "The community is centred on {}, with {} entities and {} relationships. {} {}",
        list_names(&names, 3),
        ents.rows.len().max(names.len()),
        rels.rows.len(),
        first_words(&first_desc, 25),
        cite_all
    )
    .split_whitespace()
    .collect::<Vec<_>>()
    .join(" ");
    let mut findings: Vec<(String, String)> = Vec::new();
    for i in 0..ents.rows.len().min(5) {
        let name = ents.cell(i, &["entity", "title", "name"]);
        let id = ents.rows[i][0].clone();
        let rel_ids: Vec<String> = (0..rels.rows.len())
            .filter(|&r| rels.cell(r, &["source"]) == name || rels.cell(r, &["target"]) == name)
            .map(|r| rels.rows[r][0].clone())
            .collect();
        let desc = ents.cell(i, &["description"]);
        let desc = if desc.is_empty() {
            format!("{} is a member of the community", title_case(&name))
        } else {
            first_words(&desc, 40)
        };
        findings.push((
            format!("The role of {}", title_case(&name)),
            format!("{desc} {}", citation(&[("Entities", vec![id]), ("Relationships", rel_ids)])),
        ));
    }
    if !claims.rows.is_empty() && findings.len() < 5 {
        findings.push((
            "Claims about the community".into(),
            format!(
                "The data records {} claims about members of the community. {}",
                claims.rows.len(),
                citation(&[("Claims", claims.ids())])
            ),
        ));
    }
    if findings.len() < 2 && !rels.rows.is_empty() {
        findings.push((
            "How the entities are connected".into(),
            format!(
                "{} {}",
                first_words(&rels.cell(0, &["description"]), 40),
                citation(&[("Relationships", rels.ids())])
            ),
        ));
    }
    while findings.len() < 2 {
        findings.push((
            "Limited data".into(),
            format!("The community data lists few records about {}. {cite_all}", list_names(&names, 2))
                .trim()
                .to_string(),
        ));
    }
    report_json(
        title_from(&names, "Community Overview"),
        summary,
        input,
        format!(
            "The rating reflects the {} entities and {} relationships of the community.",
            ents.rows.len().max(names.len()),
            rels.rows.len()
        ),
        findings,
    )
}

pub(super) fn community_report_text(prompt: &str) -> String {
    let input = report_input(prompt);
    let tables = parse_tables(input);
    let src = find_table(&tables, "Sources").or_else(|| tables.iter().find(|t| !t.rows.is_empty()));
    let passages: Vec<(String, String)> = match src {
        Some(t) => (0..t.rows.len())
            .map(|i| {
                let text = t.cell(i, &["text", "content", "chunk"]);
                let text = if text.is_empty() { t.rows[i].last().cloned().unwrap_or_default() } else { text };
                (t.rows[i][0].clone(), text)
            })
            .collect(),
        None => vec![(String::new(), input.to_string())],
    };
    let all_text: String = passages.iter().map(|p| p.1.as_str()).collect::<Vec<_>>().join("\n");
    let names: Vec<String> = find_entities(&all_text).ranked.into_iter().take(5).collect();
    let ids: Vec<String> = passages.iter().map(|p| p.0.clone()).filter(|i| !i.is_empty()).collect();
    let summary = format!(
        "The {} source passages of this community concern {}. {}",
        passages.len(),
        list_names(&names, 4),
        citation(&[("Sources", ids.clone())])
    )
    .trim()
    .to_string();
    let mut findings: Vec<(String, String)> = Vec::new();
    for (id, text) in passages.iter().take(5) {
        let first = sentences(text).first().copied().unwrap_or("").to_string();
        if first.is_empty() {
            continue;
        }
        let cite = if id.is_empty() { String::new() } else { citation(&[("Sources", vec![id.clone()])]) };
        findings.push((first_words(&first, 8), format!("{} {cite}", first_words(&first, 40)).trim().to_string()));
    }
    while findings.len() < 2 {
        findings.push((
            "Limited source material".into(),
            format!(
                "The passages provide little detail beyond {}. {}",
                list_names(&names, 2),
                citation(&[("Sources", ids.clone())])
            )
            .trim()
            .to_string(),
        ));
    }
    report_json(
        title_from(&names, "Source Passages Overview"),
        summary,
        input,
        format!(
            "The rating reflects the {} passages and the {} named entities they mention.",
            passages.len(),
            names.len()
        ),
        findings,
    )
}
