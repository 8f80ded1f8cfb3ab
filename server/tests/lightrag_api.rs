//! LightRAG 1.5.7's paths as its web UI and clients call them, against a
//! served project on the mock LLM: auth (guest mode, and the API key),
//! document listing with status filters, status counts, track ids, upload
//! statuses (unreadable types refused, duplicates `failed` with a reason),
//! structured retrieval, label search, graph edits that survive an update,
//! the paths not offered, and the OpenAPI description.

mod common;

use std::net::SocketAddr;

use common::*;
use graphrag_mock_llm::{MockConfig, MockServer};
use graphrag_server::{ServeOptions, Server};
use serde_json::{json, Value};

fn runs(addr: SocketAddr) -> u64 {
    get(addr, "/documents/pipeline_status").json()["runs"].as_u64().unwrap()
}

fn upload(addr: SocketAddr, name: &str, data: &[u8]) -> Response {
    let (ct, body) = multipart(name, data);
    request(addr, "POST", "/documents/upload", &[("Content-Type", &ct)], &body)
}

fn send_json(addr: SocketAddr, method: &str, path: &str, body: &Value) -> Response {
    request(addr, method, path, &[("Content-Type", "application/json")], body.to_string().as_bytes())
}

fn page(addr: SocketAddr, filter: Value) -> Value {
    let mut body = json!({"page": 1, "page_size": 10, "sort_field": "updated_at", "sort_direction": "desc"});
    body.as_object_mut().unwrap().extend(filter.as_object().unwrap().clone());
    let r = post_json(addr, "/documents/paginated", &body);
    assert_eq!(r.status, 200, "{body}: {}", r.text());
    r.json()
}

fn files(page: &Value) -> Vec<String> {
    page["documents"].as_array().unwrap().iter().map(|d| d["file_path"].as_str().unwrap().to_string()).collect()
}

fn url(s: &str) -> String {
    s.replace(' ', "%20").replace('\'', "%27")
}

