//! The sandbox around the programs a step starts (docs/effects-sandbox.md):
//! the escape catalogue, each attempt with a canary that must stay absent
//! (a file outside the workspace, in `runs/` and `.planrun/`, a file read
//! from outside the readable set, a loopback connection with the network
//! off, a run that `require_sandbox` must refuse on a kernel without
//! Landlock), and what a sandboxed program may still do (the workspace,
//! its `TMPDIR`, the network its rule allows). Landlock must be enabled in
//! the kernel that runs these tests (CI runs them for real).

use std::fs;
use std::io::Read;
use std::net::TcpListener;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::thread;
use std::time::Duration;

use serde_json::Value;

use crate::common::{Output, Sandbox};

/// `sh -c ANY` and `python3 -c ANY`: interpreters that run whatever they
/// are given, the leak a sandbox must close.
fn policy(extra: &str) -> String {
    format!(
        r#"version = 1
[shell]
search_path = ["/usr/bin", "/bin"]
{extra}
[shell.env]
PATH = "/usr/bin:/bin"
LANG = "C.UTF-8"
[[shell.allow]]
id = "sh"
program = "sh"
args = [["-c", {{ regex = ".*" }}]]
[[shell.allow]]
id = "python3"
program = "python3"
args = [["-c", {{ regex = "(?s).*" }}]]
[retry]
execution_error = 1
"#
    )
}

/// A plan of one shell step per command, each allowed to fail.
fn plan(commands: &[(&str, &str, &str)]) -> String {
    let mut plan = "version = 1\nid = \"test\"\n".to_string();
    for (id, program, script) in commands {
        let script = serde_json::to_string(script).expect("json");
        plan.push_str(&format!(
            "\n[[steps]]\nid = \"{id}\"\nkind = \"shell\"\ncommand = [\"{program}\", \"-c\", {script}]\non_failure = \"continue\"\n"
        ));
    }
    plan
}

fn step<'h>(history: &'h [Value], id: &str) -> &'h Value {
    history.iter().find(|record| record["step_id"] == id).unwrap_or_else(|| panic!("no step `{id}`: {history:?}"))
}

fn text(record: &Value, key: &str) -> String {
    record[key].as_str().unwrap_or_default().to_string()
}

/// The step ran under Landlock, at some ABI.
fn assert_landlock(record: &Value) {
    let sandbox = &record["details"]["sandbox"];
    assert_eq!(sandbox["kind"], "landlock", "this kernel must have Landlock enabled: {record}");
    assert!(sandbox["abi"].as_u64().is_some_and(|abi| abi >= 1), "{record}");
}

fn run(sandbox: &Sandbox, plan: &str, policy: &str) -> (Output, Vec<Value>) {
    let output = sandbox.run_plan(plan, policy);
    let history = sandbox.history("t");
    (output, history)
}

