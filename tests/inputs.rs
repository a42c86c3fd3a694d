//! A plan's `[inputs.NAME]`: declarations the loader refuses with their
//! position; values from `--input`, `--inputs FILE` (JSON, YAML) and
//! scenario files, checked before anything runs (exit 2, no run, a canary
//! that stays absent); values recorded in the run and read again on
//! `resume`; a `path` input confined; `POST /runs` and `POST /controller/runs`
//! checking a request's inputs before anything exists (422).

use crate::common::Sandbox;

/// `echo` and `touch` (the canary's witness) allowed.
const POLICY: &str = r#"version = 1
[shell]
search_path = ["/usr/bin", "/bin"]
# Not about the sandbox: these steps write at the top of the workspace,
# which the sandbox refuses (docs/effects-sandbox.md).
sandbox = "none"
[shell.env]
PATH = "/usr/bin:/bin"
LANG = "C.UTF-8"
[[shell.allow]]
program = "echo"
prefix = true
[[shell.allow]]
program = "touch"
args = [[{ slot = "path" }]]
"#;

/// Touches `canary` first (so a run that starts leaves it), then echoes
/// the inputs; a paused second step when `approval`.
fn plan(approval: bool) -> String {
    let gate = if approval { "approval = \"required\"\n" } else { "" };
    format!(
        r#"version = 1
id = "test"
keywords = ["greet someone"]
default = true

[inputs.name]
type = "string"
required = true
pattern = "[a-z]+"
description = "who to greet"

[inputs.count]
type = "integer"
default = 2
min = 1
max = 5

[inputs.mode]
type = "string"
one_of = ["quick", "full"]
default = "quick"

[inputs.folder]
type = "path"
default = "notes"

[[steps]]
id = "canary"
kind = "shell"
command = ["touch", "canary"]

[[steps]]
id = "greet"
kind = "shell"
{gate}command = ["echo", "hello {{{{ inputs.name }}}} x{{{{ inputs.count }}}} {{{{ inputs.mode }}}} goal=[{{{{ run.goal }}}}]"]

[[steps]]
id = "note"
kind = "write_file"
path = "{{{{ inputs.folder }}}}/greeting.txt"
content = "{{{{ steps.greet.output_text }}}}"
"#
    )
}

