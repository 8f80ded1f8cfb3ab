use super::extraction::{claim_candidates, claim_record, entity_types, extraction_input, read_delims, Delims};
use super::query::follow_up_limit;
use super::*;

fn render(template: &str, vars: &[(&str, &str)]) -> String {
    let mut s = template.to_string();
    for (k, v) in vars {
        s = s.replace(&format!("{{{{ {k} }}}}"), v);
    }
    s
}

fn prompt(name: &str) -> String {
    std::fs::read_to_string(format!("{}/../prompts/{name}.txt", env!("CARGO_MANIFEST_DIR"))).unwrap()
}

const DELIMS: [(&str, &str); 3] =
    [("tuple_delimiter", "<|>"), ("record_delimiter", "##"), ("completion_delimiter", "<|COMPLETE|>")];

/// (prompt file, class) of every prompt that is one system message.
const ONE_MESSAGE_PROMPTS: [(&str, &str); 18] = [
    ("extract_graph", "extract_graph"),
    ("extract_claims", "extract_claims"),
    ("summarize_descriptions", "summarize_descriptions"),
    ("community_report_graph", "community_report_graph"),
    ("community_report_text", "community_report_text"),
    ("global_search_map_system_prompt", "global_map"),
    ("global_search_reduce_system_prompt", "global_reduce"),
    ("local_search_system_prompt", "local_search"),
    ("basic_search_system_prompt", "basic_search"),
    ("mix_search_system_prompt", "mix_search"),
    ("drift_query_expansion", "drift_expand"),
    ("drift_primer", "drift_primer"),
    ("drift_search_system_prompt", "drift_search"),
    ("drift_reduce_prompt", "drift_reduce"),
    ("keywords_extraction", "keywords_extraction"),
    ("rate_community", "rate_community"),
    ("question_gen_system_prompt", "question_gen"),
    ("resolve_entities", "resolve_entities"),
];

#[test]
fn every_template_is_classified() {
    for (file, class) in ONE_MESSAGE_PROMPTS {
        let p = render(&prompt(file), &DELIMS);
        let msgs = [Message::new("system", &p), Message::new("user", "What happened?")];
        assert_eq!(classify(&msgs), class, "{file}");
    }
    let ext = render(&prompt("extract_graph"), &DELIMS);
    for (file, class) in
        [("extract_graph_continue", "extract_graph_continue"), ("extract_graph_loop", "extract_graph_loop")]
    {
        let msgs = [
            Message::new("user", &ext),
            Message::new("assistant", "x"),
            Message::new("user", &render(&prompt(file), &DELIMS)),
        ];
        assert_eq!(classify(&msgs), class, "{file}");
    }
    let cl = render(&prompt("extract_claims"), &DELIMS);
    for (file, class) in
        [("extract_claims_continue", "extract_claims_continue"), ("extract_claims_loop", "extract_claims_loop")]
    {
        let msgs = [
            Message::new("user", &cl),
            Message::new("assistant", "x"),
            Message::new("user", &render(&prompt(file), &DELIMS)),
        ];
        assert_eq!(classify(&msgs), class, "{file}");
    }
    assert_eq!(classify(&[Message::new("user", "hello")]), OTHER);
}

/// Microsoft GraphRAG 3.3's own prompt files, as `graphrag init` writes
/// them (tests/fixtures), are classified too: a GraphRAG project runs
/// against the mock as it is.
#[test]
fn graphrag_prompt_files_are_classified() {
    let dir = format!("{}/../tests/fixtures/graphrag-3.3.0-init/prompts", env!("CARGO_MANIFEST_DIR"));
    let mut seen = 0;
    for (file, class) in ONE_MESSAGE_PROMPTS {
        // GraphRAG has no file for the prompts only graphrag-rs has.
        let Ok(p) = std::fs::read_to_string(format!("{dir}/{file}.txt")) else { continue };
        seen += 1;
        let msgs = [Message::new("system", &p), Message::new("user", "What happened?")];
        assert_eq!(classify(&msgs), class, "GraphRAG's {file}.txt");
    }
    assert_eq!(seen, 12, "GraphRAG's prompt files");
    assert_eq!(classify(&[Message::new("user", "graphrag-rs connection check: reply with OK.")]), "connection_check");
}

