//! Entity resolution: one node per real-world thing (RAGFlow's design,
//! without its losses). Candidate pairs come from blocking on names
//! ([`candidates`]: no all-pairs comparison), rules judge them without a
//! model (or a chat model decides, see [`decisions`]), merges are grouped
//! under constraints that keep apart what must stay apart ([`cluster`](mod@cluster)),
//! and the graph is rewritten with every merged entity's text units,
//! descriptions and relationships kept ([`merge`]). Every merge is
//! recorded with its method, score and evidence, so it can be seen and
//! undone.

pub mod candidates;
pub mod cluster;
pub mod decisions;
pub mod merge;
pub mod names;

use std::cmp::Ordering;
use std::collections::HashSet;

use serde::{Deserialize, Serialize};

use candidates::{conflict, Candidate};
use cluster::{cluster, Cluster, Edge};
use names::NameForm;

/// Who decides which entities are one (`resolve_entities.mode`: `auto`,
/// `rules` or `llm`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ResolveMode {
    /// The chat model when one is configured (and the pipeline asks it), else rules.
    Auto,
    /// Rules only: never a model.
    Rules,
    /// The chat model, required.
    Llm,
}

/// One entity as resolution sees it.
#[derive(Debug, Clone, Copy)]
pub struct Entity<'a> {
    pub title: &'a str,
    pub entity_type: &'a str,
    /// Its text units, as ascending numbers (any numbering shared by all entities).
    pub units: &'a [u32],
}

/// How a merge was decided.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Method {
    /// The project's aliases file says so (`same:`).
    AliasesFile,
    /// The same name written differently: case, accents, punctuation,
    /// articles, courtesy titles, possessive, company designators.
    SameName,
    /// One name is the other with words added (`SCROOGE`, `EBENEZER SCROOGE`).
    NameExtension,
    /// One name is the other's initials (`UN`, `UNITED NATIONS`; `J MARLEY`).
    Initials,
    /// A spelling variant (one edit in a long name).
    Spelling,
    /// The chat model said yes.
    Model,
}

impl Method {
    pub fn as_str(self) -> &'static str {
        match self {
            Method::AliasesFile => "aliases_file",
            Method::SameName => "same_name",
            Method::NameExtension => "name_extension",
            Method::Initials => "initials",
            Method::Spelling => "spelling",
            Method::Model => "llm",
        }
    }
}

/// What the project's aliases file asks for, as entity indices.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Overrides {
    /// (entities, evidence) that are one entity whatever else says; the
    /// first is the canonical one.
    pub same: Vec<(Vec<usize>, String)>,
    /// Pairs `(low, high)` that are never merged.
    pub different: HashSet<(usize, usize)>,
}

impl Overrides {
    pub fn apart(&self, x: usize, y: usize) -> bool {
        self.different.contains(&(x.min(y), x.max(y)))
    }

    /// Both in one `same` group, or kept apart: nothing left to decide.
    pub fn settled(&self, x: usize, y: usize) -> bool {
        self.apart(x, y) || self.same.iter().any(|(g, _)| g.contains(&x) && g.contains(&y))
    }
}

/// The merges rules make on their own: the candidates they accept.
pub fn rule_merges(candidates: Vec<Candidate>) -> Vec<Edge> {
    candidates
        .into_iter()
        .filter(|c| c.merge)
        .map(|c| Edge { a: c.a, b: c.b, method: c.method, score: c.score, evidence: c.evidence })
        .collect()
}

/// Groups entities by the accepted `merges` and the overrides, keeping
/// apart what [`conflict`]s or the aliases file forbids. The canonical
/// entity of a group is the one in the most text units, then the one with
/// the fullest name (unless the aliases file names it).
pub fn group(entities: &[Entity], forms: &[NameForm], overrides: &Overrides, merges: Vec<Edge>) -> Vec<Cluster> {
    let apart = |x: usize, y: usize| {
        overrides.apart(x, y)
            || conflict(&forms[x], &forms[y], entities[x].entity_type, entities[y].entity_type).is_some()
    };
    let better = |x: usize, y: usize| -> Ordering {
        entities[x].units.len().cmp(&entities[y].units.len()).then(forms[x].tokens.len().cmp(&forms[y].tokens.len()))
    };
    cluster(entities.len(), &overrides.same, merges, apart, better)
}
