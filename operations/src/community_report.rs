//! Community reports, the pure parts: context tables under a token budget
//! (with sub-community reports substituted when a community is too big),
//! validation of the model's JSON report, markdown rendering, and the
//! extractive report used when no chat model is configured.

use std::cell::OnceCell;
use std::collections::HashSet;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::tokenizer::Encoding;

#[derive(Debug, Clone, PartialEq)]
pub struct ContextEntity {
    pub id: i64,
    pub title: String,
    pub description: String,
    pub degree: i64,
}

#[derive(Debug, Clone, PartialEq)]
pub struct ContextRelationship {
    pub id: i64,
    pub source: String,
    pub target: String,
    pub description: String,
    pub combined_degree: i64,
}

#[derive(Debug, Clone, PartialEq)]
pub struct ContextClaim {
    pub id: i64,
    pub subject: String,
    pub claim_type: String,
    pub status: String,
    pub description: String,
}

/// A finished report of a sub-community.
#[derive(Debug, Clone, PartialEq)]
pub struct SubReport {
    pub community: i64,
    pub full_content: String,
    pub size: usize,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Finding {
    pub summary: String,
    pub explanation: String,
}

#[derive(Debug, Clone, PartialEq, Default)]
pub struct Report {
    pub title: String,
    pub summary: String,
    pub rating: f64,
    pub rating_explanation: String,
    pub findings: Vec<Finding>,
}

/// Quotes a CSV field when it needs it.
pub fn csv_field(s: &str) -> String {
    if s.contains([',', '"', '\n', '\r']) {
        format!("\"{}\"", s.replace('"', "\"\""))
    } else {
        s.to_string()
    }
}

/// Appends a titled CSV table, row by row, while the budget allows; returns
/// how many rows fit. Rows are made lazily: those past the budget are never
/// formatted (a large community's sources would be the whole corpus).
fn push_table<R: AsRef<str>>(
    out: &mut String,
    used: &mut usize,
    budget: usize,
    title: &str,
    header: &str,
    rows: impl IntoIterator<Item = R>,
) -> usize {
    let mut rows = rows.into_iter().peekable();
    let head = format!("-----{title}-----\n{header}\n");
    let head_tokens = Encoding::O200kBase.count(&head);
    if rows.peek().is_none() || *used + head_tokens > budget {
        return 0;
    }
    out.push_str(&head);
    *used += head_tokens;
    let mut n = 0;
    for row in rows {
        let row = row.as_ref();
        let t = Encoding::O200kBase.count(row) + 1;
        if *used + t > budget {
            break;
        }
        out.push_str(row);
        out.push('\n');
        *used += t;
        n += 1;
    }
    out.push('\n');
    n
}

/// The graph context of one community: entities by degree, relationships by
/// combined degree, claims — as CSV tables with ids, within `max_tokens`.
/// When the full local context does not fit and sub-community reports exist,
/// those reports (largest community first) replace the detail, and local rows
/// fill what budget remains (GraphRAG's substitution).
pub fn graph_context(
    entities: &[ContextEntity],
    relationships: &[ContextRelationship],
    claims: &[ContextClaim],
    sub_reports: &[SubReport],
    max_tokens: usize,
) -> String {
    GraphContext::new(entities, relationships, claims).render(sub_reports, max_tokens)
}

/// A community's graph context before it is cut to a budget: whether it
/// [fits](Self::fits) decides if its report needs its sub-communities' reports.
pub struct GraphContext {
    entity_rows: Vec<String>,
    rel_rows: Vec<String>,
    claim_rows: Vec<String>,
    /// The whole local context and its tokens.
    full: String,
    full_tokens: usize,
}

impl GraphContext {
    pub fn new(entities: &[ContextEntity], relationships: &[ContextRelationship], claims: &[ContextClaim]) -> Self {
        let mut ents = entities.to_vec();
        ents.sort_by(|a, b| b.degree.cmp(&a.degree).then(a.id.cmp(&b.id)));
        let mut rels = relationships.to_vec();
        rels.sort_by(|a, b| b.combined_degree.cmp(&a.combined_degree).then(a.id.cmp(&b.id)));
        let entity_rows =
            ents.iter().map(|e| format!("{},{},{},{}", e.id, csv_field(&e.title), csv_field(&e.description), e.degree));
        let rel_rows = rels.iter().map(|r| {
            format!(
                "{},{},{},{},{}",
                r.id,
                csv_field(&r.source),
                csv_field(&r.target),
                csv_field(&r.description),
                r.combined_degree
            )
        });
        let claim_rows = claims.iter().map(|c| {
            format!(
                "{},{},{},{},{}",
                c.id,
                csv_field(&c.subject),
                csv_field(&c.claim_type),
                csv_field(&c.status),
                csv_field(&c.description)
            )
        });
        let mut ctx = GraphContext {
            entity_rows: entity_rows.collect(),
            rel_rows: rel_rows.collect(),
            claim_rows: claim_rows.collect(),
            full: String::new(),
            full_tokens: 0,
        };
        let (mut full, mut used) = (String::new(), 0);
        ctx.local(usize::MAX, &mut full, &mut used);
        (ctx.full, ctx.full_tokens) = (full, used);
        ctx
    }

