//! The index tables a query reads, loaded on first use and kept (one
//! `OnceLock` per table), so a method reads only the Parquet files it needs
//! and repeated queries through one [`crate::QueryEngine`] read nothing again.

pub mod passage_graph;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};

use anyhow::{bail, Context};
use arrow_array::cast::AsArray;
use arrow_array::types::Float32Type;
use arrow_array::{Array, RecordBatch};
use arrow_schema::DataType;
use graphrag_engine::schema::LEXICAL_ANALYZER_KEY;
use graphrag_engine::settings::{PprTuning, VectorStoreConfig};
use graphrag_engine::store::read_table;
use graphrag_engine::table::{column_of, floats, ints, string_lists, strings, IdNumbers, StringLists};
use graphrag_operations::lexical::{Bm25Index, Bm25Params, ANALYZER};
use graphrag_vectors::{Collection, EmbeddedStore};

use crate::embeddings::AnnSettings;
pub use crate::embeddings::{Field, Vectors};
use passage_graph::PassageGraph;

fn owned(v: Vec<&str>) -> Vec<String> {
    v.into_iter().map(str::to_string).collect()
}

/// An int64 column, or a default when the table has no such column (older
/// GraphRAG outputs lack some).
fn ints_or(t: &RecordBatch, table: &str, col: &str, default: i64) -> anyhow::Result<Vec<i64>> {
    if t.column_by_name(col).is_none() {
        return Ok(vec![default; t.num_rows()]);
    }
    ints(t, table, col)
}

/// A numeric column as f64 (double, float or int64 accepted), default when absent.
fn numbers_or(t: &RecordBatch, table: &str, col: &str, default: f64) -> anyhow::Result<Vec<f64>> {
    let Some(c) = t.column_by_name(col) else {
        return Ok(vec![default; t.num_rows()]);
    };
    match c.data_type() {
        DataType::Float64 => floats(t, table, col),
        DataType::Float32 => Ok(c.as_primitive::<Float32Type>().iter().map(|v| v.unwrap_or(0.0) as f64).collect()),
        DataType::Int64 => Ok(ints(t, table, col)?.into_iter().map(|v| v as f64).collect()),
        other => bail!("table `{table}`: column `{col}` is {other}, expected a number"),
    }
}

fn strings_or(t: &RecordBatch, table: &str, col: &str) -> anyhow::Result<Vec<String>> {
    if t.column_by_name(col).is_none() {
        return Ok(vec![String::new(); t.num_rows()]);
    }
    Ok(owned(strings(t, table, col)?))
}

/// An id-list column as numbers from `numbers`, empty lists when absent.
fn numbered_lists_or<'a>(
    t: &'a RecordBatch,
    table: &str,
    col: &str,
    numbers: &mut IdNumbers<'a>,
) -> anyhow::Result<Vec<Vec<u32>>> {
    if t.column_by_name(col).is_none() {
        return Ok(vec![Vec::new(); t.num_rows()]);
    }
    Ok(numbers.rows(&StringLists::new(t, table, col)?))
}

/// `human_readable_id`, or the row number when the column is missing.
fn short_ids(t: &RecordBatch, table: &str) -> anyhow::Result<Vec<i64>> {
    if t.column_by_name("human_readable_id").is_none() {
        return Ok((0..t.num_rows() as i64).collect());
    }
    ints(t, table, "human_readable_id")
}

fn index_of(ids: &[String]) -> HashMap<String, usize> {
    let mut m = HashMap::with_capacity(ids.len());
    for (i, id) in ids.iter().enumerate() {
        m.entry(id.clone()).or_insert(i);
    }
    m
}

/// entities + relationships, with the adjacency the rankings walk.
pub struct Graph {
    pub entity_id: Vec<String>,
    pub entity_hrid: Vec<i64>,
    pub title: Vec<String>,
    pub entity_type: Vec<String>,
    pub entity_description: Vec<String>,
    /// Entities whose description is not empty (none in a fast index).
    pub described_entities: usize,
    /// Text units of each entity, as indexes into `unit_ids`.
    pub entity_units: Vec<Vec<u32>>,
    pub degree: Vec<i64>,
    pub entity_by_id: HashMap<String, usize>,
    /// Entities by [`crate::context::title_key`] of their title and of
    /// each of their aliases (entity_aliases.parquet: the titles entity
    /// resolution merged into them).
    pub entity_by_key: HashMap<String, Vec<usize>>,
    /// Words of the longest title key.
    pub max_key_words: usize,

