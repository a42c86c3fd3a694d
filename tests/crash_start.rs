//! No run is ever stuck: real `planrun` processes are killed with `SIGKILL`
//! at each `rename` of a run (the plan copy, each checkpoint, the folder's
//! publication; `strace -e inject=…:signal=KILL`), then the id is used
//! again. Killed before its first checkpoint, a run left nothing under its
//! id: `show`, `resume`, `cancel` and `verify` say there is no such run
//! (exit 2, all alike) and the same `--run-id` starts it afresh. Killed
//! after, it is resumed to `done` or cancelled. `strace` must be installed
//! (`.ci/run` installs it): without it the test fails, it never skips.

use std::path::Path;
use std::process::Command;

use crate::common::{ROOT, Sandbox, TEST_CLOCK};

const PLAN: &str = "plans/flow_pwd.toml";
const RUN: &str = "e";

/// Runs `planrun --plan PLAN --run-id e` under `strace`, killed at the
/// `nth` rename; returns whether it was killed.
fn run_killed_at(sandbox: &Sandbox, nth: usize) -> bool {
    let workspace = sandbox.workspace();
    let inject = format!("inject=rename,renameat,renameat2:signal=KILL:when={nth}");
    let status = Command::new("strace")
        .args(["-f", "-qq", "-o", "/dev/null", "-e", "trace=rename,renameat,renameat2", "-e", &inject])
        .arg(env!("CARGO_BIN_EXE_planrun"))
        .args(["--plan", PLAN, "--run-id", RUN, "--workspace"])
        .arg(&workspace)
        .current_dir(ROOT)
        .env("PLANRUN_TEST_CLOCK", TEST_CLOCK)
        .env("NO_COLOR", "1")
        .env_remove("PLANRUN_HMAC_KEY")
        .status()
        .expect("`strace` is needed for this test (apt-get install -y strace)");
    !status.success()
}

fn run_folder(sandbox: &Sandbox) -> std::path::PathBuf {
    sandbox.workspace().join("runs").join(RUN)
}

#[test]
fn a_run_killed_at_any_rename_is_never_stuck() {
    let mut before_first_checkpoint = 0;
    let mut after = 0;
    for nth in 1.. {
        for ending in ["resume", "cancel"] {
            let sandbox = Sandbox::new();
            if !run_killed_at(&sandbox, nth) {
                // Past the last rename the run completes: every point was tried.
                assert!(before_first_checkpoint > 0 && after > 0, "both kinds of kill point were reached");
                return;
            }
            if Path::new(&run_folder(&sandbox)).is_dir() {
                after += 1;
                let verify = sandbox.planrun().args(["verify", RUN]).run();
                assert_eq!(verify.code, 0, "kill {nth}: the records verify\n{}", verify.snapshot());
                let output = sandbox.planrun().args([ending, RUN]).run();
                assert_eq!(output.code, 0, "kill {nth}: {ending}\n{}", output.snapshot());
                let state = sandbox.state(RUN);
                let status = if ending == "resume" { "done" } else { "cancelled" };
                assert_eq!(state["status"], status, "kill {nth}: {ending}");
            } else {
                before_first_checkpoint += 1;
                for command in ["show", "resume", "cancel", "verify"] {
                    let output = sandbox.planrun().args([command, RUN]).run();
                    assert_eq!(output.code, 2, "kill {nth}: {command}\n{}", output.snapshot());
                    assert!(output.stderr.contains("no run `e`"), "kill {nth}: {command}: {}", output.stderr);
                }
                let again = sandbox.planrun().args(["--plan", PLAN, "--run-id", RUN]).run();
                assert_eq!(again.code, 0, "kill {nth}: the id is not burned\n{}", again.snapshot());
                let left: Vec<_> = std::fs::read_dir(sandbox.workspace().join("runs"))
                    .expect("runs")
                    .flatten()
                    .map(|entry| entry.file_name().to_string_lossy().into_owned())
                    .collect();
                assert_eq!(left, [RUN], "kill {nth}: the interrupted start was cleared");
                assert_eq!(sandbox.state(RUN)["status"], "done");
            }
        }
        assert!(nth < 50, "the run has more renames than expected");
    }
}
