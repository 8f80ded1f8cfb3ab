//! The small index every query test asks (GraphRAG's tables written one
//! by one, vectors from the mock server's deterministic embedding) and the
//! project around it, the mock server as its models.
#![allow(dead_code)] // each test file uses some of the fixture

use std::path::Path;
use std::sync::Arc;

use arrow_array::builder::{FixedSizeListBuilder, Float32Builder};
use arrow_array::RecordBatch;
use arrow_schema::{DataType, Field, Schema};
use graphrag_engine::schema;
use graphrag_engine::store::write_table;
use graphrag_mock_llm::{embed, MockConfig, MockServer};
use graphrag_query::{Method, QueryEngine, QueryRequest};

pub const DIM: usize = 384;

pub const UNITS: &[&str] = &[
    "Ebenezer Scrooge runs a counting house in London with his clerk Bob Cratchit. Scrooge is a miser who hates Christmas.",
    "Jacob Marley, the dead business partner of Scrooge, appears as a ghost in chains and warns Scrooge to change his ways.",
    "Bob Cratchit lives with his family in Camden Town. His youngest son Tiny Tim is ill and walks with a crutch.",
    "The Halvard Port Authority expanded the container terminal in 2021, financed by the Northern Shipping Bank.",
    "The Northern Shipping Bank is headquartered in Oslo and lends to port operators across Scandinavia.",
];

/// (title, type, description, text unit indexes)
pub const ENTITIES: &[(&str, &str, &str, &[usize])] = &[
    ("SCROOGE", "PERSON", "A miserly businessman in London who hates Christmas", &[0, 1]),
    ("BOB CRATCHIT", "PERSON", "Scrooge's underpaid clerk and the father of Tiny Tim", &[0, 2]),
    ("JACOB MARLEY", "PERSON", "Scrooge's dead business partner who returns as a ghost in chains", &[1]),
    ("TINY TIM", "PERSON", "Bob Cratchit's ill youngest son who walks with a crutch", &[2]),
    ("LONDON", "GEO", "The city where Scrooge's counting house stands", &[0]),
    ("HALVARD PORT AUTHORITY", "ORGANIZATION", "Operator of the Halvard container terminal, expanded in 2021", &[3]),
    ("NORTHERN SHIPPING BANK", "ORGANIZATION", "A bank in Oslo that financed the terminal expansion", &[3, 4]),
    ("OSLO", "GEO", "Capital of Norway and headquarters of the Northern Shipping Bank", &[4]),
];

/// (source, target, description, weight, text units)
pub const RELATIONSHIPS: &[(usize, usize, &str, f64, &[usize])] = &[
    (0, 1, "Bob Cratchit works as Scrooge's clerk", 2.0, &[0]),
    (0, 2, "Marley was Scrooge's business partner and haunts him", 3.0, &[1]),
    (1, 3, "Tiny Tim is Bob Cratchit's son", 2.0, &[2]),
    (0, 4, "Scrooge's counting house is in London", 1.0, &[0]),
    (5, 6, "The bank financed the authority's terminal expansion", 2.0, &[3]),
    (6, 7, "The bank is headquartered in Oslo", 1.0, &[4]),
];

