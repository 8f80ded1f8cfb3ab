//! The `graphrag-rs` command line: argument parsing, logging, exit codes.
//!
//! # Modules
//!
//! Argument parsing and printing over `project/` and `query/`: `main.rs` (clap commands, exit codes: 1 on
//! error, 130 after Ctrl-C, 143 after SIGTERM; installs the SIGINT/SIGTERM handler; `--root` is parsed into
//! a `ProjectRoot` once, a bucket root checked out by `storage::root::local_root` before the command; at
//! the end a run's log is uploaded when `reporting` is in a bucket), `init.rs`, `prompt_tune.rs`
//! (GraphRAG's prompt-tune flags, the dry run's table), `index.rs` (index and its dry run: the plan, the
//! estimate, the per-step table; verbs), `shard.rs` (`--shard K/N`, `--merge`, `--shards N`, `--phase
//! units|embed|graph` of `index` and `update`, checked together into one `Sharded`), `update.rs` (update:
//! change summary), `export.rs`, `cache.rs` (`cache import`: `ResponseCache::import`), `query.rs`,
//! `eval.rs` (retrieval evaluation: questions file, per-question scores with recall@2/5/10 over the
//! context's first source units, summary per method / k / budget / type; global refused), `logging.rs`
//! (stderr + log file; console lines go through the progress bars' `MultiProgress` so they print above the
//! bars). `index`, `update` and `query` run the start-up check (`engine::llm::preflight`;
//! `Project::models_check`) before any model is called: `query` before it starts, `index` and `update`
//! beside their first steps that call no model (`runner::StartupCheck`: the steps that call a model wait
//! for it, so a failing check still ends the run with its error alone before any model call);
//! `--skip-validation` skips it.

mod cache;
mod eval;
mod export;
mod index;
mod init;
mod logging;
mod prompt_tune;
mod query;
mod serve;
mod shard;
mod update;

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Args, Parser, Subcommand};
use graphrag_engine::settings::ProjectRoot;

#[derive(Parser)]
#[command(
    name = "graphrag-rs",
    version,
    about = "Build a knowledge-graph index of a folder of documents and query it (GraphRAG / LightRAG compatible)"
)]
struct Cli {
    /// More log output (-v debug, -vv trace).
    #[arg(short, long, global = true, action = clap::ArgAction::Count)]
    verbose: u8,
    /// Only warnings and errors, no progress bars.
    #[arg(short, long, global = true, conflicts_with = "verbose")]
    quiet: bool,
    #[command(subcommand)]
    command: Command,
}

#[derive(Args)]
struct RootArg {
    /// The project folder, or a project in a bucket: s3://bucket/prefix, az://container/prefix,
    /// gs://bucket/prefix (its settings.yaml, .env, prompts/ and workflows/ there; the `file`
    /// storages of its settings become folders under that prefix).
    #[arg(short, long, default_value = ".", value_parser = ProjectRoot::parse)]
    root: ProjectRoot,
    /// With a root in a bucket: the local working copy of its settings, prompts and of the
    /// index being written (default: $XDG_CACHE_HOME/graphrag-rs/<hash of the URL>/).
    #[arg(long, value_name = "DIR")]
    work_dir: Option<PathBuf>,
}

impl RootArg {
    /// The folder the command runs in (a bucket root checked out first).
    fn folder(&self) -> anyhow::Result<PathBuf> {
        self.work_dir_only_for_buckets()?;
        graphrag_engine::storage::root::local_root(&self.root, self.work_dir.as_deref())
    }

    fn work_dir_only_for_buckets(&self) -> anyhow::Result<()> {
        match (&self.root, &self.work_dir) {
            (ProjectRoot::Folder(dir), Some(_)) => anyhow::bail!(
                "--work-dir is the working copy of a root in a bucket; {} is a folder, which is its own",
                dir.display()
            ),
            _ => Ok(()),
        }
    }

