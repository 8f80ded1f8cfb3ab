//! What a query's context was built from ([`crate::QueryResult::context_records`]):
//! the rows of each context table as typed records (ids as numbers, the
//! other cells as the context shows them) and what the method did. JSON is
//! made from them only where it leaves the process ([`ContextRecords::to_json`]:
//! the server's responses, the CLI's output, Python's return values), in
//! GraphRAG's shape: each table a list of objects keyed by its header.

use graphrag_engine::settings::PprWalk;
use serde::{Serialize, Serializer};
use serde_json::{json, Map, Value};

use crate::context::PackedTable;

/// One text unit of a context's Sources table.
#[derive(Debug, Clone, PartialEq)]
pub struct SourceRecord {
    /// The text unit's human_readable_id.
    pub id: i64,
    /// Its text as the context shows it (on one line, `|` written `¦`).
    pub text: String,
}

/// One entity of a context's Entities table.
#[derive(Debug, Clone, PartialEq)]
pub struct EntityRecord {
    /// The entity's human_readable_id.
    pub id: i64,
    /// Its title.
    pub entity: String,
    /// Its type (hybrid and mix search's table only).
    pub entity_type: Option<String>,
    /// Its description.
    pub description: String,
    /// GraphRAG's `number of relationships` cell (local search's table).
    pub number_of_relationships: Option<String>,
    /// LightRAG's `rank` cell, its number of relationships (hybrid and mix).
    pub rank: Option<String>,
}

/// One relationship of a context's Relationships table.
#[derive(Debug, Clone, PartialEq)]
pub struct RelationshipRecord {
    /// The relationship's human_readable_id.
    pub id: i64,
    /// The source entity's title.
    pub source: String,
    /// The target entity's title.
    pub target: String,
    /// Its description.
    pub description: String,
    /// The weight cell (local search: GraphRAG's `str(weight)`, empty for 0).
    pub weight: String,
    /// GraphRAG's `links` cell, when the table has that column (local search).
    pub links: Option<String>,
    /// LightRAG's `rank` cell, the ends' combined degree (hybrid and mix).
    pub rank: Option<String>,
}

/// One claim of a context's Claims table (local search).
#[derive(Debug, Clone, PartialEq)]
pub struct ClaimRecord {
    /// The claim's human_readable_id.
    pub id: i64,
    /// The subject entity's title.
    pub entity: String,
    /// The object entity's title (GraphRAG's `object_id`).
    pub object_id: String,
    /// The claim's type (the `type` column).
    pub claim_type: String,
    /// TRUE, FALSE or SUSPECTED.
    pub status: String,
    /// When the claimed event began, as extracted.
    pub start_date: String,
    /// When it ended, as extracted.
    pub end_date: String,
    /// The claim's description.
    pub description: String,
}

/// One community report of a context's Reports table.
#[derive(Debug, Clone, PartialEq)]
pub struct ReportRecord {
    /// The report's human_readable_id.
    pub id: i64,
    /// The report's title.
    pub title: String,
    /// Its full content.
    pub content: String,
    /// GraphRAG's `occurrence weight` cell (global search's batches).
    pub occurrence_weight: Option<String>,
    /// The report's rank cell (global search's batches).
    pub rank: Option<String>,
}

/// A seed entity of a graph walk (PPR search) and its weight.
#[derive(Debug, Clone, PartialEq)]
pub struct SeedRecord {
    /// The entity's human_readable_id.
    pub id: i64,
    /// Its title.
    pub entity: String,
    /// Its weight in the walk's start (personalisation) vector.
    pub weight: f64,
}

/// A key point of global search's map step that reached the reduce.
#[derive(Debug, Clone, PartialEq)]
pub struct PointRecord {
    /// The 1-based batch it came from (GraphRAG's analyst).
    pub analyst: usize,
    /// Its importance score (0–100) as the map answer gave it.
    pub score: f64,
    /// The point itself.
    pub description: String,
}

/// A follow-up question of a DRIFT search.
#[derive(Debug, Clone, PartialEq)]
pub struct FollowUpRecord {
    /// The follow-up question.
    pub query: String,
    /// The score its answer was given (`None`: not answered).
    pub score: Option<f64>,
    /// Whether it was answered.
    pub answered: bool,
    /// Whether it was asked (answered or skipped).
    pub asked: bool,
}

