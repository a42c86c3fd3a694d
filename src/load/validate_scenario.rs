//! Scenario tree → [`ScenarioFile`], collecting every finding of the file
//! in one pass.
//!
//! A scenario file sits beside its plan (`plans/<plan>.scenarios.toml`, or
//! `.yaml`/`.yml`); its keys are declared in `keys.rs` (`SCENARIO_FILE` and
//! the sections below it), like those of plans and policies, so the JSON
//! Schema and this validator agree. Checked here: exactly one of `goal` and
//! `plan`, unique scenario names, clocks that parse, regexes that compile,
//! fixture and snapshot paths that stay inside the workspace.

use std::collections::HashSet;
use std::path::{Path, PathBuf};

use crate::diag::Diagnostic;
use crate::load::keys::{FIXTURE, NORMALIZE, RECORD_FILES, SCENARIO, SCENARIO_FILE, SCENARIO_STEP};
use crate::load::node::{Node, NodeValue};
use crate::load::read_file::EXTENSIONS;
use crate::load::table::{
    TableReader, check_version, compile_regex, error_count, expect_array, expect_string, name_or_error, string_map,
    wrong_type,
};
use crate::load::validate_scenario_git::git_fixtures;
use crate::load::workspace_path::workspace_path;
use crate::model::{
    DEFAULT_CLOCK, DEFAULT_FOLDER, DEFAULT_RECORDS, Fixture, FixtureContent, Normalize, RunStatus, Scenario,
    ScenarioFile, SourceRef, Stage, file_snapshot_name,
};

/// The suffix that marks a scenario file: `<plan>.scenarios.toml`.
pub const SCENARIO_SUFFIX: &str = ".scenarios";

/// Whether `path` names a scenario file (`*.scenarios.toml|yaml|yml`).
pub fn is_scenario_file(path: &Path) -> bool {
    path.file_stem().and_then(|stem| stem.to_str()).is_some_and(|stem| stem.ends_with(SCENARIO_SUFFIX))
}

/// The scenario files a plan file may have beside it, in the order looked for.
pub fn scenario_files_for(plan_path: &Path) -> Vec<PathBuf> {
    let stem = plan_path.file_stem().map(|stem| stem.to_string_lossy().into_owned()).unwrap_or_default();
    let dir = plan_path.parent().unwrap_or(Path::new(""));
    EXTENSIONS.iter().map(|extension| dir.join(format!("{stem}{SCENARIO_SUFFIX}.{extension}"))).collect()
}

/// Builds the scenario file, or returns `None` when it has errors (all of
/// them reported).
pub(crate) fn validate_scenarios(
    root: &Node,
    dir: PathBuf,
    source: SourceRef,
    diagnostics: &mut Vec<Diagnostic>,
) -> Option<ScenarioFile> {
    let errors_before = error_count(diagnostics);
    let mut reader = TableReader::new(root, "a scenario file", "", SCENARIO_FILE.keys, diagnostics)?;
    check_version(&mut reader, diagnostics);
    let mut scenarios = Vec::new();
    let mut names = HashSet::new();
    if let Some(items) = reader.required("scenarios", diagnostics) {
        for (index, item) in expect_array(items, "`scenarios`", diagnostics).unwrap_or_default().iter().enumerate() {
            // Checked on the name as written, so a scenario with other
            // errors is still seen as a duplicate.
            if let Some(name) = item.get("name")
                && let Some(text) = name.as_str()
                && !names.insert(text.to_string())
            {
                diagnostics.push(
                    Diagnostic::error("duplicate-scenario", format!("scenario `{text}` is declared twice"))
                        .with_span(name.span)
                        .with_label("declared again here")
                        .with_help("its snapshots would overwrite each other: give every scenario its own name"),
                );
            }
            let Some(scenario) = scenario(item, index, diagnostics) else { continue };
            scenarios.push(scenario);
        }
        if items.as_array().is_some_and(<[Node]>::is_empty) {
            diagnostics.push(
                Diagnostic::error("invalid-value", "`scenarios` may not be empty")
                    .with_span(items.span)
                    .with_label("no scenario")
                    .with_help("declare at least one `[[scenarios]]` table"),
            );
        }
    }
    reader.finish(diagnostics);
    (error_count(diagnostics) == errors_before).then_some(ScenarioFile { source, dir, scenarios })
}