const CHUNK: &str = "The Halvard Port Authority said on Monday that its director, Ines Okafor, will lead the expansion of the northern terminal in Brennick. The work is funded by the Coastal Development Bank. Okafor met Tomas Reyes in Brennick.";

fn extraction_prompt(td: &str) -> String {
    render(
        &prompt("extract_graph"),
        &[
            ("tuple_delimiter", td),
            ("record_delimiter", "@@"),
            ("completion_delimiter", "<DONE>"),
            ("entity_types", "ORGANIZATION,PERSON,GEO"),
            ("input_text", CHUNK),
        ],
    )
}

#[test]
fn extraction_reads_delimiters_and_text() {
    let p = extraction_prompt("{~}");
    let d = read_delims(&p);
    assert_eq!(d, Delims { tuple: "{~}".into(), record: "@@".into(), completion: "<DONE>".into() });
    assert_eq!(extraction_input(&p), CHUNK);
    assert_eq!(entity_types(&p), vec!["ORGANIZATION", "PERSON", "GEO"]);
    let out = answer(&[Message::new("user", &p)], None).content;
    assert!(out.ends_with("\n<DONE>"), "{out}");
    for n in ["HALVARD PORT AUTHORITY", "INES OKAFOR", "BRENNICK", "COASTAL DEVELOPMENT BANK", "TOMAS REYES", "OKAFOR"]
    {
        assert!(out.contains(&format!("(\"entity\"{{~}}{n}{{~}}")), "{n}: {out}");
    }
    assert!(!out.contains("{~}MONDAY{~}"));
    assert!(out.contains("(\"relationship\"{~}OKAFOR{~}TOMAS REYES{~}"), "{out}");
    assert!(out.contains("\n@@\n"));
    assert!(!out.contains("Example"));
}

#[test]
fn gleaning_adds_few_records_then_stops() {
    let p = extraction_prompt("<|>");
    let first = answer(&[Message::new("user", &p)], None).content;
    let cont = render(&prompt("extract_graph_continue"), &DELIMS);
    let lp = prompt("extract_graph_loop");
    let mut msgs = vec![Message::new("user", &p), Message::new("assistant", &first), Message::new("user", &cont)];
    let g = answer(&msgs, None);
    assert_eq!(g.class, "extract_graph_continue");
    // all 6 entities fit in the first answer: nothing to add
    assert_eq!(g.content, "<DONE>");
    msgs.push(Message::new("assistant", &g.content));
    msgs.push(Message::new("user", &lp));
    assert_eq!(answer(&msgs, None).content, "N");

    // with a first answer that missed records, gleaning adds up to two, then Y, then N
    let mut msgs = vec![
        Message::new("user", &p),
        Message::new("assistant", "(\"entity\"<|>BRENNICK<|>GEO<|>a town)\n<DONE>"),
        Message::new("user", &cont),
    ];
    let g = answer(&msgs, None).content;
    assert_eq!(g.matches("(\"entity\"").count(), 2, "{g}");
    assert!(!g.contains("<|>BRENNICK<|>"));
    msgs.push(Message::new("assistant", &g));
    msgs.push(Message::new("user", &lp));
    assert_eq!(answer(&msgs, None).content, "Y");
    msgs.push(Message::new("assistant", "Y"));
    msgs.push(Message::new("user", &cont));
    let g2 = answer(&msgs, None).content;
    msgs.push(Message::new("assistant", &g2));
    msgs.push(Message::new("user", &lp));
    assert_eq!(answer(&msgs, None).content, "N");
}

#[test]
fn claims_format() {
    let p = render(
        &prompt("extract_claims"),
        &[
            ("tuple_delimiter", "<|>"),
            ("record_delimiter", "##"),
            ("completion_delimiter", "<|COMPLETE|>"),
            ("entity_specs", "organization, person"),
            ("claim_description", "red flags"),
            ("input_text", CHUNK),
        ],
    );
    // the answer has 0-2 records, each with 8 fields
    let out = answer(&[Message::new("user", &p)], None).content;
    assert!(out.ends_with("<|COMPLETE|>"));
    for rec in out.trim_end_matches("<|COMPLETE|>").split("##") {
        let rec = rec.trim();
        if !rec.is_empty() {
            assert_eq!(rec.split("<|>").count(), 8, "{rec}");
        }
    }
    let c = claim_candidates(CHUNK);
    let r = claim_record(&read_delims(&p), &c[0]);
    assert!(r.starts_with("(HALVARD PORT AUTHORITY<|>INES OKAFOR<|>"), "{r}");
}

