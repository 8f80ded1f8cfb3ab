//! Answers to query-time prompts: global map/reduce, keywords, community rating, DRIFT, questions and data-grounded answers.

use serde_json::json;

use super::extraction::find_entities;
use super::reports::{find_table, list_names, number_after};
use crate::text::{
    after, after_last, before, before_last, candidates, citation, content_words, first_words, h64, parse_tables,
    sentences, title_case, Table,
};

pub(super) fn global_map(prompt: &str, query: &str) -> String {
    let tables = parse_tables(prompt);
    let reports = find_table(&tables, "Reports")
        .or_else(|| tables.iter().find(|t| t.col(&["title"]).is_some() && !t.rows.is_empty()));
    let mut points = Vec::new();
    if let Some(t) = reports {
        for i in 0..t.rows.len().min(5) {
            let id = t.rows[i][0].clone();
            let title = t.cell(i, &["title"]);
            let content = t.cell(i, &["content", "summary", "full_content"]);
            let text = format!("{title}: {}", first_words(&content, 25));
            points.push(json!({
                "description": format!("{} {}", text.trim().trim_end_matches(':'), citation(&[("Reports", vec![id.clone()])])),
                "score": 10 + h64(&format!("{id}\u{1f}{query}")) % 90,
            }));
        }
    }
    if points.is_empty() {
        points.push(json!({
            "description": "I don't know: the provided reports do not cover this question.",
            "score": 0,
        }));
    }
    json!({ "points": points }).to_string()
}

pub(super) fn global_reduce(prompt: &str, query: &str) -> String {
    let data = after(prompt, "---Analyst Reports---").unwrap_or(prompt);
    let data = before(data, "---Goal---");
    let points: Vec<&str> = data
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with("----Analyst") && !l.starts_with("Importance Score"))
        .take(5)
        .collect();
    if points.is_empty() {
        return "I don't know: the reports do not contain enough information to answer this question.".into();
    }
    let mut out = format!("## Answer\n\nThe key points that bear on \"{}\" are:\n\n", first_words(query, 20));
    for p in points {
        out.push_str(&format!("- {p}\n"));
    }
    out
}

pub(super) fn keywords(prompt: &str) -> String {
    let rd = after(prompt, "---Real Data---").unwrap_or(prompt);
    let q = after_last(rd, "Query:").unwrap_or(rd);
    let q = before_last(q, "Output:").trim().trim_matches('"').trim();
    let mut low: Vec<String> = Vec::new();
    for s in sentences(q) {
        for c in candidates(s) {
            let n = title_case(&c.name);
            if !low.contains(&n) {
                low.push(n);
            }
        }
    }
    let low_words: Vec<String> = low.iter().flat_map(|n| crate::text::words_lower(n)).collect();
    let high: Vec<String> = content_words(q)
        .into_iter()
        .filter(|w| w.chars().count() >= 4 && !low_words.contains(w))
        .take(5)
        .map(|w| title_case(&w))
        .collect();
    json!({ "high_level_keywords": high, "low_level_keywords": low }).to_string()
}

pub(super) fn rate_community(prompt: &str, query: &str) -> String {
    let info = after(prompt, "---Information---").map(|r| before(r, "---Question---")).unwrap_or(prompt);
    let q = after(prompt, "---Question---").map(|r| before(r, "---Output---")).unwrap_or(query);
    let qw = content_words(q);
    let iw = content_words(info);
    let shared: Vec<&String> = qw.iter().filter(|w| iw.contains(w)).collect();
    let rating = shared.len().min(5);
    let reason = if shared.is_empty() {
        "The information shares no key terms with the question.".to_string()
    } else {
        format!(
            "The information shares {} key term(s) with the question: {}.",
            shared.len(),
            shared.iter().take(5).map(|s| s.as_str()).collect::<Vec<_>>().join(", ")
        )
    };
    json!({ "reason": reason, "rating": rating }).to_string()
}

/// Report ids and names mentioned in a block of community reports.
fn report_refs(text: &str) -> (Vec<String>, Vec<String>) {
    let tables = parse_tables(text);
    let mut ids: Vec<String> = tables.iter().find(|t| !t.rows.is_empty()).map(Table::ids).unwrap_or_default();
    if ids.is_empty() {
        for line in text.lines() {
            let l = line.trim();
            let l = l
                .strip_prefix("id:")
                .or_else(|| l.strip_prefix("id="))
                .or_else(|| l.strip_prefix("Report "))
                .unwrap_or(l)
                .trim();
            let digits: String = l.chars().take_while(char::is_ascii_digit).collect();
            let rest = &l[digits.len()..];
            if !digits.is_empty()
                && (rest.is_empty() || rest.starts_with([',', '|', ':', ')']))
                && !ids.contains(&digits)
            {
                ids.push(digits);
            }
        }
    }
    let names = find_entities(text).ranked.into_iter().take(5).collect();
    (ids, names)
}

