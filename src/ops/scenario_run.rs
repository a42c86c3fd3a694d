//! Runs one declared scenario in its own sandbox and captures what it
//! snapshots: the CLI output of every command (one `@cli` text, stages
//! labelled `===== <label>`), each declared record file of the run and each
//! declared workspace file, normalised by the declared rules.
//!
//! Expectations that are not snapshots (exit codes, the final status, a
//! record that was never written) come back as [`ScenarioRun::problems`].

use std::path::{Path, PathBuf};

use crate::model::{Normalize, Scenario, ScenarioFile, file_snapshot_name};
use crate::ops::scenario_sandbox::{Sandbox, SandboxError};

/// Where a scenario's sandbox comes from.
#[derive(Debug, Clone)]
pub struct ScenarioContext {
    /// The `planrun` binary every command runs (`std::env::current_exe()`
    /// for `planrun test`, Cargo's binary for the test suite).
    pub program: PathBuf,
    pub plans: PathBuf,
    pub policies: PathBuf,
}

/// One snapshot a scenario produced.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Captured {
    /// The folder below the snapshots root (`runs`, `bounded` …).
    pub folder: String,
    /// The snapshot name, the file name without `.snap`: `flow_ls@cli`.
    pub name: String,
    pub body: String,
}

/// What a scenario produced.
#[derive(Debug, Clone)]
pub struct ScenarioRun {
    pub captured: Vec<Captured>,
    /// Unmet expectations, one sentence each.
    pub problems: Vec<String>,
}

/// Runs `scenario` (declared in `file`) in a fresh sandbox.
pub fn run_scenario(
    file: &ScenarioFile,
    scenario: &Scenario,
    context: &ScenarioContext,
) -> Result<ScenarioRun, SandboxError> {
    let sandbox = Sandbox::new(&context.program, &context.plans, &context.policies)?;
    sandbox.seed(&scenario.fixtures, &file.dir)?;
    let mut problems = Vec::new();
    let mut cli = String::new();
    for stage in std::iter::once(&scenario.run).chain(&scenario.steps) {
        let output = sandbox.run(stage)?;
        if let Some(expected) = stage.expect_code
            && expected != output.code
        {
            problems.push(format!(
                "`planrun {}` exited with {}, expected {expected}:\n{}",
                stage.args.join(" "),
                output.code,
                output.snapshot()
            ));
        }
        if let Some(label) = &stage.label {
            cli.push_str(&format!("===== {label}\n"));
        }
        cli.push_str(&normalized(&output.snapshot(), &stage.normalize));
    }
    let mut captured = vec![capture(scenario, "cli", cli)];
    let record_dir = Path::new("runs").join(&scenario.run_id);
    for record in &scenario.records {
        let relative = record_dir.join(record).display().to_string();
        match sandbox.workspace_file(&relative) {
            Some(text) => captured.push(capture(scenario, record, text)),
            None => problems.push(format!("run `{}` wrote no `{record}`", scenario.run_id)),
        }
    }
    for path in &scenario.files {
        match sandbox.workspace_file(path) {
            Some(text) => captured.push(capture(scenario, file_snapshot_name(path), text)),
            None => problems.push(format!("the workspace has no `{path}` after the last command")),
        }
    }
    if let Some(expected) = scenario.expect_status {
        let relative = record_dir.join("state.json").display().to_string();
        let status = sandbox
            .workspace_file(&relative)
            .and_then(|text| crate::strict_json::parse(&text).ok())
            .and_then(|state| state["payload"]["status"].as_str().map(str::to_string));
        if status.as_deref() != Some(expected.as_str()) {
            let found = status.unwrap_or_else(|| "no readable state.json".to_string());
            problems.push(format!("run `{}` ended `{found}`, expected `{expected}`", scenario.run_id));
        }
    }
    for snapshot in &mut captured {
        snapshot.body = normalized(&snapshot.body, &scenario.normalize);
    }
    Ok(ScenarioRun { captured, problems })
}

fn capture(scenario: &Scenario, what: &str, body: String) -> Captured {
    Captured { folder: scenario.folder.clone(), name: format!("{}@{what}", scenario.name), body }
}

fn normalized(text: &str, rules: &[Normalize]) -> String {
    rules.iter().fold(text.to_string(), |text, rule| rule.apply(&text))
}