    fn local(&self, budget: usize, out: &mut String, used: &mut usize) {
        push_table(out, used, budget, "Entities", "id,entity,description,degree", &self.entity_rows);
        push_table(out, used, budget, "Relationships", "id,source,target,description,combined_degree", &self.rel_rows);
        push_table(out, used, budget, "Claims", "id,entity,type,status,description", &self.claim_rows);
    }

    /// Whether the whole local context fits `max_tokens`: then the report
    /// does not use sub-community reports, and need not wait for them.
    pub fn fits(&self, max_tokens: usize) -> bool {
        self.full_tokens <= max_tokens
    }

    pub fn render(&self, sub_reports: &[SubReport], max_tokens: usize) -> String {
        if self.fits(max_tokens) {
            return self.full.clone();
        }
        let mut out = String::new();
        let mut used = 0;
        if !sub_reports.is_empty() {
            let mut subs = sub_reports.to_vec();
            subs.sort_by(|a, b| b.size.cmp(&a.size).then(a.community.cmp(&b.community)));
            let report_rows: Vec<String> =
                subs.iter().map(|s| format!("{},{}", s.community, csv_field(&s.full_content))).collect();
            push_table(&mut out, &mut used, max_tokens, "Reports", "id,full_content", &report_rows);
        }
        self.local(max_tokens, &mut out, &mut used);
        out
    }
}

/// Source passages of a community (for the text-based report), most
/// relevant first, within `max_tokens`.
pub fn text_context(units: &[(i64, &str)], max_tokens: usize) -> String {
    let rows = units.iter().map(|(id, t)| format!("{id},{}", csv_field(t)));
    let mut out = String::new();
    let mut used = 0;
    push_table(&mut out, &mut used, max_tokens, "Sources", "id,text", rows);
    out
}

fn text_of(v: Option<&Value>) -> Option<String> {
    match v? {
        Value::String(s) => Some(s.trim().to_string()),
        Value::Null => None,
        other => Some(other.to_string()),
    }
}

/// Validates a model's report JSON, repairing what can be repaired (a
/// numeric string rating, findings given as plain strings, missing optional
/// fields). Returns the report and whether anything was repaired; a report
/// without a title or a summary is rejected.
pub fn report_from_json(v: &Value) -> Result<(Report, bool), String> {
    let mut repaired = false;
    let title = text_of(v.get("title")).filter(|s| !s.is_empty()).ok_or("report has no title")?;
    let summary = text_of(v.get("summary")).filter(|s| !s.is_empty()).ok_or("report has no summary")?;
    let rating = match v.get("rating") {
        Some(Value::Number(n)) => n.as_f64().unwrap_or(0.0),
        Some(Value::String(s)) => {
            repaired = true;
            s.trim().parse::<f64>().unwrap_or(0.0)
        }
        _ => {
            repaired = true;
            0.0
        }
    }
    .clamp(0.0, 10.0);
    let rating_explanation = text_of(v.get("rating_explanation")).unwrap_or_else(|| {
        repaired = true;
        String::new()
    });
    let mut findings = Vec::new();
    for f in v.get("findings").and_then(Value::as_array).map(Vec::as_slice).unwrap_or_default() {
        match f {
            Value::Object(_) => findings.push(Finding {
                summary: text_of(f.get("summary")).unwrap_or_default(),
                explanation: text_of(f.get("explanation")).unwrap_or_default(),
            }),
            Value::String(s) => {
                repaired = true;
                findings.push(Finding { summary: s.clone(), explanation: String::new() });
            }
            _ => repaired = true,
        }
    }
    Ok((Report { title, summary, rating, rating_explanation, findings }, repaired))
}

/// The report as GraphRAG's JSON (full_content_json).
pub fn report_json(r: &Report) -> Value {
    serde_json::json!({
        "title": r.title,
        "summary": r.summary,
        "rating": r.rating,
        "rating_explanation": r.rating_explanation,
        "findings": r.findings.iter().map(|f| serde_json::json!({"summary": f.summary, "explanation": f.explanation})).collect::<Vec<_>>(),
    })
}

/// GraphRAG's full_content: `# title`, the summary, one `##` section per finding.
pub fn full_content(r: &Report) -> String {
    let mut out = format!("# {}\n\n{}\n\n", r.title, r.summary);
    for f in &r.findings {
        out.push_str(&format!("## {}\n\n{}\n\n", f.summary, f.explanation));
    }
    out.trim_end().to_string()
}

/// The first sentence (or the first 200 characters) of a description.
fn first_sentence(s: &str) -> String {
    let s = s.trim();
    let end = s
        .char_indices()
        .find(|&(i, c)| matches!(c, '.' | '!' | '?') && s[i + 1..].starts_with(char::is_whitespace))
        .map(|(i, _)| i + 1)
        .unwrap_or(s.len());
    let mut cut = end.min(200);
    while !s.is_char_boundary(cut) {
        cut -= 1;
    }
    s[..cut].to_string()
}

/// The first sentence of the passages (most relevant first) that mentions
/// `title`, with the passage's id.
/// How many of a community's passages (most relevant first) are searched for
/// a sentence quoting an entity: bounds the cost on communities spanning
/// thousands of text units.
const PASSAGES_SEARCHED: usize = 64;

/// `text` lower-cased, its whitespace runs as single spaces, leading and
/// trailing ones dropped: the form titles are searched in. ASCII text (most)
/// in one pass, as it runs over up to 64 passages per report; other text
/// through `str::to_lowercase`, which knows a word-final sigma.
fn searchable(text: &str) -> String {
    if !text.is_ascii() {
        return text.split_whitespace().collect::<Vec<_>>().join(" ").to_lowercase();
    }
    let mut out = String::with_capacity(text.len());
    for word in text.split_whitespace() {
        if !out.is_empty() {
            out.push(' ');
        }
        out.extend(word.chars().map(|c| c.to_ascii_lowercase()));
    }
    out
}

/// The passages searched for a sentence quoting an entity, each flattened
/// (whitespace runs as one space, lower case) once, when first searched: a
/// report searches the same passages for up to six entities.
struct QuoteSearch<'a> {
    passages: &'a [(i64, &'a str)],
    flat: Vec<OnceCell<String>>,
}

