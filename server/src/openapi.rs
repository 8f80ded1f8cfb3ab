//! The OpenAPI description at `/openapi.json`, from the route table.

use serde_json::{json, Map, Value};

pub struct Route {
    pub method: &'static str,
    pub path: &'static str,
    pub tag: &'static str,
    pub summary: &'static str,
    /// The request body's content type, if any.
    pub body: Option<&'static str>,
    /// The response's content type.
    pub answers: &'static str,
}

const fn r(
    method: &'static str,
    path: &'static str,
    tag: &'static str,
    summary: &'static str,
    body: Option<&'static str>,
    answers: &'static str,
) -> Route {
    Route { method, path, tag, summary, body, answers }
}

const JSON: &str = "application/json";
const NDJSON: &str = "application/x-ndjson";

pub const ROUTES: &[Route] = &[
    r("get", "/health", "system", "Status and configuration (no API key needed)", None, JSON),
    r("get", "/openapi.json", "system", "This description", None, JSON),
    r("get", "/documents", "documents", "Every document by status (pending, processing, processed, failed)", None, JSON),
    r("post", "/documents/paginated", "documents", "One page of documents: status_filter, page, page_size, sort_field, sort_direction", Some(JSON), JSON),
    r("get", "/documents/pipeline_status", "documents", "The update run: busy, current step, messages", None, JSON),
    r("post", "/documents/upload", "documents", "Upload files (multipart, field `file`) into the input folder and queue an update; ?overwrite=true replaces a document of the same name", Some("multipart/form-data"), JSON),
    r("post", "/documents/text", "documents", "Insert one text ({text, file_source}) and queue an update", Some(JSON), JSON),
    r("post", "/documents/texts", "documents", "Insert texts ({texts, file_sources}) and queue an update", Some(JSON), JSON),
    r("post", "/documents/scan", "documents", "Queue an update over the input folder as it is", None, JSON),
    r("delete", "/documents/delete_document", "documents", "Remove documents ({doc_ids}) from the input folder and queue the update that drops them", Some(JSON), JSON),
    r("post", "/query", "query", "Answer a question ({query, mode: local|global|basic|naive|drift|hybrid|mix|ppr, only_need_context, response_type, conversation_history, include_references, include_context_records})", Some(JSON), JSON),
    r("post", "/query/stream", "query", "The same, streamed as NDJSON lines {response}, then {references}", Some(JSON), NDJSON),
    r("get", "/graph/label/list", "graph", "Entity names, most connected first (?q= filters, ?limit=)", None, JSON),
    r("get", "/graphs", "graph", "The neighbourhood of an entity: ?label=…&max_depth=3&max_nodes=1000 (label * = the most connected)", None, JSON),
    r("get", "/graph/entity/detail", "graph", "An entity (?name=) with its relationships and source text units", None, JSON),
    r("get", "/graph/entity/exists", "graph", "Whether an entity (?name=) exists", None, JSON),
    r("get", "/api/version", "ollama", "Ollama: version", None, JSON),
    r("get", "/api/tags", "ollama", "Ollama: the model graphrag-rs:latest", None, JSON),
    r("get", "/api/ps", "ollama", "Ollama: running models", None, JSON),
    r("post", "/api/chat", "ollama", "Ollama chat over the index (a /local, /global, /naive, /drift, /hybrid or /mix prefix picks the method)", Some(JSON), NDJSON),
    r("post", "/api/generate", "ollama", "Ollama generate: the prompt as a question to the index", Some(JSON), NDJSON),
    r("post", "/api/show", "ollama", "Ollama: the model's card ({model}); 404 for another model", Some(JSON), JSON),
    r("get", "/v1/models", "openai", "OpenAI: models", None, JSON),
    r("get", "/v1/models/{model}", "openai", "OpenAI: one model; 404 for another", None, JSON),
    r("post", "/v1/chat/completions", "openai", "OpenAI chat completions over the index (SSE with stream: true)", Some(JSON), JSON),
];

pub fn document() -> Value {
    let mut paths: Map<String, Value> = Map::new();
    for route in ROUTES {
        let mut op = json!({
            "tags": [route.tag],
            "summary": route.summary,
            "responses": {
                "200": {"description": "OK", "content": {route.answers: {"schema": {"type": "object"}}}},
                "4XX": {"description": "A client error: {\"detail\": message}", "content": {JSON: {"schema": {"$ref": "#/components/schemas/Error"}}}},
            },
        });
        if route.path != "/health" {
            op["security"] = json!([{"ApiKey": []}, {"Bearer": []}]);
        }
        if let Some(body) = route.body {
            op["requestBody"] = json!({"required": true, "content": {body: {"schema": {"type": "object"}}}});
        }
        let entry = paths.entry(route.path.to_string()).or_insert_with(|| json!({}));
        entry[route.method] = op;
    }
    json!({
        "openapi": "3.0.3",
        "info": {
            "title": "graphrag-rs server",
            "version": env!("CARGO_PKG_VERSION"),
            "description": "LightRAG-compatible document, query and graph paths; Ollama- and OpenAI-compatible chat over a graphrag-rs index.",
        },
        "paths": paths,
        "components": {
            "securitySchemes": {
                "ApiKey": {"type": "apiKey", "in": "header", "name": "X-API-Key"},
                "Bearer": {"type": "http", "scheme": "bearer"},
            },
            "schemas": {"Error": {"type": "object", "properties": {"detail": {"type": "string"}}}},
        },
    })
}
