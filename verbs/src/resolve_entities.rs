//! `resolve_entities`: one entity per real-world thing. Candidate pairs by
//! name blocking (no all-pairs comparison), decided by rules or, with a chat
//! model, by batched yes/no questions (RAGFlow's approach); the project's
//! aliases file forces or forbids merges. The canonical entity takes every
//! merged entity's text units and descriptions, relationships are re-pointed
//! (parallel ones merged, weights added, self-loops dropped), and every merge
//! is a row of `entity_aliases` (alias, canonical entity, method, score,
//! evidence): nothing is lost, and every merge can be seen and undone.
//!
//! # In detail
//!
//! Entity resolution (`resolve_entities`, every pipeline — standard, light, fast —, before summaries and
//! clustering): candidate pairs by blocking on names (rarest content word, same letters, initials,
//! neighbours in sorted letter order — never all pairs), judged by rules
//! (`operations/src/entity_resolution/`) or, with a chat model (`resolve_entities.mode`), by batched yes/no
//! questions whose answers are checked and cached like every answer; the project's `aliases.yaml` forces
//! (`same:`) or forbids (`different:`) merges and is part of the step's fingerprint, so `update` redoes
//! resolution (and what depends on it) when the file changes. Merged entities keep the union of their text
//! units and descriptions; relationships are re-pointed (parallel ones merged, weights added, self-loops
//! dropped); every merge is a row of `entity_aliases.parquet`, which the query engine reads to find an
//! entity by any of its names.

use std::collections::{BTreeMap, HashMap};
use std::path::Path;
use std::sync::Arc;

use arrow_array::{ArrayRef, RecordBatch, StringArray};
use serde::Deserialize;
use serde_json::Value;

use graphrag_engine::aliases_file::{self, AliasesFile};
use graphrag_engine::context::VerbContext;
use graphrag_engine::llm::{count_prompt_tokens, AnswerCheck, ChatModel, Message};
use graphrag_engine::schema;
use graphrag_engine::settings::ResolveEntitiesConfig;
use graphrag_engine::table::{floats, strings, IdNumbers, StringLists};
use graphrag_engine::verb::{LlmEstimate, Verb, VerbDef, VerbInfo};
use graphrag_operations::entity_resolution::candidates::{candidates, informative_type, Candidate};
use graphrag_operations::entity_resolution::cluster::{Cluster, Edge, Member};
use graphrag_operations::entity_resolution::decisions::{batches, parse_decisions, questions_text, Side};
use graphrag_operations::entity_resolution::merge::{plan, union_in_order, GraphPlan};
use graphrag_operations::entity_resolution::names::NameForm;
use graphrag_operations::entity_resolution::{group, rule_merges, Entity, Method, Overrides, ResolveMode};
use graphrag_operations::ids::{entity_id, sha256_hex};

use crate::graph_tables::joined_descriptions;
use crate::llm_steps::{fingerprint, map_concurrently, IN_FLIGHT};

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ResolveEntities {
    /// Merge what rules or the model find; false: only the aliases file's merges.
    pub enabled: bool,
    pub mode: ResolveMode,
    /// Whether `auto` asks a configured chat model (the standard pipeline);
    /// false in the fast pipeline, whose noun-phrase entities have no type
    /// or description to show a model, so that it calls none unless `llm`.
    pub model_in_auto: bool,
    pub model_id: String,
    /// The cache partition of this step's answers (`cache/<name>/`).
    pub model_instance_name: Option<String>,
    pub prompt: String,
    /// The project's aliases file, relative to the project root (optional).
    pub aliases_file: String,
    /// Candidate pairs per prompt.
    pub batch_size: usize,
}

impl Default for ResolveEntities {
    fn default() -> Self {
        let s = ResolveEntitiesConfig::default();
        ResolveEntities {
            enabled: s.enabled,
            mode: s.mode,
            model_in_auto: true,
            model_id: s.completion_model_id,
            model_instance_name: None,
            prompt: s.prompt,
            aliases_file: s.aliases_file,
            batch_size: s.batch_size,
        }
    }
}

