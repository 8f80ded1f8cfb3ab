//! Pipelines are data: a YAML list of steps (verb, inputs, outputs, args).
//! This module parses one, resolves `${settings.path}` references in args,
//! validates it against the registry and orders it. Nothing runs here.

use std::collections::{BTreeSet, HashMap};
use std::path::{Path, PathBuf};

use serde::Deserialize;
use serde_json::Value;

use crate::config_error::ConfigError;
use crate::settings::Settings;
use crate::verb::{Registry, Verb, VerbInfo};
use crate::yaml_lines;
use graphrag_operations::suggest::did_you_mean;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct PipelineFile {
    name: String,
    #[serde(default)]
    description: String,
    /// Tables published to the output folder; the rest are intermediate.
    outputs: Vec<String>,
    steps: Vec<StepFile>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct StepFile {
    id: String,
    verb: String,
    #[serde(default)]
    inputs: Vec<String>,
    outputs: Vec<String>,
    #[serde(default)]
    args: Value,
}

/// One step of a [`Plan`]: its verb built from its args, and the tables it
/// reads and writes.
pub struct Step {
    /// Unique within the pipeline; names the step in stats.json and messages.
    pub id: String,
    /// The verb's name and roles.
    pub info: VerbInfo,
    /// Tables bound to the verb's input roles, in order (optional trailing
    /// roles may be left out).
    pub inputs: Vec<String>,
    /// Tables bound to the verb's output roles, in order.
    pub outputs: Vec<String>,
    /// Args after `${...}` resolution: what the step hash covers.
    pub args: Value,
    /// The verb, configured by the args.
    pub verb: Box<dyn Verb>,
    /// The step's line in the pipeline file (1-based), for messages.
    pub line: Option<usize>,
    /// Indexes (into `Plan::steps`) of the steps producing this step's inputs.
    pub deps: Vec<usize>,
}

/// A parsed and validated pipeline, ready to run.
pub struct Plan {
    /// The pipeline's `name:`.
    pub name: String,
    /// Its `description:` (may be empty).
    pub description: String,
    /// The workflows/ file it was read from.
    pub file: PathBuf,
    /// In dependency order (YAML order among independent steps).
    pub steps: Vec<Step>,
    /// Tables written to the output folder (the pipeline's `outputs:`); the
    /// others are intermediate, kept in the staging folder.
    pub published: BTreeSet<String>,
}

impl Plan {
    /// Whether `table` is one of [`Plan::published`].
    pub fn is_published(&self, table: &str) -> bool {
        self.published.contains(table)
    }
}

/// Parses, resolves and validates a pipeline.
pub fn load(file: &Path, text: &str, settings: &Settings, registry: &Registry) -> Result<Plan, ConfigError> {
    let de = serde_yaml_ng::Deserializer::from_str(text);
    let parsed: PipelineFile = serde_path_to_error::deserialize(de).map_err(|e| {
        let mut err = ConfigError::from_yaml(file, e);
        if err.line.is_none() {
            err.line = yaml_lines::line_of(text, &err.path);
        }
        err
    })?;
    let settings_json = serde_json::to_value(settings).expect("settings serialise");
    let at = |path: &str, msg: String| ConfigError::new(file, yaml_lines::line_of(text, path), path, msg);

    let mut seen_ids = BTreeSet::new();
    let mut producer: HashMap<String, usize> = HashMap::new();
    let mut steps = Vec::with_capacity(parsed.steps.len());
    for (i, s) in parsed.steps.into_iter().enumerate() {
        let here = format!("steps[{i}]");
        let step_msg = |m: String| format!("step `{}`: {m}", s.id);
        if !seen_ids.insert(s.id.clone()) {
            return Err(at(&format!("{here}.id"), step_msg("duplicate step id".into())));
        }
        let Some(info) = registry.info(&s.verb) else {
            let msg = format!(
                "unknown verb `{}`{}; known verbs: {}",
                s.verb,
                did_you_mean(&s.verb, registry.names()),
                registry.names().collect::<Vec<_>>().join(", ")
            );
            return Err(at(&format!("{here}.verb"), step_msg(msg)));
        };
        let inputs = (&s.inputs, info.inputs, info.required_inputs());
        let outputs = (&s.outputs, info.outputs, info.outputs.len());
        for (what, (declared, roles, required)) in [("input", inputs), ("output", outputs)] {
            if !(required..=roles.len()).contains(&declared.len()) {
                let count = if required == roles.len() {
                    required.to_string()
                } else {
                    format!("{required} to {}", roles.len())
                };
                return Err(at(
                    &format!("{here}.{what}s"),
                    step_msg(format!(
                        "verb `{}` takes {count} {what}(s) ({}), the step lists {}",
                        s.verb,
                        roles.join(", "),
                        declared.len()
                    )),
                ));
            }
        }
        for out in &s.outputs {
            if let Some(&other) = producer.get(out) {
                let other_id: &String = &steps_id(&steps, other);
                return Err(at(
                    &format!("{here}.outputs"),
                    step_msg(format!("table `{out}` is already produced by step `{other_id}` (duplicate output)")),
                ));
            }
            producer.insert(out.clone(), i);
        }
        let args = resolve(&s.args, &settings_json, "").map_err(|(p, m)| {
            let path = if p.is_empty() { format!("{here}.args") } else { format!("{here}.args.{p}") };
            at(&path, step_msg(m))
        })?;
        let verb = registry.build(&s.verb, args.clone()).expect("verb is registered").map_err(|e| {
            let path = if e.path.is_empty() { format!("{here}.args") } else { format!("{here}.args.{}", e.path) };
            let arg = if e.path.is_empty() { String::new() } else { format!("arg `{}`: ", e.path) };
            at(&path, step_msg(format!("{arg}{}", e.message)))
        })?;
        steps.push(Step {
            line: yaml_lines::line_of(text, &here),
            id: s.id,
            info,
            inputs: s.inputs,
            outputs: s.outputs,
            args,
            verb,
            deps: Vec::new(),
        });
    }
    // Inputs must be produced by some step.
    for (i, step) in steps.iter_mut().enumerate() {
        for input in &step.inputs {
            match producer.get(input) {
                Some(&p) => step.deps.push(p),
                None => {
                    let known: Vec<&str> = producer.keys().map(String::as_str).collect();
                    return Err(at(
                        &format!("steps[{i}].inputs"),
                        format!(
                            "step `{}`: input table `{input}` is not produced by any step{}",
                            step.id,
                            did_you_mean(input, known.iter().copied())
                        ),
                    ));
                }
            }
        }
    }
    for table in &parsed.outputs {
        if !producer.contains_key(table) {
            return Err(at("outputs", format!("published table `{table}` is not produced by any step")));
        }
    }
    let steps = order(steps).map_err(|cycle| {
        ConfigError::new(
            file,
            cycle.first().and_then(|(_, l)| *l),
            "steps",
            format!(
                "steps form a cycle: {}",
                cycle.iter().map(|(id, _)| format!("`{id}`")).collect::<Vec<_>>().join(" → ")
            ),
        )
    })?;
    Ok(Plan {
        name: parsed.name,
        description: parsed.description,
        file: file.to_path_buf(),
        steps,
        published: parsed.outputs.into_iter().collect(),
    })
}

fn steps_id(steps: &[Step], i: usize) -> String {
    steps.get(i).map(|s| s.id.clone()).unwrap_or_default()
}

/// Topological order (Kahn), YAML order among ready steps; on a cycle,
/// returns the ids (and lines) of one cycle.
fn order(steps: Vec<Step>) -> Result<Vec<Step>, Vec<(String, Option<usize>)>> {
    let n = steps.len();
    let mut indegree: Vec<usize> = steps.iter().map(|s| s.deps.len()).collect();
    let mut dependents: Vec<Vec<usize>> = vec![Vec::new(); n];
    for (i, s) in steps.iter().enumerate() {
        for &d in &s.deps {
            dependents[d].push(i);
        }
    }
    let mut ready: BTreeSet<usize> = (0..n).filter(|&i| indegree[i] == 0).collect();
    let mut sequence = Vec::with_capacity(n);
    while let Some(i) = ready.pop_first() {
        sequence.push(i);
        for &j in &dependents[i] {
            indegree[j] -= 1;
            if indegree[j] == 0 {
                ready.insert(j);
            }
        }
    }
    if sequence.len() < n {
        // Walk dependencies from a stuck step until one repeats.
        let mut path = vec![(0..n).find(|&i| indegree[i] > 0).unwrap_or(0)];
        loop {
            let cur = *path.last().unwrap();
            let next = steps[cur].deps.iter().copied().find(|&d| indegree[d] > 0).unwrap_or(cur);
            if let Some(pos) = path.iter().position(|&p| p == next) {
                let mut cycle: Vec<usize> = path[pos..].to_vec();
                cycle.reverse();
                cycle.push(cycle[0]);
                return Err(cycle.into_iter().map(|i| (steps[i].id.clone(), steps[i].line)).collect());
            }
            path.push(next);
        }
    }
    // Re-index deps to the new positions.
    let mut new_pos = vec![0; n];
    for (pos, &old) in sequence.iter().enumerate() {
        new_pos[old] = pos;
    }
    let mut slots: Vec<Option<Step>> = steps.into_iter().map(Some).collect();
    Ok(sequence
        .iter()
        .map(|&old| {
            let mut s = slots[old].take().expect("each step once");
            s.deps = s.deps.iter().map(|&d| new_pos[d]).collect();
            s
        })
        .collect())
}

/// Replaces `${a.b}` references to settings in string args. A string that is
/// exactly one reference takes the setting's own type; otherwise the value
/// is interpolated as text. Errors carry the arg's key path.
fn resolve(value: &Value, settings: &Value, path: &str) -> Result<Value, (String, String)> {
    match value {
        Value::String(s) => resolve_str(s, settings).map_err(|m| (path.to_string(), m)),
        Value::Array(items) => items
            .iter()
            .enumerate()
            .map(|(i, v)| resolve(v, settings, &format!("{path}[{i}]")))
            .collect::<Result<Vec<_>, _>>()
            .map(Value::Array),
        Value::Object(map) => {
            let mut out = serde_json::Map::new();
            for (k, v) in map {
                let p = if path.is_empty() { k.clone() } else { format!("{path}.{k}") };
                out.insert(k.clone(), resolve(v, settings, &p)?);
            }
            Ok(Value::Object(out))
        }
        other => Ok(other.clone()),
    }
}

fn resolve_str(s: &str, settings: &Value) -> Result<Value, String> {
    let lookup = |key: &str| -> Result<Value, String> {
        let mut cur = settings;
        for part in key.split('.') {
            cur = match cur.get(part) {
                Some(v) => v,
                None => {
                    let known: Vec<&str> =
                        cur.as_object().map(|m| m.keys().map(String::as_str).collect()).unwrap_or_default();
                    return Err(format!(
                        "`${{{key}}}` does not name a setting (no `{part}`){}",
                        did_you_mean(part, known.iter().copied())
                    ));
                }
            };
        }
        Ok(cur.clone())
    };
    let trimmed = s.trim();
    if trimmed.starts_with("${") && trimmed.ends_with('}') && trimmed.matches("${").count() == 1 {
        return lookup(&trimmed[2..trimmed.len() - 1]);
    }
    let mut out = String::new();
    let mut rest = s;
    while let Some(start) = rest.find("${") {
        out.push_str(&rest[..start]);
        let after = &rest[start + 2..];
        let end = after.find('}').ok_or_else(|| format!("unterminated `${{` in `{s}`"))?;
        match lookup(&after[..end])? {
            Value::String(v) => out.push_str(&v),
            other => out.push_str(&other.to_string()),
        }
        rest = &after[end + 1..];
    }
    out.push_str(rest);
    Ok(Value::String(out))
}

#[cfg(test)]
mod tests {
    use crate::test_verbs::plan;

    fn err(yaml: &str) -> (Option<usize>, String) {
        let e = plan(yaml).err().expect("pipeline should be rejected");
        (e.line, e.to_string())
    }

    const HEAD: &str = "name: t\noutputs: [b]\nsteps:\n";

    #[test]
    fn orders_steps_by_dependencies() {
        let p = plan(&format!(
            "{HEAD}  - id: second\n    verb: scale\n    inputs: [a]\n    outputs: [b]\n  - id: first\n    verb: source\n    outputs: [a]\n    args: {{value: 2}}\n"
        ))
        .unwrap();
        let ids: Vec<&str> = p.steps.iter().map(|s| s.id.as_str()).collect();
        assert_eq!(ids, ["first", "second"]);
        assert_eq!(p.steps[1].deps, vec![0]);
        assert_eq!(p.steps[1].line, Some(4));
    }

    #[test]
    fn unknown_verb_names_step_line_and_suggests() {
        let (line, msg) = err(&format!("{HEAD}  - id: s\n    verb: sourse\n    outputs: [b]\n"));
        assert_eq!(line, Some(5));
        assert!(msg.contains("step `s`") && msg.contains("did you mean `source`"), "{msg}");
        assert!(msg.starts_with("pipe.yaml:5"), "{msg}");
    }

    #[test]
    fn unknown_arg_names_step_line_and_suggests() {
        let (line, msg) =
            err(&format!("{HEAD}  - id: s\n    verb: source\n    outputs: [b]\n    args:\n      valeu: 3\n"));
        assert_eq!(line, Some(8), "{msg}");
        assert!(msg.contains("step `s`") && msg.contains("did you mean `value`"), "{msg}");
    }

    #[test]
    fn wrong_arg_type_names_the_arg() {
        let (line, msg) =
            err(&format!("{HEAD}  - id: s\n    verb: source\n    outputs: [b]\n    args:\n      value: many\n"));
        assert_eq!(line, Some(8), "{msg}");
        assert!(msg.contains("arg `value`") && msg.contains("invalid type"), "{msg}");
    }

    #[test]
    fn missing_input_table_names_step_and_suggests() {
        let (line, msg) = err(&format!(
            "{HEAD}  - id: a\n    verb: source\n    outputs: [numbers]\n    args: {{value: 1}}\n  - id: b\n    verb: scale\n    inputs: [number]\n    outputs: [b]\n"
        ));
        assert_eq!(line, Some(10), "{msg}");
        assert!(
            msg.contains("step `b`")
                && msg.contains("`number` is not produced")
                && msg.contains("did you mean `numbers`"),
            "{msg}"
        );
    }

    #[test]
    fn duplicate_output_and_duplicate_id() {
        let two = |id2: &str, out2: &str| {
            format!(
                "{HEAD}  - id: a\n    verb: source\n    outputs: [b]\n    args: {{value: 1}}\n  - id: {id2}\n    verb: source\n    outputs: [{out2}]\n    args: {{value: 2}}\n"
            )
        };
        let (line, msg) = err(&two("c", "b"));
        assert_eq!(line, Some(10));
        assert!(msg.contains("duplicate output") && msg.contains("step `a`"), "{msg}");
        let (line, msg) = err(&two("a", "z"));
        assert_eq!(line, Some(8));
        assert!(msg.contains("duplicate step id"), "{msg}");
    }

    #[test]
    fn cycle_names_the_steps() {
        let (line, msg) = err(&format!(
            "{HEAD}  - id: x\n    verb: scale\n    inputs: [b]\n    outputs: [a]\n  - id: y\n    verb: scale\n    inputs: [a]\n    outputs: [b]\n"
        ));
        assert!(msg.contains("cycle") && msg.contains("`x`") && msg.contains("`y`"), "{msg}");
        assert!(line == Some(4) || line == Some(8), "{msg}");
    }

    #[test]
    fn wrong_number_of_inputs() {
        let (line, msg) = err(&format!("{HEAD}  - id: s\n    verb: source\n    inputs: [q]\n    outputs: [b]\n"));
        assert_eq!(line, Some(6), "{msg}");
        assert!(msg.contains("takes 0 input(s)"), "{msg}");
    }

    #[test]
    fn optional_inputs_may_be_left_out() {
        let steps = |inputs: &str| {
            format!(
                "{HEAD}  - id: s\n    verb: source\n    outputs: [a]\n    args: {{value: 1}}\n  - id: m\n    verb: scale\n    inputs: [{inputs}]\n    outputs: [b]\n"
            )
        };
        assert_eq!(plan(&steps("a")).unwrap().steps[1].inputs, ["a"]);
        assert_eq!(plan(&steps("a, a")).unwrap().steps[1].inputs, ["a", "a"]);
        let (line, msg) = err(&steps("a, a, a"));
        assert_eq!(line, Some(10), "{msg}");
        assert!(msg.contains("takes 1 to 2 input(s) (in, offset?), the step lists 3"), "{msg}");
        let (_, msg) = err(&steps(""));
        assert!(msg.contains("takes 1 to 2 input(s)"), "{msg}");
    }

    #[test]
    fn settings_references_resolve_or_fail_with_suggestion() {
        let p = plan(&format!(
            "{HEAD}  - id: s\n    verb: source\n    outputs: [b]\n    args:\n      value: ${{chunking.size}}\n"
        ))
        .unwrap();
        assert_eq!(p.steps[0].args["value"], 1200);
        let p = plan(&format!(
            "{HEAD}  - id: s\n    verb: source\n    outputs: [a]\n    args: {{value: 1}}\n  - id: t\n    verb: scale\n    inputs: [a]\n    outputs: [b]\n    args:\n      label: \"size=${{chunking.size}} enc=${{chunking.encoding_model}}\"\n"
        ))
        .unwrap();
        assert_eq!(p.steps[1].args["label"], "size=1200 enc=o200k_base");
        let (line, msg) = err(&format!(
            "{HEAD}  - id: s\n    verb: source\n    outputs: [b]\n    args:\n      value: ${{chunking.sise}}\n"
        ));
        assert_eq!(line, Some(8), "{msg}");
        assert!(msg.contains("did you mean `size`"), "{msg}");
    }

    #[test]
    fn unknown_step_key_and_unpublished_output() {
        let (line, msg) = err(&format!("{HEAD}  - id: s\n    verb: source\n    output: [b]\n"));
        assert!(msg.contains("did you mean `outputs`"), "{msg}");
        assert!(line.is_some(), "{msg}");
        let (line, msg) = err(
            "name: t\noutputs: [zzz]\nsteps:\n  - id: s\n    verb: source\n    outputs: [b]\n    args: {value: 1}\n",
        );
        assert_eq!(line, Some(2));
        assert!(msg.contains("`zzz` is not produced"), "{msg}");
    }
}