fn scenario(node: &Node, index: usize, diagnostics: &mut Vec<Diagnostic>) -> Option<Scenario> {
    let errors_before = error_count(diagnostics);
    let context = format!(" in `scenarios[{index}]`");
    let mut reader = TableReader::new(node, &format!("`scenarios[{index}]`"), context, SCENARIO.keys, diagnostics)?;
    let name = reader
        .required_string("name", diagnostics)
        .and_then(|(name, node)| name_or_error(name, node, "scenario name", 64, diagnostics));
    if let Some(name) = &name {
        reader.set_context(format!(" in scenario `{name}`"));
    }
    let goal = reader.string("goal", diagnostics);
    let plan = reader.string("plan", diagnostics);
    let mut args = match (goal, plan) {
        (Some((goal, _)), None) => vec!["--goal".to_string(), goal.to_string()],
        (None, Some((plan, _))) => vec!["--plan".to_string(), plan.to_string()],
        (Some(_), Some((_, node))) => {
            diagnostics.push(
                Diagnostic::error("conflicting-keys", format!("{} and `goal` are both given", reader.describe("plan")))
                    .with_span(node.span)
                    .with_help("a scenario runs either a goal or a plan file: keep one"),
            );
            Vec::new()
        }
        (None, None) => {
            diagnostics.push(
                Diagnostic::error("missing-key", format!("missing key `goal` or `plan`{}", scenario_context(&name)))
                    .with_span(node.span)
                    .with_label("one of `goal` and `plan` is required here"),
            );
            Vec::new()
        }
    };
    let run_id = reader
        .required_string("run_id", diagnostics)
        .and_then(|(id, node)| name_or_error(id, node, "run id", 64, diagnostics));
    if let Some(run_id) = &run_id {
        args.extend(["--run-id".to_string(), run_id.clone()]);
    }
    if let Some(node) = reader.get("inputs") {
        args.extend(scenario_inputs(node, diagnostics));
    }
    let expect_code = reader.required_integer("expect_code", -1, diagnostics).map(|(code, _)| code as i32);
    let statuses = [
        ("running", RunStatus::Running),
        ("waiting_approval", RunStatus::WaitingApproval),
        ("done", RunStatus::Done),
        ("failed", RunStatus::Failed),
        ("rejected", RunStatus::Rejected),
        ("cancelled", RunStatus::Cancelled),
        ("waiting_input", RunStatus::WaitingInput),
    ];
    let expect_status = reader.choice("expect_status", "`expect_status`", &statuses, diagnostics).flatten();
    let folder = match reader.string("folder", diagnostics) {
        Some((folder, node)) => name_or_error(folder, node, "snapshot folder", 64, diagnostics),
        None => Some(DEFAULT_FOLDER.to_string()),
    };
    let label = reader.string("label", diagnostics).map(|(label, _)| label.to_string());
    let clock = clock(reader.string("clock", diagnostics), diagnostics);
    let env = reader.get("env").map(|node| string_map(node, "env", diagnostics)).unwrap_or_default();
    let fixtures = match reader.array("fixtures", diagnostics) {
        Some(items) => items.iter().enumerate().filter_map(|(at, item)| fixture(item, at, diagnostics)).collect(),
        None => Vec::new(),
    };
    let git = reader.array("git", diagnostics).map(|items| git_fixtures(items, diagnostics)).unwrap_or_default();
    let records: Vec<String> = match reader.array("records", diagnostics) {
        Some(items) => items.iter().filter_map(|item| record(item, diagnostics)).collect(),
        None => DEFAULT_RECORDS.iter().map(|record| (*record).to_string()).collect(),
    };
    let mut files = Vec::new();
    // Snapshot names taken so far: a file snapshots under its last path
    // component, which must not name the CLI snapshot, a record or another file.
    let mut taken: HashSet<String> = std::iter::once("cli".to_string()).chain(records.iter().cloned()).collect();
    for item in reader.array("files", diagnostics).unwrap_or_default() {
        let Some(path) = workspace_path(item, "`files` entry", diagnostics) else { continue };
        let snapshot = file_snapshot_name(&path).to_string();
        if !taken.insert(snapshot.clone()) {
            diagnostics.push(
                Diagnostic::error("duplicate-snapshot", format!("`files` entry `{path}` would snapshot as `@{snapshot}` twice"))
                    .with_span(item.span)
                    .with_label("name taken")
                    .with_help("a workspace file snapshots under its file name; it must differ from `cli`, the records and the other files"),
            );
            continue;
        }
        files.push(path);
    }
    let normalize = normalize_rules(reader.array("normalize", diagnostics), diagnostics);
    let model_answers = reader
        .array("model_answers", diagnostics)
        .map(|items| crate::load::table::strings(items, "model_answers", diagnostics, |_, _, _| true))
        .unwrap_or_default();
    let steps = match reader.array("steps", diagnostics) {
        Some(items) => items.iter().enumerate().filter_map(|(at, item)| follow_up(item, at, diagnostics)).collect(),
        None => Vec::new(),
    };
    reader.finish(diagnostics);
    if error_count(diagnostics) > errors_before {
        return None;
    }
    let run = Stage { args, label, clock: clock?, env, expect_code, normalize: Vec::new() };
    Some(Scenario {
        name: name?,
        folder: folder?,
        run,
        run_id: run_id?,
        expect_status,
        fixtures,
        git,
        records,
        files,
        normalize,
        steps,
        model_answers,
    })
}

