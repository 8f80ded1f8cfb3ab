//! The OpenAPI description at `/openapi.json`, from the route table: every
//! path with its parameters and the JSON schemas of its request and
//! response bodies (`openapi_schemas`), and LightRAG's paths graphrag-rs does
//! not offer, with the reason.

use serde_json::{json, Map, Value};

pub use crate::openapi_schemas::schemas;

pub struct Route {
    pub method: &'static str,
    pub path: &'static str,
    pub tag: &'static str,
    pub summary: &'static str,
    /// The request body: content type and schema name.
    pub body: Option<(&'static str, &'static str)>,
    /// The 200 answer: content type and schema name.
    pub answers: (&'static str, &'static str),
    /// Query and path parameters: (in, name, required, description).
    pub params: &'static [(&'static str, &'static str, bool, &'static str)],
}

const fn r(
    method: &'static str,
    path: &'static str,
    tag: &'static str,
    summary: &'static str,
    body: Option<(&'static str, &'static str)>,
    answers: (&'static str, &'static str),
) -> Route {
    Route { method, path, tag, summary, body, answers, params: &[] }
}

const fn p(route: Route, params: &'static [(&'static str, &'static str, bool, &'static str)]) -> Route {
    Route { params, ..route }
}

const JSON: &str = "application/json";
const NDJSON: &str = "application/x-ndjson";
const HTML: &str = "text/html";
const FORM: &str = "application/x-www-form-urlencoded";
const MULTIPART: &str = "multipart/form-data";

/// The schema of a redirect's answer, whose status is 302 rather than 200.
const REDIRECT: &str = "Redirect";

const fn json_body(schema: &'static str) -> Option<(&'static str, &'static str)> {
    Some((JSON, schema))
}

/// Paths that need no API key.
pub const PUBLIC: [&str; 8] = [
    "/",
    "/health",
    "/auth-status",
    "/login",
    "/openapi.json",
    "/docs",
    "/ui/customization",
    "/ui/customization/assets/{asset_hash}/{asset_id}",
];