impl<'a> QuoteSearch<'a> {
    fn new(passages: &'a [(i64, &'a str)]) -> Self {
        let searched = passages.len().min(PASSAGES_SEARCHED);
        QuoteSearch { passages: &passages[..searched], flat: vec![OnceCell::new(); searched] }
    }

    fn sentence_mentioning(&self, title: &str) -> Option<(i64, String)> {
        let needle = searchable(title);
        self.passages.iter().zip(&self.flat).find_map(|((id, text), flat)| {
            // Most passages do not mention it, and splitting every one into
            // sentences is what costs.
            let flat = flat.get_or_init(|| searchable(text));
            if !flat.contains(&needle) {
                return None;
            }
            crate::chunking::sentences(text).into_iter().find_map(|r| {
                let sentence = text[r].split_whitespace().collect::<Vec<_>>().join(" ");
                (searchable(&sentence).contains(&needle) && sentence.len() <= 400).then_some((*id, sentence))
            })
        })
    }
}

/// How an extractive report's rating explanation begins.
pub const EXTRACTIVE: &str = "Extractive report:";

/// Whether a report was made without a model ([`extractive_report`]).
pub fn is_extractive(r: &Report) -> bool {
    r.rating_explanation.starts_with(EXTRACTIVE)
}

/// A report built without an LLM from the community's most central
/// entities and relationships, with sentences of the source passages
/// (most relevant first) that mention them; labelled as such in
/// rating_explanation.
/// `relationships` may be the community's most central ones only (by combined
/// degree); `relationship_count` is how many it has in all.
pub fn extractive_report(
    entities: &[ContextEntity],
    relationships: &[ContextRelationship],
    relationship_count: usize,
    passages: &[(i64, &str)],
) -> Report {
    let mut ents = entities.to_vec();
    ents.sort_by(|a, b| b.degree.cmp(&a.degree).then(a.id.cmp(&b.id)));
    let mut rels = relationships.to_vec();
    rels.sort_by(|a, b| b.combined_degree.cmp(&a.combined_degree).then(a.id.cmp(&b.id)));
    let quotes = QuoteSearch::new(passages);
    let top: Vec<&str> = ents.iter().take(3).map(|e| e.title.as_str()).collect();
    let title = if top.is_empty() { "Empty community".to_string() } else { top.join(", ") };
    let mut summary = format!(
        "A community of {} entities and {} relationships, centred on {}.",
        entities.len(),
        relationship_count.max(relationships.len()),
        if top.is_empty() { "nothing".to_string() } else { top.join(", ") }
    );
    if let Some(d) = ents.iter().map(|e| first_sentence(&e.description)).find(|d| !d.is_empty()) {
        summary.push(' ');
        summary.push_str(&d);
    } else if let Some((id, sentence)) = ents.first().and_then(|e| quotes.sentence_mentioning(&e.title)) {
        summary.push_str(&format!(" \"{sentence}\" [Data: Sources ({id})]"));
    }
    let mut findings: Vec<Finding> = ents
        .iter()
        .take(5)
        .map(|e| Finding {
            summary: format!("{} (degree {})", e.title, e.degree),
            explanation: match e.description.trim() {
                "" => match quotes.sentence_mentioning(&e.title) {
                    Some((id, sentence)) => format!(
                        "\"{sentence}\" [Data: Sources ({id})] {} is connected to {} other entities. [Data: Entities ({})]",
                        e.title, e.degree, e.id
                    ),
                    None => format!(
                        "{} is connected to {} other entities in this community. [Data: Entities ({})]",
                        e.title, e.degree, e.id
                    ),
                },
                d => format!("{d} [Data: Entities ({})]", e.id),
            },
        })
        .collect();
    findings.extend(rels.iter().take(3).map(|r| Finding {
        summary: format!("{} — {}", r.source, r.target),
        explanation: if r.description.is_empty() {
            format!("{} and {} appear together. [Data: Relationships ({})]", r.source, r.target, r.id)
        } else {
            format!("{} [Data: Relationships ({})]", r.description.trim(), r.id)
        },
    }));
    // Importance from size and connectivity, 0-10, so ranking still works.
    let links: i64 = ents.iter().map(|e| e.degree).sum();
    let rating = ((entities.len() as f64 + links as f64).ln_1p() * 1.5).min(10.0);
    Report {
        title,
        summary,
        rating: (rating * 10.0).round() / 10.0,
        rating_explanation: format!("{EXTRACTIVE} no chat model was configured, so this report lists the community's most central entities and relationships without an LLM; the rating reflects size and connectivity only."),
        findings,
    }
}

