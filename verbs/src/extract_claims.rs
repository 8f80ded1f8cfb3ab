//! `extract_claims`: claims (covariates) from text units with the GraphRAG
//! claims prompt and gleaning. Off by default, as in GraphRAG: disabled, it
//! produces an empty covariates table without calling a model.

use std::collections::BTreeMap;
use std::sync::Arc;

use arrow_array::RecordBatch;
use serde::Deserialize;
use serde_json::Value;

use graphrag_engine::context::VerbContext;
use graphrag_engine::failures::TEXT_UNIT;
use graphrag_engine::schema;
use graphrag_engine::settings::{ExtractClaimsConfig, ExtractGraphConfig};
use graphrag_engine::table::strings;
use graphrag_engine::verb::{LlmEstimate, Verb, VerbDef, VerbInfo};
use graphrag_operations::extraction_parser::{parse_claim_records, ClaimRecord, Delimiters};
use graphrag_operations::ids::stable_uuid;

use crate::llm_steps::{estimate_extraction, fingerprint, glean, map_concurrently, records_check, IN_FLIGHT};

/// Claim records of an answer, and records that could not be read.
fn claim_records(text: &str, d: &Delimiters) -> (usize, usize) {
    let (claims, dropped) = parse_claim_records(text, d);
    (claims.len(), dropped)
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ExtractClaims {
    pub enabled: bool,
    pub model_id: String,
    /// The cache partition of this step's answers (`cache/<name>/`), as
    /// GraphRAG's `model_instance_name`; none: the cache root.
    pub model_instance_name: Option<String>,
    pub prompt: String,
    pub continue_prompt: String,
    pub loop_prompt: String,
    pub description: String,
    /// Which entities claims are about (GraphRAG's entity_specs).
    pub entity_types: Vec<String>,
    pub max_gleanings: u32,
}

impl Default for ExtractClaims {
    fn default() -> Self {
        let s = ExtractClaimsConfig::default();
        ExtractClaims {
            enabled: s.enabled,
            model_id: s.completion_model_id,
            model_instance_name: None,
            prompt: s.prompt,
            continue_prompt: "prompts/extract_claims_continue.txt".into(),
            loop_prompt: "prompts/extract_claims_loop.txt".into(),
            description: s.description,
            entity_types: ExtractGraphConfig::default().entity_types,
            max_gleanings: s.max_gleanings,
        }
    }
}

impl VerbDef for ExtractClaims {
    const INFO: VerbInfo = VerbInfo {
        name: "extract_claims",
        about: "LLM claim extraction (covariates), when enabled",
        inputs: &["text_units"],
        outputs: &["covariates"],
    };
}

fn covariates_table(rows: &[(String, ClaimRecord)]) -> anyhow::Result<RecordBatch> {
    let ids: Vec<String> = rows
        .iter()
        .enumerate()
        .map(|(i, (unit, c))| stable_uuid("claim", &[unit, &c.subject, &c.object, &c.claim_type, &i.to_string()]))
        .collect();
    let col = |f: fn(&ClaimRecord) -> &str| schema::text_col(rows.iter().map(|(_, c)| f(c)));
    Ok(RecordBatch::try_new(
        schema::covariates(),
        vec![
            schema::text_col(&ids),
            schema::int_col(0..rows.len() as i64),
            schema::text_col(rows.iter().map(|_| "claim")),
            col(|c| &c.claim_type),
            col(|c| &c.description),
            col(|c| &c.subject),
            col(|c| &c.object),
            col(|c| &c.status),
            col(|c| &c.start_date),
            col(|c| &c.end_date),
            col(|c| &c.source_text),
            schema::text_col(rows.iter().map(|(u, _)| u)),
        ],
    )?)
}

impl ExtractClaims {
    fn vars(&self, d: &Delimiters, text: &str) -> BTreeMap<&'static str, Value> {
        BTreeMap::from([
            ("entity_specs", Value::from(self.entity_types.join(", "))),
            ("claim_description", Value::from(self.description.as_str())),
            ("input_text", Value::from(text)),
            ("tuple_delimiter", Value::from(d.tuple.as_str())),
            ("record_delimiter", Value::from(d.record.as_str())),
            ("completion_delimiter", Value::from(d.completion.as_str())),
        ])
    }
}

