//! Every goal the seed documents routes to its own plan in `plans/` and
//! behaves as documented. Each scenario pins the CLI output and every file
//! of the run (`plan.json`, `state.json`, `history.jsonl`, `audit.jsonl`)
//! as golden snapshots in `snapshots/runs/`.

use std::collections::BTreeSet;

use crate::common::{ROOT, Sandbox, snapshot_settings};

/// (goal, plan id, exit code).
const SCENARIOS: &[(&str, &str, i32)] = &[
    ("inspect project", "inspect_project", 0),
    ("create file hello.txt with text hello world", "create_hello", 0),
    ("проверь что тут есть", "inspect_ru", 0),
    ("anything else", "fallback", 0),
    ("test deny bash", "deny_bash", 1),
    ("test deny rm", "deny_rm", 1),
    ("test deny curl", "deny_curl", 1),
    ("test forbidden command", "forbidden_command", 1),
    ("test traversal", "traversal", 1),
    ("test absolute path", "absolute_path", 1),
    ("test flow pwd to file", "flow_pwd", 0),
    ("test flow read to copy", "flow_read_copy", 0),
    ("test flow ls to file", "flow_ls", 0),
    ("test flow bad template", "flow_bad_template", 1),
    ("test retry execution", "retry_execution", 0),
    // Pauses for approval (exit 3); the rest of its story is in `tests/ticket_demo.rs`.
    ("close ticket", "ticket_close", 3),
];

fn run_scenario(plan_id: &str) {
    let (goal, _, expected) = SCENARIOS
        .iter()
        .find(|(_, id, _)| *id == plan_id)
        .copied()
        .unwrap_or_else(|| panic!("no scenario for {plan_id}"));
    let sandbox = Sandbox::new();
    // A plan's sample data, when it has some, is its workspace's starting state.
    let data = std::path::Path::new(ROOT).join("plans").join(format!("{plan_id}.tickets.json"));
    if data.is_file() {
        sandbox.write("workspace/tickets.json", &std::fs::read_to_string(&data).expect("sample data"));
    }
    let output = sandbox.planrun().args(["--goal", goal, "--run-id", plan_id]).run();
    assert_eq!(output.code, expected, "{}", output.snapshot());
    let settings = snapshot_settings("runs");
    settings.bind(|| {
        insta::assert_snapshot!(format!("{plan_id}@cli"), output.snapshot());
        for file in ["plan.json", "state.json", "history.jsonl", "audit.jsonl"] {
            insta::assert_snapshot!(format!("{plan_id}@{file}"), sandbox.record(plan_id, file));
        }
    });
}

macro_rules! scenarios {
    ($($name:ident),* $(,)?) => {
        $(
            #[test]
            fn $name() {
                run_scenario(stringify!($name));
            }
        )*
    };
}

scenarios!(
    inspect_project,
    create_hello,
    inspect_ru,
    fallback,
    deny_bash,
    deny_rm,
    deny_curl,
    forbidden_command,
    traversal,
    absolute_path,
    flow_pwd,
    flow_read_copy,
    flow_ls,
    flow_bad_template,
    retry_execution,
    ticket_close,
);

/// A plan added to `plans/` must get a scenario here (and so snapshots).
#[test]
fn every_plan_has_a_scenario() {
    let mut loader = planrun::load::Loader::new();
    let root = std::path::Path::new(ROOT);
    let catalog = loader.load_catalog(&root.join("plans"), &root.join("policies"));
    assert!(!loader.has_errors(), "repository plans must load");
    let plans: BTreeSet<&str> = catalog.plans.iter().map(|plan| plan.id.as_str()).collect();
    let covered: BTreeSet<&str> = SCENARIOS.iter().map(|(_, id, _)| *id).collect();
    assert_eq!(plans, covered);
    for plan in &catalog.plans {
        let (_, _, code) = SCENARIOS.iter().find(|(_, id, _)| *id == plan.id).copied().unwrap_or_default();
        let documented = if plan.expected_status == planrun::model::RunStatus::Failed {
            1
        } else if plan.steps.iter().any(|step| step.approval) {
            3
        } else {
            0
        };
        assert_eq!(code, documented, "`expected_status` of {} disagrees with its scenario", plan.id);
    }
}

/// The same plan run twice gives byte-identical records.
#[test]
fn records_are_identical_run_after_run() {
    let first = Sandbox::new();
    let second = Sandbox::new();
    for sandbox in [&first, &second] {
        let output = sandbox.planrun().args(["--plan", "plans/flow_ls.toml", "--run-id", "again"]).run();
        assert_eq!(output.code, 0, "{}", output.snapshot());
    }
    for file in ["plan.json", "state.json", "history.jsonl", "audit.jsonl"] {
        assert_eq!(first.record("again", file), second.record("again", file), "{file}");
    }
}