#[test]
fn an_allowed_interpreter_cannot_write_outside_the_workspace_nor_into_its_protected_folders() {
    let sandbox = Sandbox::new();
    let outside = tempfile::tempdir().expect("another temp dir");
    let canary = outside.path().join("canary");
    let parent_canary = sandbox.path().join("canary");
    sandbox.write("workspace/src/keep.txt", "kept\n");
    let sh = format!(
        "echo x > {canary}; echo x > ../canary; echo x > runs/canary; echo x > runs/t/canary; \
         echo x >> runs/t/history.jsonl; mkdir .planrun; echo x > .planrun/canary; echo x > .git-canary; \
         mv runs gone; ln -s / root-link; echo x > ../plans/test.toml; echo tried",
        canary = canary.display()
    );
    let py = format!(
        "import os\nfor path in ['{canary}.py', 'runs/canary.py', 'runs/t/canary.py', '../canary.py']:\n    \
         try:\n        open(path, 'w').write('x')\n    except OSError as error:\n        print(type(error).__name__)\n\
         print('tried')",
        canary = canary.display()
    );
    // The rules of a machine where no mount namespace can be made: the top
    // level read-only (tests/sandbox_top.rs has the rules where one can).
    sandbox.write_plan(&plan(&[("sh", "sh", &sh), ("py", "python3", &py)]), &policy(""));
    let output = sandbox.test_plan().env("PLANRUN_SANDBOX_SIMULATE", "no-mount-namespace").run();
    let history = sandbox.history("t");
    assert_eq!(output.code, 0, "{}", output.snapshot());
    assert!(text(&step(&history, "sh")["details"]["sandbox"], "top_level").starts_with("read-only ("), "{history:?}");
    for id in ["sh", "py"] {
        let record = step(&history, id);
        assert_landlock(record);
        assert!(text(record, "output_text").ends_with("tried\n"), "{record}");
    }
    assert!(text(step(&history, "py"), "output_text").starts_with("PermissionError\n"), "{history:?}");
    for path in [canary.clone(), canary.with_extension("py"), parent_canary.clone(), parent_canary.with_extension("py")]
    {
        assert!(!path.exists(), "{} was written", path.display());
    }
    let workspace = sandbox.workspace();
    for name in [
        "runs/canary",
        "runs/t/canary",
        "runs/canary.py",
        "runs/t/canary.py",
        ".planrun",
        ".git-canary",
        "root-link",
        "gone",
    ] {
        assert!(!workspace.join(name).exists(), "{name} was created");
    }
    assert!(workspace.join("runs/t").is_dir(), "runs/ was moved");
    assert!(!sandbox.record("t", "history.jsonl").contains("\nx\n"), "a record was appended to");
    assert!(fs::read_to_string(sandbox.path().join("plans/test.toml")).expect("plan").starts_with("version = 1"));
    let verify = sandbox.planrun().in_sandbox().args(["verify", "t"]).run();
    assert_eq!(verify.code, 0, "{}", verify.snapshot());
}

#[test]
fn a_file_outside_the_readable_set_and_the_run_records_cannot_be_read() {
    let sandbox = Sandbox::new();
    // A stand-in for `~/.ssh/id_ed25519`: a file in another temp folder.
    let home = tempfile::tempdir().expect("another temp dir");
    let secret = home.path().join("id_ed25519");
    fs::write(&secret, "canary-private-key-7f3a\n").expect("secret");
    let sh = format!(
        "cat {secret}; ls {home}; cat runs/t/audit.jsonl | head -c 64; cat ../policies/default.toml | head -c 64; echo tried",
        secret = secret.display(),
        home = home.path().display()
    );
    let py = format!("print(open('{}').read())", secret.display());
    let (output, history) = run(&sandbox, &plan(&[("sh", "sh", &sh), ("py", "python3", &py)]), &policy(""));
    assert_eq!(output.code, 0, "{}", output.snapshot());
    let record = step(&history, "sh");
    assert_landlock(record);
    assert_eq!(text(record, "output_text"), "tried\n", "{record}");
    assert!(text(record, "stderr_text").contains("Permission denied"), "{record}");
    let py = step(&history, "py");
    assert_eq!(py["status"], "failed", "{py}");
    assert!(text(py, "stderr_text").contains("PermissionError"), "{py}");
    assert!(!sandbox.record("t", "history.jsonl").contains("canary-private-key"));
    assert!(!output.stdout.contains("canary-private-key") && !output.stderr.contains("canary-private-key"));
}

/// A loopback listener that counts the connections it accepts.
struct Listener {
    port: u16,
    accepted: Arc<AtomicUsize>,
    stop: Arc<AtomicBool>,
    thread: Option<thread::JoinHandle<()>>,
}