/// The keywords of a hybrid or mix search.
#[derive(Debug, Clone, PartialEq)]
pub struct KeywordsRecord {
    /// The themes searched among relationships (LightRAG's high-level keywords).
    pub high_level: Vec<String>,
    /// The names searched among entities (LightRAG's low-level keywords).
    pub low_level: Vec<String>,
    /// `chat model`, or `question words` when the model gave none.
    pub from: &'static str,
}

/// What the rerank of a query's text chunks did.
#[derive(Debug, Clone, PartialEq)]
pub struct RerankRecord {
    /// The rerank model's id (`rerank.model_id`).
    pub model: String,
    /// How many chunks it reordered (0 when it failed).
    pub reranked: usize,
    /// Why it failed (the chunks then keep their retrieval order).
    pub error: Option<String>,
}

/// What a method adds to its context's tables.
#[derive(Debug, Clone, Default, PartialEq)]
pub enum MethodRecords {
    /// Local search: the tables alone.
    #[default]
    Local,
    /// Basic, dense and BM25 search.
    Basic {
        /// The ranking used (`dense`, `bm25`, or their fusion).
        retrieval: &'static str,
    },
    /// PPR search.
    Ppr {
        /// The walk's seed entities.
        seeds: Vec<SeedRecord>,
        /// The walk (`ppr_search.walk`).
        walk: PprWalk,
    },
    /// Global search.
    Global {
        /// How many batches of reports the map step is given.
        batches: usize,
        /// How the reports were chosen: `dynamic`, or the levels used.
        community_selection: String,
        /// The community level used.
        community_level: i64,
        /// The points the reduce was given, once the map step ran.
        points: Option<Vec<PointRecord>>,
    },
    /// DRIFT search with a chat model.
    Drift {
        /// The question as the query expansion (HyDE) rewrote it.
        expanded_query: Option<String>,
        /// The follow-up questions, in the order they were proposed.
        follow_ups: Vec<FollowUpRecord>,
        /// How many answers the reduce was given.
        intermediate_answers: usize,
        /// The community level used.
        community_level: i64,
    },
    /// DRIFT search without a chat model: its local context of the question.
    DriftPrimer {
        /// The reports the primer would read.
        primer_reports: Vec<ReportRecord>,
    },
    /// Hybrid and mix search.
    Keyword {
        /// The keywords searched for.
        keywords: KeywordsRecord,
    },
}

/// The records of a query's context: each table the context holds (`None`:
/// the method makes no such table) and what the method did.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ContextRecords {
    /// The Entities table (local, hybrid and mix search).
    pub entities: Option<Vec<EntityRecord>>,
    /// The Relationships table (local, hybrid and mix search).
    pub relationships: Option<Vec<RelationshipRecord>>,
    /// The Claims table (local search).
    pub claims: Option<Vec<ClaimRecord>>,
    /// The Sources table: text units (every method but global and DRIFT's reduce).
    pub sources: Option<Vec<SourceRecord>>,
    /// The Reports tables (local, global and DRIFT search).
    pub reports: Option<Vec<ReportRecord>>,
    /// What the method adds.
    pub method: MethodRecords,
    /// What the rerank did, when the query reranked its chunks.
    pub rerank: Option<RerankRecord>,
}

impl ContextRecords {
    /// The ids of the Sources table's text units, in context order (none
    /// when the method has no Sources table).
    pub fn source_ids(&self) -> Vec<i64> {
        self.sources.iter().flatten().map(|s| s.id).collect()
    }

