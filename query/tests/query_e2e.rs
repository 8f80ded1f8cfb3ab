//! End-to-end query tests: a small index written table by table (GraphRAG
//! schema, embeddings from the mock server's deterministic embedding
//! function) and the mock server as chat and embedding model.

mod common;

use std::path::Path;

use arrow_array::RecordBatch;
use common::*;
use graphrag_engine::schema;
use graphrag_engine::store::write_table;
use graphrag_mock_llm::{FaultKind, FaultRule, MockConfig};
use graphrag_query::context::cited_ids;
use graphrag_query::records::MethodRecords;
use graphrag_query::{Method, QueryEngine, QueryRequest, NO_DATA_ANSWER};
use serde_json::Value;

#[test]
fn local_search_answers_with_citations_of_real_records() {
    let p = Project::new(true, "");
    let engine = p.engine();
    let r = ask(&engine, Method::Local, "Who is the father of Tiny Tim?");
    let answer = r.answer.as_deref().unwrap();
    assert!(r.notice.is_none());
    assert!(r.context.contains("-----Entities-----\nid|entity|description|number of relationships\n"), "{}", r.context);
    // GraphRAG's `links` (selected entities the outside end is related to),
    // as its loop over the entities leaves it: set while a relationship was
    // out of the network (the question's entities, one at a time: TINY TIM,
    // BOB CRATCHIT, OSLO, HALVARD PORT AUTHORITY, LONDON, NORTHERN SHIPPING
    // BANK, JACOB MARLEY, SCROOGE), kept once both ends are in, empty for the
    // one that never was out with another. Weights as Python writes floats.
    let relationships = r.context.split("-----Relationships-----\n").nth(1).unwrap().split("\n\n").next().unwrap();
    assert_eq!(
        relationships,
        "id|source|target|description|weight|links\n\
         0|SCROOGE|BOB CRATCHIT|Bob Cratchit works as Scrooge's clerk|2.0|3\n\
         1|SCROOGE|JACOB MARLEY|Marley was Scrooge's business partner and haunts him|3.0|3\n\
         3|SCROOGE|LONDON|Scrooge's counting house is in London|1.0|3\n\
         2|BOB CRATCHIT|TINY TIM|Tiny Tim is Bob Cratchit's son|2.0|\n\
         4|HALVARD PORT AUTHORITY|NORTHERN SHIPPING BANK|The bank financed the authority's terminal expansion|2.0|2\n\
         5|NORTHERN SHIPPING BANK|OSLO|The bank is headquartered in Oslo|1.0|2",
        "{}",
        r.context
    );
    assert_eq!(record_column(&r, "relationships", "links"), ["3", "3", "3", "", "2", "2"]);
    assert!(r.context.contains("-----Sources-----\nid|text\n"));
    assert!(r.context.contains("-----Reports-----\nid|title|content\n"));
    assert!(r.context.contains("-----Claims-----"), "claims of SCROOGE are in context: {}", r.context);
    assert!(record_column(&r, "entities", "entity").contains(&"TINY TIM".to_string()));
    let cited = cited_ids(answer);
    assert!(!cited.is_empty(), "{answer}");
    let limits = [
        ("Entities", ENTITIES.len()),
        ("Relationships", RELATIONSHIPS.len()),
        ("Sources", UNITS.len()),
        ("Reports", COMMUNITIES.len()),
        ("Claims", 1),
    ];
    for (name, ids) in &cited {
        let n = limits.iter().find(|(l, _)| l == name).unwrap_or_else(|| panic!("unknown dataset {name}")).1;
        for id in ids {
            assert!((0..n as i64).contains(id), "{name} {id} is not a record: {answer}");
            let table = name.to_lowercase();
            assert!(record_ids(&r, &table).contains(&id.to_string()), "{name} {id} not in the context");
        }
    }
    // As GraphRAG, every level up to the default 2: the parent community
    // (holding most of the selected entities) comes first.
    let reports = record_ids(&r, "reports");
    assert_eq!(reports.first().map(String::as_str), Some("0"), "{reports:?}");
    assert_eq!((r.stats.llm_calls, r.stats.embedding_calls), (1, 1), "{:?}", r.stats);
    assert!(r.stats.prompt_tokens > 0 && r.stats.context_tokens > 0);
    assert_eq!(p.mock.stats().chat_requests, 1);
    // Tables are cached: a second query works the same.
    let again = ask(&engine, Method::Local, "Who is the father of Tiny Tim?");
    assert_eq!(again.context, r.context);
}