    pub rel_hrid: Vec<i64>,
    pub source: Vec<String>,
    pub target: Vec<String>,
    pub rel_description: Vec<String>,
    pub weight: Vec<f64>,
    pub combined_degree: Vec<i64>,
    /// Text units of each relationship, as indexes into `unit_ids`.
    pub rel_units: Vec<Vec<u32>>,
    /// The text unit ids the entities and relationships list, each once: a
    /// large index lists millions of ids, but tens of thousands distinct.
    pub unit_ids: Vec<String>,
    pub rel_by_id: HashMap<String, usize>,
    /// (source, target) entity indexes of each relationship.
    pub ends: Vec<(Option<u32>, Option<u32>)>,
    /// Relationship indexes of each entity.
    pub adjacency: Vec<Vec<u32>>,
}

impl Graph {
    fn load(
        entities: &RecordBatch,
        relationships: &RecordBatch,
        aliases: Option<&RecordBatch>,
    ) -> anyhow::Result<Graph> {
        let t = "entities";
        let entity_id = owned(strings(entities, t, "id")?);
        let title = owned(strings(entities, t, "title")?);
        let entity_by_title = index_of(&title);
        let n = entity_id.len();
        let r = "relationships";
        let source = owned(strings(relationships, r, "source")?);
        let target = owned(strings(relationships, r, "target")?);
        let mut adjacency = vec![Vec::new(); n];
        let ends: Vec<(Option<u32>, Option<u32>)> = source
            .iter()
            .zip(&target)
            .enumerate()
            .map(|(i, (s, g))| {
                let s = entity_by_title.get(s).map(|&x| x as u32);
                let g = entity_by_title.get(g).map(|&x| x as u32);
                for e in [s, g].into_iter().flatten() {
                    if adjacency[e as usize].last() != Some(&(i as u32)) {
                        adjacency[e as usize].push(i as u32);
                    }
                }
                (s, g)
            })
            .collect();
        let degree = match ints_or(entities, t, "degree", -1)? {
            d if d.iter().any(|&x| x < 0) => adjacency.iter().map(|a| a.len() as i64).collect(),
            d => d,
        };
        let combined_degree = match ints_or(relationships, r, "combined_degree", -1)? {
            c if c.iter().any(|&x| x < 0) => ends
                .iter()
                .map(|(s, g)| [s, g].iter().filter_map(|e| e.map(|e| degree[e as usize])).sum::<i64>())
                .collect(),
            c => c,
        };
        let rel_id = owned(strings(relationships, r, "id")?);
        let mut numbers = IdNumbers::default();
        let entity_units = numbered_lists_or(entities, t, "text_unit_ids", &mut numbers)?;
        let rel_units = numbered_lists_or(relationships, r, "text_unit_ids", &mut numbers)?;
        let entity_by_id = index_of(&entity_id);
        let mut names: Vec<(&str, usize)> = title.iter().enumerate().map(|(e, t)| (t.as_str(), e)).collect();
        if let Some(a) = aliases {
            let n = "entity_aliases";
            for (alias, id) in strings(a, n, "alias")?.into_iter().zip(strings(a, n, "entity_id")?) {
                if let Some(&e) = entity_by_id.get(id) {
                    names.push((alias, e));
                }
            }
        }
        let mut entity_by_key: HashMap<String, Vec<usize>> = HashMap::new();
        let mut max_key_words = 0;
        for (name, e) in names {
            let key = crate::context::title_key(name);
            if !key.is_empty() {
                max_key_words = max_key_words.max(key.split(' ').count());
                let found = entity_by_key.entry(key).or_default();
                if !found.contains(&e) {
                    found.push(e);
                }
            }
        }
        let entity_description = strings_or(entities, t, "description")?;
        Ok(Graph {
            entity_by_key,
            max_key_words,
            entity_hrid: short_ids(entities, t)?,
            entity_type: strings_or(entities, t, "type")?,
            described_entities: entity_description.iter().filter(|d| !d.trim().is_empty()).count(),
            entity_description,
            entity_units,
            degree,
            entity_by_id,
            entity_id,
            title,
            rel_hrid: short_ids(relationships, r)?,
            rel_description: strings_or(relationships, r, "description")?,
            weight: numbers_or(relationships, r, "weight", 1.0)?,
            combined_degree,
            rel_units,
            unit_ids: numbers.into_ids(),
            rel_by_id: index_of(&rel_id),
            source,
            target,
            ends,
            adjacency,
        })
    }