fn scenario_context(name: &Option<String>) -> String {
    name.as_ref().map_or_else(String::new, |name| format!(" in scenario `{name}`"))
}

/// The clock start as written, once it parses as an RFC 3339 instant.
fn clock(value: Option<(&str, &Node)>, diagnostics: &mut Vec<Diagnostic>) -> Option<String> {
    let Some((text, node)) = value else { return Some(DEFAULT_CLOCK.to_string()) };
    match text.parse::<jiff::Timestamp>() {
        Ok(_) => Some(text.to_string()),
        Err(error) => {
            diagnostics.push(
                Diagnostic::error("invalid-value", format!("`clock` `{text}` is not an RFC 3339 instant"))
                    .with_span(node.span)
                    .with_label(error.to_string())
                    .with_help("write an instant such as `2026-01-01T00:10:00Z`"),
            );
            None
        }
    }
}

fn record(node: &Node, diagnostics: &mut Vec<Diagnostic>) -> Option<String> {
    let text = expect_string(node, "a `records` entry", diagnostics)?;
    if RECORD_FILES.contains(&text) {
        return Some(text.to_string());
    }
    diagnostics.push(
        Diagnostic::error("invalid-value", format!("`{text}` is not a record file of a run"))
            .with_span(node.span)
            .with_label("unknown record")
            .with_help(format!("record files: {}", RECORD_FILES.join(", "))),
    );
    None
}

fn fixture(node: &Node, index: usize, diagnostics: &mut Vec<Diagnostic>) -> Option<Fixture> {
    let errors_before = error_count(diagnostics);
    let what = format!("`fixtures[{index}]`");
    let mut reader = TableReader::new(node, &what, format!(" in {what}"), FIXTURE.keys, diagnostics)?;
    let path = reader.required("path", diagnostics).and_then(|path| workspace_path(path, "fixture path", diagnostics));
    let content = match (reader.string("content", diagnostics), reader.string("source", diagnostics)) {
        (Some((text, _)), None) => Some(FixtureContent::Text(text.to_string())),
        (None, Some((source, _))) => Some(FixtureContent::Source(PathBuf::from(source))),
        (Some(_), Some((_, node))) => {
            diagnostics.push(
                Diagnostic::error(
                    "conflicting-keys",
                    format!("{} and `content` are both given", reader.describe("source")),
                )
                .with_span(node.span)
                .with_help("a fixture is either inline text or a copied file: keep one"),
            );
            None
        }
        (None, None) => {
            diagnostics.push(
                Diagnostic::error("missing-key", format!("missing key `content` or `source` in {what}"))
                    .with_span(node.span)
                    .with_label("one of `content` and `source` is required here"),
            );
            None
        }
    };
    reader.finish(diagnostics);
    (error_count(diagnostics) == errors_before).then_some(Fixture { path: path?, content: content? })
}