#[test]
fn local_context_respects_the_token_budget_and_history() {
    let p = Project::new(true, "local_search:\n  max_context_tokens: 400\n");
    let engine = p.engine();
    let mut req = QueryRequest::new(Method::Local, "What did Jacob Marley warn Scrooge about?");
    req.history = vec![("user".into(), "Who is Scrooge?".into()), ("assistant".into(), "A miser.".into())];
    req.context_only = true;
    let r = engine.query(&req, None).unwrap();
    assert!(
        r.context.starts_with("-----Conversation History-----\nturn|content\nuser|Who is Scrooge?"),
        "{}",
        r.context
    );
    assert!(!r.context.contains("A miser."), "user turns only, as GraphRAG");
    assert!(r.stats.context_tokens <= 420, "{}", r.stats.context_tokens);
}

#[test]
fn context_only_makes_no_chat_requests_for_any_method() {
    let p = Project::new(true, "");
    let engine = p.engine();
    for method in [Method::Local, Method::Global, Method::Basic, Method::Drift, Method::Hybrid, Method::Mix] {
        let mut req = QueryRequest::new(method, "How is Scrooge related to Bob Cratchit?");
        req.context_only = true;
        let r = engine.query(&req, None).unwrap();
        assert!(r.answer.is_none(), "{method}");
        assert!(r.notice.as_deref().unwrap().contains("retrieval only"), "{method}");
        assert!(!r.context.is_empty(), "{method}");
        assert_eq!(r.stats.llm_calls, 0);
    }
    assert_eq!(p.mock.stats().chat_requests, 0);
}

#[test]
fn no_chat_model_returns_context_with_retrieval_only_notice() {
    let p = Project::new(false, "");
    let engine = p.engine();
    for method in [Method::Local, Method::Basic, Method::Global, Method::Mix] {
        let r = ask(&engine, method, "Who financed the Halvard container terminal?");
        assert!(r.answer.is_none());
        let notice = r.notice.clone().unwrap();
        assert!(notice.contains("retrieval only") && notice.contains("no chat model"), "{notice}");
        assert!(!r.context.is_empty());
        if method == Method::Mix {
            assert!(r.context.contains("keywords taken from the question's own words"), "{}", r.context);
            assert!(record_column(&r, "entities", "entity").contains(&"HALVARD PORT AUTHORITY".to_string()));
        }
    }
    assert_eq!(p.mock.stats().chat_requests, 0);
}

#[test]
fn global_search_maps_batches_in_parallel_and_reduces() {
    // Small batches: one report per map call.
    let p = Project::new(true, "global_search:\n  max_context_tokens: 120\n");
    let engine = p.engine();
    let mut streamed = String::new();
    let mut on_token = |t: &str| streamed.push_str(t);
    let r = engine.query(&QueryRequest::new(Method::Global, "What are the main themes?"), Some(&mut on_token)).unwrap();
    let batches = r.context_records.to_json()["batches"].as_u64().unwrap();
    assert!(batches >= 2, "{}", r.context_records.to_json());
    // The default level 2 selects every report of levels 0 to 2 (GraphRAG 3.3).
    let mut reports = record_ids(&r, "reports");
    reports.sort();
    assert_eq!(reports, ["0", "1", "2", "3"]);
    assert!(r.context.contains("id|title|occurrence weight|content|rank\n"), "{}", r.context);
    // Occurrence weight: distinct text units of the community's entities over
    // the most of any report (community 0: units 0, 1, 2); ranks as Python prints floats.
    let weights: Vec<(String, String)> = r.context_records.to_json()["reports"]
        .as_array()
        .unwrap()
        .iter()
        .map(|x| (x["id"].as_str().unwrap().to_string(), x["occurrence weight"].as_str().unwrap().to_string()))
        .collect();
    for (id, w) in [("0", "1.0"), ("1", "0.6666666666666666"), ("3", "0.6666666666666666")] {
        assert!(weights.contains(&(id.to_string(), w.to_string())), "{weights:?}");
    }
    assert!(r.context.contains("|8.0\n") || r.context.ends_with("|8.0"), "{}", r.context);
    assert_eq!(p.mock.stats().chat_requests, batches + 1);
    assert_eq!(r.stats.llm_calls, batches + 1);
    let answer = r.answer.unwrap();
    assert_eq!(streamed, answer, "the answer is streamed (in one piece)");
    assert!(answer.contains("[Data: Reports ("), "{answer}");
    assert!(r.context_records.to_json()["points"]
        .as_array()
        .unwrap()
        .iter()
        .all(|p| p["score"].as_f64().unwrap() > 0.0));

    let mut req = QueryRequest::new(Method::Global, "What are the main themes?");
    req.community_level = Some(0);
    req.context_only = true;
    let mut reports = record_ids(&engine.query(&req, None).unwrap(), "reports");
    reports.sort();
    assert_eq!(reports, ["0", "1"]);
}

