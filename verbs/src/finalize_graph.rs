//! `finalize_graph`: the graph as GraphRAG publishes it — ids, degrees,
//! human-readable ids — and text units linked to their entities,
//! relationships and claims. Optionally a GraphML snapshot.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;

use arrow_array::{ArrayRef, RecordBatch};
use serde::Deserialize;

use graphrag_engine::context::VerbContext;
use graphrag_engine::graph_edits_file;
use graphrag_engine::schema;
use graphrag_engine::table::{floats, ints, string_column, string_lists, strings, StringLists};
use graphrag_engine::verb::{Verb, VerbDef, VerbInfo};
use graphrag_operations::graph_edits::{self, Entity, GraphEdit, Relationship};
use graphrag_operations::graph_merge::{MergedEntity, MergedRelationship};
use graphrag_operations::ids::{entity_id, sha256_hex, stable_uuid};

use crate::graph_tables::{joined_descriptions, read_merged_entities, read_merged_relationships};

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FinalizeGraph {
    /// Also write output/graph.graphml.
    #[serde(default)]
    pub graphml: bool,
    /// The project's graph edits file, relative to its root (see
    /// `graphrag_engine::graph_edits_file`), applied before anything else.
    #[serde(default = "edits_file")]
    pub edits_file: String,
}

fn edits_file() -> String {
    graph_edits_file::FILE.to_string()
}

impl FinalizeGraph {
    /// The edits file's edits and its text's hash ("none" without one).
    fn edits(&self, ctx: &VerbContext) -> anyhow::Result<(Vec<GraphEdit>, String)> {
        let Some(text) = ctx.project_file(&self.edits_file)? else {
            return Ok((Vec::new(), "none".into()));
        };
        let parsed = graph_edits_file::parse(&text, std::path::Path::new(&self.edits_file))?;
        Ok((parsed.edits, sha256_hex(&[text.as_bytes()])))
    }
}

/// The entity and relationship tables with the edits applied, in the
/// summarised graph's schema (one description per element).
fn edited(
    edits: &[GraphEdit],
    ents: &RecordBatch,
    rels: &RecordBatch,
    ctx: &VerbContext,
    file: &str,
) -> anyhow::Result<(RecordBatch, RecordBatch)> {
    let (titles, types) = (strings(ents, "entities", "title")?, strings(ents, "entities", "type")?);
    let mut entities: Vec<Entity> = joined_descriptions(ents, "entities")?
        .into_iter()
        .zip(string_lists(ents, "entities", "text_unit_ids")?)
        .zip(ints(ents, "entities", "frequency")?)
        .enumerate()
        .map(|(i, ((description, text_unit_ids), frequency))| Entity {
            title: titles[i].to_string(),
            entity_type: types[i].to_string(),
            description,
            text_unit_ids,
            frequency,
        })
        .collect();
    let (sources, targets) = (strings(rels, "relationships", "source")?, strings(rels, "relationships", "target")?);
    let weights = floats(rels, "relationships", "weight")?;
    let mut relationships: Vec<Relationship> = joined_descriptions(rels, "relationships")?
        .into_iter()
        .zip(string_lists(rels, "relationships", "text_unit_ids")?)
        .enumerate()
        .map(|(i, (description, text_unit_ids))| Relationship {
            source: sources[i].to_string(),
            target: targets[i].to_string(),
            description,
            weight: weights[i],
            text_unit_ids,
        })
        .collect();
    for note in graph_edits::apply(edits, &mut entities, &mut relationships) {
        ctx.warn(format!("{file}: {note}"));
    }
    let entities_table = RecordBatch::try_new(
        schema::summarized_entities(),
        vec![
            schema::text_col(entities.iter().map(|e| &e.title)),
            schema::text_col(entities.iter().map(|e| &e.entity_type)),
            schema::text_col(entities.iter().map(|e| &e.description)),
            schema::id_list_col(entities.iter().map(|e| &e.text_unit_ids)),
            schema::int_col(entities.iter().map(|e| e.frequency)),
        ],
    )?;
    let relationships_table = RecordBatch::try_new(
        schema::summarized_relationships(),
        vec![
            schema::text_col(relationships.iter().map(|r| &r.source)),
            schema::text_col(relationships.iter().map(|r| &r.target)),
            schema::text_col(relationships.iter().map(|r| &r.description)),
            schema::float_col(relationships.iter().map(|r| r.weight)),
            schema::id_list_col(relationships.iter().map(|r| &r.text_unit_ids)),
        ],
    )?;
    Ok((entities_table, relationships_table))
}