#[test]
fn lightrag_web_ui_and_client_paths() {
    let mock = MockServer::start(MockConfig::default()).unwrap();
    let marley = carol("MARLEY'S GHOST", 1500);
    let project = project(&mock, &[("marley.txt", marley.clone())]);
    let root = project.path();
    index(root);
    let server = Server::start(ServeOptions { port: 0, ..ServeOptions::new(root) }).unwrap();
    let addr = server.addr();

    // Auth: guest mode, a JWT-shaped token the UI can read.
    let status = get(addr, "/auth-status").json();
    assert_eq!(status["auth_configured"], false);
    assert_eq!(status["auth_mode"], "disabled");
    assert_eq!(status["access_token"].as_str().unwrap().split('.').count(), 3);
    let login = request(
        addr,
        "POST",
        "/login",
        &[("Content-Type", "application/x-www-form-urlencoded")],
        b"username=a&password=b&grant_type=password",
    );
    assert_eq!(login.status, 200, "{}", login.text());
    assert!(login.json()["access_token"].is_string());
    assert_eq!(get(addr, "/auth/verify").json()["status"], "ok");
    assert_eq!(get(addr, "/ui/customization").json()["customized"], false);

    // The description: real schemas, and a page that renders it.
    let doc = get(addr, "/openapi.json").json();
    let paginated =
        &doc["paths"]["/documents/paginated"]["post"]["requestBody"]["content"]["application/json"]["schema"];
    assert_eq!(paginated["$ref"], "#/components/schemas/DocumentsRequest");
    assert!(doc["components"]["schemas"]["DocumentsRequest"]["properties"]["status_filters"].is_object());
    assert!(doc["paths"]["/documents/source_conflicts"]["get"]["summary"].as_str().unwrap().contains("not offered"));
    let docs = get(addr, "/docs");
    assert_eq!(docs.status, 200);
    assert!(docs.text().contains("/openapi.json"));

    // Listing with LightRAG 1.5.7's fields, null filters included.
    let all = page(addr, json!({"status_filter": null, "status_filters": null}));
    assert_eq!(files(&all), ["marley.txt"]);
    assert_eq!(all["status_counts"]["processed"], 1);
    assert_eq!(files(&page(addr, json!({"status_filter": "processed", "status_filters": null}))), ["marley.txt"]);
    assert!(files(&page(addr, json!({"status_filters": ["parsing", "failed"]}))).is_empty());
    assert_eq!(get(addr, "/documents/status_counts").json()["status_counts"]["all"], 1);

    // Only what the project reads is accepted.
    let types = get(addr, "/documents/supported_file_types").json();
    assert_eq!(types["supported_extensions"], json!([".txt"]));
    let refused = upload(addr, "notes.md", b"# Notes\n\nSome text.");
    assert_eq!(refused.status, 415, "{}", refused.text());
    let detail = refused.json()["detail"].as_str().unwrap().to_string();
    assert!(detail.contains(".txt") && detail.contains("input.type: text"), "{detail}");
    assert!(!root.join("input/notes.md").exists());

    // A content already in the input folder: failed, naming the earlier document.
    let dup = upload(addr, "copy.txt", marley.as_bytes());
    assert_eq!(dup.status, 200, "{}", dup.text());
    let dup = dup.json();
    assert_eq!(dup["status"], "failure");
    let track = get(addr, &format!("/documents/track_status/{}", dup["track_id"].as_str().unwrap())).json();
    assert_eq!(track["total_count"], 1, "{track}");
    let failed = &track["documents"][0];
    assert_eq!(failed["status"], "failed");
    assert_eq!(failed["file_path"], "copy.txt");
    let error = failed["error_msg"].as_str().unwrap();
    assert!(error.contains("duplicate") && error.contains("marley.txt"), "{error}");
    assert_eq!(failed["metadata"]["is_duplicate"], true);
    assert!(!root.join("input/copy.txt").exists());
    assert_eq!(files(&page(addr, json!({"status_filter": "failed"}))), ["copy.txt"]);
    // The same name again is a conflict, as in LightRAG.
    assert_eq!(upload(addr, "marley.txt", b"other text").status, 409);

    // An upload's track id follows it to processed; an extension in upper
    // case is accepted and indexed, as LightRAG's (issue #47: it was 415).
    let before = runs(addr);
    let r = upload(addr, "Fezziwig.TXT", carol("Old Fezziwig", 1500).as_bytes()).json();
    assert_eq!(r["status"], "success", "{r}");
    let track_id = r["track_id"].as_str().unwrap().to_string();
    idle_after(addr, before + 1);
    let track = get(addr, &format!("/documents/track_status/{track_id}")).json();
    assert_eq!(track["documents"][0]["file_path"], "Fezziwig.TXT", "{track}");
    assert_eq!(track["documents"][0]["status"], "processed", "{track}");
    assert_eq!(track["status_summary"]["processed"], 1);
    assert_eq!(get(addr, "/documents/track_status/nothing_here").json()["total_count"], 0);

    // A text with LightRAG's chunking field: accepted, and said not applied.
    let before = runs(addr);
    let r = post_json(
        addr,
        "/documents/text",
        &json!({"text": carol("Bob Cratchit", 800), "file_source": "cratchit", "chunking": {"strategy": "fixed_token", "params": {}}}),
    );
    assert_eq!(r.status, 200, "{}", r.text());
    assert!(r.json()["message"].as_str().unwrap().contains("chunking"));
    idle_after(addr, before + 1);

    // Structured retrieval.
    let data = post_json(addr, "/query/data", &json!({"query": "Who is Fezziwig?", "mode": "local", "top_k": 10}));
    assert_eq!(data.status, 200, "{}", data.text());
    let data = data.json();
    assert_eq!(data["status"], "success");
    assert!(!data["data"]["chunks"].as_array().unwrap().is_empty(), "{data}");
    assert!(!data["data"]["entities"].as_array().unwrap().is_empty(), "{data}");
    assert_eq!(data["metadata"]["query_mode"], "local");

    // Labels: popular and searched.
    let popular = get(addr, "/graph/label/popular?limit=5").json();
    let popular: Vec<String> = popular.as_array().unwrap().iter().map(|l| l.as_str().unwrap().to_string()).collect();
    assert!(!popular.is_empty() && popular.len() <= 5);
    let label = popular[0].clone();
    let part = &label[..label.len().min(4)].to_lowercase();
    let found = get(addr, &format!("/graph/label/search?q={}&limit=10", url(part))).json();
    assert!(found.as_array().unwrap().iter().any(|l| l == label.as_str()), "{found}");
    assert_eq!(get(addr, "/graph/label/search?limit=10").status, 422);

    // Graph edits: kept in graph_edits.yaml, applied by the update, and by the next one.
    let before = runs(addr);
    let r = post_json(
        addr,
        "/graph/entity/edit",
        &json!({"entity_name": label, "updated_data": {"description": "EDITED BY THE WEB UI"}, "allow_rename": false, "allow_merge": false}),
    );
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(r.json()["data"]["description"], "EDITED BY THE WEB UI");
    // An empty new name is refused, not recorded (graph_edits.yaml refuses it).
    let r = post_json(
        addr,
        "/graph/entity/edit",
        &json!({"entity_name": label, "updated_data": {"entity_name": "  "}, "allow_rename": true, "allow_merge": false}),
    );
    assert_eq!(r.status, 422, "{}", r.text());
    let r = post_json(
        addr,
        "/graph/entity/create",
        &json!({"entity_name": "Tiny Tim's Crutch", "entity_data": {"entity_type": "OBJECT", "description": "A small crutch."}}),
    );
    assert_eq!(r.status, 200, "{}", r.text());
    // The two edits may be applied by one update or two: wait for the second's result.
    idle_after(addr, before + 1);
    wait_for("the created entity", || {
        (get(addr, "/graph/entity/exists?name=Tiny%20Tim%27s%20Crutch").json()["exists"] == true).then_some(())
    });
    idle_after(addr, runs(addr));
    let before = runs(addr);
    let r = post_json(
        addr,
        "/graph/relation/create",
        &json!({"source_entity": label, "target_entity": "TINY TIM'S CRUTCH", "relation_data": {"description": "sees it", "weight": 2.0}}),
    );
    assert_eq!(r.status, 200, "{}", r.text());
    idle_after(addr, before + 1);
    assert!(std::fs::read_to_string(root.join("graph_edits.yaml")).unwrap().contains("EDITED BY THE WEB UI"));
    let check = || {
        let detail = get(addr, &format!("/graph/entity/detail?name={}", url(&label))).json();
        assert_eq!(detail["description"], "EDITED BY THE WEB UI", "{detail}");
        assert!(
            detail["relationships"].as_array().unwrap().iter().any(|r| r["neighbour"] == "TINY TIM'S CRUTCH"),
            "{detail}"
        );
        assert_eq!(get(addr, "/graph/entity/exists?name=Tiny%20Tim%27s%20Crutch").json()["exists"], true);
    };
    check();
    // Another update (a scan) rebuilds the graph: the edits stay.
    let before = runs(addr);
    assert_eq!(post_json(addr, "/documents/scan", &json!({})).status, 200);
    idle_after(addr, before + 1);
    check();
    // Edits of what is not there are refused.
    let r = post_json(
        addr,
        "/graph/entity/edit",
        &json!({"entity_name": "NOBODY AT ALL", "updated_data": {"description": "x"}}),
    );
    assert_eq!(r.status, 404);
    let r = post_json(addr, "/graph/entity/edit", &json!({"entity_name": label, "updated_data": {"color": "red"}}));
    assert_eq!(r.status, 422);
    assert!(r.json()["detail"].as_str().unwrap().contains("color"));

    // Relation edit, merge, relation and entity delete: each checked against the graph
    // its predecessor's update published.
    let exists = |name: &str| get(addr, &format!("/graph/entity/exists?name={}", url(name))).json()["exists"] == true;
    let step = |method: &str, path: &str, body: Value| {
        let before = runs(addr);
        let r = send_json(addr, method, path, &body);
        assert_eq!(r.status, 200, "{path}: {}", r.text());
        idle_after(addr, before + 1);
    };
    step(
        "POST",
        "/graph/relation/edit",
        json!({"source_id": label, "target_id": "TINY TIM'S CRUTCH", "updated_data": {"weight": 5.0}}),
    );
    let g = get(addr, &format!("/graphs?label={}&max_depth=1&max_nodes=50", url(&label))).json();
    let edge = g["edges"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["target"] == "TINY TIM'S CRUTCH" || e["source"] == "TINY TIM'S CRUTCH");
    assert_eq!(edge.expect("the created relationship")["properties"]["weight"], 5.0);
    step(
        "POST",
        "/graph/entities/merge",
        json!({"entities_to_change": ["Tiny Tim's Crutch"], "entity_to_change_into": "The Crutch"}),
    );
    assert!(exists("THE CRUTCH") && !exists("TINY TIM'S CRUTCH"));
    step("DELETE", "/graph/relation/delete", json!({"source_entity": label, "target_entity": "THE CRUTCH"}));
    step("DELETE", "/graph/entity/delete", json!({"entity_name": "THE CRUTCH"}));
    assert!(!exists("THE CRUTCH"));
    assert_eq!(send_json(addr, "DELETE", "/graph/entity/delete", &json!({"entity_name": "THE CRUTCH"})).status, 404);

    // Deleting an unknown id is not an error (LightRAG answers 200).
    let r = send_json(addr, "DELETE", "/documents/delete_document", &json!({"doc_ids": ["no-such-id"]}));
    assert_eq!(r.status, 200, "{}", r.text());
    assert!(r.json()["message"].as_str().unwrap().contains("no-such-id"));
    // The duplicate's failed record can be deleted like a document.
    let r = send_json(addr, "DELETE", "/documents/delete_document", &json!({"doc_ids": [failed["id"]]}));
    assert_eq!(r.status, 200);
    assert!(files(&page(addr, json!({"status_filter": "failed"}))).is_empty());
    // Files put in the folder by hand that no run will index are failed with the reason,
    // not pending for ever.
    std::fs::write(root.join("input/hand_copy.txt"), &marley).unwrap();
    std::fs::write(root.join("input/hand_notes.md"), "# Notes").unwrap();
    let failed = page(addr, json!({"status_filter": "failed"}));
    let mut names = files(&failed);
    names.sort();
    assert_eq!(names, ["hand_copy.txt", "hand_notes.md"]);
    let reason = |file: &str| {
        let d = failed["documents"].as_array().unwrap().iter().find(|d| d["file_path"] == file).unwrap();
        d["error_msg"].as_str().unwrap().to_string()
    };
    assert!(reason("hand_copy.txt").contains("duplicate") && reason("hand_copy.txt").contains("marley.txt"));
    assert!(reason("hand_notes.md").contains("input.type: text"), "{}", reason("hand_notes.md"));

    // Pipeline control, and the paths not offered.
    assert_eq!(post_json(addr, "/documents/cancel_pipeline", &json!({})).json()["status"], "not_busy");
    let before = runs(addr);
    assert_eq!(post_json(addr, "/documents/reprocess_failed", &json!({})).json()["status"], "reprocessing_started");
    idle_after(addr, before + 1);
    let r = post_json(addr, "/documents/clear_cache", &json!({}));
    assert_eq!(r.status, 501);
    assert!(r.json()["detail"].as_str().unwrap().contains("not offered"));
    assert_eq!(get(addr, "/documents/source_conflicts").status, 501);

    // Clear everything: the empty index is published.
    let before = runs(addr);
    let r = send_json(addr, "DELETE", "/documents", &json!({}));
    assert_eq!(r.json()["status"], "success", "{}", r.text());
    idle_after(addr, before + 1);
    assert_eq!(get(addr, "/documents/status_counts").json()["status_counts"]["all"], 0);
    drop(server);
}