#[test]
fn global_search_drops_zero_score_points_and_says_no_data() {
    // A map prompt without the data: the mock answers "I don't know" with score 0.
    let p = Project::new(true, "global_search:\n  map_prompt: prompts/blind_map.txt\n");
    std::fs::create_dir_all(p.dir.path().join("prompts")).unwrap();
    std::fs::write(
        p.dir.path().join("prompts/blind_map.txt"),
        "Produce a list of key points that answer the user's question, in {{ max_length }} words.\n",
    )
    .unwrap();
    let r = ask(&p.engine(), Method::Global, "What are the main themes?");
    assert_eq!(r.answer.as_deref(), Some(NO_DATA_ANSWER));
    let batches = r.context_records.to_json()["batches"].as_u64().unwrap();
    assert_eq!(p.mock.stats().chat_requests, batches, "no reduce call without points");
}

#[test]
fn global_search_asks_garbage_map_answers_again() {
    let p = Project::new(true, "");
    p.mock.set_faults(vec![FaultRule::always(FaultKind::Malformed).on(graphrag_mock_llm::Endpoint::Chat).first(2)]);
    let r = ask(&p.engine(), Method::Global, "What are the main themes?");
    assert_ne!(r.answer.as_deref(), Some(NO_DATA_ANSWER));
    assert_eq!((r.stats.unusable_answers, r.stats.skipped_steps), (2, 0), "{:?}", r.stats);
}

#[test]
fn a_community_level_deeper_than_the_index_uses_its_deepest() {
    // This index has levels 0 and 1; GraphRAG's default (2) and any deeper
    // level select the same reports as level 1: all of them.
    let p = Project::new(true, "");
    let engine = p.engine();
    for (level, expected) in [(Some(7), 1), (Some(2), 1), (None, 2), (Some(1), 1), (Some(0), 0)] {
        let mut req = QueryRequest::new(Method::Global, "themes?");
        req.community_level = level;
        req.context_only = true;
        let r = engine.query(&req, None).unwrap();
        assert_eq!(r.context_records.to_json()["community_level"], expected, "{level:?}");
        let n = record_ids(&r, "reports").len();
        assert_eq!(n, if expected == 0 { 2 } else { 4 }, "{level:?}");
    }
}

#[test]
fn dynamic_community_selection_rates_top_down() {
    let p = Project::new(true, "");
    let mut req = QueryRequest::new(Method::Global, "What is known about Marley and London?");
    req.dynamic_community_selection = true;
    let r = p.engine().query(&req, None).unwrap();
    assert_eq!(r.context_records.to_json()["community_selection"], "dynamic");
    let reports = record_ids(&r, "reports");
    // Community 0 mentions Marley/London and is replaced by its relevant child 2;
    // the port community shares no words with the question.
    assert!(reports.contains(&"2".to_string()), "{reports:?}");
    assert!(!reports.contains(&"1".to_string()), "{reports:?}");
    assert!(r.answer.is_some());
}

#[test]
fn basic_search_retrieves_the_matching_text_unit() {
    let p = Project::new(true, "");
    let r = ask(&p.engine(), Method::Basic, "Where is the Northern Shipping Bank headquartered?");
    assert_eq!(record_ids(&r, "sources").first().map(String::as_str), Some("4"), "{}", r.context);
    let answer = r.answer.unwrap();
    assert!(cited_ids(&answer)["Sources"].contains(&4), "{answer}");
    assert_eq!(p.mock.stats().chat_requests, 1);
}

