//! Context building without I/O: GraphRAG-style tables packed under token
//! budgets, and the rankings that decide what goes in first.
//!
//! Every table in a query context has GraphRAG's layout:
//!
//! ```text
//! -----Entities-----
//! id|entity|description|number of relationships
//! 12|SCROOGE|A miser who ...|7
//! ```
//!
//! The column separator is always `|` (GraphRAG's `column_delimiter`), the
//! `id` column is the row's `human_readable_id` (what answers cite as
//! `[Data: Entities (12)]`), and each row is one line: white space in a cell
//! (new lines included) is collapsed to single spaces and a `|` inside a cell
//! is written `¦`, so a table is always parseable by splitting on `|`.
//!
//! `tables` packs them; `rankings` decides what goes in first; `history`,
//! `points` (global search's map answers) and `keywords` (and citations)
//! make the other parts of a context. Only [`cited_ids`] is public (a
//! caller checking an answer's citations against its context records); the
//! rest is the search methods' own.

mod history;
mod keywords;
mod points;
mod rankings;
mod tables;

pub(crate) use history::*;
pub use keywords::cited_ids;
pub(crate) use keywords::*;
pub(crate) use points::*;
pub(crate) use rankings::*;
pub(crate) use tables::*;
