//! The step loop in process, with the injected [`FixedClock`] and
//! [`SequentialIds`] of [`RuntimeEnv::fixed`]: the event sequence of a run
//! that completes, a retry, a budget that stops a run before its step runs,
//! a template error that is never retried, and a failed `[[verify]]` check.
//!
//! [`FixedClock`]: crate::runtime::FixedClock
//! [`SequentialIds`]: crate::runtime::SequentialIds

use std::path::{Path, PathBuf};

use jiff::Timestamp;

use crate::confine::Workspace;
use crate::load::Loader;
use crate::model::{Action, FailureClass, Plan, Policy, RunStatus, StopReason};
use crate::runtime::interpreter::Interpreter;
use crate::runtime::{IdKind, NoProgress, RuntimeEnv};
use crate::store::{AuditEvent, LoadedRun, RunState, StepRecordStatus};
use crate::template::Template;

const DEFAULT_POLICY: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/policies/default.toml");

/// A plan written to a temporary folder and loaded with the default policy.
struct Case {
    dir: tempfile::TempDir,
    plan: Plan,
    policy: Policy,
}

impl Case {
    /// Plan `id` with `body` (its `[budget]` and `[[steps]]`).
    fn new(id: &str, body: &str) -> Case {
        let dir = tempfile::tempdir().expect("temp dir");
        let path = dir.path().join("plan.toml");
        let header = format!("version = 1\nid = \"{id}\"\ndescription = \"{id}\"\nkeywords = [\"{id}\"]\n");
        std::fs::write(&path, header + body).expect("write plan");
        let mut loader = Loader::new();
        let plan = loader.load_plan(&path);
        let policy = loader.load_policy(Path::new(DEFAULT_POLICY));
        let (Some(plan), Some(policy)) = (plan, policy) else {
            panic!("the test plan does not load: {:?}", loader.diagnostics());
        };
        Case { dir, plan, policy }
    }

    fn workspace(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    /// Runs the plan as a new run in workspace `name` and reads its records
    /// back through the store.
    fn run(&self, name: &str) -> Ran {
        let root = self.workspace(name);
        std::fs::create_dir_all(&root).expect("workspace");
        let workspace = Workspace::open(&root, &self.policy.files).expect("open workspace");
        let start: Timestamp = "2026-01-01T00:00:00Z".parse().expect("timestamp");
        let env = RuntimeEnv::fixed(start);
        let run_id = env.ids.next_id(IdKind::Run, env.clock.as_ref());
        let store = env.store(workspace.root());
        let run = store.create_run(&run_id).expect("run folder");
        let interpreter = Interpreter::new(&self.plan, &self.policy, &workspace, run, store.clone(), None, &env);
        let state = interpreter.run(&mut NoProgress).expect("records written");
        let loaded = store.read_run(&run_id).expect("records verify");
        Ran { state, loaded, root }
    }
}

/// What one run left behind.
struct Ran {
    state: RunState,
    loaded: LoadedRun,
    root: PathBuf,
}

impl Ran {
    /// `event_type step_id status` of every audit line, `-` for no step.
    fn events(&self) -> Vec<String> {
        self.loaded.audit.iter().map(line).collect()
    }

