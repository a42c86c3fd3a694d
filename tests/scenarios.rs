//! The declared scenarios: every `plans/*.scenarios.toml|yaml` file, found
//! by `insta::glob!`, run through the library (`planrun::ops::run_scenario`,
//! the runner of `planrun test`) against the real binary, each snapshot
//! asserted with insta in the top-level `snapshots/<folder>/`. Adding a plan
//! with a scenario file adds its golden snapshots here with no Rust edited.
//!
//! The scenarios themselves (goal, run id, exit code, fixtures, follow-up
//! commands) are in the scenario files; `tests/planrun_test.rs` tests the
//! `planrun test` command on sandbox copies.

use std::path::{Path, PathBuf};

use planrun::ops::{ScenarioContext, run_scenario};

use crate::common::{ROOT, Sandbox};

fn context() -> ScenarioContext {
    ScenarioContext {
        program: PathBuf::from(env!("CARGO_BIN_EXE_planrun")),
        plans: Path::new(ROOT).join("plans"),
        policies: Path::new(ROOT).join("policies"),
        after_commands: None,
    }
}

#[test]
fn every_declared_scenario_matches_its_snapshots() {
    insta::glob!("../plans", "*.scenarios.{toml,yaml,yml}", |path| {
        let mut loader = planrun::load::Loader::new();
        let file = loader.load_scenarios(path);
        let rendered: Vec<String> = loader
            .sorted_diagnostics()
            .into_iter()
            .map(|diagnostic| planrun::diag::render(loader.sources(), diagnostic))
            .collect();
        let file = file.unwrap_or_else(|| panic!("{} has errors:\n{}", path.display(), rendered.join("\n")));
        for scenario in &file.scenarios {
            let run = run_scenario(&file, scenario, &context()).expect("the sandbox is prepared");
            assert!(run.problems.is_empty(), "scenario `{}`:\n{}", scenario.name, run.problems.join("\n"));
            // Inside `glob!`, insta records a mismatch and goes on, so a
            // change shows every diff of the scenario (each `.snap.new`).
            for captured in run.captured {
                // `glob!` suffixes snapshot names with the input file; the
                // scenario's snapshot names are complete already.
                let mut settings = insta::Settings::clone_current();
                settings.remove_snapshot_suffix();
                settings.set_snapshot_path(Path::new(ROOT).join("snapshots").join(&captured.folder));
                settings.set_prepend_module_to_snapshot(false);
                settings.set_omit_expression(true);
                settings.bind(|| insta::assert_snapshot!(captured.name.as_str(), captured.body));
            }
        }
    });
}

/// A plan without a scenario file has no golden snapshots: `planrun check`
/// notes it (`no-scenario`), and this repository requires one.
#[test]
fn every_plan_of_the_repository_declares_a_scenario() {
    let mut loader = planrun::load::Loader::new();
    let root = Path::new(ROOT);
    let catalog = loader.load_catalog(&root.join("plans"), &root.join("policies"));
    assert!(!loader.has_errors(), "repository plans must load");
    for plan in &catalog.plans {
        let beside = planrun::load::scenario_files_for(&root.join(&plan.source.path));
        assert!(
            beside.iter().any(|path| path.is_file()),
            "plan `{}` has no scenario: declare one in `{}` (docs/authoring-and-review.md)",
            plan.id,
            beside[0].strip_prefix(root).unwrap_or(&beside[0]).display()
        );
    }
}

/// The same plan run twice gives byte-identical records.
#[test]
fn records_are_identical_run_after_run() {
    let first = Sandbox::new();
    let second = Sandbox::new();
    for sandbox in [&first, &second] {
        sandbox.planrun().args(["--plan", "plans/flow_ls.toml", "--run-id", "again"]).expect_code(0).run();
    }
    for file in ["plan.json", "state.json", "history.jsonl", "audit.jsonl"] {
        assert_eq!(first.record("again", file), second.record("again", file), "{file}");
    }
}
