//! Secrets: the policy's `[secrets.NAME]`, a shell step's `env`, and the
//! canary — a step that prints its environment, echoes the secret to
//! stdout and stderr (raw and base64) and fails with it in its message:
//! no byte planrun writes, prints or answers holds the value in any of its
//! forms, and `verify` passes.

use std::fs;
use std::io::Read;
use std::path::Path;

use serde_json::{Value, json};

use crate::common::{Output, Sandbox};
use crate::serve_harness::{Server, client, post};

/// The canary: long enough to have complete base64 groups at every
/// alignment, with characters JSON and URLs escape.
pub(crate) const CANARY: &str = "canary-Zq7 \"sec\"ret/+&value";

const POLICY: &str = r#"version = 1
[shell]
search_path = ["/usr/bin", "/bin"]
env_allow = ["API_TOKEN", "OTHER"]
[shell.env]
PATH = "/usr/bin:/bin"
LANG = "C.UTF-8"
[[shell.allow]]
program = "env"
[[shell.allow]]
program = "sh"
args = [["-c", { regex = ".*" }]]
[retry]
execution_error = 1
[secrets.TOKEN]
from_env = "PLANRUN_TEST_CANARY"
description = "the canary"
"#;

/// Prints its environment, echoes the secret (raw, base64) to stdout and
/// stderr, and fails with it as its first stderr line.
const CANARY_PLAN: &str = r#"version = 1
id = "test"
default = true
expected_status = "failed"

[[steps]]
id = "print-env"
kind = "shell"
command = ["env"]
env = { API_TOKEN = "{{ secrets.TOKEN }}" }

[[steps]]
id = "leak"
kind = "shell"
command = ["sh", "-c", "echo \"$API_TOKEN\"; printf %s \"$API_TOKEN\" | base64 -w0; echo; echo \"token $API_TOKEN\" >&2; printf %s \"$API_TOKEN\" | base64 -w0 >&2; exit 3"]
env = { API_TOKEN = "{{ secrets.TOKEN }}" }

[[steps]]
id = "done"
kind = "finish"
"#;

