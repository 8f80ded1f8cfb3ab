//! `summarize`: one description per entity and relationship. Elements with
//! several distinct descriptions get an LLM summary (concurrently); a single
//! description passes through untouched. With `llm_min_descriptions` above 2
//! (the light pipeline, as LightRAG's `force_llm_summary_on_merge`), fewer
//! descriptions than that are joined instead, when they fit `max_length`.
//!
//! In an update, an element whose text units only grew is summarised from
//! its previous description plus the descriptions its new text units brought
//! (one bounded call instead of all its descriptions again), and one whose
//! text units did not change keeps its previous description. An element that
//! lost a text unit (a removed or changed document) is summarised from all
//! its descriptions, as in a fresh index, so nothing of the removed text stays.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;

use arrow_array::RecordBatch;
use serde::Deserialize;
use serde_json::Value;

use graphrag_engine::context::VerbContext;
use graphrag_engine::llm::answer;
use graphrag_engine::settings::SummarizeDescriptionsConfig;
use graphrag_engine::table::{strings, StringLists};
use graphrag_engine::verb::{Verb, VerbDef, VerbInfo};
use graphrag_operations::tokenizer::Encoding;

use crate::graph_tables::{
    read_merged_entities, read_merged_relationships, summarized_entities_table, summarized_relationships_table,
};
use crate::llm_steps::{fingerprint, map_concurrently, IN_FLIGHT};

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Summarize {
    pub model_id: String,
    /// The cache partition of this step's answers (`cache/<name>/`), as
    /// GraphRAG's `model_instance_name`; none: the cache root.
    pub model_instance_name: Option<String>,
    pub prompt: String,
    /// Words.
    pub max_length: u32,
    /// Descriptions beyond this many tokens are summarised in rounds.
    pub max_input_tokens: u32,
    /// Elements with at least this many distinct descriptions are summarised
    /// by the model; fewer are joined (newline-separated) when the result
    /// fits `max_length` words. 2 (GraphRAG): every element with more than one.
    pub llm_min_descriptions: u32,
}

impl Default for Summarize {
    fn default() -> Self {
        let s = SummarizeDescriptionsConfig::default();
        Summarize {
            model_id: s.completion_model_id,
            model_instance_name: None,
            prompt: s.prompt,
            max_length: s.max_length,
            max_input_tokens: s.max_input_tokens,
            llm_min_descriptions: 2,
        }
    }
}

impl VerbDef for Summarize {
    const INFO: VerbInfo = VerbInfo {
        name: "summarize",
        about: "summarise the descriptions of entities and relationships that have several",
        inputs: &["graph_entities", "graph_relationships"],
        outputs: &["summarized_entities", "summarized_relationships"],
    };

    fn check(&self) -> Result<(), String> {
        if self.llm_min_descriptions < 2 {
            return Err("llm_min_descriptions must be at least 2 (one description is used as it is)".into());
        }
        if self.max_length == 0 || self.max_input_tokens == 0 {
            return Err("max_length and max_input_tokens must be positive".into());
        }
        Ok(())
    }
}

/// Splits descriptions into groups of at most `max_tokens` tokens (each
/// group at least one description).
fn rounds(descriptions: &[String], max_tokens: usize) -> Vec<Vec<String>> {
    let mut out: Vec<Vec<String>> = Vec::new();
    let mut used = 0;
    for d in descriptions {
        let t = Encoding::O200kBase.count(d);
        match out.last_mut() {
            Some(group) if used + t <= max_tokens => group.push(d.clone()),
            _ => {
                out.push(vec![d.clone()]);
                used = 0;
            }
        }
        used += t;
    }
    out
}

/// `text` cut to its first `max_words` words (a summary, or a single
/// description passed through, may not exceed `max_length`), and whether it was cut.
fn limit_words(text: &str, max_words: usize) -> (String, bool) {
    let mut words = text.split_whitespace();
    let kept: Vec<&str> = words.by_ref().take(max_words).collect();
    if words.next().is_none() {
        return (text.to_string(), false);
    }
    (format!("{} …", kept.join(" ")), true)
}