impl VerbDef for FinalizeGraph {
    const INFO: VerbInfo = VerbInfo {
        name: "finalize_graph",
        about: "assign ids and degrees, link text units to entities, relationships and claims",
        inputs: &["entities", "relationships", "text_units", "covariates"],
        outputs: &["entities", "relationships", "text_units"],
    };
}

/// One description: entities of a summarised graph have one; a merged
/// graph's are joined (the fast method has none).
fn description(d: &[String]) -> String {
    d.join("\n")
}

/// Degree of each title: its number of distinct neighbours.
/// Distinct neighbours per title over `(source, target)` pairs (self-loops ignored).
fn degrees<'a>(pairs: impl IntoIterator<Item = (&'a str, &'a str)>) -> HashMap<&'a str, i64> {
    let mut neighbours: HashMap<&str, HashSet<&str>> = HashMap::new();
    for (source, target) in pairs {
        if source != target {
            neighbours.entry(source).or_default().insert(target);
            neighbours.entry(target).or_default().insert(source);
        }
    }
    neighbours.into_iter().map(|(k, v)| (k, v.len() as i64)).collect()
}

impl Verb for FinalizeGraph {
    fn external_fingerprint(&self, ctx: &VerbContext) -> anyhow::Result<Option<String>> {
        Ok(Some(self.edits(ctx)?.1))
    }

