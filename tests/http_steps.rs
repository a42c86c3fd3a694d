//! `http` steps against a real HTTP server on loopback (the fixture in
//! `common/http_fixture.rs`, which logs every request): GET and POST with
//! JSON, status sets, timeouts, size caps, redirects followed, refused and
//! pointing elsewhere, names resolving to private addresses, decimal,
//! octal and IPv4-mapped host forms, userinfo, a rebinding attempt through
//! the resolver stub, a secret in a header found in no record, the
//! `Idempotency-Key` across a crash and resume, and the loader's refusals
//! with their positions. Every refusal proves the fixture received nothing.

use serde_json::{Value, json};

use crate::common::http_fixture::HttpFixture;
use crate::common::{Output, Sandbox};
use crate::secrets::{CANARY, hits};

/// A policy with one rule for the fixture's `/api` (loopback, so
/// `private = true`): `rule_extra` are more keys of the rule, `extra` more
/// keys of `[http]` or, starting with `[`, tables after the rule.
pub(crate) fn policy(port: u16, rule_extra: &str, extra: &str) -> String {
    let (http_extra, extra) = if extra.starts_with('[') { ("", extra) } else { (extra, "") };
    format!(
        r#"version = 1
[retry]
execution_error = 1
[http]
timeout_secs = 1
{http_extra}
[[http.allow]]
id = "fixture"
methods = ["GET", "POST"]
scheme = "http"
host = "127.0.0.1"
port = {port}
path = "/api"
private = true
reason = "the test fixture"
{rule_extra}
{extra}
"#
    )
}

/// A plan of one `http` step `call` (TOML lines) and a `finish`.
pub(crate) fn plan(call: &str) -> String {
    format!(
        "version = 1\nid = \"test\"\n\n[[steps]]\nid = \"call\"\nkind = \"http\"\n{call}\n\n[[steps]]\nid = \"end\"\nkind = \"finish\"\n"
    )
}

/// Runs `plan` as run `t`, the records of an earlier run `t` removed first.
pub(crate) fn run(sandbox: &Sandbox, plan: &str, policy: &str, envs: &[(&str, &str)]) -> Output {
    let _ = std::fs::remove_dir_all(sandbox.workspace().join("runs"));
    let _ = std::fs::remove_dir_all(sandbox.workspace().join(".planrun"));
    sandbox.write_plan(plan, policy);
    let mut command = sandbox.test_plan();
    for (key, value) in envs {
        command = command.env(key, value);
    }
    command.run()
}

pub(crate) fn call_record(sandbox: &Sandbox) -> Value {
    sandbox.history("t").into_iter().find(|record| record["step_id"] == "call").expect("the call's record")
}