#[test]
fn mix_and_hybrid_retrieve_through_keywords() {
    let p = Project::new(true, "");
    let engine = p.engine();
    let q = "How did the Northern Shipping Bank help the Halvard Port Authority?";
    let r = ask(&engine, Method::Mix, q);
    assert_eq!(r.context_records.to_json()["keywords"]["from"], "chat model", "{}", r.context_records.to_json());
    let low = r.context_records.to_json()["keywords"]["low_level"].as_array().unwrap().clone();
    assert!(!low.is_empty());
    let entities = record_column(&r, "entities", "entity");
    assert!(entities.contains(&"NORTHERN SHIPPING BANK".to_string()), "{entities:?}");
    assert!(record_column(&r, "relationships", "description")
        .contains(&"The bank financed the authority's terminal expansion".to_string()));
    assert!(record_ids(&r, "sources").contains(&"3".to_string()), "{}", r.context);
    assert!(!r.context.contains("-----Keywords-----"));
    assert!(r.answer.unwrap().contains("[Data:"));
    assert_eq!(p.mock.stats().chat_requests, 2, "keywords + answer");
    assert_eq!(r.stats.embedding_calls, 1, "one embedding request for all keyword sets");

    let h = ask(&engine, Method::Hybrid, q);
    assert!(record_column(&h, "entities", "entity").contains(&"NORTHERN SHIPPING BANK".to_string()));
    assert!(h.answer.is_some());
}

#[test]
fn mix_passes_history_to_the_prompt() {
    let p = Project::new(true, "");
    let mut req = QueryRequest::new(Method::Mix, "And where is it headquartered?");
    req.history = vec![
        ("user".into(), "Tell me about the Northern Shipping Bank".into()),
        ("assistant".into(), "It is a bank.".into()),
    ];
    let r = p.engine().query(&req, None).unwrap();
    assert!(r.answer.is_some());
}

/// (follow-ups asked, follow-ups proposed) of a DRIFT result.
fn drift_follow_ups(r: &graphrag_query::QueryResult) -> (u64, u64) {
    let MethodRecords::Drift { follow_ups, .. } = &r.context_records.method else { panic!("DRIFT's records") };
    (follow_ups.iter().filter(|f| f.asked).count() as u64, follow_ups.len() as u64)
}

#[test]
fn drift_expands_primes_follows_up_and_reduces() {
    let p = Project::new(true, "drift_search:\n  n_depth: 2\n  drift_k_followups: 3\n  primer_folds: 2\n");
    let r = ask(&p.engine(), Method::Drift, "What happened between Scrooge and Marley?");
    assert!(r.answer.as_deref().is_some_and(|a| !a.is_empty()));
    let MethodRecords::Drift { expanded_query: Some(expanded), .. } = &r.context_records.method else {
        panic!("an expanded query: {:?}", r.context_records)
    };
    assert!(expanded.contains("What happened between Scrooge and Marley?"), "{expanded}");
    let (asked, proposed) = drift_follow_ups(&r);
    // Up to drift_k_followups per round, n_depth rounds.
    assert!((1..=6).contains(&asked) && proposed >= asked, "{}", r.context_records.to_json());
    let kinds = p.mock.stats().by_kind;
    assert_eq!(kinds.get("drift_expand"), Some(&1), "{kinds:?}");
    assert_eq!(kinds.get("drift_primer"), Some(&2), "{kinds:?}");
    assert_eq!(kinds.get("drift_search"), Some(&asked), "{kinds:?}");
    assert_eq!(kinds.get("drift_reduce"), Some(&1), "{kinds:?}");
    // The same question again asks the same follow-ups (a seeded order).
    let again = ask(&p.engine(), Method::Drift, "What happened between Scrooge and Marley?");
    assert_eq!(again.context_records.to_json()["follow_ups"], r.context_records.to_json()["follow_ups"]);
}

/// A project with GraphRAG 3.3's own DRIFT prompt files and settings paths,
/// as `graphrag init` writes them (its reduce prompt path names a file it
/// does not write).
fn graphrag_drift_project(extra: &str) -> Project {
    let settings = format!(
        "drift_search:\n  prompt: prompts/drift_search_system_prompt.txt\n  reduce_prompt: prompts/drift_search_reduce_prompt.txt\n{extra}"
    );
    let p = Project::new(true, &settings);
    let prompts = p.dir.path().join("prompts");
    std::fs::create_dir_all(&prompts).unwrap();
    let fixtures = Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/fixtures/graphrag-3.3.0-init/prompts");
    for name in ["drift_search_system_prompt.txt", "drift_reduce_prompt.txt"] {
        std::fs::copy(fixtures.join(name), prompts.join(name)).unwrap();
    }
    p
}

