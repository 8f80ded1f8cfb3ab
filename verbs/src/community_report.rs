//! `community_report`: one report per community, bottom-up by level so that
//! a community too big for the context window can use its sub-communities'
//! reports. With a chat model: GraphRAG's report prompt (JSON, validated and
//! repaired). Without one: extractive reports, labelled as such.

use std::cell::{Cell, RefCell};
use std::collections::{BTreeMap, HashMap, HashSet};

use rayon::prelude::*;
use std::sync::Arc;

use arrow_array::RecordBatch;
use serde::Deserialize;
use serde_json::Value;

use graphrag_engine::context::{ItemShard, VerbContext};
use graphrag_engine::llm::{answer, Answer, Message};
use graphrag_engine::schema;
use graphrag_engine::settings::{CommunityReportsConfig, UpdateConfig};
use graphrag_engine::table::{int_lists, ints, strings, StringLists};
use graphrag_engine::verb::{Verb, VerbDef, VerbInfo};
use graphrag_operations::community_report::{
    extractive_report, full_content, is_extractive, needs_new_report, report_from_json, report_json, text_context,
    ContextClaim, ContextEntity, ContextRelationship, Finding, GraphContext, Materiality, Membership, Refresh, Report,
    ReportMethod, ReportMode, SubReport,
};
use graphrag_operations::ids::stable_uuid;

use futures_util::future::{FutureExt, LocalBoxFuture, Shared};
use futures_util::stream::{self, StreamExt};

use crate::llm_steps::{fingerprint, IN_FLIGHT};

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct CommunityReport {
    pub method: ReportMethod,
    pub mode: ReportMode,
    pub model_id: String,
    /// The cache partition of this step's answers (`cache/<name>/`), as
    /// GraphRAG's `model_instance_name`; none: the cache root.
    pub model_instance_name: Option<String>,
    pub graph_prompt: String,
    pub text_prompt: String,
    /// Words of the report.
    pub max_length: u32,
    /// Tokens of context per community.
    pub max_input_length: usize,
    /// In an update, which reports are written again (the others are kept
    /// from the previous index).
    pub refresh: Refresh,
    /// `material`: a community whose members or relationships turned over by
    /// more than this fraction.
    pub material_fraction: f64,
    /// `material`: a community that gained an entity with at least this
    /// many relationships.
    pub material_degree: i64,
}

impl Default for CommunityReport {
    fn default() -> Self {
        let (s, u) = (CommunityReportsConfig::default(), UpdateConfig::default());
        CommunityReport {
            method: ReportMethod::Graph,
            mode: s.mode,
            model_id: s.completion_model_id,
            model_instance_name: None,
            graph_prompt: s.graph_prompt,
            text_prompt: s.text_prompt,
            max_length: s.max_length,
            max_input_length: s.max_input_length as usize,
            refresh: u.community_reports,
            material_fraction: u.material_fraction,
            material_degree: i64::from(u.material_degree),
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
        if !(0.0..=1.0).contains(&self.material_fraction) {
            return Err(format!("material_fraction {} is not between 0 and 1", self.material_fraction));
        }
        if self.material_degree < 1 {
            return Err(format!("material_degree {} must be at least 1", self.material_degree));
        }
        Ok(())
    }
}

impl CommunityReport {
    fn uses_llm(&self, ctx: &VerbContext) -> anyhow::Result<bool> {
        Ok(match self.mode {
            ReportMode::Extractive => false,
            ReportMode::Llm => true,
            ReportMode::Auto => ctx.llm()?.has_chat_model(&self.model_id),
        })
    }

