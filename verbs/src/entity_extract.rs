//! `entity_extract`: text units → per-chunk entity and relationship records,
//! with the GraphRAG extraction prompt and gleaning turns.

use std::collections::BTreeMap;
use std::sync::Arc;

use arrow_array::RecordBatch;
use serde::Deserialize;
use serde_json::Value;

use graphrag_engine::context::VerbContext;
use graphrag_engine::failures::TEXT_UNIT;
use graphrag_engine::schema;
use graphrag_engine::settings::ExtractGraphConfig;
use graphrag_engine::table::strings;
use graphrag_engine::verb::{LlmEstimate, Verb, VerbDef, VerbInfo};
use graphrag_operations::extraction_parser::{parse_graph_records, Delimiters};

use crate::llm_steps::{estimate_extraction, fingerprint, glean, map_concurrently, records_check, IN_FLIGHT};

/// Entity and relationship records of an answer, and records that could not be read.
pub(crate) fn graph_records(text: &str, d: &Delimiters) -> (usize, usize) {
    let ex = parse_graph_records(text, d);
    (ex.entities.len() + ex.relationships.len(), ex.dropped)
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct EntityExtract {
    pub model_id: String,
    /// The cache partition of this step's answers (`cache/<name>/`), as
    /// GraphRAG's `model_instance_name`; none: the cache root.
    pub model_instance_name: Option<String>,
    pub prompt: String,
    pub continue_prompt: String,
    pub loop_prompt: String,
    pub entity_types: Vec<String>,
    pub max_gleanings: u32,
}

impl Default for EntityExtract {
    fn default() -> Self {
        let s = ExtractGraphConfig::default();
        EntityExtract {
            model_id: s.completion_model_id,
            model_instance_name: None,
            prompt: s.prompt,
            continue_prompt: "prompts/extract_graph_continue.txt".into(),
            loop_prompt: "prompts/extract_graph_loop.txt".into(),
            entity_types: s.entity_types,
            max_gleanings: s.max_gleanings,
        }
    }
}

impl VerbDef for EntityExtract {
    const INFO: VerbInfo = VerbInfo {
        name: "entity_extract",
        about: "LLM extraction of entities and relationships from each text unit (with gleaning)",
        inputs: &["text_units"],
        outputs: &["raw_entities", "raw_relationships"],
    };
}

/// Renders a prompt with the extraction variables.
fn vars(d: &Delimiters, entity_types: &str, text: &str) -> BTreeMap<&'static str, Value> {
    BTreeMap::from([
        ("entity_types", Value::from(entity_types)),
        ("input_text", Value::from(text)),
        ("tuple_delimiter", Value::from(d.tuple.as_str())),
        ("record_delimiter", Value::from(d.record.as_str())),
        ("completion_delimiter", Value::from(d.completion.as_str())),
    ])
}

impl Verb for EntityExtract {
    fn model_to_call(&self) -> Option<&str> {
        Some(&self.model_id)
    }

    fn external_fingerprint(&self, ctx: &VerbContext) -> anyhow::Result<Option<String>> {
        let model = ctx.llm()?.chat_model_for(&self.model_id, self.model_instance_name.as_deref())?;
        let prompts = [ctx.prompt(&self.prompt)?, ctx.prompt(&self.continue_prompt)?, ctx.prompt(&self.loop_prompt)?];
        Ok(Some(fingerprint(&model.fingerprint(), &prompts.iter().collect::<Vec<_>>())))
    }

    fn llm_estimate(&self, inputs: &[Arc<RecordBatch>], ctx: &VerbContext) -> anyhow::Result<Option<LlmEstimate>> {
        let model = ctx.llm()?.chat_model_for(&self.model_id, self.model_instance_name.as_deref())?;
        let (prompt, cont, check) =
            (ctx.prompt(&self.prompt)?, ctx.prompt(&self.continue_prompt)?, ctx.prompt(&self.loop_prompt)?);
        let (d, types) = (Delimiters::default(), self.entity_types.join(","));
        let vars = |t: &str| vars(&d, &types, t);
        let records = records_check(&d, graph_records);
        let prompts = [&prompt, &cont, &check];
        Ok(Some(estimate_extraction(&model, &inputs[0], prompts, vars, self.max_gleanings, &records)?))
    }

