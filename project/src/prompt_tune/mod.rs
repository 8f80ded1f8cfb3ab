//! Prompt tuning (`graphrag-rs prompt-tune`, GraphRAG 3.3's auto templating):
//! prompts adapted to the project's corpus. Chunk the input as the pipeline
//! does and select chunks (`select`), ask the chat model for the domain,
//! language, a persona, the entity types, few-shot extraction examples, the
//! community reporter's role and a report rating description (`generate`),
//! and write `extract_graph.txt`, `summarize_descriptions.txt` and
//! `community_report_graph.txt` (`templates`), checked to keep every
//! placeholder their pipeline steps fill.
//!
//! Every model answer goes through the LLM layer (cache, limits, retries,
//! answer checks): a rerun on the same corpus with the same options sends
//! nothing but the start-up check.

mod generate;
mod select;
mod templates;

use std::path::{Path, PathBuf};

use graphrag_engine::interrupt::StopFlag;
use graphrag_engine::llm::preflight::{self, ModelKind};
use graphrag_engine::llm::{count_prompt_tokens, Message, ModelUsage, UsageCounters};
use graphrag_engine::prompts::PromptTemplate;
use graphrag_engine::settings;
use graphrag_operations::tokenizer::Encoding;

pub use graphrag_operations::chunk_selection::SelectionMethod;
use templates::EntityTypes;

use crate::{OpenOptions, Project};

/// GraphRAG 3.3's prompt-tune defaults (`graphrag/prompt_tune/defaults.py`).
pub mod defaults {
    /// [`PromptTuneOptions::limit`](super::PromptTuneOptions::limit): chunks read by `random` and `top`.
    pub const LIMIT: usize = 15;
    /// [`PromptTuneOptions::max_tokens`](super::PromptTuneOptions::max_tokens): the extraction prompt's budget.
    pub const MAX_TOKENS: usize = 2000;
    /// [`PromptTuneOptions::n_subset_max`](super::PromptTuneOptions::n_subset_max): chunks `auto` embeds.
    pub const N_SUBSET_MAX: usize = 300;
    /// [`PromptTuneOptions::k`](super::PromptTuneOptions::k): clusters (and chunks) of `auto`.
    pub const K: usize = 15;
    /// [`PromptTuneOptions::min_examples_required`](super::PromptTuneOptions::min_examples_required).
    pub const MIN_EXAMPLES_REQUIRED: usize = 2;
}

/// The file names GraphRAG's prompt tuning writes.
const EXTRACT_GRAPH_FILE: &str = "extract_graph.txt";
const SUMMARIZE_DESCRIPTIONS_FILE: &str = "summarize_descriptions.txt";
const COMMUNITY_REPORT_GRAPH_FILE: &str = "community_report_graph.txt";

/// `prompt-tune`'s options, with GraphRAG's names and defaults.
#[derive(Debug, Clone)]
pub struct PromptTuneOptions {
    /// The corpus's domain; `None`: asked of the model.
    pub domain: Option<String>,
    /// The language of the prompts' answers; `None`: asked of the model.
    pub language: Option<String>,
    /// How chunks are chosen: `random`, `top` (the first ones), `all`, or
    /// `auto` (the `k` chunks nearest the centroids of `k` clusters of up to
    /// `n_subset_max` embedded chunks).
    pub selection_method: SelectionMethod,
    /// Chunks read by `random` and `top`.
    pub limit: usize,
    /// The extraction prompt's token budget: examples beyond
    /// `min_examples_required` are left out when they would exceed it.
    pub max_tokens: usize,
    /// In place of settings' `chunking.size`, in tokens.
    pub chunk_size: Option<usize>,
    /// In place of settings' `chunking.overlap`, in tokens; smaller than the
    /// chunk size.
    pub overlap: Option<usize>,
    /// Chunks embedded by `auto`.
    pub n_subset_max: usize,
    /// Clusters (and chunks) of `auto`.
    pub k: usize,
    /// Few-shot examples the extraction prompt keeps whatever `max_tokens`.
    pub min_examples_required: usize,
    /// Ask the model for the entity types; `false`: the extraction prompt
    /// keeps the `{{ entity_types }}` placeholder (settings'
    /// `extract_graph.entity_types`).
    pub discover_entity_types: bool,
    /// Skip the start-up check of the model endpoints.
    pub skip_validation: bool,
}