    /// Whether most entities have a description: an LLM-built index, whose
    /// entity and relationship rows carry evidence of their own (a fast
    /// index's hold titles only).
    pub fn is_described(&self) -> bool {
        self.described_entities * 2 > self.title.len()
    }

    /// Text unit ids by their index in `unit_ids`.
    pub fn unit_id(&self, unit: u32) -> &str {
        &self.unit_ids[unit as usize]
    }

    pub fn view(&self) -> crate::context::RelView<'_> {
        crate::context::RelView {
            ends: &self.ends,
            source: &self.source,
            target: &self.target,
            rank: &self.combined_degree,
            adjacency: &self.adjacency,
        }
    }
}

pub struct TextUnits {
    pub hrid: Vec<i64>,
    /// The id of each row (`by_id` the other way).
    pub id: Vec<String>,
    pub text: Vec<String>,
    /// Tokens of each text (`n_tokens`; a quarter of its bytes when the
    /// table has no such column).
    pub n_tokens: Vec<usize>,
    pub by_id: HashMap<String, usize>,
}

impl TextUnits {
    fn load(t: &RecordBatch) -> anyhow::Result<TextUnits> {
        let id = owned(strings(t, "text_units", "id")?);
        let text = owned(strings(t, "text_units", "text")?);
        let n_tokens = ints_or(t, "text_units", "n_tokens", -1)?
            .into_iter()
            .zip(&text)
            .map(|(n, text)| if n >= 0 { n as usize } else { text.len() / 4 })
            .collect();
        let by_id = index_of(&id);
        Ok(TextUnits { hrid: short_ids(t, "text_units")?, id, text, n_tokens, by_id })
    }

    /// How many units of `ranking`, from its first, fill `budget` tokens.
    pub fn fitting(&self, ranking: impl IntoIterator<Item = usize>, budget: usize) -> usize {
        let mut used = 0;
        let mut n = 0;
        for u in ranking {
            used += self.n_tokens[u];
            n += 1;
            if used >= budget {
                break;
            }
        }
        n
    }
}

/// BM25 over the text units; its documents are the rows of [`TextUnits`].
pub struct Lexical {
    pub bm25: Bm25Index,
}

impl Lexical {
    /// From lexical_index.parquet; `None` when its rows are not the text
    /// units' in order (a table from another index).
    fn load(t: &RecordBatch, units: &TextUnits) -> anyhow::Result<Option<Lexical>> {
        let n = "lexical_index";
        let ids = strings(t, n, "id")?;
        if ids.len() != units.hrid.len() || ids.iter().enumerate().any(|(row, id)| units.by_id.get(*id) != Some(&row)) {
            return Ok(None);
        }
        let lengths = ints(t, n, "n_terms")?;
        let terms = StringLists::new(t, n, "terms")?;
        let counts_col = column_of(t, n, "term_counts")?;
        let Some(counts) = counts_col.as_list_opt::<i32>() else {
            bail!("table `{n}`: column `term_counts` is {}, expected list<int64>", counts_col.data_type());
        };
        let Some(values) = counts.values().as_primitive_opt::<arrow_array::types::Int64Type>() else {
            bail!("table `{n}`: column `term_counts` is {}, expected list<int64>", counts_col.data_type());
        };
        let offsets = counts.value_offsets();
        let mut bm25 = Bm25Index::new(Bm25Params::default());
        for (row, doc_terms) in terms.rows().enumerate() {
            let tf = &values.values()[offsets[row] as usize..offsets[row + 1] as usize];
            if tf.len() != doc_terms.len() {
                bail!("table `{n}`: row {row} lists {} terms but {} counts", doc_terms.len(), tf.len());
            }
            bm25.add(doc_terms.zip(tf.iter().map(|&c| c.clamp(0, u32::MAX as i64) as u32)), lengths[row] as u32);
        }
        Ok(Some(Lexical { bm25 }))
    }

    /// Built from the text units' texts (an index made before graphrag-rs
    /// had a lexical index, or by Microsoft GraphRAG).
    fn build(units: &TextUnits) -> Lexical {
        Lexical { bm25: Bm25Index::of_texts(&units.text) }
    }

    /// Text units sharing a term with `query`, best first, with BM25 scores.
    pub fn search(&self, query: &str) -> Vec<(usize, f64)> {
        self.bm25.search(query)
    }
}

