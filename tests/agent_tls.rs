//! An agent step's model behind an `https://` endpoint: real TLS against a
//! model server on loopback (`tests/fixtures/tls/model_server.py`) whose
//! certificate for 127.0.0.1 is signed by a CA made here with `openssl`,
//! trusted through the profile's `ca_file`. A certificate that does not
//! chain to it is refused before any request is sent: no answer recorded.

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};

use serde_json::Value;

use crate::common::fake_model::ask;
use crate::common::tickets::{RUN, event_types, ticket_sandbox};
use crate::common::tls::{make_ca, make_server_cert};
use crate::common::{ROOT, Sandbox, TEST_POLICY};

const QUESTION: &str = "Which ticket, over TLS?";

/// The TLS model server, killed on drop.
struct TlsModel {
    child: Child,
    port: u16,
    log: std::path::PathBuf,
}

impl TlsModel {
    /// Serves `answer` with `<dir>/server.pem`, logging to `<dir>/requests.log`.
    fn start(dir: &Path, answer: &str) -> TlsModel {
        let log = dir.join("requests.log");
        let mut child = Command::new("python3")
            .arg(Path::new(ROOT).join("tests/fixtures/tls/model_server.py"))
            .args([dir.join("server.pem"), dir.join("server.key"), log.clone()])
            .arg(answer)
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("python3");
        let mut line = String::new();
        BufReader::new(child.stdout.take().expect("stdout")).read_line(&mut line).expect("port");
        let port = line.trim().parse().unwrap_or_else(|_| panic!("no port: {line:?}"));
        TlsModel { child, port, log }
    }

    /// The requests that got through the handshake.
    fn requests(&self) -> Vec<String> {
        std::fs::read_to_string(&self.log).map(|text| text.lines().map(str::to_string).collect()).unwrap_or_default()
    }
}

impl Drop for TlsModel {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A sandbox with CAs `ca` and `other-ca` in `tls/`, and a server
/// certificate signed by `ca`.
fn tls_sandbox() -> Sandbox {
    let sandbox = ticket_sandbox("closed", 1);
    let dir = sandbox.path().join("tls");
    std::fs::create_dir_all(&dir).expect("tls/");
    make_ca(&dir, "ca");
    make_ca(&dir, "other-ca");
    make_server_cert(&dir, "ca");
    sandbox
}

/// The plan: one agent step over the ticket tools, its model `tls`.
const PLAN: &str = r#"version = 1
id = "test"

[[steps]]
id = "triage"
kind = "agent"
goal = "Close ticket-7 if it is open."
tools = ["ticket_lookup"]
model = "tls"
max_turns = 2

[[verify]]
kind = "ticket_status"
ticket_id = "ticket-7"
equals = "closed"
"#;

/// A policy whose model `tls` is `https://127.0.0.1:PORT/v1`, with `ca`
/// (a path relative to the policy file) when given.
fn policy(model: &TlsModel, ca_file: Option<&str>) -> String {
    let ca = ca_file.map(|path| format!("ca_file = \"{path}\"\n")).unwrap_or_default();
    format!(
        "{TEST_POLICY}\n[models.tls]\nbackend = \"openai\"\nendpoint = \"https://127.0.0.1:{}/v1\"\nmodel = \"m\"\n\
         timeout_secs = 10\n{ca}",
        model.port
    )
}

#[test]
fn an_https_model_endpoint_trusted_through_ca_file_answers_over_tls() {
    let sandbox = tls_sandbox();
    let model = TlsModel::start(&sandbox.path().join("tls"), &ask(QUESTION));
    sandbox.write_plan(PLAN, &policy(&model, Some("../tls/ca.pem")));
    let out = sandbox.test_plan().expect_code(4).run();
    assert_eq!(model.requests(), ["/v1/chat/completions bearer=False"], "{}", out.snapshot());
    let state = sandbox.state(RUN);
    assert_eq!(state["status"], "waiting_input");
    assert_eq!(state["agent"]["question"], QUESTION);
    assert_eq!(event_types(&sandbox).iter().filter(|kind| *kind == "agent_answer_recorded").count(), 1);
}

#[test]
fn an_untrusted_certificate_is_refused_and_no_answer_is_recorded() {
    let sandbox = tls_sandbox();
    let model = TlsModel::start(&sandbox.path().join("tls"), &ask(QUESTION));
    // Another CA, and the system's roots (no `ca_file`): neither vouches
    // for the server's certificate.
    for ca_file in [Some("../tls/other-ca.pem"), None] {
        sandbox.write_plan(PLAN, &policy(&model, ca_file));
        let _ = std::fs::remove_dir_all(sandbox.workspace().join("runs"));
        let out = sandbox.test_plan().expect_code(1).run();
        let state = sandbox.state(RUN);
        let error = state["error"].as_str().unwrap_or_default();
        assert!(error.contains("the model call failed: model server unreachable"), "{ca_file:?}: {error}");
        assert!(
            error.contains("invalid peer certificate: UnknownIssuer"),
            "the refusal names the certificate: {error}"
        );
        assert!(!event_types(&sandbox).contains(&"agent_answer_recorded".to_string()), "{}", out.snapshot());
        assert_eq!(state.get("agent"), None::<&Value>, "{state}");
        assert!(model.requests().is_empty(), "{ca_file:?}: no request got through the handshake");
    }
}

#[test]
fn a_ca_file_needs_an_https_endpoint_and_a_missing_one_is_a_clear_failure() {
    let sandbox = tls_sandbox();
    let model = TlsModel::start(&sandbox.path().join("tls"), &ask(QUESTION));
    let plain = policy(&model, Some("../tls/ca.pem")).replace("https://", "http://");
    sandbox.write_plan(PLAN, &plain);
    let out = sandbox.planrun().in_sandbox().args(["check", "--plans", "plans", "--policies", "policies"]).run();
    assert_eq!(out.code, 2, "{}", out.snapshot());
    let said = format!("{}{}", out.stdout, out.stderr);
    assert!(said.contains("`ca_file` is for an `https://` endpoint"), "{said}");
    assert!(said.contains("policies/default.toml:"), "{said}");
    sandbox.write_plan(PLAN, &policy(&model, Some("../tls/missing.pem")));
    sandbox.test_plan().expect_code(1).run();
    let error = sandbox.state(RUN)["error"].as_str().unwrap_or_default().to_string();
    assert!(error.contains("cannot read `ca_file`"), "{error} {}", sandbox.record(RUN, "history.jsonl"));
    assert!(model.requests().is_empty());
}