impl Default for PromptTuneOptions {
    fn default() -> Self {
        PromptTuneOptions {
            domain: None,
            language: None,
            selection_method: SelectionMethod::Random,
            limit: defaults::LIMIT,
            max_tokens: defaults::MAX_TOKENS,
            chunk_size: None,
            overlap: None,
            n_subset_max: defaults::N_SUBSET_MAX,
            k: defaults::K,
            min_examples_required: defaults::MIN_EXAMPLES_REQUIRED,
            discover_entity_types: true,
            skip_validation: false,
        }
    }
}

impl PromptTuneOptions {
    fn check(&self) -> anyhow::Result<()> {
        for (flag, value) in [
            ("--limit", self.limit),
            ("--k", self.k),
            ("--n-subset-max", self.n_subset_max),
            ("--min-examples-required", self.min_examples_required),
            ("--max-tokens", self.max_tokens),
        ] {
            if value == 0 {
                anyhow::bail!("{flag} must be at least 1");
            }
        }
        if self.chunk_size == Some(0) {
            anyhow::bail!("--chunk-size must be at least 1");
        }
        for (flag, value) in [("--domain", &self.domain), ("--language", &self.language)] {
            if value.as_deref().is_some_and(|v| v.trim().is_empty()) {
                anyhow::bail!("{flag} is empty");
            }
        }
        Ok(())
    }
}

/// The prompts prompt tuning made, and what they were made from.
#[derive(Debug, Clone)]
pub struct TunedPrompts {
    /// The text of extract_graph.txt.
    pub extract_graph: String,
    /// The text of summarize_descriptions.txt.
    pub summarize_descriptions: String,
    /// The text of community_report_graph.txt.
    pub community_report_graph: String,
    /// The corpus's domain (given, or the model's answer).
    pub domain: String,
    /// The language the prompts ask answers in (given, or the model's answer).
    pub language: String,
    /// The discovered entity types; `None`: the settings' types.
    pub entity_types: Option<Vec<String>>,
    /// Few-shot examples in the extraction prompt.
    pub examples: usize,
    /// Chunks of the input.
    pub chunks_total: usize,
    /// Chunks the questions were asked about.
    pub chunks_selected: usize,
    /// The chat model's calls (and the embedding model's, for `auto`).
    pub usage: ModelUsage,
}

/// Opens the project with the chunking overrides, for the standard
/// pipeline's chunking steps and the project's models.
fn open(root: &Path, opts: &PromptTuneOptions) -> anyhow::Result<Project> {
    opts.check()?;
    let mut loaded = settings::load(root)?;
    if let Some(size) = opts.chunk_size {
        loaded.settings.chunking.size = size;
    }
    if let Some(overlap) = opts.overlap {
        loaded.settings.chunking.overlap = overlap;
    }
    if loaded.settings.chunking.overlap >= loaded.settings.chunking.size {
        anyhow::bail!(
            "the chunk overlap ({}) must be smaller than the chunk size ({})",
            loaded.settings.chunking.overlap,
            loaded.settings.chunking.size
        );
    }
    Project::with_settings(root, loaded, &OpenOptions { method: "standard".into(), no_cache: false })
}

fn chat_model_id(project: &Project) -> &str {
    &project.settings().extract_graph.completion_model_id
}

/// The tokenizer of the model that reads the extraction prompt.
fn encoding(project: &Project) -> Encoding {
    let s = project.settings();
    s.completion_models
        .get(chat_model_id(project))
        .and_then(|m| m.encoding_model.parse::<Encoding>().ok())
        .unwrap_or(Encoding::O200kBase)
}

/// Runs prompt tuning on the project at `root` (nothing is written: see
/// [`write_prompts`]). Needs a chat model (`extract_graph.completion_model_id`).
pub fn generate_prompts(root: &Path, opts: &PromptTuneOptions) -> anyhow::Result<TunedPrompts> {
    generate_prompts_until(root, opts, &StopFlag::new())
}