pub struct Reports {
    pub id: Vec<String>,
    pub hrid: Vec<i64>,
    pub community: Vec<i64>,
    pub level: Vec<i64>,
    pub parent: Vec<i64>,
    pub title: Vec<String>,
    pub summary: Vec<String>,
    pub full_content: Vec<String>,
    pub rank: Vec<f64>,
    pub by_id: HashMap<String, usize>,
    pub by_community: HashMap<i64, usize>,
}

impl Reports {
    fn load(t: &RecordBatch) -> anyhow::Result<Reports> {
        let n = "community_reports";
        let id = owned(strings(t, n, "id")?);
        let community = ints(t, n, "community")?;
        let mut by_community = HashMap::new();
        for (i, c) in community.iter().enumerate() {
            by_community.entry(*c).or_insert(i);
        }
        Ok(Reports {
            hrid: short_ids(t, n)?,
            level: ints_or(t, n, "level", 0)?,
            parent: ints_or(t, n, "parent", -1)?,
            title: strings_or(t, n, "title")?,
            summary: strings_or(t, n, "summary")?,
            full_content: owned(strings(t, n, "full_content")?),
            rank: numbers_or(t, n, "rank", 0.0)?,
            by_id: index_of(&id),
            by_community,
            community,
            id,
        })
    }

    pub fn len(&self) -> usize {
        self.id.len()
    }

    pub fn max_level(&self) -> Option<i64> {
        self.level.iter().copied().max()
    }
}

/// Which communities each entity belongs to (communities.parquet).
pub struct Communities {
    pub community: Vec<i64>,
    pub level: Vec<i64>,
    /// entity id → community row indexes.
    pub of_entity: HashMap<String, Vec<usize>>,
}

impl Communities {
    fn load(t: &RecordBatch) -> anyhow::Result<Communities> {
        let n = "communities";
        let community = ints(t, n, "community")?;
        let level = ints_or(t, n, "level", 0)?;
        let mut of_entity: HashMap<String, Vec<usize>> = HashMap::new();
        for (i, ents) in string_lists(t, n, "entity_ids")?.into_iter().enumerate() {
            for e in ents {
                of_entity.entry(e).or_default().push(i);
            }
        }
        Ok(Communities { community, level, of_entity })
    }
}

/// Claims (covariates.parquet), by subject.
pub struct Claims {
    pub hrid: Vec<i64>,
    pub object: Vec<String>,
    pub claim_type: Vec<String>,
    pub status: Vec<String>,
    pub start_date: Vec<String>,
    pub end_date: Vec<String>,
    pub description: Vec<String>,
    pub by_subject: HashMap<String, Vec<usize>>,
}

impl Claims {
    fn empty() -> Claims {
        Claims {
            hrid: Vec::new(),
            object: Vec::new(),
            claim_type: Vec::new(),
            status: Vec::new(),
            start_date: Vec::new(),
            end_date: Vec::new(),
            description: Vec::new(),
            by_subject: HashMap::new(),
        }
    }

    fn load(t: &RecordBatch) -> anyhow::Result<Claims> {
        let n = "covariates";
        let subject = strings_or(t, n, "subject_id")?;
        let mut by_subject: HashMap<String, Vec<usize>> = HashMap::new();
        for (i, s) in subject.iter().enumerate() {
            by_subject.entry(s.clone()).or_default().push(i);
        }
        Ok(Claims {
            hrid: short_ids(t, n)?,
            object: strings_or(t, n, "object_id")?,
            claim_type: strings_or(t, n, "type")?,
            status: strings_or(t, n, "status")?,
            start_date: strings_or(t, n, "start_date")?,
            end_date: strings_or(t, n, "end_date")?,
            description: strings_or(t, n, "description")?,
            by_subject,
        })
    }
}

/// The document title of each text unit, by the unit's `human_readable_id`
/// (the `id` of a context's source rows).
pub struct UnitDocuments {
    pub title_of_unit: HashMap<i64, String>,
}