#[test]
fn flags_and_files_give_typed_values_that_the_run_records_and_show_prints() {
    let sandbox = Sandbox::new();
    sandbox.write_plan(&plan(false), POLICY);
    sandbox.write("inputs.yaml", "name: ann\ncount: 3\n");
    let output = sandbox.test_plan().args(["--inputs", "inputs.yaml", "--input", "mode=full"]).run();
    assert_eq!(output.code, 0, "{}", output.snapshot());
    let greeting = std::fs::read_to_string(sandbox.workspace().join("notes/greeting.txt")).expect("greeting");
    assert_eq!(greeting, "hello ann x3 full goal=[]\n");
    let state = sandbox.state("t");
    assert_eq!(state["inputs"], serde_json::json!({"count": 3, "folder": "notes", "mode": "full", "name": "ann"}));
    let show = sandbox.planrun().in_sandbox().args(["show", "t"]).expect_code(0).run();
    assert!(show.stdout.contains("input: count = 3\n"), "{}", show.stdout);
    assert!(show.stdout.contains("input: name = \"ann\"\n"), "{}", show.stdout);
    sandbox.planrun().in_sandbox().args(["verify", "t"]).expect_code(0).run();

    // A flag wins over the file; JSON files too.
    sandbox.write("inputs.json", r#"{"name": "bob", "count": 5}"#);
    let output = sandbox
        .planrun()
        .in_sandbox()
        .args(["--plan", "plans/test.toml", "--policies", "policies", "--run-id", "t2"])
        .args(["--inputs", "inputs.json", "--input", "count=1"])
        .run();
    assert_eq!(output.code, 0, "{}", output.snapshot());
    assert_eq!(sandbox.state("t2")["inputs"]["count"], 1);
    assert_eq!(sandbox.state("t2")["inputs"]["name"], "bob");

    // `{{ run.goal }}` is the goal the run was routed by, as data.
    let output = sandbox
        .planrun()
        .in_sandbox()
        .args(["--goal", "please greet someone {{ run.id }}", "--run-id", "t3", "--input", "name=cy"])
        .run();
    assert_eq!(output.code, 0, "{}", output.snapshot());
    let greeting = std::fs::read_to_string(sandbox.workspace().join("notes/greeting.txt")).expect("greeting");
    assert_eq!(greeting, "hello cy x2 quick goal=[please greet someone {{ run.id }}]\n");
}

#[test]
fn bad_values_are_refused_before_anything_runs() {
    let sandbox = Sandbox::new();
    sandbox.write_plan(&plan(false), POLICY);
    sandbox.write("wrong-type.json", r#"{"name": "ann", "count": "3"}"#);
    sandbox.write("not-object.json", r#"["ann"]"#);
    sandbox.write("broken.json", r#"{"name": "ann", "name": "bob"}"#);
    let cases: &[(&[&str], &str)] = &[
        (&[], "input `name` is required: give it with `--input name=VALUE` (who to greet)"),
        (&["--input", "name=Ann"], "input `name` (from --input): `Ann` does not match the pattern `[a-z]+`"),
        (&["--input", "name=ann", "--input", "count=9"], "input `count` (from --input): at most 5, found 9"),
        (&["--input", "name=ann", "--input", "count=two"], "expected an integer, found `two`"),
        (&["--input", "name=ann", "--input", "mode=slow"], "`slow` is not one of `quick`, `full`"),
        (&["--input", "name=ann", "--input", "folder=../out"], "`../out` leaves the workspace"),
        (&["--input", "name=ann", "--input", "folder=/etc"], "`/etc` is absolute"),
        (&["--input", "name=ann", "--input", "colour=red"], "plan `test` has no input `colour` (from --input)"),
        (&["--inputs", "wrong-type.json"], "input `count` (from wrong-type.json): expected an integer, found a string"),
        (&["--inputs", "not-object.json"], "inputs are an object of names and values, found an array"),
        (&["--inputs", "broken.json"], "duplicate key"),
        (&["--input", "novalue"], "write `--input NAME=VALUE`"),
    ];
    for (args, expected) in cases {
        let output = sandbox.test_plan().args(*args).run();
        assert_eq!(output.code, 2, "{args:?}: {}", output.snapshot());
        assert!(output.stderr.contains(expected), "{args:?}: {}", output.stderr);
        assert!(!sandbox.workspace().join("canary").exists(), "{args:?}: a step ran");
        assert!(!sandbox.workspace().join("runs/t").exists(), "{args:?}: a run was created");
    }
}

#[test]
fn a_resumed_run_renders_the_values_it_recorded() {
    let sandbox = Sandbox::new();
    sandbox.write_plan(&plan(true), POLICY);
    let paused = sandbox.test_plan().args(["--input", "name=cy"]).run();
    assert_eq!(paused.code, 3, "{}", paused.snapshot());
    // The approval view shows what the run was given beside the action.
    assert!(paused.stderr.contains("  input name = \"cy\""), "{}", paused.stderr);
    assert!(paused.stderr.contains("  input count = 2"), "{}", paused.stderr);
    let show = sandbox.planrun().args(["show", "t"]).run();
    assert!(show.stdout.contains("input: name = \"cy\""), "{}", show.stdout);
    let state = sandbox.state("t");
    let fingerprint = state["pending_action"]["fingerprint"].as_str().expect("fingerprint").to_string();
    assert!(
        state["pending_action"]["action"]["argv"].to_string().contains("hello cy x2 quick"),
        "the frozen action shows the rendered inputs: {}",
        state["pending_action"]
    );
    sandbox.planrun().in_sandbox().args(["approve", "t", "--fingerprint", &fingerprint]).expect_code(0).run();
    let resumed = sandbox.planrun().in_sandbox().args(["resume", "t"]).run();
    assert_eq!(resumed.code, 0, "{}", resumed.snapshot());
    let greeting = std::fs::read_to_string(sandbox.workspace().join("notes/greeting.txt")).expect("greeting");
    assert_eq!(greeting, "hello cy x2 quick goal=[]\n");
}

#[test]
fn the_loader_refuses_bad_declarations_with_their_position() {
    let sandbox = Sandbox::new();
    let cases: &[(&str, &str)] = &[
        ("[inputs.a]\ndescription = \"x\"\n", "plans/test.toml:4:1"),
        ("[inputs.a]\ntype = \"text\"\n", "unknown input type `text`"),
        ("[inputs.a]\ntype = \"integer\"\ndefault = \"3\"\n", "`default` of input `a` does not fit it"),
        ("[inputs.a]\ntype = \"integer\"\nmin = 5\nmax = 1\n", "`min` (5) is above `max` (1)"),
        ("[inputs.a]\ntype = \"boolean\"\npattern = \"x\"\n", "`pattern` does not apply to a boolean input"),
        ("[inputs.a]\ntype = \"string\"\nrequired = true\ndefault = \"x\"\n", "is `required` and has a `default`"),
        ("[inputs.a]\ntype = \"string\"\none_of = [\"x\", 2]\n", "`one_of[1]` of input `a` does not fit it"),
        ("[inputs.a]\ntype = \"string\"\npattern = \"(\"\n", "invalid regex"),
        ("[inputs.a]\ntype = \"string\"\nmax_lenght = 3\n", "did you mean `max_length`"),
        (
            "[inputs.a]\ntype = \"string\"\n[[steps]]\nid = \"w\"\nkind = \"read_file\"\npath = \"{{ inputs.a }}\"\n",
            "only a `path` input may fill a path",
        ),
        (
            "[[steps]]\nid = \"w\"\nkind = \"finish\"\nmessage = \"{{ inputs.nme }}\"\n[inputs.name]\ntype = \"string\"\n",
            "did you mean `name`?",
        ),
    ];
    for (text, expected) in cases {
        let steps = if text.contains("[[steps]]") { "" } else { "[[steps]]\nid = \"s\"\nkind = \"finish\"\n" };
        sandbox.write("plans/test.toml", &format!("version = 1\nid = \"test\"\n\n{text}{steps}"));
        let output = sandbox.planrun().in_sandbox().args(["check", "plans/test.toml"]).run();
        assert_eq!(output.code, 2, "{text}: {}", output.snapshot());
        assert!(output.stdout.contains(expected) || output.stderr.contains(expected), "{text}: {}", output.snapshot());
    }
}

#[test]
fn plan_lists_the_inputs_and_a_scenario_gives_them() {
    let sandbox = Sandbox::new();
    sandbox.write_plan(&plan(false), POLICY);
    let preview =
        sandbox.planrun().in_sandbox().args(["plan", "--plan", "plans/test.toml", "--policies", "policies"]).run();
    assert_eq!(preview.code, 0, "{}", preview.snapshot());
    assert!(
        preview.stdout.contains("input: name (string, required, matching /[a-z]+/): who to greet\n"),
        "{}",
        preview.stdout
    );
    assert!(preview.stdout.contains("input: count (integer, default 2, 1 to 5)\n"), "{}", preview.stdout);
    sandbox.write(
        "plans/test.scenarios.toml",
        "version = 1\n[[scenarios]]\nname = \"greet\"\nplan = \"plans/test.toml\"\nrun_id = \"g\"\nexpect_code = 0\n\
         expect_status = \"done\"\nrecords = [\"state.json\"]\ninputs = { name = \"dee\", count = 4 }\n",
    );
    let test = sandbox
        .planrun()
        .in_sandbox()
        .args(["test", "plans/test.scenarios.toml", "--accept", "--snapshots", "snaps", "--policies", "policies"])
        .run();
    assert_eq!(test.code, 0, "{}", test.snapshot());
    let state =
        std::fs::read_to_string(sandbox.path().join("snaps/runs/greet@state.json.snap")).expect("state snapshot");
    assert!(state.contains("\"name\": \"dee\"") && state.contains("\"count\": 4"), "{state}");
}

/// The service: `POST /runs` gives `inputs` to the agent run, which records
/// them; inputs the routed plan refuses are answered 422 `invalid_inputs`
/// before any run exists (no bridge run, no agent run, the canary absent).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_service_checks_a_requests_inputs_before_it_accepts_the_run() {
    use crate::serve_harness::{client, post};
    use serde_json::json;

    let server = greeting_server();
    let client = client();
    let url = server.url("/runs");
    let refused = [
        (json!({"goal": "greet someone"}), "input `name` is required"),
        (
            json!({"goal": "greet someone", "inputs": {"name": "ann", "count": "3"}}),
            "expected an integer, found a string",
        ),
        (json!({"goal": "greet someone", "inputs": {"name": "ann", "folder": "../up"}}), "leaves the workspace"),
        (json!({"goal": "greet someone", "inputs": {"name": "ann", "colour": 1}}), "has no input `colour`"),
        (json!({"goal": "greet someone", "inputs": ["ann"]}), "found an array"),
        (json!({"goal": "greet someone", "inputs": null}), "found null"),
        (json!({"goal": "greet someone", "adapter": "stub", "inputs": {"name": "ann"}}), "`agent` adapter only"),
    ];
    for (body, expected) in refused {
        let (status, answer) = post(&client, &url, body.clone()).await;
        assert_eq!(status, 422, "{body}: {answer}");
        assert_eq!(answer["error"]["code"], "invalid_inputs", "{body}: {answer}");
        let message = answer["error"]["message"].as_str().unwrap_or_default();
        assert!(message.contains(expected), "{body}: {message}");
    }
    assert!(!server.exists("bridge/runs"), "no bridge run was created");
    assert!(!server.exists("canary"), "no step ran");

    let body = json!({"goal": "greet someone", "inputs": {"name": "ann", "count": 4}});
    let (status, answer) = post(&client, &url, body).await;
    assert_eq!(status, 201, "{answer}");
    assert_eq!(answer["status"], "done", "{answer}");
    assert_eq!(answer["inputs"], json!({"name": "ann", "count": 4}), "{answer}");
    let agent_run = answer["agent_run_id"].as_str().expect("agent run id");
    assert_eq!(
        server.sandbox.state(agent_run)["inputs"],
        json!({"count": 4, "folder": "notes", "mode": "quick", "name": "ann"}),
        "the agent run records the inputs, defaults applied"
    );
    let greeting = std::fs::read_to_string(server.sandbox.workspace().join("notes/greeting.txt")).expect("greeting");
    assert_eq!(greeting, "hello ann x4 quick goal=[greet someone]\n");
}

/// `POST /controller/runs` checks `inputs` against the goal's plan before
/// the controller run exists (422, nothing created, the canary absent), and
/// gives them to the runs of that plan.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_controller_checks_its_inputs_and_gives_them_to_the_goals_plan() {
    use crate::serve_harness::{client, post};
    use serde_json::json;

    let server = greeting_server();
    let client = client();
    let url = server.url("/controller/runs");
    for (body, expected) in [
        (json!({"goal": "greet someone"}), "input `name` is required"),
        (json!({"goal": "greet someone", "inputs": {"name": "Ann!"}}), "pattern"),
        (json!({"goal": "greet someone", "inputs": null}), "found null"),
    ] {
        let (status, answer) = post(&client, &url, body.clone()).await;
        assert_eq!(status, 422, "{body}: {answer}");
        assert_eq!(answer["error"]["code"], "invalid_inputs", "{body}: {answer}");
        let message = answer["error"]["message"].as_str().unwrap_or_default();
        assert!(message.contains(expected), "{body}: {message}");
    }
    assert!(!server.exists("bridge/runs"), "no controller or bridge run was created");
    assert!(!server.exists("canary"), "no step ran");

    let (status, answer) = post(&client, &url, json!({"goal": "greet someone", "inputs": {"name": "bo"}})).await;
    assert_eq!(status, 201, "{answer}");
    assert_eq!(answer["final_status"], "done", "{answer}");
    assert_eq!(answer["inputs"], json!({"name": "bo"}), "{answer}");
    let greeting = std::fs::read_to_string(server.sandbox.workspace().join("notes/greeting.txt")).expect("greeting");
    assert_eq!(greeting, "hello bo x2 quick goal=[greet someone]\n");
}

/// `planrun serve` over a sandbox holding [`plan`] (no approval) and [`POLICY`].
fn greeting_server() -> crate::serve_harness::Server {
    let sandbox = Sandbox::new();
    sandbox.write("plans/test.toml", &plan(false));
    sandbox.write("policies/default.toml", POLICY);
    let plans = sandbox.path().join("plans");
    let policies = sandbox.path().join("policies");
    let args = ["--plans", plans.to_str().expect("utf-8"), "--policies", policies.to_str().expect("utf-8")];
    crate::serve_harness::Server::start_in_with(sandbox, &[], &args)
}