#[rustfmt::skip]
pub const ROUTES: &[Route] = &[
    r("get", "/", "system", "Redirects (302) to the web UI at /webui/ (public)", None, ("text/plain", REDIRECT)),
    r("get", "/health", "system", "Status and configuration (no API key needed)", None, (JSON, "Health")),
    r("get", "/openapi.json", "system", "This description (public)", None, (JSON, "Object")),
    r("get", "/docs", "system", "This description as a page (public)", None, (HTML, "Html")),
    r("get", "/auth-status", "auth", "LightRAG's auth status: guest mode (no user accounts), with a guest token", None, (JSON, "AuthStatus")),
    r("post", "/login", "auth", "LightRAG's login: there are no accounts, so any form gets the guest token", Some((FORM, "LoginForm")), (JSON, "AuthStatus")),
    r("get", "/auth/verify", "auth", "Whether the request's credentials (the API key) are good", None, (JSON, "StatusOk")),
    r("get", "/ui/customization", "auth", "LightRAG's UI customisation: none configured", None, (JSON, "UiCustomization")),
    p(r("get", "/ui/customization/assets/{asset_hash}/{asset_id}", "auth", "A customisation asset: none exist (404)", None, (JSON, "Error")),
        &[("path", "asset_hash", true, "asset hash"), ("path", "asset_id", true, "asset id")]),
    r("get", "/documents", "documents", "Every document by status (pending, processing, processed, failed)", None, (JSON, "DocsStatuses")),
    r("delete", "/documents", "documents", "Remove every document from the input folder and publish the empty index", None, (JSON, "ClearDocumentsResponse")),
    r("post", "/documents/paginated", "documents", "One page of documents: status_filter(s), page, page_size, sort_field, sort_direction", json_body("DocumentsRequest"), (JSON, "PaginatedDocsResponse")),
    r("get", "/documents/status_counts", "documents", "How many documents have each status", None, (JSON, "StatusCountsResponse")),
    p(r("get", "/documents/track_status/{track_id}", "documents", "The documents an upload or insert (its track_id) added, with their statuses", None, (JSON, "TrackStatusResponse")),
        &[("path", "track_id", true, "the track_id an upload or insert answered")]),
    r("get", "/documents/pipeline_status", "documents", "The update run: busy, current step, messages", None, (JSON, "PipelineStatusResponse")),
    r("get", "/documents/supported_file_types", "documents", "The file types the project's input settings read (uploads of others are refused with 415)", None, (JSON, "SupportedFileTypesResponse")),
    p(r("post", "/documents/upload", "documents", "Upload files (field `file`) into the input folder and queue an update; 415 for a type the project does not read; a content already in the folder ends `failed` (duplicate)", Some((MULTIPART, "UploadForm")), (JSON, "InsertResponse")),
        &[("query", "overwrite", false, "true: replace a document of the same name (else 409)")]),
    r("post", "/documents/text", "documents", "Insert one text and queue an update", json_body("InsertTextRequest"), (JSON, "InsertResponse")),
    r("post", "/documents/texts", "documents", "Insert texts and queue an update", json_body("InsertTextsRequest"), (JSON, "InsertResponse")),
    r("post", "/documents/scan", "documents", "Queue an update over the input folder as it is", None, (JSON, "ScanResponse")),
    r("post", "/documents/reprocess_failed", "documents", "Queue an update: documents whose indexing failed are processed again", None, (JSON, "ReprocessResponse")),
    r("post", "/documents/cancel_pipeline", "documents", "Stop the running update (the published index stays as it was)", None, (JSON, "CancelPipelineResponse")),
    r("delete", "/documents/delete_document", "documents", "Remove documents by id from the input folder and queue the update that drops them (unknown ids are named, not an error)", json_body("DeleteDocRequest"), (JSON, "DeleteDocByIdResponse")),
    r("post", "/query", "query", "Answer a question", json_body("QueryRequest"), (JSON, "QueryResponse")),
    r("post", "/query/stream", "query", "The same, streamed as NDJSON lines {response}, then {references}", json_body("QueryRequest"), (NDJSON, "QueryStreamLine")),
    r("post", "/query/data", "query", "What a query retrieves (entities, relationships, chunks, references), no answer", json_body("QueryRequest"), (JSON, "QueryDataResponse")),
    p(r("get", "/graph/label/list", "graph", "Entity names, most connected first", None, (JSON, "LabelList")),
        &[("query", "q", false, "keep names containing this"), ("query", "limit", false, "at most this many")]),
    p(r("get", "/graph/label/popular", "graph", "The most connected entity names", None, (JSON, "LabelList")),
        &[("query", "limit", false, "1 to 1000 (default 300)")]),
    p(r("get", "/graph/label/search", "graph", "Entity names containing q (exact matches first, then by degree)", None, (JSON, "LabelList")),
        &[("query", "q", true, "the text to look for"), ("query", "limit", false, "1 to 100 (default 50)")]),
    p(r("get", "/graphs", "graph", "The neighbourhood of an entity (label * = the most connected)", None, (JSON, "KnowledgeGraph")),
        &[("query", "label", true, "entity name or *"), ("query", "max_depth", false, "1 to 10 (default 3)"), ("query", "max_nodes", false, "1 to 10000 (default 1000)")]),
    p(r("get", "/graph/entity/detail", "graph", "An entity with its relationships and source text units", None, (JSON, "EntityDetail")),
        &[("query", "name", true, "entity name")]),
    p(r("get", "/graph/entity/exists", "graph", "Whether an entity exists", None, (JSON, "EntityExists")),
        &[("query", "name", true, "entity name")]),
    r("post", "/graph/entity/edit", "graph", "Edit an entity (description, type, name); kept in graph_edits.yaml and applied by every update", json_body("EntityUpdateRequest"), (JSON, "GraphEditResponse")),
    r("post", "/graph/entity/create", "graph", "Create an entity (kept in graph_edits.yaml)", json_body("EntityCreateRequest"), (JSON, "GraphEditResponse")),
    r("delete", "/graph/entity/delete", "graph", "Delete an entity and its relationships (kept in graph_edits.yaml)", json_body("DeleteEntityRequest"), (JSON, "DeletionResult")),
    r("post", "/graph/entities/merge", "graph", "Merge entities into one (kept in graph_edits.yaml)", json_body("EntityMergeRequest"), (JSON, "GraphEditResponse")),
    r("post", "/graph/relation/edit", "graph", "Edit a relationship (description, weight; kept in graph_edits.yaml)", json_body("RelationUpdateRequest"), (JSON, "GraphEditResponse")),
    r("post", "/graph/relation/create", "graph", "Create a relationship between two entities (kept in graph_edits.yaml)", json_body("RelationCreateRequest"), (JSON, "GraphEditResponse")),
    r("delete", "/graph/relation/delete", "graph", "Delete a relationship (kept in graph_edits.yaml)", json_body("DeleteRelationRequest"), (JSON, "DeletionResult")),
    r("get", "/api/version", "ollama", "Ollama: version", None, (JSON, "OllamaVersion")),
    r("get", "/api/tags", "ollama", "Ollama: the model graphrag-rs:latest", None, (JSON, "OllamaTags")),
    r("get", "/api/ps", "ollama", "Ollama: running models", None, (JSON, "OllamaTags")),
    r("post", "/api/chat", "ollama", "Ollama chat over the index (a /local, /global, /naive, /drift, /hybrid or /mix prefix picks the method)", json_body("OllamaChatRequest"), (NDJSON, "OllamaChatResponse")),
    r("post", "/api/generate", "ollama", "Ollama generate: the prompt as a question to the index", json_body("OllamaGenerateRequest"), (NDJSON, "OllamaGenerateResponse")),
    r("post", "/api/show", "ollama", "Ollama: the model's card ({model}); 404 for another model", json_body("OllamaShowRequest"), (JSON, "OllamaShow")),
    r("get", "/v1/models", "openai", "OpenAI: models", None, (JSON, "OpenAiModels")),
    p(r("get", "/v1/models/{model}", "openai", "OpenAI: one model; 404 for another", None, (JSON, "OpenAiModel")),
        &[("path", "model", true, "the model's id")]),
    r("post", "/v1/chat/completions", "openai", "OpenAI chat completions over the index (SSE with stream: true)", json_body("ChatCompletionRequest"), (JSON, "ChatCompletion")),
];