    fn prompt_path(&self) -> &str {
        match self.method {
            ReportMethod::Text => &self.text_prompt,
            ReportMethod::Graph => &self.graph_prompt,
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

    fn graph_context(&self) -> GraphContext {
        GraphContext::new(&self.entities, &self.relationships, &self.claims)
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

impl Verb for CommunityReport {
    /// `auto` calls it when it is configured (the start-up check skips a
    /// chat model that is not).
    fn model_to_call(&self) -> Option<&str> {
        (self.mode != ReportMode::Extractive).then_some(&self.model_id)
    }

    fn calls_model(&self, ctx: &VerbContext) -> anyhow::Result<bool> {
        self.uses_llm(ctx)
    }

    /// By community, a wave at a time: a model stage's shard of wave w asks
    /// for the reports of wave w whose community number hashes to it,
    /// reading the sub-communities' reports they wait for from the cache.
    fn shards_model_calls(&self) -> bool {
        true
    }

    fn external_fingerprint(&self, ctx: &VerbContext) -> anyhow::Result<Option<String>> {
        if !self.uses_llm(ctx)? {
            return Ok(Some("extractive".into()));
        }
        let model = ctx.llm()?.chat_model_for(&self.model_id, self.model_instance_name.as_deref())?;
        let mut fp = fingerprint(&model.fingerprint(), &[&ctx.prompt(self.prompt_path())?]);
        // In an update, reports may be kept from the previous index.
        if let Some(p) = ctx.previous() {
            for t in ["communities", "community_reports"] {
                fp.push(':');
                fp.push_str(&p.fingerprint(t).unwrap_or_default());
            }
        }
        Ok(Some(fp))
    }

    fn run(&self, inputs: &[Arc<RecordBatch>], ctx: &VerbContext) -> anyhow::Result<Vec<RecordBatch>> {
        let comms = &inputs[0];
        let (community, level, parent, size) = (
            ints(comms, "communities", "community")?,
            ints(comms, "communities", "level")?,
            ints(comms, "communities", "parent")?,
            ints(comms, "communities", "size")?,
        );
        let children = int_lists(comms, "communities", "children")?;
        let sources = Sources::read(inputs, self.max_input_length)?;
        let use_llm = self.uses_llm(ctx)?;
        let bar = ctx.progress(comms.num_rows() as u64, "communities");
        let mut reports: BTreeMap<i64, Report> = BTreeMap::new();
        let (mut repaired, mut fallbacks) = (0, 0);
        let mut failed = Vec::new();
        if !use_llm {
            // Extractive reports need no context and no other report: all
            // at once, each community's material gathered and dropped in turn.
            let done: Vec<(i64, Report)> = (0..comms.num_rows())
                .into_par_iter()
                .map(|i| {
                    bar.inc(1);
                    (community[i], sources.gather(i).extractive_report())
                })
                .collect();
            reports.extend(done);
        } else {
            let model = ctx.llm()?.chat_model_for(&self.model_id, self.model_instance_name.as_deref())?;
            let prompt = ctx.prompt(self.prompt_path())?;
            let usage = &ctx.counters.usage;
            let kept = self.reports_to_keep(ctx, inputs)?;
            ctx.count("reports_kept", kept.len() as u64);
            bar.inc(kept.len() as u64);
            reports.extend(kept);
            let sizes: HashMap<i64, usize> = community.iter().zip(&size).map(|(&c, &s)| (c, s as usize)).collect();
            let check = answer::json(
                "the report as one JSON object with title, summary, rating, rating_explanation and findings, no other text",
                report_from_json,
            );
            let schedule = self.schedule(&sources, &community, &children, &reports);
            let row_of: HashMap<i64, usize> = community.iter().enumerate().map(|(i, &c)| (c, i)).collect();
            let parts = schedule.parts(ctx.item_shard(), &community, &children, &row_of);
            if ctx.item_shard().is_some() {
                ctx.count("model_waves", schedule.wave.iter().max().map_or(0, |w| w + 1) as u64);
            }
            let total = comms.num_rows();
            let (repairs, fallback_count, failures) = (Cell::new(0u64), Cell::new(0u64), RefCell::new(Vec::new()));
            // One future per report to make, in schedule order (sub-communities
            // first); a report that needs its sub-communities' reports awaits
            // theirs, and only theirs.
            let mut pending: Vec<Option<ReportFuture>> = vec![None; total];
            for &i in schedule.order.iter().filter(|&&i| parts[i] != Part::Skip) {
                let subs: Vec<(i64, Child)> = if schedule.waits[i] {
                    children[i]
                        .iter()
                        .filter_map(|ch| match (reports.get(ch), row_of.get(ch).and_then(|&r| pending[r].clone())) {
                            (Some(kept), _) => Some((*ch, Child::Done(kept))),
                            (None, Some(f)) => Some((*ch, Child::Pending(f))),
                            _ => None,
                        })
                        .collect()
                } else {
                    Vec::new()
                };
                let (model, prompt, bar, check, sources) = (model.clone(), &prompt, bar.clone(), &check, &sources);
                let (wave, sizes, failures, repairs, fallbacks) =
                    (schedule.wave[i], &sizes, &failures, &repairs, &fallback_count);
                let (community, level, from_cache) = (community[i], level[i], parts[i] == Part::FromCache);
                let report = async move {
                    let mut sub_reports = Vec::with_capacity(subs.len());
                    for (ch, child) in subs {
                        let full_content = match child {
                            Child::Done(r) => full_content(r),
                            Child::Pending(f) => full_content(f.await.as_ref()),
                        };
                        sub_reports.push(SubReport {
                            community: ch,
                            full_content,
                            size: sizes.get(&ch).copied().unwrap_or(0),
                        });
                    }
                    let m = sources.gather(i);
                    let context = match self.method {
                        ReportMethod::Text => text_context(&m.units, self.max_input_length),
                        ReportMethod::Graph => m.graph_context().render(&sub_reports, self.max_input_length),
                    };
                    let vars = BTreeMap::from([
                        ("input_text", Value::from(context)),
                        ("max_report_length", Value::from(self.max_length)),
                    ]);
                    // Beyond the tolerated fraction the step fails: no point asking more.
                    if failures.borrow().len() as f64 / total as f64 > ctx.tolerated_failures() {
                        bar.inc(1);
                        return Arc::new(m.extractive_report());
                    }
                    let answer = match prompt.render(&vars) {
                        Ok(p) if from_cache => {
                            let cached = model.cached_answer(&[Message::user(p)], true, usage, check);
                            cached.map(|a| Answer { value: a.value.0, completion: a.completion, from_cache: true }).ok_or_else(|| {
                                anyhow::anyhow!(
                                    "its report, of wave {wave}, is not in the cache: run that wave's model shards first"
                                )
                            })
                        }
                        Ok(p) => model.chat_json_with(&[Message::user(p)], usage, check).await.map_err(Into::into),
                        Err(e) => Err(e),
                    };
                    bar.inc(1);
                    Arc::new(match answer {
                        Ok(answer) => {
                            ctx.counters.waves.record(wave, &answer);
                            let (r, fixed) = answer.value;
                            repairs.set(repairs.get() + fixed as u64);
                            r
                        }
                        Err(e) => {
                            // Tolerated (or the step fails): parents still get a sub-report.
                            let name = format!("community {community} (level {level})");
                            failures.borrow_mut().push((community.to_string(), name, e));
                            fallbacks.set(fallbacks.get() + 1);
                            tracing::debug!(community, "the model's report failed: extractive");
                            m.extractive_report()
                        }
                    })
                };
                pending[i] = Some(report.boxed_local().shared());
            }
            let made_here: Vec<usize> = schedule.order.iter().copied().filter(|&i| parts[i] != Part::Skip).collect();
            let futures = made_here.iter().map(|&i| pending[i].clone().expect("scheduled"));
            let made: Vec<Arc<Report>> = ctx.llm()?.block_on(stream::iter(futures).buffered(IN_FLIGHT).collect());
            drop(pending);
            for (&i, r) in made_here.iter().zip(made) {
                reports.insert(community[i], Arc::unwrap_or_clone(r));
            }
            (repaired, fallbacks) = (repairs.get(), fallback_count.get());
            failed = failures.into_inner();
        }
        bar.finish_and_clear();
        ctx.item_failures("community report", comms.num_rows(), failed)?;
        ctx.count("reports_repaired", repaired);
        ctx.count("reports_extractive", if use_llm { fallbacks } else { comms.num_rows() as u64 });

        // A model stage's shard made only some reports: the others' rows
        // are empty (what it returns is no step's output).
        let none = Report::default();
        let rows: Vec<&Report> = community.iter().map(|c| reports.get(c).unwrap_or(&none)).collect();
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

impl CommunityReport {
    /// The order in which the reports still to make can be asked for: a
    /// report waits only for its sub-communities' reports, and only when its
    /// own context does not fit `max_input_length` (then GraphRAG puts those
    /// reports in its place). So most reports of every level are asked for
    /// at once, not a hierarchy level at a time.
    fn schedule(
        &self,
        sources: &Sources,
        community: &[i64],
        children: &[Vec<i64>],
        done: &BTreeMap<i64, Report>,
    ) -> Schedule {
        let row_of: HashMap<i64, usize> = community.iter().enumerate().map(|(i, &c)| (c, i)).collect();
        let waits: Vec<bool> = (0..community.len())
            .map(|i| {
                self.method == ReportMethod::Graph
                    && !done.contains_key(&community[i])
                    && children[i].iter().any(|c| row_of.contains_key(c))
                    && !sources.gather(i).graph_context().fits(self.max_input_length)
            })
            .collect();
        // A report's wave: 0 when it waits for nothing, else one more than its
        // sub-communities' (children are at a deeper level: no cycle).
        fn wave_of(i: usize, s: &mut Schedule, children: &[Vec<i64>], row_of: &HashMap<i64, usize>) -> usize {
            if s.wave[i] != usize::MAX {
                return s.wave[i];
            }
            let mut w = 0;
            if s.waits[i] {
                for ch in children[i].iter().filter_map(|c| row_of.get(c)) {
                    w = w.max(1 + wave_of(*ch, s, children, row_of));
                }
            }
            s.wave[i] = w;
            w
        }
        let n = community.len();
        let mut s = Schedule { order: Vec::new(), wave: vec![usize::MAX; n], waits };
        for i in 0..n {
            wave_of(i, &mut s, children, &row_of);
        }
        s.order = (0..n).filter(|&i| !done.contains_key(&community[i])).collect();
        s.order.sort_by_key(|&i| s.wave[i]);
        s
    }

    /// In an update, the previous index's reports of the communities that,
    /// under `refresh`, need no new one (by community number): same number
    /// and level, a model-made report, no source text unit removed, and no
    /// change that `refresh` calls for a new report.
    fn reports_to_keep(&self, ctx: &VerbContext, inputs: &[Arc<RecordBatch>]) -> anyhow::Result<HashMap<i64, Report>> {
        let refresh = self.refresh;
        let Some(previous) = ctx.previous().filter(|_| refresh != Refresh::All) else { return Ok(HashMap::new()) };
        let (Some(before), Some(old_reports)) = (previous.table("communities")?, previous.table("community_reports")?)
        else {
            return Ok(HashMap::new());
        };
        let (comms, ents, units) = (&inputs[0], &inputs[1], &inputs[4]);
        let degree: HashMap<&str, i64> =
            strings(ents, "entities", "id")?.into_iter().zip(ints(ents, "entities", "degree")?).collect();
        let units_now: HashSet<&str> = strings(units, "text_units", "id")?.into_iter().collect();
        let (b_ents, b_rels, b_units) = (
            StringLists::new(&before, "communities", "entity_ids")?,
            StringLists::new(&before, "communities", "relationship_ids")?,
            StringLists::new(&before, "communities", "text_unit_ids")?,
        );
        let before_rows: HashMap<(i64, i64), usize> = ints(&before, "communities", "community")?
            .into_iter()
            .zip(ints(&before, "communities", "level")?)
            .enumerate()
            .map(|(row, key)| (key, row))
            .collect();
        let old = previous_reports(&old_reports)?;
        let (a_ents, a_rels) = (
            StringLists::new(comms, "communities", "entity_ids")?,
            StringLists::new(comms, "communities", "relationship_ids")?,
        );
        let m = Materiality { fraction: self.material_fraction, degree: self.material_degree };
        let mut kept = HashMap::new();
        for (i, key) in
            ints(comms, "communities", "community")?.into_iter().zip(ints(comms, "communities", "level")?).enumerate()
        {
            let (Some(&b), Some(report)) = (before_rows.get(&key), old.get(&key.0)) else { continue };
            if is_extractive(report) || !b_units.row(b).all(|u| units_now.contains(u)) {
                continue;
            }
            let (was, is) = (membership(b, &b_ents, &b_rels), membership(i, &a_ents, &a_rels));
            if !needs_new_report(refresh, &was, &is, |e| degree.get(e).copied().unwrap_or(0), m) {
                kept.insert(key.0, report.clone());
            }
        }
        Ok(kept)
    }
}

/// When the reports still to make can be asked for (see `CommunityReport::schedule`).
struct Schedule {
    /// Rows of the communities without a report yet, those that wait after those they wait for.
    order: Vec<usize>,
    /// Per row: the dependent wave its report is in (0: it waits for no other report).
    wave: Vec<usize>,
    /// Per row: whether its report needs its sub-communities' reports.
    waits: Vec<bool>,
}

impl Schedule {
    /// What a run makes of each row: every report still to make, or in a
    /// model stage's shard of wave w its reports of that wave and, from the
    /// cache, the earlier reports they wait for (and those wait for).
    fn parts(
        &self,
        shard: Option<ItemShard>,
        community: &[i64],
        children: &[Vec<i64>],
        row_of: &HashMap<i64, usize>,
    ) -> Vec<Part> {
        let Some(shard) = shard else { return vec![Part::Ask; community.len()] };
        let mut parts = vec![Part::Skip; community.len()];
        let mut stack: Vec<usize> = Vec::new();
        for &i in &self.order {
            if self.wave[i] == shard.wave && shard.asks(&community[i].to_string()) {
                parts[i] = Part::Ask;
                stack.push(i);
            }
        }
        // Only rows in `order` wait; kept reports are not made again.
        let to_make: HashSet<usize> = self.order.iter().copied().collect();
        while let Some(i) = stack.pop() {
            if !self.waits[i] {
                continue;
            }
            for &ch in children[i].iter().filter_map(|c| row_of.get(c)) {
                if parts[ch] == Part::Skip && to_make.contains(&ch) {
                    parts[ch] = Part::FromCache;
                    stack.push(ch);
                }
            }
        }
        parts
    }
}

/// What a run does for a report still to make.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Part {
    /// Asks the model (or the cache) for it.
    Ask,
    /// Reads it from the cache, for a report that waits for it (a model
    /// stage's shard: an earlier wave's, another shard's or its own).
    FromCache,
    /// Leaves it out (a model stage's shard: another wave's or shard's).
    Skip,
}

/// A report on its way, awaited by the report stream and by its parent's.
type ReportFuture<'a> = Shared<LocalBoxFuture<'a, Arc<Report>>>;

/// A sub-community's report, kept from the previous index or on its way.
enum Child<'a> {
    Done(&'a Report),
    Pending(ReportFuture<'a>),
}

/// Row `i` of a communities table's member and relationship lists.
fn membership<'a>(i: usize, entities: &StringLists<'a>, relationships: &StringLists<'a>) -> Membership<'a> {
    Membership { entities: entities.row(i).collect(), relationships: relationships.row(i).collect() }
}

/// The reports of a community_reports table, by community number.
fn previous_reports(t: &RecordBatch) -> anyhow::Result<HashMap<i64, Report>> {
    use arrow_array::cast::AsArray;
    use arrow_array::Array;
    let n = "community_reports";
    let findings = graphrag_engine::table::column_of(t, n, "findings")?
        .as_list_opt::<i32>()
        .ok_or_else(|| anyhow::anyhow!("community_reports.findings is not a list"))?;
    let (titles, summaries, explanations) =
        (strings(t, n, "title")?, strings(t, n, "summary")?, strings(t, n, "rating_explanation")?);
    let ratings = graphrag_engine::table::floats(t, n, "rank")?;
    // A finding's field by name (GraphRAG's files may order them otherwise).
    let field = |row: &arrow_array::StructArray, name: &str, j: usize| -> String {
        match row.column_by_name(name) {
            Some(c) if c.data_type() == &arrow_schema::DataType::LargeUtf8 => c.as_string::<i64>().value(j).to_string(),
            Some(c) => c.as_string_opt::<i32>().map(|c| c.value(j).to_string()).unwrap_or_default(),
            None => String::new(),
        }
    };
    let mut out = HashMap::new();
    for (i, c) in ints(t, n, "community")?.into_iter().enumerate() {
        let row = findings.value(i);
        let row = row.as_struct();
        let findings = (0..row.len())
            .map(|j| Finding { explanation: field(row, "explanation", j), summary: field(row, "summary", j) })
            .collect();
        out.insert(
            c,
            Report {
                title: titles[i].to_string(),
                summary: summaries[i].to_string(),
                rating: ratings[i],
                rating_explanation: explanations[i].to_string(),
                findings,
            },
        );
    }
    Ok(out)
}
