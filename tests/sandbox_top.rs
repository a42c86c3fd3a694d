//! The workspace's top level under the sandbox (docs/effects-sandbox.md,
//! "The workspace's top level"): where a mount namespace can be made, a
//! program creates and removes files and folders at the top, while
//! `runs/`, `bridge/` and `.planrun/` stay unwritable (and unreadable) and
//! `.git` read-only, each attempt with a canary that must stay absent; a
//! protected entry it creates fails its step (and is removed, `.git`); the
//! trampoline's user-namespace way, as a process without the privilege
//! uses it.

use std::fs;
use std::path::Path;

use serde_json::Value;

use crate::common::Sandbox;

fn policy() -> String {
    r#"version = 1
[shell]
search_path = ["/usr/bin", "/bin"]
[shell.env]
PATH = "/usr/bin:/bin"
LANG = "C.UTF-8"
[[shell.allow]]
id = "sh"
program = "sh"
args = [["-c", { regex = "(?s).*" }]]
"#
    .to_string()
}

fn plan(script: &str) -> String {
    let script = serde_json::to_string(script).expect("json");
    format!(
        "version = 1\nid = \"test\"\n\n[[steps]]\nid = \"s\"\nkind = \"shell\"\ncommand = [\"sh\", \"-c\", {script}]\non_failure = \"continue\"\n"
    )
}

fn step(sandbox: &Sandbox) -> Value {
    sandbox.history("t").into_iter().find(|record| record["step_id"] == "s").expect("the step's record")
}

fn top_level(record: &Value) -> String {
    record["details"]["sandbox"]["top_level"].as_str().unwrap_or_default().to_string()
}

#[test]
fn a_program_creates_files_and_folders_at_the_top_but_never_in_the_protected_folders() {
    let sandbox = Sandbox::new();
    let workspace = sandbox.workspace();
    sandbox.write("workspace/.git/HEAD", "ref: refs/heads/main\n");
    sandbox.write("workspace/bridge/state.json", "{}\n");
    sandbox.write("workspace/.planrun/id", "kept\n");
    sandbox.write("workspace/old.txt", "old\n");
    let script = "echo top > top.txt && mkdir newdir && echo deep > newdir/file && rm old.txt && echo listed; \
                  ls -A runs bridge .planrun; cat .git/HEAD; \
                  echo x > runs/canary; echo x > runs/t/canary; echo x >> runs/t/history.jsonl; \
                  echo x > bridge/canary; echo x > .planrun/canary; echo x > .planrun/id; echo x > .git/canary; \
                  mkdir .git/hooks; mv runs gone; rm -rf .git; mv bridge bridge2; umount runs; echo tried";
    let output = sandbox.run_plan(&plan(script), &policy());
    assert_eq!(output.code, 0, "{}", output.snapshot());
    let record = step(&sandbox);
    assert_eq!(record["details"]["sandbox"]["kind"], "landlock", "this kernel must have Landlock enabled: {record}");
    assert!(top_level(&record).starts_with("writable ("), "{record}");
    let out = record["output_text"].as_str().unwrap_or_default();
    // `ls -A` of the three covered folders shows nothing of what they hold;
    // `.git` is read.
    assert!(out.starts_with("listed\n"), "{record}");
    assert!(!out.contains("history.jsonl") && !out.contains("state.json") && !out.contains("\nid\n"), "{record}");
    assert!(out.contains("ref: refs/heads/main\n") && out.ends_with("tried\n"), "{record}");
    assert_eq!(fs::read_to_string(workspace.join("top.txt")).expect("top.txt"), "top\n");
    assert_eq!(fs::read_to_string(workspace.join("newdir/file")).expect("newdir/file"), "deep\n");
    assert!(!workspace.join("old.txt").exists(), "a file at the top could not be removed");
    for canary in [
        "runs/canary",
        "runs/t/canary",
        "bridge/canary",
        ".planrun/canary",
        ".git/canary",
        ".git/hooks",
        "gone",
        "bridge2",
    ] {
        assert!(!workspace.join(canary).exists(), "{canary} was created");
    }
    assert_eq!(fs::read_to_string(workspace.join(".planrun/id")).expect("id"), "kept\n");
    assert_eq!(fs::read_to_string(workspace.join(".git/HEAD")).expect("HEAD"), "ref: refs/heads/main\n");
    assert!(workspace.join("bridge/state.json").is_file(), "bridge/ was changed");
    assert!(!sandbox.record("t", "history.jsonl").contains("\nx\n"), "a record was appended to");
    let verify = sandbox.planrun().in_sandbox().args(["verify", "t"]).run();
    assert_eq!(verify.code, 0, "{}", verify.snapshot());
}