    /// The records as JSON: one key per table (a list of objects keyed by
    /// the table's header, every cell a string) and per detail of the method.
    pub fn to_json(&self) -> Value {
        let mut m = Map::new();
        let mut put = |key: &str, value: Value| {
            m.insert(key.to_string(), value);
        };
        if let Some(rows) = &self.entities {
            put("entities", Value::Array(rows.iter().map(EntityRecord::to_json).collect()));
        }
        if let Some(rows) = &self.relationships {
            put("relationships", Value::Array(rows.iter().map(RelationshipRecord::to_json).collect()));
        }
        if let Some(rows) = &self.claims {
            put("claims", Value::Array(rows.iter().map(ClaimRecord::to_json).collect()));
        }
        if let Some(rows) = &self.sources {
            put("sources", Value::Array(rows.iter().map(SourceRecord::to_json).collect()));
        }
        if let Some(rows) = &self.reports {
            put("reports", reports_json(rows));
        }
        match &self.method {
            MethodRecords::Local => {}
            MethodRecords::Basic { retrieval } => put("retrieval", json!(retrieval)),
            MethodRecords::Ppr { seeds, walk } => {
                put(
                    "seeds",
                    seeds
                        .iter()
                        .map(|s| json!({"id": s.id.to_string(), "entity": s.entity, "weight": s.weight}))
                        .collect(),
                );
                put("walk", json!(walk));
            }
            MethodRecords::Global { batches, community_selection, community_level, points } => {
                put("batches", json!(batches));
                put("community_selection", json!(community_selection));
                put("community_level", json!(community_level));
                if let Some(points) = points {
                    put(
                        "points",
                        points
                            .iter()
                            .map(|p| json!({"analyst": p.analyst, "score": p.score, "description": p.description}))
                            .collect(),
                    );
                }
            }
            MethodRecords::Drift { expanded_query, follow_ups, intermediate_answers, community_level } => {
                put("expanded_query", json!(expanded_query));
                put(
                    "follow_ups",
                    follow_ups
                        .iter()
                        .map(|a| json!({"query": a.query, "score": a.score, "answered": a.answered, "asked": a.asked}))
                        .collect(),
                );
                put("intermediate_answers", json!(intermediate_answers));
                put("community_level", json!(community_level));
            }
            MethodRecords::DriftPrimer { primer_reports } => put("primer_reports", reports_json(primer_reports)),
            MethodRecords::Keyword { keywords } => put(
                "keywords",
                json!({"high_level": keywords.high_level, "low_level": keywords.low_level, "from": keywords.from}),
            ),
        }
        if let Some(r) = &self.rerank {
            let mut rerank = json!({ "model": r.model, "reranked": r.reranked });
            if let Some(error) = &r.error {
                rerank["error"] = json!(error);
            }
            put("rerank", rerank);
        }
        Value::Object(m)
    }
}

/// Serialised as [`ContextRecords::to_json`].
impl Serialize for ContextRecords {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        self.to_json().serialize(serializer)
    }
}

fn reports_json(rows: &[ReportRecord]) -> Value {
    Value::Array(rows.iter().map(ReportRecord::to_json).collect())
}

/// A JSON object of string cells, in the given (key, cell) pairs; `None`
/// cells (a column the table does not have) left out.
fn cells<'a>(pairs: impl IntoIterator<Item = (&'a str, Option<&'a str>)>) -> Value {
    Value::Object(pairs.into_iter().filter_map(|(k, v)| Some((k.to_string(), Value::String(v?.to_string())))).collect())
}

impl SourceRecord {
    fn to_json(&self) -> Value {
        json!({"id": self.id.to_string(), "text": self.text})
    }
}

impl EntityRecord {
    fn to_json(&self) -> Value {
        let id = self.id.to_string();
        cells([
            ("id", Some(id.as_str())),
            ("entity", Some(self.entity.as_str())),
            ("type", self.entity_type.as_deref()),
            ("description", Some(self.description.as_str())),
            ("number of relationships", self.number_of_relationships.as_deref()),
            ("rank", self.rank.as_deref()),
        ])
    }
}

impl RelationshipRecord {
    fn to_json(&self) -> Value {
        let id = self.id.to_string();
        cells([
            ("id", Some(id.as_str())),
            ("source", Some(self.source.as_str())),
            ("target", Some(self.target.as_str())),
            ("description", Some(self.description.as_str())),
            ("weight", Some(self.weight.as_str())),
            ("links", self.links.as_deref()),
            ("rank", self.rank.as_deref()),
        ])
    }
}

impl ClaimRecord {
    fn to_json(&self) -> Value {
        let id = self.id.to_string();
        cells([
            ("id", Some(id.as_str())),
            ("entity", Some(self.entity.as_str())),
            ("object_id", Some(self.object_id.as_str())),
            ("type", Some(self.claim_type.as_str())),
            ("status", Some(self.status.as_str())),
            ("start_date", Some(self.start_date.as_str())),
            ("end_date", Some(self.end_date.as_str())),
            ("description", Some(self.description.as_str())),
        ])
    }
}

