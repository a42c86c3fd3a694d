//! Where a command-line run makes its writes durable, counted with
//! `strace -f` (syscalls `fsync`, `fdatasync`, `syncfs`, and `execve` for
//! the order): one sync per step that may change the world, made before
//! the next such step starts; the checkpoint after a read (`read_file`,
//! `ticket_lookup`) waits for the next sync, and a run's end is synced.
//!
//!
//! The service's bridge records, counted with `strace -f -p` attached to
//! `planrun serve`: a stub request (done wholly in memory) writes its state
//! file once, its last state, so no state file is ever replaced; an agent
//! request writes it twice (its first state, then its last). Neither syncs
//! a file on its own: the agent run's `write_file` shares the group-commit
//! barrier too (`fsync` and `fdatasync` are never called).
//!
//! `strace` must be installed (`.ci/run` installs it): without it the test
//! fails, it never skips.

use std::fs;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::json;

use crate::common::Sandbox;
use crate::serve_harness::{Server, client, post};

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

/// Whether every thread of process `pid` is traced.
fn all_threads_traced(pid: u32) -> bool {
    let Ok(tasks) = fs::read_dir(format!("/proc/{pid}/task")) else { return false };
    tasks.flatten().all(|task| {
        fs::read_to_string(task.path().join("status")).is_ok_and(|status| {
            status.lines().any(|line| line.starts_with("TracerPid:") && line.split_whitespace().nth(1) != Some("0"))
        })
    })
}

/// The bridge state files `bridge/runs/<id>/state.json` written (renamed
/// into place) while one `adapter` request runs, and the `fsync` and
/// `fdatasync` calls made meanwhile, from a `strace` attached to the server.
async fn state_writes_of_one_request(server: &Server, adapter: &str) -> (String, usize, usize) {
    let log = server.sandbox.path().join(format!("strace.{adapter}.log"));
    let mut strace = Command::new("strace")
        .args(["-f", "-qq", "-e", "trace=rename,renameat,renameat2,fsync,fdatasync", "-o"])
        .arg(&log)
        .args(["-p", &server.child.id().to_string()])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("strace is needed (apt-get install -y strace)");
    let deadline = Instant::now() + Duration::from_secs(10);
    while !all_threads_traced(server.child.id()) {
        assert!(Instant::now() < deadline, "strace did not attach");
        std::thread::sleep(Duration::from_millis(20));
    }
    let (status, body) =
        post(&client(), &server.url("/runs"), json!({"goal": "test flow pwd to file", "adapter": adapter})).await;
    assert_eq!((status, body["status"].as_str()), (201, Some("done")), "{body}");
    // SIGINT detaches strace, which writes its log first.
    rustix::process::kill_process(
        rustix::process::Pid::from_raw(strace.id() as i32).expect("pid"),
        rustix::process::Signal::INT,
    )
    .expect("stop strace");
    strace.wait().expect("strace ends");
    let run_id = body["run_id"].as_str().expect("run id").to_string();
    let target = format!("bridge/runs/{run_id}/state.json\"");
    let text = fs::read_to_string(&log).expect("strace log");
    let writes = text.lines().filter(|line| line.contains(&target) && !line.contains("= -1")).count();
    let own_syncs =
        text.lines().filter(|line| [" fsync(", " fdatasync("].iter().any(|call| line.contains(call))).count();
    (run_id, writes, own_syncs)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stub_request_writes_its_state_file_once_an_agent_request_twice_and_neither_syncs_alone() {
    let server = Server::start(&[]);
    let (stub, stub_writes, stub_syncs) = state_writes_of_one_request(&server, "stub").await;
    assert_eq!((stub_writes, stub_syncs), (1, 0), "a stub request writes only its last state, syncs nothing alone");
    let (agent, agent_writes, agent_syncs) = state_writes_of_one_request(&server, "agent").await;
    assert_eq!(agent_writes, 2, "an agent request writes its first state at once, then its last");
    assert_eq!(agent_syncs, 0, "its write_file step (report.txt) shares the barrier: no fsync of its own");
    let report = fs::read_to_string(server.sandbox.workspace().join("report.txt")).expect("the step's file");
    assert!(!report.is_empty(), "written");
    for run_id in [stub, agent] {
        let folder = server.sandbox.workspace().join("bridge/runs").join(&run_id);
        let mut names: Vec<_> = fs::read_dir(&folder)
            .expect("record folder")
            .map(|entry| entry.expect("entry").file_name().into_string().expect("name"))
            .collect();
        names.sort();
        assert_eq!(names, ["audit.jsonl", "state.json"], "{run_id}");
    }
}