/// Which community reports an update writes again (`update.community_reports`:
/// `all`, `changed` or `material`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Refresh {
    /// Every report whose input changed, as a fresh index of the same graph
    /// would (a report whose input did not change comes from the cache).
    All,
    /// The reports of communities whose members or relationships changed.
    Changed,
    /// The reports of communities that changed materially ([`Materiality`]).
    Material,
}

/// Whether community reports are written by a chat model
/// (`community_reports.mode`: `auto`, `llm` or `extractive`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ReportMode {
    /// The chat model when one is configured, else extractive reports.
    Auto,
    /// The chat model, required.
    Llm,
    /// Never a model: extractive reports.
    Extractive,
}

/// What a community report is made from (the `community_report` step's
/// `method`: `graph` or `text`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ReportMethod {
    /// Entities, relationships and claims.
    Graph,
    /// Source passages.
    Text,
}

/// When a community's change is material: more than `fraction` of its
/// members, or of its relationships, came or went (of those before and after
/// together), or it gained an entity with at least `degree` relationships.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Materiality {
    pub fraction: f64,
    pub degree: i64,
}

/// A community's members and relationships (ids), before an update or after.
#[derive(Debug, Clone, Default)]
pub struct Membership<'a> {
    pub entities: HashSet<&'a str>,
    pub relationships: HashSet<&'a str>,
}