/// An element (entity or relationship) of the merged graph, as `describe` needs it.
struct Element<'a> {
    descriptions: &'a [String],
    text_unit_ids: &'a [String],
    /// (description, text unit) index pairs; empty when unknown.
    sources: &'a [(u32, u32)],
}

/// The element's description and text units in the index an update starts from.
#[derive(Debug, Clone)]
struct Previous {
    description: String,
    text_unit_ids: HashSet<String>,
}

/// How one element gets its description.
#[derive(Debug, Clone, PartialEq)]
enum Work {
    /// Used as it is: the only description, the descriptions joined, or the
    /// previous index's description.
    Ready { text: String, how: Ready },
    /// The model summarises `list`; `incremental`: the list is the previous
    /// description followed by the new descriptions only.
    Summarize { list: Vec<String>, incremental: bool },
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum Ready {
    Single,
    Joined,
    Kept,
}

/// Decides how an element gets its description (see the module doc).
fn describe(e: &Element, previous: Option<&Previous>, min_llm: usize, max_words: usize) -> Work {
    let d = e.descriptions;
    let ready = |text: String, how| Work::Ready { text, how };
    let fresh = || match d.len() {
        0 => ready(String::new(), Ready::Single),
        1 => ready(d[0].clone(), Ready::Single),
        n => {
            let joined = d.join("\n");
            if n < min_llm && joined.split_whitespace().count() <= max_words {
                ready(joined, Ready::Joined)
            } else {
                Work::Summarize { list: d.to_vec(), incremental: false }
            }
        }
    };
    let Some(prev) = previous.filter(|p| !p.description.is_empty()) else { return fresh() };
    let units_now: HashSet<&str> = e.text_unit_ids.iter().map(String::as_str).collect();
    if !prev.text_unit_ids.iter().all(|u| units_now.contains(u.as_str())) {
        // A text unit is gone: nothing of it may stay in the description.
        return fresh();
    }
    if units_now.len() == prev.text_unit_ids.len() {
        return ready(prev.description.clone(), Ready::Kept);
    }
    if e.sources.is_empty() && !d.is_empty() {
        // Which text unit gave which description is not known.
        return fresh();
    }
    // Descriptions that no previous text unit gave.
    let old: HashSet<u32> = e
        .sources
        .iter()
        .filter(|(_, u)| prev.text_unit_ids.contains(&e.text_unit_ids[*u as usize]))
        .map(|&(d, _)| d)
        .collect();
    let new: Vec<String> =
        d.iter().enumerate().filter(|(i, _)| !old.contains(&(*i as u32))).map(|(_, s)| s.clone()).collect();
    if new.is_empty() {
        return ready(prev.description.clone(), Ready::Kept);
    }
    match fresh() {
        joined @ Work::Ready { how: Ready::Joined, .. } => joined,
        _ => {
            Work::Summarize { list: std::iter::once(prev.description.clone()).chain(new).collect(), incremental: true }
        }
    }
}

/// Key of a relationship regardless of its orientation.
fn pair_key(a: &str, b: &str) -> (String, String) {
    if a <= b {
        (a.to_string(), b.to_string())
    } else {
        (b.to_string(), a.to_string())
    }
}

/// The previous index's entities (by title) and relationships (by endpoint
/// pair); empty outside an update.
type PreviousGraph = (HashMap<String, Previous>, HashMap<(String, String), Previous>);

fn previous_graph(ctx: &VerbContext) -> anyhow::Result<PreviousGraph> {
    let mut out = PreviousGraph::default();
    let Some(previous) = ctx.previous() else { return Ok(out) };
    let read = |t: &RecordBatch, name: &str| -> anyhow::Result<Vec<Previous>> {
        let units = StringLists::new(t, name, "text_unit_ids")?;
        Ok(strings(t, name, "description")?
            .into_iter()
            .zip(units.rows())
            .map(|(d, u)| Previous { description: d.to_string(), text_unit_ids: u.map(str::to_string).collect() })
            .collect())
    };
    if let Some(t) = previous.table("entities")? {
        out.0 = strings(&t, "entities", "title")?.into_iter().map(str::to_string).zip(read(&t, "entities")?).collect();
    }
    if let Some(t) = previous.table("relationships")? {
        let ends = strings(&t, "relationships", "source")?.into_iter().zip(strings(&t, "relationships", "target")?);
        out.1 = ends.map(|(s, t)| pair_key(s, t)).zip(read(&t, "relationships")?).collect();
    }
    Ok(out)
}

impl Verb for Summarize {
    fn model_to_call(&self) -> Option<&str> {
        Some(&self.model_id)
    }