impl Listener {
    fn start() -> Listener {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
        listener.set_nonblocking(true).expect("non-blocking");
        let port = listener.local_addr().expect("address").port();
        let (accepted, stop) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicBool::new(false)));
        let (count, done) = (accepted.clone(), stop.clone());
        let thread = thread::spawn(move || {
            while !done.load(Ordering::SeqCst) {
                match listener.accept() {
                    Ok((mut stream, _)) => {
                        count.fetch_add(1, Ordering::SeqCst);
                        let _ = stream.read(&mut [0u8; 16]);
                    }
                    Err(_) => thread::sleep(Duration::from_millis(5)),
                }
            }
            // A connection made while the loop slept is still in the
            // backlog: count it too (the program may have connected and
            // exited before the listener looked again).
            while listener.accept().is_ok() {
                count.fetch_add(1, Ordering::SeqCst);
            }
        });
        Listener { port, accepted, stop, thread: Some(thread) }
    }

    /// The connections accepted, once the listener has stopped.
    fn stop(mut self) -> usize {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(thread) = self.thread.take() {
            thread.join().expect("listener");
        }
        self.accepted.load(Ordering::SeqCst)
    }
}

fn connect(port: u16) -> String {
    format!(
        "import socket\ntry:\n    socket.create_connection(('127.0.0.1', {port}), timeout=5).close()\n    print('connected')\n\
         except OSError as error:\n    print(type(error).__name__)"
    )
}

#[test]
fn a_loopback_connection_is_refused_with_the_network_off() {
    let sandbox = Sandbox::new();
    let listener = Listener::start();
    let script = connect(listener.port);
    let (output, history) = run(&sandbox, &plan(&[("connect", "python3", &script)]), &policy(""));
    let accepted = listener.stop();
    assert_eq!(output.code, 0, "{}", output.snapshot());
    let record = step(&history, "connect");
    assert_landlock(record);
    assert_eq!(record["details"]["sandbox"]["network"], "off", "{record}");
    assert_eq!(text(record, "output_text"), "PermissionError\n", "{record}");
    assert_eq!(accepted, 0, "the sandboxed program reached the listener");
}

#[test]
fn a_rule_with_network_true_or_its_port_can_connect() {
    for (rule, expected) in [("network = true", "on"), ("network_ports = [PORT]", "ports PORT")] {
        let sandbox = Sandbox::new();
        let listener = Listener::start();
        let port = listener.port.to_string();
        let policy =
            policy("").replace("id = \"python3\"\n", &format!("id = \"python3\"\n{}\n", rule.replace("PORT", &port)));
        assert!(policy.contains(&rule.replace("PORT", &port)), "{policy}");
        let (output, history) = run(&sandbox, &plan(&[("connect", "python3", &connect(listener.port))]), &policy);
        let accepted = listener.stop();
        assert_eq!(output.code, 0, "{}", output.snapshot());
        let record = step(&history, "connect");
        assert_landlock(record);
        let abi = record["details"]["sandbox"]["abi"].as_u64().unwrap_or(0);
        if rule.starts_with("network_ports") && abi < 4 {
            // No TCP rules below ABI 4: the network is not confined, and the record says so.
            assert!(record["details"]["sandbox"]["network"].as_str().unwrap_or("").starts_with("unconfined"));
        } else {
            assert_eq!(record["details"]["sandbox"]["network"], expected.replace("PORT", &port), "{record}");
        }
        assert_eq!(text(record, "output_text"), "connected\n", "{record}");
        assert_eq!(accepted, 1);
    }
}