    fn run(&self, inputs: &[Arc<RecordBatch>], ctx: &VerbContext) -> anyhow::Result<Vec<RecordBatch>> {
        let (edits, _) = self.edits(ctx)?;
        let edited_tables =
            if edits.is_empty() { None } else { Some(edited(&edits, &inputs[0], &inputs[1], ctx, &self.edits_file)?) };
        // Columns are read borrowed from the input tables: an owned copy of
        // every title and text unit id list costs gigabytes on large graphs.
        let (ents, rels) = match &edited_tables {
            Some((e, r)) => (e, r),
            None => (&*inputs[0], &*inputs[1]),
        };
        let e_title = strings(ents, "entities", "title")?;
        let e_units = StringLists::new(ents, "entities", "text_unit_ids")?;
        let (r_source, r_target) =
            (strings(rels, "relationships", "source")?, strings(rels, "relationships", "target")?);
        let r_units = StringLists::new(rels, "relationships", "text_unit_ids")?;
        let units = &inputs[2];
        let covariates = &inputs[3];
        let degree = degrees(r_source.iter().copied().zip(r_target.iter().copied()));
        let deg = |t: &str| degree.get(t).copied().unwrap_or(0);
        let entity_ids: Vec<String> = e_title.iter().map(|t| entity_id(t)).collect();
        let rel_ids: Vec<String> =
            r_source.iter().zip(&r_target).map(|(s, t)| stable_uuid("relationship", &[s, t])).collect();

        // Shared with the text units' id lists, which index into them.
        let entity_id_col = schema::text_col(&entity_ids);
        drop(entity_ids);
        let rel_id_col = schema::text_col(&rel_ids);
        drop(rel_ids);
        let entities_table = schema::batch(
            schema::entities(),
            vec![
                entity_id_col.clone(),
                schema::int_col(0..ents.num_rows() as i64),
                schema::text_col(&e_title),
                schema::text_col(strings(ents, "entities", "type")?),
                schema::text_col(joined_descriptions(ents, "entities")?),
                id_lists_passed_on(ents, &e_units, "text_unit_ids"),
                schema::int_col(ints(ents, "entities", "frequency")?),
                schema::int_col(e_title.iter().map(|t| deg(t))),
            ],
        )?;
        let relationships_table = schema::batch(
            schema::relationships(),
            vec![
                rel_id_col.clone(),
                schema::int_col(0..rels.num_rows() as i64),
                schema::text_col(&r_source),
                schema::text_col(&r_target),
                schema::text_col(joined_descriptions(rels, "relationships")?),
                schema::float_col(floats(rels, "relationships", "weight")?),
                schema::int_col(r_source.iter().zip(&r_target).map(|(s, t)| deg(s) + deg(t))),
                id_lists_passed_on(rels, &r_units, "text_unit_ids"),
            ],
        )?;

        let unit_ids = strings(units, "text_units", "id")?;
        // One slot per distinct unit id (a repeated chunk repeats its id).
        let mut unit_slot: HashMap<&str, usize> = HashMap::new();
        for u in &unit_ids {
            let next = unit_slot.len();
            unit_slot.entry(u).or_insert(next);
        }
        let claim_units = strings(covariates, "covariates", "text_unit_id")?;
        let claim_id_col = string_column(covariates, "covariates", "id")?.clone();
        let unit_entities = rows_per_unit(&unit_slot, e_units.rows());
        let unit_rels = rows_per_unit(&unit_slot, r_units.rows());
        let unit_claims = rows_per_unit(&unit_slot, claim_units.iter().map(|u| std::iter::once(*u)));
        // Each unit's items as indices into the items' id column.
        let lists = |per_unit: &[Vec<u32>], ids: &ArrayRef| {
            schema::id_list_col_of(ids.clone(), unit_ids.iter().map(|u| per_unit[unit_slot[u]].iter().copied()))
        };
        let mut columns = units.columns().to_vec();
        let s = units.schema();
        columns[s.index_of("entity_ids")?] = lists(&unit_entities, &entity_id_col);
        columns[s.index_of("relationship_ids")?] = lists(&unit_rels, &rel_id_col);
        columns[s.index_of("covariate_ids")?] = lists(&unit_claims, &claim_id_col);
        let text_units = schema::batch(s, columns)?;

        if self.graphml {
            let entities = read_merged_entities(ents, "entities")?;
            let relationships = read_merged_relationships(rels, "relationships")?;
            ctx.write_output("graph.graphml", graphml(&entities, &relationships, &degree).as_bytes())?;
        }
        Ok(vec![entities_table, relationships_table, text_units])
    }
}

/// An input's id-list column as the same output column: shared with the input,
/// not copied, when it already has the output's type (text unit ids are most of
/// the graph tables' size: ~0.75 GB at 100 MB of input).
fn id_lists_passed_on(input: &RecordBatch, lists: &StringLists, column: &str) -> ArrayRef {
    match input.column_by_name(column) {
        Some(col) if schema::is_id_list(col.data_type()) => col.clone(),
        _ => schema::id_list_col(lists.rows()),
    }
}

/// For each text unit (by its slot in `unit_slot`), the rows of the items that
/// list it, in item order; units not in `unit_slot` are skipped. Row numbers
/// rather than id strings: there is one per (item, unit) pair, millions on
/// large graphs.
fn rows_per_unit<'a, I>(unit_slot: &HashMap<&str, usize>, item_units: impl Iterator<Item = I>) -> Vec<Vec<u32>>
where
    I: Iterator<Item = &'a str>,
{
    let mut per_unit = vec![Vec::new(); unit_slot.len()];
    for (item, units) in item_units.enumerate() {
        for u in units {
            if let Some(&slot) = unit_slot.get(u) {
                per_unit[slot].push(item as u32);
            }
        }
    }
    per_unit
}

fn xml_escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&apos;"),
            c if (c as u32) < 0x20 && !matches!(c, '\n' | '\t' | '\r') => {}
            c => out.push(c),
        }
    }
    out
}

