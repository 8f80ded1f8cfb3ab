//! End-to-end: `graphrag-rs eval` on a tiny corpus indexed with the fast
//! method (no chat model, local all-MiniLM-L6-v2 embeddings).

use std::fs;
use std::process::{Command, Output};

fn graphrag(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_graphrag-rs")).args(args).output().expect("binary runs")
}

fn text(o: &Output) -> String {
    format!("{}{}", String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr))
}

/// `graphrag-rs -q eval --root ROOT --questions QUESTIONS ARGS… --output OUT`.
fn eval(root: &str, questions: &std::path::Path, args: &[&str], out: &std::path::Path) -> Output {
    let mut all = vec!["-q", "eval", "--root", root, "--questions", questions.to_str().unwrap()];
    all.extend_from_slice(args);
    all.extend(["--output", out.to_str().unwrap()]);
    graphrag(&all)
}

const DOCS: [(&str, &str); 6] = [
    ("lighthouse.txt", "The Skerry Point lighthouse was kept by Morag Baird for thirty years. Morag Baird lit the lamp every evening and logged every passing ship in the Skerry Point ledger."),
    ("bakery.txt", "Tomas Lindqvist runs the Lindqvist bakery on Harbour Street. Tomas Lindqvist bakes cardamom buns every morning and sells rye bread to the fishermen of the harbour."),
    ("orchestra.txt", "The Vellmar Orchestra was conducted by Ines Okafor. Ines Okafor chose Bruckner symphonies for the Vellmar Orchestra winter season at the old opera house."),
    ("volcano.txt", "Mount Karrow is a dormant volcano in the northern range. Geologists from the Karrow Institute measure the gases of Mount Karrow every spring."),
    ("chess.txt", "Pavel Drozd won the Riverside chess championship twice. Pavel Drozd trains young chess players at the Riverside club on Saturdays."),
    ("garden.txt", "The Elm Lane community garden grows tomatoes, beans and sunflowers. Volunteers of the Elm Lane garden share the harvest with the neighbourhood kitchen."),
];

