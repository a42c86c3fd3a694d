//! The sandbox's temporary folders (`TMPDIR` of each program,
//! docs/effects-sandbox.md): a folder's name tells which process made it
//! (`planrun-step-<pid>-<start>-<pid namespace>-XXXXXX`), so the folder a
//! process killed with `SIGKILL` left behind is removed by the next
//! process that makes one, while the folders of processes still running
//! (a planrun in the middle of a step), of another pid namespace or user,
//! symbolic links and files of such a name, and the names of earlier
//! versions stay. Each test gives its planrun processes a `TMPDIR` of its
//! own, so no other test's processes share it.

use std::fs;
use std::os::unix::fs::symlink;
use std::path::{Path, PathBuf};
use std::process::{Child, Command};
use std::time::Duration;

use crate::common::{Sandbox, TEST_POLICY, one_step_plan, wait_until};

/// Field 22 of `/proc/<pid>/stat`: when the process started.
fn start_of(pid: u32) -> u64 {
    let stat = fs::read_to_string(format!("/proc/{pid}/stat")).expect("the process runs");
    stat.rsplit_once(')').and_then(|(_, rest)| rest.split_whitespace().nth(19)?.parse().ok()).expect("field 22")
}

/// The inode of this process's pid namespace (planrun's too).
fn pid_namespace() -> u64 {
    let link = fs::read_link("/proc/self/ns/pid").expect("/proc/self/ns/pid");
    let text = link.to_str().expect("UTF-8");
    text.strip_prefix("pid:[").and_then(|rest| rest.strip_suffix(']')?.parse().ok()).expect("pid:[N]")
}

/// The names in `dir`, sorted.
fn names(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = fs::read_dir(dir)
        .expect("the private TMPDIR")
        .map(|entry| entry.expect("entry").file_name().into_string().expect("UTF-8"))
        .collect();
    names.sort();
    names
}

/// A sandbox with its own `TMPDIR` (`tmp/`: `Planrun::private_temp`), the
/// slow plan (`plans/test.toml`: a step that sleeps until its process is
/// killed) and a quick one (`plans/quick.toml`: one `echo`).
fn setup() -> (Sandbox, PathBuf) {
    let sandbox = Sandbox::new();
    let plan = one_step_plan("kind = \"shell\"\ncommand = [\"sleep\", \"30\"]");
    sandbox.write_plan(&plan, &TEST_POLICY.replace("step_timeout_secs = 1", "step_timeout_secs = 60"));
    sandbox.write("plans/quick.toml", &one_step_plan("kind = \"shell\"\ncommand = [\"echo\", \"quick\"]"));
    let tmp = sandbox.path().join("tmp");
    fs::create_dir(&tmp).expect("the private TMPDIR");
    (sandbox, tmp)
}

/// Runs the quick plan as run `id` with the sandbox's `TMPDIR`; its step
/// ran under Landlock (so a temporary folder was made).
fn run_quick(sandbox: &Sandbox, id: &str) {
    let args = ["--plan", "plans/quick.toml", "--policies", "policies", "--run-id", id];
    sandbox.planrun().in_sandbox().args(args).private_temp().expect_code(0).run();
    let history = sandbox.history(id);
    let sandboxed = &history[0]["details"]["sandbox"]["kind"];
    assert_eq!(sandboxed, "landlock", "this kernel must have Landlock enabled: {history:?}");
}

/// A folder named as planrun names them, with a file in it.
fn plant(tmp: &Path, pid: u32, start: u64, namespace: u64, random: &str) -> String {
    let name = format!("planrun-step-{pid}-{start}-{namespace}-{random}");
    fs::create_dir_all(tmp.join(&name).join("deeper")).expect("plant a folder");
    fs::write(tmp.join(&name).join("deeper/file"), "left\n").expect("plant a file");
    name
}

/// A process id no process has now (one that has ended).
fn ended_pid() -> u32 {
    let mut child = Command::new("true").spawn().expect("start `true`");
    child.wait().expect("reap `true`");
    child.id()
}

struct Sleeper(Child);