impl ReportRecord {
    fn to_json(&self) -> Value {
        let id = self.id.to_string();
        cells([
            ("id", Some(id.as_str())),
            ("title", Some(self.title.as_str())),
            ("occurrence weight", self.occurrence_weight.as_deref()),
            ("content", Some(self.content.as_str())),
            ("rank", self.rank.as_deref()),
        ])
    }
}

/// The rows of a packed table, each as a lookup of its cells by column.
fn rows(table: &PackedTable) -> impl Iterator<Item = Row<'_>> {
    table.rows.iter().map(move |row| Row { header: &table.header, row })
}

/// One packed row, its cells looked up by column name.
struct Row<'a> {
    header: &'a [String],
    row: &'a [String],
}

impl Row<'_> {
    fn get(&self, column: &str) -> Option<String> {
        self.header.iter().position(|h| h == column).and_then(|i| self.row.get(i)).cloned()
    }

    fn cell(&self, column: &str) -> String {
        self.get(column).unwrap_or_default()
    }

    /// The `id` cell: the row's human_readable_id, which the table was
    /// packed from (an integer, so it always reads back).
    fn id(&self) -> i64 {
        self.get("id").and_then(|id| id.parse().ok()).unwrap_or_default()
    }
}

/// The Sources table's records.
pub(crate) fn sources(table: &PackedTable) -> Vec<SourceRecord> {
    rows(table).map(|r| SourceRecord { id: r.id(), text: r.cell("text") }).collect()
}

/// The Entities table's records.
pub(crate) fn entities(table: &PackedTable) -> Vec<EntityRecord> {
    rows(table)
        .map(|r| EntityRecord {
            id: r.id(),
            entity: r.cell("entity"),
            entity_type: r.get("type"),
            description: r.cell("description"),
            number_of_relationships: r.get("number of relationships"),
            rank: r.get("rank"),
        })
        .collect()
}

/// The Relationships table's records.
pub(crate) fn relationships(table: &PackedTable) -> Vec<RelationshipRecord> {
    rows(table)
        .map(|r| RelationshipRecord {
            id: r.id(),
            source: r.cell("source"),
            target: r.cell("target"),
            description: r.cell("description"),
            weight: r.cell("weight"),
            links: r.get("links"),
            rank: r.get("rank"),
        })
        .collect()
}

/// The Claims table's records.
pub(crate) fn claims(table: &PackedTable) -> Vec<ClaimRecord> {
    rows(table)
        .map(|r| ClaimRecord {
            id: r.id(),
            entity: r.cell("entity"),
            object_id: r.cell("object_id"),
            claim_type: r.cell("type"),
            status: r.cell("status"),
            start_date: r.cell("start_date"),
            end_date: r.cell("end_date"),
            description: r.cell("description"),
        })
        .collect()
}

/// A Reports table's records.
pub(crate) fn reports(table: &PackedTable) -> Vec<ReportRecord> {
    rows(table)
        .map(|r| ReportRecord {
            id: r.id(),
            title: r.cell("title"),
            content: r.cell("content"),
            occurrence_weight: r.get("occurrence weight"),
            rank: r.get("rank"),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::context::pack_table;

    #[test]
    fn records_read_back_as_the_tables_json() {
        let words = |t: &str| t.split_whitespace().count();
        let row = |cells: &[&str]| cells.iter().map(|c| c.to_string()).collect::<Vec<_>>();
        let sources = pack_table("Sources", &["id", "text"], vec![row(&["7", "a | b"])], 100, &words);
        let entities = pack_table(
            "Entities",
            &["id", "entity", "type", "description", "rank"],
            vec![row(&["3", "A", "person", "d", "2"])],
            100,
            &words,
        );
        let records = ContextRecords {
            sources: Some(super::sources(&sources)),
            entities: Some(super::entities(&entities)),
            method: MethodRecords::Basic { retrieval: "dense" },
            ..ContextRecords::default()
        };
        assert_eq!(records.source_ids(), [7]);
        assert_eq!(
            records.to_json(),
            json!({
                "sources": sources.records(),
                "entities": entities.records(),
                "retrieval": "dense",
            })
        );
    }
}
