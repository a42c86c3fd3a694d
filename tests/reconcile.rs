//! `planrun reconcile <run_id> --applied|--not-applied` settles a run that
//! ended `tool_result_uncertain`: the answer is audited
//! (`reconciliation_settled`) and recorded, the run is `running` again and
//! `resume` continues it — past the step when it was applied (no second
//! effect), running it again when it was not. Anything but an uncertain run
//! is refused with the records unchanged. An uncertain ticket close settled
//! as applied still has to pass the verifier's fresh look-up.

use std::fs;

use serde_json::{Value, json};

use crate::common::tickets::{RUN, T_APPROVE, T_RESUME, T_RESUME_AGAIN, close_count, pause, ticket_sandbox, tickets};
use crate::common::{Sandbox, TEST_POLICY};

const PLAN: &str = "version = 1\nid = \"test\"\n\n[[steps]]\nid = \"write\"\nkind = \"write_file\"\npath = \"out.txt\"\ncontent = \"v1\"\nidempotency_key = \"report-{{ run.id }}\"\n\n[[steps]]\nid = \"after\"\nkind = \"write_file\"\npath = \"after.txt\"\ncontent = \"2\"\n";

/// A run `t` that ended `tool_result_uncertain`: the keyed write crashed
/// before its receipt and its target was changed by hand since.
fn uncertain_run() -> Sandbox {
    let sandbox = Sandbox::new();
    sandbox.write_plan(PLAN, TEST_POLICY);
    sandbox.test_plan().env("PLANRUN_CRASH_AT", "write:before_receipt").expect_code(-1).run();
    fs::write(sandbox.workspace().join("out.txt"), "edited by hand").expect("edit");
    sandbox.planrun().in_sandbox().args(["resume", "t"]).expect_code(1).run();
    assert_eq!(sandbox.state("t")["stop_reason"], "tool_result_uncertain");
    sandbox
}

fn reconcile(sandbox: &Sandbox, answer: &str, code: i32) -> crate::common::Output {
    sandbox.planrun().in_sandbox().args(["reconcile", "t", answer, "--by", "ops"]).expect_code(code).run()
}

fn settled_event(sandbox: &Sandbox) -> Value {
    sandbox
        .record("t", "audit.jsonl")
        .lines()
        .map(|line| serde_json::from_str::<Value>(line).expect("audit line"))
        .find(|event| event["event_type"] == "reconciliation_settled")
        .expect("reconciliation_settled")
}

fn read(sandbox: &Sandbox, file: &str) -> String {
    fs::read_to_string(sandbox.workspace().join(file)).expect(file)
}

#[test]
fn applied_continues_after_the_step_without_repeating_it() {
    let sandbox = uncertain_run();
    let output = reconcile(&sandbox, "--applied", 0);
    assert!(output.stdout.contains("planrun resume t"), "{}", output.stdout);
    let state = sandbox.state("t");
    assert_eq!(state["status"], "running");
    assert_eq!(state["reconciliation"], Value::Null);
    assert_eq!(state["cursor"]["next_step"], 1, "past the settled step");
    let event = settled_event(&sandbox);
    assert_eq!((event["status"].as_str(), event["step_id"].as_str()), (Some("applied"), Some("write")));
    assert_eq!(event["details"]["settled_by"], "ops");
    sandbox.planrun().in_sandbox().args(["resume", "t"]).expect_code(0).run();
    assert_eq!(read(&sandbox, "out.txt"), "edited by hand", "the settled write was not repeated");
    assert_eq!(read(&sandbox, "after.txt"), "2", "the run continued after it");
    let state = sandbox.state("t");
    assert_eq!(state["status"], "done");
    assert_eq!(state["evidence"][0]["kind"], "reconciled");
    let settled: Vec<Value> =
        sandbox.history("t").into_iter().filter(|line| line["details"]["reconciled"] == "applied").collect();
    assert_eq!(settled.len(), 1, "one record of the person's word");
}

#[test]
fn not_applied_runs_the_step_again_on_resume() {
    let sandbox = uncertain_run();
    reconcile(&sandbox, "--not-applied", 0);
    let state = sandbox.state("t");
    assert_eq!(state["status"], "running");
    assert_eq!(state["cursor"]["next_step"], 0, "the step runs again");
    assert_eq!(settled_event(&sandbox)["status"], "not_applied");
    assert!(!sandbox.workspace().join(".planrun/receipts").read_dir().expect("dir").any(|_| true), "intent gone");
    sandbox.planrun().in_sandbox().args(["resume", "t"]).expect_code(0).run();
    assert_eq!(read(&sandbox, "out.txt"), "v1", "the write ran again");
    assert_eq!(sandbox.state("t")["status"], "done");
}

#[test]
fn only_an_uncertain_run_can_be_reconciled() {
    let sandbox = Sandbox::new();
    sandbox.write_plan(PLAN, TEST_POLICY);
    sandbox.test_plan().expect_code(0).run();
    let before: Vec<String> =
        ["state.json", "audit.jsonl", "history.jsonl"].iter().map(|f| sandbox.record("t", f)).collect();
    let refused = reconcile(&sandbox, "--applied", 1);
    assert!(refused.stderr.contains("no uncertain write to reconcile"), "{}", refused.stderr);
    let after: Vec<String> =
        ["state.json", "audit.jsonl", "history.jsonl"].iter().map(|f| sandbox.record("t", f)).collect();
    assert_eq!(before, after, "records unchanged");
    // One answer, exactly.
    sandbox.planrun().in_sandbox().args(["reconcile", "t"]).expect_code(2).run();
    sandbox.planrun().in_sandbox().args(["reconcile", "t", "--applied", "--not-applied"]).expect_code(2).run();
    // A settled run is no longer uncertain.
    let sandbox = uncertain_run();
    reconcile(&sandbox, "--not-applied", 0);
    reconcile(&sandbox, "--applied", 1);
}

#[test]
fn an_uncertain_ticket_close_settled_as_applied_ends_done_through_the_verifier() {
    let sandbox = ticket_sandbox("open", 0);
    pause(&sandbox);
    sandbox.planrun().args(["approve", RUN]).clock(T_APPROVE).expect_code(0).run();
    let crashed =
        sandbox.planrun().args(["resume", RUN]).clock(T_RESUME).env("PLANRUN_CRASH_AT", "close:before_receipt").run();
    assert_eq!(crashed.code, -1);
    // The ticket system's receipt is damaged, so it cannot answer.
    let mut store = tickets(&sandbox);
    store["receipts"]["close-ticket-7-t"]["result"] = json!({});
    sandbox.write("workspace/tickets.json", &serde_json::to_string_pretty(&store).expect("JSON"));
    sandbox.planrun().args(["resume", RUN]).clock(T_RESUME_AGAIN).expect_code(1).run();
    assert_eq!(sandbox.state(RUN)["stop_reason"], "tool_result_uncertain");
    sandbox.planrun().args(["reconcile", RUN, "--applied"]).clock(T_RESUME_AGAIN).expect_code(0).run();
    sandbox.planrun().args(["resume", RUN]).clock(T_RESUME_AGAIN).expect_code(0).run();
    let state = sandbox.state(RUN);
    assert_eq!(state["status"], "done", "the fresh look-up and the settled receipt verify it");
    let verified = state["evidence"].as_array().expect("evidence").iter().filter(|e| e["kind"] == "verify").count();
    assert_eq!(verified, 2);
    assert_eq!(close_count(&sandbox, "ticket-7"), 1, "closed once, never again");
}
