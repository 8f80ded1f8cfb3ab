//! Small verbs for testing the engine without the real ones.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use arrow_array::RecordBatch;
use arrow_schema::{DataType, Field, Schema};
use serde::Deserialize;

use crate::context::VerbContext;
use crate::pipeline::{self, Plan};
use crate::settings::Settings;
use crate::table::ints;
use crate::verb::{Registry, Verb, VerbDef, VerbInfo};
use crate::{schema, ConfigError};

fn one_int_table(values: Vec<i64>) -> RecordBatch {
    let schema = Arc::new(Schema::new(vec![Field::new("v", DataType::Int64, true)]));
    RecordBatch::try_new(schema, vec![schema::int_col(values)]).unwrap()
}

/// Emits `[value]`.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Source {
    pub value: i64,
}

impl VerbDef for Source {
    const INFO: VerbInfo = VerbInfo { name: "source", about: "emit a value", inputs: &[], outputs: &["out"] };
}

impl Verb for Source {
    fn run(&self, _: &[Arc<RecordBatch>], _: &VerbContext) -> anyhow::Result<Vec<RecordBatch>> {
        Ok(vec![one_int_table(vec![self.value])])
    }
}

/// Multiplies every value by `factor`.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Scale {
    #[serde(default = "one")]
    pub factor: i64,
    /// Only here to test `${...}` interpolation into string args.
    #[serde(default)]
    #[allow(dead_code)]
    pub label: String,
}

fn one() -> i64 {
    1
}

impl VerbDef for Scale {
    const INFO: VerbInfo =
        VerbInfo { name: "scale", about: "multiply, then add", inputs: &["in", "offset?"], outputs: &["out"] };
}

impl Verb for Scale {
    fn run(&self, inputs: &[Arc<RecordBatch>], _: &VerbContext) -> anyhow::Result<Vec<RecordBatch>> {
        let v = ints(&inputs[0], "in", "v")?;
        let offset = match inputs.get(1) {
            Some(t) => ints(t, "offset", "v")?.iter().sum(),
            None => 0,
        };
        Ok(vec![one_int_table(v.iter().map(|x| x * self.factor + offset).collect())])
    }
}

/// Waits (up to 10 s, spinning) until `peers` rendezvous verbs run at once;
/// fails if they never do, i.e. if the engine ran them one after another.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Rendezvous {
    pub peers: usize,
}

pub static RENDEZVOUS: AtomicUsize = AtomicUsize::new(0);

impl VerbDef for Rendezvous {
    const INFO: VerbInfo = VerbInfo { name: "rendezvous", about: "meet peers", inputs: &["in"], outputs: &["out"] };
}

impl Verb for Rendezvous {
    fn run(&self, inputs: &[Arc<RecordBatch>], _: &VerbContext) -> anyhow::Result<Vec<RecordBatch>> {
        RENDEZVOUS.fetch_add(1, Ordering::SeqCst);
        let deadline = Instant::now() + Duration::from_secs(10);
        while RENDEZVOUS.load(Ordering::SeqCst) < self.peers {
            anyhow::ensure!(Instant::now() < deadline, "peers never ran concurrently");
            std::thread::yield_now();
        }
        Ok(vec![(*inputs[0]).clone()])
    }
}

/// Always fails.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Fail {}

impl VerbDef for Fail {
    const INFO: VerbInfo = VerbInfo { name: "fail", about: "fail", inputs: &["in"], outputs: &["out"] };
}

impl Verb for Fail {
    fn run(&self, _: &[Arc<RecordBatch>], _: &VerbContext) -> anyhow::Result<Vec<RecordBatch>> {
        anyhow::bail!("deliberate failure")
    }
}

/// Stands for a step that calls a model ([`Verb::model_to_call`]): records
/// that it ran, and fails unless the start-up check for `model_id` passed
/// first ([`CHECKED`]).
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ModelStep {
    pub model_id: String,
}

/// The model ids whose start-up check passed, and those whose step ran.
pub static CHECKED: Mutex<Vec<String>> = Mutex::new(Vec::new());
pub static MODEL_STEPS_RUN: Mutex<Vec<String>> = Mutex::new(Vec::new());

impl VerbDef for ModelStep {
    const INFO: VerbInfo = VerbInfo { name: "model_step", about: "call a model", inputs: &["in"], outputs: &["out"] };
}

impl Verb for ModelStep {
    fn model_to_call(&self) -> Option<&str> {
        Some(&self.model_id)
    }

    fn run(&self, inputs: &[Arc<RecordBatch>], _: &VerbContext) -> anyhow::Result<Vec<RecordBatch>> {
        MODEL_STEPS_RUN.lock().unwrap().push(self.model_id.clone());
        anyhow::ensure!(CHECKED.lock().unwrap().contains(&self.model_id), "started before the start-up check passed");
        Ok(vec![(*inputs[0]).clone()])
    }
}

pub fn registry() -> Registry {
    let mut r = Registry::default();
    r.register::<Source>().register::<Scale>().register::<Rendezvous>().register::<Fail>().register::<ModelStep>();
    r
}

pub fn plan(yaml: &str) -> Result<Plan, ConfigError> {
    pipeline::load(std::path::Path::new("pipe.yaml"), yaml, &Settings::default(), &registry())
}
