//! Every security boundary has a negative test that proves nothing ran and
//! nothing was created: canary files must stay absent (or unchanged).

use std::fs;
use std::os::unix::fs::symlink;
use std::path::Path;
use std::time::{Duration, Instant};

use crate::common::{ROOT, Sandbox, TEST_POLICY, one_step_plan};

fn failure_of(sandbox: &Sandbox) -> (String, String) {
    let history = sandbox.history("t");
    let first = &history[0];
    (
        first["failure_class"].as_str().unwrap_or_default().to_string(),
        first["details"]["rule"].as_str().unwrap_or_default().to_string(),
    )
}

#[test]
fn blocked_programs_never_run() {
    for (goal, canary) in [
        ("test deny bash", "pwned.txt"),
        ("test forbidden command", "forbidden.txt"),
        ("test deny curl", "downloaded.html"),
    ] {
        let sandbox = Sandbox::new();
        sandbox.planrun().args(["--goal", goal, "--run-id", "t"]).expect_code(1).run();
        assert!(!sandbox.workspace().join(canary).exists(), "{goal}: {canary} was created");
        assert_eq!(failure_of(&sandbox), ("security_denied".to_string(), "shell.blocked".to_string()), "{goal}");
        // Only the run's own records exist in the workspace.
        let entries: Vec<_> =
            fs::read_dir(sandbox.workspace()).expect("workspace").flatten().map(|e| e.file_name()).collect();
        assert_eq!(entries, vec![std::ffi::OsString::from("runs")], "{goal}");
    }
}

#[test]
fn blocked_rm_leaves_the_canary_untouched() {
    let sandbox = Sandbox::new();
    sandbox.write("workspace/canary.txt", "still here");
    sandbox.planrun().args(["--goal", "test deny rm", "--run-id", "t"]).expect_code(1).run();
    assert_eq!(fs::read_to_string(sandbox.workspace().join("canary.txt")).expect("canary"), "still here");
}

#[test]
fn traversal_and_absolute_paths_create_nothing() {
    let sandbox = Sandbox::new();
    sandbox.planrun().args(["--goal", "test traversal", "--run-id", "t"]).expect_code(1).run();
    assert!(!sandbox.path().join("escape.txt").exists());
    assert_eq!(failure_of(&sandbox).0, "security_denied");

    let canary = Path::new("/tmp/planrun-absolute-path-canary.txt");
    let _ = fs::remove_file(canary);
    sandbox.planrun().args(["--goal", "test absolute path", "--run-id", "t2"]).expect_code(1).run();
    assert!(!canary.exists(), "the absolute path was written");
}

#[test]
fn file_tools_refuse_paths_that_leave_the_workspace() {
    let cases = [
        ("write_file", "../workspace_evil/x.txt", "workspace_evil/x.txt"),
        ("write_file", "link/x.txt", "outside/x.txt"),
        ("write_file", "a/../../escape.txt", "escape.txt"),
        ("write_file", "runs/hack.txt", "workspace/runs/hack.txt"),
        ("write_file", ".git/config", "workspace/.git/config"),
        ("read_file", "link/secret.txt", ""),
        ("read_file", "secret-link", ""),
        ("read_file", "/etc/hostname", ""),
    ];
    for (kind, path, canary) in cases {
        let sandbox = Sandbox::new();
        fs::create_dir_all(sandbox.path().join("workspace_evil")).expect("evil dir");
        fs::create_dir_all(sandbox.path().join("outside")).expect("outside dir");
        sandbox.write("outside/secret.txt", "secret");
        fs::create_dir_all(sandbox.workspace()).expect("workspace");
        symlink(sandbox.path().join("outside"), sandbox.workspace().join("link")).expect("symlink");
        symlink(sandbox.path().join("outside/secret.txt"), sandbox.workspace().join("secret-link")).expect("symlink");
        let content = if kind == "write_file" { "\ncontent = \"x\"" } else { "" };
        let plan = one_step_plan(&format!("kind = \"{kind}\"\npath = \"{path}\"{content}"));
        let output = sandbox.run_plan(&plan, TEST_POLICY);
        assert_eq!(output.code, 1, "{kind} {path}: {}", output.snapshot());
        let history = sandbox.history("t");
        assert_eq!(history.len(), 1, "{kind} {path}: a denied step is not retried");
        assert_eq!(history[0]["failure_class"], "security_denied", "{kind} {path}");
        assert!(!history[0]["output_text"].as_str().unwrap_or_default().contains("secret"), "{kind} {path}: leaked");
        if !canary.is_empty() {
            assert!(!sandbox.path().join(canary).exists(), "{kind} {path}: {canary} was created");
        }
    }
}