#[test]
fn the_workspace_and_the_step_s_tmpdir_are_writable_and_the_tmpdir_is_private_and_removed() {
    let sandbox = Sandbox::new();
    sandbox.write("workspace/src/old.txt", "old\n");
    sandbox.write("workspace/notes.txt", "old\n");
    let sh = "echo new > src/new.txt && echo changed > src/old.txt && echo more >> notes.txt && mkdir -p src/deep/er \
              && echo deep > src/deep/er/file && mv src/new.txt src/deep/moved.txt && rm src/old.txt \
              && echo \"$TMPDIR\" && echo temp > \"$TMPDIR/scratch\" && cat \"$TMPDIR/scratch\"";
    let py = "import tempfile, os\nwith tempfile.NamedTemporaryFile(dir=None) as f:\n    f.write(b'x')\n    \
              print(os.path.dirname(f.name) == os.environ['TMPDIR'])";
    let (output, history) = run(&sandbox, &plan(&[("sh", "sh", sh), ("py", "python3", py)]), &policy(""));
    assert_eq!(output.code, 0, "{}", output.snapshot());
    let record = step(&history, "sh");
    assert_landlock(record);
    assert_eq!(record["status"], "done", "{record}");
    let printed = text(record, "output_text");
    let mut lines = printed.lines();
    let tmpdir = lines.next().expect("TMPDIR").to_string();
    assert_eq!(lines.next(), Some("temp"), "{record}");
    assert!(!Path::new(&tmpdir).exists(), "the step's TMPDIR {tmpdir} outlived the step");
    assert!(!tmpdir.starts_with(&*sandbox.workspace().to_string_lossy()), "{tmpdir}");
    let workspace = sandbox.workspace();
    assert_eq!(fs::read_to_string(workspace.join("src/deep/moved.txt")).expect("moved"), "new\n");
    assert_eq!(fs::read_to_string(workspace.join("src/deep/er/file")).expect("deep"), "deep\n");
    assert_eq!(fs::read_to_string(workspace.join("notes.txt")).expect("notes"), "old\nmore\n");
    assert!(!workspace.join("src/old.txt").exists());
    assert_eq!(text(step(&history, "py"), "output_text"), "True\n", "{history:?}");
}

#[test]
fn require_sandbox_on_a_kernel_without_landlock_refuses_to_run_and_without_it_the_record_says_unconfined() {
    let sandbox = Sandbox::new();
    let outside = tempfile::tempdir().expect("another temp dir");
    let canary = outside.path().join("canary");
    let script = format!("echo x > {}; echo ran > ran.txt", canary.display());
    sandbox.write_plan(&plan(&[("escape", "sh", &script)]), &policy("require_sandbox = true"));
    let output = sandbox.test_plan().env("PLANRUN_SANDBOX_SIMULATE", "no-landlock").run();
    assert_eq!(output.code, 2, "{}", output.snapshot());
    assert!(
        output
            .stderr
            .contains("the policy requires a sandbox (`shell.require_sandbox = true`), but the kernel has no Landlock"),
        "{}",
        output.stderr
    );
    assert!(!canary.exists(), "the step ran");
    assert!(!sandbox.workspace().join("ran.txt").exists(), "the step ran");
    assert!(!sandbox.workspace().join("runs").exists(), "a run was created");

    // The same kernel with Landlock: the run goes ahead, confined.
    let output = sandbox.test_plan().run();
    assert_eq!(output.code, 0, "{}", output.snapshot());
    assert_landlock(step(&sandbox.history("t"), "escape"));
    assert!(!canary.exists());

    // Without `require_sandbox` the run goes ahead unconfined, and says so.
    let other = Sandbox::new();
    other.write_plan(&plan(&[("escape", "sh", &script)]), &policy(""));
    let output = other.test_plan().env("PLANRUN_SANDBOX_SIMULATE", "no-landlock").run();
    assert_eq!(output.code, 0, "{}", output.snapshot());
    let history = other.history("t");
    let record = step(&history, "escape");
    assert_eq!(record["details"]["sandbox"]["kind"], "none", "{record}");
    let why = record["details"]["sandbox"]["unconfined"].as_str().unwrap_or_default();
    assert!(why.contains("no Landlock") && why.contains("simulated"), "{record}");
    assert!(canary.exists(), "unconfined, as the record says");
}