#[test]
fn with_a_key_the_guest_token_alone_gets_lightrags_403() {
    let mock = MockServer::start(MockConfig::default()).unwrap();
    let project = project(&mock, &[]);
    let opts = ServeOptions { port: 0, api_key: Some("the-key".into()), ..ServeOptions::new(project.path()) };
    let server = Server::start(opts).unwrap();
    let addr = server.addr();
    // Public: the UI's start-up paths.
    let status = get(addr, "/auth-status").json();
    assert_eq!(status["auth_configured"], false);
    let token = status["access_token"].as_str().unwrap().to_string();
    assert_eq!(get(addr, "/openapi.json").status, 200);
    let bearer = format!("Bearer {token}");
    let r = request(addr, "GET", "/auth/verify", &[("Authorization", &bearer)], b"");
    assert_eq!((r.status, r.json()["detail"].as_str().unwrap()), (403, "API Key required"));
    let r = request(addr, "GET", "/auth/verify", &[("Authorization", &bearer), ("X-API-Key", "wrong")], b"");
    assert_eq!((r.status, r.json()["detail"].as_str().unwrap()), (403, "Invalid API Key"));
    let r = request(addr, "GET", "/auth/verify", &[("Authorization", &bearer), ("X-API-Key", "the-key")], b"");
    assert_eq!(r.status, 200);
    // Other clients keep the 401.
    assert_eq!(get(addr, "/documents/status_counts").status, 401);
}