    fn calls_model(&self, _ctx: &VerbContext) -> anyhow::Result<bool> {
        Ok(true)
    }

    /// By element: a model stage's shard summarises the entities and
    /// relationships whose name hashes to it.
    fn shards_model_calls(&self) -> bool {
        true
    }

    fn external_fingerprint(&self, ctx: &VerbContext) -> anyhow::Result<Option<String>> {
        let model = ctx.llm()?.chat_model_for(&self.model_id, self.model_instance_name.as_deref())?;
        let mut fp = fingerprint(&model.fingerprint(), &[&ctx.prompt(&self.prompt)?]);
        // In an update the descriptions also depend on the previous ones.
        if let Some(p) = ctx.previous() {
            for t in ["entities", "relationships"] {
                fp.push(':');
                fp.push_str(&p.fingerprint(t).unwrap_or_default());
            }
        }
        Ok(Some(fp))
    }

    fn run(&self, inputs: &[Arc<RecordBatch>], ctx: &VerbContext) -> anyhow::Result<Vec<RecordBatch>> {
        let entities = read_merged_entities(&inputs[0], "graph_entities")?;
        let relationships = read_merged_relationships(&inputs[1], "graph_relationships")?;
        let (previous_entities, previous_relationships) = previous_graph(ctx)?;
        let (min_llm, max_words) = (self.llm_min_descriptions as usize, self.max_length as usize);
        // (name shown to the model, work) for every element.
        let mut jobs: Vec<(String, Work)> = entities
            .iter()
            .map(|e| {
                let el = Element {
                    descriptions: &e.descriptions,
                    text_unit_ids: &e.text_unit_ids,
                    sources: &e.description_sources,
                };
                (e.title.clone(), describe(&el, previous_entities.get(&e.title), min_llm, max_words))
            })
            .collect();
        jobs.extend(relationships.iter().map(|r| {
            let el = Element {
                descriptions: &r.descriptions,
                text_unit_ids: &r.text_unit_ids,
                sources: &r.description_sources,
            };
            let previous = previous_relationships.get(&pair_key(&r.source, &r.target));
            (serde_json::json!([r.source, r.target]).to_string(), describe(&el, previous, min_llm, max_words))
        }));
        // How a failed element is named.
        let labels: Vec<String> = entities
            .iter()
            .map(|e| format!("entity {}", e.title))
            .chain(relationships.iter().map(|r| format!("relationship {} -> {}", r.source, r.target)))
            .collect();
        let mut ready = BTreeMap::<&str, u64>::new();
        let mut incremental = 0;
        for (_, w) in &jobs {
            match w {
                Work::Ready { how, .. } => {
                    *ready
                        .entry(match how {
                            Ready::Single => "",
                            Ready::Joined => "descriptions_joined",
                            Ready::Kept => "descriptions_kept",
                        })
                        .or_default() += 1
                }
                Work::Summarize { incremental: true, .. } => incremental += 1,
                Work::Summarize { .. } => {}
            }
        }
        let needs_llm = jobs.iter().filter(|(_, w)| matches!(w, Work::Summarize { .. })).count();
        let summaries: Vec<String> = if needs_llm == 0 {
            jobs.iter().map(|(_, w)| text_without_model(w)).collect()
        } else {
            let llm = ctx.llm()?;
            let model = llm.chat_model_for(&self.model_id, self.model_instance_name.as_deref())?;
            let prompt = ctx.prompt(&self.prompt)?;
            let usage = &ctx.counters.usage;
            let bar = ctx.progress(needs_llm as u64, "descriptions");
            let check = answer::text();
            let waves = &ctx.counters.waves;
            let results = map_concurrently(llm, jobs.iter().collect(), IN_FLIGHT, |(name, work)| {
                let (model, prompt, bar, check) = (model.clone(), &prompt, bar.clone(), &check);
                async move {
                    let list = match work {
                        Work::Ready { text, .. } => return anyhow::Ok(text.clone()),
                        // Another shard's element (a model stage's shard).
                        Work::Summarize { .. } if !ctx.asks(name) => return Ok(text_without_model(work)),
                        Work::Summarize { list, .. } => list,
                    };
                    let mut summary: Option<String> = None;
                    for (round, group) in rounds(list, self.max_input_tokens as usize).into_iter().enumerate() {
                        let mut list = group;
                        if let Some(s) = summary.take() {
                            list.insert(0, s);
                        }
                        let vars = BTreeMap::from([
                            ("entity_name", Value::from(name.as_str())),
                            ("description_list", Value::from(serde_json::to_string(&list)?)),
                            ("max_length", Value::from(self.max_length)),
                        ]);
                        let messages = [graphrag_engine::llm::Message::user(prompt.render(&vars)?)];
                        let answer = model.chat(&messages, false, usage, check).await?;
                        waves.record(round, &answer);
                        summary = Some(answer.completion.content.trim().to_string());
                    }
                    bar.inc(1);
                    Ok(summary.unwrap_or_default())
                }
            });
            bar.finish_and_clear();
            let mut failed = Vec::new();
            let summaries = results
                .into_iter()
                .enumerate()
                .map(|(i, r)| {
                    r.unwrap_or_else(|e| {
                        failed.push((labels[i].clone(), labels[i].clone(), e));
                        // Tolerated: the descriptions as they are.
                        text_without_model(&jobs[i].1)
                    })
                })
                .collect();
            ctx.item_failures("description", needs_llm, failed)?;
            summaries
        };
        let mut shortened = 0;
        let summaries: Vec<String> = summaries
            .into_iter()
            .map(|s| {
                let (s, cut) = limit_words(&s, self.max_length as usize);
                shortened += cut as u64;
                s
            })
            .collect();
        ctx.count("summarized", needs_llm as u64);
        ctx.count("descriptions_shortened_to_max_length", shortened);
        if ctx.previous().is_some() {
            ctx.count("summarized_incrementally", incremental);
        }
        for (name, n) in ready.into_iter().filter(|(name, _)| !name.is_empty()) {
            ctx.count(name, n);
        }
        let (for_entities, for_relationships) = summaries.split_at(entities.len());
        Ok(vec![
            summarized_entities_table(&entities, for_entities)?,
            summarized_relationships_table(&relationships, for_relationships)?,
        ])
    }
}

/// The description without a model call: the ready text, or (a tolerated
/// failure) the descriptions to summarise as they are.
fn text_without_model(w: &Work) -> String {
    match w {
        Work::Ready { text, .. } => text.clone(),
        Work::Summarize { list, .. } => list.join(" "),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stored_descriptions_never_exceed_max_length_words() {
        assert_eq!(limit_words("a b  c", 3), ("a b  c".to_string(), false));
        assert_eq!(limit_words("one two three four", 2), ("one two …".to_string(), true));
        let huge = "word ".repeat(1_000_000);
        let (cut, was_cut) = limit_words(&huge, 500);
        assert!(was_cut && cut.split_whitespace().count() == 501, "500 words and the ellipsis");
    }

    fn strings(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| s.to_string()).collect()
    }

    fn previous(description: &str, units: &[&str]) -> Previous {
        Previous { description: description.into(), text_unit_ids: units.iter().map(|u| u.to_string()).collect() }
    }

    #[test]
    fn a_fresh_index_summarises_every_element_with_several_descriptions() {
        let (d, u) = (strings(&["A miser", "A partner"]), strings(&["t1", "t2"]));
        let e = Element { descriptions: &d, text_unit_ids: &u, sources: &[(0, 0), (1, 1)] };
        assert_eq!(describe(&e, None, 2, 500), Work::Summarize { list: d.clone(), incremental: false });
        let one = Element { descriptions: &d[..1], text_unit_ids: &u, sources: &[(0, 0), (0, 1)] };
        assert_eq!(describe(&one, None, 2, 500), Work::Ready { text: "A miser".into(), how: Ready::Single });
        // Light: fewer than the threshold are joined, unless too long.
        assert_eq!(describe(&e, None, 8, 500), Work::Ready { text: "A miser\nA partner".into(), how: Ready::Joined });
        assert!(matches!(describe(&e, None, 8, 3), Work::Summarize { incremental: false, .. }));
    }

    #[test]
    fn an_update_summarises_the_previous_description_and_only_the_new_ones() {
        // t1, t2 were indexed before; t3 is new. "A miser" came from t1 and
        // t3, "A partner" from t2, "A ghost's friend" from t3 only.
        let d = strings(&["A miser", "A partner", "A ghost's friend"]);
        let u = strings(&["t1", "t2", "t3"]);
        let e = Element { descriptions: &d, text_unit_ids: &u, sources: &[(0, 0), (1, 1), (0, 2), (2, 2)] };
        let before = previous("Scrooge, a miser and partner.", &["t1", "t2"]);
        assert_eq!(
            describe(&e, Some(&before), 2, 500),
            Work::Summarize {
                list: strings(&["Scrooge, a miser and partner.", "A ghost's friend"]),
                incremental: true
            }
        );
        // Light: the new total is still under the threshold: joined as in a fresh index.
        assert_eq!(describe(&e, Some(&before), 8, 500), describe(&e, None, 8, 500));
        // The new text unit only repeated a known description: kept, no call.
        let repeat = Element { descriptions: &d[..2], text_unit_ids: &u, sources: &[(0, 0), (1, 1), (0, 2)] };
        let kept = Work::Ready { text: before.description.clone(), how: Ready::Kept };
        assert_eq!(describe(&repeat, Some(&before), 2, 500), kept);
        // Same text units: kept as it was (even if a fresh index would say otherwise).
        let same = Element { descriptions: &d[..2], text_unit_ids: &u[..2], sources: &[(0, 0), (1, 1)] };
        assert_eq!(describe(&same, Some(&before), 2, 500), kept);
    }

    #[test]
    fn an_element_that_lost_a_text_unit_is_summarised_afresh() {
        let (d, u) = (strings(&["A miser", "A ghost's friend"]), strings(&["t1", "t3"]));
        let e = Element { descriptions: &d, text_unit_ids: &u, sources: &[(0, 0), (1, 1)] };
        let before = previous("Scrooge, a miser and partner.", &["t1", "t2"]);
        assert_eq!(describe(&e, Some(&before), 2, 500), describe(&e, None, 2, 500));
        // Unknown sources (an older merged table), or no previous description: afresh too.
        let unknown = Element { descriptions: &d, text_unit_ids: &u, sources: &[] };
        assert_eq!(describe(&unknown, Some(&previous("x", &["t1"])), 2, 500), describe(&e, None, 2, 500));
        assert_eq!(describe(&e, Some(&previous("", &["t1"])), 2, 500), describe(&e, None, 2, 500));
    }

    #[test]
    fn rounds_respect_the_token_budget() {
        let d: Vec<String> = (0..6).map(|i| format!("description number {i} of the entity")).collect();
        let r = rounds(&d, 20);
        assert!(r.len() > 1);
        assert_eq!(r.iter().map(Vec::len).sum::<usize>(), 6);
        assert_eq!(rounds(&d, 10_000).len(), 1);
    }
}
