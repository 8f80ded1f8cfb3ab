//! `graphrag-rs query`: ask a question of an index (the engine is the
//! graphrag-query library).

use std::io::Write;
use std::path::{Path, PathBuf};

use anyhow::bail;
use graphrag_engine::llm::preflight;
use graphrag_engine::settings::{self, LoadedSettings};
use graphrag_engine::storage::Storage;
use graphrag_query::{Method, QueryEngine, QueryRequest, QueryResult, QueryStats};

pub struct QueryArgs {
    pub root: PathBuf,
    /// local | global | basic | drift | hybrid | mix
    pub method: String,
    /// The output folder to query instead of the project's (GraphRAG's `--data`).
    pub data: Option<PathBuf>,
    pub community_level: Option<u32>,
    pub response_type: String,
    /// Global search: GraphRAG's dynamic community selection.
    pub dynamic_community_selection: bool,
    pub streaming: bool,
    pub context_only: bool,
    pub json: bool,
    pub skip_validation: bool,
    pub question: String,
    /// -1 quiet, 0 normal, 1+ verbose (logs go to stderr).
    pub verbosity: i8,
}

/// Settings of the project, or the defaults for a bare output folder (e.g.
/// one copied from elsewhere) when there is no settings file. `data`, when
/// given, is the output folder to read (GraphRAG's `query --data`).
pub fn project_settings(root: &Path, data: Option<&Path>) -> anyhow::Result<LoadedSettings> {
    let mut loaded = match settings::find(root) {
        Some(_) => settings::load(root)?,
        None => {
            let defaults = LoadedSettings::defaults(&root.join(settings::SETTINGS_FILE));
            if data.is_none() {
                let output = Storage::open(root, &defaults.settings)?.output;
                if !output.has_index()? {
                    bail!("no index in {}: run `graphrag-rs index --root {}` first", output.describe(), root.display());
                }
            }
            tracing::warn!("no {} in {}: using the default settings", settings::SETTINGS_FILE, root.display());
            defaults
        }
    };
    if let Some(data) = data {
        if !data.is_dir() {
            bail!("--data {}: no such folder (it should be an index's output folder)", data.display());
        }
        // Relative to the working directory, as GraphRAG's --data is.
        let absolute = std::path::absolute(data)?;
        loaded.settings.output_storage.base_dir = absolute.to_string_lossy().into_owned();
    }
    Ok(loaded)
}

/// The question: the words given, or the text of `file` (`-`: standard input).
pub fn question(words: Vec<String>, file: Option<&std::path::Path>) -> anyhow::Result<String> {
    use anyhow::Context;
    use std::io::Read;
    let Some(file) = file else {
        return Ok(words.join(" "));
    };
    let mut text = String::new();
    if file == std::path::Path::new("-") {
        std::io::stdin().read_to_string(&mut text).context("reading the question from standard input")?;
    } else {
        text =
            std::fs::read_to_string(file).with_context(|| format!("reading the question from {}", file.display()))?;
    }
    Ok(text)
}

pub fn run(args: QueryArgs) -> anyhow::Result<()> {
    crate::logging::init(args.verbosity, None)?;
    let method: Method = args.method.parse()?;
    let question = args.question.trim().to_string();
    if question.is_empty() {
        bail!("no question given: graphrag-rs query --root DIR --method {method} \"your question\"");
    }
    let loaded = project_settings(&args.root, args.data.as_deref())?;
    if let Some(warning) = loaded.ignored_warning() {
        tracing::warn!("{warning}");
    }
    let engine = QueryEngine::with_settings(&args.root, loaded.settings.clone())?;
    if !args.skip_validation {
        graphrag_project::log_check(preflight::check(&loaded, &engine.models_used(method, args.context_only))?);
    }
    let mut req = QueryRequest::new(method, question.clone());
    req.community_level = args.community_level;
    req.response_type = args.response_type.clone();
    req.context_only = args.context_only;
    req.dynamic_community_selection = args.dynamic_community_selection;

    let stdout = std::io::stdout();
    let mut streamed = false;
    let result = if args.streaming && !args.json {
        // The answer is printed piece by piece as the model generates it.
        let mut print = |text: &str| {
            let mut out = stdout.lock();
            let _ = out.write_all(text.as_bytes());
            let _ = out.flush();
            streamed = true;
        };
        engine.query(&req, Some(&mut print))?
    } else {
        engine.query(&req, None)?
    };

    let mut out = stdout.lock();
    if args.json {
        let value = serde_json::json!({
            "method": method,
            "question": question,
            "answer": result.answer,
            "notice": result.notice,
            "context": result.context,
            "context_records": result.context_records.to_json(),
            "stats": result.stats,
        });
        writeln!(out, "{value}")?;
    } else {
        print_result(&mut out, &result, streamed)?;
    }
    out.flush()?;
    drop(out);
    if !args.json {
        eprintln!("{}", stats_line(method, &result.stats));
    }
    Ok(())
}