#[test]
fn lightrags_built_web_ui_is_served_from_a_folder() {
    let mock = MockServer::start(MockConfig::default()).unwrap();
    let project = project(&mock, &[]);
    let ui = tempfile::tempdir().unwrap();
    std::fs::create_dir(ui.path().join("assets")).unwrap();
    std::fs::write(ui.path().join("index.html"), "<html><!-- __LIGHTRAG_RUNTIME_CONFIG__ --></html>").unwrap();
    std::fs::write(ui.path().join("assets/index-1.js"), "console.log(1)").unwrap();
    let opts = ServeOptions { port: 0, webui_dir: Some(ui.path().to_path_buf()), ..ServeOptions::new(project.path()) };
    let server = Server::start(opts).unwrap();
    let addr = server.addr();
    let index = get(addr, "/webui/");
    assert_eq!(index.status, 200);
    assert!(index.text().contains("window.__LIGHTRAG_CONFIG__"), "{}", index.text());
    assert_eq!(get(addr, "/webui/assets/index-1.js").header("content-type"), Some("text/javascript; charset=utf-8"));
    assert_eq!(get(addr, "/webui/../Cargo.toml").status, 404);
    let missing =
        ServeOptions { port: 0, webui_dir: Some(project.path().join("nowhere")), ..ServeOptions::new(project.path()) };
    assert!(Server::start(missing).err().unwrap().to_string().contains("index.html"));
}