impl VerbDef for ResolveEntities {
    const INFO: VerbInfo = VerbInfo {
        name: "resolve_entities",
        about:
            "merge the entities that name one real-world thing (rules or a chat model; aliases.yaml forces or forbids)",
        inputs: &["entities", "relationships", "text_units"],
        outputs: &["entities", "relationships", "entity_aliases"],
    };

    fn check(&self) -> Result<(), String> {
        if self.batch_size == 0 {
            return Err("batch_size must be at least 1".into());
        }
        Ok(())
    }
}

/// The entities as resolution reads them, borrowed from the input table.
struct Entities<'a> {
    titles: Vec<&'a str>,
    types: Vec<&'a str>,
    /// Text units per entity as numbers of `unit_ids`, in the table's order.
    units: Vec<Vec<u32>>,
    /// The same, ascending (for counting shared units).
    sorted_units: Vec<Vec<u32>>,
    unit_ids: IdNumbers<'a>,
    /// Document number of each text unit number (one sense per discourse).
    unit_doc: Vec<u32>,
    forms: Vec<NameForm>,
}

impl<'a> Entities<'a> {
    fn read(t: &'a RecordBatch, text_units: &RecordBatch) -> anyhow::Result<Self> {
        let mut unit_ids = IdNumbers::default();
        let units = unit_ids.rows(&StringLists::new(t, "entities", "text_unit_ids")?);
        let doc_of: HashMap<&str, &str> = strings(text_units, "text_units", "id")?
            .into_iter()
            .zip(strings(text_units, "text_units", "document_id")?)
            .collect();
        let mut docs = IdNumbers::default();
        let unit_doc = unit_ids.ids().iter().map(|u| docs.number_of(doc_of.get(u).copied().unwrap_or(u))).collect();
        let sorted_units = units
            .iter()
            .map(|u| {
                let mut s = u.clone();
                s.sort_unstable();
                s.dedup();
                s
            })
            .collect();
        let titles = strings(t, "entities", "title")?;
        let forms = titles.iter().map(|t| NameForm::parse(t)).collect();
        Ok(Entities { titles, types: strings(t, "entities", "type")?, units, sorted_units, unit_ids, unit_doc, forms })
    }

    fn entity(&self, i: usize) -> Entity<'_> {
        Entity { title: self.titles[i], entity_type: self.types[i], units: &self.sorted_units[i] }
    }

    fn all(&self) -> Vec<Entity<'_>> {
        (0..self.titles.len()).map(|i| self.entity(i)).collect()
    }
}

/// Pairs per question batch sent to the model, and the batch's prompt.
struct Batch {
    pairs: Vec<usize>,
    messages: Vec<Message>,
}

impl ResolveEntities {
    fn uses_llm(&self, ctx: &VerbContext) -> anyhow::Result<bool> {
        Ok(self.enabled
            && match self.mode {
                ResolveMode::Rules => false,
                ResolveMode::Llm => true,
                ResolveMode::Auto => self.model_in_auto && ctx.llm()?.has_chat_model(&self.model_id),
            })
    }

    fn model(&self, ctx: &VerbContext) -> anyhow::Result<Arc<ChatModel>> {
        Ok(ctx.llm()?.chat_model_for(&self.model_id, self.model_instance_name.as_deref())?)
    }

    fn aliases(&self, ctx: &VerbContext) -> anyhow::Result<(AliasesFile, String)> {
        let Some(text) = ctx.project_file(&self.aliases_file)? else {
            return Ok((AliasesFile::default(), "none".into()));
        };
        let parsed = aliases_file::parse(&text, Path::new(&self.aliases_file))?;
        Ok((parsed, sha256_hex(&[text.as_bytes()])))
    }