fn print_result(out: &mut impl Write, result: &QueryResult, streamed: bool) -> std::io::Result<()> {
    match &result.answer {
        Some(answer) if streamed => {
            if !answer.ends_with('\n') {
                writeln!(out)?;
            }
        }
        Some(answer) => writeln!(out, "{}", answer.trim_end())?,
        None => {
            let notice = result.notice.as_deref().unwrap_or("retrieval only");
            writeln!(out, "[{notice}]")?;
            writeln!(out)?;
            if result.context.trim().is_empty() {
                writeln!(out, "(nothing retrieved)")?;
            } else {
                writeln!(out, "{}", result.context.trim_end())?;
            }
        }
    }
    Ok(())
}

fn plural(n: u64, one: &str, many: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { many })
}

/// The trailing stats line (stderr).
fn stats_line(method: Method, s: &QueryStats) -> String {
    let mut line = format!(
        "{method} search: {:.0} ms (context {:.0} ms, {}), {}, {} prompt + {} completion tokens",
        s.latency_ms,
        s.context_ms,
        plural(s.context_tokens, "token", "tokens"),
        plural(s.llm_calls, "LLM call", "LLM calls"),
        s.prompt_tokens,
        s.completion_tokens
    );
    if s.cache_hits > 0 {
        line.push_str(&format!(", {}", plural(s.cache_hits, "cached answer", "cached answers")));
    }
    if s.json_repairs > 0 {
        line.push_str(&format!(", {}", plural(s.json_repairs, "JSON answer repaired", "JSON answers repaired")));
    }
    if s.unusable_answers > 0 {
        line.push_str(&format!(", {} asked again", plural(s.unusable_answers, "unusable answer", "unusable answers")));
    }
    if s.skipped_steps > 0 {
        line.push_str(&format!(", {} (unusable answers)", plural(s.skipped_steps, "step skipped", "steps skipped")));
    }
    line
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stats_line_reads_well() {
        let s = QueryStats {
            latency_ms: 1234.4,
            context_ms: 12.2,
            context_tokens: 771,
            llm_calls: 1,
            prompt_tokens: 1118,
            completion_tokens: 288,
            skipped_steps: 2,
            ..QueryStats::default()
        };
        assert_eq!(
            stats_line(Method::Local, &s),
            "local search: 1234 ms (context 12 ms, 771 tokens), 1 LLM call, 1118 prompt + 288 completion tokens, 2 steps skipped (unusable answers)"
        );
    }

    #[test]
    fn retrieval_only_output_starts_with_the_notice() {
        let r = QueryResult {
            answer: None,
            notice: Some("retrieval only: no chat model".into()),
            context: "-----Entities-----\nid|entity\n1|X".into(),
            context_records: Default::default(),
            stats: QueryStats::default(),
        };
        let mut buf = Vec::new();
        print_result(&mut buf, &r, false).unwrap();
        let text = String::from_utf8(buf).unwrap();
        assert!(text.starts_with("[retrieval only: no chat model]\n\n-----Entities-----"), "{text}");
    }
}
