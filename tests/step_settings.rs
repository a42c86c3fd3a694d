//! A shell step's own settings: `cwd` (an existing workspace folder,
//! confined like a file path) and `stdin` (a template, capped by the
//! policy's `budget.max_output_bytes`, refused before the program starts).

use crate::common::Sandbox;

/// `pwd`, `cat` and `sh -c …` allowed; one attempt per step.
const POLICY: &str = r#"version = 1
[shell]
search_path = ["/usr/bin", "/bin"]
[shell.env]
PATH = "/usr/bin:/bin"
[[shell.allow]]
program = "pwd"
[[shell.allow]]
program = "cat"
[[shell.allow]]
program = "sh"
args = [["-c", { regex = ".*" }]]
[retry]
execution_error = 1
file_error = 1
[budget]
step_timeout_secs = 20
max_output_bytes = 64
"#;

fn plan(steps: &str) -> String {
    format!("version = 1\nid = \"test\"\n\n{steps}")
}

/// A shell step with extra keys (`cwd = …`, `stdin = …`), each a TOML line.
fn shell(id: &str, command: &str, extra: &[&str]) -> String {
    format!("[[steps]]\nid = \"{id}\"\nkind = \"shell\"\ncommand = {command}\n{}\n", extra.join("\n"))
}

#[test]
fn a_step_runs_in_its_cwd_and_records_it() {
    let sandbox = Sandbox::new();
    std::fs::create_dir_all(sandbox.workspace().join("sub/dir")).expect("folder");
    let steps = [shell("here", "[\"pwd\"]", &["cwd = \"sub/./dir\""]), shell("root", "[\"pwd\"]", &[])];
    let output = sandbox.run_plan(&plan(&steps.concat()), POLICY);
    assert_eq!(output.code, 0, "{}", output.snapshot());
    let history = sandbox.history("t");
    assert_eq!(history[0]["output_text"], "[WORKSPACE]/sub/dir\n", "{}", history[0]);
    assert_eq!(history[1]["output_text"], "[WORKSPACE]\n", "{}", history[1]);
    let audit = sandbox.record("t", "audit.jsonl");
    assert!(audit.contains(r#""cwd":"sub/./dir""#), "the action records its cwd: {audit}");
}

#[test]
fn a_cwd_built_from_the_run_id_is_used() {
    let sandbox = Sandbox::new();
    std::fs::create_dir_all(sandbox.workspace().join("out/t")).expect("folder");
    let output = sandbox.run_plan(&plan(&shell("here", "[\"pwd\"]", &["cwd = \"out/{{ run.id }}\""])), POLICY);
    assert_eq!(output.code, 0, "{}", output.snapshot());
    assert_eq!(sandbox.history("t")[0]["output_text"], "[WORKSPACE]/out/t\n");
}

#[test]
fn a_cwd_from_a_path_input_is_confined_and_a_string_input_is_refused() {
    let inputs = |ty: &str| format!("[inputs.dir]\ntype = \"{ty}\"\ndefault = \"sub\"\n\n");
    let step = shell("here", "[\"pwd\"]", &["cwd = \"{{ inputs.dir }}\""]);
    let sandbox = Sandbox::new();
    std::fs::create_dir_all(sandbox.workspace().join("sub")).expect("folder");
    let output = sandbox.run_plan(&plan(&format!("{}{step}", inputs("path"))), POLICY);
    assert_eq!(output.code, 0, "{}", output.snapshot());
    assert_eq!(sandbox.history("t")[0]["output_text"], "[WORKSPACE]/sub\n");
    // A value that leaves the workspace never starts a run.
    let refused = sandbox.test_plan().args(["--run-id", "u", "--input", "dir=../up"]).run();
    assert_eq!(refused.code, 2, "{}", refused.snapshot());
    assert!(!sandbox.workspace().join("runs/u").exists(), "a run started");
    // A string input may not name a folder.
    let sandbox = Sandbox::new();
    let output = sandbox.run_plan(&plan(&format!("{}{step}", inputs("string"))), POLICY);
    assert_eq!(output.code, 2, "{}", output.snapshot());
    assert!(output.stderr.contains("only a `path` input may fill a path"), "{}", output.stderr);
}

/// Each refused `cwd`: the step fails with the rule named and the program
/// never starts (its canary is absent everywhere).
#[test]
fn a_cwd_outside_the_workspace_or_protected_never_runs_the_program() {
    let cases = [
        ("/tmp", "files.absolute"),
        ("../outside", "files.parent"),
        ("link", "files.symlink"),
        ("link/inner", "files.symlink"),
        ("runs", "files.protected"),
        (".git", "files.protected"),
    ];
    for (cwd, rule) in cases {
        let sandbox = Sandbox::new();
        let outside = sandbox.path().join("outside");
        std::fs::create_dir_all(outside.join("inner")).expect("outside folder");
        std::fs::create_dir_all(sandbox.workspace().join(".git")).expect(".git");
        std::os::unix::fs::symlink(&outside, sandbox.workspace().join("link")).expect("symlink");
        let step = shell("escape", "[\"sh\", \"-c\", \"touch canary\"]", &[&format!("cwd = {cwd:?}")]);
        let output = sandbox.run_plan(&plan(&step), POLICY);
        assert_eq!(output.code, 1, "{cwd}: {}", output.snapshot());
        let record = &sandbox.history("t")[0];
        assert_eq!(record["failure_class"], "security_denied", "{cwd}: {record}");
        let error = record["error"].as_str().expect("error");
        assert!(error.starts_with("working directory") && error.contains(rule), "{cwd}: {error}");
        let canaries: Vec<String> = sandbox.tree().into_iter().filter(|path| path.ends_with("canary")).collect();
        assert!(canaries.is_empty(), "{cwd}: the program ran: {canaries:?}");
    }
}

#[test]
fn a_missing_cwd_fails_the_step_before_it_starts() {
    let sandbox = Sandbox::new();
    sandbox.write("workspace/afile", "x");
    for cwd in ["nowhere", "afile"] {
        let step = shell("missing", "[\"sh\", \"-c\", \"touch canary\"]", &[&format!("cwd = {cwd:?}")]);
        let output = sandbox.run_plan(&plan(&step), POLICY);
        assert_eq!(output.code, 1, "{}", output.snapshot());
        let record = &sandbox.history("t")[0];
        assert_eq!(record["failure_class"], "file_error", "{record}");
        assert_eq!(record["error"], format!("working directory `{cwd}` is not a folder of the workspace"));
        assert!(!sandbox.workspace().join("canary").exists());
        std::fs::remove_dir_all(sandbox.workspace().join("runs")).expect("clear runs");
    }
}

#[test]
fn a_cwd_from_step_output_is_refused_at_load() {
    let sandbox = Sandbox::new();
    let steps = [shell("a", "[\"pwd\"]", &[]), shell("b", "[\"pwd\"]", &["cwd = \"{{ steps.a.output_text }}\""])];
    let output = sandbox.run_plan(&plan(&steps.concat()), POLICY);
    assert_eq!(output.code, 2, "{}", output.snapshot());
    assert!(output.stderr.contains("untrusted-control-field"), "{}", output.stderr);
    assert!(output.stderr.contains("test.toml:13:8"), "a file:line:column span: {}", output.stderr);
    assert!(!sandbox.workspace().join("runs/t").exists(), "nothing ran");
}

#[test]
fn stdin_reaches_the_program_rendered() {
    let sandbox = Sandbox::new();
    let steps = [
        shell("first", "[\"sh\", \"-c\", \"echo 'from a step'\"]", &[]),
        shell("read", "[\"cat\"]", &["stdin = \"run {{ run.id }}: {{ steps.first.output_text }}\""]),
        shell("none", "[\"cat\"]", &[]),
    ];
    let output = sandbox.run_plan(&plan(&steps.concat()), POLICY);
    assert_eq!(output.code, 0, "{}", output.snapshot());
    let history = sandbox.history("t");
    assert_eq!(history[1]["output_text"], "run t: from a step\n");
    assert_eq!(history[2]["output_text"], "", "no stdin is /dev/null");
    let audit = sandbox.record("t", "audit.jsonl");
    assert!(audit.contains(r#""stdin":"run t: from a step\n""#), "the action records its stdin: {audit}");
}

#[test]
fn stdin_over_the_cap_fails_before_the_program_starts() {
    let sandbox = Sandbox::new();
    let stdin = format!("stdin = \"{}\"", "x".repeat(65));
    let step = shell("big", "[\"sh\", \"-c\", \"touch canary; cat\"]", &[&stdin]);
    let output = sandbox.run_plan(&plan(&step), POLICY);
    assert_eq!(output.code, 1, "{}", output.snapshot());
    let record = &sandbox.history("t")[0];
    assert_eq!(record["failure_class"], "security_denied", "{record}");
    assert_eq!(
        record["error"],
        "`sh` was not started: its stdin is 65 bytes, the limit is 64 bytes (`budget.max_output_bytes`)"
    );
    assert!(!sandbox.workspace().join("canary").exists(), "the program never started");

    let sandbox = Sandbox::new();
    let stdin = format!("stdin = \"{}\"", "x".repeat(64));
    let output = sandbox.run_plan(&plan(&shell("fits", "[\"cat\"]", &[&stdin])), POLICY);
    assert_eq!(output.code, 0, "{}", output.snapshot());
    assert_eq!(sandbox.history("t")[0]["output_text"], "x".repeat(64));
}

/// A `json` document built from awkward step output (newlines, quotes,
/// backslashes, Unicode) is valid JSON equal to the expected value; a leaf
/// that is exactly one reference keeps a structured value's shape.
#[test]
fn a_json_key_writes_valid_json_from_awkward_text() {
    let sandbox = Sandbox::new();
    sandbox.write("workspace/data.json", r#"{"items": [1, "two", {"three": true}]}"#);
    let awkward = "line \"one\"\\n\tline two: é ✓ 🦀\n";
    sandbox.write("workspace/awkward.txt", awkward);
    let steps = concat!(
        "[[steps]]\nid = \"text\"\nkind = \"read_file\"\npath = \"awkward.txt\"\n\n",
        "[[steps]]\nid = \"data\"\nkind = \"read_file\"\npath = \"data.json\"\n\n",
        "[[steps]]\nid = \"write\"\nkind = \"write_file\"\npath = \"out.json\"\n",
        "json = { title = \"run {{ run.id }}\", raw = \"{{ steps.text.output_text }}\", ",
        "first = \"{{ steps.text.output_text | first_line }}\", items = \"{{ steps.data.output_json.items }}\", ",
        "list = [\"a\", \"{{ steps.text.output_text | trim }}\", 3, false], nested = { n = 1.5 } }\n",
    );
    let output = sandbox.run_plan(&plan(steps), POLICY);
    assert_eq!(output.code, 0, "{}", output.snapshot());
    let written = std::fs::read_to_string(sandbox.workspace().join("out.json")).expect("out.json");
    assert!(written.ends_with("}\n"), "pretty JSON with a final newline: {written}");
    let value: serde_json::Value = serde_json::from_str(&written).expect("valid JSON");
    let expected = serde_json::json!({
        "title": "run t",
        "raw": awkward,
        "first": "line \"one\"\\n\tline two: é ✓ 🦀",
        "items": [1, "two", {"three": true}],
        "list": ["a", awkward.trim(), 3, false],
        "nested": {"n": 1.5},
    });
    assert_eq!(value, expected);
    let keys: Vec<&String> = value.as_object().expect("object").keys().collect();
    assert_eq!(keys, ["title", "raw", "first", "items", "list", "nested"], "keys keep the file's order");
}

#[test]
fn content_and_json_together_or_neither_are_refused_at_load() {
    let cases = [
        ("content = \"x\"\njson = { a = \"b\" }", "conflicting-keys", "test.toml:9:1"),
        ("", "missing-key", "test.toml:4:1"),
        ("json = \"text\"", "wrong-type", "test.toml:8:8"),
        ("json = { a = \"{{ steps.nope.output_text }}\" }", "template-unknown-step", "test.toml:8:"),
    ];
    for (keys, code, at) in cases {
        let sandbox = Sandbox::new();
        let step = format!("[[steps]]\nid = \"write\"\nkind = \"write_file\"\npath = \"out.json\"\n{keys}\n");
        let output = sandbox.run_plan(&plan(&step), POLICY);
        assert_eq!(output.code, 2, "{keys}: {}", output.snapshot());
        assert!(output.stderr.contains(&format!("[{code}]")), "{keys}: {}", output.stderr);
        assert!(output.stderr.contains(at), "{keys}: {at} in {}", output.stderr);
        assert!(!sandbox.workspace().join("out.json").exists(), "nothing written");
    }
}
