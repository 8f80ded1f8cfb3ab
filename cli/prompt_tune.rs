//! `graphrag-rs prompt-tune`: prompts adapted to the project's corpus
//! (GraphRAG's auto templating); the work is graphrag_project::prompt_tune's.

use std::path::{Path, PathBuf};

use clap::Args;
use graphrag_project::prompt_tune::{self, defaults, PromptTuneEstimate, PromptTuneOptions, SelectionMethod};

/// GraphRAG 3.3's `prompt-tune` flags, same names and defaults.
#[derive(Args)]
pub struct PromptTuneFlags {
    /// The domain of the input (e.g. 'space science', 'microbiology'); default: asked of the model.
    #[arg(long)]
    domain: Option<String>,
    /// The language of the prompts' answers; default: detected by the model from the input.
    #[arg(long)]
    language: Option<String>,
    /// How chunks are chosen: random, top, all, or auto (embed --n-subset-max chunks, k-means into
    /// --k clusters, the chunk nearest each centre).
    #[arg(long, default_value = "random", value_parser = parse_selection)]
    selection_method: SelectionMethod,
    /// Chunks read with --selection-method random or top.
    #[arg(long, default_value_t = defaults::LIMIT)]
    limit: usize,
    /// Token budget of the extraction prompt: examples past --min-examples-required that do not fit are left out.
    #[arg(long, default_value_t = defaults::MAX_TOKENS)]
    max_tokens: usize,
    /// Chunk size in tokens (default: chunking.size of settings.yaml).
    #[arg(long)]
    chunk_size: Option<usize>,
    /// Chunk overlap in tokens (default: chunking.overlap of settings.yaml).
    #[arg(long)]
    overlap: Option<usize>,
    /// Chunks embedded with --selection-method auto.
    #[arg(long, default_value_t = defaults::N_SUBSET_MAX)]
    n_subset_max: usize,
    /// Clusters, and so chunks, of --selection-method auto.
    #[arg(long, default_value_t = defaults::K)]
    k: usize,
    /// Few-shot examples the extraction prompt keeps even past --max-tokens.
    #[arg(long, default_value_t = defaults::MIN_EXAMPLES_REQUIRED)]
    min_examples_required: usize,
    /// Ask the model for the corpus's entity types (the default).
    #[arg(long, overrides_with = "no_discover_entity_types")]
    discover_entity_types: bool,
    /// Keep the entity types of settings.yaml (extract_graph.entity_types): the extraction prompt
    /// keeps its {{ entity_types }} placeholder.
    #[arg(long, overrides_with = "discover_entity_types")]
    no_discover_entity_types: bool,
    /// Where the prompts are written, relative to the project (default: its prompts/ folder); files
    /// replaced are first copied into a prompt-tune-backup-<time>/ folder there.
    #[arg(short, long)]
    output: Option<PathBuf>,
    /// Print the selected chunks and the model calls and tokens a run would spend; send nothing.
    #[arg(long)]
    dry_run: bool,
}

fn parse_selection(s: &str) -> Result<SelectionMethod, String> {
    s.parse()
}

pub fn run(root: &Path, flags: PromptTuneFlags, skip_validation: bool, verbosity: i8) -> anyhow::Result<()> {
    crate::index::start_logging(root, verbosity, !flags.dry_run)?;
    let opts = PromptTuneOptions {
        domain: flags.domain,
        language: flags.language,
        selection_method: flags.selection_method,
        limit: flags.limit,
        max_tokens: flags.max_tokens,
        chunk_size: flags.chunk_size,
        overlap: flags.overlap,
        n_subset_max: flags.n_subset_max,
        k: flags.k,
        min_examples_required: flags.min_examples_required,
        discover_entity_types: !flags.no_discover_entity_types,
        skip_validation,
    };
    if flags.dry_run {
        print_estimate(&prompt_tune::dry_run(root, &opts)?);
        return Ok(());
    }
    let tuned = prompt_tune::generate_prompts(root, &opts)?;
    let dir = flags.output.map_or_else(|| prompt_tune::default_output_dir(root), |o| root.join(o));
    let written = prompt_tune::write_prompts(root, &tuned, &dir)?;
    // A root in a bucket gets the prompts (and the backup of those replaced).
    let mut files = written.files.clone();
    if let Some(backup) = &written.backup {
        for entry in std::fs::read_dir(backup)? {
            files.push(entry?.path());
        }
    }
    graphrag_engine::storage::root::write_back(root, &files)?;
    for w in &written.warnings {
        tracing::warn!("{w}");
    }
    if verbosity >= 0 {
        println!("Read {} of {} chunks ({}).", tuned.chunks_selected, tuned.chunks_total, opts.selection_method);
        println!("Domain: {}", tuned.domain);
        println!("Language: {}", tuned.language);
        match &tuned.entity_types {
            Some(types) => println!("Entity types: {}", types.join(", ")),
            None => println!("Entity types: extract_graph.entity_types of settings.yaml"),
        }
        println!("Few-shot examples: {}", tuned.examples);
        let u = &tuned.usage;
        println!(
            "Model calls: {} ({} prompt + {} completion tokens), {} answered from the cache",
            u.calls, u.prompt_tokens, u.completion_tokens, u.cache_hits
        );
        for f in &written.files {
            println!("Wrote {}", f.display());
        }
        if let Some(b) = &written.backup {
            println!("The prompts it replaced are in {}", b.display());
        }
    }
    Ok(())
}

fn print_estimate(e: &PromptTuneEstimate) {
    println!("Would read {} of {} chunks:", e.chunks_selected, e.chunks_total);
    for (i, p) in e.selected_previews.iter().enumerate() {
        println!("  {:>3}. {p}", i + 1);
    }
    for note in &e.notes {
        println!("note: {note}");
    }
    if let Some((model, texts)) = &e.embedding {
        println!("Embedding model `{model}`: {texts} chunks (auto selection)");
    }
    println!("Chat model `{}` calls (nothing sent):", e.chat_model);
    for c in &e.calls {
        println!("  {:<28} {:>3} calls  ~{:>8} prompt tokens", c.question, c.calls, c.prompt_tokens);
    }
    println!("  {:<28} {:>3} calls  ~{:>8} prompt tokens", "total", e.total_calls(), e.total_prompt_tokens());
    if !e.chat_model_configured {
        println!(
            "A run needs a chat model: completion_models.{} has no api_key or api_base in settings.yaml.",
            e.chat_model
        );
    }
}