#[test]
fn sandbox_none_runs_unconfined_and_an_extending_policy_cannot_loosen_the_sandbox() {
    let sandbox = Sandbox::new();
    let outside = tempfile::tempdir().expect("another temp dir");
    let canary = outside.path().join("canary");
    let script = format!("echo x > {}; echo tried", canary.display());
    let (output, history) = run(&sandbox, &plan(&[("write", "sh", &script)]), &policy("sandbox = \"none\""));
    assert_eq!(output.code, 0, "{}", output.snapshot());
    let record = step(&history, "write");
    assert_eq!(record["details"]["sandbox"], serde_json::json!({ "kind": "none", "unconfined": "policy" }));
    assert!(canary.exists(), "`sandbox = \"none\"` confines nothing");
    fs::remove_file(&canary).expect("remove");

    // A child of a Landlock policy that says `none` stays under Landlock;
    // the parent's `require_sandbox` holds for the child.
    let strict = Sandbox::new();
    strict.write("policies/base.toml", &policy("require_sandbox = true"));
    strict.write_plan(
        &plan(&[("write", "sh", &script)]),
        "version = 1\nextends = \"base\"\n[shell]\nsandbox = \"none\"\n",
    );
    let output = strict.test_plan().run();
    assert_eq!(output.code, 0, "{}", output.snapshot());
    assert_landlock(step(&strict.history("t"), "write"));
    assert!(!canary.exists(), "the child loosened the sandbox");
    let refused = strict.test_plan().arg("--run-id").arg("t2").env("PLANRUN_SANDBOX_SIMULATE", "no-landlock").run();
    assert_eq!(refused.code, 2, "{}", refused.snapshot());
}

#[test]
fn require_sandbox_with_sandbox_none_is_refused_at_load_and_bad_network_keys_are_named() {
    let sandbox = Sandbox::new();
    sandbox.write_plan(&plan(&[("s", "sh", "true")]), &policy("sandbox = \"none\"\nrequire_sandbox = true"));
    let output = sandbox.planrun().in_sandbox().args(["check", "--plans", "plans", "--policies", "policies"]).run();
    assert_eq!(output.code, 2, "{}", output.snapshot());
    assert!(
        output.stdout.contains("`require_sandbox = true` with `sandbox = \"none\"` can never run")
            || output.stderr.contains("`require_sandbox = true` with `sandbox = \"none\"` can never run"),
        "{}",
        output.snapshot()
    );
    let both = policy("").replace("id = \"sh\"\n", "id = \"sh\"\nnetwork = true\nnetwork_ports = [443]\n");
    sandbox.write_plan(&plan(&[("s", "sh", "true")]), &both);
    let output = sandbox.planrun().in_sandbox().args(["check", "--plans", "plans", "--policies", "policies"]).run();
    assert_eq!(output.code, 2, "{}", output.snapshot());
    assert!(output.snapshot().contains("`network = true` and `network_ports` together"), "{}", output.snapshot());
    let zero = policy("").replace("id = \"sh\"\n", "id = \"sh\"\nnetwork_ports = [0]\n");
    sandbox.write_plan(&plan(&[("s", "sh", "true")]), &zero);
    let output = sandbox.planrun().in_sandbox().args(["check", "--plans", "plans", "--policies", "policies"]).run();
    assert_eq!(output.code, 2, "{}", output.snapshot());
    assert!(output.snapshot().contains("network port 0 is not between 1 and 65535"), "{}", output.snapshot());
}

#[test]
fn the_spec_cannot_be_replaced_through_the_environment_and_the_trampoline_reads_no_option() {
    let sandbox = Sandbox::new();
    let outside = tempfile::tempdir().expect("another temp dir");
    let canary = outside.path().join("canary");
    let open = r#"{"system":["/"],"devices":[],"list":[],"read":[],"write":["/"],"network":"on"}"#;
    let policy = policy("env_allow = [\"PLANRUN_SANDBOX_SPEC\"]").replace(
        "LANG = \"C.UTF-8\"\n",
        &format!("LANG = \"C.UTF-8\"\nPLANRUN_SANDBOX_SPEC = {}\n", serde_json::to_string(open).expect("json")),
    );
    let script = format!("echo x > {}; echo \"spec=${{PLANRUN_SANDBOX_SPEC:-unset}}\"", canary.display());
    let (output, history) = run(&sandbox, &plan(&[("escape", "sh", &script)]), &policy);
    assert_eq!(output.code, 0, "{}", output.snapshot());
    let record = step(&history, "escape");
    assert_landlock(record);
    assert_eq!(text(record, "output_text"), "spec=unset\n", "the program never sees the spec");
    assert!(!canary.exists(), "a spec from the policy's env replaced planrun's");

    // The trampoline itself takes no option: only `--` and a program.
    let trampoline = Path::new(env!("CARGO_BIN_EXE_planrun-sandbox"));
    for args in [vec!["--help"], vec!["-h", "--", "/bin/true"], vec![]] {
        let out = std::process::Command::new(trampoline).args(&args).output().expect("trampoline");
        assert_eq!(out.status.code(), Some(125), "{args:?}");
        assert!(String::from_utf8_lossy(&out.stderr).contains("started by planrun only"), "{args:?}");
    }
    let out =
        std::process::Command::new(trampoline).args(["--", "/bin/true"]).env_remove("PLANRUN_SANDBOX_SPEC").output();
    assert_eq!(out.expect("trampoline").status.code(), Some(125), "no spec, no program");
}