#[test]
fn a_protected_entry_a_program_creates_at_the_top_fails_its_step_and_a_planted_git_is_removed() {
    let sandbox = Sandbox::new();
    let workspace = sandbox.workspace();
    let script = "mkdir -p .git/hooks && echo evil > .git/hooks/pre-commit && echo planted";
    let output = sandbox.run_plan(&plan(script), &policy());
    let record = step(&sandbox);
    // A security refusal stops the run (exit 1), `on_failure` or not.
    assert_eq!(output.code, 1, "{}", output.snapshot());
    assert!(top_level(&record).starts_with("writable ("), "{record}");
    assert_eq!(record["status"], "failed", "{record}");
    let message = record["error"].as_str().unwrap_or_default();
    assert!(message.contains("created `.git` at the workspace's top level, which programs may not"), "{record}");
    assert!(!workspace.join(".git").exists(), "the planted .git was left");
}

#[test]
fn without_a_mount_namespace_the_top_level_stays_read_only_and_the_record_says_why() {
    let sandbox = Sandbox::new();
    sandbox.write_plan(&plan("echo x > top.txt; mkdir newdir; echo x > kept/inside.txt; echo tried"), &policy());
    sandbox.write("workspace/kept/.keep", "");
    let output = sandbox.test_plan().env("PLANRUN_SANDBOX_SIMULATE", "no-mount-namespace").run();
    assert_eq!(output.code, 0, "{}", output.snapshot());
    let record = step(&sandbox);
    assert_eq!(
        top_level(&record),
        "read-only (no mount namespace can be made (simulated: PLANRUN_SANDBOX_SIMULATE=no-mount-namespace))",
        "{record}"
    );
    let workspace = sandbox.workspace();
    assert!(!workspace.join("top.txt").exists() && !workspace.join("newdir").exists(), "the top level was changed");
    assert!(workspace.join("kept/inside.txt").is_file(), "a folder of the workspace could not be written");
}

/// The way a process without the privilege to make a mount namespace
/// takes: the trampoline makes a user namespace first. Run here as the
/// trampoline is run by planrun, with an isolation spec.
#[test]
fn the_trampoline_covers_the_protected_folders_in_a_user_namespace() {
    let dir = tempfile::tempdir().expect("temp dir");
    let root = fs::canonicalize(dir.path()).expect("canonical").join("workspace");
    fs::create_dir_all(root.join("runs/t")).expect("runs");
    fs::create_dir_all(root.join(".git")).expect(".git");
    fs::write(root.join("runs/t/history.jsonl"), "record\n").expect("record");
    let tmp = tempfile::tempdir().expect("tmp");
    let spec = serde_json::json!({
        "system": ["/usr", "/bin", "/lib", "/lib64", "/etc", "/proc", "/sys"],
        "devices": ["/dev/null"],
        "list": [], "read": [], "write": [tmp.path()],
        "network": "off",
        "isolation": {
            "workspace": root, "hide": [root.join("runs")], "read_only": [root.join(".git")], "user": true
        }
    });
    let script = "echo top > top.txt; mkdir newdir; ls -A runs; echo x > runs/canary; echo x > .git/canary; echo tried";
    let out = std::process::Command::new(Path::new(env!("CARGO_BIN_EXE_planrun-sandbox")))
        .args(["--", "/bin/sh", "-c", script])
        .current_dir(&root)
        .env_clear()
        .env("PLANRUN_SANDBOX_SPEC", spec.to_string())
        .output()
        .expect("trampoline");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{stdout} {}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(stdout, "tried\n", "runs/ was listed or a write reported nothing");
    assert!(root.join("top.txt").is_file() && root.join("newdir").is_dir());
    assert!(!root.join("runs/canary").exists() && !root.join(".git/canary").exists());
    assert_eq!(fs::read_to_string(root.join("runs/t/history.jsonl")).expect("record"), "record\n");
}