/// LightRAG 1.5.7 paths graphrag-rs does not offer (method, path, why):
/// answered 501 with the reason (docs/lightrag-api.md).
#[rustfmt::skip]
pub const NOT_OFFERED: &[(&str, &str, &str)] = &[
    ("get", "/documents/scan/status/{track_id}", "a scan is an update run: follow it at /documents/pipeline_status, and its documents at /documents/paginated"),
    ("get", "/documents/source_conflicts", "documents are the files of the input folder, one per name: two documents cannot claim one source"),
    ("post", "/documents/source_conflicts/repair", "documents are the files of the input folder, one per name: there are no source conflicts to repair"),
    ("post", "/documents/recovery/force_reset", "an interrupted update leaves the published index as it was and the next update resumes: there is no recovery state to reset"),
    ("post", "/documents/clear_cache", "cache/ holds the model answers that make a re-index of the same text free and reproducible; delete that folder with the server stopped if you mean to"),
    ("get", "/docs/oauth2-redirect", "there is no OAuth login: the API key is the only credential"),
    ("get", "/workspace", "LightRAG's workspace UI is not served: serve its built UI with --webui-dir at /webui/"),
];

/// Why LightRAG's `method path` is not offered, if it is one of those.
pub fn not_offered(method: &str, path: &str) -> Option<&'static str> {
    NOT_OFFERED
        .iter()
        .find(|(m, p, _)| m.eq_ignore_ascii_case(method) && template_matches(p, path))
        .map(|(_, _, why)| *why)
}

