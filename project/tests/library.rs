//! graphrag_project as a library caller uses it: index with a step
//! callback, stop a run from the callback (as a notebook's KeyboardInterrupt
//! would), then update after clearing the stop.

#[path = "common/mock_settings.rs"]
mod mock_settings;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use graphrag_mock_llm::{MockConfig, MockServer};
use graphrag_project::{IndexOptions, InitOptions, OpenOptions, Project, RunSettings, StepEvent, UpdateOptions};
use mock_settings::settings;

#[test]
fn index_reports_steps_stops_when_asked_and_updates() {
    let mock = MockServer::start(MockConfig::default()).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    let report = graphrag_project::init(root, &InitOptions::default()).unwrap();
    assert!(report.prompts > 0);
    std::fs::write(root.join("settings.yaml"), settings(&mock)).unwrap();
    std::fs::write(root.join("input/a.txt"), "Ebenezer Scrooge kept the counting-house with Jacob Marley. ".repeat(20))
        .unwrap();

    // A stop requested while a step runs ends the run at the next step: no index is published.
    // (The run's own stop flag: nothing process-wide to clear afterwards.)
    let started = Arc::new(AtomicUsize::new(0));
    let counter = started.clone();
    let stop = graphrag_engine::interrupt::StopFlag::new();
    let flag = stop.clone();
    let stop_at_second = Arc::new(move |e: &StepEvent| {
        if e.finished.is_none() && counter.fetch_add(1, Ordering::SeqCst) == 1 {
            flag.request();
        }
    });
    let project = Project::open(root, &OpenOptions::default()).unwrap();
    let opts = IndexOptions {
        resume: false,
        run: RunSettings { skip_validation: true, progress: None, on_step: Some(stop_at_second), stop },
    };
    let err = graphrag_project::index(project, &opts).err().expect("the run stops");
    assert!(err.interrupted(), "{err}");
    assert!(!root.join("output/documents.parquet").exists());

    // Resumed to the end, with every step reported once started and once ended.
    let events = Arc::new(Mutex::new(Vec::new()));
    let seen = events.clone();
    let record = Arc::new(move |e: &StepEvent| seen.lock().unwrap().push((e.step.to_string(), e.finished)));
    let project = Project::open(root, &OpenOptions::default()).unwrap();
    let steps = project.plan.steps.len();
    let opts = IndexOptions {
        resume: true,
        run: RunSettings { skip_validation: true, on_step: Some(record), ..RunSettings::default() },
    };
    let report = graphrag_project::index(project, &opts).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(report.plan.name, "standard");
    assert_eq!(events.lock().unwrap().len(), 2 * steps);
    assert!(std::path::Path::new(&report.published_to).join("entities.parquet").exists());

    // An update after adding a document names it.
    std::fs::write(root.join("input/b.txt"), "Bob Cratchit and Tiny Tim sat by the fire. ".repeat(20)).unwrap();
    let opts = UpdateOptions {
        run: RunSettings { skip_validation: true, ..RunSettings::default() },
        ..UpdateOptions::default()
    };
    let report = graphrag_project::update(root, &opts).unwrap_or_else(|e| panic!("{e}"));
    let changes = report.changes.unwrap();
    assert_eq!(changes.added, ["b.txt"]);
    assert_eq!(changes.unchanged, 1);
}

#[test]
fn prompt_tuning_ends_with_its_own_stop_flag() {
    let mock = MockServer::start(MockConfig::default()).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    graphrag_project::init(root, &InitOptions::default()).unwrap();
    std::fs::write(root.join("settings.yaml"), settings(&mock)).unwrap();
    std::fs::write(root.join("input/a.txt"), "Ebenezer Scrooge kept the counting-house with Jacob Marley. ".repeat(20))
        .unwrap();
    let opts =
        graphrag_project::prompt_tune::PromptTuneOptions { limit: 2, skip_validation: true, ..Default::default() };
    // Stopped before it starts: no chat request is sent, the error is an interruption,
    // and nothing process-wide was requested (another tuning still runs).
    let stop = graphrag_engine::interrupt::StopFlag::new();
    stop.request();
    let err = graphrag_project::prompt_tune::generate_prompts_until(root, &opts, &stop).expect_err("stopped");
    let stopped = graphrag_engine::interrupt::Interrupted.to_string();
    assert!(format!("{err:#}").contains(&stopped), "{err:#}");
    assert_eq!(mock.stats().chat_requests, 0);
    assert!(!graphrag_engine::interrupt::requested());
    let tuned = graphrag_project::prompt_tune::generate_prompts(root, &opts).unwrap_or_else(|e| panic!("{e:#}"));
    assert!(tuned.extract_graph.contains("{{ input_text }}"));
    assert!(mock.stats().chat_requests > 0);
}

/// A settings error is told apart by its type, not by looking through an
/// error's causes: `ProjectError::Settings` from opening a project (or
/// reading its graph edits), `RunError::settings` from an update that
/// cannot start; each names the file, line and key.
#[test]
fn settings_errors_are_typed() {
    use graphrag_project::ProjectError;
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    graphrag_project::init(root, &InitOptions::default()).unwrap();
    std::fs::write(root.join("settings.yaml"), "chunking:\n  size: 300\n  overlap: lots\n").unwrap();
    match Project::open(root, &OpenOptions::default()) {
        Err(ProjectError::Settings(e)) => {
            assert_eq!((e.line, e.path.as_str()), (Some(3), "chunking.overlap"), "{e}");
        }
        Err(other) => panic!("not a settings error: {other:#}"),
        Ok(_) => panic!("opened with a bad setting"),
    }
    let Err(err) = graphrag_project::update(root, &UpdateOptions::default()) else {
        panic!("updated with a bad setting")
    };
    assert!(err.settings(), "{err}");
    assert!(err.to_string().contains("settings.yaml:3: `chunking.overlap`"), "{err}");

    std::fs::write(root.join("graph_edits.yaml"), "edits:\n  - action: nonsense\n").unwrap();
    let read = graphrag_project::graph_edits::read(root);
    assert!(matches!(read, Err(ProjectError::Settings(_))), "{:?}", read.err());
    // Other failures are not settings errors.
    let missing = tempfile::tempdir().unwrap();
    std::fs::write(missing.path().join("settings.yaml"), "").unwrap();
    std::fs::create_dir(missing.path().join("graph_edits.yaml")).unwrap();
    let unreadable = graphrag_project::graph_edits::read(missing.path());
    assert!(matches!(unreadable, Err(ProjectError::Other(_))), "{:?}", unreadable.err());
}