    /// The aliases file's names as entities; names that are no entity's
    /// title are reported (they may belong to documents not indexed yet).
    fn overrides(&self, ctx: &VerbContext, file: &AliasesFile, entities: &Entities) -> Overrides {
        let mut by_key: HashMap<String, Vec<usize>> = HashMap::new();
        for (i, t) in entities.titles.iter().enumerate() {
            by_key.entry(aliases_file::match_key(t)).or_default().push(i);
        }
        let lookup = |names: &[String], line: Option<usize>| -> Vec<usize> {
            let mut out = Vec::new();
            for name in names {
                match by_key.get(&aliases_file::match_key(name)) {
                    Some(found) => out.extend(found),
                    None => {
                        let at = line.map(|l| format!(":{l}")).unwrap_or_default();
                        let hint = graphrag_operations::suggest::did_you_mean(
                            &aliases_file::match_key(name),
                            entities.titles.iter().copied(),
                        );
                        ctx.warn(format!("{}{at}: `{name}` is no entity's title{hint}", self.aliases_file));
                    }
                }
            }
            out
        };
        let mut overrides = Overrides::default();
        for g in &file.same {
            let members = lookup(&g.names, g.line);
            if members.len() >= 2 {
                let at = g.line.map(|l| format!(":{l}")).unwrap_or_default();
                overrides.same.push((members, format!("{}{at}: same: [{}]", self.aliases_file, g.names.join(", "))));
            }
        }
        for g in &file.different {
            let members = lookup(&g.names, g.line);
            for (k, &x) in members.iter().enumerate() {
                for &y in &members[k + 1..] {
                    overrides.different.insert((x.min(y), x.max(y)));
                }
            }
        }
        overrides
    }

    /// The model's questions: every candidate the aliases file does not settle.
    fn batches(
        &self,
        ctx: &VerbContext,
        entities: &Entities,
        descriptions: &[String],
        asked: &[&Candidate],
    ) -> anyhow::Result<Vec<Batch>> {
        let prompt = ctx.prompt(&self.prompt)?;
        let keys: Vec<String> =
            asked.iter().map(|c| format!("{}\u{1f}{}", entities.titles[c.a], entities.titles[c.b])).collect();
        let side = |i: usize| Side {
            title: entities.titles[i],
            entity_type: entities.types[i],
            description: descriptions[i].as_str(),
        };
        batches(&keys, self.batch_size)
            .into_iter()
            // A model stage's shard asks the batches whose first pair hashes to it.
            .filter(|pairs| ctx.asks(&keys[pairs[0]]))
            .map(|pairs| {
                let sides: Vec<(Side, Side)> = pairs.iter().map(|&k| (side(asked[k].a), side(asked[k].b))).collect();
                let vars = BTreeMap::from([
                    ("questions", Value::from(questions_text(&sides))),
                    ("count", Value::from(pairs.len())),
                ]);
                Ok(Batch { pairs, messages: vec![Message::user(prompt.render(&vars)?)] })
            })
            .collect()
    }

    /// The model's yes/no per asked pair. The LLM layer asks again when an
    /// answer does not answer every question once (and caches only answers
    /// that do); a batch that still fails is a failed item, its pairs left
    /// unmerged, and more failures than `failures.tolerated_fraction` fail
    /// the step.
    fn ask(
        &self,
        ctx: &VerbContext,
        batches: Vec<Batch>,
        asked: &[&Candidate],
        titles: &[&str],
    ) -> anyhow::Result<Vec<bool>> {
        let llm = ctx.llm()?;
        let model = self.model(ctx)?;
        let usage = &ctx.counters.usage;
        let total = batches.len();
        let bar = ctx.progress(total as u64, "question batches");
        let answers = map_concurrently(llm, batches, IN_FLIGHT, |batch| {
            let (model, bar) = (model.clone(), bar.clone());
            async move {
                let check = decisions_check(batch.pairs.len());
                let answer = model.chat(&batch.messages, false, usage, &check).await;
                bar.inc(1);
                (batch.pairs, answer.map(|a| a.value))
            }
        });
        bar.finish_and_clear();
        let mut yes = vec![false; asked.len()];
        let mut failed = Vec::new();
        for (pairs, answer) in answers {
            match answer {
                Ok(decisions) => {
                    for (k, d) in pairs.into_iter().zip(decisions) {
                        yes[k] = d;
                    }
                }
                Err(e) => {
                    let first = asked[pairs[0]];
                    let name = format!(
                        "batch of {} entity pairs ({} / {}, ...)",
                        pairs.len(),
                        titles[first.a],
                        titles[first.b]
                    );
                    failed.push((name.clone(), name, e.into()));
                }
            }
        }
        ctx.item_failures("entity pair batch", total, failed)?;
        Ok(yes)
    }