/// Whether `path` is an instance of `template` (`{name}` matches one
/// non-empty segment).
pub fn template_matches(template: &str, path: &str) -> bool {
    let (mut t, mut p) = (template.split('/'), path.split('/'));
    loop {
        match (t.next(), p.next()) {
            (None, None) => return true,
            (Some(ts), Some(ps)) if ts.starts_with('{') && ts.ends_with('}') => {
                if ps.is_empty() {
                    return false;
                }
            }
            (Some(ts), Some(ps)) if ts == ps => {}
            _ => return false,
        }
    }
}

fn schema_ref(name: &str) -> Value {
    json!({"$ref": format!("#/components/schemas/{name}")})
}

pub fn document() -> Value {
    let mut paths: Map<String, Value> = Map::new();
    for route in ROUTES {
        let (answer_type, answer_schema) = route.answers;
        let (status, description) = if answer_schema == REDIRECT { ("302", "Found") } else { ("200", "OK") };
        let mut op = json!({
            "tags": [route.tag],
            "summary": route.summary,
            "responses": {
                status: {"description": description, "content": {answer_type: {"schema": schema_ref(answer_schema)}}},
                "4XX": {"description": "A client error: {\"detail\": message}", "content": {JSON: {"schema": schema_ref("Error")}}},
            },
        });
        if !PUBLIC.contains(&route.path) {
            op["security"] = json!([{"ApiKey": []}, {"Bearer": []}]);
        }
        if !route.params.is_empty() {
            op["parameters"] = route
                .params
                .iter()
                .map(|(at, name, required, description)| {
                    json!({"in": at, "name": name, "required": required, "description": description, "schema": {"type": "string"}})
                })
                .collect();
        }
        if let Some((content_type, schema)) = route.body {
            op["requestBody"] = json!({"required": true, "content": {content_type: {"schema": schema_ref(schema)}}});
        }
        let entry = paths.entry(route.path.to_string()).or_insert_with(|| json!({}));
        entry[route.method] = op;
    }
    for (method, path, why) in NOT_OFFERED {
        let entry = paths.entry(path.to_string()).or_insert_with(|| json!({}));
        entry[*method] = json!({
            "tags": ["not offered"],
            "summary": format!("LightRAG's path, not offered: {why}"),
            "responses": {"501": {"description": "Not offered", "content": {JSON: {"schema": schema_ref("Error")}}}},
        });
    }
    json!({
        "openapi": "3.0.3",
        "info": {
            "title": "graphrag-rs server",
            "version": env!("CARGO_PKG_VERSION"),
            "description": "LightRAG-compatible document, query, graph and auth paths; Ollama- and OpenAI-compatible chat over a graphrag-rs index.",
        },
        "paths": paths,
        "components": {
            "securitySchemes": {
                "ApiKey": {"type": "apiKey", "in": "header", "name": "X-API-Key"},
                "Bearer": {"type": "http", "scheme": "bearer"},
            },
            "schemas": schemas(),
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_schema_named_exists_and_says_more_than_object() {
        let doc = document();
        let all = &doc["components"]["schemas"];
        let mut named: Vec<&str> = ROUTES.iter().map(|r| r.answers.1).collect();
        named.extend(ROUTES.iter().filter_map(|r| r.body.map(|b| b.1)));
        for name in named {
            let s = &all[name];
            assert!(s.is_object(), "schema {name} is missing");
            if name != "Object" {
                assert_ne!(s, &json!({"type": "object"}), "schema {name} says nothing");
            }
        }
        // Every $ref inside the schemas resolves.
        let text = all.to_string();
        for part in text.split("#/components/schemas/").skip(1) {
            let name = &part[..part.find('"').unwrap()];
            assert!(all[name].is_object(), "dangling $ref {name}");
        }
    }

    /// A row of docs/lightrag-api.md's tables: method (lower case), path, status.
    type Row = (String, String, String);

    /// docs/lightrag-api.md's sections: title, the count its heading
    /// states (`## Query (3)`), its rows.
    fn doc_sections(doc: &str) -> Vec<(String, Option<usize>, Vec<Row>)> {
        let mut sections: Vec<(String, Option<usize>, Vec<Row>)> = Vec::new();
        for line in doc.lines() {
            if let Some(title) = line.strip_prefix("## ") {
                let stated = title.rsplit_once(" (").and_then(|(_, n)| n.strip_suffix(')')?.parse().ok());
                sections.push((title.to_string(), stated, Vec::new()));
            } else if let Some((_, _, rows)) = sections.last_mut() {
                // | GET | `/path` | works | why |
                let cells: Vec<&str> = line.split('|').map(str::trim).collect();
                if cells.len() >= 5 && ["GET", "POST", "DELETE"].contains(&cells[1]) {
                    rows.push((cells[1].to_lowercase(), cells[2].trim_matches('`').to_string(), cells[3].to_string()));
                }
            }
        }
        sections
    }

    #[test]
    fn docs_lightrag_api_md_counts_and_rows_match_the_route_table() {
        const DOC: &str = include_str!("../../docs/lightrag-api.md");
        let sections = doc_sections(DOC);
        // The numbered sections are LightRAG's OpenAPI description, whose size the introduction states.
        let mut lightrag: Vec<&Row> = Vec::new();
        for (title, stated, rows) in &sections {
            if let Some(stated) = stated {
                assert_eq!(rows.len(), *stated, "docs/lightrag-api.md: ## {title} has {} rows", rows.len());
                lightrag.extend(rows);
            }
        }
        let flat = DOC.split_whitespace().collect::<Vec<_>>().join(" ");
        let total = format!("publishes {} path + method pairs", lightrag.len());
        assert!(flat.contains(&total), "docs/lightrag-api.md should say it {total}");
        let count = |status: &str| lightrag.iter().filter(|r| r.2 == status).count();
        let summary = format!(
            "Of the {}, {} work, {} differ and {} are not offered.",
            lightrag.len(),
            count("works"),
            count("differs"),
            count("not offered")
        );
        assert!(flat.contains(&summary), "docs/lightrag-api.md should say: {summary}");

        // Every row, in any section, as the server routes it.
        let rows: Vec<&Row> = sections.iter().flat_map(|(_, _, rows)| rows).collect();
        for (method, path, status) in &rows {
            let routed = ROUTES.iter().any(|r| r.method == method && r.path == path);
            let refused = NOT_OFFERED.iter().any(|(m, p, _)| m == method && p == path);
            match status.as_str() {
                "not offered" => assert!(refused && !routed, "{method} {path}: documented as not offered"),
                // The web UI's files are served, but are no path of the API's description.
                "works" | "differs" => assert!(routed || path == "/webui/", "{method} {path} is not in ROUTES"),
                other => panic!("{method} {path}: unknown status `{other}`"),
            }
        }
        // And every route and refusal in the doc: a row, or named under "Ours only".
        let ours_only = DOC.split("## Ours only").nth(1).expect("an Ours only section");
        for r in ROUTES {
            let in_rows = rows.iter().any(|(m, p, _)| m == r.method && p == r.path);
            let named = ours_only.contains(&format!("`{} {}`", r.method.to_uppercase(), r.path))
                || ours_only.contains(&format!("`{}`", r.path));
            assert!(in_rows || named, "{} {} is not in docs/lightrag-api.md", r.method, r.path);
        }
        for (method, path, _) in NOT_OFFERED {
            assert!(rows.iter().any(|(m, p, s)| m == method && p == path && s == "not offered"), "{method} {path}");
        }
    }

    #[test]
    fn templates_match_one_segment() {
        assert!(template_matches("/documents/track_status/{track_id}", "/documents/track_status/upload_1"));
        assert!(!template_matches("/documents/track_status/{track_id}", "/documents/track_status/"));
        assert!(!template_matches("/documents/track_status/{track_id}", "/documents/track_status/a/b"));
        assert!(template_matches("/documents", "/documents"));
        assert!(!template_matches("/documents", "/documents/x"));
    }
}