impl UnitDocuments {
    /// GraphRAG 3.x text units name their document in `document_id`, older
    /// outputs in the list `document_ids` (whose first entry is taken).
    fn load(units: &RecordBatch, documents: &RecordBatch) -> anyhow::Result<UnitDocuments> {
        let doc_ids = owned(strings(documents, "documents", "id")?);
        let titles = owned(strings(documents, "documents", "title")?);
        let title_of_doc: HashMap<&str, &str> =
            doc_ids.iter().map(String::as_str).zip(titles.iter().map(String::as_str)).collect();
        let unit_docs: Vec<String> = if units.column_by_name("document_id").is_some() {
            owned(strings(units, "text_units", "document_id")?)
        } else if units.column_by_name("document_ids").is_some() {
            string_lists(units, "text_units", "document_ids")?
                .into_iter()
                .map(|l| l.into_iter().next().unwrap_or_default())
                .collect()
        } else {
            vec![String::new(); units.num_rows()]
        };
        let title_of_unit = short_ids(units, "text_units")?
            .into_iter()
            .zip(&unit_docs)
            .filter_map(|(hrid, doc)| title_of_doc.get(doc.as_str()).map(|t| (hrid, t.to_string())))
            .collect();
        Ok(UnitDocuments { title_of_unit })
    }
}

/// The output folder of an index, its tables loaded on first use.
pub struct Index {
    pub root: PathBuf,
    pub output: PathBuf,
    ann: AnnSettings,
    graph: OnceLock<Arc<Graph>>,
    text_units: OnceLock<Arc<TextUnits>>,
    reports: OnceLock<Arc<Reports>>,
    communities: OnceLock<Arc<Communities>>,
    claims: OnceLock<Arc<Claims>>,
    unit_documents: OnceLock<Arc<UnitDocuments>>,
    lexical: OnceLock<Arc<Lexical>>,
    entity_mentions: OnceLock<Arc<Vec<usize>>>,
    passage_graph: OnceLock<Arc<PassageGraph>>,
    /// `ppr_search.title_edge_weight`: the passage graph's title edges.
    title_edge_weight: f64,
    /// `ppr_search.title_seed_weight` > 0: the passage graph knows the units' titles.
    title_seeds: bool,
    vectors: [OnceLock<Arc<Vectors>>; 4],
    /// Row counts of the source tables, read from Parquet metadata only.
    rows: [OnceLock<usize>; 4],
}

fn cached<T>(cell: &OnceLock<Arc<T>>, load: impl FnOnce() -> anyhow::Result<T>) -> anyhow::Result<Arc<T>> {
    if let Some(v) = cell.get() {
        return Ok(v.clone());
    }
    let v = Arc::new(load()?);
    Ok(cell.get_or_init(|| v).clone())
}

impl Index {
    pub fn new(root: &Path, output: &Path, vector_store: &VectorStoreConfig, ppr: &PprTuning) -> Index {
        Index {
            root: root.to_path_buf(),
            output: output.to_path_buf(),
            ann: AnnSettings { threshold: vector_store.ann_threshold, ef_search: vector_store.ann_ef_search },
            graph: OnceLock::new(),
            text_units: OnceLock::new(),
            reports: OnceLock::new(),
            communities: OnceLock::new(),
            claims: OnceLock::new(),
            unit_documents: OnceLock::new(),
            lexical: OnceLock::new(),
            entity_mentions: OnceLock::new(),
            passage_graph: OnceLock::new(),
            title_edge_weight: ppr.title_edge_weight,
            title_seeds: ppr.title_seed_weight > 0.0,
            vectors: Default::default(),
            rows: Default::default(),
        }
    }

    pub fn table_path(&self, name: &str) -> PathBuf {
        graphrag_engine::store::table_path(&self.output, name, true)
    }

    /// A published table; a missing file is an error saying how to build it.
    fn read(&self, name: &str) -> anyhow::Result<RecordBatch> {
        let path = self.table_path(name);
        if !path.exists() {
            bail!(
                "{} not found: the index has no `{name}` table; run `graphrag-rs index --root {}` (a pipeline that builds it)",
                path.display(),
                self.root.display()
            );
        }
        read_table(&path).with_context(|| {
            format!(
                "the index's table `{name}` cannot be read: `graphrag-rs index --root {}` builds the index anew (cached model answers are reused)",
                self.root.display()
            )
        })
    }

    pub fn has_table(&self, name: &str) -> bool {
        self.table_path(name).exists()
    }

    pub fn graph(&self) -> anyhow::Result<Arc<Graph>> {
        cached(&self.graph, || {
            // Indexes built before entity resolution have no aliases table.
            let aliases = self.has_table("entity_aliases").then(|| self.read("entity_aliases")).transpose()?;
            Graph::load(&self.read("entities")?, &self.read("relationships")?, aliases.as_ref())
        })
    }

