//! The JSON schemas of `/openapi.json`: the request and response bodies of
//! every path, as the handlers read and write them (LightRAG 1.5.7's
//! pydantic models where the path is LightRAG's).

use serde_json::{json, Map, Value};

fn s() -> Value {
    json!({"type": "string"})
}
fn s_or_null() -> Value {
    json!({"type": "string", "nullable": true})
}
fn int() -> Value {
    json!({"type": "integer"})
}
fn num() -> Value {
    json!({"type": "number"})
}
fn boolean() -> Value {
    json!({"type": "boolean"})
}
fn arr(items: Value) -> Value {
    json!({"type": "array", "items": items})
}
fn map_of(values: Value) -> Value {
    json!({"type": "object", "additionalProperties": values})
}
fn free() -> Value {
    json!({"type": "object", "additionalProperties": true, "description": "free-form"})
}
fn en(values: &[&str]) -> Value {
    json!({"type": "string", "enum": values})
}
fn r(name: &str) -> Value {
    json!({"$ref": format!("#/components/schemas/{name}")})
}

/// An object with these properties; `required` names the ones it must have.
fn obj(props: &[(&str, Value)], required: &[&str]) -> Value {
    let properties: Map<String, Value> = props.iter().map(|(k, v)| (k.to_string(), v.clone())).collect();
    json!({"type": "object", "properties": properties, "required": required})
}

const STATUSES: [&str; 7] = ["pending", "parsing", "analyzing", "processing", "preprocessed", "processed", "failed"];

fn chat_message() -> Value {
    obj(&[("role", en(&["system", "user", "assistant"])), ("content", s())], &["role", "content"])
}

