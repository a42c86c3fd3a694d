//! Agent steps against a scripted fake model on loopback (the OpenAI
//! chat-completions protocol): the model proposes, the runtime decides.

use serde_json::{Value, json};

use crate::common::fake_model::{FakeModel, action, ask, finish};
use crate::common::tickets::{RUN, T_APPROVE, T_RESUME, T_RESUME_AGAIN, close_count, event_types, ticket_sandbox};
use crate::common::{Sandbox, TEST_POLICY};

/// The agent plan: one agent step over the ticket tools, verified by a
/// fresh look-up.
fn agent_plan(tools: &str, extra: &str) -> String {
    format!(
        r#"version = 1
id = "test"

[[steps]]
id = "triage"
kind = "agent"
goal = "Close ticket-7 if it is open. Never touch other tickets."
tools = [{tools}]
model = "fake"
max_turns = 6
{extra}

[[verify]]
kind = "ticket_status"
ticket_id = "ticket-7"
equals = "closed"
"#
    )
}

fn policy(model: &FakeModel) -> String {
    format!("{TEST_POLICY}\n{}", model.profile())
}

const TICKET_TOOLS: &str = r#""ticket_lookup", "ticket_close""#;

fn state(sandbox: &Sandbox) -> Value {
    sandbox.state(RUN)
}

#[test]
fn a_benign_run_looks_up_closes_after_approval_and_finishes_verified() {
    let model = FakeModel::start(vec![
        action("ticket_lookup", json!({"ticket_id": "ticket-7"})),
        action("ticket_close", json!({"ticket_id": "ticket-7"})),
        finish("ticket-7 is closed"),
    ]);
    let sandbox = ticket_sandbox("open", 0);
    sandbox.write_plan(&agent_plan(TICKET_TOOLS, ""), &policy(&model));
    let paused = sandbox.test_plan().expect_code(3).run();
    assert_eq!(model.requests(), 2, "{}", paused.snapshot());
    assert_eq!(close_count(&sandbox, "ticket-7"), 0, "nothing closed before the approval");
    let pending = &state(&sandbox)["pending_action"];
    assert_eq!(pending["kind"], "ticket_close");
    assert_eq!(pending["action"]["ticket_id"], "ticket-7");
    sandbox.planrun().args(["approve", RUN]).clock(T_APPROVE).expect_code(0).run();
    sandbox.planrun().args(["resume", RUN]).clock(T_RESUME).expect_code(0).run();
    assert_eq!(model.requests(), 3);
    assert_eq!(close_count(&sandbox, "ticket-7"), 1);
    assert_eq!(close_count(&sandbox, "ticket-8"), 0);
    let state = state(&sandbox);
    assert_eq!(state["status"], "done");
    assert!(state.get("agent").is_none(), "the agent record goes when the step ends");
    let types = event_types(&sandbox);
    assert_eq!(types.iter().filter(|kind| *kind == "agent_answer_recorded").count(), 3, "{types:?}");
}
