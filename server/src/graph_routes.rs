//! LightRAG's graph paths beyond the explorer's reads: popular and searched
//! labels, and graph editing (entity and relation create, edit, delete,
//! merge). An edit is checked against the loaded graph, kept in the
//! project's `graph_edits.yaml` (graphrag_project::graph_edits) and applied
//! by the update it queues, and by every later index or update: an edit is
//! project data, not a change to tables the next run would rebuild. The
//! answer comes at once; the graph shows the edit when that update is
//! published (`/documents/pipeline_status`).

use std::collections::BTreeMap;
use std::sync::Arc;

use graphrag_project::graph_edits::{self, GraphEdit};
use hyper::StatusCode;
use serde::Deserialize;
use serde_json::{json, Value};

use crate::http::{self, ApiError, Resp, Result};
use crate::state::State;

/// `GET /graph/label/popular?limit=` (1–1000, default 300): entity names,
/// most connected first.
pub fn popular(state: &State, query: Option<&str>) -> Result<Resp> {
    let limit = http::query_number(query, "limit", 300, 1000)?;
    http::json(json!(state.snapshot().graph.labels(None, limit)))
}

/// `GET /graph/label/search?q=&limit=` (1–100, default 50): names that
/// contain `q` (ignoring case), exact matches first, then by degree.
pub fn search(state: &State, query: Option<&str>) -> Result<Resp> {
    let q = http::query_param(query, "q")
        .ok_or_else(|| ApiError::new(StatusCode::UNPROCESSABLE_ENTITY, "query parameter `q` is required"))?;
    let limit = http::query_number(query, "limit", 50, 100)?;
    if q.trim().is_empty() {
        return http::json(json!([]));
    }
    http::json(json!(state.snapshot().graph.labels(Some(&q), limit)))
}

fn bad(message: String) -> ApiError {
    ApiError::bad_request(message)
}

fn non_empty(name: &str, field: &str) -> Result<String> {
    let name = name.trim();
    if name.is_empty() {
        return Err(ApiError::new(StatusCode::UNPROCESSABLE_ENTITY, format!("`{field}` is empty")));
    }
    Ok(name.to_string())
}

/// A text field of LightRAG's free-form `updated_data`/`entity_data`.
fn text(data: &BTreeMap<String, Value>, key: &str) -> Result<Option<String>> {
    match data.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s.clone())),
        Some(other) => {
            Err(ApiError::new(StatusCode::UNPROCESSABLE_ENTITY, format!("`{key}` must be a string, not {other}")))
        }
    }
}

/// Fields of `data` this graph does not keep are refused by name, so an
/// edit is never silently partial.
fn only(data: &BTreeMap<String, Value>, allowed: &[&str]) -> Result<()> {
    match data.keys().find(|k| !allowed.contains(&k.as_str())) {
        None => Ok(()),
        Some(k) => Err(ApiError::new(
            StatusCode::UNPROCESSABLE_ENTITY,
            format!("`{k}` cannot be edited here: the graph keeps {}", allowed.join(", ")),
        )),
    }
}

/// Keeps the edit and queues the update that applies it.
fn record(state: &Arc<State>, edit: GraphEdit, what: &str) -> Result<()> {
    graph_edits::add(&state.root, edit).map_err(anyhow::Error::from)?;
    state.queue_update(&format!("graph edit: {what}"));
    Ok(())
}

fn applied_json(message: String, data: Value) -> Value {
    json!({
        "status": "success",
        "message": format!("{message}; kept in graph_edits.yaml and applied by the update now queued"),
        "data": data,
    })
}

fn applied(message: String, data: Value) -> Result<Resp> {
    http::json(applied_json(message, data))
}

/// The entity's title in the loaded graph, or 404.
fn existing(state: &State, name: &str) -> Result<String> {
    let snapshot = state.snapshot();
    let i = snapshot.graph.find(name).ok_or_else(|| ApiError::not_found(format!("no entity named `{name}`")))?;
    Ok(snapshot.graph.nodes[i].title.clone())
}