#[test]
fn drift_runs_graphrag_s_own_prompts() {
    let p = graphrag_drift_project("  n_depth: 2\n  drift_k_followups: 2\n");
    let r = ask(&p.engine(), Method::Drift, "How are Scrooge and Bob Cratchit connected?");
    assert!(r.answer.as_deref().is_some_and(|a| a.contains("[Data:")), "{:?}", r.answer);
    let (asked, _) = drift_follow_ups(&r);
    assert!(asked >= 1, "{}", r.context_records.to_json());
    let kinds = p.mock.stats().by_kind;
    assert_eq!(kinds.get("drift_search"), Some(&asked), "GraphRAG's step prompt was answered: {kinds:?}");
    assert_eq!(kinds.get("drift_reduce"), Some(&1), "{kinds:?}");

    // GraphRAG's reduce prompt where its settings point: it is the one used.
    std::fs::copy(
        p.dir.path().join("prompts/drift_reduce_prompt.txt"),
        p.dir.path().join("prompts/drift_search_reduce_prompt.txt"),
    )
    .unwrap();
    let r = ask(&p.engine(), Method::Drift, "How are Scrooge and Bob Cratchit connected?");
    assert!(r.answer.is_some());
}

#[test]
fn a_prompt_placeholder_no_step_fills_fails_before_any_call() {
    let p = graphrag_drift_project("");
    let prompt = p.dir.path().join("prompts/drift_search_system_prompt.txt");
    let text = std::fs::read_to_string(&prompt).unwrap();
    std::fs::write(&prompt, text.replace("{followups}", "{follow_up_count}")).unwrap();
    let err = p.engine().query(&QueryRequest::new(Method::Drift, "Who is Scrooge?"), None).unwrap_err().to_string();
    assert!(err.contains("{follow_up_count} is not filled by DRIFT's follow-up step"), "{err}");
    assert!(err.contains("drift_search.prompt") && err.contains("{followups}"), "{err}");
    assert_eq!(p.mock.stats().requests, 0, "nothing was sent");

    let p = Project::new(true, "global_search:\n  map_prompt: prompts/map.txt\n");
    std::fs::create_dir_all(p.dir.path().join("prompts")).unwrap();
    std::fs::write(p.dir.path().join("prompts/map.txt"), "{context_data} {points}").unwrap();
    let err = p.engine().query(&QueryRequest::new(Method::Global, "themes?"), None).unwrap_err().to_string();
    assert!(err.contains("{points} is not filled by global search's map step"), "{err}");
    assert_eq!(p.mock.stats().requests, 0);
}

#[test]
fn empty_index_and_unmatched_questions() {
    let p = Project::build(true, "", DIM, true, MockConfig::default());
    let engine = p.engine();
    let r = ask(&engine, Method::Global, "anything?");
    assert_eq!(r.answer.as_deref(), Some(NO_DATA_ANSWER));
    assert_eq!(p.mock.stats().chat_requests, 0);
    for method in [Method::Local, Method::Basic, Method::Mix] {
        let r = ask(&engine, method, "anything?");
        assert!(r.answer.is_some(), "{method}");
        assert!(r.context.is_empty() || method == Method::Mix, "{method}: {}", r.context);
    }
    let full = Project::new(true, "");
    let r = ask(&full.engine(), Method::Local, "zzzq xyxyx qqqqv");
    assert!(r.answer.is_some());

    // A question beyond the bound is refused before any model call, naming the bound.
    let before = full.mock.stats().requests;
    let huge = "Scrooge ".repeat(graphrag_query::MAX_QUESTION_BYTES / 8 + 1);
    let err = full.engine().query(&QueryRequest::new(Method::Drift, huge), None).unwrap_err().to_string();
    assert!(err.contains(&format!("at most {}", graphrag_query::MAX_QUESTION_BYTES)), "{err}");
    assert_eq!(full.mock.stats().requests, before);
}

