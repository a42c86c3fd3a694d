//! Runs one declared scenario in its own sandbox and captures what it
//! snapshots: the CLI output of every command (one `@cli` text, stages
//! labelled `===== <label>`), each declared record file of the run and each
//! declared workspace file.
//!
//! Each snapshot is made in this order: the sandbox's paths read
//! `[WORKSPACE]` and `[TMP]`; a record or file is rendered line by line
//! ([`render_record`]: pretty JSON, a head line's checkpoint as what it
//! adds); the step's and then the scenario's normalisation rules apply; and
//! last, every digest becomes a numbered placeholder ([`hash_placeholders`]),
//! so nothing in a snapshot is computed over bytes a rule normalises.
//!
//! The digests are proved instead: once every command has run, the run's
//! records are verified with `planrun verify <run_id>` (the chain, the
//! seals, what `verify` checks), in the scenario's environment.
//!
//! Expectations that are not snapshots (exit codes, the final status, a
//! record that was never written, records that do not verify) come back as
//! [`ScenarioRun::problems`].

use std::path::{Path, PathBuf};

use std::collections::BTreeMap;

use crate::model::{Normalize, Scenario, ScenarioFile, Stage, file_snapshot_name};
use crate::ops::scenario_git::build_git_fixture;
use crate::ops::scenario_sandbox::{Sandbox, SandboxError};
use crate::ops::scripted_model::ScriptedModel;
use crate::snapshot::{hash_placeholders, render_record};

/// Where a scenario's sandbox comes from.
#[derive(Debug, Clone)]
pub struct ScenarioContext {
    /// The `planrun` binary every command runs (`std::env::current_exe()`
    /// for `planrun test`, Cargo's binary for the test suite).
    pub program: PathBuf,
    pub plans: PathBuf,
    pub policies: PathBuf,
    /// Called with the sandbox's workspace once every command has run,
    /// before the records are read and verified: the test suite edits a
    /// record with it, to prove that `planrun test` fails on records that
    /// do not verify even when every snapshot matches. `None` otherwise.
    pub after_commands: Option<fn(&Path)>,
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
    sandbox.fill(&scenario.fixtures, &file.dir)?;
    for git in &scenario.git {
        build_git_fixture(&sandbox.workspace(), git)?;
    }
    let mut problems = Vec::new();
    let mut cli = String::new();
    // Agent steps ask a scripted model on loopback, for every command.
    let scripted = match scenario.model_answers.is_empty() {
        true => None,
        false => Some(ScriptedModel::start(scenario.model_answers.clone()).map_err(SandboxError::Create)?),
    };
    for stage in std::iter::once(&scenario.run).chain(&scenario.steps) {
        let mut stage = stage.clone();
        if let Some(model) = &scripted {
            stage.env.insert("PLANRUN_MODEL_ENDPOINT".to_string(), model.endpoint());
        }
        let stage = &stage;
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
    if let Some(after_commands) = context.after_commands {
        after_commands(&sandbox.workspace());
    }
    let mut captured = vec![capture(scenario, "cli", cli)];
    let record_dir = Path::new("runs").join(&scenario.run_id);
    for record in &scenario.records {
        let relative = record_dir.join(record).display().to_string();
        match sandbox.workspace_file(&relative) {
            Some(text) => captured.push(capture(scenario, record, render_record(record, &text))),
            None => problems.push(format!("run `{}` wrote no `{record}`", scenario.run_id)),
        }
    }
    for path in &scenario.files {
        let name = file_snapshot_name(path);
        match sandbox.workspace_file(path) {
            Some(text) => captured.push(capture(scenario, name, render_record(name, &text))),
            None => problems.push(format!("the workspace has no `{path}` after the last command")),
        }
    }
    if sandbox.workspace().join(&record_dir).is_dir() {
        problems.extend(verification_problem(&sandbox, scenario)?);
    }
    if let Some(expected) = scenario.expect_status {
        let relative = record_dir.join("state.json").display().to_string();
        let status = sandbox
            .workspace_file(&relative)
            .and_then(|text| crate::strict_json::parse(&text).ok())
            .and_then(|state| serde_json::from_value::<SealedStatus>(state).ok())
            .map(|state| state.payload.status);
        if status.as_deref() != Some(expected.as_str()) {
            let found = status.unwrap_or_else(|| "no readable state.json".to_string());
            problems.push(format!("run `{}` ended `{found}`, expected `{expected}`", scenario.run_id));
        }
    }
    for snapshot in &mut captured {
        snapshot.body = hash_placeholders(&normalized(&snapshot.body, &scenario.normalize));
    }
    Ok(ScenarioRun { captured, problems })
}

/// Runs `planrun verify <run_id>` in the sandbox, with the environment of
/// every stage merged (a key given to the run is the key its records are
/// sealed with); the problem when the records do not verify.
fn verification_problem(sandbox: &Sandbox, scenario: &Scenario) -> Result<Option<String>, SandboxError> {
    let stages: Vec<&Stage> = std::iter::once(&scenario.run).chain(&scenario.steps).collect();
    let env: BTreeMap<String, String> = stages.iter().flat_map(|stage| stage.env.clone()).collect();
    let clock = stages.last().map_or_else(|| scenario.run.clock.clone(), |stage| stage.clock.clone());
    let verify = Stage {
        args: vec!["verify".to_string(), scenario.run_id.clone()],
        label: None,
        clock,
        env,
        expect_code: Some(0),
        normalize: Vec::new(),
    };
    let output = sandbox.run(&verify)?;
    Ok((output.code != 0).then(|| {
        format!(
            "run `{}` does not verify (`planrun verify {}` exited with {}): {}",
            scenario.run_id,
            scenario.run_id,
            output.code,
            output.stderr.trim()
        )
    }))
}

fn capture(scenario: &Scenario, what: &str, body: String) -> Captured {
    Captured { folder: scenario.folder.clone(), name: format!("{}@{what}", scenario.name), body }
}

fn normalized(text: &str, rules: &[Normalize]) -> String {
    rules.iter().fold(text.to_string(), |text, rule| rule.apply(&text))
}

/// The status a record's sealed `state.json` holds (the rest of it is not
/// read here).
#[derive(serde::Deserialize)]
struct SealedStatus {
    payload: StatusOnly,
}

#[derive(serde::Deserialize)]
struct StatusOnly {
    status: String,
}