/// [`generate_prompts`], whose model calls also end when `stop` is
/// requested (it fails as interrupted; answers already received are
/// cached): a library caller stops this tuning without the process-wide
/// stop, which would stop its other runs too.
pub fn generate_prompts_until(root: &Path, opts: &PromptTuneOptions, stop: &StopFlag) -> anyhow::Result<TunedPrompts> {
    let mut project = open(root, opts)?;
    project.llm.stop_with(stop);
    let chat_id = chat_model_id(&project).to_string();
    let model = project.llm.chat_model(&chat_id).map_err(|e| {
        anyhow::anyhow!(
            "prompt tuning asks a chat model for the domain, persona, entity types and examples: {e}\n(`prompt-tune --dry-run` shows the selected chunks and the calls without one)"
        )
    })?;
    if !opts.skip_validation {
        let mut targets = vec![(ModelKind::Chat, chat_id.clone())];
        if opts.selection_method == SelectionMethod::Auto {
            targets.push((ModelKind::Embedding, project.settings().embed_text.embedding_model_id.clone()));
        }
        crate::log_check(preflight::check(&project.loaded, &targets)?);
    }
    let chunks = select::chunk_corpus(&project)?;
    let chunks_total = chunks.len();
    let usage = UsageCounters::default();
    let selected = select::select(&project, chunks, opts, &usage, true)?;
    for note in &selected.notes {
        tracing::warn!("{note}");
    }
    let settings_types = project.settings().extract_graph.entity_types.clone();
    let given = generate::Given {
        domain: opts.domain.as_deref(),
        language: opts.language.as_deref(),
        discover_entity_types: opts.discover_entity_types,
        settings_types: &settings_types,
        min_examples_required: opts.min_examples_required,
    };
    let answers = project.llm.block_on(generate::ask_all(&model, &selected.chunks, &given, &usage))?;
    let (extract_graph, examples) = assemble_extraction(&answers, encoding(&project), opts);
    let t = &answers;
    let tuned = TunedPrompts {
        extract_graph,
        summarize_descriptions: templates::summarize_descriptions(&t.persona, &t.domain, &t.language),
        community_report_graph: templates::community_report_graph(
            &t.persona,
            &t.role,
            &t.rating_description,
            &t.domain,
            &t.language,
        ),
        domain: t.domain.clone(),
        language: t.language.clone(),
        entity_types: match &t.entity_types {
            EntityTypes::Discovered(types) => Some(types.clone()),
            EntityTypes::FromSettings => None,
        },
        examples,
        chunks_total,
        chunks_selected: selected.chunks.len(),
        usage: usage.total(),
    };
    check_prompts(&tuned)?;
    Ok(tuned)
}

/// The extraction prompt: examples in order while they fit `max_tokens`,
/// the first `min_examples_required` whatever their size (GraphRAG's rule).
fn assemble_extraction(a: &generate::Answers, encoding: Encoding, opts: &PromptTuneOptions) -> (String, usize) {
    let bare = templates::extract_graph(&a.domain, &a.language, &a.entity_types, &[]);
    let mut tokens_left = opts.max_tokens as i64 - encoding.count(&bare) as i64;
    let mut blocks = Vec::new();
    for (i, example) in a.examples.iter().enumerate() {
        let block = templates::example_block(i + 1, &a.entity_types, example);
        let tokens = encoding.count(&block) as i64;
        if i >= opts.min_examples_required && tokens > tokens_left {
            break;
        }
        tokens_left -= tokens;
        blocks.push(block);
    }
    (templates::extract_graph(&a.domain, &a.language, &a.entity_types, &blocks), blocks.len())
}

/// The placeholders each written prompt must keep (its step fills them
/// all; the extraction prompt's `entity_types` only when not discovered).
const EXTRACTION_VARS: [&str; 5] =
    ["entity_types", "input_text", "tuple_delimiter", "record_delimiter", "completion_delimiter"];
const SUMMARY_VARS: [&str; 3] = ["entity_name", "description_list", "max_length"];
const REPORT_VARS: [&str; 2] = ["input_text", "max_report_length"];

/// Checks the prompts as the pipeline will read them: no placeholder their
/// step does not fill, none it fills missing.
fn check_prompts(t: &TunedPrompts) -> anyhow::Result<()> {
    let required_extraction: Vec<&str> =
        EXTRACTION_VARS.iter().copied().filter(|v| *v != "entity_types" || t.entity_types.is_none()).collect();
    for (file, text, fills, required, step) in [
        (EXTRACT_GRAPH_FILE, &t.extract_graph, &EXTRACTION_VARS[..], &required_extraction[..], "extract_graph"),
        (
            SUMMARIZE_DESCRIPTIONS_FILE,
            &t.summarize_descriptions,
            &SUMMARY_VARS[..],
            &SUMMARY_VARS[..],
            "summarize_descriptions",
        ),
        (
            COMMUNITY_REPORT_GRAPH_FILE,
            &t.community_report_graph,
            &REPORT_VARS[..],
            &REPORT_VARS[..],
            "community_reports",
        ),
    ] {
        let prompt = PromptTemplate::new(format!("<generated {file}>"), text.as_str());
        prompt.check_placeholders(&format!("the {step} step"), fills)?;
        let has = prompt.placeholders()?;
        if let Some(missing) = required.iter().find(|v| !has.contains(**v)) {
            anyhow::bail!("generated {file} lacks the placeholder {{{{ {missing} }}}} that the {step} step fills");
        }
    }
    Ok(())
}