/// (community, level, parent, children, entities, title, rank)
pub type CommunityRow = (i64, i64, i64, &'static [i64], &'static [usize], &'static str, f64);
pub const COMMUNITIES: &[CommunityRow] = &[
    (0, 0, -1, &[2, 3], &[0, 1, 2, 3, 4], "Scrooge and the Cratchit household", 8.0),
    (1, 0, -1, &[], &[5, 6, 7], "Halvard port finance", 6.5),
    (2, 1, 0, &[], &[0, 2, 4], "Scrooge, Marley and London", 7.0),
    (3, 1, 0, &[], &[1, 3], "The Cratchit family", 5.0),
];

pub fn unit_id(i: usize) -> String {
    format!("tu-{i}")
}
pub fn entity_id(i: usize) -> String {
    format!("ent-{i}")
}

pub fn vectors_table(ids: &[String], texts: &[String], dim: usize) -> RecordBatch {
    let mut list = FixedSizeListBuilder::new(Float32Builder::new(), dim as i32).with_field(Arc::new(Field::new(
        "item",
        DataType::Float32,
        true,
    )));
    for t in texts {
        list.values().append_slice(&embed(t, dim));
        list.append(true);
    }
    let schema = Arc::new(Schema::new(vec![
        schema::text_field("id"),
        Field::new(
            "vector",
            DataType::FixedSizeList(Arc::new(Field::new("item", DataType::Float32, true)), dim as i32),
            true,
        ),
    ]));
    RecordBatch::try_new(schema, vec![schema::text_col(ids), Arc::new(list.finish())]).unwrap()
}

pub fn report_content(c: usize) -> (String, String) {
    let (_, _, _, _, ents, title, _) = COMMUNITIES[c];
    let names: Vec<&str> = ents.iter().map(|&e| ENTITIES[e].0).collect();
    let summary = format!("This community groups {}.", names.join(", "));
    let findings: Vec<String> = ents.iter().map(|&e| format!("## {}\n\n{}", ENTITIES[e].0, ENTITIES[e].2)).collect();
    (summary.clone(), format!("# {title}\n\n{summary}\n\n{}", findings.join("\n\n")))
}

/// Writes the index tables into DIR/output; `dim` = 0 writes no vectors.
pub fn write_index(dir: &Path, dim: usize, empty: bool) {
    let out = dir.join("output");
    std::fs::create_dir_all(&out).unwrap();
    let take = |n: usize| if empty { 0 } else { n };
    let nu = take(UNITS.len());
    let ne = take(ENTITIES.len());
    let nr = take(RELATIONSHIPS.len());
    let nc = take(COMMUNITIES.len());

    let units: Vec<String> = UNITS[..nu].iter().map(|s| s.to_string()).collect();
    let unit_ids: Vec<String> = (0..nu).map(unit_id).collect();
    let ents_of_unit =
        |u: usize| -> Vec<String> { (0..ne).filter(|&e| ENTITIES[e].3.contains(&u)).map(entity_id).collect() };
    let rels_of_unit = |u: usize| -> Vec<String> {
        (0..nr).filter(|&r| RELATIONSHIPS[r].4.contains(&u)).map(|r| format!("rel-{r}")).collect()
    };
    let tu = RecordBatch::try_new(
        schema::text_units(),
        vec![
            schema::text_col(&unit_ids),
            schema::int_col(0..nu as i64),
            schema::text_col(&units),
            schema::int_col(units.iter().map(|u| u.split_whitespace().count() as i64)),
            schema::text_col(vec!["doc-0"; nu]),
            schema::id_list_col((0..nu).map(ents_of_unit)),
            schema::id_list_col((0..nu).map(rels_of_unit)),
            schema::id_list_col((0..nu).map(|_| Vec::<String>::new())),
        ],
    )
    .unwrap();
    write_table(&out.join("text_units.parquet"), &tu).unwrap();

    let degree: Vec<i64> =
        (0..ne).map(|e| RELATIONSHIPS[..nr].iter().filter(|r| r.0 == e || r.1 == e).count() as i64).collect();
    let ents = &ENTITIES[..ne];
    let entities = RecordBatch::try_new(
        schema::entities(),
        vec![
            schema::text_col((0..ne).map(entity_id)),
            schema::int_col(0..ne as i64),
            schema::text_col(ents.iter().map(|e| e.0)),
            schema::text_col(ents.iter().map(|e| e.1)),
            schema::text_col(ents.iter().map(|e| e.2)),
            schema::id_list_col(ents.iter().map(|e| e.3.iter().map(|&u| unit_id(u)).collect::<Vec<_>>())),
            schema::int_col(ents.iter().map(|e| e.3.len() as i64)),
            schema::int_col(degree.clone()),
        ],
    )
    .unwrap();
    write_table(&out.join("entities.parquet"), &entities).unwrap();

    let rels = &RELATIONSHIPS[..nr];
    let relationships = RecordBatch::try_new(
        schema::relationships(),
        vec![
            schema::text_col((0..nr).map(|r| format!("rel-{r}"))),
            schema::int_col(0..nr as i64),
            schema::text_col(rels.iter().map(|r| ENTITIES[r.0].0)),
            schema::text_col(rels.iter().map(|r| ENTITIES[r.1].0)),
            schema::text_col(rels.iter().map(|r| r.2)),
            schema::float_col(rels.iter().map(|r| r.3)),
            schema::int_col(rels.iter().map(|r| degree[r.0] + degree[r.1])),
            schema::id_list_col(rels.iter().map(|r| r.4.iter().map(|&u| unit_id(u)).collect::<Vec<_>>())),
        ],
    )
    .unwrap();
    write_table(&out.join("relationships.parquet"), &relationships).unwrap();

    let comms = &COMMUNITIES[..nc];
    let communities = RecordBatch::try_new(
        schema::communities(),
        vec![
            schema::text_col((0..nc).map(|c| format!("com-{c}"))),
            schema::int_col(0..nc as i64),
            schema::int_col(comms.iter().map(|c| c.0)),
            schema::int_col(comms.iter().map(|c| c.1)),
            schema::int_col(comms.iter().map(|c| c.2)),
            schema::int_list_col(comms.iter().map(|c| c.3.to_vec())),
            schema::text_col(comms.iter().map(|c| format!("Community {}", c.0))),
            schema::id_list_col(comms.iter().map(|c| c.4.iter().map(|&e| entity_id(e)).collect::<Vec<_>>())),
            schema::id_list_col(comms.iter().map(|_| Vec::<String>::new())),
            schema::id_list_col(comms.iter().map(|_| Vec::<String>::new())),
            schema::text_col(vec!["2026-01-01"; nc]),
            schema::int_col(comms.iter().map(|c| c.4.len() as i64)),
        ],
    )
    .unwrap();
    write_table(&out.join("communities.parquet"), &communities).unwrap();

    let contents: Vec<(String, String)> = (0..nc).map(report_content).collect();
    let reports = RecordBatch::try_new(
        schema::community_reports(),
        vec![
            schema::text_col((0..nc).map(|c| format!("rep-{c}"))),
            schema::int_col(0..nc as i64),
            schema::int_col(comms.iter().map(|c| c.0)),
            schema::int_col(comms.iter().map(|c| c.1)),
            schema::int_col(comms.iter().map(|c| c.2)),
            schema::int_list_col(comms.iter().map(|c| c.3.to_vec())),
            schema::text_col(comms.iter().map(|c| c.5)),
            schema::text_col(contents.iter().map(|c| c.0.as_str())),
            schema::text_col(contents.iter().map(|c| c.1.as_str())),
            schema::float_col(comms.iter().map(|c| c.6)),
            schema::text_col(vec!["important"; nc]),
            schema::findings_col(comms.iter().map(|_| Vec::new())),
            schema::text_col(vec!["{}"; nc]),
            schema::text_col(vec!["2026-01-01"; nc]),
            schema::int_col(comms.iter().map(|c| c.4.len() as i64)),
        ],
    )
    .unwrap();
    write_table(&out.join("community_reports.parquet"), &reports).unwrap();

    let nclaims = take(1);
    let claim = |v: &'static str| vec![v; nclaims];
    let covariates = RecordBatch::try_new(
        schema::covariates(),
        vec![
            schema::text_col(claim("cov-0")),
            schema::int_col(0..nclaims as i64),
            schema::text_col(claim("claim")),
            schema::text_col(claim("UNDERPAYMENT")),
            schema::text_col(claim("Scrooge pays Bob Cratchit very little")),
            schema::text_col(claim("SCROOGE")),
            schema::text_col(claim("BOB CRATCHIT")),
            schema::text_col(claim("TRUE")),
            schema::text_col(claim("")),
            schema::text_col(claim("")),
            schema::text_col(claim("pays his clerk fifteen shillings")),
            schema::text_col(claim("tu-0")),
        ],
    )
    .unwrap();
    write_table(&out.join("covariates.parquet"), &covariates).unwrap();

    let embed_dim = if dim == 0 { 1 } else { dim };
    let write_vectors = |field: &str, ids: Vec<String>, texts: Vec<String>| {
        let (ids, texts) = if dim == 0 { (Vec::new(), Vec::new()) } else { (ids, texts) };
        let t = vectors_table(&ids, &texts, if ids.is_empty() { 0 } else { embed_dim });
        write_table(&out.join(format!("embeddings.{field}.parquet")), &t).unwrap();
    };
    write_vectors("text_unit_text", unit_ids.clone(), units.clone());
    write_vectors(
        "entity_description",
        (0..ne).map(entity_id).collect(),
        ents.iter().map(|e| format!("{}:{}", e.0, e.2)).collect(),
    );
    write_vectors(
        "relationship_description",
        (0..nr).map(|r| format!("rel-{r}")).collect(),
        rels.iter().map(|r| format!("{} {}:{}", ENTITIES[r.0].0, ENTITIES[r.1].0, r.2)).collect(),
    );
    write_vectors(
        "community_full_content",
        (0..nc).map(|c| format!("rep-{c}")).collect(),
        contents.iter().map(|c| c.1.clone()).collect(),
    );
}

pub fn settings_text(mock: &MockServer, chat: bool, extra: &str) -> String {
    let chat_model = if chat {
        format!(
            "  default_completion_model:\n    model: mock-chat\n    api_key: test-key\n    api_base: {}\n    max_retries: 0\n",
            mock.base_url()
        )
    } else {
        "  default_completion_model:\n    model: mock-chat\n".to_string()
    };
    format!(
        "completion_models:\n{chat_model}embedding_models:\n  default_embedding_model:\n    model_provider: openai\n    model: mock-embed\n    api_key: test-key\n    api_base: {}\n    max_retries: 0\ncache:\n  type: none\n{extra}",
        mock.base_url()
    )
}

pub struct Project {
    pub dir: tempfile::TempDir,
    pub mock: MockServer,
}

impl Project {
    pub fn new(chat: bool, extra: &str) -> Project {
        Project::build(chat, extra, DIM, false, MockConfig::default())
    }

    pub fn build(chat: bool, extra: &str, dim: usize, empty: bool, cfg: MockConfig) -> Project {
        let mock = MockServer::start(cfg).unwrap();
        let dir = tempfile::tempdir().unwrap();
        write_index(dir.path(), dim, empty);
        std::fs::write(dir.path().join("settings.yaml"), settings_text(&mock, chat, extra)).unwrap();
        Project { dir, mock }
    }

    pub fn engine(&self) -> QueryEngine {
        QueryEngine::open(self.dir.path()).unwrap()
    }
}

pub fn ask(engine: &QueryEngine, method: Method, question: &str) -> graphrag_query::QueryResult {
    engine.query(&QueryRequest::new(method, question), None).unwrap()
}

pub fn record_ids(result: &graphrag_query::QueryResult, table: &str) -> Vec<String> {
    result.context_records.to_json()[table]
        .as_array()
        .map(|rows| rows.iter().map(|r| r["id"].as_str().unwrap().to_string()).collect())
        .unwrap_or_default()
}

pub fn record_column(result: &graphrag_query::QueryResult, table: &str, column: &str) -> Vec<String> {
    result.context_records.to_json()[table]
        .as_array()
        .map(|rows| rows.iter().map(|r| r[column].as_str().unwrap_or("").to_string()).collect())
        .unwrap_or_default()
}