pub(super) fn drift_primer(prompt: &str) -> String {
    let (q, reports) = if let Some(r) = after(prompt, "Query:") {
        (before(r, "Community reports:"), after(r, "Community reports:").unwrap_or(""))
    } else if let Some(r) = after(prompt, "For the query:") {
        (before(r, "The top-ranked"), after(r, "The top-ranked").unwrap_or(""))
    } else {
        ("", prompt)
    };
    let q = q.trim();
    let (ids, names) = report_refs(reports);
    let answer = format!(
        "# Primer\n\nThe top-ranked community reports for \"{}\" concern {}. {}",
        first_words(q, 20),
        list_names(&names, 3),
        citation(&[("Reports", ids)])
    );
    let topic = first_words(q.trim_end_matches('?'), 8);
    let mut follow: Vec<String> =
        names.iter().take(5).map(|n| format!("What is the role of {} in {topic}?", title_case(n))).collect();
    let generic = [
        format!("Who are the main actors in {topic}?"),
        format!("Which events shaped {topic}?"),
        format!("Where did {topic} take place?"),
        format!("What were the consequences of {topic}?"),
        format!("How are the organizations involved in {topic} connected?"),
    ];
    for g in generic {
        if follow.len() >= 5 {
            break;
        }
        follow.push(g);
    }
    json!({
        "intermediate_answer": answer,
        "score": 20 + h64(q) % 60,
        "follow_up_queries": follow,
    })
    .to_string()
}

/// A hypothetical answer shaped like the report to imitate: its title line
/// over the query's words (HyDE answers are guesses, not data).
pub(super) fn drift_expand(prompt: &str) -> String {
    let (q, template) = if let Some(r) = after(prompt, "Write a hypothetical answer to this query:") {
        (before(r, "\n"), after(r, "Report to imitate:").unwrap_or(""))
    } else if let Some(r) = after(prompt, "Create a hypothetical answer to the following query:") {
        (before(r, "\n"), after(r, "structure of the template below:").unwrap_or(""))
    } else {
        ("", prompt)
    };
    let heading = template.lines().map(str::trim).find(|l| l.starts_with('#')).unwrap_or("# Report");
    format!(
        "{heading}\n\nA hypothetical answer to \"{}\": {} are at the centre of it.",
        first_words(q.trim(), 30),
        list_names(&content_words(q).into_iter().take(3).collect::<Vec<_>>(), 3)
    )
}

/// The number in "up to N follow-up questions" of a DRIFT step prompt, if any.
pub(super) fn follow_up_limit(prompt: &str) -> Option<usize> {
    prompt.match_indices("up to ").find_map(|(i, m)| {
        let tail = &prompt[i + m.len()..];
        let n: String = tail.chars().take_while(char::is_ascii_digit).collect();
        tail[n.len()..].trim_start().starts_with("follow-up").then(|| n.parse().ok()).flatten()
    })
}

pub(super) fn drift_search(prompt: &str, query: &str) -> String {
    let response = data_answer("DRIFT local search", prompt, query);
    let tables = parse_tables(prompt);
    let names: Vec<String> = find_table(&tables, "Entities")
        .map(|t| (0..t.rows.len()).map(|i| t.cell(i, &["entity", "title"])).collect())
        .unwrap_or_default();
    let ql = query.to_lowercase();
    let fresh: Vec<&String> = names.iter().filter(|n| !n.is_empty() && !ql.contains(&n.to_lowercase())).collect();
    let n_follow = ((h64(query) % 3) as usize).min(follow_up_limit(prompt).unwrap_or(usize::MAX));
    let follow: Vec<String> =
        fresh.iter().take(n_follow).map(|n| format!("What else is known about {}?", title_case(n))).collect();
    json!({
        "response": response,
        "score": 10 + h64(&format!("{query}\u{1f}{prompt}")) % 80,
        "follow_up_queries": follow,
    })
    .to_string()
}