/// The forms of `value` nothing may hold.
pub(crate) fn forms(value: &str) -> Vec<String> {
    let json = serde_json::to_string(value).expect("json");
    let mut url = String::new();
    for byte in value.bytes() {
        match byte {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' => url.push(char::from(byte)),
            _ => url.push_str(&format!("%{byte:02X}")),
        }
    }
    let base64 = |alphabet: &[u8]| {
        let bytes = value.as_bytes();
        let mut out = String::new();
        for chunk in bytes.chunks(3) {
            let bits = (u32::from(chunk[0]) << 16)
                | (u32::from(chunk.get(1).copied().unwrap_or(0)) << 8)
                | u32::from(chunk.get(2).copied().unwrap_or(0));
            for index in 0..=chunk.len() {
                out.push(char::from(alphabet[((bits >> (18 - 6 * index)) & 0x3f) as usize]));
            }
        }
        out
    };
    vec![
        value.to_string(),
        json[1..json.len() - 1].to_string(),
        url.clone(),
        url.to_lowercase(),
        base64(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"),
        base64(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"),
    ]
}

/// Every file under `root` (and the given texts) that holds a form of
/// `value`: `(where, form)`.
pub(crate) fn hits(root: &Path, texts: &[(&str, &str)], value: &str) -> Vec<(String, String)> {
    let forms = forms(value);
    let mut found = Vec::new();
    let mut check = |label: String, bytes: &[u8]| {
        for form in &forms {
            if bytes.windows(form.len()).any(|window| window == form.as_bytes()) {
                found.push((label.clone(), form.clone()));
            }
        }
    };
    let mut stack = vec![root.to_path_buf()];
    let mut files = 0;
    while let Some(path) = stack.pop() {
        if path.is_dir() {
            for entry in fs::read_dir(&path).expect("read dir") {
                stack.push(entry.expect("entry").path());
            }
        } else if let Ok(bytes) = fs::read(&path) {
            files += 1;
            check(path.display().to_string(), &bytes);
        }
    }
    assert!(files >= 2, "searched {files} files under {}", root.display());
    for (label, text) in texts {
        check(label.to_string(), text.as_bytes());
    }
    found
}

fn run_canary(sandbox: &Sandbox) -> Output {
    sandbox.write_plan(CANARY_PLAN, POLICY);
    sandbox.test_plan().env("PLANRUN_TEST_CANARY", CANARY).run()
}

#[test]
fn the_canary_reaches_the_program_and_no_record_or_output_of_the_command_line() {
    let sandbox = Sandbox::new();
    let output = run_canary(&sandbox);
    assert_eq!(output.code, 1, "{}", output.snapshot());
    let history = sandbox.history("t");
    // The program got the value: it printed it, and planrun replaced it.
    assert!(history[0]["output_text"].as_str().expect("text").contains("API_TOKEN=[secret:TOKEN]\n"), "{history:?}");
    assert_eq!(history[1]["error"], "`sh` exited with status 3: token [secret:TOKEN]");
    assert!(history[1]["stderr_text"].as_str().expect("stderr").starts_with("token [secret:TOKEN]\n[secret:TOKEN]"));
    assert!(history[1]["output_text"].as_str().expect("stdout").starts_with("[secret:TOKEN]\n[secret:TOKEN]"));
    // The record names the secret and keeps the env as written.
    assert_eq!(history[1]["action"]["secrets"], json!(["TOKEN"]));
    assert_eq!(history[1]["action"]["env"], json!({ "API_TOKEN": "{{ secrets.TOKEN }}" }));

    let verify = sandbox.planrun().in_sandbox().args(["verify", "t"]).run();
    assert_eq!(verify.code, 0, "{}", verify.snapshot());
    let show = sandbox.planrun().in_sandbox().args(["show", "t", "--full"]).run();
    let json = sandbox.planrun().in_sandbox().args(["show", "t", "--json"]).run();
    let runs = sandbox.planrun().in_sandbox().args(["runs", "--json"]).run();
    let preview = sandbox
        .planrun()
        .in_sandbox()
        .args(["plan", "--plan", "plans/test.toml", "--policies", "policies"])
        .env("PLANRUN_TEST_CANARY", CANARY)
        .run();
    assert!(preview.stdout.contains("env       API_TOKEN=\"⟨secrets.TOKEN⟩\""), "{}", preview.snapshot());
    let texts = [
        ("plan", preview.stdout.as_str()),
        ("run stdout", output.stdout.as_str()),
        ("run stderr", output.stderr.as_str()),
        ("show", show.stdout.as_str()),
        ("show --json", json.stdout.as_str()),
        ("runs --json", runs.stdout.as_str()),
        ("verify", verify.stdout.as_str()),
    ];
    assert_eq!(hits(sandbox.path(), &texts, CANARY), Vec::<(String, String)>::new());
}

#[test]
fn a_missing_secret_stops_the_run_before_anything_with_exit_2_naming_the_variable() {
    let sandbox = Sandbox::new();
    let plan = r#"version = 1
id = "test"

[[steps]]
id = "canary"
kind = "shell"
command = ["sh", "-c", "echo ran > canary.txt"]
env = { API_TOKEN = "{{ secrets.TOKEN }}", OTHER = "{{ secrets.SECOND }}" }
"#;
    let policy = format!("{POLICY}[secrets.SECOND]\nfrom_env = \"PLANRUN_TEST_SECOND\"\n");
    sandbox.write_plan(plan, &policy);
    let output = sandbox.test_plan().env("PLANRUN_TEST_SECOND", CANARY).run();
    assert_eq!(output.code, 2, "{}", output.snapshot());
    assert!(
        output.stderr.contains(
            "secret `TOKEN` is not set: the policy reads it from the environment variable `PLANRUN_TEST_CANARY`"
        ),
        "{}",
        output.stderr
    );
    assert!(!sandbox.workspace().join("canary.txt").exists(), "the step ran");
    assert!(!sandbox.workspace().join("runs").exists(), "a run was created");
    assert_eq!(hits(sandbox.path(), &[("stdout", &output.stdout), ("stderr", &output.stderr)], CANARY), vec![]);
}

#[test]
fn a_secret_from_a_file_is_read_relative_to_the_policy_with_its_newline_trimmed() {
    let sandbox = Sandbox::new();
    sandbox.write("policies/token.txt", &format!("{CANARY}\n"));
    let policy = POLICY.replace("from_env = \"PLANRUN_TEST_CANARY\"", "from_file = \"token.txt\"");
    let plan = r#"version = 1
id = "test"

[[steps]]
id = "check"
kind = "shell"
command = ["sh", "-c", "test \"$API_TOKEN\" = 'canary-Zq7 \"sec\"ret/+&value' && echo same"]
env = { API_TOKEN = "{{ secrets.TOKEN }}" }
"#;
    let output = sandbox.run_plan(plan, &policy);
    assert_eq!(output.code, 0, "{}", output.snapshot());
    assert_eq!(sandbox.history("t")[0]["output_text"], "same\n");
}

#[test]
fn the_policy_env_wins_over_a_step_env_of_the_same_name() {
    let sandbox = Sandbox::new();
    let policy = POLICY.replace("env_allow = [\"API_TOKEN\", \"OTHER\"]", "env_allow = [\"LANG\", \"OTHER\"]");
    let plan = r#"version = 1
id = "test"

[[steps]]
id = "print"
kind = "shell"
command = ["sh", "-c", "echo \"$LANG $OTHER\""]
env = { LANG = "fr_FR.UTF-8", OTHER = "{{ run.id }}" }
"#;
    let output = sandbox.run_plan(plan, &policy);
    assert_eq!(output.code, 0, "{}", output.snapshot());
    assert_eq!(sandbox.history("t")[0]["output_text"], "C.UTF-8 t\n");
}

/// `check` of a plan, its output.
fn check(plan: &str, policy: &str) -> Output {
    let sandbox = Sandbox::new();
    sandbox.write_plan(plan, policy);
    sandbox.planrun().in_sandbox().args(["check", "--plans", "plans", "--policies", "policies"]).run()
}

fn step(lines: &str) -> String {
    format!("version = 1\nid = \"test\"\n\n[[steps]]\nid = \"s\"\n{lines}\n")
}

#[test]
fn the_loader_refuses_a_secret_anywhere_but_a_step_env() {
    let cases = [
        ("kind = \"shell\"\ncommand = [\"sh\", \"-c\", \"{{ secrets.TOKEN }}\"]", "7:25"),
        ("kind = \"write_file\"\npath = \"out.txt\"\ncontent = \"key {{ secrets.TOKEN }}\"", "8:16"),
        ("kind = \"finish\"\nmessage = \"{{ secrets.TOKEN }}\"", "7:12"),
        ("kind = \"finish\"\nwhen = { value = \"{{ secrets.TOKEN }}\", equals = \"x\" }", "7:19"),
    ];
    for (lines, at) in cases {
        let output = check(&step(lines), POLICY);
        assert_eq!(output.code, 2, "{lines}: {}", output.snapshot());
        assert!(output.stdout.contains("error[secret-outside-env]"), "{lines}: {}", output.snapshot());
        assert!(output.stdout.contains(&format!("plans/test.toml:{at}")), "{lines}: {}", output.snapshot());
    }
    // A path: refused as a path that may hold only `{{ run.id }}`.
    let output = check(&step("kind = \"read_file\"\npath = \"{{ secrets.TOKEN }}\""), POLICY);
    assert_eq!(output.code, 2, "{}", output.snapshot());
}

#[test]
fn the_loader_refuses_an_unknown_secret_and_an_env_name_the_policy_does_not_allow() {
    let unknown =
        check(&step("kind = \"shell\"\ncommand = [\"env\"]\nenv = { API_TOKEN = \"{{ secrets.TOKN }}\" }"), POLICY);
    assert_eq!(unknown.code, 2, "{}", unknown.snapshot());
    assert!(unknown.stdout.contains("error[unknown-secret]"), "{}", unknown.snapshot());
    assert!(unknown.stdout.contains("plans/test.toml:8:21"), "{}", unknown.snapshot());
    assert!(unknown.stdout.contains("did you mean `TOKEN`?"), "{}", unknown.snapshot());

    let not_allowed = check(&step("kind = \"shell\"\ncommand = [\"env\"]\nenv = { API_TOKN = \"x\" }"), POLICY);
    assert_eq!(not_allowed.code, 2, "{}", not_allowed.snapshot());
    assert!(not_allowed.stdout.contains("error[env-not-allowed]"), "{}", not_allowed.snapshot());
    assert!(not_allowed.stdout.contains("plans/test.toml:8:9"), "{}", not_allowed.snapshot());
    assert!(not_allowed.stdout.contains("did you mean `API_TOKEN`?"), "{}", not_allowed.snapshot());

    let on_finish = check(&step("kind = \"finish\"\nenv = { OTHER = \"x\" }"), POLICY);
    assert_eq!(on_finish.code, 2, "{}", on_finish.snapshot());
    assert!(on_finish.stdout.contains("error[unknown-key]: unknown key `env`"), "{}", on_finish.snapshot());
}

#[test]
fn the_loader_refuses_a_secret_without_exactly_one_source() {
    for (table, message) in [
        ("[secrets.BOTH]\nfrom_env = \"A\"\nfrom_file = \"b\"\n", "`secrets.BOTH` needs exactly one of"),
        ("[secrets.NONE]\ndescription = \"x\"\n", "`secrets.NONE` needs exactly one of"),
        ("[secrets.BAD]\nfrom_env = \"1-A\"\n", "`1-A` is not a valid variable name in `from_env`"),
        ("[secrets.TYPO]\nfrom_envv = \"A\"\n", "from_envv"),
    ] {
        let output = check(&step("kind = \"finish\""), &format!("{POLICY}{table}"));
        assert_eq!(output.code, 2, "{table}: {}", output.snapshot());
        assert!(output.stdout.contains(message), "{table}: {}", output.snapshot());
        assert!(output.stdout.contains("policies/default.toml:"), "{table}: {}", output.snapshot());
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_canary_reaches_no_record_answer_or_log_of_the_service() {
    let sandbox = Sandbox::new();
    sandbox.write("plans/test.toml", CANARY_PLAN);
    sandbox.write("policies/default.toml", POLICY);
    let plans = sandbox.path().join("plans");
    let policies = sandbox.path().join("policies");
    let args = ["--plans", plans.to_str().expect("utf-8"), "--policies", policies.to_str().expect("utf-8")];
    let mut server = Server::start_in_with(sandbox, &[("PLANRUN_TEST_CANARY", CANARY)], &args);
    let client = client();
    let (status, body) = post(&client, &server.url("/runs"), json!({"goal": "leak it", "adapter": "agent"})).await;
    assert_eq!(status, 201, "{body}");
    assert_eq!(body["agent_final_status"], "failed", "{body}");
    let run_id = body["run_id"].as_str().expect("run id").to_string();
    let agent = body["agent_run_id"].as_str().expect("agent run").to_string();
    let (_, shown) = crate::serve_harness::get_json(&client, &server.url(&format!("/runs/{run_id}"))).await;
    let (_, listed) = crate::serve_harness::get_json(&client, &server.url("/runs")).await;
    server.terminate();
    let (mut stdout, mut stderr) = (String::new(), String::new());
    if let Some(mut pipe) = server.child.stdout.take() {
        pipe.read_to_string(&mut stdout).expect("stdout");
    }
    if let Some(mut pipe) = server.child.stderr.take() {
        pipe.read_to_string(&mut stderr).expect("stderr");
    }
    let history = fs::read_to_string(server.sandbox.workspace().join("runs").join(&agent).join("history.jsonl"))
        .expect("agent history");
    assert!(history.contains("API_TOKEN=[secret:TOKEN]"), "{history}");
    let answers = [body.to_string(), shown.to_string(), listed.to_string()];
    let texts = [
        ("POST /runs", answers[0].as_str()),
        ("GET /runs/{id}", answers[1].as_str()),
        ("GET /runs", answers[2].as_str()),
        ("serve stdout", stdout.as_str()),
        ("serve stderr", stderr.as_str()),
    ];
    assert_eq!(hits(server.sandbox.path(), &texts, CANARY), Vec::<(String, String)>::new());
    let verify = server.sandbox.planrun().in_sandbox().args(["verify", &agent]).run();
    assert_eq!(verify.code, 0, "{}", verify.snapshot());
    let _: Value = shown;
}

/// Without the secret the agent run never starts: the bridge run ends
/// `failed` with the CLI's exit code 2 and a message naming the variable.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_service_answers_a_missing_secret_with_a_failed_run_and_exit_code_2() {
    let sandbox = Sandbox::new();
    sandbox.write("plans/test.toml", CANARY_PLAN);
    sandbox.write("policies/default.toml", POLICY);
    let plans = sandbox.path().join("plans");
    let policies = sandbox.path().join("policies");
    let args = ["--plans", plans.to_str().expect("utf-8"), "--policies", policies.to_str().expect("utf-8")];
    let server = Server::start_in_with(sandbox, &[], &args);
    let (status, body) = post(&client(), &server.url("/runs"), json!({"goal": "leak it", "adapter": "agent"})).await;
    assert_eq!((status, &body["status"], &body["exit_code"]), (201, &json!("failed"), &json!(2)), "{body}");
    let error = body["error"].as_str().expect("error");
    assert!(error.contains("secret `TOKEN` is not set") && error.contains("`PLANRUN_TEST_CANARY`"), "{body}");
    assert!(!server.exists("runs/agent-br-0001"), "the agent run was created");
}

/// The redaction benchmark (`tests/bench/redact.sh`): MB/s of
/// [`planrun::redact::Redactor::text`] with 5 secrets over 1 MiB and 4 MiB
/// of output holding a secret every 64 KiB, best of 5. Linear: the 4 MiB
/// rate stays within a factor 2 of the 1 MiB one.
#[test]
#[ignore = "benchmark: run by tests/bench/redact.sh"]
fn redaction_bench() {
    use planrun::redact::Redactor;
    let secrets: Vec<(String, String)> =
        (0..5).map(|index| (format!("SECRET_{index}"), format!("value-{index}-{CANARY}-{index}"))).collect();
    let redactor = Redactor::new(secrets.iter().map(|(name, value)| (name.as_str(), value.as_str())));
    let mut rates = Vec::new();
    for mib in [1usize, 4] {
        let size = mib << 20;
        let mut text = String::with_capacity(size + 4096);
        let mut index = 0;
        while text.len() < size {
            text.push_str("line of ordinary program output, nothing to see here 0123456789\n");
            if text.len() % 65536 < 64 {
                text.push_str(&secrets[index % 5].1);
                text.push('\n');
                index += 1;
            }
        }
        let mut best = f64::MAX;
        for _ in 0..5 {
            let started = std::time::Instant::now();
            let out = redactor.text(&text);
            best = best.min(started.elapsed().as_secs_f64());
            assert!(out.contains("[secret:SECRET_0]") && !out.contains(CANARY));
        }
        let rate = text.len() as f64 / best / 1e6;
        println!("redact: {mib} MiB with 5 secrets: {:.2} ms, {rate:.0} MB/s", best * 1e3);
        rates.push(rate);
    }
    assert!(rates[1] > rates[0] / 2.0, "not linear: {rates:?}");
}

/// The canary on the PostgreSQL store: no row of any table of the
/// schema holds a form of the value, and `verify` passes.
#[cfg(feature = "postgres")]
#[test]
fn pg_the_canary_reaches_no_database_row() {
    use crate::pg_store::Schema;
    let sandbox = Sandbox::new();
    let Some(schema) = Schema::migrated("pg_the_canary_reaches_no_database_row", &sandbox) else {
        return;
    };
    sandbox.write_plan(CANARY_PLAN, POLICY);
    let output = sandbox.test_plan().args(["--store", schema.url.as_str()]).env("PLANRUN_TEST_CANARY", CANARY).run();
    assert_eq!(output.code, 1, "{}", output.snapshot());
    let tables = schema.sql("SELECT table_name FROM information_schema.tables WHERE table_schema = current_schema()");
    let mut rows = String::new();
    for table in tables.lines() {
        rows.push_str(&schema.sql(&format!("SELECT t::text FROM {table} t")));
        rows.push('\n');
    }
    assert!(rows.contains("API_TOKEN=[secret:TOKEN]"), "the step's output is in the rows");
    let verify = sandbox.planrun().in_sandbox().args(["verify", "t", "--store", schema.url.as_str()]).run();
    assert_eq!(verify.code, 0, "{}", verify.snapshot());
    let texts = [("rows", rows.as_str()), ("stdout", output.stdout.as_str()), ("stderr", output.stderr.as_str())];
    assert_eq!(hits(sandbox.path(), &texts, CANARY), Vec::<(String, String)>::new());
}

/// The canary as a scenario of `planrun test`, its fake value given in the
/// scenario's `env`: the snapshots it writes and its output hold
/// `[secret:TOKEN]`, never a form of the value.
#[test]
fn a_scenario_gives_a_fake_secret_and_its_snapshots_hold_none_of_it() {
    let sandbox = Sandbox::new();
    sandbox.write_plan(CANARY_PLAN, POLICY);
    sandbox.write(
        "plans/test.scenarios.toml",
        &format!(
            "version = 1\n\n[[scenarios]]\nname = \"canary\"\nplan = \"plans/test.toml\"\nrun_id = \"t\"\n\
             expect_code = 1\nexpect_status = \"failed\"\nenv = {{ PLANRUN_TEST_CANARY = {CANARY:?} }}\n"
        ),
    );
    let output = sandbox.planrun().in_sandbox().args(["test", "--accept"]).env("CI", "false").run();
    assert_eq!(output.code, 0, "{}", output.snapshot());
    let snapshots = sandbox.path().join("snapshots");
    let history = fs::read_to_string(snapshots.join("runs/canary@history.jsonl.snap")).expect("history snapshot");
    assert!(history.contains("API_TOKEN=[secret:TOKEN]"), "{history}");
    let again = sandbox.planrun().in_sandbox().args(["test"]).env("CI", "true").run();
    assert_eq!(again.code, 0, "{}", again.snapshot());
    let texts = [("test --accept", output.stdout.as_str()), ("test", again.stdout.as_str())];
    assert_eq!(hits(&snapshots, &texts, CANARY), Vec::<(String, String)>::new());
}

/// A paused run keeps no value: `resume` reads the secret again — refused
/// (exit 2, the step not run) while it is unset, run with it once set.
#[test]
fn a_resumed_run_reads_its_secret_again() {
    let sandbox = Sandbox::new();
    let plan = r#"version = 1
id = "test"

[[steps]]
id = "gated"
kind = "shell"
approval = "required"
command = ["sh", "-c", "printf %s \"$API_TOKEN\" > got.txt"]
env = { API_TOKEN = "{{ secrets.TOKEN }}" }

[[steps]]
id = "end"
kind = "finish"
"#;
    sandbox.write_plan(plan, POLICY);
    let paused = sandbox.test_plan().env("PLANRUN_TEST_CANARY", CANARY).run();
    assert_eq!(paused.code, 3, "{}", paused.snapshot());
    sandbox.planrun().in_sandbox().args(["approve", "t"]).expect_code(0).run();
    let refused = sandbox.planrun().in_sandbox().args(["resume", "t"]).run();
    assert_eq!(refused.code, 2, "{}", refused.snapshot());
    assert!(refused.stderr.contains("`PLANRUN_TEST_CANARY`"), "{}", refused.snapshot());
    assert!(!sandbox.workspace().join("got.txt").exists(), "the step ran without its secret");
    let resumed = sandbox.planrun().in_sandbox().args(["resume", "t"]).env("PLANRUN_TEST_CANARY", CANARY).run();
    assert_eq!(resumed.code, 0, "{}", resumed.snapshot());
    assert_eq!(fs::read_to_string(sandbox.workspace().join("got.txt")).expect("got.txt"), CANARY);
    let verify = sandbox.planrun().in_sandbox().args(["verify", "t"]).run();
    assert_eq!(verify.code, 0, "{}", verify.snapshot());
    let texts = [("paused", paused.stderr.as_str()), ("resumed", resumed.stderr.as_str())];
    let records = sandbox.workspace().join("runs");
    assert_eq!(hits(&records, &texts, CANARY), Vec::<(String, String)>::new());
}