#[test]
fn programs_must_be_bare_names_and_literal() {
    for command in [r#"["/bin/rm", "x"]"#, r#"["./rm", "x"]"#, r#"["{{ last.output_text }}"]"#, r#""ls; rm -rf x""#] {
        let sandbox = Sandbox::new();
        let output = sandbox.run_plan(&one_step_plan(&format!("kind = \"shell\"\ncommand = {command}")), TEST_POLICY);
        assert_eq!(output.code, 2, "{command}: {}", output.snapshot());
        assert!(output.stderr.contains("plans/test.toml:"), "{command}: no position in {}", output.stderr);
        assert!(!sandbox.workspace().exists(), "{command}: nothing may be created for an invalid plan");
    }
}

#[test]
fn step_output_never_becomes_a_path() {
    let sandbox = Sandbox::new();
    let plan = one_step_plan("kind = \"write_file\"\npath = \"{{ last.output_text }}\"\ncontent = \"x\"");
    let output = sandbox.run_plan(&plan, TEST_POLICY);
    assert_eq!(output.code, 2, "{}", output.snapshot());
    assert!(output.stderr.contains("untrusted-control-field"), "{}", output.stderr);
    assert!(!sandbox.workspace().exists());
}

#[test]
fn arguments_outside_the_allowlist_are_denied_by_rule() {
    for (command, rule) in [
        (r#"["git", "push"]"#, "shell.default-deny"),
        (r#"["git", "status", "--porcelain"]"#, "shell.default-deny"),
        (r#"["cat", "/etc/passwd"]"#, "shell.default-deny"),
        (r#"["cat", "../outside.txt"]"#, "shell.default-deny"),
        (r#"["bash", "-c", "true"]"#, "shell.blocked"),
        (r#"["python3", "-c", "open('x','w')"]"#, "shell.default-deny"),
    ] {
        let sandbox = Sandbox::new();
        let output = sandbox.run_plan(&one_step_plan(&format!("kind = \"shell\"\ncommand = {command}")), TEST_POLICY);
        assert_eq!(output.code, 1, "{command}: {}", output.snapshot());
        assert_eq!(failure_of(&sandbox), ("security_denied".to_string(), rule.to_string()), "{command}");
        assert!(!sandbox.workspace().join("x").exists());
    }
}

#[test]
fn the_child_environment_is_built_from_nothing() {
    let sandbox = Sandbox::new();
    // Room for the whole output: the temporary folder's name is longer
    // than the test policy's 64 bytes allow (docs/effects-sandbox.md).
    let policy = TEST_POLICY.replace("max_output_bytes = 64", "max_output_bytes = 256");
    sandbox.write_plan(&one_step_plan("kind = \"shell\"\ncommand = [\"env\"]"), &policy);
    // The harness's own variables (`NO_COLOR`, the test clock) must not
    // reach the child either.
    sandbox.test_plan().env("PLANRUN_SECRET_CANARY", "leak").expect_code(0).run();
    let history = sandbox.history("t");
    // The policy's variables, and the step's private temporary folder
    // the sandbox adds (docs/effects-sandbox.md).
    let printed = history[0]["output_text"].as_str().expect("env output");
    let (policy, tmpdir) = printed.split_at(printed.find("TMPDIR=").expect("TMPDIR"));
    assert_eq!(policy, "LANG=C.UTF-8\nPATH=/usr/bin:/bin\n");
    assert!(tmpdir.contains("/planrun-step-") && tmpdir.ends_with('\n') && tmpdir.lines().count() == 1, "{tmpdir}");
}

#[test]
fn a_step_past_its_timeout_is_killed_with_its_whole_process_group() {
    let sandbox = Sandbox::new();
    // In a folder of the workspace: the sandbox refuses new files at its top.
    sandbox.write("workspace/out/.keep", "");
    let plan =
        one_step_plan("kind = \"shell\"\ncommand = [\"sh\", \"-c\", \"sleep 30 & echo $! > out/child.pid; wait\"]");
    let policy = TEST_POLICY.replace("echo $! > child.pid", "echo $! > out/child.pid");
    let started = Instant::now();
    let output = sandbox.run_plan(&plan, &policy);
    assert_eq!(output.code, 1, "{}", output.snapshot());
    assert!(started.elapsed() < Duration::from_secs(20), "the timeout did not stop the step");
    let history = sandbox.history("t");
    assert_eq!(history.len(), 2, "execution_error is retried once by the policy");
    assert_eq!(history[1]["failure_class"], "execution_error");
    assert!(history[1]["error"].as_str().unwrap_or_default().contains("timed out"), "{}", history[1]);
    let pid = fs::read_to_string(sandbox.workspace().join("out/child.pid")).expect("child pid written");
    let status = fs::read_to_string(format!("/proc/{}/status", pid.trim())).unwrap_or_default();
    let state = status.lines().find(|line| line.starts_with("State:")).unwrap_or("State: gone");
    assert!(state.contains("gone") || state.contains('Z'), "grandchild still alive: {state}");
}

#[test]
fn output_is_capped_and_marked_truncated() {
    let sandbox = Sandbox::new();
    let long = "a".repeat(200);
    let output =
        sandbox.run_plan(&one_step_plan(&format!("kind = \"shell\"\ncommand = [\"echo\", \"{long}\"]")), TEST_POLICY);
    assert_eq!(output.code, 0, "{}", output.snapshot());
    let history = sandbox.history("t");
    assert_eq!(history[0]["output_text"].as_str().map(str::len), Some(64));
    assert_eq!(history[0]["details"]["truncated"], true);
}

#[test]
fn step_output_is_never_re_expanded() {
    let sandbox = Sandbox::new();
    sandbox.write("workspace/input.txt", "{{ run.id }} {{ steps.x.output_text }}");
    let plan = "version = 1\nid = \"test\"\n\n[[steps]]\nid = \"read\"\nkind = \"read_file\"\npath = \"input.txt\"\n\n[[steps]]\nid = \"copy\"\nkind = \"write_file\"\npath = \"copy.txt\"\ncontent = \"{{ last.output_text }}\"\n";
    let output = sandbox.run_plan(plan, TEST_POLICY);
    assert_eq!(output.code, 0, "{}", output.snapshot());
    assert_eq!(
        fs::read_to_string(sandbox.workspace().join("copy.txt")).expect("copy"),
        "{{ run.id }} {{ steps.x.output_text }}"
    );
}

#[test]
fn the_repository_policy_expresses_the_seed_allowlist() {
    let text = fs::read_to_string(Path::new(ROOT).join("policies/default.toml")).expect("default policy");
    for program in ["pwd", "ls", "echo", "cat", "python", "git"] {
        assert!(text.contains(&format!("program = \"{program}\"")), "{program}");
    }
    // The policy's own decision, not just its text: the default policy's commands are
    // allowed by a named rule, its blocked ones forbidden.
    let sandbox = Sandbox::new();
    for (argv, code) in [
        (vec!["pwd"], 0),
        (vec!["ls"], 0),
        (vec!["echo", "hello"], 0),
        (vec!["cat", "report.txt"], 0),
        (vec!["python", "--version"], 0),
        (vec!["git", "status"], 0),
        (vec!["git", "push"], 1),
        (vec!["bash", "-c", "true"], 1),
        (vec!["rm", "-rf", "x"], 1),
    ] {
        let output = sandbox.planrun().args(["policy", "check"]).trailing(&argv).run();
        assert_eq!(output.code, code, "{argv:?}: {}", output.snapshot());
    }
}

/// A policy whose `shell.search_path` names `<workspace>/bin`, and a plan
/// that makes an executable there (a copy of `touch`) and runs it: the
/// program would create `canary.txt` in the workspace.
fn search_path_in_workspace_sandbox() -> Sandbox {
    let sandbox = Sandbox::new();
    let bin = sandbox.workspace().join("bin");
    // `sandbox = "none"`: this is about the resolver; the sandbox would
    // refuse `mkdir bin` at the top of the workspace before it got there.
    let policy = format!(
        "version = 1\n[shell]\nsearch_path = [{:?}, \"/usr/bin\", \"/bin\"]\nsandbox = \"none\"\n\n[[shell.allow]]\nprogram = \"mkdir\"\nargs = [[\"bin\"]]\n\n[[shell.allow]]\nprogram = \"cp\"\nargs = [[\"/usr/bin/touch\", \"bin/tool\"]]\n\n[[shell.allow]]\nprogram = \"tool\"\nargs = [[\"canary.txt\"]]\n",
        bin.display().to_string()
    );
    let plan = "version = 1\nid = \"test\"\n\n[[steps]]\nid = \"mkdir\"\nkind = \"shell\"\ncommand = [\"mkdir\", \"bin\"]\n\n[[steps]]\nid = \"copy\"\nkind = \"shell\"\ncommand = [\"cp\", \"/usr/bin/touch\", \"bin/tool\"]\n\n[[steps]]\nid = \"run\"\nkind = \"shell\"\ncommand = [\"tool\", \"canary.txt\"]\n\n[[steps]]\nid = \"done\"\nkind = \"finish\"\n";
    sandbox.write_plan(plan, &policy);
    fs::create_dir_all(sandbox.workspace()).expect("workspace");
    sandbox
}

#[test]
fn a_search_path_inside_the_workspace_refuses_the_policy_before_anything_runs() {
    // Issue 22 item 19: the run made `bin/tool` and ran it from the workspace.
    let sandbox = search_path_in_workspace_sandbox();
    let output = sandbox.test_plan().expect_code(2).run();
    assert!(output.stderr.contains("error[search-path-in-workspace]"), "{}", output.snapshot());
    assert!(output.stderr.contains("--> policies/default.toml:3:16"), "file:line:column: {}", output.stderr);
    let entry = "search path entry `[WORKSPACE]/bin` is inside the workspace `[WORKSPACE]`";
    assert!(output.stderr.contains(entry), "{}", output.stderr);
    assert!(!sandbox.workspace().join("canary.txt").exists(), "the program in the workspace ran");
    assert!(!sandbox.workspace().join("bin").exists(), "a step ran");
    assert!(!sandbox.workspace().join("runs").exists(), "a run was recorded");

    // `check` and `policy check` refuse it alike (exit 2), naming the entry.
    let check = sandbox.planrun().in_sandbox().args(["check", "policies/default.toml"]).expect_code(2).run();
    assert!(check.stdout.contains("error[search-path-in-workspace]"), "{}", check.snapshot());
    assert!(check.stdout.contains("--> policies/default.toml:3:16"), "{}", check.stdout);
    let args = ["policy", "check", "--policies", "policies", "--", "tool", "canary.txt"];
    sandbox.planrun().in_sandbox().args(args).expect_code(2).run();
    assert!(!sandbox.workspace().join("canary.txt").exists());
}

#[test]
fn a_program_inside_the_workspace_never_runs_even_from_a_policy_changed_after_the_start() {
    // The load-time refusal needs the workspace; a run continued with
    // `--allow-changed-files` under such a policy still resolves no program
    // inside the workspace.
    let sandbox = search_path_in_workspace_sandbox();
    let policy = fs::read_to_string(sandbox.path().join("policies/default.toml")).expect("policy");
    let bin = sandbox.workspace().join("bin").display().to_string();
    sandbox.write("policies/default.toml", &policy.replace(&format!("{bin:?}, "), ""));
    let plan = fs::read_to_string(sandbox.path().join("plans/test.toml")).expect("plan");
    sandbox.write("plans/test.toml", &plan.replace("id = \"run\"\n", "id = \"run\"\napproval = \"required\"\n"));
    sandbox.test_plan().expect_code(3).run();
    assert!(sandbox.workspace().join("bin/tool").exists(), "the copy ran before the pause");
    sandbox.planrun().in_sandbox().args(["approve", "t"]).expect_code(0).run();
    sandbox.write("policies/default.toml", &policy);
    sandbox.planrun().in_sandbox().args(["resume", "t", "--allow-changed-files"]).expect_code(1).run();
    let state = sandbox.state("t");
    assert_eq!(state["status"], "failed");
    let last = sandbox.history("t").last().cloned().expect("a record");
    assert_eq!(last["step_id"], "run");
    assert_eq!(last["failure_class"], "security_denied", "{last}");
    assert_eq!(last["details"]["rule"], "shell.in-workspace", "{last}");
    assert!(!sandbox.workspace().join("canary.txt").exists(), "the program in the workspace ran");
}