#[test]
fn summary_dedups_and_truncates() {
    let p = render(
        &prompt("summarize_descriptions"),
        &[
            ("entity_name", "ACME"),
            ("description_list", "[\"ACME is a firm\", \"acme is a firm\", \"ACME makes rockets.\"]"),
            ("max_length", "6"),
        ],
    );
    let a = answer(&[Message::new("user", &p)], None);
    assert_eq!(a.class, "summarize_descriptions");
    assert_eq!(a.content, "ACME is a firm. ACME makes");
}

#[test]
fn entity_pairs_are_answered_by_shared_words() {
    let questions = "Question 1:\n  A: \"SCROOGE\" (PERSON): a miser\n  B: \"MR SCROOGE\"\nQuestion 2:\n  A: \"MARLEY\"\n  B: \"BOB\"\n";
    let p = render(&prompt("resolve_entities"), &[("questions", questions)]);
    let a = answer(&[Message::new("user", &p)], None);
    assert_eq!(a.class, "resolve_entities");
    assert_eq!(a.content, "1: yes\n2: no");
    assert_eq!(
        graphrag_operations::entity_resolution::decisions::parse_decisions(&a.content, 2),
        Ok(vec![true, false])
    );
}

#[test]
fn community_report_cites_input_ids() {
    let input = "-----Entities-----\nid,entity,description\n3,RIVERSIDE,a cooperative\n8,EASTFIELD MARKET,a market\n\n-----Relationships-----\nid,source,target,description\n14,RIVERSIDE,EASTFIELD MARKET,sells at\n";
    let p = render(&prompt("community_report_graph"), &[("input_text", input), ("max_report_length", "1500")]);
    let a = answer(&[Message::new("user", &p)], None);
    assert_eq!(a.class, "community_report_graph");
    let v: Value = serde_json::from_str(&a.content).unwrap();
    assert_eq!(v["title"], "Riverside and Eastfield Market");
    let f = v["findings"].as_array().unwrap();
    assert!((2..=5).contains(&f.len()));
    assert!(f[0]["explanation"].as_str().unwrap().contains("[Data: Entities (3); Relationships (14)]"));
    assert!(!a.content.contains("Eastfield Town Council"), "example data leaked");
    let r = v["rating"].as_f64().unwrap();
    assert!((0.0..=10.0).contains(&r));

    let text_input =
        "-----SOURCES-----\nid|text\n0|Mei Lindqvist studies optics in Uppsala.\n1|Tomas Reyes builds sensors.\n";
    let p = render(&prompt("community_report_text"), &[("input_text", text_input), ("max_report_length", "1500")]);
    let v: Value = serde_json::from_str(&answer(&[Message::new("user", &p)], None).content).unwrap();
    assert!(v["summary"].as_str().unwrap().contains("[Data: Sources (0, 1)]"));
    assert_eq!(v["findings"].as_array().unwrap().len(), 2);
}

