//! `merge_graphs`: per-chunk records → one graph (entities by normalised
//! title, relationships by endpoint pair, descriptions collected).

use std::collections::HashMap;
use std::sync::Arc;

use arrow_array::RecordBatch;
use serde::Deserialize;

use graphrag_engine::context::VerbContext;
use graphrag_engine::table::{floats, strings};
use graphrag_engine::verb::{Verb, VerbDef, VerbInfo};
use graphrag_operations::extraction_parser::{EntityRecord, Extraction, RelationshipRecord};
use graphrag_operations::graph_merge::{merge_extractions, MergeOptions};

use crate::graph_tables::{merged_entities_table, merged_relationships_table};

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MergeGraphs {
    /// Merge entities by title and type (default: title only).
    #[serde(default)]
    pub by_type: bool,
    /// Also write the merged graph before summaries to the output folder as
    /// raw_entities.parquet and raw_relationships.parquet (GraphRAG's
    /// `snapshots.raw_graph`).
    #[serde(default)]
    pub raw_graph: bool,
}

impl VerbDef for MergeGraphs {
    const INFO: VerbInfo = VerbInfo {
        name: "merge_graphs",
        about: "merge per-chunk extraction records into one graph",
        inputs: &["raw_entities", "raw_relationships"],
        outputs: &["graph_entities", "graph_relationships"],
    };
}

impl Verb for MergeGraphs {
    fn run(&self, inputs: &[Arc<RecordBatch>], ctx: &VerbContext) -> anyhow::Result<Vec<RecordBatch>> {
        let (ents, rels) = (&inputs[0], &inputs[1]);
        // Records grouped per text unit, units in order of first appearance.
        let mut units: Vec<(String, Extraction)> = Vec::new();
        let mut index: HashMap<String, usize> = HashMap::new();
        let mut slot = |units: &mut Vec<(String, Extraction)>, id: &str| -> usize {
            *index.entry(id.to_string()).or_insert_with(|| {
                units.push((id.to_string(), Extraction::default()));
                units.len() - 1
            })
        };
        let (e_unit, title, kind, desc) = (
            strings(ents, "raw_entities", "text_unit_id")?,
            strings(ents, "raw_entities", "title")?,
            strings(ents, "raw_entities", "type")?,
            strings(ents, "raw_entities", "description")?,
        );
        for i in 0..ents.num_rows() {
            let s = slot(&mut units, e_unit[i]);
            units[s].1.entities.push(EntityRecord {
                name: title[i].to_string(),
                entity_type: kind[i].to_string(),
                description: desc[i].to_string(),
            });
        }
        let (r_unit, source, target, rdesc, weight) = (
            strings(rels, "raw_relationships", "text_unit_id")?,
            strings(rels, "raw_relationships", "source")?,
            strings(rels, "raw_relationships", "target")?,
            strings(rels, "raw_relationships", "description")?,
            floats(rels, "raw_relationships", "weight")?,
        );
        for i in 0..rels.num_rows() {
            let s = slot(&mut units, r_unit[i]);
            units[s].1.relationships.push(RelationshipRecord {
                source: source[i].to_string(),
                target: target[i].to_string(),
                description: rdesc[i].to_string(),
                strength: weight[i],
            });
        }
        let (entities, relationships) = merge_extractions(&units, &MergeOptions { by_type: self.by_type });
        let tables = vec![merged_entities_table(&entities)?, merged_relationships_table(&relationships)?];
        if self.raw_graph {
            ctx.write_table("raw_entities", &tables[0])?;
            ctx.write_table("raw_relationships", &tables[1])?;
        }
        Ok(tables)
    }
}