/// What [`write_prompts`] did.
#[derive(Debug, Clone)]
pub struct Written {
    /// The three prompt files, in `dir`.
    pub files: Vec<PathBuf>,
    /// Where the files it replaced were copied (none replaced: `None`).
    pub backup: Option<PathBuf>,
    /// Settings that name another file than the one written (the pipeline
    /// will not read the new prompt).
    pub warnings: Vec<String>,
}

/// The project's prompts folder, where `prompt-tune` writes by default.
pub fn default_output_dir(root: &Path) -> PathBuf {
    root.join("prompts")
}

/// Writes the three prompts into `dir` (atomically, each), first copying
/// any file they replace whose text differs into
/// `dir/prompt-tune-backup-<UTC time>/`. `root` is the project, whose
/// settings are checked to name the written files.
pub fn write_prompts(root: &Path, tuned: &TunedPrompts, dir: &Path) -> anyhow::Result<Written> {
    std::fs::create_dir_all(dir).map_err(|e| anyhow::anyhow!("cannot create {}: {e}", dir.display()))?;
    let files = [
        (EXTRACT_GRAPH_FILE, &tuned.extract_graph),
        (SUMMARIZE_DESCRIPTIONS_FILE, &tuned.summarize_descriptions),
        (COMMUNITY_REPORT_GRAPH_FILE, &tuned.community_report_graph),
    ];
    let stamp = chrono::Utc::now().format("%Y%m%dT%H%M%SZ");
    let backup_dir = dir.join(format!("prompt-tune-backup-{stamp}"));
    let mut backup = None;
    for (name, text) in files {
        let path = dir.join(name);
        match std::fs::read(&path) {
            Ok(old) if old != text.as_bytes() => {
                std::fs::create_dir_all(&backup_dir)
                    .map_err(|e| anyhow::anyhow!("cannot create {}: {e}", backup_dir.display()))?;
                graphrag_engine::store::atomic_write(&backup_dir.join(name), &old)
                    .map_err(|e| anyhow::anyhow!("cannot back up {}: {e}", path.display()))?;
                backup = Some(backup_dir.clone());
            }
            Ok(_) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => anyhow::bail!("cannot read {}: {e}", path.display()),
        }
    }
    let mut written = Vec::new();
    for (name, text) in files {
        let path = dir.join(name);
        graphrag_engine::store::atomic_write(&path, text.as_bytes())
            .map_err(|e| anyhow::anyhow!("cannot write {}: {e}", path.display()))?;
        written.push(path);
    }
    Ok(Written { files: written, backup, warnings: settings_warnings(root, dir) })
}

/// Settings whose prompt file is not the one written into `dir`.
fn settings_warnings(root: &Path, dir: &Path) -> Vec<String> {
    let Ok(loaded) = settings::load(root) else { return Vec::new() };
    let s = &loaded.settings;
    let same = |a: &Path, b: &Path| match (a.canonicalize(), b.canonicalize()) {
        (Ok(a), Ok(b)) => a == b,
        _ => a == b,
    };
    [
        ("extract_graph.prompt", &s.extract_graph.prompt, EXTRACT_GRAPH_FILE),
        ("summarize_descriptions.prompt", &s.summarize_descriptions.prompt, SUMMARIZE_DESCRIPTIONS_FILE),
        ("community_reports.graph_prompt", &s.community_reports.graph_prompt, COMMUNITY_REPORT_GRAPH_FILE),
    ]
    .into_iter()
    .filter(|(_, setting, file)| !same(&root.join(setting), &dir.join(file)))
    .map(|(key, setting, file)| {
        format!(
            "settings {key} is {setting}: `index` will not read the new {}; point it there to use it",
            dir.join(file).display()
        )
    })
    .collect()
}

/// One kind of model call a run would make.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CallEstimate {
    /// What is asked: `domain`, `persona`, `few-shot examples`, ...
    pub question: &'static str,
    /// Chat requests of this kind.
    pub calls: usize,
    /// Estimated prompt tokens of those calls (the answers they depend on
    /// — domain, persona — stood in by text of a typical length).
    pub prompt_tokens: u64,
}