impl Drop for Sleeper {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn a_killed_planrun_s_folder_is_removed_by_the_next_one_while_a_running_one_s_stays() {
    let (sandbox, tmp) = setup();
    let namespace = pid_namespace();
    let dead = plant(&tmp, ended_pid(), 1, namespace, "Dead01");
    let mut holder = sandbox.test_plan().private_temp().spawn();
    let noted = sandbox.workspace().join("runs/t/.child");
    assert!(wait_until(Duration::from_secs(20), || noted.exists()), "the slow step never started");
    let prefix = format!("planrun-step-{}-{}-{namespace}-", holder.id(), start_of(holder.id()));
    let held: Vec<String> = names(&tmp).into_iter().filter(|name| name.starts_with(&prefix)).collect();
    assert_eq!(held.len(), 1, "the holder's folder is named after it: {:?} ({prefix})", names(&tmp));
    let held = held[0].clone();
    assert_eq!(held.len(), prefix.len() + 6, "{held}");

    // A second process while the first is in the middle of its step (a
    // parallel test, `planrun serve`): it removes the planted folder of an
    // ended process, never the running one's.
    run_quick(&sandbox, "q1");
    assert_eq!(names(&tmp), std::slice::from_ref(&held), "the ended process's {dead} removed, the running one's kept");

    holder.kill().expect("SIGKILL the holder");
    holder.wait().expect("reap the holder");
    assert_eq!(names(&tmp), std::slice::from_ref(&held), "a killed process cannot remove its folder");
    run_quick(&sandbox, "q2");
    assert_eq!(names(&tmp), Vec::<String>::new(), "the next process removed {held}, then its own");
    // The killed holder's `sleep` runs on; `cancel` stops it.
    sandbox.planrun().in_sandbox().args(["cancel", "t"]).expect_code(0).run();
}

#[test]
fn only_folders_of_ended_processes_of_this_user_and_pid_namespace_are_removed_never_through_a_link() {
    let (sandbox, tmp) = setup();
    let namespace = pid_namespace();
    let sleeper = Sleeper(Command::new("sleep").arg("30").spawn().expect("start `sleep`"));
    let (live, ended) = (sleeper.0.id(), ended_pid());
    let start = start_of(live);

    let running = plant(&tmp, live, start, namespace, "Live01");
    let reused = plant(&tmp, live, start + 1, namespace, "Reuse1");
    let gone = plant(&tmp, ended, 1, namespace, "Dead01");
    let elsewhere = plant(&tmp, ended, 1, namespace + 1, "Ns0001");
    let not_exact = plant(&tmp, ended, 1, namespace, "Dead01.keep");
    let zero = format!("planrun-step-0{ended}-1-{namespace}-Zero01");
    fs::create_dir(tmp.join(&zero)).expect("plant");
    let earlier = "planrun-step-Old001".to_string();
    fs::create_dir(tmp.join(&earlier)).expect("plant");
    let canary = sandbox.write("canary/keep.txt", "canary\n");
    let link = format!("planrun-step-{ended}-1-{namespace}-Link01");
    symlink(canary.parent().expect("canary folder"), tmp.join(&link)).expect("plant a link");
    let file = format!("planrun-step-{ended}-1-{namespace}-File01");
    fs::write(tmp.join(&file), "a file\n").expect("plant a file");
    let mut kept = vec![running.clone(), elsewhere, not_exact, zero, earlier, link.clone(), file.clone()];
    if rustix::process::geteuid().is_root() {
        // Root can make a folder another user owns: it stays.
        let other = plant(&tmp, ended, 1, namespace, "User01");
        std::os::unix::fs::chown(tmp.join(&other), Some(65534), Some(65534)).expect("chown");
        kept.push(other);
    }
    kept.sort();

    run_quick(&sandbox, "q");
    assert_eq!(names(&tmp), kept, "removed: {reused} (its id now another process's) and {gone}");
    assert_eq!(fs::read_to_string(tmp.join(&running).join("deeper/file")).expect("kept whole"), "left\n");
    assert!(fs::symlink_metadata(tmp.join(&link)).expect("the link").file_type().is_symlink());
    assert_eq!(fs::read_to_string(&canary).expect("the link's target untouched"), "canary\n");
    assert_eq!(fs::read_to_string(tmp.join(&file)).expect("the file"), "a file\n");
}
