//! `summarize`: one description per entity and relationship. Elements with
//! several distinct descriptions get an LLM summary (concurrently); a single
//! description passes through untouched.

use std::collections::BTreeMap;
use std::sync::Arc;

use arrow_array::RecordBatch;
use serde::Deserialize;
use serde_json::Value;

use graphrag_engine::context::VerbContext;
use graphrag_engine::llm::answer;
use graphrag_engine::settings::SummarizeDescriptionsConfig;
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
    /// The cache partition of this step's answers (cache/<name>/), as
    /// GraphRAG's `model_instance_name`; none: the cache root.
    pub model_instance_name: Option<String>,
    pub prompt: String,
    /// Words.
    pub max_length: u32,
    /// Descriptions beyond this many tokens are summarised in rounds.
    pub max_input_tokens: u32,
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

impl Verb for Summarize {
    fn external_fingerprint(&self, ctx: &VerbContext) -> anyhow::Result<Option<String>> {
        let model = ctx.llm()?.chat_model_for(&self.model_id, self.model_instance_name.as_deref())?;
        Ok(Some(fingerprint(&model.fingerprint(), &[&ctx.prompt(&self.prompt)?])))
    }

    fn run(&self, inputs: &[Arc<RecordBatch>], ctx: &VerbContext) -> anyhow::Result<Vec<RecordBatch>> {
        let entities = read_merged_entities(&inputs[0], "graph_entities")?;
        let relationships = read_merged_relationships(&inputs[1], "graph_relationships")?;
        // (name shown to the model, descriptions) for every element.
        let mut jobs: Vec<(String, Vec<String>)> =
            entities.iter().map(|e| (e.title.clone(), e.descriptions.clone())).collect();
        jobs.extend(
            relationships.iter().map(|r| (serde_json::json!([r.source, r.target]).to_string(), r.descriptions.clone())),
        );
        // How a failed element is named.
        let labels: Vec<String> = entities
            .iter()
            .map(|e| format!("entity {}", e.title))
            .chain(relationships.iter().map(|r| format!("relationship {} -> {}", r.source, r.target)))
            .collect();
        let needs_llm = jobs.iter().filter(|(_, d)| d.len() > 1).count();
        let summaries: Vec<String> = if needs_llm == 0 {
            jobs.iter().map(|(_, d)| d.first().cloned().unwrap_or_default()).collect()
        } else {
            let llm = ctx.llm()?;
            let model = llm.chat_model_for(&self.model_id, self.model_instance_name.as_deref())?;
            let prompt = ctx.prompt(&self.prompt)?;
            let usage = &ctx.counters.usage;
            let bar = ctx.progress(needs_llm as u64, "descriptions");
            let check = answer::text();
            let results = map_concurrently(llm, jobs.iter().collect(), IN_FLIGHT, |(name, descriptions)| {
                let (model, prompt, bar, check) = (model.clone(), &prompt, bar.clone(), &check);
                async move {
                    if descriptions.len() <= 1 {
                        return anyhow::Ok(descriptions.first().cloned().unwrap_or_default());
                    }
                    let mut summary: Option<String> = None;
                    for group in rounds(descriptions, self.max_input_tokens as usize) {
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
                        jobs[i].1.join(" ")
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
        let (for_entities, for_relationships) = summaries.split_at(entities.len());
        Ok(vec![
            summarized_entities_table(&entities, for_entities)?,
            summarized_relationships_table(&relationships, for_relationships)?,
        ])
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

    #[test]
    fn rounds_respect_the_token_budget() {
        let d: Vec<String> = (0..6).map(|i| format!("description number {i} of the entity")).collect();
        let r = rounds(&d, 20);
        assert!(r.len() > 1);
        assert_eq!(r.iter().map(Vec::len).sum::<usize>(), 6);
        assert_eq!(rounds(&d, 10_000).len(), 1);
    }
}