/// What a run would read and ask ([`dry_run`]): nothing is sent.
#[derive(Debug, Clone)]
pub struct PromptTuneEstimate {
    /// Chunks of the input.
    pub chunks_total: usize,
    /// Chunks a run would ask about.
    pub chunks_selected: usize,
    /// The first words of each selected chunk.
    pub selected_previews: Vec<String>,
    /// The chat model's id (`extract_graph.completion_model_id`).
    pub chat_model: String,
    /// Whether the chat model is configured (a run needs it).
    pub chat_model_configured: bool,
    /// The chat requests, by question, in the order a run asks them.
    pub calls: Vec<CallEstimate>,
    /// `auto`: the embedding model and the chunks it embeds.
    pub embedding: Option<(String, usize)>,
    /// Where the selection differs from what was asked (a limit beyond the
    /// corpus; `auto` estimated without calling its embedding model).
    pub notes: Vec<String>,
}

impl PromptTuneEstimate {
    /// Chat requests of every kind.
    pub fn total_calls(&self) -> usize {
        self.calls.iter().map(|c| c.calls).sum()
    }
    /// Estimated prompt tokens of every request.
    pub fn total_prompt_tokens(&self) -> u64 {
        self.calls.iter().map(|c| c.prompt_tokens).sum()
    }
}

/// Stand-ins for the answers later questions include, of typical length.
const STAND_IN_DOMAIN: &str = "the domain of the corpus";
const STAND_IN_PERSONA: &str = "You are an expert in the domain of the corpus. You are skilled at finding the people, organizations, places and ideas that documents of this domain name, and at mapping how they relate to each other and form communities. You help people understand the structure of these networks and what they mean.";

/// The selection and the model calls `generate_prompts` would make, without
/// calling a chat model. `auto` embeds its chunks when the embedding model
/// is in-process (nothing is sent); otherwise the estimate assumes the
/// largest of its candidate chunks.
pub fn dry_run(root: &Path, opts: &PromptTuneOptions) -> anyhow::Result<PromptTuneEstimate> {
    let project = open(root, opts)?;
    let chunks = select::chunk_corpus(&project)?;
    let chunks_total = chunks.len();
    let usage = UsageCounters::default();
    let auto = opts.selection_method == SelectionMethod::Auto;
    let embed = select::embeds_locally(&project);
    let selected = select::select(&project, chunks, opts, &usage, embed)?;
    let sample = generate::sample_text(&selected.chunks);
    let tokens = |m: Vec<Message>| count_prompt_tokens(&m);
    let (domain, persona) = (opts.domain.as_deref().unwrap_or(STAND_IN_DOMAIN), STAND_IN_PERSONA);
    let language = opts.language.as_deref().unwrap_or("English");
    let mut calls = Vec::new();
    let mut add = |question: &'static str, n: usize, prompt_tokens: u64| {
        if n > 0 {
            calls.push(CallEstimate { question, calls: n, prompt_tokens });
        }
    };
    if opts.domain.is_none() {
        add("domain", 1, tokens(generate::messages::domain(&sample)));
    }
    if opts.language.is_none() {
        add("language", 1, tokens(generate::messages::language(&sample)));
    }
    add("persona", 1, tokens(generate::messages::persona(domain)));
    add("report rating description", 1, tokens(generate::messages::rating(persona, domain, &sample)));
    if opts.discover_entity_types {
        add("entity types", 1, tokens(generate::messages::entity_types(persona, domain, &sample)));
    }
    let types: Vec<String> = project.settings().extract_graph.entity_types.iter().map(|t| t.to_uppercase()).collect();
    let example_chunks = &selected.chunks[..selected.chunks.len().min(generate::MAX_EXAMPLES)];
    let example_tokens: u64 =
        example_chunks.iter().map(|c| tokens(generate::messages::example(persona, domain, language, &types, c))).sum();
    add("few-shot examples", example_chunks.len(), example_tokens);
    add("reporter role", 1, tokens(generate::messages::role(persona, domain, &sample)));
    let chat_model = chat_model_id(&project).to_string();
    Ok(PromptTuneEstimate {
        chunks_total,
        chunks_selected: selected.chunks.len(),
        selected_previews: selected.chunks.iter().map(|c| preview(c)).collect(),
        chat_model_configured: project.llm.has_chat_model(&chat_model),
        chat_model,
        calls,
        embedding: auto
            .then(|| (project.settings().embed_text.embedding_model_id.clone(), opts.n_subset_max.min(chunks_total))),
        notes: selected.notes,
    })
}

/// The first words of a chunk, on one line.
fn preview(text: &str) -> String {
    let words: Vec<&str> = text.split_whitespace().take(12).collect();
    let more = text.split_whitespace().nth(12).is_some();
    format!("{}{}", words.join(" "), if more { " ..." } else { "" })
}