    /// Groups of entities that are one, and how each merge was decided.
    fn resolve(
        &self,
        ctx: &VerbContext,
        entities: &Entities,
        descriptions: impl FnOnce() -> anyhow::Result<Vec<String>>,
        overrides: &Overrides,
    ) -> anyhow::Result<Vec<Cluster>> {
        let mut edges = Vec::new();
        if self.enabled {
            let found = candidates(&entities.all(), &entities.forms, &entities.unit_doc);
            ctx.count("candidate_pairs", found.len() as u64);
            if self.uses_llm(ctx)? {
                let asked: Vec<&Candidate> = found.iter().filter(|c| !overrides.settled(c.a, c.b)).collect();
                let batches = self.batches(ctx, entities, &descriptions()?, &asked)?;
                ctx.count("pairs_asked", asked.len() as u64);
                let yes = self.ask(ctx, batches, &asked, &entities.titles)?;
                for (c, _) in asked.iter().zip(&yes).filter(|(_, y)| **y) {
                    let evidence = format!("the model said yes ({})", c.evidence);
                    edges.push(Edge { a: c.a, b: c.b, method: Method::Model, score: c.score, evidence });
                }
            } else {
                edges = rule_merges(found);
            }
        }
        Ok(group(&entities.all(), &entities.forms, overrides, edges))
    }
}

/// What a batch of `n` questions must be answered with.
fn decisions_check(n: usize) -> AnswerCheck<impl Fn(&str) -> Result<Vec<bool>, String>> {
    AnswerCheck::new(
        format!("exactly one line per question, `N: yes` or `N: no`, for questions 1 to {n}"),
        move |text: &str| parse_decisions(text, n),
    )
}

/// The merged entities table, in the input's form (a merged graph's
/// `descriptions` lists, or a summarised graph's single `description`).
fn entities_table(t: &RecordBatch, e: &Entities, p: &GraphPlan) -> anyhow::Result<RecordBatch> {
    let ids: ArrayRef = Arc::new(StringArray::from_iter_values(e.unit_ids.ids()));
    let units: Vec<Vec<u32>> =
        p.entities.iter().map(|rows| union_in_order(rows.iter().map(|&r| e.units[r].iter().copied()))).collect();
    let types = p.entities.iter().map(|rows| {
        rows.iter().map(|&r| e.types[r]).find(|t| informative_type(t).is_some()).unwrap_or(e.types[rows[0]])
    });
    let titles = p.entities.iter().map(|rows| e.titles[rows[0]]);
    let frequency: Vec<i64> = units.iter().map(|u| u.len() as i64).collect();
    let (schema, descriptions) = descriptions_col(t, "entities", &p.entities)?;
    Ok(schema::batch(
        schema,
        vec![
            schema::text_col(titles),
            schema::text_col(types),
            descriptions,
            schema::id_list_col_of(ids, units),
            schema::int_col(frequency),
        ],
    )?)
}