#[test]
fn local_search_finds_an_entity_by_an_alias_entity_resolution_merged() {
    let p = Project::new(false, "");
    let first_entity = |engine: &QueryEngine| {
        let mut req = QueryRequest::new(Method::Local, "What became of Krabat, the old partner?");
        req.context_only = true;
        record_column(&engine.query(&req, None).unwrap(), "entities", "entity")[0].clone()
    };
    assert_ne!(first_entity(&p.engine()), "JACOB MARLEY");
    // entity_aliases.parquet: KRABAT was merged into JACOB MARLEY.
    let aliases = RecordBatch::try_new(
        schema::entity_aliases(),
        vec![
            schema::text_col(["KRABAT"]),
            schema::text_col([entity_id(2)]),
            schema::text_col(["JACOB MARLEY"]),
            schema::text_col(["same_name"]),
            schema::float_col([1.0]),
            schema::text_col(["test"]),
        ],
    )
    .unwrap();
    write_table(&p.dir.path().join("output/entity_aliases.parquet"), &aliases).unwrap();
    assert_eq!(first_entity(&p.engine()), "JACOB MARLEY");
}

#[test]
fn embedding_dimension_mismatch_names_the_setting() {
    let p = Project::build(true, "", 64, false, MockConfig::default());
    let err = p.engine().query(&QueryRequest::new(Method::Local, "Scrooge?"), None).unwrap_err();
    let msg = format!("{err:#}");
    assert!(msg.contains("dimension 384") && msg.contains("dimension 64"), "{msg}");
    assert!(msg.contains("local_search.embedding_model_id") && msg.contains("re-run"), "{msg}");
    let err = p.engine().query(&QueryRequest::new(Method::Basic, "Scrooge?"), None).unwrap_err();
    assert!(format!("{err:#}").contains("basic_search.embedding_model_id"));
}

#[test]
fn missing_vectors_and_missing_index_are_explained() {
    let p = Project::build(true, "", 0, false, MockConfig::default());
    let err = format!("{:#}", p.engine().query(&QueryRequest::new(Method::Basic, "Scrooge?"), None).unwrap_err());
    assert!(err.contains("text_unit_text") && err.contains("embed_text.names"), "{err}");
    std::fs::remove_file(p.dir.path().join("output/embeddings.entity_description.parquet")).unwrap();
    let err = format!("{:#}", p.engine().query(&QueryRequest::new(Method::Local, "Scrooge?"), None).unwrap_err());
    assert!(err.contains("not found") && err.contains("entity_description"), "{err}");

    std::fs::remove_dir_all(p.dir.path().join("output")).unwrap();
    let err = QueryEngine::open(p.dir.path()).err().unwrap().to_string();
    assert!(err.starts_with("no index in") && err.contains("graphrag-rs index --root"), "{err}");
}

#[test]
fn method_names_parse() {
    assert_eq!("mix".parse::<Method>().unwrap(), Method::Mix);
    let err = "globl".parse::<Method>().unwrap_err().to_string();
    assert!(err.contains("did you mean `global`"), "{err}");
    let _: Value = serde_json::to_value(Method::Drift).unwrap();
}

#[test]
fn undefined_completion_model_names_the_setting() {
    let p = Project::new(true, "local_search:\n  completion_model_id: default_completion_modle\n");
    let err = p.engine().query(&QueryRequest::new(Method::Local, "Scrooge?"), None).unwrap_err().to_string();
    assert!(err.contains("local_search.completion_model_id") && err.contains("did you mean"), "{err}");
}

#[test]
fn an_index_built_by_microsoft_graphrag_is_embedded_at_query_time() {
    // GraphRAG keeps vectors in output/lancedb/ and writes no embeddings tables.
    let p = Project::new(true, "");
    let out = p.dir.path().join("output");
    for entry in std::fs::read_dir(&out).unwrap().flatten() {
        if entry.file_name().to_string_lossy().starts_with("embeddings.") {
            std::fs::remove_file(entry.path()).unwrap();
        }
    }
    std::fs::create_dir(out.join("lancedb")).unwrap();
    let engine = p.engine();
    let r = ask(&engine, Method::Basic, "Where is the Northern Shipping Bank headquartered?");
    assert_eq!(record_ids(&r, "sources").first().map(String::as_str), Some("4"), "{}", r.context);
    let embedded = p.mock.stats().embedding_requests;
    assert!(embedded >= 2, "the text units and the query were embedded: {embedded}");
    // The vectors are kept for the next query of the same engine.
    ask(&engine, Method::Basic, "Who founded the bank?");
    assert_eq!(p.mock.stats().embedding_requests, embedded + 1, "only the new question is embedded");
}

#[test]
fn the_answer_streams_in_pieces() {
    let p = Project::new(true, "");
    let mut pieces: Vec<String> = Vec::new();
    let mut collect = |t: &str| pieces.push(t.to_string());
    let r = p
        .engine()
        .query(
            &QueryRequest::new(Method::Basic, "Where is the Northern Shipping Bank headquartered?"),
            Some(&mut collect),
        )
        .unwrap();
    assert!(pieces.len() > 1, "{pieces:?}");
    assert_eq!(pieces.concat(), r.answer.unwrap());
}

