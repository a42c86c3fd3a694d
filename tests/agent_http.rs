//! `[[http.allow]]` rule ids as agent tools, against a scripted model and
//! the loopback HTTP fixture: the egress policy judges each proposed
//! request like an `http` step's (a refusal goes back to the model with its
//! rule and nothing is sent), an allowed GET's body is the next
//! observation (untrusted), and a POST is a write that waits for approval.

use serde_json::json;

use crate::common::TEST_POLICY;
use crate::common::fake_model::{FakeModel, action, finish, observations, profile, start};
use crate::common::http_fixture::HttpFixture;
use crate::common::tickets::{RUN, T_APPROVE, T_RESUME, ticket_sandbox};

const PLAN: &str = r#"version = 1
id = "test"

[[steps]]
id = "fetch"
kind = "agent"
goal = "Read the items of the API."
tools = ["fixture"]
model = "fake"
max_turns = 6
max_refusals = 5

[[verify]]
kind = "ticket_status"
ticket_id = "ticket-7"
equals = "closed"
"#;

/// The policy: rule `fixture` allows GET and POST under `/api` of the
/// fixture's port, beside the fake model.
fn policy(fixture: &HttpFixture, model: &FakeModel) -> String {
    format!(
        "{TEST_POLICY}\n[[http.allow]]\nid = \"fixture\"\nmethods = [\"GET\", \"POST\"]\nscheme = \"http\"\n\
         host = \"127.0.0.1\"\nport = {}\npath = \"/api\"\nprivate = true\n\n{}",
        fixture.port(),
        profile(model)
    )
}

#[test]
fn a_url_outside_the_egress_rules_is_refused_and_nothing_is_sent() {
    let fixture = HttpFixture::start();
    let port = fixture.port();
    let model = start(vec![
        action("fixture", json!({"method": "GET", "url": format!("http://127.0.0.1:{port}/admin")})),
        action("fixture", json!({"method": "GET", "url": "http://169.254.169.254/latest/meta-data"})),
        action("fixture", json!({"method": "DELETE", "url": fixture.url("/api/items")})),
        action("fixture", json!({"method": "GET", "url": fixture.url("/api/items"), "headers": {"x": "y"}})),
        finish("could not"),
    ]);
    let sandbox = ticket_sandbox("closed", 1);
    sandbox.write_plan(PLAN, &policy(&fixture, &model));
    let out = sandbox.test_plan().expect_code(0).run();
    assert!(fixture.requests().is_empty(), "nothing reached the server: {}", out.snapshot());
    let seen = observations(&sandbox);
    let rules: Vec<(&str, &str)> = seen.iter().map(|(outcome, rule, _)| (outcome.as_str(), rule.as_str())).collect();
    assert_eq!(
        rules,
        [
            ("refused", "http.default-deny"),
            ("refused", "http.default-deny"),
            ("refused", "agent.arguments"),
            ("refused", "agent.arguments"),
            ("ok", "")
        ],
        "{seen:?}"
    );
    assert!(seen[0].2.contains("refused by the egress policy"), "{seen:?}");
    assert_eq!(model.requests(), 5);
    // The schema offered names the rule's methods and URL prefix.
    let prompt = model.bodies()[0]["messages"][1]["content"].as_str().expect("prompt").to_string();
    assert!(prompt.contains(&format!("http://127.0.0.1:{port}/api")), "{prompt}");
    assert!(prompt.contains(r#""enum":["GET","POST"]"#), "{prompt}");
}

#[test]
fn an_allowed_get_runs_and_its_body_is_the_next_observation() {
    let fixture = HttpFixture::start();
    let model =
        start(vec![action("fixture", json!({"method": "GET", "url": fixture.url("/api/items")})), finish("two items")]);
    let sandbox = ticket_sandbox("closed", 1);
    sandbox.write_plan(PLAN, &policy(&fixture, &model));
    let out = sandbox.test_plan().expect_code(0).run();
    let requests = fixture.requests();
    assert_eq!(requests.len(), 1, "{}", out.snapshot());
    assert_eq!((requests[0].method.as_str(), requests[0].target.as_str()), ("GET", "/api/items"));
    let seen = observations(&sandbox);
    assert_eq!(seen[0].0, "ok", "{seen:?}");
    let prompt = model.bodies()[1]["messages"][1]["content"].as_str().expect("prompt").to_string();
    assert!(prompt.contains("source=tool:fixture trust=untrusted"), "{prompt}");
    assert!(prompt.contains("items"), "the body reaches the model as data: {prompt}");
}

#[test]
fn a_post_is_a_write_sent_once_after_its_approval() {
    let fixture = HttpFixture::start();
    let model = start(vec![
        action("fixture", json!({"method": "POST", "url": fixture.url("/api/echo"), "body": "hello"})),
        finish("posted"),
    ]);
    let sandbox = ticket_sandbox("closed", 1);
    sandbox.write_plan(PLAN, &policy(&fixture, &model));
    sandbox.test_plan().expect_code(3).run();
    assert!(fixture.requests().is_empty(), "nothing sent before the approval");
    let pending = &sandbox.state(RUN)["pending_action"];
    assert_eq!(pending["kind"], "http", "{pending}");
    assert_eq!(pending["action"]["method"], "POST");
    assert_eq!(pending["required_by"], "risk", "{pending}");
    sandbox.planrun().args(["approve", RUN]).clock(T_APPROVE).expect_code(0).run();
    sandbox.planrun().args(["resume", RUN]).clock(T_RESUME).expect_code(0).run();
    let sent: Vec<_> =
        fixture.requests().into_iter().map(|request| (request.method, request.target, request.body)).collect();
    assert_eq!(
        sent,
        [("POST".to_string(), "/api/echo".to_string(), "hello".to_string())],
        "sent once, after the approval"
    );
}