/// The one function a long-running program (an MCP server) is started
/// through: a `Command` the caller spawns with its own stdio, confined as a
/// shell step's program is, and its temporary folder kept while it runs.
#[test]
fn command_for_starts_a_long_running_program_in_the_sandbox() {
    use std::collections::BTreeMap;
    use std::io::{BufRead, BufReader, Write};
    use std::process::Stdio;

    use planrun::confine::Workspace;
    use planrun::model::{FilePolicy, NetworkAccess, SandboxMode, ShellPolicy};
    use planrun::tools::sandbox::{Request, command_for};

    let dir = tempfile::tempdir().expect("temp dir");
    let root = dir.path().join("workspace");
    fs::create_dir_all(root.join("runs")).expect("workspace");
    let outside = dir.path().join("canary");
    let files = FilePolicy { deny: vec![], max_read_bytes: 1024, max_write_bytes: 1024 };
    let workspace = Workspace::open(&root, &files).expect("workspace");
    let shell = ShellPolicy {
        blocked: vec![],
        allow: vec![],
        search_path: vec!["/usr/bin".into(), "/bin".into()],
        env: BTreeMap::new(),
        env_allow: vec![],
        sandbox: SandboxMode::Landlock,
        require_sandbox: false,
    };
    let program = fs::canonicalize("/bin/sh").expect("sh");
    let request = Request { shell: &shell, workspace: &workspace, program: &program, network: &NetworkAccess::Off };
    let script = format!(
        "while read line; do echo x > {outside}; echo x > runs/canary; echo x > \"$TMPDIR/scratch\" && echo \"got $line\"; done",
        outside = outside.display()
    );
    let env = BTreeMap::from([("PATH".to_string(), "/usr/bin:/bin".to_string())]);
    let mut sandboxed = command_for(&request, &["-c".to_string(), script], &env).expect("prepared");
    assert_eq!(sandboxed.facts.kind, SandboxMode::Landlock, "{:?}", sandboxed.facts);
    assert_eq!(sandboxed.facts.network.as_deref(), Some("off"));
    let mut child = sandboxed
        .command
        .current_dir(workspace.root())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn");
    let mut stdin = child.stdin.take().expect("stdin");
    let mut stdout = BufReader::new(child.stdout.take().expect("stdout"));
    for request in ["one", "two"] {
        writeln!(stdin, "{request}").expect("write");
        let mut line = String::new();
        stdout.read_line(&mut line).expect("read");
        assert_eq!(line, format!("got {request}\n"));
    }
    drop(stdin);
    assert!(child.wait().expect("wait").success());
    assert!(!outside.exists(), "the server wrote outside the workspace");
    assert!(!root.join("runs/canary").exists(), "the server wrote into runs/");
    let temp = sandboxed.temp.as_ref().map(|launch| launch.temp_dir().to_path_buf()).expect("a temporary folder");
    assert!(temp.join("scratch").exists());
    drop(sandboxed);
    assert!(!temp.exists(), "the temporary folder outlived the server's sandbox");
}