fn context_only(method: Method, question: &str, budget: Option<usize>) -> QueryRequest {
    QueryRequest { context_only: true, max_context_tokens: budget, ..QueryRequest::new(method, question) }
}

/// The lexical table the `lexical_index` verb writes, with `analyzer` as its analyzer.
fn write_lexical_index(dir: &Path, analyzer: &str) {
    use graphrag_operations::lexical::TermCounts;
    let counts: Vec<TermCounts> = UNITS.iter().map(|t| TermCounts::of(t)).collect();
    let table = RecordBatch::try_new(
        schema::lexical_index(analyzer),
        vec![
            schema::text_col((0..UNITS.len()).map(unit_id)),
            schema::int_col(counts.iter().map(|c| i64::from(c.length))),
            schema::id_list_col(counts.iter().map(|c| &c.terms)),
            schema::int_list_col(counts.iter().map(|c| c.counts.iter().map(|&n| i64::from(n)).collect())),
        ],
    )
    .unwrap();
    write_table(&dir.join("output/lexical_index.parquet"), &table).unwrap();
}

#[test]
fn bm25_ranks_by_shared_words_with_or_without_a_persisted_lexical_index() {
    let p = Project::new(false, "");
    let q = "Which bank lends to port operators in Scandinavia?";
    // No lexical_index.parquet (an index built before it existed): built in memory.
    let built = ask(&p.engine(), Method::Bm25, q);
    assert_eq!(record_ids(&built, "sources").first().map(String::as_str), Some("4"), "{}", built.context);
    assert_eq!(built.context_records.to_json()["retrieval"], "bm25");
    assert_eq!(built.stats.embedding_calls, 0, "BM25 needs no query embedding");
    write_lexical_index(p.dir.path(), graphrag_operations::lexical::ANALYZER);
    let persisted = ask(&p.engine(), Method::Bm25, q);
    assert_eq!(persisted.context, built.context);
    // Terms of another analyzer are not trusted: rebuilt from the text units.
    write_lexical_index(p.dir.path(), "some-other-analyzer/v0");
    assert_eq!(ask(&p.engine(), Method::Bm25, q).context, built.context);
    // Units sharing no word with the question are not BM25 hits.
    assert!(!record_ids(&built, "sources").contains(&"2".to_string()), "{}", built.context);
}

#[test]
fn basic_fuses_dense_and_bm25_unless_told_not_to() {
    let q = "Which bank lends to port operators in Scandinavia?";
    let p = Project::new(false, "");
    let engine = p.engine();
    let hybrid = ask(&engine, Method::Basic, q);
    assert_eq!(hybrid.context_records.to_json()["retrieval"], "hybrid (dense + bm25, reciprocal rank fusion)");
    assert_eq!(record_ids(&hybrid, "sources").first().map(String::as_str), Some("4"));
    let dense = ask(&engine, Method::Dense, q);
    assert_eq!(dense.context_records.to_json()["retrieval"], "dense");
    let off = Project::new(false, "basic_search:\n  hybrid: false\n");
    assert_eq!(ask(&off.engine(), Method::Basic, q).context, dense.context);
}

#[test]
fn a_context_budget_is_filled_in_each_methods_rank_order() {
    let p = Project::new(false, "");
    let engine = p.engine();
    let q = "Who is Scrooge's clerk and where does the bank lend?";
    for method in [Method::Basic, Method::Dense, Method::Bm25, Method::Ppr, Method::Local, Method::Mix, Method::Drift] {
        let mut previous: Option<Vec<String>> = None;
        for budget in [40, 80, 200, 100_000] {
            let r = engine.query(&context_only(method, q, Some(budget)), None).unwrap();
            assert!(
                r.stats.context_tokens as usize <= budget + 8,
                "{method} at {budget}: {} tokens\n{}",
                r.stats.context_tokens,
                r.context
            );
            let sources = record_ids(&r, "sources");
            if matches!(method, Method::Basic | Method::Dense | Method::Bm25 | Method::Ppr) {
                assert!(r.stats.context_tokens as usize <= budget, "{method} at {budget}");
                // A larger budget extends the same ranking.
                if let Some(before) = &previous {
                    assert!(sources.starts_with(before), "{method} at {budget}: {sources:?} after {before:?}");
                }
            }
            previous = Some(sources);
        }
        let all = previous.unwrap();
        if method != Method::Bm25 {
            assert_eq!(all.len(), UNITS.len(), "{method}: a large budget takes every unit in");
        }
    }
    let err = engine.query(&context_only(Method::Global, q, Some(1000)), None).unwrap_err().to_string();
    assert!(err.contains("global search takes no context budget"), "{err}");
}