    fn event(&self, event_type: &str) -> &AuditEvent {
        self.loaded.audit.iter().find(|event| event.event_type == event_type).expect(event_type)
    }
}

/// Every new run opens with these lines; `rest` follows them.
fn opening_then(rest: &[&str]) -> Vec<String> {
    ["run_started - running", "plan_created - ok", "state_saved - ok"]
        .iter()
        .chain(rest)
        .map(|line| line.to_string())
        .collect()
}

fn line(event: &AuditEvent) -> String {
    let step = event.step_id.as_deref().unwrap_or("-");
    format!("{} {step} {}", event.event_type, event.status.as_deref().unwrap_or("-"))
}

#[test]
fn a_three_step_plan_runs_to_done_with_the_documented_event_sequence() {
    let case = Case::new(
        "three",
        r#"
[[steps]]
id = "write"
kind = "write_file"
path = "note.txt"
content = "made by {{ run.id }}"

[[steps]]
id = "read"
kind = "read_file"
path = "note.txt"

[[steps]]
id = "done"
kind = "finish"
message = "{{ last.output_text }}"
"#,
    );
    let ran = case.run("ws");
    assert_eq!(ran.state.status, RunStatus::Done);
    assert_eq!(ran.state.stop_reason, Some(StopReason::FinishStep));
    assert_eq!(
        ran.events(),
        opening_then(&[
            "step_started write running",
            "resolution_performed write ok",
            "step_finished write done",
            "state_saved write ok",
            "step_started read running",
            "step_finished read done",
            "state_saved read ok",
            "step_started done running",
            "resolution_performed done ok",
            "step_finished done done",
            "state_saved - ok",
            "run_finished - done",
        ])
    );
    assert_eq!(std::fs::read_to_string(ran.root.join("note.txt")).expect("note"), "made by run-0001");
    let finished = ran.event("run_finished");
    assert_eq!(finished.details["steps"], 3);
    assert_eq!(finished.details["tool_calls"], 2, "`finish` is not a tool call");
    // The injected clock: the state's creation reads 00:00:00, each event one
    // second later.
    assert_eq!(ran.event("run_started").ts, "2026-01-01T00:00:01Z");
    assert_eq!(ran.state.counters.history_records, 3);
}

#[test]
fn the_injected_clock_and_ids_make_two_runs_byte_identical() {
    let case = Case::new(
        "same",
        r#"
[[steps]]
id = "write"
kind = "write_file"
path = "a.txt"
content = "{{ run.id }}"
"#,
    );
    let (first, second) = (case.run("one"), case.run("two"));
    let text = |ran: &Ran| std::fs::read_to_string(ran.root.join("runs/run-0001/audit.jsonl")).expect("audit");
    assert_eq!(text(&first), text(&second));
    assert_eq!(first.state, second.state);
}

#[test]
fn a_failed_attempt_is_retried_and_the_retry_succeeds() {
    let case = Case::new(
        "retry",
        r#"
[[steps]]
id = "flaky"
kind = "flaky"
failures = 1
output = "second time lucky"
"#,
    );
    let ran = case.run("ws");
    assert_eq!(ran.state.status, RunStatus::Done);
    assert_eq!(ran.state.stop_reason, Some(StopReason::EndOfPlan));
    assert_eq!(
        ran.events(),
        opening_then(&[
            "step_started flaky running",
            "step_finished flaky failed",
            "step_failed flaky failed",
            "retry_scheduled flaky scheduled",
            "state_saved flaky ok",
            "retry_attempt_started flaky running",
            "retry_attempt_finished flaky done",
            "state_saved flaky ok",
            "state_saved - ok",
            "run_finished - done",
        ])
    );
    let failed = ran.event("step_failed");
    assert_eq!(failed.details["failure_class"], "execution_error");
    assert_eq!(failed.details["retry_scheduled"], true);
    assert_eq!(ran.event("retry_scheduled").details["next_attempt"], 2);
    let attempts: Vec<(u32, StepRecordStatus)> =
        ran.loaded.history.iter().map(|record| (record.attempt, record.status)).collect();
    assert_eq!(attempts, [(1, StepRecordStatus::Failed), (2, StepRecordStatus::Done)]);
    assert_eq!(ran.state.counters.steps, 1, "a retry is not a new step");
    assert_eq!(ran.state.counters.tool_calls, 2, "each attempt is a tool call");
}

#[test]
fn an_exhausted_budget_stops_the_run_before_the_step_runs() {
    let case = Case::new(
        "budget",
        r#"
[budget]
max_steps = 1

[[steps]]
id = "first"
kind = "write_file"
path = "first.txt"
content = "ran"

[[steps]]
id = "second"
kind = "write_file"
path = "canary.txt"
content = "must never be written"
"#,
    );
    let ran = case.run("ws");
    assert_eq!(ran.state.status, RunStatus::Failed);
    assert_eq!(ran.state.stop_reason, Some(StopReason::BudgetExhausted));
    assert_eq!(ran.state.error.as_deref(), Some("budget `max_steps` (1) exhausted"));
    assert!(ran.root.join("first.txt").exists(), "the step within the budget ran");
    assert!(!ran.root.join("canary.txt").exists(), "the step beyond the budget must not run");
    assert_eq!(
        ran.events(),
        opening_then(&[
            "step_started first running",
            "step_finished first done",
            "state_saved first ok",
            "budget_exhausted second failed",
            "state_saved - ok",
            "run_finished - failed",
        ])
    );
    let exhausted = ran.event("budget_exhausted");
    assert_eq!(
        serde_json::to_string(&exhausted.details).expect("json"),
        r#"{"budget":"max_steps","limit":1,"used":1}"#
    );
    assert!(ran.loaded.history.iter().all(|record| record.step_id != "second"), "no history for a step never run");
    assert_eq!(ran.state.counters.steps, 1);
}

#[test]
fn a_template_error_fails_the_step_and_is_not_retried() {
    let mut case = Case::new(
        "bad_template",
        r#"
expected_status = "failed"

[[steps]]
id = "write"
kind = "write_file"
path = "canary.txt"
content = "replaced below"
retry = 3
"#,
    );
    // The loader refuses a reference to an unknown step
    // (`template-unknown-step`), so the reference is put into the loaded
    // plan: a plan built another way must still fail the step, never run it.
    let Action::WriteFile { content, .. } = &mut case.plan.steps[0].action else {
        panic!("not a write_file step");
    };
    *content = Some(Template::parse("{{ steps.missing.output_text }}").expect("valid template"));
    let ran = case.run("ws");
    assert_eq!(ran.state.status, RunStatus::Failed);
    assert_eq!(ran.state.stop_reason, Some(StopReason::StepFailed));
    assert!(!ran.root.join("canary.txt").exists(), "an unresolved write must not run");
    assert_eq!(
        ran.events(),
        opening_then(&[
            "step_started write running",
            "resolution_performed write failed",
            "step_finished write failed",
            "step_failed write failed",
            "state_saved - ok",
            "run_finished - failed",
        ])
    );
    let failed = ran.event("step_failed");
    assert_eq!(failed.details["failure_class"], "template_error");
    assert_eq!(failed.details["max_attempts"], 1, "the step's `retry = 3` does not apply to template errors");
    assert_eq!(failed.details["retry_scheduled"], false);
    let [record] = ran.loaded.history.as_slice() else {
        panic!("one attempt only: {:?}", ran.loaded.history);
    };
    assert_eq!((record.attempt, record.failure_class), (1, Some(FailureClass::TemplateError)));
    assert_eq!(record.action, None, "nothing was resolved, so nothing ran");
    assert_eq!(ran.state.counters.tool_calls, 0);
}

#[test]
fn a_failed_verify_check_ends_the_run_failed_and_records_every_check() {
    let case = Case::new(
        "verify",
        r#"
[[steps]]
id = "write"
kind = "write_file"
path = "a.txt"
content = "hello"

[[verify]]
kind = "file"
path = "a.txt"
contains = "hello"

[[verify]]
kind = "file"
path = "a.txt"
contains = "goodbye"
"#,
    );
    let ran = case.run("ws");
    assert_eq!(ran.state.status, RunStatus::Failed);
    assert_eq!(ran.state.stop_reason, Some(StopReason::VerificationFailed));
    assert_eq!(
        ran.state.error.as_deref(),
        Some(r#"completion could not be verified: file `a.txt` contains "goodbye""#),
        "only the failed check is named"
    );
    let verified = ran.event("completion_verified");
    assert_eq!((verified.step_id.as_deref(), verified.status.as_deref()), (None, Some("failed")));
    assert_eq!(
        serde_json::to_string(&verified.details).expect("json"),
        concat!(
            r#"{"passed":false,"checks":["#,
            r#"{"check":"file `a.txt` contains \"hello\"","passed":true,"observed":"5 bytes","source":"fresh_read"},"#,
            r#"{"check":"file `a.txt` contains \"goodbye\"","passed":false,"observed":"5 bytes","source":"fresh_read"}"#,
            r#"]}"#
        )
    );
    let evidence: Vec<(&str, bool)> =
        ran.state.evidence.iter().map(|evidence| (evidence.kind.as_str(), evidence.passed)).collect();
    assert_eq!(evidence, [("verify", true), ("verify", false)]);
    assert_eq!(
        serde_json::to_value(&ran.state.evidence[1].detail).expect("json"),
        verified.details["checks"][1],
        "evidence and event agree"
    );
}
