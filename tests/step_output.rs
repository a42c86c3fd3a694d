//! What an attempt keeps of what its program printed: stdout (capped at
//! `max_output_bytes`) and the end of stderr (`stderr_text`), failed or
//! not, in the record and in `show --full`; the output an `expect` check
//! refused; `{{ steps.<id>.stderr_text }}` in a later step, also after a
//! pause and `resume`.

use serde_json::Value;

use crate::common::Sandbox;

/// `sh -c <one line>` and `echo` allowed; one attempt per step.
const POLICY: &str = r#"version = 1
[shell]
search_path = ["/usr/bin", "/bin"]
[shell.env]
PATH = "/usr/bin:/bin"
LANG = "C.UTF-8"
[[shell.allow]]
program = "sh"
args = [["-c", { regex = ".*" }]]
[[shell.allow]]
program = "echo"
prefix = true
[retry]
execution_error = 1
[budget]
step_timeout_secs = 20
"#;

fn plan(steps: &str) -> String {
    format!("version = 1\nid = \"test\"\n\n{steps}")
}

fn shell_step(id: &str, script: &str) -> String {
    format!("[[steps]]\nid = \"{id}\"\nkind = \"shell\"\ncommand = [\"sh\", \"-c\", {script:?}]\n")
}

#[test]
fn a_failed_command_keeps_its_stdout_and_stderr_in_the_record_and_in_show_full() {
    let sandbox = Sandbox::new();
    let script = "echo 'ran 2 tests'; echo 'FAIL: test_div' >&2; echo 'ZeroDivisionError' >&2; exit 3";
    let output = sandbox.run_plan(&plan(&shell_step("test", script)), POLICY);
    assert_eq!(output.code, 1, "{}", output.snapshot());
    let history = sandbox.history("t");
    assert_eq!(history.len(), 1);
    let record = &history[0];
    assert_eq!(record["status"], "failed");
    assert_eq!(record["output_text"], "ran 2 tests\n");
    assert_eq!(record["stderr_text"], "FAIL: test_div\nZeroDivisionError\n");
    assert_eq!(record["error"], "`sh` exited with status 3: FAIL: test_div");
    assert_eq!(
        (record["details"]["stdout_bytes"].as_u64(), record["details"]["stderr_bytes"].as_u64()),
        (Some(12), Some(33))
    );

    let full = sandbox.planrun().in_sandbox().args(["show", "t", "--full"]).expect_code(0).run();
    let printed =
        "      output:\n        ran 2 tests\n      stderr:\n        FAIL: test_div\n        ZeroDivisionError\n";
    assert!(full.stdout.contains(printed), "{}", full.stdout);
    let json = sandbox.planrun().in_sandbox().args(["show", "t", "--json"]).expect_code(0).run();
    let state: Value = serde_json::from_str(&json.stdout).expect("JSON");
    assert_eq!(state["history"][0]["stderr_text"], record["stderr_text"], "{state}");
}

#[test]
fn a_successful_commands_stderr_reaches_a_later_step_also_after_a_resume() {
    let sandbox = Sandbox::new();
    let steps = [
        shell_step("test", "echo done; echo 'Ran 4 tests' >&2; echo OK >&2"),
        "[[steps]]\nid = \"now\"\nkind = \"write_file\"\npath = \"now.txt\"\ncontent = \"{{ steps.test.stderr_text }}\"\n".to_string(),
        "[[steps]]\nid = \"gate\"\nkind = \"write_file\"\napproval = \"required\"\npath = \"gate.txt\"\ncontent = \"g\"\n".to_string(),
        "[[steps]]\nid = \"later\"\nkind = \"write_file\"\npath = \"later.txt\"\ncontent = \"{{ steps.test.stderr_text }}{{ steps.test.output_text }}\"\n".to_string(),
        "[[steps]]\nid = \"end\"\nkind = \"finish\"\n".to_string(),
    ];
    let output = sandbox.run_plan(&plan(&steps.concat()), POLICY);
    assert_eq!(output.code, 3, "{}", output.snapshot());
    let history = sandbox.history("t");
    assert_eq!((&history[0]["status"], &history[0]["output_text"]), (&Value::from("done"), &Value::from("done\n")));
    assert_eq!(history[0]["stderr_text"], "Ran 4 tests\nOK\n");
    assert!(history[1].get("stderr_text").is_none(), "a write has no stderr: {}", history[1]);
    assert_eq!(std::fs::read_to_string(sandbox.workspace().join("now.txt")).expect("now.txt"), "Ran 4 tests\nOK\n");

    sandbox.planrun().in_sandbox().args(["approve", "t"]).expect_code(0).run();
    sandbox.planrun().in_sandbox().args(["resume", "t"]).expect_code(0).run();
    let later = std::fs::read_to_string(sandbox.workspace().join("later.txt")).expect("later.txt");
    assert_eq!(later, "Ran 4 tests\nOK\ndone\n", "the resumed run reads the recorded stderr");
}

#[test]
fn a_step_that_fails_its_expect_keeps_the_output_that_failed_the_check() {
    let sandbox = Sandbox::new();
    let step = format!(
        "{}[steps.expect]\noutput_matches = \"^passed\"\n",
        shell_step("test", "echo 'failed: 3 of 7'; echo warning >&2")
    );
    let output = sandbox.run_plan(&plan(&step), POLICY);
    assert_eq!(output.code, 1, "{}", output.snapshot());
    let record = &sandbox.history("t")[0];
    assert_eq!(record["failure_class"], "verification_failed");
    assert_eq!(record["error"], "expected the output to match /^passed/");
    assert_eq!(record["output_text"], "failed: 3 of 7\n");
    assert_eq!(record["stderr_text"], "warning\n");
}

#[test]
fn a_long_stderr_keeps_only_its_last_8_kib() {
    let sandbox = Sandbox::new();
    let script = "echo first-line >&2; i=0; while [ $i -lt 2000 ]; do echo 'progress line of some length' >&2; i=$((i+1)); done; echo 'the last word' >&2; exit 1";
    let output = sandbox.run_plan(&plan(&shell_step("noisy", script)), POLICY);
    assert_eq!(output.code, 1, "{}", output.snapshot());
    let record = &sandbox.history("t")[0];
    let stderr = record["stderr_text"].as_str().expect("stderr_text");
    assert!(stderr.len() <= 8192 && stderr.len() > 8000, "{}", stderr.len());
    assert!(stderr.ends_with("progress line of some length\nthe last word\n"), "{stderr}");
    assert!(!stderr.contains("first-line"), "only the end is kept");
    assert_eq!(record["details"]["stderr_bytes"], 11 + 2000 * 29 + 14);
    assert_eq!(record["details"]["truncated"], true);
    let error = record["error"].as_str().expect("error");
    assert_eq!(error, "`sh` exited with status 1: progress line of some length", "a whole line, never a cut one");
}