    pub fn text_units(&self) -> anyhow::Result<Arc<TextUnits>> {
        cached(&self.text_units, || TextUnits::load(&self.read("text_units")?))
    }

    pub fn reports(&self) -> anyhow::Result<Arc<Reports>> {
        cached(&self.reports, || Reports::load(&self.read("community_reports")?))
    }

    pub fn communities(&self) -> anyhow::Result<Arc<Communities>> {
        cached(&self.communities, || Communities::load(&self.read("communities")?))
    }

    /// Claims; an index without covariates.parquet (claims off) has none.
    pub fn claims(&self) -> anyhow::Result<Arc<Claims>> {
        cached(&self.claims, || {
            if self.has_table("covariates") {
                Claims::load(&self.read("covariates")?)
            } else {
                Ok(Claims::empty())
            }
        })
    }

    pub fn unit_documents(&self) -> anyhow::Result<Arc<UnitDocuments>> {
        cached(&self.unit_documents, || UnitDocuments::load(&self.read("text_units")?, &self.read("documents")?))
    }

    /// BM25 over the text units: lexical_index.parquet, or, for an index
    /// without one (built before graphrag-rs had it, or by Microsoft
    /// GraphRAG) or with terms of another analyzer, built in memory from
    /// text_units now, with a warning.
    pub fn lexical(&self) -> anyhow::Result<Arc<Lexical>> {
        cached(&self.lexical, || {
            let units = self.text_units()?;
            let path = self.table_path("lexical_index");
            let add_step =
                "add the `lexical_index` step of the shipped workflows/*.yaml to the project's pipeline and ";
            let (why, fix) = if path.exists() {
                let t = self.read("lexical_index")?;
                match t.schema().metadata().get(LEXICAL_ANALYZER_KEY) {
                    Some(a) if a == ANALYZER => match Lexical::load(&t, &units)? {
                        Some(lexical) => return Ok(lexical),
                        None => (format!("{} does not list this index's text units", path.display()), add_step),
                    },
                    other => (
                        format!(
                            "{} holds the terms of analyzer `{}`, this build's is `{ANALYZER}`",
                            path.display(),
                            other.map_or("(unnamed)", String::as_str)
                        ),
                        "",
                    ),
                }
            } else {
                (
                    format!("{} not found (an index built before graphrag-rs had a lexical index)", path.display()),
                    add_step,
                )
            };
            let started = std::time::Instant::now();
            let lexical = Lexical::build(&units);
            tracing::warn!(
                "{why}: built the BM25 index of {} text units in memory ({:.0} ms); to keep it, {fix}run `graphrag-rs update --root {}`",
                units.hrid.len(),
                started.elapsed().as_secs_f64() * 1e3,
                self.root.display()
            );
            Ok(lexical)
        })
    }

    /// Per entity, the text units that hold every word of its name, at
    /// least those it lists (`ppr_search.specificity: words`), counted once.
    pub fn entity_mentions(&self) -> anyhow::Result<Arc<Vec<usize>>> {
        cached(&self.entity_mentions, || {
            let (pg, g, lexical) = (self.passage_graph()?, self.graph()?, self.lexical()?);
            Ok((0..pg.entities)
                .map(|e| passage_graph::mention_units(pg.entity_units[e].len(), &g.title[e], &lexical.bm25))
                .collect())
        })
    }

    /// The graph of entities and text units the graph walks use.
    pub fn passage_graph(&self) -> anyhow::Result<Arc<PassageGraph>> {
        cached(&self.passage_graph, || {
            let titles = (self.title_edge_weight != 1.0 || self.title_seeds) && self.has_table("documents");
            let docs = if titles { Some(self.unit_documents()?) } else { None };
            Ok(PassageGraph::build(&*self.graph()?, &*self.text_units()?, docs.as_deref(), self.title_edge_weight))
        })
    }

    /// Number of rows of a field's source table (Parquet footer only).
    fn source_rows(&self, field: Field) -> usize {
        *self.rows[crate::embeddings::slot(field)].get_or_init(|| {
            let path = self.table_path(field.table());
            std::fs::File::open(&path)
                .ok()
                .and_then(|f| parquet::file::reader::SerializedFileReader::new(f).ok())
                .map(|r| {
                    use parquet::file::reader::FileReader;
                    r.metadata().file_metadata().num_rows().max(0) as usize
                })
                .unwrap_or(0)
        })
    }