    /// The folder of a command that writes files outside the project's own
    /// (LanceDB exports) and has no way yet to put them into a bucket root.
    fn local_only(&self, command: &str) -> anyhow::Result<PathBuf> {
        self.work_dir_only_for_buckets()?;
        match &self.root {
            ProjectRoot::Folder(dir) => Ok(dir.clone()),
            ProjectRoot::Remote(remote) => anyhow::bail!(
                "`{command}` with a root in a bucket ({}) is not built: it writes files into a local folder; run it on a local copy of the project",
                remote.url()
            ),
        }
    }
}

/// Flags of the commands that call models.
#[derive(Args)]
struct ModelFlags {
    /// Skip the start-up check that sends one tiny request to each model endpoint the run uses
    /// (it turns a server that is down, a wrong port or a base URL without /v1 into one clear
    /// error within seconds).
    #[arg(long)]
    skip_validation: bool,
}

#[derive(Subcommand)]
enum Command {
    /// Create a project: settings.yaml, prompts/, workflows/, input/, .env.
    Init {
        #[command(flatten)]
        root: RootArg,
        /// Overwrite settings.yaml, prompts/ and workflows/ of an existing project (.env and input/ are kept).
        #[arg(short, long)]
        force: bool,
        /// The chat model's name (default gpt-4.1-mini), e.g. gpt-4.1 or, for Ollama, llama3.1.
        #[arg(short = 'm', long)]
        model: Option<String>,
        /// The embedding model: an OpenAI-compatible model's name (e.g. text-embedding-3-small),
        /// or `local` for all-MiniLM-L6-v2 run in-process (the default).
        #[arg(short = 'e', long)]
        embedding: Option<String>,
    },
    /// Run the indexing pipeline over input/ and write Parquet tables to output/.
    Index {
        #[command(flatten)]
        root: RootArg,
        /// Pipeline: standard (LLM extraction, summaries, community reports), light (LLM
        /// extraction, LightRAG's economics: no community reports), fast (no LLM), auto
        /// (standard when a chat model is configured, else fast), or a path to a pipeline YAML file.
        #[arg(short, long, default_value = "auto")]
        method: String,
        /// Skip steps whose verb, args and inputs are unchanged since the last run.
        #[arg(long)]
        resume: bool,
        /// Validate settings and pipeline and print the plan without running it.
        #[arg(long)]
        dry_run: bool,
        /// Neither read nor write the model answer cache for this run.
        #[arg(long)]
        no_cache: bool,
        #[command(flatten)]
        shards: shard::ShardFlags,
        #[command(flatten)]
        models: ModelFlags,
    },
    /// Write prompts adapted to the input (GraphRAG's auto templating): domain, language, persona,
    /// entity types and few-shot examples from selected chunks, into extract_graph.txt,
    /// summarize_descriptions.txt and community_report_graph.txt. Needs a chat model (--dry-run does not).
    PromptTune {
        #[command(flatten)]
        root: RootArg,
        #[command(flatten)]
        flags: prompt_tune::PromptTuneFlags,
        #[command(flatten)]
        models: ModelFlags,
    },
    /// Ask a question of an index: local, global, basic, drift (GraphRAG), hybrid, mix (LightRAG) or
    /// ppr (graph propagation, HippoRAG 2) search.
    Query {
        #[command(flatten)]
        root: RootArg,
        /// local | global | basic | drift | hybrid | mix | ppr, or the baselines dense | bm25 (basic
        /// search by one ranking; basic fuses both)
        #[arg(short, long, default_value = "local")]
        method: String,
        /// The index's output folder (default: the project's output_storage.base_dir), as
        /// GraphRAG's `--data`.
        #[arg(short, long)]
        data: Option<PathBuf>,
        /// Community level of the reports used (global, local, drift): as GraphRAG, every report of
        /// levels 0 to N; default 2. A level the index does not have uses its deepest, with a notice.
        #[arg(long)]
        community_level: Option<u32>,
        /// Global search: choose the reports by LLM relevance rating, top-down (GraphRAG's dynamic community selection).
        #[arg(long, overrides_with = "no_dynamic_selection")]
        dynamic_community_selection: bool,
        #[arg(long, hide = true)]
        no_dynamic_selection: bool,
        /// Target length and format of the answer.
        #[arg(long, default_value = "Multiple Paragraphs")]
        response_type: String,
        /// Print the answer as it arrives.
        #[arg(long, overrides_with = "no_streaming")]
        streaming: bool,
        #[arg(long, hide = true)]
        no_streaming: bool,
        /// Print the retrieved context without calling the chat model.
        #[arg(long)]
        context_only: bool,
        /// Print one JSON object: method, question, answer, notice, context, context_records, stats.
        #[arg(long)]
        json: bool,
        /// Read the question from this file (`-`: standard input), for long or multi-line questions.
        #[arg(long, value_name = "FILE", conflicts_with = "question")]
        question_file: Option<PathBuf>,
        #[command(flatten)]
        models: ModelFlags,
        /// The question (several words are joined with spaces).
        #[arg(required_unless_present = "question_file")]
        question: Vec<String>,
    },
    /// Score retrieval on a question set: is each gold passage (or gold document) in the context a
    /// method retrieves? Prints recall, all-found rate, recall@2/5/10 (among the first 2, 5, 10 text
    /// units of the context's Sources, in the method's order), context tokens and latency per method,
    /// k, budget and question type; no chat calls unless --answers.
    ///
    /// A gold passage counts as found when its text is in the context ignoring case, whitespace,
    /// punctuation and quote styles, or, split across text units, when 80% of its 8-word shingles
    /// are. Questions without gold passages are scored on gold_docs: titles (or file paths under
    /// input/) of the documents of the context's source text units.
    Eval {
        #[command(flatten)]
        root: RootArg,
        /// JSON list of {id, question, answer, answer_aliases, type, gold_docs, gold_passages}.
        #[arg(long)]
        questions: PathBuf,
        /// Methods to compare, comma-separated: local, basic, drift, hybrid, mix, ppr, and the
        /// baselines dense and bm25 (basic search by one ranking). Not global: it retrieves nothing
        /// to score.
        #[arg(short, long, default_value = "basic,local,mix")]
        method: String,
        /// Vector-search sizes to compare, comma-separated; each sets basic_search.k (text units;
        /// basic's token cap is lifted so that k decides), local_search.top_k_entities (entities of
        /// local and drift; GraphRAG oversamples x2) and keyword_search.chunk_top_k (mix's text
        /// chunks). Default: the values in settings.yaml.
        #[arg(long)]
        k: Option<String>,
        /// Context budgets in tokens to compare methods at, comma-separated (e.g. 2000,5000,10000):
        /// every method packs its context to the budget, in its own rank order, instead of its
        /// settings' token limits, and without a cap on the number of text units.
        #[arg(long)]
        budget: Option<String>,
        /// Write the summary and per-question scores as JSON to this file.
        #[arg(long)]
        output: Option<PathBuf>,
        /// Only the first N questions.
        #[arg(long)]
        limit: Option<usize>,
        /// Also generate answers with the chat model and score exact match and token F1 against
        /// answer and answer_aliases (SQuAD normalisation); needs a configured chat model.
        #[arg(long)]
        answers: bool,
        /// What retrieval is scored against: `evidence` (gold_passages, else gold_docs) or
        /// `answer`, for question sets with answers but no gold evidence (GraphRAG-Bench): each
        /// distinct word of the answer (BM25's terms: lower case, no stop words; the best of
        /// answer_aliases) is found when the context has it, so recall is the share of the
        /// answer's words retrieved and all found means every one.
        #[arg(long, value_enum, default_value = "evidence")]
        gold: eval::GoldMode,
    },
    /// Bring the index up to date with the input folder: new, changed and removed documents, reusing
    /// cached model answers for everything unchanged; the previous index stays live until it succeeds.
    Update {
        #[command(flatten)]
        root: RootArg,
        /// Pipeline: auto (the one the index was built with), standard, light, fast, or a pipeline .yaml.
        #[arg(short, long, default_value = "auto")]
        method: String,
        /// Validate and print the plan and the model calls it would make (uncached items), without running.
        #[arg(long)]
        dry_run: bool,
        /// Neither read nor write the model answer cache (every document is paid for again).
        #[arg(long)]
        no_cache: bool,
        #[command(flatten)]
        shards: shard::ShardFlags,
        #[command(flatten)]
        models: ModelFlags,
    },
    /// Write the index's vectors where other tools read them. `lancedb`: Microsoft GraphRAG 3.3's
    /// LanceDB tables (entity_description, community_full_content, text_unit_text), so that
    /// graphrag.api's local, basic and drift search run on this output folder. Needs Python 3 with
    /// the lancedb package (`pip install lancedb`). `index` and `update` do it themselves when
    /// settings.yaml has `vector_store.type: lancedb`.
    Export {
        /// What to write: lancedb
        #[arg(value_enum)]
        target: ExportTarget,
        #[command(flatten)]
        root: RootArg,
        /// The LanceDB folder; default: vector_store.db_uri of settings.yaml (output/lancedb).
        #[arg(long)]
        db_uri: Option<PathBuf>,
        /// The Python interpreter that has lancedb; default: $GRAPHRAG_RS_PYTHON, else python3.
        #[arg(long)]
        python: Option<PathBuf>,
    },
    /// List the verbs this build provides.
    Verbs,
    /// The model answer cache.
    Cache {
        #[command(subcommand)]
        command: CacheCommand,
    },
    /// Serve the index over HTTP: LightRAG's REST API (documents, query, graph), Ollama- and
    /// OpenAI-compatible chat, and a web UI at /webui/.
    Serve {
        #[command(flatten)]
        root: RootArg,
        /// The address to listen on (127.0.0.1: this machine only).
        #[arg(long, default_value = "127.0.0.1")]
        host: String,
        #[arg(long, default_value_t = 9621)]
        port: u16,
        /// Require this key on every path but /health (X-API-Key header, or Authorization:
        /// Bearer); default: GRAPHRAG_API_KEY_SERVER from the environment or the project's .env.
        #[arg(long)]
        api_key: Option<String>,
        /// The largest upload, in megabytes.
        #[arg(long, default_value_t = 100)]
        max_upload_mb: usize,
        /// Serve this folder's built web UI at /webui/ instead of the built-in one, e.g.
        /// LightRAG's (the lightrag/api/webui folder of the lightrag-hku wheel).
        #[arg(long)]
        webui_dir: Option<PathBuf>,
        /// A replica: answer queries from the published index (reloaded every
        /// serve.poll_seconds) and refuse every write with 403; the writer is another serve.
        #[arg(long)]
        read_only: bool,
        #[command(flatten)]
        models: ModelFlags,
    },
}