#[test]
fn ppr_walks_from_the_question_to_linked_units_and_answers_citing_sources() {
    let p = Project::new(true, "");
    let engine = p.engine();
    let q = "Which city is home to the lender of the Halvard terminal?";
    let r = ask(&engine, Method::Ppr, q);
    let seeds: Vec<String> = r.context_records.to_json()["seeds"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["entity"].as_str().unwrap().to_string())
        .collect();
    assert!(seeds.contains(&"NORTHERN SHIPPING BANK".to_string()), "{seeds:?}");
    let ppr = record_ids(&r, "sources");
    // Unit 4 (Oslo) shares no word with the question: BM25 misses it; the
    // walk reaches it through the bank that unit 3 names.
    let bm25 = record_ids(&ask(&engine, Method::Bm25, q), "sources");
    assert!(!bm25.contains(&"4".to_string()), "{bm25:?}");
    let dense = record_ids(&ask(&engine, Method::Dense, q), "sources");
    let at = |list: &[String], id: &str| list.iter().position(|x| x == id).unwrap_or(usize::MAX);
    assert_eq!(ppr[0], "3", "{ppr:?}");
    assert!(at(&ppr, "4") <= at(&dense, "4") && at(&ppr, "4") < 3, "ppr {ppr:?}, dense {dense:?}");
    let answer = r.answer.unwrap();
    assert!(!cited_ids(&answer)["Sources"].is_empty(), "{answer}");
    for walk in ["paths", "nhop"] {
        let p = Project::new(false, &format!("ppr_search:\n  walk: {walk}\n"));
        let r = ask(&p.engine(), Method::Ppr, q);
        assert_eq!(r.context_records.to_json()["walk"], walk);
        assert_eq!(record_ids(&r, "sources").len(), UNITS.len(), "{walk}");
    }
}

#[test]
fn local_hybrid_and_mix_on_an_index_without_descriptions_spend_their_budget_on_text_units() {
    let p = Project::new(false, "");
    let path = p.dir.path().join("output/entities.parquet");
    let entities = graphrag_engine::store::read_table(&path).unwrap();
    let idx = entities.schema().index_of("description").unwrap();
    let mut columns = entities.columns().to_vec();
    columns[idx] = schema::text_col(vec![""; entities.num_rows()]);
    write_table(&path, &RecordBatch::try_new(entities.schema(), columns).unwrap()).unwrap();
    let engine = p.engine();
    let r = ask(&engine, Method::Local, "Who is the father of Tiny Tim?");
    assert!(r.context.starts_with("-----Sources-----"), "{}", r.context);
    assert!(!r.context.contains("-----Entities-----") && !r.context.contains("-----Reports-----"));
    assert_eq!(record_ids(&r, "sources").len(), UNITS.len());
    // LightRAG's modes: the keyword note (no chat model here), then the walk's text units.
    for method in [Method::Hybrid, Method::Mix] {
        let r = ask(&engine, method, "Who is the father of Tiny Tim?");
        assert!(r.context.starts_with("-----Keywords-----"), "{}", r.context);
        assert!(!r.context.contains("-----Entities-----") && !r.context.contains("-----Relationships-----"));
        assert!(r.context_records.to_json()["entities"].as_array().unwrap().is_empty());
        assert_eq!(record_ids(&r, "sources").len(), UNITS.len(), "{method:?}");
    }
}

#[test]
fn load_all_reads_an_index_whose_relationships_were_not_embedded() {
    // The fast method's relationships have no descriptions, so their vectors
    // file is empty: a server loading everything must still start.
    let p = Project::new(false, "");
    let empty = vectors_table(&[], &[], 0);
    write_table(&p.dir.path().join("output/embeddings.relationship_description.parquet"), &empty).unwrap();
    let engine = p.engine();
    engine.load_all().unwrap();
    let r = ask(&engine, Method::Basic, "Who is Scrooge?");
    assert!(!r.context.is_empty());
}