#[test]
fn eval_scores_retrieval_and_writes_json() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().to_str().unwrap();
    assert!(graphrag(&["init", "--root", root]).status.success());
    fs::create_dir_all(dir.path().join("input/week1")).unwrap();
    for (name, body) in DOCS {
        fs::write(dir.path().join("input/week1").join(name), body).unwrap();
    }
    // No API key: `auto` picks the fast method.
    let o = graphrag(&["-q", "index", "--root", root]);
    assert!(o.status.success(), "{}", text(&o));

    let lighthouse = DOCS[0].1;
    let questions = serde_json::json!([
        {
            "id": "passage", "question": "Who kept the Skerry Point lighthouse?", "answer": "Morag Baird",
            "answer_aliases": [], "type": "single",
            "gold_docs": ["week1/lighthouse.txt"],
            // Other case and whitespace than the indexed text.
            "gold_passages": [lighthouse.to_uppercase().replace(". ", ".\n  ")],
        },
        {
            "id": "absent", "question": "Who conducts the Vellmar Orchestra?", "answer": null, "type": "single",
            "gold_docs": [],
            "gold_passages": ["The Vellmar Orchestra was founded in 1871 by the brewer August Hallström, who paid the musicians in beer."],
        },
        {
            "id": 7, "question": "Which volcano do the Karrow Institute geologists measure?", "type": "multi",
            "gold_docs": ["corpus/week1/volcano.txt"], "gold_passages": [],
        },
        {"id": "null", "question": "What is the capital of Atlantis?", "type": "multi", "gold_docs": [], "gold_passages": []},
    ]);
    let qfile = dir.path().join("questions.json");
    fs::write(&qfile, questions.to_string()).unwrap();
    let out = dir.path().join("eval.json");
    let o = eval(root, &qfile, &["--method", "basic,local,mix", "--k", "3"], &out);
    assert!(o.status.success(), "{}", text(&o));
    let table = String::from_utf8_lossy(&o.stdout).to_string();
    assert!(table.starts_with("method  k  budget  type"), "{table}");
    assert!(table.lines().any(|l| l.starts_with("basic   3       -  all     3/4")), "{table}");

    let report: serde_json::Value = serde_json::from_slice(&fs::read(&out).unwrap()).unwrap();
    assert_eq!(report["questions"], 4);
    assert_eq!(report["methods"], serde_json::json!(["basic", "local", "mix"]));
    let per_question = report["per_question"].as_array().unwrap();
    assert_eq!(per_question.len(), 12, "3 methods × 4 questions");
    let score = |method: &str, id: &str| {
        per_question.iter().find(|q| q["method"] == method && q["id"] == id).unwrap_or_else(|| panic!("{method} {id}"))
    };
    let basic = score("basic", "passage");
    assert_eq!(basic["gold"], "passages");
    assert_eq!(basic["recall"], 1.0, "{basic}");
    assert_eq!(basic["ranks"], serde_json::json!([1]), "the lighthouse passage is the first source: {basic}");
    assert_eq!(basic["k"], 3);
    assert!(basic["context_tokens"].as_u64().unwrap() > 0);
    assert!(basic["latency_ms"].as_f64().unwrap() > 0.0);
    assert_eq!(basic["answer"], serde_json::Value::Null, "no chat call");
    assert_eq!(score("basic", "absent")["recall"], 0.0, "a different passage does not count");
    assert_eq!(score("basic", "absent")["ranks"], serde_json::json!([null]));
    let by_document = score("basic", "7");
    assert_eq!((by_document["gold"].as_str(), by_document["recall"].as_f64()), (Some("documents"), Some(1.0)));
    assert_eq!(score("local", "null")["gold"], "none");
    assert_eq!(score("local", "null")["recall"], serde_json::Value::Null);

    let summary = report["summary"].as_array().unwrap();
    let rows: Vec<(&str, &str)> =
        summary.iter().map(|r| (r["method"].as_str().unwrap(), r["type"].as_str().unwrap())).collect();
    assert_eq!(rows.len(), 9, "per method: all, multi, single; {rows:?}");
    assert_eq!(rows[..3], [("basic", "all"), ("basic", "multi"), ("basic", "single")]);
    let basic_all = &summary[0];
    for key in ["recall", "all_found", "context_tokens", "latency_p50_ms", "latency_p95_ms", "questions", "scored"] {
        assert!(basic_all[key].is_number(), "{key}: {basic_all}");
    }
    assert_eq!(basic_all["scored"], 3);
    assert!((basic_all["recall"].as_f64().unwrap() - 2.0 / 3.0).abs() < 1e-9, "{basic_all}");
    // recall@k: among the first 2, 5, 10 source text units (here all of them fit).
    for key in ["recall_at_2", "recall_at_5", "recall_at_10"] {
        assert!((basic_all[key].as_f64().unwrap() - 2.0 / 3.0).abs() < 1e-9, "{key}: {basic_all}");
    }

    // Equal budgets: every method packs its context to each budget, baselines included.
    let o = eval(root, &qfile, &["--method", "dense,bm25,basic,ppr,local", "--budget", "30,400"], &out);
    assert!(o.status.success(), "{}", text(&o));
    let report: serde_json::Value = serde_json::from_slice(&fs::read(&out).unwrap()).unwrap();
    let per_question = report["per_question"].as_array().unwrap();
    assert_eq!(per_question.len(), 5 * 2 * 4, "5 methods × 2 budgets × 4 questions");
    for q in per_question {
        let budget = q["budget"].as_u64().unwrap();
        assert!(q["context_tokens"].as_u64().unwrap() <= budget, "{q}");
    }
    let found = |method: &str, budget: u64| {
        per_question
            .iter()
            .find(|q| q["method"] == method && q["id"] == "passage" && q["budget"] == budget)
            .map(|q| q["recall"].as_f64().unwrap())
            .unwrap()
    };
    for method in ["dense", "bm25", "basic", "ppr", "local"] {
        assert_eq!(found(method, 30), 0.0, "{method}: a 30-token context holds no passage");
        assert_eq!(found(method, 400), 1.0, "{method}: the lighthouse passage at 400 tokens");
    }

    // `--gold answer`: the answer's words, whatever the evidence; questions without an answer are not scored.
    let o = eval(root, &qfile, &["--method", "bm25", "--budget", "30,400", "--gold", "answer"], &out);
    assert!(o.status.success(), "{}", text(&o));
    assert!(
        String::from_utf8_lossy(&o.stdout).lines().any(|l| l.starts_with("bm25    -     400  all     1/4")),
        "{}",
        text(&o)
    );
    let report: serde_json::Value = serde_json::from_slice(&fs::read(&out).unwrap()).unwrap();
    let per_question = report["per_question"].as_array().unwrap();
    let at = |id: &str, budget: u64| {
        let q = per_question.iter().find(|q| q["id"] == id && q["budget"] == budget).unwrap();
        (q["gold"].as_str().unwrap().to_string(), q["found"].clone())
    };
    assert_eq!(at("passage", 400), ("answer".to_string(), serde_json::json!([true, true])));
    assert_eq!(at("passage", 30), ("answer".to_string(), serde_json::json!([false, false])));
    assert_eq!(at("absent", 400).0, "none", "no answer: not scored, though it has a gold passage");
    let o = graphrag(&["eval", "--root", root, "--questions", qfile.to_str().unwrap(), "--gold", "words"]);
    assert!(!o.status.success() && text(&o).contains("evidence, answer"), "{}", text(&o));

    // Global search retrieves nothing to score.
    let o = graphrag(&["eval", "--root", root, "--questions", qfile.to_str().unwrap(), "--method", "basic,global"]);
    assert!(!o.status.success());
    assert!(text(&o).contains("--method global: global search retrieves nothing to score"), "{}", text(&o));
}