fn normalize_rules(items: Option<&[Node]>, diagnostics: &mut Vec<Diagnostic>) -> Vec<Normalize> {
    let mut rules = Vec::new();
    for (index, item) in items.unwrap_or_default().iter().enumerate() {
        let what = format!("`normalize[{index}]`");
        let Some(mut reader) = TableReader::new(item, &what, format!(" in {what}"), NORMALIZE.keys, diagnostics) else {
            continue;
        };
        let regex = reader
            .required_string("regex", diagnostics)
            .and_then(|(pattern, node)| compile_regex(pattern, false, node, diagnostics));
        let replacement = reader.required_string("replacement", diagnostics).map(|(text, _)| text.to_string());
        reader.finish(diagnostics);
        if let (Some(regex), Some(replacement)) = (regex, replacement) {
            rules.push(Normalize { regex, replacement });
        }
    }
    rules
}

fn follow_up(node: &Node, index: usize, diagnostics: &mut Vec<Diagnostic>) -> Option<Stage> {
    let errors_before = error_count(diagnostics);
    let what = format!("`steps[{index}]`");
    let mut reader = TableReader::new(node, &what, format!(" in {what}"), SCENARIO_STEP.keys, diagnostics)?;
    let mut args = Vec::new();
    if let Some(command) = reader.required("command", diagnostics)
        && let Some(items) = expect_array(command, &reader.describe("command"), diagnostics)
    {
        for (at, item) in items.iter().enumerate() {
            args.extend(expect_string(item, &format!("`command[{at}]`"), diagnostics).map(str::to_string));
        }
        if items.is_empty() {
            diagnostics.push(
                Diagnostic::error("invalid-value", format!("`command` may not be empty in {what}"))
                    .with_span(command.span)
                    .with_help("name a planrun command, e.g. `[\"resume\", \"t\"]`"),
            );
        }
    }
    let label = match reader.string("label", diagnostics) {
        Some((label, _)) => label.to_string(),
        None => args.first().cloned().unwrap_or_default(),
    };
    let clock = clock(reader.string("clock", diagnostics), diagnostics);
    let env = reader.get("env").map(|node| string_map(node, "env", diagnostics)).unwrap_or_default();
    let expect_code = reader.integer("expect_code", -1, diagnostics).map(|(code, _)| code as i32);
    let normalize = normalize_rules(reader.array("normalize", diagnostics), diagnostics);
    reader.finish(diagnostics);
    (error_count(diagnostics) == errors_before).then_some(Stage {
        args,
        label: Some(label),
        clock: clock?,
        env,
        expect_code,
        normalize,
    })
}