impl Verb for ExtractClaims {
    fn model_to_call(&self) -> Option<&str> {
        self.enabled.then_some(&self.model_id)
    }

    fn external_fingerprint(&self, ctx: &VerbContext) -> anyhow::Result<Option<String>> {
        if !self.enabled {
            return Ok(None);
        }
        let model = ctx.llm()?.chat_model_for(&self.model_id, self.model_instance_name.as_deref())?;
        let prompts = [ctx.prompt(&self.prompt)?, ctx.prompt(&self.continue_prompt)?, ctx.prompt(&self.loop_prompt)?];
        Ok(Some(fingerprint(&model.fingerprint(), &prompts.iter().collect::<Vec<_>>())))
    }

    fn llm_estimate(&self, inputs: &[Arc<RecordBatch>], ctx: &VerbContext) -> anyhow::Result<Option<LlmEstimate>> {
        if !self.enabled {
            return Ok(None);
        }
        let model = ctx.llm()?.chat_model_for(&self.model_id, self.model_instance_name.as_deref())?;
        let (prompt, cont, check) =
            (ctx.prompt(&self.prompt)?, ctx.prompt(&self.continue_prompt)?, ctx.prompt(&self.loop_prompt)?);
        let d = Delimiters::default();
        let records = records_check(&d, claim_records);
        let prompts = [&prompt, &cont, &check];
        let vars = |t: &str| self.vars(&d, t);
        Ok(Some(estimate_extraction(&model, &inputs[0], prompts, vars, self.max_gleanings, &records)?))
    }

    fn run(&self, inputs: &[Arc<RecordBatch>], ctx: &VerbContext) -> anyhow::Result<Vec<RecordBatch>> {
        if !self.enabled {
            return Ok(vec![covariates_table(&[])?]);
        }
        let llm = ctx.llm()?;
        let model = llm.chat_model_for(&self.model_id, self.model_instance_name.as_deref())?;
        let (prompt, cont, check) =
            (ctx.prompt(&self.prompt)?, ctx.prompt(&self.continue_prompt)?, ctx.prompt(&self.loop_prompt)?);
        let d = Delimiters::default();
        let units = &inputs[0];
        let ids = strings(units, "text_units", "id")?;
        let texts = strings(units, "text_units", "text")?;
        let counters = ctx.counters;
        let bar = ctx.progress(texts.len() as u64, "chunks");
        let records = records_check(&d, claim_records);
        let results = map_concurrently(llm, texts.iter().map(|t| t.to_string()).collect(), IN_FLIGHT, |text| {
            let v = self.vars(&d, &text);
            let (model, prompt, cont, check, bar, d, records) =
                (model.clone(), &prompt, &cont, &check, bar.clone(), &d, &records);
            async move {
                let (first, cont, check) = (prompt.render(&v)?, cont.render(&v)?, check.render(&v)?);
                let output = glean(&model, first, &cont, &check, self.max_gleanings, counters, records).await;
                bar.inc(1);
                anyhow::Ok(parse_claim_records(&output?, d))
            }
        });
        bar.finish_and_clear();
        let mut rows = Vec::new();
        let mut dropped = 0;
        let mut failed = Vec::new();
        for (unit, result) in ids.iter().zip(results) {
            match result {
                Ok((claims, bad)) => {
                    dropped += bad as u64;
                    rows.extend(claims.into_iter().map(|c| (unit.to_string(), c)));
                }
                Err(e) => failed.push((unit.to_string(), format!("{TEXT_UNIT} {unit}"), e)),
            }
        }
        ctx.item_failures(TEXT_UNIT, ids.len(), failed)?;
        ctx.count("claims_dropped", dropped);
        Ok(vec![covariates_table(&rows)?])
    }
}