pub(super) fn drift_reduce(prompt: &str, query: &str) -> String {
    let data = after(prompt, "---Intermediate Answers---").unwrap_or(prompt);
    let data = before(data, "---Goal---");
    let mut refs: Vec<String> = Vec::new();
    let mut rest = data;
    while let Some(i) = rest.find("[Data:") {
        let tail = &rest[i..];
        let Some(j) = tail.find(']') else { break };
        let r = tail[..=j].to_string();
        if !refs.contains(&r) {
            refs.push(r);
        }
        rest = &tail[j + 1..];
    }
    if data.trim().is_empty() {
        return "I don't know: the intermediate answers do not contain enough information.".into();
    }
    let mut out = format!(
        "## Answer\n\nCombining the findings of the search, the answer to \"{}\" draws on the following evidence.\n\n",
        first_words(query, 20)
    );
    if refs.is_empty() {
        out.push_str(&format!("- {}\n", first_words(data.trim(), 30)));
    }
    for r in refs.iter().take(5) {
        out.push_str(&format!("- Supporting evidence {r}\n"));
    }
    out
}

fn row_label(t: &Table, i: usize) -> String {
    if t.name == "Sources" {
        return format!("Source {}", t.rows[i][0]);
    }
    let name = t.cell(i, &["entity", "title", "name"]);
    if !name.is_empty() {
        return name;
    }
    let (s, tg) = (t.cell(i, &["source"]), t.cell(i, &["target"]));
    if !s.is_empty() && !tg.is_empty() {
        return format!("{s} → {tg}");
    }
    first_words(&t.rows[i].last().cloned().unwrap_or_default(), 8)
}

fn row_text(t: &Table, i: usize) -> String {
    let d = t.cell(i, &["description", "summary", "content", "text"]);
    if d.is_empty() {
        t.rows[i].last().cloned().unwrap_or_default()
    } else {
        d
    }
}

/// A markdown answer citing the ids of the tables in the context.
pub(super) fn data_answer(kind: &str, prompt: &str, query: &str) -> String {
    let tables: Vec<Table> = parse_tables(prompt).into_iter().filter(|t| !t.rows.is_empty()).collect();
    if tables.is_empty() {
        return format!(
            "I don't know: the provided data does not contain information about \"{}\".",
            first_words(query, 20)
        );
    }
    let parts: Vec<(&str, Vec<String>)> = tables.iter().map(|t| (t.name.as_str(), t.ids())).collect();
    let main = &tables[0];
    let labels: Vec<String> = (0..main.rows.len().min(3)).map(|i| row_label(main, i)).collect();
    let mut out = format!(
        "## {kind} answer\n\nThe data most relevant to \"{}\" concerns {}. {}\n\n",
        first_words(query, 20),
        labels.join("; "),
        citation(&parts)
    );
    for (i, label) in labels.iter().enumerate() {
        out.push_str(&format!(
            "- **{label}**: {} {}\n",
            first_words(&row_text(main, i), 25),
            citation(&[(main.name.as_str(), vec![main.rows[i][0].clone()])])
        ));
    }
    out
}

pub(super) fn question_gen(prompt: &str) -> String {
    let n = number_after(prompt, &["bulleted list of "]).unwrap_or(5).clamp(1, 20);
    let tables = parse_tables(prompt);
    let mut names: Vec<String> = find_table(&tables, "Entities")
        .map(|t| (0..t.rows.len()).map(|i| t.cell(i, &["entity", "title"])).filter(|s| !s.is_empty()).collect())
        .unwrap_or_default();
    if names.is_empty() {
        let ctx = after(prompt, "---Data tables---").unwrap_or(prompt);
        let ctx = before(ctx, "---Goal---");
        names = find_entities(ctx).ranked.into_iter().take(5).collect();
    }
    let names: Vec<String> = names.iter().map(|n| title_case(n)).collect();
    let mut out = Vec::new();
    for i in 0..n {
        let q = if names.is_empty() {
            [
                "What are the main themes of the data?",
                "Who are the key actors?",
                "Which events matter most?",
                "How are the main topics connected?",
                "What are the most important facts?",
            ][i % 5]
                .to_string()
        } else {
            let a = &names[i % names.len()];
            let b = &names[(i + 1) % names.len()];
            match i % 4 {
                0 => format!("What is the role of {a}?"),
                1 if a != b => format!("How is {a} related to {b}?"),
                2 => format!("What are the most important facts about {a}?"),
                _ => format!("Why is {a} significant?"),
            }
        };
        out.push(format!("- {q}"));
    }
    out.join("\n")
}
