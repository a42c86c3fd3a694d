//! `POST /controller/runs` over loopback HTTP: the controller runs the
//! agent through bridge runs, applies a recovery rewrite at most once, stops
//! on the decision backend's word, and a blocked goal runs nothing. Golden
//! snapshots of controller and bridge records are in `snapshots/server/`.

use serde_json::{Value, json};

use crate::common::Sandbox;
use crate::serve_harness::{Server, client, get_json, post};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn controller_runs_the_agent_and_stops_on_success() {
    let server = Server::start(&[]);
    let client = client();
    let (status, body) = post(&client, &server.url("/controller/runs"), json!({"goal": "test flow pwd to file"})).await;
    assert_eq!(status, 201, "{body}");
    assert_eq!(body["controller_run_id"], "ctrl-0001");
    assert_eq!(body["final_status"], "done");
    assert_eq!(body["stop_reason"], "decision_stop");
    assert_eq!(
        body["linked_runs"],
        json!([{"bridge_run_id": "bri-ctrl-0001-i0", "agent_run_id": "agent-bri-ctrl-0001-i0"}])
    );
    assert!(server.exists("runs/agent-bri-ctrl-0001-i0/state.json"));
    let (status, persisted) = get_json(&client, &server.url("/controller/runs/ctrl-0001")).await;
    assert_eq!((status, &persisted), (200, &body));
    let (_, bridge) = get_json(&client, &server.url("/runs/bri-ctrl-0001-i0")).await;
    assert_eq!(bridge["controller_run_id"], "ctrl-0001");
    server.snapshot_records("controller_success", "ctrl-0001", &["controller_state.json", "controller_audit.jsonl"]);
    server.snapshot_records("controller_success_bridge", "bri-ctrl-0001-i0", &["state.json", "audit.jsonl"]);
}

/// The user's goal routes to `flow_bad_template`, which fails; the service
/// policy's rule rewrites the goal to one that routes to `flow_pwd`, which
/// `flow_bad_template` declares in `recovery_plans`: it is offered (only
/// then, next to the goal's plan), runs under the rule and ends `done`, and
/// the controller run still ends `failed`, the outcome for the user's goal.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn controller_applies_a_recovery_rewrite_once() {
    let server = Server::start(&[]);
    let (_, body) = post(&client(), &server.url("/controller/runs"), json!({"goal": "test flow bad template"})).await;
    assert_eq!((&body["status"], &body["final_status"]), (&json!("failed"), &json!("failed")), "{body}");
    assert_eq!(body["plan_id"], "flow_bad_template");
    assert_eq!(body["iterations"], 2);
    assert_eq!(body["recovery_attempted"], true);
    assert_eq!(
        body["recovery"],
        json!({"rule_id": "bad-template-to-pwd", "goal": "test flow pwd to file", "plan_id": "flow_pwd"})
    );
    assert_eq!(body["current_goal"], "test flow pwd to file");
    let offered: Vec<&Value> =
        body["decisions"].as_array().expect("decisions").iter().map(|d| &d["offered"]["plan_ids"]).collect();
    assert_eq!(offered[0], &json!(["flow_bad_template"]), "no alternative before a recovery");
    assert_eq!(offered[1], &json!(["flow_bad_template", "flow_pwd"]), "the declared recovery plan, under the rule");
    let results = &body["bridge_results"];
    assert_eq!(results[0]["failure_class"], "template_error");
    assert_eq!((&results[0]["plan_id"], &results[0]["recovery_rule"]), (&json!("flow_bad_template"), &Value::Null));
    assert_eq!(
        (&results[1]["plan_id"], &results[1]["recovery_rule"], &results[1]["status"]),
        (&json!("flow_pwd"), &json!("bad-template-to-pwd"), &json!("done"))
    );
    let error = body["error"].as_str().expect("an error");
    assert!(error.contains("plan `flow_pwd` ran in its place") && error.contains("not the goal's outcome"), "{error}");
    server.snapshot_records("controller_recovery", "ctrl-0001", &["controller_state.json", "controller_audit.jsonl"]);
}

/// A recovery rule whose rewrite routes to a plan the goal's plan does not
/// declare in `recovery_plans` is skipped: that plan is never offered and
/// never runs.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rule_rewriting_to_an_undeclared_plan_is_skipped() {
    let sandbox = Sandbox::new();
    let policy = sandbox.write(
        "service.toml",
        "version = 1\n[[recovery]]\nid = \"rm-to-pwd\"\nwhen_failure_class = \"security_denied\"\n\
         rewrite = \"test flow pwd to file\"\nreason = \"run something that works\"\n",
    );
    let policy = policy.to_string_lossy().into_owned();
    let server = Server::start_in_with(sandbox, &[], &["--service-policy", &policy]);
    let (_, body) = post(&client(), &server.url("/controller/runs"), json!({"goal": "test deny rm"})).await;
    assert_eq!((&body["final_status"], &body["iterations"]), (&json!("failed"), &json!(1)), "{body}");
    assert_eq!((&body["recovery_attempted"], &body["recovery"]), (&json!(false), &Value::Null));
    for decision in body["decisions"].as_array().expect("decisions") {
        assert_eq!(decision["offered"]["plan_ids"], json!(["deny_rm"]), "{decision}");
    }
    let audit = server.record("ctrl-0001", "controller_audit.jsonl");
    assert!(
        audit.contains("rule `rm-to-pwd` rewrites the goal to one that routes to plan `flow_pwd`, which plan `deny_rm` does not declare in `recovery_plans`"),
        "{audit}"
    );
    assert!(!audit.contains("\"event_type\":\"recovery_applied\""), "{audit}");
    assert!(!server.exists("runs/agent-bri-ctrl-0001-i1"), "the undeclared plan never ran");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn controller_skips_recovery_without_a_rule_and_stops_failed() {
    let server = Server::start(&[]);
    let (_, body) = post(&client(), &server.url("/controller/runs"), json!({"goal": "test deny rm"})).await;
    assert_eq!(body["final_status"], "failed");
    assert_eq!(body["stop_reason"], "decision_stop");
    assert_eq!(body["iterations"], 1);
    assert_eq!(body["bridge_results"][0]["failure_class"], "security_denied");
    let audit = server.record("ctrl-0001", "controller_audit.jsonl");
    let events: Vec<String> = audit
        .lines()
        .map(|line| {
            serde_json::from_str::<Value>(line).expect("JSON")["event_type"].as_str().unwrap_or_default().to_string()
        })
        .collect();
    assert_eq!(
        events,
        [
            "controller_started",
            "decision_made",
            "bridge_run_started",
            "bridge_run_finished",
            "recovery_considered",
            "recovery_skipped",
            "decision_made",
            "controller_finished"
        ]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_blocked_controller_goal_runs_nothing() {
    let server = Server::start(&[]);
    let (_, body) =
        post(&client(), &server.url("/controller/runs"), json!({"goal": "please rm -rf the workspace"})).await;
    assert_eq!(body["final_status"], "failed");
    assert_eq!(body["stop_reason"], "prompt_blocked");
    assert_eq!(body["iterations"], 0);
    assert!(!server.exists("runs"));
}