/// A 2WikiMultihopQA-style question over titled paragraphs: the film's
/// paragraph names its director, whose own paragraph is titled by his name.
/// With the title options of `ppr_search` (its defaults where documents
/// have titles) the two gold paragraphs are the first two sources.
#[test]
fn ppr_title_options_put_the_named_passage_and_its_bridge_first() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().to_str().unwrap();
    assert!(graphrag(&["init", "--root", root]).status.success());
    let settings_path = dir.path().join("settings.yaml");
    let settings = fs::read_to_string(&settings_path).unwrap();
    let titled = settings.replacen("input:\n  type: text", "input:\n  type: json", 1).replacen(
        "  # title_column: title",
        "  title_column: title",
        1,
    );
    assert!(titled.contains("  title_column: title"));
    fs::write(&settings_path, &titled).unwrap();
    let film = "Moguds Pellams is a 1983 Telugu drama film directed by Ranganath.";
    let director = "Ranganath was born on 17 July 1949 in Madras. He acted in more than 300 Telugu films and directed some of them.";
    // Two other films of his cast, and paragraphs on other things.
    let records = serde_json::json!([
        {"title": "Moguds Pellams", "text": film},
        {"title": "Ranganath (actor)", "text": director},
        {"title": "Kalyana Veena", "text": "Kalyana Veena is a 1980 Telugu drama film starring Ranganath and Jayasudha."},
        {"title": "Premabhishekam", "text": "Premabhishekam is a 1981 Telugu film starring Ranganath, Jayasudha and Sobhan Babu."},
        {"title": "Lake Ohrid", "text": "Lake Ohrid lies between North Macedonia and Albania."},
        {"title": "Struga", "text": "Struga is a town on Lake Ohrid in North Macedonia."},
        {"title": "Bristol Harbour", "text": "Bristol Harbour is the historic port of Bristol in England."},
        {"title": "Clifton", "text": "Clifton is a suburb of Bristol, known for its suspension bridge."},
        {"title": "Mount Karrow", "text": "Mount Karrow is a dormant volcano watched by the Karrow Institute."},
        {"title": "Karrow Institute", "text": "The Karrow Institute measures the gases of Mount Karrow every spring."},
    ]);
    fs::write(dir.path().join("input/corpus.json"), records.to_string()).unwrap();
    let o = graphrag(&["-q", "index", "--root", root, "--method", "fast"]);
    assert!(o.status.success(), "{}", text(&o));
    let questions = serde_json::json!([{
        "id": "q", "question": "What is the date of birth of the director of film Moguds Pellams?",
        "answer": "17 July 1949", "type": "2hop", "gold_docs": [], "gold_passages": [film, director],
    }]);
    let qfile = dir.path().join("questions.json");
    fs::write(&qfile, questions.to_string()).unwrap();
    let out = dir.path().join("eval.json");
    let ranks = || {
        let o = eval(root, &qfile, &["--method", "ppr", "--budget", "2000"], &out);
        assert!(o.status.success(), "{}", text(&o));
        let report: serde_json::Value = serde_json::from_slice(&fs::read(&out).unwrap()).unwrap();
        report["per_question"][0]["ranks"].clone()
    };
    // The defaults (null) with titles: the title options on.
    assert_eq!(ranks(), serde_json::json!([1, 2]));
    let plain = titled
        .replacen("  specificity: null ", "  specificity: entities ", 1)
        .replacen("  title_edge_weight: null ", "  title_edge_weight: 1 ", 1)
        .replacen("  title_seed_weight: null ", "  title_seed_weight: 0 ", 1)
        .replacen("  walk_head: null ", "  walk_head: 0 ", 1)
        .replacen("  bridge_units: null ", "  bridge_units: 0 ", 1);
    assert_eq!(plain.matches("walk_head: 0 ").count(), 1, "the example's ppr_search lines");
    assert_eq!(plain.matches("bridge_units: 0 ").count(), 1, "the example's ppr_search lines");
    fs::write(&settings_path, plain).unwrap();
    // Without them the films of his cast come first (the fusion of the walk and the hybrid ranking).
    let plain = ranks();
    assert!(plain[1].as_u64().unwrap() > 2, "{plain}");
}