    fn run(&self, inputs: &[Arc<RecordBatch>], ctx: &VerbContext) -> anyhow::Result<Vec<RecordBatch>> {
        let llm = ctx.llm()?;
        let model = llm.chat_model_for(&self.model_id, self.model_instance_name.as_deref())?;
        let prompt = ctx.prompt(&self.prompt)?;
        let continue_prompt = ctx.prompt(&self.continue_prompt)?;
        let loop_prompt = ctx.prompt(&self.loop_prompt)?;
        let d = Delimiters::default();
        let types = self.entity_types.join(",");
        let units = &inputs[0];
        let ids = strings(units, "text_units", "id")?;
        let texts = strings(units, "text_units", "text")?;
        let counters = ctx.counters;
        let bar = ctx.progress(texts.len() as u64, "chunks");
        let records = records_check(&d, graph_records);

        // One conversation per chunk: extraction, then gleaning turns.
        let results = map_concurrently(llm, texts.iter().map(|t| t.to_string()).collect(), IN_FLIGHT, |text| {
            let v = vars(&d, &types, &text);
            let (model, bar) = (model.clone(), bar.clone());
            let (prompt, continue_prompt, loop_prompt, d, records) =
                (&prompt, &continue_prompt, &loop_prompt, &d, &records);
            async move {
                let output = glean(
                    &model,
                    prompt.render(&v)?,
                    &continue_prompt.render(&v)?,
                    &loop_prompt.render(&v)?,
                    self.max_gleanings,
                    counters,
                    records,
                )
                .await;
                bar.inc(1);
                anyhow::Ok(parse_graph_records(&output?, d))
            }
        });
        bar.finish_and_clear();

        let mut ents = RawRows::default();
        let mut rels = RawRows::default();
        let (mut dropped, mut repaired) = (0, 0);
        let mut failed = Vec::new();
        for (unit_id, result) in ids.iter().zip(results) {
            let ex = match result {
                Ok(ex) => ex,
                Err(e) => {
                    failed.push((unit_id.to_string(), format!("{TEXT_UNIT} {unit_id}"), e));
                    continue;
                }
            };
            dropped += ex.dropped as u64;
            repaired += ex.repaired as u64;
            for e in ex.entities {
                ents.push(unit_id, [e.name, e.entity_type, e.description], None);
            }
            for r in ex.relationships {
                rels.push(unit_id, [r.source, r.target, r.description], Some(r.strength));
            }
        }
        ctx.item_failures(TEXT_UNIT, ids.len(), failed)?;
        ctx.count("records_dropped", dropped);
        ctx.count("records_repaired", repaired);
        Ok(vec![ents.entities()?, rels.relationships()?])
    }
}

/// Columns of the raw record tables being built.
#[derive(Default)]
struct RawRows {
    unit: Vec<String>,
    fields: [Vec<String>; 3],
    weight: Vec<f64>,
}

impl RawRows {
    fn push(&mut self, unit: &str, fields: [String; 3], weight: Option<f64>) {
        self.unit.push(unit.to_string());
        for (col, v) in self.fields.iter_mut().zip(fields) {
            col.push(v);
        }
        if let Some(w) = weight {
            self.weight.push(w);
        }
    }

    fn entities(&self) -> anyhow::Result<RecordBatch> {
        let [title, kind, desc] = &self.fields;
        Ok(RecordBatch::try_new(
            schema::raw_entities(),
            vec![schema::text_col(&self.unit), schema::text_col(title), schema::text_col(kind), schema::text_col(desc)],
        )?)
    }

    fn relationships(&self) -> anyhow::Result<RecordBatch> {
        let [source, target, desc] = &self.fields;
        Ok(RecordBatch::try_new(
            schema::raw_relationships(),
            vec![
                schema::text_col(&self.unit),
                schema::text_col(source),
                schema::text_col(target),
                schema::text_col(desc),
                schema::float_col(self.weight.iter().copied()),
            ],
        )?)
    }
}