/// The share of `a ∪ b` that is not in both (0: the same sets).
pub fn turnover(a: &HashSet<&str>, b: &HashSet<&str>) -> f64 {
    let union = a.union(b).count();
    if union == 0 {
        return 0.0;
    }
    a.symmetric_difference(b).count() as f64 / union as f64
}

/// Whether a community that keeps its number and level through an update
/// gets a new report under `refresh`: `before` and `after` are its members
/// and relationships, `degree` an entity's degree now. (A community whose
/// previous report could cite a removed text unit always gets a new one;
/// the caller checks that.)
pub fn needs_new_report(
    refresh: Refresh,
    before: &Membership,
    after: &Membership,
    degree: impl Fn(&str) -> i64,
    m: Materiality,
) -> bool {
    match refresh {
        Refresh::All => true,
        Refresh::Changed => before.entities != after.entities || before.relationships != after.relationships,
        Refresh::Material => {
            turnover(&before.entities, &after.entities) > m.fraction
                || turnover(&before.relationships, &after.relationships) > m.fraction
                || after.entities.difference(&before.entities).any(|e| degree(e) >= m.degree)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ent(id: i64, title: &str, degree: i64) -> ContextEntity {
        ContextEntity { id, title: title.into(), description: format!("{title} is someone. More text here."), degree }
    }

    fn rel(id: i64, s: &str, t: &str, d: i64) -> ContextRelationship {
        ContextRelationship {
            id,
            source: s.into(),
            target: t.into(),
            description: format!("{s} knows {t}"),
            combined_degree: d,
        }
    }

    #[test]
    fn context_is_sorted_and_bounded() {
        let ents = [ent(1, "BOB", 1), ent(2, "SCROOGE", 5), ent(3, "MARLEY, JACOB", 3)];
        let rels = [rel(7, "SCROOGE", "BOB", 6), rel(8, "SCROOGE", "MARLEY, JACOB", 8)];
        let ctx = graph_context(&ents, &rels, &[], &[], 10_000);
        let scrooge = ctx.find("SCROOGE").unwrap();
        assert!(scrooge < ctx.find("BOB").unwrap(), "{ctx}");
        assert!(ctx.contains("\"MARLEY, JACOB\""), "CSV quoting: {ctx}");
        assert!(ctx.find("8,SCROOGE").unwrap() < ctx.find("7,SCROOGE").unwrap());
        let small = graph_context(&ents, &rels, &[], &[], 45);
        assert!(Encoding::O200kBase.count(&small) <= 45, "{small}");
        assert!(small.contains("SCROOGE") && small.len() < ctx.len(), "{small}");
    }

    #[test]
    fn oversized_context_uses_sub_reports() {
        let ents: Vec<_> = (0..200).map(|i| ent(i, &format!("ENTITY{i}"), i)).collect();
        let subs = [
            SubReport { community: 4, full_content: "# Small\nsmall one".into(), size: 2 },
            SubReport { community: 3, full_content: "# Big\nbig one".into(), size: 50 },
        ];
        let ctx = graph_context(&ents, &[], &[], &subs, 300);
        assert!(ctx.starts_with("-----Reports-----"), "{ctx}");
        assert!(ctx.find("# Big").unwrap() < ctx.find("# Small").unwrap());
        assert!(Encoding::O200kBase.count(&ctx) <= 300);
    }

    #[test]
    fn context_never_exceeds_the_budget() {
        let ents: Vec<_> = (0..120).map(|i| ent(i, &format!("ENTITY NUMBER {i}"), i % 17)).collect();
        let rels: Vec<_> = (0..300).map(|i| rel(i, &format!("E{i}"), &format!("F{}", i + 1), i % 23)).collect();
        let claims: Vec<_> = (0..40)
            .map(|i| ContextClaim {
                id: i,
                subject: format!("E{i}"),
                claim_type: "FRAUD".into(),
                status: "SUSPECTED".into(),
                description: "a claim, with a comma".into(),
            })
            .collect();
        let subs: Vec<_> = (0..6)
            .map(|i| SubReport {
                community: i,
                full_content: format!("# Report {i}\n{}", "finding text ".repeat(40)),
                size: i as usize,
            })
            .collect();
        for budget in [0, 10, 25, 60, 200, 700, 2000, 8000] {
            for sub in [&subs[..], &[]] {
                let c = graph_context(&ents, &rels, &claims, sub, budget);
                assert!(
                    Encoding::O200kBase.count(&c) <= budget,
                    "budget {budget}: {} tokens",
                    Encoding::O200kBase.count(&c)
                );
            }
            assert!(Encoding::O200kBase.count(&text_context(&[(0, "x ".repeat(500).as_str())], budget)) <= budget);
        }
    }

    #[test]
    fn reports_are_validated_and_repaired() {
        let ok = serde_json::json!({"title": "T", "summary": "S", "rating": 7.5, "rating_explanation": "E",
            "findings": [{"summary": "f1", "explanation": "e1"}]});
        let (r, repaired) = report_from_json(&ok).unwrap();
        assert!(!repaired);
        assert_eq!(r.rating, 7.5);
        assert_eq!(full_content(&r), "# T\n\nS\n\n## f1\n\ne1");
        let messy = serde_json::json!({"title": "T", "summary": "S", "rating": "8", "findings": ["just text"]});
        let (r, repaired) = report_from_json(&messy).unwrap();
        assert!(repaired);
        assert_eq!((r.rating, r.findings[0].summary.as_str()), (8.0, "just text"));
        assert!(report_from_json(&serde_json::json!({"summary": "S"})).is_err());
    }

    #[test]
    fn searchable_text_is_lower_case_with_single_spaces() {
        assert_eq!(searchable("  Old\n\tMARLEY  was  "), "old marley was");
        assert_eq!(searchable("  Old\n\tMARLEY  was ÉTIENNE's  "), "old marley was étienne's");
        assert_eq!(searchable("ΝΈΑΡΧΟΣ"), searchable("Νέαρχος"), "word-final sigma");
        assert_eq!(searchable(""), "");
    }

    #[test]
    fn extractive_report_is_labelled() {
        let r = extractive_report(&[ent(1, "BOB", 1), ent(2, "SCROOGE", 5)], &[rel(3, "SCROOGE", "BOB", 6)], 40, &[]);
        assert!(r.title.starts_with("SCROOGE"));
        assert!(r.summary.starts_with("A community of 2 entities and 40 relationships"), "{}", r.summary);
        assert!(r.rating_explanation.contains("no chat model"));
        assert!(r.findings.iter().any(|f| f.explanation.contains("[Data: Entities (2)]")));
        assert!((0.0..=10.0).contains(&r.rating));
    }

    #[test]
    fn extractive_report_quotes_sources_when_descriptions_are_empty() {
        let bare = |id: i64, t: &str| ContextEntity { id, title: t.into(), description: String::new(), degree: 3 };
        let passages = [(7, "The fog came in. Old Scrooge sat busy in his counting-house. Bob copied letters.")];
        let r = extractive_report(&[bare(1, "SCROOGE"), bare(2, "NOBODY")], &[], 0, &passages);
        assert!(
            r.summary.contains("Old Scrooge sat busy in his counting-house.") && r.summary.contains("Sources (7)"),
            "{}",
            r.summary
        );
        assert!(r.findings[0].explanation.starts_with("\"Old Scrooge sat busy"), "{}", r.findings[0].explanation);
        assert!(r.findings[1].explanation.contains("connected to 3 other entities"));
    }

    #[test]
    fn extractive_report_searches_the_first_passages_only() {
        let bare = ContextEntity { id: 1, title: "FEZZIWIG".into(), description: String::new(), degree: 1 };
        let filler = "Nothing here.";
        let mut passages: Vec<(i64, &str)> = (0..PASSAGES_SEARCHED as i64).map(|i| (i, filler)).collect();
        passages.push((99, "Old Fezziwig danced."));
        let r = extractive_report(std::slice::from_ref(&bare), &[], 0, &passages);
        assert!(!r.summary.contains("Fezziwig danced"), "{}", r.summary);
        passages.remove(0);
        let r = extractive_report(&[bare], &[], 0, &passages);
        assert!(r.summary.contains("\"Old Fezziwig danced.\" [Data: Sources (99)]"), "{}", r.summary);
    }

    #[test]
    fn text_context_lists_sources() {
        let c = text_context(&[(0, "First passage."), (1, "Second, with comma.")], 1000);
        assert!(c.contains("0,First passage.") && c.contains("1,\"Second, with comma.\""), "{c}");
    }

    #[test]
    fn refresh_policy_on_a_hand_built_before_and_after_graph() {
        let set = |v: &[&'static str]| -> HashSet<&'static str> { v.iter().copied().collect() };
        let community = |e: &[&'static str], r: &[&'static str]| Membership { entities: set(e), relationships: set(r) };
        // Ten members, nine relationships among them.
        let members = ["A", "B", "C", "D", "E", "F", "G", "H", "I", "J"];
        let links = ["AB", "BC", "CD", "DE", "EF", "FG", "GH", "HI", "IJ"];
        let before = community(&members, &links);
        let degree = |e: &str| if e == "HUB" { 12 } else { 2 };
        let m = Materiality { fraction: 0.2, degree: 10 };
        let new = |r, after: &Membership| needs_new_report(r, &before, after, degree, m);

        // Unchanged: only `all` asks again (the cache answers it).
        assert!(new(Refresh::All, &before));
        assert!(!new(Refresh::Changed, &before) && !new(Refresh::Material, &before));

        // One low-degree member and one relationship added: changed, not material
        // (1 of 11 members, 1 of 10 relationships).
        let grown = community(&[&members[..], &["K"]].concat(), &[&links[..], &["JK"]].concat());
        assert!((turnover(&before.entities, &grown.entities) - 1.0 / 11.0).abs() < 1e-12);
        assert!(new(Refresh::Changed, &grown) && !new(Refresh::Material, &grown));

        // A new member with 12 relationships: material whatever the fraction.
        let hub = community(&[&members[..], &["HUB"]].concat(), &[&links[..], &["HUBA"]].concat());
        assert!(new(Refresh::Material, &hub));

        // Three of ten members replaced: 6 of 13 turned over.
        let swapped = community(&["A", "B", "C", "D", "E", "F", "G", "X", "Y", "Z"], &links);
        assert!(new(Refresh::Material, &swapped));

        // Same members, a third of the relationships replaced: material.
        let rewired = community(&members, &["AB", "BC", "CD", "DE", "EF", "FG", "AJ", "BJ", "CJ"]);
        assert!(new(Refresh::Changed, &rewired) && new(Refresh::Material, &rewired));

        // The fraction is a setting: at 0.5 the swap is no longer material.
        let lenient = Materiality { fraction: 0.5, degree: 10 };
        assert!(!needs_new_report(Refresh::Material, &before, &swapped, degree, lenient));
        let parse = |name: &str| serde_json::from_value::<Refresh>(name.into()).ok();
        assert_eq!(
            ["all", "changed", "material"].map(parse),
            [Some(Refresh::All), Some(Refresh::Changed), Some(Refresh::Material)]
        );
        assert_eq!(parse("sometimes"), None);
    }

    #[test]
    fn a_context_that_fits_needs_no_sub_reports() {
        let ents = [ent(1, "BOB", 1), ent(2, "SCROOGE", 5)];
        let rels = [rel(1, "BOB", "SCROOGE", 6)];
        let ctx = GraphContext::new(&ents, &rels, &[]);
        let sub = SubReport { community: 7, full_content: "# Sub\n\nA sub-community.".into(), size: 2 };
        assert!(ctx.fits(1000));
        assert_eq!(
            ctx.render(std::slice::from_ref(&sub), 1000),
            ctx.render(&[], 1000),
            "sub-reports unused when it fits"
        );
        assert!(!ctx.fits(20));
        assert!(ctx.render(&[sub], 20).contains("-----Reports-----"));
    }
}
