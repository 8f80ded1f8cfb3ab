//! `lexical_index`: the terms of every text unit for BM25 search
//! (`graphrag_operations::lexical`), as a table the query engine turns into
//! an inverted index: one row per text unit, in the text units' order.

use std::sync::Arc;

use arrow_array::RecordBatch;
use rayon::prelude::*;
use serde::Deserialize;

use graphrag_engine::context::VerbContext;
use graphrag_engine::schema;
use graphrag_engine::table::strings;
use graphrag_engine::verb::{Verb, VerbDef, VerbInfo};
use graphrag_operations::lexical::{TermCounts, ANALYZER};

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LexicalIndex {}

impl VerbDef for LexicalIndex {
    const INFO: VerbInfo = VerbInfo {
        name: "lexical_index",
        about: "terms of every text unit for BM25 search (English words, CJK unigrams and bigrams)",
        inputs: &["text_units"],
        outputs: &["lexical_index"],
    };
}

/// The lexical index table of text units given as (id, text).
pub fn lexical_table(ids: &[&str], texts: &[&str]) -> anyhow::Result<RecordBatch> {
    let counts: Vec<TermCounts> = texts.par_iter().map(|t| TermCounts::of(t)).collect();
    Ok(RecordBatch::try_new(
        schema::lexical_index(ANALYZER),
        vec![
            schema::text_col(ids),
            schema::int_col(counts.iter().map(|c| i64::from(c.length))),
            schema::id_list_col(counts.iter().map(|c| &c.terms)),
            schema::int_list_col(counts.iter().map(|c| c.counts.iter().map(|&n| i64::from(n)).collect())),
        ],
    )?)
}

impl Verb for LexicalIndex {
    fn run(&self, inputs: &[Arc<RecordBatch>], ctx: &VerbContext) -> anyhow::Result<Vec<RecordBatch>> {
        let units = &inputs[0];
        let ids = strings(units, "text_units", "id")?;
        let texts = strings(units, "text_units", "text")?;
        let table = lexical_table(&ids, &texts)?;
        ctx.count("text_units", ids.len() as u64);
        Ok(vec![table])
    }

    /// The analyzer, so that `index --resume` under a build with another
    /// analyzer makes the table again although its input is unchanged (the
    /// query engine would not read the old one).
    fn external_fingerprint(&self, _ctx: &VerbContext) -> anyhow::Result<Option<String>> {
        Ok(Some(ANALYZER.to_string()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use graphrag_engine::table::{ints, string_lists};

    #[test]
    fn one_row_per_unit_with_sorted_terms_and_counts() {
        let t = lexical_table(&["u1", "u2"], &["The ghost saw the ghost.", "李华"]).unwrap();
        assert_eq!(t.num_rows(), 2);
        assert_eq!(ints(&t, "l", "n_terms").unwrap(), [3, 3]);
        assert_eq!(string_lists(&t, "l", "terms").unwrap(), [vec!["ghost", "saw"], vec!["华", "李", "李华"]]);
        assert_eq!(t.schema().metadata().get(schema::LEXICAL_ANALYZER_KEY).map(String::as_str), Some(ANALYZER));
    }
}
