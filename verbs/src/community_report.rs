//! `community_report`: one report per community, bottom-up by level so that
//! a community too big for the context window can use its sub-communities'
//! reports. With a chat model: GraphRAG's report prompt (JSON, validated and
//! repaired). Without one: extractive reports, labelled as such.

use std::collections::{BTreeMap, HashMap};

use rayon::prelude::*;
use std::sync::Arc;

use arrow_array::RecordBatch;
use serde::Deserialize;
use serde_json::Value;

use graphrag_engine::context::VerbContext;
use graphrag_engine::llm::{answer, Message};
use graphrag_engine::schema;
use graphrag_engine::settings::CommunityReportsConfig;
use graphrag_engine::table::{ints, strings, StringLists};
use graphrag_engine::verb::{Verb, VerbDef, VerbInfo};
use graphrag_operations::community_report::{
    extractive_report, full_content, graph_context, report_from_json, report_json, text_context, ContextClaim,
    ContextEntity, ContextRelationship, Report, SubReport,
};
use graphrag_operations::ids::stable_uuid;

use crate::llm_steps::{fingerprint, map_concurrently, IN_FLIGHT};

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct CommunityReport {
    /// `graph` (entities, relationships, claims) or `text` (source passages).
    pub method: String,
    /// `auto`: the chat model when one is configured, else extractive;
    /// `llm`: require the chat model; `extractive`: never call a model.
    pub mode: String,
    pub model_id: String,
    /// The cache partition of this step's answers (cache/<name>/), as
    /// GraphRAG's `model_instance_name`; none: the cache root.
    pub model_instance_name: Option<String>,
    pub graph_prompt: String,
    pub text_prompt: String,
    /// Words of the report.
    pub max_length: u32,
    /// Tokens of context per community.
    pub max_input_length: usize,
}

impl Default for CommunityReport {
    fn default() -> Self {
        let s = CommunityReportsConfig::default();
        CommunityReport {
            method: "graph".into(),
            mode: s.mode,
            model_id: s.completion_model_id,
            model_instance_name: None,
            graph_prompt: s.graph_prompt,
            text_prompt: s.text_prompt,
            max_length: s.max_length,
            max_input_length: s.max_input_length as usize,
        }
    }
}

impl VerbDef for CommunityReport {
    const INFO: VerbInfo = VerbInfo {
        name: "community_report",
        about: "a report per community (LLM, or extractive without a chat model)",
        inputs: &["communities", "entities", "relationships", "covariates", "text_units"],
        outputs: &["community_reports"],
    };

    fn check(&self) -> Result<(), String> {
        if !["graph", "text"].contains(&self.method.as_str()) {
            return Err(format!("method `{}` is not one of graph, text", self.method));
        }
        if !["auto", "llm", "extractive"].contains(&self.mode.as_str()) {
            return Err(format!("mode `{}` is not one of auto, llm, extractive", self.mode));
        }
        Ok(())
    }
}

impl CommunityReport {
    fn uses_llm(&self, ctx: &VerbContext) -> anyhow::Result<bool> {
        Ok(match self.mode.as_str() {
            "extractive" => false,
            "llm" => true,
            _ => ctx.llm()?.has_chat_model(&self.model_id),
        })
    }

    fn prompt_path(&self) -> &str {
        if self.method == "text" {
            &self.text_prompt
        } else {
            &self.graph_prompt
        }
    }
}

/// One community's material, gathered from the tables when its report is
/// made (source texts borrowed from the text units table, not copied).
struct Material<'a> {
    entities: Vec<ContextEntity>,
    /// The most central relationships (by combined degree), as many as a
    /// report's context can hold; `relationship_count` is the full number.
    relationships: Vec<ContextRelationship>,
    relationship_count: usize,
    claims: Vec<ContextClaim>,
    units: Vec<(i64, &'a str)>,
}

impl Material<'_> {
    fn extractive_report(&self) -> Report {
        extractive_report(&self.entities, &self.relationships, self.relationship_count, &self.units)
    }
}

