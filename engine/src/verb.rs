//! The verb interface and the registry. The engine knows verbs only through
//! a [`Registry`] handed to it; adding a verb is one file plus one
//! `register` line (see verbs/src/lib.rs).

use std::collections::BTreeMap;
use std::sync::Arc;

use arrow_array::RecordBatch;
use serde::de::DeserializeOwned;

use crate::context::VerbContext;

/// What a verb consumes and produces, positionally: a step's `inputs:` and
/// `outputs:` lists name the tables bound to these roles. Input roles ending
/// in `?` are optional and come last: a step may leave them out (pipelines
/// written before the verb took them), and the verb then gets fewer inputs.
#[derive(Debug, Clone, Copy)]
pub struct VerbInfo {
    /// What a step's `verb:` names it by.
    pub name: &'static str,
    /// One line on what it does (`index --list-verbs`).
    pub about: &'static str,
    /// Input roles, in the order [`Verb::run`] gets the tables.
    pub inputs: &'static [&'static str],
    /// Output roles, in the order [`Verb::run`] returns the tables.
    pub outputs: &'static [&'static str],
}

impl VerbInfo {
    /// How many input roles a step must bind (those not ending in `?`).
    pub fn required_inputs(&self) -> usize {
        self.inputs.iter().filter(|r| !r.ends_with('?')).count()
    }
}

/// A configured verb: a function from input tables to output tables.
pub trait Verb: Send + Sync {
    /// `inputs` are in the order of [`VerbInfo::inputs`]; the result must be
    /// in the order of [`VerbInfo::outputs`].
    fn run(&self, inputs: &[Arc<RecordBatch>], ctx: &VerbContext) -> anyhow::Result<Vec<RecordBatch>>;

    /// A fingerprint of what the outputs depend on besides the args and input
    /// tables (e.g. the input files), for `--resume`. None: nothing else.
    fn external_fingerprint(&self, _ctx: &VerbContext) -> anyhow::Result<Option<String>> {
        Ok(None)
    }

    /// For `index --dry-run`: the model calls and prompt tokens this step
    /// would spend on these inputs, computed before anything is sent. None:
    /// no estimate (see [`Verb::calls_model`]).
    fn llm_estimate(&self, _inputs: &[Arc<RecordBatch>], _ctx: &VerbContext) -> anyhow::Result<Option<LlmEstimate>> {
        Ok(None)
    }

    /// For `index --dry-run`: whether this step, with these args in this
    /// project, calls a model (chat or embedding, a local one included). A
    /// dry run runs in memory only the steps that call none, to feed the
    /// estimates of later steps; a step that calls one is never run by it.
    fn calls_model(&self, _ctx: &VerbContext) -> anyhow::Result<bool> {
        Ok(false)
    }

    /// The model of the settings this step calls (its `model_id`: a chat or
    /// an embedding model, whether or not these inputs need a call), or
    /// `None` when the verb calls none or its args rule calling one out
    /// (disabled, extractive reports, entity resolution by rules). The
    /// start-up check of the model endpoints checks it, and the step starts
    /// only once that check passed (see `runner::StartupCheck`).
    fn model_to_call(&self) -> Option<&str> {
        None
    }

    /// Whether this step's model calls can be shared out among the shards
    /// of a model stage (`index --shard K/N --phase model`): the verb honours
    /// [`VerbContext::item_shard`], asking only that shard's items; when its
    /// items come in dependent waves (an item's prompt holds an answer of an
    /// earlier wave), it counts them as `model_waves` in the shard's step.
    /// Only for a step that calls a model ([`Self::model_to_call`]).
    fn shards_model_calls(&self) -> bool {
        false
    }
}

/// Expected LLM cost of a step.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct LlmEstimate {
    /// At most this many calls (for the items not answered by the cache).
    pub calls: u64,
    /// Prompt tokens of those calls (see `note` for what is approximate).
    pub prompt_tokens: u64,
    /// Work items (e.g. chunks) the calls are for.
    pub items: u64,
    /// Those of `items` whose first answer is already in the cache.
    pub cached_items: u64,
    /// What the estimate leaves out or approximates, shown beside it; may be empty.
    pub note: String,
}

/// A verb type: its args are its serde config struct.
pub trait VerbDef: Verb + DeserializeOwned + 'static {
    /// The verb's name and roles, the same for every configuration.
    const INFO: VerbInfo;

    /// Checks of the args beyond their types (ranges, relations).
    fn check(&self) -> Result<(), String> {
        Ok(())
    }
}

type Build = fn(serde_json::Value) -> Result<Box<dyn Verb>, ArgError>;

/// Why a step's args were rejected.
#[derive(Debug, Clone)]
pub struct ArgError {
    /// The arg's key path (`entity_types[2]`); empty for the args as a whole.
    pub path: String,
    /// What is wrong with it.
    pub message: String,
}

/// The verbs a pipeline may name, by name; the engine builds each step's
/// verb from its args through it.
#[derive(Default)]
pub struct Registry {
    verbs: BTreeMap<&'static str, (VerbInfo, Build)>,
}

impl Registry {
    /// Adds `V` under its [`VerbDef::INFO`] name (replacing a verb of that name).
    pub fn register<V: VerbDef>(&mut self) -> &mut Self {
        self.verbs.insert(V::INFO.name, (V::INFO, build::<V>));
        self
    }

    /// The roles of the verb called `name`, if registered.
    pub fn info(&self, name: &str) -> Option<VerbInfo> {
        self.verbs.get(name).map(|(i, _)| *i)
    }

    /// The registered verbs' names, sorted.
    pub fn names(&self) -> impl Iterator<Item = &'static str> + '_ {
        self.verbs.keys().copied()
    }

    /// The verb `name` configured by `args` (null: its defaults); `None`
    /// when no verb has that name.
    pub fn build(&self, name: &str, args: serde_json::Value) -> Option<Result<Box<dyn Verb>, ArgError>> {
        self.verbs.get(name).map(|(_, b)| b(args))
    }
}

fn build<V: VerbDef>(args: serde_json::Value) -> Result<Box<dyn Verb>, ArgError> {
    let args = if args.is_null() { serde_json::json!({}) } else { args };
    let verb: V = serde_path_to_error::deserialize(args).map_err(|e| {
        let path = e.path().to_string();
        ArgError {
            path: if path == "." { String::new() } else { path },
            message: crate::config_error::explain(&e.into_inner().to_string()),
        }
    })?;
    verb.check().map_err(|message| ArgError { path: String::new(), message })?;
    Ok(Box::new(verb))
}
