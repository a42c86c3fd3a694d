//! Every goal the seed documents routes to its own plan in `plans/` and
//! behaves as documented. Each scenario pins the CLI output and every file
//! of the run (`plan.json`, `state.json`, `history.jsonl`, `audit.jsonl`)
//! as golden snapshots in `snapshots/runs/`.
//!
//! A scenario is a plan id: its goal is the plan's first keyword (the
//! default plan, which has none, gets a goal no keyword matches) and its
//! exit code is the one the plan documents (`expected_status`, approval
//! gates), so the plan file is the only place either is written. A plan
//! added to `plans/` fails `every_plan_has_a_scenario` until its id is added
//! to `scenarios!` below.

use std::collections::BTreeSet;
use std::path::Path;

use planrun::model::{Plan, RunStatus};

use crate::common::{ROOT, Sandbox, snapshot_settings};

/// The goal of the default plan: one that no plan's keyword matches.
const UNMATCHED_GOAL: &str = "anything else";

/// The repository's plans, which must load without errors.
fn repository_plans() -> Vec<Plan> {
    let mut loader = planrun::load::Loader::new();
    let root = Path::new(ROOT);
    let catalog = loader.load_catalog(&root.join("plans"), &root.join("policies"));
    assert!(!loader.has_errors(), "repository plans must load");
    catalog.plans
}

/// The goal that routes to `plan`.
fn goal_of(plan: &Plan) -> &str {
    match plan.keywords.first() {
        Some(keyword) => keyword,
        None if plan.default => UNMATCHED_GOAL,
        None => panic!("plan {} has no keyword and is not the default: no goal reaches it", plan.id),
    }
}

/// The exit code `plan` documents: failed runs exit 1, a plan with an
/// approval gate pauses (exit 3), the rest exit 0.
fn documented_code(plan: &Plan) -> i32 {
    if plan.expected_status == RunStatus::Failed {
        1
    } else if plan.steps.iter().any(|step| step.approval) {
        3
    } else {
        0
    }
}

fn run_scenario(plan_id: &str) {
    let plans = repository_plans();
    let plan = plans.iter().find(|plan| plan.id == plan_id).unwrap_or_else(|| panic!("no plan {plan_id}"));
    let sandbox = Sandbox::new();
    // A plan's sample data, when it has some, is its workspace's starting state.
    let data = Path::new(ROOT).join("plans").join(format!("{plan_id}.tickets.json"));
    if data.is_file() {
        sandbox.write("workspace/tickets.json", &std::fs::read_to_string(&data).expect("sample data"));
    }
    let output = sandbox.planrun().args(["--goal", goal_of(plan), "--run-id", plan_id]).run();
    assert_eq!(output.code, documented_code(plan), "{}", output.snapshot());
    let settings = snapshot_settings("runs");
    settings.bind(|| {
        insta::assert_snapshot!(format!("{plan_id}@cli"), output.snapshot());
        for file in ["plan.json", "state.json", "history.jsonl", "audit.jsonl"] {
            let mut text = sandbox.record(plan_id, file);
            if file == "state.json" && history_is_machine_dependent(&sandbox, plan_id) {
                text = redact_history_digests(&text);
            }
            insta::assert_snapshot!(format!("{plan_id}@{file}"), text);
        }
    });
}

/// Whether the run's history holds machine paths (the output of `pwd`, say):
/// the checkpoint's `history_hash` and its seal then differ per machine.
fn history_is_machine_dependent(sandbox: &Sandbox, plan_id: &str) -> bool {
    let path = sandbox.workspace().join("runs").join(plan_id).join("history.jsonl");
    let raw = std::fs::read_to_string(path).expect("history");
    sandbox.filter(&raw) != raw
}

/// Replaces the checkpoint's `history_hash` and envelope digest with
/// placeholders (the rest of `state.json` stays exact).
fn redact_history_digests(text: &str) -> String {
    let mut out: String = text
        .lines()
        .map(|line| {
            if line.starts_with("    \"history_hash\": \"") {
                "    \"history_hash\": \"[HISTORY_HASH]\"".to_string()
            } else if line.starts_with("  \"sha256\": \"") {
                "  \"sha256\": \"[SEAL]\"".to_string()
            } else {
                line.to_string()
            }
        })
        .collect::<Vec<_>>()
        .join("\n");
    if text.ends_with('\n') {
        out.push('\n');
    }
    out
}

/// One test per plan id, plus `SCENARIOS`, the list of them.
macro_rules! scenarios {
    ($($name:ident),* $(,)?) => {
        const SCENARIOS: &[&str] = &[$(stringify!($name)),*];
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
    // Pauses for approval (exit 3); the rest of its story is in `tests/ticket_demo.rs`.
    ticket_close,
);

/// A plan added to `plans/` must get a scenario here (and so snapshots),
/// and a goal must reach it.
#[test]
fn every_plan_has_a_scenario() {
    let plans = repository_plans();
    let ids: BTreeSet<&str> = plans.iter().map(|plan| plan.id.as_str()).collect();
    let covered: BTreeSet<&str> = SCENARIOS.iter().copied().collect();
    assert_eq!(ids, covered, "add the missing plan ids to `scenarios!`");
    for plan in &plans {
        let route = Sandbox::new().planrun().args(["route", goal_of(plan), "--json"]).run();
        let value: serde_json::Value = serde_json::from_str(&route.stdout).expect("route --json prints JSON");
        assert_eq!(value["plan_id"], plan.id.as_str(), "the goal {:?} routes elsewhere", goal_of(plan));
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