/// The input tables' columns a community's material comes from, read once
/// and borrowed: materials are gathered a level at a time (in extractive mode
/// one community at a time), never for all communities of all levels at once.
struct Sources<'a> {
    ent_index: HashMap<&'a str, usize>,
    e_hrid: Vec<i64>,
    e_title: Vec<&'a str>,
    e_desc: Vec<&'a str>,
    e_deg: Vec<i64>,
    rel_index: HashMap<&'a str, usize>,
    r_hrid: Vec<i64>,
    r_src: Vec<&'a str>,
    r_tgt: Vec<&'a str>,
    r_desc: Vec<&'a str>,
    r_deg: Vec<i64>,
    claims_by_subject: HashMap<&'a str, Vec<ContextClaim>>,
    unit_index: HashMap<&'a str, usize>,
    u_hrid: Vec<i64>,
    u_text: Vec<&'a str>,
    /// Each text unit's entities, as entity rows.
    u_ents: Vec<Vec<u32>>,
    c_ents: StringLists<'a>,
    c_rels: StringLists<'a>,
    c_units: StringLists<'a>,
    /// The context budget in tokens. A context row costs at least 2 tokens
    /// (its id and the newline), so a community's relationships past the
    /// first `max_input_length / 2` by combined degree can never be shown:
    /// they are not gathered (a top-level community holds most of the graph).
    max_input_length: usize,
}

impl<'a> Sources<'a> {
    fn read(inputs: &'a [Arc<RecordBatch>], max_input_length: usize) -> anyhow::Result<Self> {
        let (comms, ents, rels, covs, units) = (&inputs[0], &inputs[1], &inputs[2], &inputs[3], &inputs[4]);
        let index = |ids: Vec<&'a str>| ids.into_iter().enumerate().map(|(i, id)| (id, i)).collect();
        let mut claims_by_subject: HashMap<&str, Vec<ContextClaim>> = HashMap::new();
        let (c_hrid, c_subject, c_type, c_status, c_desc) = (
            ints(covs, "covariates", "human_readable_id")?,
            strings(covs, "covariates", "subject_id")?,
            strings(covs, "covariates", "type")?,
            strings(covs, "covariates", "status")?,
            strings(covs, "covariates", "description")?,
        );
        for i in 0..covs.num_rows() {
            claims_by_subject.entry(c_subject[i]).or_default().push(ContextClaim {
                id: c_hrid[i],
                subject: c_subject[i].to_string(),
                claim_type: c_type[i].to_string(),
                status: c_status[i].to_string(),
                description: c_desc[i].to_string(),
            });
        }
        let ent_index: HashMap<&str, usize> = index(strings(ents, "entities", "id")?);
        let u_ents = StringLists::new(units, "text_units", "entity_ids")?
            .rows()
            .map(|ids| ids.filter_map(|id| ent_index.get(id).map(|&e| e as u32)).collect())
            .collect();
        Ok(Sources {
            ent_index,
            e_hrid: ints(ents, "entities", "human_readable_id")?,
            e_title: strings(ents, "entities", "title")?,
            e_desc: strings(ents, "entities", "description")?,
            e_deg: ints(ents, "entities", "degree")?,
            rel_index: index(strings(rels, "relationships", "id")?),
            r_hrid: ints(rels, "relationships", "human_readable_id")?,
            r_src: strings(rels, "relationships", "source")?,
            r_tgt: strings(rels, "relationships", "target")?,
            r_desc: strings(rels, "relationships", "description")?,
            r_deg: ints(rels, "relationships", "combined_degree")?,
            claims_by_subject,
            unit_index: index(strings(units, "text_units", "id")?),
            u_hrid: ints(units, "text_units", "human_readable_id")?,
            u_text: strings(units, "text_units", "text")?,
            u_ents,
            c_ents: StringLists::new(comms, "communities", "entity_ids")?,
            c_rels: StringLists::new(comms, "communities", "relationship_ids")?,
            c_units: StringLists::new(comms, "communities", "text_unit_ids")?,
            max_input_length,
        })
    }