#[test]
fn a_get_returns_the_body_as_untrusted_output_with_status_and_named_headers() {
    let fixture = HttpFixture::start();
    let sandbox = Sandbox::new();
    let call = format!(
        "method = \"GET\"\nurl = \"{}\"\nresponse_headers = [\"X-Fixture\"]",
        fixture.url("/api/items?run={{ run.id }}")
    );
    let output = run(&sandbox, &plan(&call), &policy(fixture.port(), "", ""), &[]);
    assert_eq!(output.code, 0, "{}", output.snapshot());
    let record = call_record(&sandbox);
    assert_eq!(record["output_text"], r#"{"items": [1, 2]}"#);
    assert_eq!(
        record["output_json"],
        json!({"status": 200, "headers": {"x-fixture": "yes"}, "body": {"items": [1, 2]}, "untrusted_fields": ["body", "headers"]})
    );
    assert_eq!(record["details"]["rule"], "fixture");
    assert_eq!(record["details"]["address"], fixture.address.to_string());
    let requests = fixture.requests();
    assert_eq!(requests.len(), 1);
    assert_eq!(requests[0].target, "/api/items?run=t");
}

#[test]
fn a_post_sends_the_json_document_and_a_status_set_decides_success() {
    let fixture = HttpFixture::start();
    let sandbox = Sandbox::new();
    let call = format!(
        "method = \"POST\"\nurl = \"{}\"\njson = {{ run = \"{{{{ run.id }}}}\", n = 3, tags = [\"a\"] }}\nexpect = {{ status = [201] }}",
        fixture.url("/api/echo")
    );
    let output = run(&sandbox, &plan(&call), &policy(fixture.port(), "", ""), &[]);
    assert_eq!(output.code, 0, "{}", output.snapshot());
    let requests = fixture.requests();
    assert_eq!(requests[0].header("content-type"), Some("application/json"));
    let sent: Value = serde_json::from_str(&requests[0].body).expect("json body");
    assert_eq!(sent, json!({"run": "t", "n": 3, "tags": ["a"]}));
    assert_eq!(call_record(&sandbox)["output_json"]["body"]["method"], "POST");

    // 201 outside the default set (any 2xx) is fine; 404 is not.
    let missing = format!("method = \"GET\"\nurl = \"{}\"", fixture.url("/api/status/404"));
    let output = run(
        &sandbox,
        &plan(&missing).replace("\"test\"", "\"test\"\nexpected_status = \"failed\""),
        &policy(fixture.port(), "", ""),
        &[],
    );
    assert_eq!(output.code, 1, "{}", output.snapshot());
}

#[test]
fn an_unexpected_status_fails_the_step_with_the_body_kept() {
    let fixture = HttpFixture::start();
    let sandbox = Sandbox::new();
    let call = format!("method = \"GET\"\nurl = \"{}\"\nexpect = {{ status = [200] }}", fixture.url("/api/status/404"));
    let output = run(&sandbox, &plan(&call), &policy(fixture.port(), "", ""), &[]);
    assert_eq!(output.code, 1, "{}", output.snapshot());
    let record = call_record(&sandbox);
    assert_eq!(record["failure_class"], "verification_failed");
    assert!(record["error"].as_str().expect("error").contains("answered 404; expected 200"), "{record}");
    assert_eq!(record["output_text"], r#"{"error": "as asked"}"#);
    assert_eq!(record["details"]["status"], 404);
}

#[test]
fn a_slow_answer_times_out_at_the_policy_s_limit() {
    let fixture = HttpFixture::start();
    let sandbox = Sandbox::new();
    let call = format!("method = \"GET\"\nurl = \"{}\"", fixture.url("/api/slow"));
    let started = std::time::Instant::now();
    let output = run(&sandbox, &plan(&call), &policy(fixture.port(), "", ""), &[]);
    assert_eq!(output.code, 1, "{}", output.snapshot());
    assert!(started.elapsed() < std::time::Duration::from_millis(2800), "{:?}", started.elapsed());
    let record = call_record(&sandbox);
    assert_eq!(record["failure_class"], "execution_error");
    assert!(record["error"].as_str().expect("error").contains("timed out after 1s"), "{record}");
}

#[test]
fn a_body_over_the_cap_is_cut_and_marked() {
    let fixture = HttpFixture::start();
    let sandbox = Sandbox::new();
    let call = format!("method = \"GET\"\nurl = \"{}\"\nmax_response_bytes = 100", fixture.url("/api/big"));
    let output = run(&sandbox, &plan(&call), &policy(fixture.port(), "", "max_response_bytes = 5000"), &[]);
    assert_eq!(output.code, 0, "{}", output.snapshot());
    let record = call_record(&sandbox);
    assert_eq!(record["output_text"], "x".repeat(100));
    assert_eq!(record["details"]["truncated"], true);
    assert_eq!(record["details"]["response_bytes"], 100);
}

#[test]
fn redirects_are_followed_only_when_the_rule_allows_and_each_hop_is_judged() {
    let fixture = HttpFixture::start();
    let elsewhere = HttpFixture::start_at("127.0.0.2".parse().expect("ip"), 0);
    let sandbox = Sandbox::new();
    let to_items = format!("method = \"GET\"\nurl = \"{}\"", fixture.url("/api/redirect/1?to=/api/items"));

    // Off by default: the 302 is the answer, and it is not a 2xx.
    let output = run(&sandbox, &plan(&to_items), &policy(fixture.port(), "", ""), &[]);
    assert_eq!(output.code, 1, "{}", output.snapshot());
    assert!(
        call_record(&sandbox)["error"].as_str().expect("error").contains("answered 302 (a redirect"),
        "{}",
        output.snapshot()
    );
    assert_eq!(fixture.requests().len(), 1);

    // `redirects = 1`: followed to an allowed path.
    let output = run(&sandbox, &plan(&to_items), &policy(fixture.port(), "redirects = 1", ""), &[]);
    assert_eq!(output.code, 0, "{}", output.snapshot());
    assert_eq!(call_record(&sandbox)["details"]["redirects"], 1);
    assert_eq!(fixture.requests().last().expect("followed").target, "/api/items");

    // A hop to a host no rule allows is refused before it is sent.
    let away = format!(
        "method = \"GET\"\nurl = \"{}\"",
        fixture.url(&format!("/api/redirect/2?to=http://127.0.0.2:{}/api/items", elsewhere.port()))
    );
    let output = run(&sandbox, &plan(&away), &policy(fixture.port(), "redirects = 1", ""), &[]);
    assert_eq!(output.code, 1, "{}", output.snapshot());
    let record = call_record(&sandbox);
    assert_eq!(record["failure_class"], "security_denied");
    assert!(record["error"].as_str().expect("error").contains("redirect to http://127.0.0.2"), "{record}");
    assert!(elsewhere.requests().is_empty());
}

#[test]
fn a_name_that_resolves_to_a_private_or_metadata_address_is_refused_unless_the_rule_says_private() {
    let fixture = HttpFixture::start();
    let sandbox = Sandbox::new();
    let port = fixture.port();
    let call = format!("method = \"GET\"\nurl = \"http://api.test:{port}/api/items\"");
    let rule = |private: bool| {
        format!(
            "version = 1\n[http]\n[[http.allow]]\nid = \"named\"\nscheme = \"http\"\nhost = \"api.test\"\nport = {port}\nprivate = {private}\n"
        )
    };
    let stub = [("PLANRUN_TEST_RESOLVE", "api.test=127.0.0.1")];
    let output = run(&sandbox, &plan(&call), &rule(false), &stub);
    assert_eq!(output.code, 1, "{}", output.snapshot());
    let record = call_record(&sandbox);
    assert_eq!(record["failure_class"], "security_denied");
    assert!(
        record["error"].as_str().expect("error").contains("api.test resolves to 127.0.0.1, a loopback address"),
        "{record}"
    );
    assert!(fixture.requests().is_empty(), "nothing may reach the server");

    let metadata = [("PLANRUN_TEST_RESOLVE", "api.test=169.254.169.254")];
    let output = run(&sandbox, &plan(&call), &rule(false), &metadata);
    assert_eq!(output.code, 1, "{}", output.snapshot());
    assert!(call_record(&sandbox)["error"].as_str().expect("error").contains("a cloud metadata address"));

    // The same name through a rule that says `private = true` reaches it.
    let output = run(&sandbox, &plan(&call), &rule(true), &stub);
    assert_eq!(output.code, 0, "{}", output.snapshot());
    assert_eq!(fixture.requests().len(), 1);
    assert_eq!(fixture.requests()[0].header("host"), Some(format!("api.test:{port}").as_str()));
}

#[test]
fn decimal_octal_and_ipv4_mapped_hosts_are_the_loopback_address_they_name() {
    let fixture = HttpFixture::start();
    let sandbox = Sandbox::new();
    let port = fixture.port();
    let public_rule = format!(
        "version = 1\n[http]\n[[http.allow]]\nid = \"loopback-not-private\"\nscheme = \"http\"\nhost = \"127.0.0.1\"\nport = {port}\n"
    );
    for host in ["2130706433", "0177.0.0.1", "0x7f.0.0.1", "[::ffff:127.0.0.1]", "127.1"] {
        let call = format!("method = \"GET\"\nurl = \"http://{host}:{port}/api/items\"");
        let output = run(&sandbox, &plan(&call), &public_rule, &[]);
        assert_eq!(output.code, 1, "{host}: {}", output.snapshot());
        let record = call_record(&sandbox);
        assert_eq!(record["details"]["rule"], "http.private", "{host}: {record}");
        assert_eq!(record["details"]["url"], format!("http://127.0.0.1:{port}/api/items"), "{host}");
    }
    assert!(fixture.requests().is_empty(), "nothing may reach the server");
    let call = format!("method = \"GET\"\nurl = \"http://0177.0.0.1:{port}/api/items\"");
    let output = run(&sandbox, &plan(&call), &policy(port, "", ""), &[]);
    assert_eq!(output.code, 0, "{}", output.snapshot());
    assert_eq!(fixture.requests().len(), 1);
}

#[test]
fn a_rebinding_name_is_resolved_once_and_the_connection_goes_to_the_address_judged() {
    let first = HttpFixture::start();
    let second = HttpFixture::start_at("127.0.0.2".parse().expect("ip"), first.port());
    let sandbox = Sandbox::new();
    let port = first.port();
    let policy = format!(
        "version = 1\n[http]\ndeny = [\"127.0.0.2\"]\n[[http.allow]]\nid = \"rebind\"\nscheme = \"http\"\nhost = \"rebind.test\"\nport = {port}\nprivate = true\n"
    );
    let call = format!("method = \"GET\"\nurl = \"http://rebind.test:{port}/api/items\"");
    // The first answer is judged and used; the second, denied, is never asked for.
    let stub = [("PLANRUN_TEST_RESOLVE", "rebind.test=127.0.0.1,127.0.0.2")];
    let output = run(&sandbox, &plan(&call), &policy, &stub);
    assert_eq!(output.code, 0, "{}", output.snapshot());
    assert_eq!(first.requests().len(), 1);
    assert!(second.requests().is_empty(), "the second answer was reached");
    // Answered the denied address first, nothing is sent anywhere.
    let stub = [("PLANRUN_TEST_RESOLVE", "rebind.test=127.0.0.2,127.0.0.1")];
    let output = run(&sandbox, &plan(&call), &policy, &stub);
    assert_eq!(output.code, 1, "{}", output.snapshot());
    assert!(call_record(&sandbox)["error"].as_str().expect("error").contains("which `http.deny` lists"));
    assert_eq!(first.requests().len(), 1);
    assert!(second.requests().is_empty());
}

#[test]
fn unallowed_urls_and_denied_hosts_send_nothing_and_check_reports_them() {
    let fixture = HttpFixture::start();
    let sandbox = Sandbox::new();
    let port = fixture.port();
    for (url, rule) in [
        (fixture.url("/admin"), "http.default-deny"),
        (format!("http://localhost:{port}/api/items"), "http.deny[localhost]"),
    ] {
        let call = format!("method = \"GET\"\nurl = \"{url}\"");
        let policy = policy(port, "", "deny = [\"localhost\"]");
        let check = {
            sandbox.write_plan(&plan(&call), &policy);
            sandbox.planrun().in_sandbox().args(["check", "--plans", "plans", "--policies", "policies"]).run()
        };
        assert!(check.stdout.contains("warning[http-always-denied]"), "{url}: {}", check.snapshot());
        assert!(check.stdout.contains("plans/test.toml:8:7"), "{url}: {}", check.snapshot());
        let output = run(&sandbox, &plan(&call), &policy, &[]);
        assert_eq!(output.code, 1, "{url}: {}", output.snapshot());
        assert_eq!(call_record(&sandbox)["details"]["rule"], rule, "{url}");
    }
    assert!(fixture.requests().is_empty(), "nothing may reach the server");
}

#[test]
fn a_templated_path_is_percent_encoded_and_cannot_leave_the_allowed_prefix() {
    let fixture = HttpFixture::start();
    let sandbox = Sandbox::new();
    let plan = format!(
        "version = 1\nid = \"test\"\n[inputs.name]\ntype = \"string\"\n\n[[steps]]\nid = \"call\"\nkind = \"http\"\nmethod = \"GET\"\nurl = \"{}\"\n\n[[steps]]\nid = \"end\"\nkind = \"finish\"\n",
        fixture.url("/api/items/{{ inputs.name }}?q={{ inputs.name }}")
    );
    sandbox.write_plan(&plan, &policy(fixture.port(), "", ""));
    let output = sandbox.test_plan().args(["--input", "name=../../admin?x=1&y#z"]).run();
    assert_eq!(output.code, 1, "{}", output.snapshot());
    let requests = fixture.requests();
    assert_eq!(requests[0].target, "/api/items/..%2F..%2Fadmin%3Fx%3D1%26y%23z?q=..%2F..%2Fadmin%3Fx%3D1%26y%23z");
}

#[test]
fn a_secret_in_a_header_reaches_the_server_and_no_record_or_output() {
    let fixture = HttpFixture::start();
    let sandbox = Sandbox::new();
    let call = format!(
        "method = \"POST\"\nurl = \"{}\"\nheaders = {{ Authorization = \"Bearer {{{{ secrets.TOKEN }}}}\" }}\nbody = \"hello\"",
        fixture.url("/api/echo")
    );
    let policy = policy(fixture.port(), "", "[secrets.TOKEN]\nfrom_env = \"PLANRUN_TEST_CANARY\"");
    let output = run(&sandbox, &plan(&call), &policy, &[("PLANRUN_TEST_CANARY", CANARY)]);
    assert_eq!(output.code, 0, "{}", output.snapshot());
    // Sent: the server has it, and echoed it back.
    assert_eq!(fixture.requests()[0].header("authorization"), Some(format!("Bearer {CANARY}").as_str()));
    let record = call_record(&sandbox);
    assert_eq!(record["action"]["headers"], json!({"Authorization": "Bearer {{ secrets.TOKEN }}"}));
    assert_eq!(record["action"]["secrets"], json!(["TOKEN"]));
    assert_eq!(record["output_json"]["body"]["headers"]["authorization"], "Bearer [secret:TOKEN]");
    let verify = sandbox.planrun().in_sandbox().args(["verify", "t"]).run();
    assert_eq!(verify.code, 0, "{}", verify.snapshot());
    let show = sandbox.planrun().in_sandbox().args(["show", "t", "--full"]).run();
    let preview = sandbox
        .planrun()
        .in_sandbox()
        .args(["plan", "--plan", "plans/test.toml", "--policies", "policies"])
        .env("PLANRUN_TEST_CANARY", CANARY)
        .run();
    let texts = [
        ("run stdout", output.stdout.as_str()),
        ("run stderr", output.stderr.as_str()),
        ("show", show.stdout.as_str()),
        ("plan", preview.stdout.as_str()),
    ];
    assert_eq!(hits(sandbox.path(), &texts, CANARY), Vec::<(String, String)>::new());
}

#[test]
fn the_idempotency_key_header_is_stable_across_a_crash_and_resume() {
    let fixture = HttpFixture::start();
    let sandbox = Sandbox::new();
    let call = format!(
        "method = \"POST\"\nurl = \"{}\"\nbody = \"order\"\nidempotency_key = \"order-{{{{ run.id }}}}\"",
        fixture.url("/api/echo")
    );
    sandbox.write_plan(&plan(&call), &policy(fixture.port(), "", ""));
    // Dies after the request, before the receipt says `done`.
    let crashed = sandbox.test_plan().env("PLANRUN_CRASH_AT", "call:before_receipt").run();
    assert_ne!(crashed.code, 0, "{}", crashed.snapshot());
    assert_eq!(fixture.requests().len(), 1);
    let resumed =
        sandbox.planrun().in_sandbox().args(["resume", "t", "--plans", "plans", "--policies", "policies"]).run();
    assert_eq!(resumed.code, 0, "{}", resumed.snapshot());
    let requests = fixture.requests();
    assert_eq!(requests.len(), 2, "sent again under the key");
    assert_eq!(requests[0].header("idempotency-key"), Some("order-t"));
    assert_eq!(requests[1].header("idempotency-key"), Some("order-t"));

    // After the receipt is `done`, a resume reuses it: nothing is sent again.
    let sandbox = Sandbox::new();
    sandbox.write_plan(&plan(&call), &policy(fixture.port(), "", ""));
    let crashed = sandbox.test_plan().env("PLANRUN_CRASH_AT", "call:after_effect").run();
    assert_ne!(crashed.code, 0, "{}", crashed.snapshot());
    let resumed =
        sandbox.planrun().in_sandbox().args(["resume", "t", "--plans", "plans", "--policies", "policies"]).run();
    assert_eq!(resumed.code, 0, "{}", resumed.snapshot());
    assert_eq!(fixture.requests().len(), 3, "the receipt was reused");
}

/// `check` output of a plan and a policy.
pub(crate) fn check(plan: &str, policy: &str) -> Output {
    let sandbox = Sandbox::new();
    sandbox.write_plan(plan, policy);
    sandbox.planrun().in_sandbox().args(["check", "--plans", "plans", "--policies", "policies"]).run()
}

#[test]
fn the_loader_refuses_bad_http_steps_and_rules_with_their_positions() {
    let good_policy = policy(8080, "", "");
    for (call, finding) in [
        (
            "method = \"GET\"\nurl = \"http://{{ run.id }}.example/api\"",
            "error[untrusted-control-field]: the scheme, host and port of `url` must be literal\n --> plans/test.toml:8:15",
        ),
        (
            "method = \"GET\"\nurl = \"http://user:pw@127.0.0.1:8080/api\"",
            "error[invalid-url]: invalid `url`: the URL holds a user name or password",
        ),
        (
            "method = \"GET\"\nurl = \"ftp://127.0.0.1/api\"",
            "error[invalid-url]: `url` must start with `http://` or `https://`\n --> plans/test.toml:8:7",
        ),
        (
            "method = \"FETCH\"\nurl = \"http://127.0.0.1:8080/api\"",
            "error[invalid-value]: unknown `method` `FETCH`\n --> plans/test.toml:7:10",
        ),
        (
            "method = \"POST\"\nurl = \"http://127.0.0.1:8080/api\"\nbody = \"a\"\njson = { a = 1 }",
            "error[conflicting-keys]: `body` and `json` are both given",
        ),
        (
            "method = \"GET\"\nurl = \"http://127.0.0.1:8080/api\"\nheaders = { Host = \"x\" }",
            "error[invalid-value]: header `Host` is set by planrun\n --> plans/test.toml:9:13",
        ),
        ("method = \"GET\"\nurl = \"http://127.0.0.1:8080/api/{{ secrets.TOKEN }}\"", "error[secret-outside-env]"),
        (
            "method = \"GET\"\nurl = \"http://127.0.0.1:8080/api\"\nexpect = { status = [99] }",
            "error[invalid-value]: `expect.status[0]` is 99\n --> plans/test.toml:9:22",
        ),
        ("method = \"GET\"\nurl = \"http://127.0.0.1:8080/api\"\ntimeout = 3", "error[unknown-key]"),
    ] {
        let output = check(&plan(call), &good_policy);
        assert_eq!(output.code, 2, "{call}: {}", output.snapshot());
        assert!(output.stdout.contains(finding), "{call}: {}", output.snapshot());
    }
    let step = "method = \"GET\"\nurl = \"http://127.0.0.1:8080/api\"";
    for (rule_extra, finding) in [
        (
            "match = [\"http://127.0.0.1:8080/apix\"]",
            "error[rule-example-mismatch]: `match` example is not allowed by this rule\n  --> policies/default.toml:16:10",
        ),
        (
            "not_match = [\"http://127.0.0.1:8080/api/x\"]",
            "error[rule-example-mismatch]: `not_match` example is allowed by this rule",
        ),
        ("redirects = 9", "error[invalid-value]"),
        ("path_matches = \"(\"", "error[invalid-regex]"),
        ("wildcard = true", "error[unknown-key]"),
    ] {
        let output = check(&plan(step), &policy(8080, rule_extra, ""));
        assert_eq!(output.code, 2, "{rule_extra}: {}", output.snapshot());
        assert!(output.stdout.contains(finding), "{rule_extra}: {}", output.snapshot());
    }
    let output = check(&plan(step), &policy(8080, "", "deny = [\"http://x/\"]"));
    assert!(output.stdout.contains("error[invalid-value]: `http://x/` is not a host"), "{}", output.snapshot());
}

#[test]
fn policy_check_explains_a_url_decision() {
    let sandbox = Sandbox::new();
    sandbox.write("policies/default.toml", &policy(8080, "", "deny = [\"*.internal.example\"]"));
    let ask = |method: &str, url: &str| {
        sandbox
            .planrun()
            .in_sandbox()
            .args(["policy", "check", "--policies", "policies", "--method", method, "--url", url])
            .run()
    };
    let allowed = ask("GET", "http://0177.0.0.1:8080/api/items");
    assert_eq!(allowed.code, 0, "{}", allowed.snapshot());
    let value: Value = serde_json::from_str(&allowed.stdout).expect("json");
    assert_eq!(
        value,
        json!({"decision": "allow", "rule": "fixture", "reason": "the test fixture", "url": "http://127.0.0.1:8080/api/items", "method": "GET"})
    );
    let refused = ask("DELETE", "http://127.0.0.1:8080/api/items");
    assert_eq!(refused.code, 1, "{}", refused.snapshot());
    assert!(refused.stdout.contains("\"rule\": \"http.default-deny\""), "{}", refused.snapshot());
    let userinfo = ask("GET", "http://me@127.0.0.1:8080/api/items");
    assert_eq!(userinfo.code, 1, "{}", userinfo.snapshot());
    assert!(userinfo.stdout.contains("userinfo"), "{}", userinfo.snapshot());
    let bad = ask("FETCH", "http://127.0.0.1:8080/api");
    assert_eq!(bad.code, 2, "{}", bad.snapshot());
}

/// The service runs a plan with an `http` step like the command line: a
/// bridge run through the `agent` adapter sends the request and ends `done`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_service_runs_a_plan_with_an_http_step() {
    let fixture = HttpFixture::start();
    let sandbox = Sandbox::new();
    let call = format!("method = \"GET\"\nurl = \"{}\"", fixture.url("/api/items"));
    let plan = plan(&call).replace("id = \"test\"\n", "id = \"test\"\ndefault = true\n");
    sandbox.write("plans/test.toml", &plan);
    sandbox.write("policies/default.toml", &policy(fixture.port(), "", ""));
    let plans = sandbox.path().join("plans");
    let policies = sandbox.path().join("policies");
    let args = ["--plans", plans.to_str().expect("utf-8"), "--policies", policies.to_str().expect("utf-8")];
    let mut server = crate::serve_harness::Server::start_in_with(sandbox, &[], &args);
    let client = crate::serve_harness::client();
    let (status, body) = crate::serve_harness::post(
        &client,
        &server.url("/runs"),
        json!({"goal": "fetch the items", "adapter": "agent"}),
    )
    .await;
    server.terminate();
    assert_eq!(status, 201, "{body}");
    assert_eq!(body["agent_final_status"], "done", "{body}");
    let requests = fixture.requests();
    assert_eq!(requests.len(), 1);
    assert_eq!(requests[0].target, "/api/items");
}

/// `extends` merges `[http]`: rules add up with their origin, `deny` adds
/// up and wins over the parent's rule, limits take the stricter value.
#[test]
fn extends_merges_http_rules_deny_and_limits() {
    let sandbox = Sandbox::new();
    sandbox.write(
        "policies/parent.toml",
        "version = 1\n[http]\ntimeout_secs = 5\n[[http.allow]]\nid = \"api\"\nhost = \"*.example.com\"\n",
    );
    sandbox.write(
        "policies/child.toml",
        "version = 1\nextends = \"parent\"\n[http]\ndeny = [\"admin.example.com\"]\ntimeout_secs = 60\n[[http.allow]]\nid = \"hooks\"\nmethods = [\"POST\"]\nhost = \"hooks.example.org\"\n",
    );
    let ask = |method: &str, url: &str| {
        let output = sandbox
            .planrun()
            .in_sandbox()
            .args(["policy", "check", "--policies", "policies", "--policy", "child", "--method", method, "--url", url])
            .run();
        let value: Value = serde_json::from_str(&output.stdout).expect("json");
        (output.code, value)
    };
    let (code, parent_rule) = ask("GET", "https://www.example.com/x");
    assert_eq!(code, 0, "{parent_rule}");
    assert_eq!(parent_rule["rule"], "api");
    assert_eq!(parent_rule["origin"], "policies/parent.toml:4");
    let (code, child_rule) = ask("POST", "https://hooks.example.org/in");
    assert_eq!(code, 0, "{child_rule}");
    assert_eq!(child_rule["origin"], "policies/child.toml:6");
    let (code, denied) = ask("GET", "https://admin.example.com/x");
    assert_eq!(code, 1, "{denied}");
    assert_eq!(denied["rule"], "http.deny[admin.example.com]");

    // The stricter timeout (the parent's 5 s) is the merged policy's.
    let fixture = HttpFixture::start();
    sandbox.write(
        "policies/parent.toml",
        &format!(
            "version = 1\n[http]\ntimeout_secs = 1\n[[http.allow]]\nid = \"api\"\nscheme = \"http\"\nhost = \"127.0.0.1\"\nport = {}\nprivate = true\n",
            fixture.port()
        ),
    );
    let call = format!("method = \"GET\"\nurl = \"{}\"", fixture.url("/api/slow"));
    let plan = plan(&call).replace("id = \"test\"\n", "id = \"test\"\npolicy = \"child\"\n");
    sandbox.write("plans/test.toml", &plan);
    let started = std::time::Instant::now();
    let output = sandbox.test_plan().run();
    assert_eq!(output.code, 1, "{}", output.snapshot());
    assert!(started.elapsed() < std::time::Duration::from_millis(2800), "{:?}", started.elapsed());
}