/// A scenario's `inputs` as the `--input NAME=VALUE` arguments of its run
/// (checked by the plan's declarations when the run starts, as from the
/// command line).
fn scenario_inputs(node: &Node, diagnostics: &mut Vec<Diagnostic>) -> Vec<String> {
    let Some(entries) = node.as_table() else {
        diagnostics.push(wrong_type(node, "`inputs`", "a table of input values"));
        return Vec::new();
    };
    let mut args = Vec::new();
    for (key, value) in entries {
        let text = match &value.value {
            NodeValue::String(text) => text.clone(),
            NodeValue::Integer(number) => number.to_string(),
            NodeValue::Float(number) => number.to_string(),
            NodeValue::Bool(flag) => flag.to_string(),
            _ => {
                diagnostics.push(wrong_type(value, &format!("`inputs.{}`", key.name), "a string, number or boolean"));
                continue;
            }
        };
        args.extend(["--input".to_string(), format!("{}={text}", key.name)]);
    }
    args
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::diag::render;
    use crate::load::Loader;

    /// Loads `text` as `plans/x.scenarios.toml`: the file and every finding.
    fn load(text: &str) -> (Option<ScenarioFile>, Vec<String>) {
        let dir = tempfile::tempdir().expect("temp dir");
        let path = dir.path().join("x.scenarios.toml");
        std::fs::write(&path, text).expect("write");
        let mut loader = Loader::new();
        let file = loader.load_scenarios(&path);
        let findings = loader.sorted_diagnostics().into_iter().map(|d| render(loader.sources(), d)).collect();
        (file, findings)
    }

    #[test]
    fn a_scenario_gets_its_defaults_and_its_command_line() {
        let (file, findings) = load(
            "version = 1\n[[scenarios]]\nname = \"a\"\ngoal = \"say hi\"\nrun_id = \"r\"\nexpect_code = 0\n\n[[scenarios.steps]]\ncommand = [\"resume\", \"r\"]\n",
        );
        assert_eq!(findings, Vec::<String>::new());
        let scenario = &file.expect("loads").scenarios[0];
        assert_eq!(scenario.run.args, ["--goal", "say hi", "--run-id", "r"]);
        assert_eq!(scenario.run.label, None);
        assert_eq!(scenario.run.clock, DEFAULT_CLOCK);
        assert_eq!(scenario.folder, "runs");
        assert_eq!(scenario.records, DEFAULT_RECORDS);
        assert_eq!(scenario.steps[0].label.as_deref(), Some("resume"), "a step's label is its command");
        assert_eq!(scenario.steps[0].expect_code, None);
    }

    #[test]
    fn every_mistake_of_a_file_is_reported_in_one_pass() {
        let (file, findings) = load(
            r#"version = 1
[[scenarios]]
name = "a"
goal = "g"
plan = "plans/a.toml"
run_id = "r"
expect_code = 0
expect_status = "finished"
records = ["log.txt"]
files = ["../secret", "cli"]
fixtures = [{ path = "a.txt", content = "x", source = "a.txt" }]
normalize = [{ regex = "(", replacement = "" }]

[[scenarios]]
name = "a"
plan = "plans/a.toml"
run_id = "r"
expect_code = 0
"#,
        );
        assert!(file.is_none());
        let codes: Vec<&str> =
            findings.iter().map(|f| f.split(']').next().unwrap_or("").trim_start_matches("error[")).collect();
        assert_eq!(
            codes,
            [
                "conflicting-keys",
                "invalid-value",
                "invalid-value",
                "invalid-path",
                "duplicate-snapshot",
                "conflicting-keys",
                "invalid-regex",
                "duplicate-scenario"
            ],
            "{findings:#?}"
        );
        assert!(findings[1].contains("unknown `expect_status` `finished`"), "{}", findings[1]);
        assert!(findings[3].contains("x.scenarios.toml:10:10"), "a position: {}", findings[3]);
    }

    #[test]
    fn a_missing_run_and_an_unknown_key_name_the_fix() {
        let (file, findings) = load("version = 1\n[[scenarios]]\nname = \"a\"\nrun_idd = \"r\"\nexpect_code = 0\n");
        assert!(file.is_none());
        let all = findings.join("\n");
        assert!(all.contains("missing key `goal` or `plan` in scenario `a`"), "{all}");
        assert!(all.contains("missing key `run_id` in scenario `a`"), "{all}");
        assert!(all.contains("did you mean `run_id`?"), "{all}");
    }

    #[test]
    fn scenario_files_are_recognised_by_name_and_found_beside_their_plan() {
        assert!(is_scenario_file(Path::new("plans/a.scenarios.toml")));
        assert!(is_scenario_file(Path::new("plans/a.scenarios.yaml")));
        assert!(!is_scenario_file(Path::new("plans/a.toml")));
        assert_eq!(scenario_files_for(Path::new("plans/a.yaml"))[0], PathBuf::from("plans/a.scenarios.toml"));
    }
}