    /// The vectors of `field`. A missing file, or an empty one while its source
    /// table has rows, is an error saying which setting to change.
    pub fn vectors(&self, field: Field) -> anyhow::Result<Arc<Vectors>> {
        let v = self.read_vectors(field)?;
        if v.store.is_none() && self.source_rows(field) > 0 {
            bail!(
                "{} is empty: `{}` was not embedded when the index was built; add `{}` to embed_text.names in settings.yaml and re-run `graphrag-rs index --root {}`",
                v.path.display(),
                field.name(),
                field.name(),
                self.root.display()
            );
        }
        Ok(v)
    }

    /// The vectors file of `field` as it is (read once), empty or not.
    fn read_vectors(&self, field: Field) -> anyhow::Result<Arc<Vectors>> {
        cached(&self.vectors[crate::embeddings::slot(field)], || {
            let path = self.table_path(&format!("embeddings.{}", field.name()));
            if !path.exists() {
                bail!(
                    "{} not found: this index has no `{}` vectors; add `{}` to embed_text.names in settings.yaml (a project created by an older graphrag-rs may also lack the embed steps in workflows/*.yaml: `graphrag-rs init --force` refreshes them) and re-run `graphrag-rs index --root {}`",
                    path.display(),
                    field.name(),
                    field.name(),
                    self.root.display()
                );
            }
            Vectors::load(field, &path, &self.ann)
        })
    }

    /// The vectors of `field`; for an index built by Microsoft GraphRAG, which
    /// keeps its vectors in LanceDB (not read here), the field's texts are
    /// embedded now with `embed` (the LLM layer caches them, so only the
    /// first query of an index pays).
    pub fn vectors_or_embed(
        &self,
        field: Field,
        embed: impl FnOnce(&[String]) -> anyhow::Result<Vec<Vec<f32>>>,
    ) -> anyhow::Result<Arc<Vectors>> {
        let path = self.table_path(&format!("embeddings.{}", field.name()));
        if path.exists() || !self.output.join("lancedb").is_dir() {
            return self.vectors(field);
        }
        cached(&self.vectors[crate::embeddings::slot(field)], || {
            let table = read_table(&self.table_path(field.table()))?;
            let (ids, texts) = graphrag_engine::embedded_fields::embeddable(field, &table)?;
            tracing::info!(
                "no {} (a Microsoft GraphRAG index keeps its vectors in LanceDB): embedding {} texts of {} now",
                path.display(),
                texts.len(),
                field.table()
            );
            if ids.is_empty() {
                return Ok(Vectors::whole(None, path.clone()));
            }
            let collection = Collection::new(ids, embed(&texts)?)?;
            Ok(Vectors::whole(
                Some(EmbeddedStore::new(collection, self.ann.threshold, self.ann.params())),
                path.clone(),
            ))
        })
    }

    /// Reads every table and vector file the index has, so that no query
    /// reads the output folder later (a server loads an index this way while
    /// it holds the writer lock, so that what it serves is one publication).
    pub fn load_all(&self) -> anyhow::Result<()> {
        if self.has_table("entities") && self.has_table("relationships") {
            self.graph()?;
        }
        if self.has_table("text_units") {
            self.text_units()?;
            // BM25 terms (read, or rebuilt from the text units when missing or stale).
            self.lexical()?;
            if self.has_table("documents") {
                self.unit_documents()?;
            }
            if self.has_table("entities") && self.has_table("relationships") {
                self.passage_graph()?;
            }
        }
        if self.has_table("community_reports") {
            self.reports()?;
        }
        if self.has_table("communities") {
            self.communities()?;
        }
        self.claims()?;
        for field in
            [Field::TextUnitText, Field::EntityDescription, Field::RelationshipDescription, Field::CommunityFullContent]
        {
            // Read as they are: a field that was not embedded (the fast
            // method's relationships have no descriptions, so their file is
            // empty) is an error only for a query that needs it.
            if self.table_path(&format!("embeddings.{}", field.name())).exists() {
                self.read_vectors(field)?;
            }
            self.source_rows(field);
        }
        Ok(())
    }

    /// Like [`Index::vectors`] but `None` instead of an error when the field
    /// was not embedded (for optional retrieval paths).
    pub fn vectors_opt(&self, field: Field) -> Option<Arc<Vectors>> {
        self.vectors(field).ok().filter(|v| v.store.is_some())
    }
}
