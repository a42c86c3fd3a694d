//! How the service routes a goal: exactly as `planrun route` does, on the
//! user's goal, never on the instruction a bridge run wraps it in. A plan
//! whose keyword is part of that wording (`report the result`) never takes
//! a goal it does not match, through `POST /runs` (adapter `agent`) or
//! `POST /controller/runs`, and the agent run records the user's goal.

use std::path::{Path, PathBuf};

use serde_json::{Value, json};

use crate::common::{ROOT, Sandbox};
use crate::serve_harness::{Server, client, post};

/// A plan whose keyword is in the bridge instruction's fixed wording; were
/// it run, it would write `hijacked.txt`.
const WRAPPER_PLAN: &str = r#"version = 1
id = "report_result"
description = "takes goals that ask to report the result"
keywords = ["report the result"]

[[steps]]
id = "write"
kind = "write_file"
path = "hijacked.txt"
content = "the wrong plan ran"

[[steps]]
id = "end"
kind = "finish"
"#;

/// A sandbox whose plans are the repository's and [`WRAPPER_PLAN`], with
/// the ticket demo's `tickets.json`; returns it and its plans folder.
fn sandbox_with_wrapper_plan() -> (Sandbox, PathBuf) {
    let sandbox = Sandbox::new();
    // The plan files only: `plans/fixtures/` holds the example plans' data.
    for entry in std::fs::read_dir(Path::new(ROOT).join("plans")).expect("plans").flatten() {
        if entry.path().is_dir() {
            continue;
        }
        let name = entry.file_name().to_string_lossy().into_owned();
        let text = std::fs::read_to_string(entry.path()).expect("plan file");
        sandbox.write(&format!("plans/{name}"), &text);
    }
    sandbox.write("plans/report_result.toml", WRAPPER_PLAN);
    let tickets =
        std::fs::read_to_string(Path::new(ROOT).join("plans/ticket_close.tickets.json")).expect("sample tickets");
    sandbox.write("workspace/tickets.json", &tickets);
    let plans = sandbox.path().join("plans");
    (sandbox, plans)
}

/// The payload of agent run `run_id`'s `state.json`.
fn agent_state(server: &Server, run_id: &str) -> Value {
    let text = std::fs::read_to_string(server.sandbox.workspace().join(format!("runs/{run_id}/state.json")))
        .expect("the agent run's state");
    serde_json::from_str::<Value>(&text).expect("JSON")["payload"].clone()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_service_routes_the_users_goal_as_planrun_route_does() {
    let (sandbox, plans) = sandbox_with_wrapper_plan();
    let route = sandbox.planrun().args(["route", "close ticket", "--plans"]).arg(&plans).expect_code(0).run();
    assert!(route.stdout.contains("winner: ticket_close"), "{}", route.stdout);
    let plans = plans.to_string_lossy().into_owned();
    let server = Server::start_in_with(sandbox, &[], &["--plans", &plans]);
    let client = client();

    let (status, bridge) =
        post(&client, &server.url("/runs"), json!({"goal": "close ticket", "adapter": "agent"})).await;
    assert_eq!(status, 201, "{bridge}");
    assert_eq!(bridge["status"], "waiting_approval", "{bridge}");
    assert_eq!(bridge["goal"], "close ticket");
    assert!(bridge["instruction"].as_str().is_some_and(|text| text.contains("report the result")), "{bridge}");
    let agent = agent_state(&server, "agent-br-0001");
    assert_eq!((&agent["goal"], &agent["plan"]["id"]), (&json!("close ticket"), &json!("ticket_close")), "{agent}");

    let (status, controller) = post(&client, &server.url("/controller/runs"), json!({"goal": "close ticket"})).await;
    assert_eq!(status, 201, "{controller}");
    assert_eq!(controller["decisions"][0]["offered"]["plan_ids"], json!(["ticket_close"]), "{controller}");
    assert_eq!(controller["stop_reason"], "waiting_approval", "{controller}");
    let agent = agent_state(&server, "agent-bri-ctrl-0001-i0");
    assert_eq!((&agent["goal"], &agent["plan"]["id"]), (&json!("close ticket"), &json!("ticket_close")), "{agent}");

    assert!(!server.exists("hijacked.txt"), "the plan matching the wrapper text never ran");
}