pub fn schemas() -> Value {
    let status_counts = map_of(int());
    let edit_data = |keys: &[&str]| {
        let props: Vec<(&str, Value)> = keys.iter().map(|k| (*k, if *k == "weight" { num() } else { s() })).collect();
        json!({"type": "object", "properties": obj(&props, &[])["properties"], "additionalProperties": false})
    };
    let list: Vec<(&str, Value)> = vec![
        ("Error", obj(&[("detail", s())], &["detail"])),
        ("Object", json!({"type": "object"})),
        ("Html", s()),
        ("Redirect", json!({"type": "string", "description": "the Location it redirects to"})),
        ("StatusOk", obj(&[("status", en(&["ok"]))], &["status"])),
        (
            "Health",
            obj(
                &[
                    ("status", s()),
                    ("working_directory", s()),
                    ("input_directory", s()),
                    ("configuration", free()),
                    ("index", free()),
                    ("pipeline_busy", boolean()),
                    ("core_version", s()),
                    ("api_version", s()),
                ],
                &["status"],
            ),
        ),
        (
            "AuthStatus",
            obj(
                &[
                    ("auth_configured", boolean()),
                    ("access_token", s()),
                    ("token_type", en(&["bearer"])),
                    ("auth_mode", en(&["disabled", "enabled"])),
                    ("message", s()),
                    ("core_version", s()),
                    ("api_version", s()),
                    ("webui_title", s()),
                    ("webui_description", s()),
                    ("ai_content_notice_enabled", boolean()),
                ],
                &["auth_configured", "access_token", "auth_mode"],
            ),
        ),
        ("LoginForm", obj(&[("username", s()), ("password", s()), ("grant_type", s())], &[])),
        ("UiCustomization", obj(&[("customized", boolean()), ("brand", free())], &["customized"])),
        (
            "DocStatusResponse",
            obj(
                &[
                    ("id", s()),
                    ("content_summary", s()),
                    ("content_length", json!({"type": "integer", "nullable": true})),
                    ("status", en(&STATUSES)),
                    ("created_at", s_or_null()),
                    ("updated_at", s_or_null()),
                    ("track_id", s_or_null()),
                    ("chunks_count", int()),
                    ("error_msg", s_or_null()),
                    ("metadata", free()),
                    ("file_path", s()),
                ],
                &["id", "status", "file_path"],
            ),
        ),
        ("DocsStatuses", obj(&[("statuses", map_of(arr(r("DocStatusResponse"))))], &["statuses"])),
        (
            "DocumentsRequest",
            obj(
                &[
                    ("status_filter", json!({"type": "string", "enum": STATUSES, "nullable": true})),
                    ("status_filters", json!({"type": "array", "items": en(&STATUSES), "nullable": true})),
                    ("page", json!({"type": "integer", "minimum": 1, "default": 1})),
                    ("page_size", json!({"type": "integer", "minimum": 10, "maximum": 200, "default": 50})),
                    ("sort_field", en(&["created_at", "updated_at", "id", "file_path"])),
                    ("sort_direction", en(&["asc", "desc"])),
                ],
                &[],
            ),
        ),
        (
            "PaginatedDocsResponse",
            obj(
                &[
                    ("documents", arr(r("DocStatusResponse"))),
                    (
                        "pagination",
                        obj(
                            &[
                                ("page", int()),
                                ("page_size", int()),
                                ("total_count", int()),
                                ("total_pages", int()),
                                ("has_next", boolean()),
                                ("has_prev", boolean()),
                            ],
                            &["page", "page_size", "total_count", "total_pages", "has_next", "has_prev"],
                        ),
                    ),
                    ("status_counts", status_counts.clone()),
                ],
                &["documents", "pagination", "status_counts"],
            ),
        ),
        ("StatusCountsResponse", obj(&[("status_counts", status_counts.clone())], &["status_counts"])),
        (
            "TrackStatusResponse",
            obj(
                &[
                    ("track_id", s()),
                    ("documents", arr(r("DocStatusResponse"))),
                    ("total_count", int()),
                    ("status_summary", status_counts),
                ],
                &["track_id", "documents", "total_count", "status_summary"],
            ),
        ),
        (
            "PipelineStatusResponse",
            obj(
                &[
                    ("busy", boolean()),
                    ("job_name", s()),
                    ("job_start", s_or_null()),
                    ("docs", int()),
                    ("batchs", int()),
                    ("cur_batch", int()),
                    ("request_pending", boolean()),
                    ("latest_message", s()),
                    ("history_messages", arr(s())),
                    ("step", s_or_null()),
                    ("runs", int()),
                    ("last_error", s_or_null()),
                ],
                &["busy"],
            ),
        ),
        (
            "SupportedFileTypesResponse",
            obj(
                &[("supported_extensions", arr(s())), ("engines", map_of(arr(s()))), ("input", s())],
                &["supported_extensions", "engines"],
            ),
        ),
        (
            "UploadForm",
            obj(&[("file", json!({"type": "array", "items": {"type": "string", "format": "binary"}}))], &["file"]),
        ),
        (
            "TextChunkingConfig",
            json!({"type": "object", "nullable": true, "description": "accepted, not applied: the index is chunked by the project's `chunking` settings",
                   "properties": {"strategy": s(), "params": free()}}),
        ),
        (
            "InsertTextRequest",
            obj(&[("text", s()), ("file_source", s_or_null()), ("chunking", r("TextChunkingConfig"))], &["text"]),
        ),
        (
            "InsertTextsRequest",
            obj(
                &[
                    ("texts", arr(s())),
                    ("file_sources", json!({"type": "array", "items": s(), "nullable": true})),
                    ("chunking", r("TextChunkingConfig")),
                ],
                &["texts"],
            ),
        ),
        (
            "InsertResponse",
            obj(
                &[("status", en(&["success", "partial_success", "failure"])), ("message", s()), ("track_id", s())],
                &["status", "message", "track_id"],
            ),
        ),
        (
            "ScanResponse",
            obj(&[("status", en(&["scanning_started"])), ("message", s()), ("track_id", s())], &["status", "track_id"]),
        ),
        (
            "ReprocessResponse",
            obj(
                &[("status", en(&["reprocessing_started"])), ("message", s()), ("track_id", s())],
                &["status", "message", "track_id"],
            ),
        ),
        (
            "CancelPipelineResponse",
            obj(&[("status", en(&["cancellation_requested", "not_busy"])), ("message", s())], &["status", "message"]),
        ),
        (
            "ClearDocumentsResponse",
            obj(&[("status", en(&["success", "busy"])), ("message", s())], &["status", "message"]),
        ),
        (
            "DeleteDocRequest",
            obj(&[("doc_ids", arr(s())), ("delete_file", boolean()), ("delete_llm_cache", boolean())], &["doc_ids"]),
        ),
        (
            "DeleteDocByIdResponse",
            obj(&[("status", en(&["deletion_started"])), ("message", s()), ("doc_id", s())], &["status", "message"]),
        ),
        (
            "QueryRequest",
            obj(
                &[
                    ("query", s()),
                    (
                        "mode",
                        en(&["local", "global", "hybrid", "naive", "mix", "basic", "drift", "ppr", "dense", "bm25"]),
                    ),
                    ("only_need_context", boolean()),
                    ("only_need_prompt", json!({"type": "boolean", "description": "not served: true is refused"})),
                    ("response_type", s()),
                    ("conversation_history", arr(chat_message())),
                    ("include_references", boolean()),
                    ("community_level", int()),
                    ("include_context_records", boolean()),
                    (
                        "top_k",
                        json!({"type": "integer", "description": "accepted; retrieval sizes come from settings.yaml"}),
                    ),
                    ("chunk_top_k", json!({"type": "integer", "description": "accepted; see top_k"})),
                    (
                        "max_total_tokens",
                        json!({"type": "integer", "minimum": 1, "description": "the most tokens of context: a bound on the method's own budget (global search: not below global_search.max_context_tokens, 422)"}),
                    ),
                    (
                        "enable_rerank",
                        json!({"type": "boolean", "description": "rerank the retrieved chunks with settings `rerank.model_id` (default: rerank.by_default)"}),
                    ),
                    (
                        "ids",
                        json!({"type": "array", "items": s(), "nullable": true, "description": "not served: a list of document ids is refused (422); null or []"}),
                    ),
                    ("stream", boolean()),
                ],
                &["query"],
            ),
        ),
        ("Reference", obj(&[("reference_id", s()), ("file_path", s())], &["reference_id", "file_path"])),
        (
            "QueryResponse",
            obj(
                &[
                    ("response", s()),
                    ("response_time", num()),
                    ("llm_generated", boolean()),
                    ("index_version", s()),
                    ("references", arr(r("Reference"))),
                    ("context_records", free()),
                ],
                &["response"],
            ),
        ),
        (
            "QueryStreamLine",
            obj(
                &[("response", s()), ("references", arr(r("Reference"))), ("error", s()), ("llm_generated", boolean())],
                &[],
            ),
        ),
        (
            "QueryDataResponse",
            obj(
                &[
                    ("status", en(&["success"])),
                    ("message", s()),
                    (
                        "data",
                        obj(
                            &[
                                ("entities", arr(free())),
                                ("relationships", arr(free())),
                                ("chunks", arr(free())),
                                ("references", arr(r("Reference"))),
                                ("reports", arr(free())),
                            ],
                            &["entities", "relationships", "chunks", "references"],
                        ),
                    ),
                    ("metadata", free()),
                ],
                &["status", "data", "metadata"],
            ),
        ),
        ("LabelList", arr(s())),
        (
            "GraphNode",
            obj(&[("id", s()), ("labels", arr(s())), ("properties", free())], &["id", "labels", "properties"]),
        ),
        (
            "GraphEdge",
            obj(
                &[("id", s()), ("type", s()), ("source", s()), ("target", s()), ("properties", free())],
                &["id", "source", "target"],
            ),
        ),
        (
            "KnowledgeGraph",
            obj(
                &[("nodes", arr(r("GraphNode"))), ("edges", arr(r("GraphEdge"))), ("is_truncated", boolean())],
                &["nodes", "edges", "is_truncated"],
            ),
        ),
        (
            "EntityDetail",
            obj(
                &[
                    ("id", s()),
                    ("title", s()),
                    ("type", s()),
                    ("description", s()),
                    ("degree", int()),
                    ("community", int()),
                    ("relationships", arr(free())),
                    ("text_units", arr(free())),
                ],
                &["id", "title"],
            ),
        ),
        ("EntityExists", obj(&[("exists", boolean())], &["exists"])),
        (
            "EntityUpdateRequest",
            obj(
                &[
                    ("entity_name", s()),
                    ("updated_data", edit_data(&["entity_name", "entity_type", "description"])),
                    ("allow_rename", boolean()),
                    ("allow_merge", boolean()),
                ],
                &["entity_name", "updated_data"],
            ),
        ),
        (
            "EntityCreateRequest",
            obj(
                &[
                    ("entity_name", s()),
                    ("entity_data", edit_data(&["entity_type", "description", "source_id", "file_path"])),
                ],
                &["entity_name", "entity_data"],
            ),
        ),
        ("DeleteEntityRequest", obj(&[("entity_name", s())], &["entity_name"])),
        (
            "EntityMergeRequest",
            obj(
                &[("entities_to_change", arr(s())), ("entity_to_change_into", s())],
                &["entities_to_change", "entity_to_change_into"],
            ),
        ),
        (
            "RelationUpdateRequest",
            obj(
                &[("source_id", s()), ("target_id", s()), ("updated_data", edit_data(&["description", "weight"]))],
                &["source_id", "target_id", "updated_data"],
            ),
        ),
        (
            "RelationCreateRequest",
            obj(
                &[
                    ("source_entity", s()),
                    ("target_entity", s()),
                    ("relation_data", edit_data(&["description", "weight", "source_id", "file_path"])),
                ],
                &["source_entity", "target_entity", "relation_data"],
            ),
        ),
        (
            "DeleteRelationRequest",
            obj(&[("source_entity", s()), ("target_entity", s())], &["source_entity", "target_entity"]),
        ),
        (
            "GraphEditResponse",
            obj(&[("status", en(&["success"])), ("message", s()), ("data", free())], &["status", "message", "data"]),
        ),
        (
            "DeletionResult",
            obj(
                &[
                    ("status", en(&["success"])),
                    ("doc_id", s()),
                    ("message", s()),
                    ("status_code", int()),
                    ("file_path", s_or_null()),
                ],
                &["status", "message"],
            ),
        ),
        ("OllamaVersion", obj(&[("version", s())], &["version"])),
        ("OllamaTags", obj(&[("models", arr(free()))], &["models"])),
        (
            "OllamaChatRequest",
            obj(&[("model", s()), ("messages", arr(chat_message())), ("stream", boolean())], &["messages"]),
        ),
        (
            "OllamaChatResponse",
            obj(
                &[("model", s()), ("created_at", s()), ("message", chat_message()), ("done", boolean())],
                &["model", "done"],
            ),
        ),
        (
            "OllamaGenerateRequest",
            obj(&[("model", s()), ("prompt", s()), ("system", s()), ("stream", boolean())], &["prompt"]),
        ),
        (
            "OllamaGenerateResponse",
            obj(&[("model", s()), ("created_at", s()), ("response", s()), ("done", boolean())], &["model", "done"]),
        ),
        ("OllamaShowRequest", obj(&[("model", s()), ("name", s())], &[])),
        (
            "OllamaShow",
            obj(
                &[
                    ("modelfile", s()),
                    ("parameters", s()),
                    ("template", s()),
                    ("details", free()),
                    ("model_info", free()),
                ],
                &[],
            ),
        ),
        (
            "OpenAiModel",
            obj(&[("id", s()), ("object", en(&["model"])), ("created", int()), ("owned_by", s())], &["id", "object"]),
        ),
        ("OpenAiModels", obj(&[("object", en(&["list"])), ("data", arr(r("OpenAiModel")))], &["object", "data"])),
        (
            "ChatCompletionRequest",
            obj(&[("model", s()), ("messages", arr(chat_message())), ("stream", boolean())], &["messages"]),
        ),
        (
            "ChatCompletion",
            obj(
                &[
                    ("id", s()),
                    ("object", en(&["chat.completion"])),
                    ("created", int()),
                    ("model", s()),
                    (
                        "choices",
                        arr(obj(&[("index", int()), ("message", chat_message()), ("finish_reason", s())], &[])),
                    ),
                    ("usage", free()),
                ],
                &["object", "choices"],
            ),
        ),
    ];
    Value::Object(list.into_iter().map(|(k, v)| (k.to_string(), v)).collect())
}