#[derive(Subcommand)]
enum CacheCommand {
    /// Copy a local cache folder (its segments, and the one JSON file per answer of older
    /// versions) into the project's cache on an object store (`cache.storage`), which reads
    /// answers in segments only.
    Import {
        /// The local cache folder, e.g. an earlier project's cache/.
        folder: PathBuf,
        #[command(flatten)]
        root: RootArg,
    },
}

#[derive(Clone, Copy, clap::ValueEnum)]
enum ExportTarget {
    Lancedb,
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let verbosity = if cli.quiet { -1 } else { cli.verbose as i8 };
    // A closure, so that resolving --root can fail with `?` in any arm.
    let result = (move || match cli.command {
        Command::Init { root, force, model, embedding } => {
            root.work_dir_only_for_buckets()?;
            init::run(&init::InitArgs {
                root: root.root,
                work_dir: root.work_dir,
                options: graphrag_project::InitOptions { force, model, embedding },
            })
        }
        Command::Index { root, method, resume, dry_run, no_cache, shards, models } => {
            graphrag_engine::interrupt::install_handler();
            root.folder().and_then(|root| {
                index::run(&index::IndexArgs {
                    shards,
                    root,
                    method,
                    resume,
                    dry_run,
                    no_cache,
                    skip_validation: models.skip_validation,
                    verbosity,
                })
            })
        }
        Command::PromptTune { root, flags, models } => {
            graphrag_engine::interrupt::install_handler();
            prompt_tune::run(&root.folder()?, flags, models.skip_validation, verbosity)
        }
        Command::Query {
            root,
            method,
            data,
            community_level,
            dynamic_community_selection,
            no_dynamic_selection: _,
            response_type,
            streaming,
            no_streaming: _,
            context_only,
            json,
            question_file,
            models,
            question,
        } => query::question(question, question_file.as_deref()).and_then(|question| {
            query::run(query::QueryArgs {
                root: root.folder()?,
                method,
                data,
                community_level,
                response_type,
                dynamic_community_selection,
                streaming,
                context_only,
                json,
                skip_validation: models.skip_validation,
                question,
                verbosity,
            })
        }),
        Command::Eval { root, questions, method, k, budget, output, limit, answers, gold } => {
            eval::run(eval::EvalArgs {
                root: root.folder()?,
                questions,
                methods: method,
                k,
                budgets: budget,
                output,
                limit,
                answers,
                gold,
                verbosity,
            })
        }
        Command::Update { root, method, dry_run, no_cache, shards, models } => {
            graphrag_engine::interrupt::install_handler();
            update::run(&update::UpdateArgs {
                shards,
                root: root.folder()?,
                method,
                dry_run,
                no_cache,
                skip_validation: models.skip_validation,
                verbosity,
            })
        }
        Command::Export { target: ExportTarget::Lancedb, root, db_uri, python } => root
            .local_only("export")
            .and_then(|root| export::run(&export::ExportArgs { root, db_uri, python, verbosity })),
        Command::Serve { root, host, port, api_key, max_upload_mb, webui_dir, read_only, models } => {
            serve::run(serve::ServeArgs {
                root: root.folder()?,
                host,
                port,
                api_key,
                max_upload_mb,
                webui_dir,
                read_only,
                skip_validation: models.skip_validation,
                verbosity,
            })
        }
        Command::Cache { command: CacheCommand::Import { folder, root } } => {
            cache::import(&root.folder()?, &folder, verbosity)
        }
        Command::Verbs => {
            index::print_verbs();
            Ok(())
        }
    })();
    let code = match result {
        Ok(()) => ExitCode::SUCCESS,
        // Ctrl-C or SIGTERM (the handler `index`, `update` and `prompt-tune`
        // install) stops the run, which then ends with an error: the stop's.
        Err(_) if graphrag_engine::interrupt::requested() => {
            tracing::warn!(target: logging::FILE_ONLY, "interrupted ({})", graphrag_engine::interrupt::cause());
            eprintln!("{}", graphrag_engine::interrupt::Interrupted);
            // The shell's code for a process ended by the signal (130 SIGINT, 143 SIGTERM).
            ExitCode::from(graphrag_engine::interrupt::exit_code())
        }
        Err(e) => {
            // For the log file; the console gets the plain line below.
            tracing::error!(target: logging::FILE_ONLY, "{e:#}");
            eprintln!("error: {e:#}");
            ExitCode::FAILURE
        }
    };
    // The log is uploaded after the run's last line (its error too) was written to it.
    if let Err(upload) = logging::finish() {
        eprintln!("error: {upload:#}");
        return ExitCode::FAILURE;
    }
    code
}