/// The graph as GraphML (nodes keyed by title, as GraphRAG's snapshot).
fn graphml(entities: &[MergedEntity], relationships: &[MergedRelationship], degree: &HashMap<&str, i64>) -> String {
    let mut out = String::from(
        "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<graphml xmlns=\"http://graphml.graphdrawing.org/xmlns\">\n\
  <key id=\"type\" for=\"node\" attr.name=\"type\" attr.type=\"string\"/>\n\
  <key id=\"description\" for=\"all\" attr.name=\"description\" attr.type=\"string\"/>\n\
  <key id=\"degree\" for=\"node\" attr.name=\"degree\" attr.type=\"long\"/>\n\
  <key id=\"weight\" for=\"edge\" attr.name=\"weight\" attr.type=\"double\"/>\n\
  <graph edgedefault=\"undirected\">\n",
    );
    let known: BTreeMap<&str, ()> = entities.iter().map(|e| (e.title.as_str(), ())).collect();
    for e in entities {
        out.push_str(&format!(
            "    <node id=\"{}\"><data key=\"type\">{}</data><data key=\"description\">{}</data><data key=\"degree\">{}</data></node>\n",
            xml_escape(&e.title),
            xml_escape(&e.entity_type),
            xml_escape(&description(&e.descriptions)),
            degree.get(e.title.as_str()).copied().unwrap_or(0)
        ));
    }
    for r in
        relationships.iter().filter(|r| known.contains_key(r.source.as_str()) && known.contains_key(r.target.as_str()))
    {
        out.push_str(&format!(
            "    <edge source=\"{}\" target=\"{}\"><data key=\"weight\">{}</data><data key=\"description\">{}</data></edge>\n",
            xml_escape(&r.source),
            xml_escape(&r.target),
            r.weight,
            xml_escape(&description(&r.descriptions))
        ));
    }
    out.push_str("  </graph>\n</graphml>\n");
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn degree_counts_distinct_neighbours() {
        let rels = [("A", "B"), ("A", "C"), ("B", "A"), ("C", "C")];
        let d = degrees(rels);
        assert_eq!((d["A"], d["B"], d["C"]), (2, 1, 1));
    }

    #[test]
    fn rows_per_unit_in_item_order() {
        let unit_slot: HashMap<&str, usize> = [("u0", 0), ("u1", 1), ("u2", 2)].into();
        let items = [vec!["u1", "u0"], vec!["gone"], vec!["u1"], vec![]];
        let per_unit = rows_per_unit(&unit_slot, items.iter().map(|units| units.iter().copied()));
        assert_eq!(per_unit, [vec![0], vec![0, 2], vec![]]);
    }

    #[test]
    fn id_lists_shared_when_of_the_output_type() {
        let table = |col: ArrayRef| {
            let field = arrow_schema::Field::new("ids", col.data_type().clone(), true);
            RecordBatch::try_new(Arc::new(arrow_schema::Schema::new(vec![field])), vec![col]).unwrap()
        };
        let same = table(schema::id_list_col([vec!["a", "b"], vec![]]));
        let out = id_lists_passed_on(&same, &StringLists::new(&same, "t", "ids").unwrap(), "ids");
        assert!(Arc::ptr_eq(&out, same.column(0)));
        let mut large = arrow_array::builder::ListBuilder::new(arrow_array::builder::LargeStringBuilder::new());
        large.values().append_value("a");
        large.append(true);
        let other = table(Arc::new(large.finish()));
        let out = id_lists_passed_on(&other, &StringLists::new(&other, "t", "ids").unwrap(), "ids");
        assert_eq!(out.as_ref(), schema::id_list_col([vec!["a"]]).as_ref());
    }

    #[test]
    fn graphml_escapes() {
        assert_eq!(xml_escape("A & <B> \"c\""), "A &amp; &lt;B&gt; &quot;c&quot;");
    }
}