#[test]
fn query_ids_are_refused_and_max_total_tokens_bounds_the_context() {
    let mock = MockServer::start(MockConfig::default()).unwrap();
    let root = project(&mock, &[("marley.txt", carol("MARLEY'S GHOST", 6000))]);
    index(root.path());
    let server = Server::start(ServeOptions { port: 0, ..ServeOptions::new(root.path()) }).unwrap();
    let addr = server.addr();
    let context = |extra: Value| {
        let mut body = json!({"query": "Who is Marley?", "mode": "basic", "only_need_context": true});
        body.as_object_mut().unwrap().extend(extra.as_object().unwrap().clone());
        let r = post_json(addr, "/query", &body);
        (r.status, r.json()["response"].as_str().map(str::to_string), r.text())
    };
    let (status, whole, text) = context(json!({}));
    assert_eq!(status, 200, "{text}");
    let whole = whole.unwrap();
    // Below basic_search.max_context_tokens (12,000): the bound is the budget.
    let (status, bounded, text) = context(json!({"max_total_tokens": 400}));
    assert_eq!(status, 200, "{text}");
    let bounded = bounded.unwrap();
    assert!(!bounded.is_empty() && bounded.len() < whole.len() / 2, "{} of {} bytes", bounded.len(), whole.len());
    // Above it (LightRAG's web UI sends 30,000): nothing changes.
    assert_eq!(context(json!({"max_total_tokens": 30000})).1.as_deref(), Some(whole.as_str()));
    // A bound global search cannot keep, and none at all: 422 naming the field.
    let r = post_json(addr, "/query", &json!({"query": "Who is Marley?", "mode": "global", "max_total_tokens": 1000}));
    assert_eq!(r.status, 422, "{}", r.text());
    assert!(r.text().contains("max_total_tokens") && r.text().contains("global_search.max_context_tokens"));
    let (status, _, text) = context(json!({"max_total_tokens": 0}));
    assert_eq!(status, 422, "{text}");
    assert!(text.contains("max_total_tokens"), "{text}");

    // ids: documents to answer from, which the index cannot filter by.
    let (status, _, text) = context(json!({"ids": ["doc-1"]}));
    assert_eq!(status, 422, "{text}");
    assert!(text.contains("ids"), "{text}");
    for none in [json!(null), json!([])] {
        assert_eq!(context(json!({ "ids": none })).1.as_deref(), Some(whole.as_str()));
    }

    // GET / is in the description, as the redirect it is.
    let doc = get(addr, "/openapi.json").json();
    assert!(doc["paths"]["/"]["get"]["responses"]["302"].is_object(), "{}", doc["paths"]["/"]);
    assert_eq!(get(addr, "/").status, 302);
}

#[test]
fn enable_rerank_reranks_the_chunks_with_the_configured_model() {
    let mock = MockServer::start(MockConfig::default()).unwrap();
    let root = project(&mock, &[("marley.txt", carol("MARLEY'S GHOST", 6000))]);
    let settings = root.path().join("settings.yaml");
    let rerank = format!(
        "rerank_models:\n  default_rerank_model:\n    model_provider: jina\n    model: mock-rerank\n    api_base: {}\n    api_key: sk-test\nrerank:\n  model_id: default_rerank_model\n  by_default: false\n",
        mock.base_url()
    );
    std::fs::write(&settings, std::fs::read_to_string(&settings).unwrap() + &rerank).unwrap();
    index(root.path());
    let server = Server::start(ServeOptions { port: 0, ..ServeOptions::new(root.path()) }).unwrap();
    let ask = |enable_rerank: Value| {
        let body = json!({"query": "Who is Marley?", "mode": "mix", "only_need_context": true,
            "include_context_records": true, "enable_rerank": enable_rerank});
        let r = post_json(server.addr(), "/query", &body);
        assert_eq!(r.status, 200, "{}", r.text());
        r.json()["context_records"]["rerank"].clone()
    };
    // rerank.by_default is false: only a request that asks is reranked.
    assert!(ask(json!(null)).is_null());
    assert_eq!(mock.stats().rerank_requests, 0);
    assert_eq!(ask(json!(true))["model"], "default_rerank_model");
    assert_eq!(mock.stats().rerank_requests, 1);
    assert!(ask(json!(false)).is_null());
}