#[test]
fn query_answers() {
    let ctx = "-----Reports-----\nid|title|occurrence weight|content|rank\n5|Port expansion|1.0|The port grows.|8\n9|Bank loans|0.5|Loans fund it.|6\n";
    let p = render(&prompt("global_search_map_system_prompt"), &[("context_data", ctx), ("max_length", "500")]);
    let out = answer(&[Message::new("system", &p), Message::new("user", "What grows?")], None).content;
    let v: Value = serde_json::from_str(&out).unwrap();
    let pts = v["points"].as_array().unwrap();
    assert_eq!(pts.len(), 2);
    assert!(pts[0]["description"].as_str().unwrap().ends_with("[Data: Reports (5)]"));

    let p = render(
        &prompt("keywords_extraction"),
        &[("history", ""), ("query", "How did the closure of the Brennick steelworks affect jobs?")],
    );
    let v: Value = serde_json::from_str(&answer(&[Message::new("user", &p)], None).content).unwrap();
    assert_eq!(v["low_level_keywords"], json!(["Brennick"]));
    assert!(v["high_level_keywords"].as_array().unwrap().contains(&json!("Closure")));

    let p = render(
        &prompt("rate_community"),
        &[("description", "The port of Brennick will expand soon."), ("query", "Why does the Brennick port expand?")],
    );
    let v: Value = serde_json::from_str(&answer(&[Message::new("user", &p)], None).content).unwrap();
    assert_eq!(v["rating"], 3);

    let local = "-----Entities-----\nid|entity|description|number of relationships\n7|BRENNICK|a town|3\n-----Sources-----\nid|text\n2|Brennick text\n";
    let p =
        render(&prompt("local_search_system_prompt"), &[("context_data", local), ("response_type", "one paragraph")]);
    let out = answer(&[Message::new("system", &p), Message::new("user", "Where?")], None).content;
    assert!(out.contains("[Data: Entities (7); Sources (2)]"), "{out}");

    let p = render(&prompt("drift_primer"), &[("query", "What happened in Brennick?"), ("community_reports", ctx)]);
    let v: Value = serde_json::from_str(&answer(&[Message::new("user", &p)], None).content).unwrap();
    assert!(v["follow_up_queries"].as_array().unwrap().len() >= 5);
    assert!(v["intermediate_answer"].as_str().unwrap().contains("[Data: Reports (5, 9)]"));

    let p = render(
        &prompt("drift_search_system_prompt"),
        &[("context_data", local), ("response_type", "x"), ("global_query", "g"), ("followups", "1")],
    );
    assert_eq!(follow_up_limit(&p), Some(1));
    let v: Value =
        serde_json::from_str(&answer(&[Message::new("system", &p), Message::new("user", "Where?")], None).content)
            .unwrap();
    assert!(v["response"].is_string() && v["score"].is_u64() && v["follow_up_queries"].is_array());
    assert!(v["follow_up_queries"].as_array().unwrap().len() <= 1);

    let report = "# Brennick harbour\n\nThe harbour of Brennick ...";
    let p = render(&prompt("drift_query_expansion"), &[("query", "Who runs the port?"), ("template", report)]);
    let a = answer(&[Message::new("user", &p)], None);
    assert_eq!(a.class, "drift_expand");
    assert!(a.content.starts_with("# Brennick harbour\n") && a.content.contains("Who runs the port?"), "{}", a.content);
    // GraphRAG's own expansion prompt (inline in its code) is answered the same way.
    let graphrag = format!("Create a hypothetical answer to the following query: Who runs the port?\n\nFormat it to follow the structure of the template below:\n\n{report}\n\nEnsure that ...");
    let a = answer(&[Message::new("user", &graphrag)], None);
    assert!(a.class == "drift_expand" && a.content.contains("Who runs the port?"), "{}", a.content);

    let p = render(&prompt("question_gen_system_prompt"), &[("context_data", local), ("question_count", "3")]);
    let out = answer(&[Message::new("system", &p), Message::new("user", "Q?")], None).content;
    assert_eq!(out.lines().count(), 3);
    assert!(out.contains("Brennick"));
}

#[test]
fn json_mode_always_returns_json() {
    let rf = json!({"type": "json_object"});
    let a = answer(&[Message::new("user", "hello there")], Some(&rf));
    assert!(serde_json::from_str::<Value>(&a.content).unwrap().is_object());
    let rf = json!({"type": "json_schema", "json_schema": {"name": "x", "schema": {"type": "object", "properties": {"n": {"type": "integer"}, "tags": {"type": "array", "items": {"type": "string"}}}}}});
    let v: Value = serde_json::from_str(&answer(&[Message::new("user", "hi")], Some(&rf)).content).unwrap();
    assert_eq!(v["n"], 0);
    assert_eq!(v["tags"], json!(["This is a deterministic mock answer to: hi"]));
}

#[test]
fn a_corrective_retry_is_answered_like_the_request_before_it() {
    let p = extraction_prompt("<|>");
    let first = answer(&[Message::new("user", &p)], None);
    let corrected = answer(
        &[
            Message::new("user", &p),
            Message::new("assistant", "garbled"),
            Message::new("user", &format!("{CORRECTION}: it holds no record. Reply again.")),
        ],
        None,
    );
    assert_eq!(corrected, first);
}