/// The merged `descriptions` (or `description`) column of `t`, and the
/// schema of a table with it.
fn descriptions_col(
    t: &RecordBatch,
    name: &str,
    rows: &[Vec<usize>],
) -> anyhow::Result<(arrow_schema::SchemaRef, ArrayRef)> {
    let entities = name == "entities";
    if t.column_by_name("descriptions").is_some() {
        let lists = StringLists::new(t, name, "descriptions")?;
        let merged = rows.iter().map(|rs| union_in_order(rs.iter().map(|&r| lists.row(r))));
        let schema = if entities { schema::graph_entities() } else { schema::graph_relationships() };
        Ok((schema, schema::id_list_col(merged)))
    } else {
        let single = strings(t, name, "description")?;
        let merged = rows
            .iter()
            .map(|rs| union_in_order(rs.iter().map(|&r| Some(single[r]).filter(|d| !d.is_empty()))).join("\n"));
        let schema = if entities { schema::summarized_entities() } else { schema::summarized_relationships() };
        Ok((schema, schema::text_col(merged)))
    }
}

fn relationships_table(t: &RecordBatch, e: &Entities, p: &GraphPlan, outside: &[&str]) -> anyhow::Result<RecordBatch> {
    let mut numbers = IdNumbers::default();
    let units = numbers.rows(&StringLists::new(t, "relationships", "text_unit_ids")?);
    let ids: ArrayRef = Arc::new(StringArray::from_iter_values(numbers.ids()));
    let weights = floats(t, "relationships", "weight")?;
    let title = |end: usize| {
        if end < p.entities.len() {
            e.titles[p.entities[end][0]]
        } else {
            outside[end - p.entities.len()]
        }
    };
    let (schema, descriptions) = descriptions_col(t, "relationships", &p.relationships)?;
    Ok(schema::batch(
        schema,
        vec![
            schema::text_col(p.ends.iter().map(|&(s, _)| title(s))),
            schema::text_col(p.ends.iter().map(|&(_, g)| title(g))),
            descriptions,
            schema::float_col(p.relationships.iter().map(|rows| rows.iter().map(|&r| weights[r]).sum::<f64>())),
            schema::id_list_col_of(
                ids,
                p.relationships.iter().map(|rows| union_in_order(rows.iter().map(|&r| units[r].iter().copied()))),
            ),
        ],
    )?)
}

fn aliases_table(e: &Entities, clusters: &[Cluster]) -> anyhow::Result<RecordBatch> {
    let rows: Vec<(&str, &str, &Member)> = clusters
        .iter()
        .flat_map(|c| c.members.iter().map(move |m| (e.titles[m.entity], e.titles[c.canonical], m)))
        .collect();
    Ok(RecordBatch::try_new(
        schema::entity_aliases(),
        vec![
            schema::text_col(rows.iter().map(|r| r.0)),
            schema::text_col(rows.iter().map(|r| entity_id(r.1))),
            schema::text_col(rows.iter().map(|r| r.1)),
            schema::text_col(rows.iter().map(|r| r.2.method.as_str())),
            schema::float_col(rows.iter().map(|r| r.2.score)),
            schema::text_col(rows.iter().map(|r| r.2.evidence.as_str())),
        ],
    )?)
}

/// (source, target) per relationship, as endpoint numbers.
type Ends = Vec<(usize, usize)>;

/// Each relationship's (source, target) as entity rows, or as `entity count
/// + k` for the k-th endpoint that is no entity's title; and those endpoints.
fn relationship_ends<'t>(rels: &'t RecordBatch, titles: &[&str]) -> anyhow::Result<(Ends, Vec<&'t str>)> {
    let n = titles.len();
    let row_of: HashMap<&str, usize> = titles.iter().enumerate().map(|(i, t)| (*t, i)).rev().collect();
    let mut outside: Vec<&'t str> = Vec::new();
    let mut outside_of: HashMap<&'t str, usize> = HashMap::new();
    let mut end = |t: &'t str| -> usize {
        row_of.get(t).copied().unwrap_or_else(|| {
            n + *outside_of.entry(t).or_insert_with(|| {
                outside.push(t);
                outside.len() - 1
            })
        })
    };
    let (sources, targets) = (strings(rels, "relationships", "source")?, strings(rels, "relationships", "target")?);
    let ends = sources.iter().zip(&targets).map(|(s, t)| (end(s), end(t))).collect();
    Ok((ends, outside))
}

