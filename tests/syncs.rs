//! Where a command-line run makes its writes durable, counted with
//! `strace -f` (syscalls `fsync`, `fdatasync`, `syncfs`, and `execve` for
//! the order): one sync per step that may change the world, made before
//! the next such step starts; the checkpoint after a read (`read_file`,
//! `ticket_lookup`) waits for the next sync, and a run's end is synced.
//!
//! `strace` must be installed (`.ci/run` installs it): without it the test
//! fails, it never skips.

use std::fs;

use crate::common::Sandbox;

const POLICY: &str = r#"version = 1
[shell]
search_path = ["/usr/bin", "/bin"]
[[shell.allow]]
program = "echo"
prefix = true
"#;

/// A plan of `kinds` (`echo` or `read`), then `finish`.
fn plan(kinds: &[&str]) -> String {
    let mut plan = String::from("version = 1\nid = \"syncs\"\n");
    for (index, kind) in kinds.iter().enumerate() {
        let action = match *kind {
            "echo" => format!("kind = \"shell\"\ncommand = [\"echo\", \"step-{index}\"]"),
            _ => "kind = \"read_file\"\npath = \"in.txt\"".to_string(),
        };
        plan.push_str(&format!("\n[[steps]]\nid = \"s{index}\"\n{action}\n"));
    }
    plan.push_str("\n[[steps]]\nid = \"end\"\nkind = \"finish\"\n");
    plan
}

/// Runs `kinds` under `strace -f`; the traced events in order: `sync` for
/// each sync syscall, `echo` for each start of the `echo` program.
fn traced(kinds: &[&str]) -> Vec<&'static str> {
    let sandbox = Sandbox::new();
    sandbox.write("workspace/in.txt", "hello\n");
    sandbox.write_plan(&plan(kinds), POLICY);
    let log = sandbox.path().join("strace.log");
    let strace = ["strace", "-f", "-qq", "-e", "trace=fsync,fdatasync,syncfs,execve", "-o"];
    let wrapper = strace.iter().map(|arg| arg.to_string()).chain([log.display().to_string()]);
    sandbox.test_plan().under(wrapper).expect_code(0).run();
    let text = fs::read_to_string(&log).expect("strace log");
    text.lines()
        .filter(|line| !line.contains("resumed>") && !line.contains("= -1"))
        .filter_map(|line| {
            if line.contains("execve(\"/usr/bin/echo\"") || line.contains("execve(\"/bin/echo\"") {
                Some("echo")
            } else if ["fsync(", "fdatasync(", "syncfs("].iter().any(|call| line.contains(call)) {
                Some("sync")
            } else {
                None
            }
        })
        .collect()
}

#[test]
fn a_run_syncs_once_per_step_that_may_change_the_world_and_before_the_next_one() {
    // Every echo step's checkpoint is synced before the next step starts,
    // and the end once more: one sync per step.
    assert_eq!(traced(&["echo", "echo"]), ["echo", "sync", "echo", "sync", "sync"]);
    // Reads wait for the next sync: here the run's end.
    assert_eq!(traced(&["read", "read", "read"]), ["sync"]);
    // Reads between effects: their checkpoints are made durable before the
    // next echo starts, never after it.
    assert_eq!(traced(&["echo", "read", "read", "echo", "read"]), ["echo", "sync", "sync", "echo", "sync", "sync"]);
}