    /// The material of the community in row `i` of the communities table.
    fn gather(&self, i: usize) -> Material<'a> {
        let members: Vec<usize> = self.c_ents.row(i).filter_map(|id| self.ent_index.get(id).copied()).collect();
        let mut member_rows: Vec<u32> = members.iter().map(|&e| e as u32).collect();
        member_rows.sort_unstable();
        let entities = members
            .iter()
            .map(|&e| ContextEntity {
                id: self.e_hrid[e],
                title: self.e_title[e].to_string(),
                description: self.e_desc[e].to_string(),
                degree: self.e_deg[e],
            })
            .collect();
        let mut rel_rows: Vec<usize> = self.c_rels.row(i).filter_map(|id| self.rel_index.get(id).copied()).collect();
        let relationship_count = rel_rows.len();
        let keep = (self.max_input_length / 2).max(3);
        let (r_deg, r_hrid) = (&self.r_deg, &self.r_hrid);
        if rel_rows.len() > keep {
            rel_rows.select_nth_unstable_by(keep, |&a, &b| r_deg[b].cmp(&r_deg[a]).then(r_hrid[a].cmp(&r_hrid[b])));
            rel_rows.truncate(keep);
        }
        let relationships = rel_rows
            .iter()
            .map(|&r| ContextRelationship {
                id: r_hrid[r],
                source: self.r_src[r].to_string(),
                target: self.r_tgt[r].to_string(),
                description: self.r_desc[r].to_string(),
                combined_degree: r_deg[r],
            })
            .collect();
        let claims = members
            .iter()
            .flat_map(|&e| self.claims_by_subject.get(self.e_title[e]).cloned().unwrap_or_default())
            .collect();
        // Passages mentioning more of the community's entities come first.
        let mut ranked: Vec<(usize, i64, &str)> = self
            .c_units
            .row(i)
            .filter_map(|id| self.unit_index.get(id))
            .map(|&u| {
                let hits = self.u_ents[u].iter().filter(|e| member_rows.binary_search(e).is_ok()).count();
                (hits, self.u_hrid[u], self.u_text[u])
            })
            .collect();
        ranked.sort_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(&b.1)));
        Material {
            entities,
            relationships,
            relationship_count,
            claims,
            units: ranked.into_iter().map(|(_, id, t)| (id, t)).collect(),
        }
    }
}

fn list_of_ints(t: &RecordBatch, column: &str) -> anyhow::Result<Vec<Vec<i64>>> {
    use arrow_array::cast::AsArray;
    use arrow_array::types::Int64Type;
    use arrow_array::Array;
    let col = graphrag_engine::table::column_of(t, "communities", column)?;
    let lists = col.as_list_opt::<i32>().ok_or_else(|| anyhow::anyhow!("communities.{column} is not a list"))?;
    Ok((0..lists.len())
        .map(|i| lists.value(i).as_primitive::<Int64Type>().iter().map(|v| v.unwrap_or(0)).collect())
        .collect())
}

impl Verb for CommunityReport {
    fn external_fingerprint(&self, ctx: &VerbContext) -> anyhow::Result<Option<String>> {
        if !self.uses_llm(ctx)? {
            return Ok(Some("extractive".into()));
        }
        let model = ctx.llm()?.chat_model_for(&self.model_id, self.model_instance_name.as_deref())?;
        Ok(Some(fingerprint(&model.fingerprint(), &[&ctx.prompt(self.prompt_path())?])))
    }