impl Verb for ResolveEntities {
    /// `auto` calls it when it is configured (the start-up check skips a
    /// chat model that is not), unless `model_in_auto` is off (the fast pipeline).
    fn model_to_call(&self) -> Option<&str> {
        let calls = match self.mode {
            ResolveMode::Rules => false,
            ResolveMode::Llm => true,
            ResolveMode::Auto => self.model_in_auto,
        };
        (self.enabled && calls).then_some(&self.model_id)
    }

    fn external_fingerprint(&self, ctx: &VerbContext) -> anyhow::Result<Option<String>> {
        let (_, aliases) = self.aliases(ctx)?;
        let model = if self.uses_llm(ctx)? {
            fingerprint(&self.model(ctx)?.fingerprint(), &[&ctx.prompt(&self.prompt)?])
        } else {
            "rules".to_string()
        };
        Ok(Some(sha256_hex(&[aliases.as_bytes(), model.as_bytes()])))
    }

    fn calls_model(&self, ctx: &VerbContext) -> anyhow::Result<bool> {
        self.uses_llm(ctx)
    }

    /// By question batch: a model stage's shard asks the batches whose
    /// first candidate pair hashes to it.
    fn shards_model_calls(&self) -> bool {
        true
    }

    fn llm_estimate(&self, inputs: &[Arc<RecordBatch>], ctx: &VerbContext) -> anyhow::Result<Option<LlmEstimate>> {
        if !self.uses_llm(ctx)? {
            return Ok(None);
        }
        let entities = Entities::read(&inputs[0], &inputs[2])?;
        let (file, _) = self.aliases(ctx)?;
        let overrides = self.overrides(ctx, &file, &entities);
        let found = candidates(&entities.all(), &entities.forms, &entities.unit_doc);
        let asked: Vec<&Candidate> = found.iter().filter(|c| !overrides.settled(c.a, c.b)).collect();
        let descriptions = joined_descriptions(&inputs[0], "entities")?;
        let model = self.model(ctx)?;
        let mut est = LlmEstimate { note: format!("{} candidate pairs", asked.len()), ..LlmEstimate::default() };
        for batch in self.batches(ctx, &entities, &descriptions, &asked)? {
            est.items += 1;
            if model.is_cached(&batch.messages, false, &decisions_check(batch.pairs.len())) {
                est.cached_items += 1;
            } else {
                est.calls += 1;
                est.prompt_tokens += count_prompt_tokens(&batch.messages);
            }
        }
        Ok(Some(est))
    }

    fn run(&self, inputs: &[Arc<RecordBatch>], ctx: &VerbContext) -> anyhow::Result<Vec<RecordBatch>> {
        let (ents, rels) = (&inputs[0], &inputs[1]);
        let entities = Entities::read(ents, &inputs[2])?;
        let (file, _) = self.aliases(ctx)?;
        let overrides = self.overrides(ctx, &file, &entities);
        let clusters = self.resolve(ctx, &entities, || joined_descriptions(ents, "entities"), &overrides)?;
        let merged: usize = clusters.iter().map(|c| c.members.len()).sum();
        ctx.count("entities_merged", merged as u64);
        let aliases = aliases_table(&entities, &clusters)?;
        if clusters.is_empty() {
            return Ok(vec![ents.as_ref().clone(), rels.as_ref().clone(), aliases]);
        }

        let n = entities.titles.len();
        let (ends, outside) = relationship_ends(rels, &entities.titles)?;
        let p = plan(n, &clusters, &ends);
        ctx.count("relationships_merged", (rels.num_rows() - p.relationships.len() - p.self_loops) as u64);
        ctx.count("self_loops_dropped", p.self_loops as u64);
        Ok(vec![entities_table(ents, &entities, &p)?, relationships_table(rels, &entities, &p, &outside)?, aliases])
    }
}