fn entity_data(state: &State, name: &str) -> Value {
    let snapshot = state.snapshot();
    match snapshot.graph.find(name) {
        Some(i) => {
            let n = &snapshot.graph.nodes[i];
            json!({"entity_name": n.title, "entity_type": n.kind, "description": n.description})
        }
        None => json!({"entity_name": name}),
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct EntityUpdate {
    entity_name: String,
    updated_data: BTreeMap<String, Value>,
    #[serde(default)]
    allow_rename: bool,
    #[serde(default)]
    allow_merge: bool,
}

/// `POST /graph/entity/edit`: description, type, and (with allow_rename)
/// the name; renaming onto an existing entity needs allow_merge.
pub fn edit_entity(state: &Arc<State>, body: &[u8]) -> Result<Resp> {
    let req: EntityUpdate = http::parse_json(body)?;
    let name = existing(state, &non_empty(&req.entity_name, "entity_name")?)?;
    let data = &req.updated_data;
    only(data, &["entity_name", "entity_type", "description"])?;
    // An empty new name is refused here: graph_edits.yaml refuses it too.
    let rename = text(data, "entity_name")?
        .map(|n| non_empty(&n, "updated_data.entity_name"))
        .transpose()?
        .filter(|n| n.to_uppercase() != name);
    if let Some(new) = &rename {
        if !req.allow_rename {
            return Err(bad(format!("renaming `{name}` to `{new}` needs allow_rename: true")));
        }
        if state.snapshot().graph.find(new).is_some() && !req.allow_merge {
            return Err(bad(format!(
                "an entity named `{new}` exists: set allow_merge: true to merge `{name}` into it"
            )));
        }
    }
    let (entity_type, description) = (text(data, "entity_type")?, text(data, "description")?);
    let mut out = entity_data(state, &name);
    if let Some(t) = &entity_type {
        out["entity_type"] = json!(t);
    }
    if let Some(d) = &description {
        out["description"] = json!(d);
    }
    if let Some(n) = &rename {
        out["entity_name"] = json!(n.to_uppercase());
    }
    // LightRAG's operation summary, which its web UI reads to tell success.
    let merged_into = rename.as_ref().filter(|n| state.snapshot().graph.find(n).is_some()).map(|n| n.to_uppercase());
    let summary = json!({
        "merged": merged_into.is_some(),
        "merge_status": if merged_into.is_some() { "success" } else { "not_attempted" },
        "merge_error": null,
        "operation_status": "success",
        "target_entity": merged_into,
        "final_entity": out["entity_name"],
        "renamed": rename.is_some(),
    });
    record(state, GraphEdit::EditEntity { name: name.clone(), rename, entity_type, description }, &name)?;
    let mut answer = applied_json(format!("Entity `{name}` updated"), out);
    answer["operation_summary"] = summary;
    http::json(answer)
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct EntityCreate {
    entity_name: String,
    entity_data: BTreeMap<String, Value>,
}

/// `POST /graph/entity/create` (400 when the name exists, as LightRAG).
pub fn create_entity(state: &Arc<State>, body: &[u8]) -> Result<Resp> {
    let req: EntityCreate = http::parse_json(body)?;
    let name = non_empty(&req.entity_name, "entity_name")?;
    if state.snapshot().graph.find(&name).is_some() {
        return Err(bad(format!("an entity named `{name}` exists already")));
    }
    only(&req.entity_data, &["entity_type", "description", "source_id", "file_path"])?;
    let entity_type = text(&req.entity_data, "entity_type")?.unwrap_or_default();
    let description = text(&req.entity_data, "description")?.unwrap_or_default();
    let data = json!({"entity_name": name.to_uppercase(), "entity_type": entity_type, "description": description});
    record(state, GraphEdit::CreateEntity { name: name.clone(), entity_type, description }, &name)?;
    applied(format!("Entity `{name}` created"), data)
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct EntityDelete {
    entity_name: String,
}

/// `DELETE /graph/entity/delete`: the entity and its relationships (404
/// for an unknown name).
pub fn delete_entity(state: &Arc<State>, body: &[u8]) -> Result<Resp> {
    let req: EntityDelete = http::parse_json(body)?;
    let name = existing(state, &non_empty(&req.entity_name, "entity_name")?)?;
    record(state, GraphEdit::DeleteEntity { name: name.clone() }, &name)?;
    http::json(json!({
        "status": "success",
        "doc_id": "",
        "message": format!("Entity `{name}` and its relationships deleted; kept in graph_edits.yaml and applied by the update now queued"),
        "status_code": 200,
        "file_path": null,
    }))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct EntityMerge {
    entities_to_change: Vec<String>,
    entity_to_change_into: String,
}

/// `POST /graph/entities/merge`: the entities become one (a missing target
/// is created from the first source, as LightRAG).
pub fn merge_entities(state: &Arc<State>, body: &[u8]) -> Result<Resp> {
    let req: EntityMerge = http::parse_json(body)?;
    let into = non_empty(&req.entity_to_change_into, "entity_to_change_into")?;
    if req.entities_to_change.is_empty() {
        return Err(ApiError::new(StatusCode::UNPROCESSABLE_ENTITY, "`entities_to_change` is empty"));
    }
    let from = req
        .entities_to_change
        .iter()
        .map(|n| existing(state, &non_empty(n, "entities_to_change")?))
        .collect::<Result<Vec<String>>>()?;
    let what = format!("{} into {into}", from.join(", "));
    record(state, GraphEdit::MergeEntities { from: from.clone(), into: into.clone() }, &what)?;
    applied(
        format!("Entities {} merged into `{into}`", from.join(", ")),
        json!({"entity_name": into.to_uppercase(), "merged": from}),
    )
}

/// Whether the loaded graph has a relationship between the two (either way).
fn relation_exists(state: &State, a: &str, b: &str) -> bool {
    let snapshot = state.snapshot();
    let g = &snapshot.graph;
    let (Some(a), Some(b)) = (g.find(a), g.find(b)) else { return false };
    g.edges.iter().any(|e| (e.source == a && e.target == b) || (e.source == b && e.target == a))
}

fn weight(data: &BTreeMap<String, Value>) -> Result<Option<f64>> {
    match data.get("weight") {
        None | Some(Value::Null) => Ok(None),
        Some(v) => v.as_f64().filter(|w| w.is_finite() && *w >= 0.0).map(Some).ok_or_else(|| {
            ApiError::new(StatusCode::UNPROCESSABLE_ENTITY, format!("`weight` must be a number ≥ 0, not {v}"))
        }),
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RelationUpdate {
    source_id: String,
    target_id: String,
    updated_data: BTreeMap<String, Value>,
}

/// `POST /graph/relation/edit`: description and weight.
pub fn edit_relation(state: &Arc<State>, body: &[u8]) -> Result<Resp> {
    let req: RelationUpdate = http::parse_json(body)?;
    let (source, target) = (existing(state, &req.source_id)?, existing(state, &req.target_id)?);
    if !relation_exists(state, &source, &target) {
        return Err(ApiError::not_found(format!("no relationship between `{source}` and `{target}`")));
    }
    only(&req.updated_data, &["description", "weight", "keywords"])?;
    if req.updated_data.contains_key("keywords") {
        return Err(ApiError::new(
            StatusCode::UNPROCESSABLE_ENTITY,
            "`keywords` cannot be edited: graphrag-rs relationships have a description and a weight, no keywords",
        ));
    }
    let (description, weight) = (text(&req.updated_data, "description")?, weight(&req.updated_data)?);
    let data = json!({"src_id": source, "tgt_id": target, "description": description, "weight": weight});
    let what = format!("{source} - {target}");
    record(state, GraphEdit::EditRelationship { source, target, description, weight }, &what)?;
    applied(format!("Relation {what} updated"), data)
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RelationCreate {
    source_entity: String,
    target_entity: String,
    relation_data: BTreeMap<String, Value>,
}

/// `POST /graph/relation/create`: between two existing entities (400 when
/// they are related already, as LightRAG).
pub fn create_relation(state: &Arc<State>, body: &[u8]) -> Result<Resp> {
    let req: RelationCreate = http::parse_json(body)?;
    let (source, target) = (existing(state, &req.source_entity)?, existing(state, &req.target_entity)?);
    if source == target {
        return Err(bad("a relationship needs two different entities".into()));
    }
    if relation_exists(state, &source, &target) {
        return Err(bad(format!("`{source}` and `{target}` are related already: edit that relationship")));
    }
    only(&req.relation_data, &["description", "weight", "keywords", "source_id", "file_path"])?;
    let description = text(&req.relation_data, "description")?.unwrap_or_default();
    let weight = weight(&req.relation_data)?.unwrap_or(1.0);
    let data = json!({"src_id": source, "tgt_id": target, "description": description, "weight": weight});
    let what = format!("{source} - {target}");
    record(state, GraphEdit::CreateRelationship { source, target, description, weight }, &what)?;
    applied(format!("Relation {what} created"), data)
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RelationDelete {
    source_entity: String,
    target_entity: String,
}

/// `DELETE /graph/relation/delete` (404 for an unknown pair).
pub fn delete_relation(state: &Arc<State>, body: &[u8]) -> Result<Resp> {
    let req: RelationDelete = http::parse_json(body)?;
    let (source, target) = (existing(state, &req.source_entity)?, existing(state, &req.target_entity)?);
    if !relation_exists(state, &source, &target) {
        return Err(ApiError::not_found(format!("no relationship between `{source}` and `{target}`")));
    }
    let what = format!("{source} - {target}");
    record(state, GraphEdit::DeleteRelationship { source, target }, &what)?;
    http::json(json!({
        "status": "success",
        "doc_id": "",
        "message": format!("Relation {what} deleted; kept in graph_edits.yaml and applied by the update now queued"),
        "status_code": 200,
        "file_path": null,
    }))
}