    fn run(&self, inputs: &[Arc<RecordBatch>], ctx: &VerbContext) -> anyhow::Result<Vec<RecordBatch>> {
        let comms = &inputs[0];
        let (community, level, parent, size) = (
            ints(comms, "communities", "community")?,
            ints(comms, "communities", "level")?,
            ints(comms, "communities", "parent")?,
            ints(comms, "communities", "size")?,
        );
        let children = list_of_ints(comms, "children")?;
        let sources = Sources::read(inputs, self.max_input_length)?;
        let use_llm = self.uses_llm(ctx)?;
        let model = if use_llm {
            Some(ctx.llm()?.chat_model_for(&self.model_id, self.model_instance_name.as_deref())?)
        } else {
            None
        };
        let prompt = if use_llm { Some(ctx.prompt(self.prompt_path())?) } else { None };
        let usage = &ctx.counters.usage;
        let bar = ctx.progress(comms.num_rows() as u64, "communities");
        let mut reports: BTreeMap<i64, Report> = BTreeMap::new();
        let mut levels = level.clone();
        levels.sort_unstable();
        levels.dedup();
        let sizes: HashMap<i64, usize> = community.iter().zip(&size).map(|(&c, &s)| (c, s as usize)).collect();
        let (mut repaired, mut fallbacks) = (0, 0);
        let mut failed = Vec::new();
        let check = answer::json(
            "the report as one JSON object with title, summary, rating, rating_explanation and findings, no other text",
            report_from_json,
        );
        // Finest level first: parents may need their children's reports.
        for &at_level in levels.iter().rev() {
            let here: Vec<usize> = (0..comms.num_rows()).filter(|&i| level[i] == at_level).collect();
            if model.is_none() {
                // Extractive reports need no context and no other report: all
                // at once, each community's material gathered and dropped in turn.
                let done: Vec<(i64, Report)> = here
                    .par_iter()
                    .map(|&i| {
                        bar.inc(1);
                        (community[i], sources.gather(i).extractive_report())
                    })
                    .collect();
                reports.extend(done);
                continue;
            }
            let materials: Vec<Material> = here.iter().map(|&i| sources.gather(i)).collect();
            let contexts: Vec<String> = here
                .iter()
                .zip(&materials)
                .map(|(&i, m)| {
                    if self.method == "text" {
                        return text_context(&m.units, self.max_input_length);
                    }
                    let subs: Vec<SubReport> = children[i]
                        .iter()
                        .filter_map(|ch| reports.get(ch).map(|r| (ch, r)))
                        .map(|(ch, r)| SubReport {
                            community: *ch,
                            full_content: full_content(r),
                            size: sizes.get(ch).copied().unwrap_or(0),
                        })
                        .collect();
                    graph_context(&m.entities, &m.relationships, &m.claims, &subs, self.max_input_length)
                })
                .collect();
            let results: Vec<anyhow::Result<Option<(Report, bool)>>> = match (&model, &prompt) {
                (Some(model), Some(prompt)) => map_concurrently(ctx.llm()?, contexts, IN_FLIGHT, |context| {
                    let (model, bar, check) = (model.clone(), bar.clone(), &check);
                    async move {
                        let vars = BTreeMap::from([
                            ("input_text", Value::from(context)),
                            ("max_report_length", Value::from(self.max_length)),
                        ]);
                        let report = model.chat_json_with(&[Message::user(prompt.render(&vars)?)], usage, check).await;
                        bar.inc(1);
                        Ok(Some(report?))
                    }
                }),
                _ => contexts.iter().map(|_| Ok(None)).collect(),
            };
            for ((&i, m), result) in here.iter().zip(&materials).zip(results) {
                let (report, how) = match result {
                    Ok(Some((r, fixed))) => {
                        repaired += fixed as u64;
                        (r, "llm")
                    }
                    Ok(None) => {
                        bar.inc(1);
                        (m.extractive_report(), "extractive")
                    }
                    Err(e) => {
                        // Tolerated (or the step fails below): parents still get a sub-report.
                        let name = format!("community {} (level {})", community[i], level[i]);
                        failed.push((community[i].to_string(), name, e));
                        fallbacks += 1;
                        (m.extractive_report(), "extractive (the model's report failed)")
                    }
                };
                tracing::debug!(community = community[i], how, "report");
                reports.insert(community[i], report);
            }
            // Beyond the tolerated fraction: no point making the parents' reports.
            if failed.len() as f64 / comms.num_rows() as f64 > ctx.tolerated_failures() {
                break;
            }
        }
        bar.finish_and_clear();
        ctx.item_failures("community report", comms.num_rows(), failed)?;
        ctx.count("reports_repaired", repaired);
        ctx.count("reports_extractive", if use_llm { fallbacks } else { comms.num_rows() as u64 });

        let rows: Vec<&Report> = community.iter().map(|c| &reports[c]).collect();
        let table = RecordBatch::try_new(
            schema::community_reports(),
            vec![
                schema::text_col(community.iter().map(|c| stable_uuid("community_report", &[&c.to_string()]))),
                schema::int_col(community.iter().copied()),
                schema::int_col(community.iter().copied()),
                schema::int_col(level.iter().copied()),
                schema::int_col(parent),
                schema::int_list_col(children),
                schema::text_col(rows.iter().map(|r| &r.title)),
                schema::text_col(rows.iter().map(|r| &r.summary)),
                schema::text_col(rows.iter().map(|r| full_content(r))),
                schema::float_col(rows.iter().map(|r| r.rating)),
                schema::text_col(rows.iter().map(|r| &r.rating_explanation)),
                schema::findings_col(
                    rows.iter()
                        .map(|r| r.findings.iter().map(|f| (f.explanation.clone(), f.summary.clone())).collect()),
                ),
                // The JSON is made here, not kept beside each report: at 100 MB of
                // input that would be another copy of every report.
                schema::text_col(rows.iter().map(|r| report_json(r).to_string())),
                schema::text_col(strings(comms, "communities", "period")?),
                schema::int_col(size),
            ],
        )?;
        Ok(vec![table])
    }
}
