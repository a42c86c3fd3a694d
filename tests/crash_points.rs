//! The crash harness: real `planrun` processes killed with `SIGKILL` at
//! every persistence point of a run, of an approval and of a resume, then
//! recovered (resumed, approved, started again) until the run ends or
//! cannot go on without a person.
//!
//! How: one clean trajectory is traced with `strace -f` over the syscalls
//! that can persist something (writes to files, syncs, renames, creating
//! opens, links, truncations, folder changes; reads and terminal output are
//! left out), which lists its persistence points as "the n-th `fsync`" and
//! so on. Each point is then replayed in a fresh sandbox under
//! `strace -e inject=<syscall>:signal=KILL:when=<n>` (the count is per
//! syscall and per process, as in the clean trace, which also proves that
//! one process does all the persisting: a child's output is not traced),
//! so the process dies on entering exactly that syscall. Nothing here knows the record layout: the
//! points come from the syscalls, and the verdict from `planrun show --json`,
//! `planrun verify`, `tickets.json` and the target file of a keyed write.
//!
//! For every kill point:
//! - never stuck: `show` works (or, killed before the first checkpoint, every
//!   command says there is no such run and the id starts afresh), `cancel`
//!   works on a copy, and recovery ends `done` or in a documented state
//!   (`tool_result_uncertain` with a reconciliation record), after which
//!   `verify` passes;
//! - no keyed effect applied twice: the ticket's `close_count` is at most 1,
//!   a keyed `write_file` target is written at most once over the killed
//!   process and every recovery (each write replaces the file: a new inode);
//! - the ticket demo's resume: at least 95 % of its kill points end `done`,
//!   and every close that happened before the kill and was not yet covered
//!   by a checkpoint is recovered from the ticket store's receipt.
//!
//! The ticket demo's resume is killed again under `PLANRUN_HMAC_KEY`, where
//! a sealed `done` receipt the ticket store contradicts would end uncertain:
//! no honest crash may produce one.
//!
//! `strace` must be installed (`.ci/run` installs it): without it the test
//! fails, it never skips. Each kill point starts from a copy of a sandbox
//! prepared once (the phases before it run clean), and kill points run on
//! two threads: the four scenarios (343 kill points) take about 40 s in
//! debug on 2 cores.

use std::fs;
use std::os::unix::fs::MetadataExt;
use std::path::Path;
use std::process::Command;
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};

use serde_json::Value;

use crate::common::tickets::{self, RUN};
use crate::common::{Output, Planrun, Sandbox, TEST_POLICY};

/// Syscalls that can persist something (x86_64 names).
const PERSISTING: &[&str] = &[
    "write",
    "pwrite64",
    "writev",
    "pwritev",
    "pwritev2",
    "fsync",
    "fdatasync",
    "syncfs",
    "sync_file_range",
    "rename",
    "renameat",
    "renameat2",
    "open",
    "openat",
    "creat",
    "mkdir",
    "mkdirat",
    "unlink",
    "unlinkat",
    "rmdir",
    "link",
    "linkat",
    "ftruncate",
    "truncate",
    "fallocate",
];

/// One stage of a clean trajectory: a command, its clock, its exit code.
struct Phase {
    args: &'static [&'static str],
    clock: &'static str,
    code: i32,
}

/// The effect whose repetition the scenario watches.
#[derive(Clone, Copy)]
enum Effect {
    /// The demo ticket's `close_count` in `tickets.json`.
    TicketClose,
    /// A keyed `write_file` target (relative to the workspace).
    KeyedWrite(&'static str),
}

struct Scenario {
    name: &'static str,
    setup: fn() -> Sandbox,
    /// Whether commands run from the sandbox (its own plan and policy).
    in_sandbox: bool,
    phases: &'static [Phase],
    /// The phases whose persistence points are killed (the others run clean).
    killed: std::ops::Range<usize>,
    /// `PLANRUN_HMAC_KEY` for every command, when set.
    hmac_key: Option<&'static str>,
    effect: Option<Effect>,
}

const TICKET_PHASES: &[Phase] = &[
    Phase { args: &["--plan", tickets::PLAN, "--run-id", RUN], clock: tickets::T_RUN, code: 3 },
    Phase { args: &["approve", RUN], clock: tickets::T_APPROVE, code: 0 },
    Phase { args: &["resume", RUN], clock: tickets::T_RESUME, code: 0 },
];

const SANDBOX_PLAN: &[&str] = &["--plan", "plans/test.toml", "--policies", "policies", "--run-id", RUN];

const KEYED_WRITE_PHASES: &[Phase] = &[
    Phase { args: SANDBOX_PLAN, clock: tickets::T_RUN, code: 3 },
    Phase { args: &["approve", RUN], clock: tickets::T_APPROVE, code: 0 },
    Phase { args: &["resume", RUN], clock: tickets::T_RESUME, code: 0 },
];

const PLAIN_PHASES: &[Phase] =
    &[Phase { args: &["--plan", "plans/flow_pwd.toml", "--run-id", RUN], clock: tickets::T_RUN, code: 0 }];

/// A keyed write behind an approval, then an unkeyed one: the resume's
/// kill points hit the keyed write on both sides of its effect.
const KEYED_WRITE_PLAN: &str = r#"version = 1
id = "test"

[[steps]]
id = "write"
kind = "write_file"
path = "out.txt"
content = "report v1"
approval = "required"
idempotency_key = "report-{{ run.id }}"

[[steps]]
id = "after"
kind = "write_file"
path = "after.txt"
content = "2"

[[steps]]
id = "done"
kind = "finish"
"#;

fn ticket_setup() -> Sandbox {
    tickets::ticket_sandbox("open", 0)
}

fn keyed_write_setup() -> Sandbox {
    let sandbox = Sandbox::new();
    sandbox.write_plan(KEYED_WRITE_PLAN, TEST_POLICY);
    sandbox
}

/// Where a process is killed: before its `nth` call of `syscall` in phase
/// `phase` of the trajectory.
#[derive(Debug, Clone)]
struct KillPoint {
    phase: usize,
    syscall: String,
    nth: usize,
}

/// How the run ended after the kill and its recovery.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Ending {
    Done,
    Uncertain,
}

/// One kill point's verdict.
#[derive(Debug)]
struct Verdict {
    point: KillPoint,
    ending: Ending,
    /// The effect was applied before the kill (a close counted, the target
    /// written).
    applied_before_kill: bool,
    /// The final run's evidence kinds.
    evidence: Vec<String>,
    /// Who vouched for a recovered keyed step (`vouched_by` of its record).
    vouched_by: Vec<String>,
}

impl Scenario {
    fn planrun<'s>(&self, sandbox: &'s Sandbox, args: &[&str], clock: &str) -> Planrun<'s> {
        // Killed processes leave their temporary folders, which the next
        // process removes: only this sandbox's, the same in every trial.
        let mut command = sandbox.planrun().args(args).clock(clock).private_temp();
        if let Some(key) = self.hmac_key {
            command = command.env("PLANRUN_HMAC_KEY", key);
        }
        if self.in_sandbox { command.in_sandbox() } else { command }
    }

    /// A sandbox where the phases before `phase` ran clean: each kill
    /// point of `phase` starts from a copy of it.
    fn prepared(&self, phase: usize) -> Sandbox {
        let sandbox = (self.setup)();
        for earlier in &self.phases[..phase] {
            let output = self.planrun(&sandbox, earlier.args, earlier.clock).run();
            assert_eq!(output.code, earlier.code, "{}: phase {phase}: {}", self.name, output.snapshot());
        }
        sandbox
    }

    /// A fresh copy of a prepared sandbox.
    fn copy_of(template: &Sandbox) -> Sandbox {
        let sandbox = Sandbox::new();
        copy_tree(template.path(), sandbox.path());
        sandbox
    }

    /// The persistence points of phase `phase` of a clean trajectory.
    fn persistence_points(&self, phase: usize, template: &Sandbox) -> Vec<KillPoint> {
        let sandbox = Self::copy_of(template);
        let log = sandbox.path().join("strace.log");
        let trace = format!("trace={}", PERSISTING.join(","));
        let current = &self.phases[phase];
        let strace = [
            "strace".to_string(),
            "-f".into(),
            "-qq".into(),
            "-o".into(),
            log.display().to_string(),
            "-e".into(),
            trace,
        ];
        let output = self.planrun(&sandbox, current.args, current.clock).under(strace).run();
        assert_eq!(output.code, current.code, "{}: clean traced phase {phase}: {}", self.name, output.snapshot());
        let text = fs::read_to_string(&log).expect("strace log");
        let points = parse_points(&text);
        assert!(!points.is_empty(), "{}: phase {phase} persists nothing?\n{text}", self.name);
        points.into_iter().map(|(syscall, nth)| KillPoint { phase, syscall, nth }).collect()
    }

    /// What the watched effect looks like now: the close count, or the
    /// target's identity (a new inode per write).
    fn effect_mark(&self, sandbox: &Sandbox) -> Option<(u64, i64, i64)> {
        match self.effect? {
            Effect::TicketClose => Some((tickets::close_count(sandbox, "ticket-7"), 0, 0)),
            Effect::KeyedWrite(path) => {
                let meta = fs::metadata(sandbox.workspace().join(path)).ok()?;
                Some((meta.ino(), meta.ctime(), meta.ctime_nsec()))
            }
        }
    }

    /// Runs one recovery command, counting a keyed write it applies.
    fn recovery_step(&self, sandbox: &Sandbox, args: &[&str], clock: &str, writes: &mut u32) -> Output {
        let before = self.effect_mark(sandbox);
        let output = self.planrun(sandbox, args, clock).run();
        if matches!(self.effect, Some(Effect::KeyedWrite(_))) && self.effect_mark(sandbox) != before {
            *writes += 1;
        }
        output
    }

    /// Kills the trajectory at `point`, recovers, and judges the outcome.
    fn trial(&self, point: &KillPoint, template: &Sandbox) -> Result<Verdict, String> {
        let at = |what: String| {
            format!("{} · kill before {} #{} of phase {}: {what}", self.name, point.syscall, point.nth, point.phase)
        };
        let sandbox = Self::copy_of(template);
        let phase = &self.phases[point.phase];
        let before_kill = self.effect_mark(&sandbox);
        let inject = format!("inject={}:signal=KILL:when={}", point.syscall, point.nth);
        let trace = format!("trace={}", point.syscall);
        let killed = self
            .planrun(&sandbox, phase.args, phase.clock)
            .under(["strace", "-qq", "-o", "/dev/null", "-e", trace.as_str(), "-e", inject.as_str()])
            .run();
        if killed.code != -1 && killed.code != 137 {
            return Err(at(format!(
                "the process was not killed: the trajectory is not deterministic\n{}",
                killed.snapshot()
            )));
        }
        let after_kill = self.effect_mark(&sandbox);
        let applied_before_kill = match self.effect {
            Some(Effect::TicketClose) => after_kill.map(|mark| mark.0) == Some(1),
            Some(Effect::KeyedWrite(_)) => after_kill.is_some() && after_kill != before_kill,
            None => false,
        };
        let mut writes = u32::from(applied_before_kill && matches!(self.effect, Some(Effect::KeyedWrite(_))));
        // The first round reuses the `show` that proved the run not stuck.
        let mut shown = self.never_stuck(&sandbox, point).map_err(at)?;

        let mut ending = None;
        for round in 0..10 {
            let clock = format!("2026-01-01T00:{}:00Z", 40 + 2 * round);
            let show = match shown.take() {
                Some(show) => show,
                None => self.planrun(&sandbox, &["show", RUN, "--json"], &clock).run(),
            };
            if show.code == 2 && show.stderr.contains("no run `t`") {
                if point.phase != 0 {
                    return Err(at(format!("the run vanished after it had a checkpoint\n{}", show.snapshot())));
                }
                let again = self.recovery_step(&sandbox, self.phases[0].args, &clock, &mut writes);
                if again.code != self.phases[0].code {
                    return Err(at(format!("the id could not be used again\n{}", again.snapshot())));
                }
                continue;
            }
            if show.code != 0 {
                return Err(at(format!("stuck: `show` fails\n{}", show.snapshot())));
            }
            let state: Value =
                serde_json::from_str(&show.stdout).map_err(|error| at(format!("show --json: {error}")))?;
            let command: &[&str] = match (state["status"].as_str(), state["stop_reason"].as_str()) {
                (Some("done"), _) => {
                    ending = Some((Ending::Done, state));
                    break;
                }
                (Some("failed"), Some("tool_result_uncertain")) => {
                    if !state["reconciliation"].is_object() {
                        return Err(at("`tool_result_uncertain` without a reconciliation record".to_string()));
                    }
                    ending = Some((Ending::Uncertain, state));
                    break;
                }
                (Some("waiting_approval"), _) if state["approval"].is_null() => &["approve", RUN],
                (Some("waiting_approval" | "running"), _) => &["resume", RUN],
                (status, reason) => {
                    return Err(at(format!("undocumented ending {status:?} / {reason:?}\n{}", show.stdout)));
                }
            };
            let output = self.recovery_step(&sandbox, command, &clock, &mut writes);
            if ![0, 1, 3].contains(&output.code) {
                return Err(at(format!("stuck: `{}` exits {}\n{}", command[0], output.code, output.snapshot())));
            }
        }
        let Some((ending, state)) = ending else {
            return Err(at("no end after 10 recovery rounds".to_string()));
        };
        let verify = self.planrun(&sandbox, &["verify", RUN], "2026-01-01T01:00:00Z").run();
        if verify.code != 0 {
            return Err(at(format!("the recovered run does not verify\n{}", verify.snapshot())));
        }
        match self.effect {
            Some(Effect::TicketClose) => {
                let closes = tickets::close_count(&sandbox, "ticket-7");
                let expected = if ending == Ending::Done { 1 } else { closes.min(1) };
                if closes != expected {
                    return Err(at(format!("the ticket was closed {closes} time(s), ending {ending:?}")));
                }
            }
            Some(Effect::KeyedWrite(path)) => {
                if writes > 1 {
                    return Err(at(format!("the keyed write to `{path}` was applied {writes} times")));
                }
                let content = fs::read_to_string(sandbox.workspace().join(path)).unwrap_or_default();
                if ending == Ending::Done && (writes != 1 || content != "report v1") {
                    return Err(at(format!("done, but `{path}` was written {writes} time(s) and holds {content:?}")));
                }
            }
            None => {}
        }
        let strings = |values: Option<&Vec<Value>>, field: &dyn Fn(&Value) -> Option<&str>| -> Vec<String> {
            values.into_iter().flatten().filter_map(|value| field(value).map(str::to_string)).collect()
        };
        Ok(Verdict {
            point: point.clone(),
            ending,
            applied_before_kill,
            evidence: strings(state["evidence"].as_array(), &|evidence| evidence["kind"].as_str()),
            vouched_by: strings(state["history"].as_array(), &|record| record["details"]["vouched_by"].as_str()),
        })
    }

    /// Right after the kill: `show` answers, and `cancel` works on a copy
    /// of the sandbox (exit 0, or 1 for a run that had already ended).
    /// Returns that `show --json`.
    fn never_stuck(&self, sandbox: &Sandbox, point: &KillPoint) -> Result<Option<Output>, String> {
        let show = self.planrun(sandbox, &["show", RUN, "--json"], "2026-01-01T00:39:00Z").run();
        let no_run = show.code == 2 && show.stderr.contains("no run `t`");
        if no_run {
            if point.phase != 0 {
                return Err(format!("no run after phase {} was killed\n{}", point.phase, show.snapshot()));
            }
            let verify = self.planrun(sandbox, &["verify", RUN], "2026-01-01T00:39:00Z").run();
            if verify.code != 2 || !verify.stderr.contains("no run `t`") {
                return Err(format!("`verify` of a run killed before its first checkpoint\n{}", verify.snapshot()));
            }
            // `resume` starts it again from what its log names and `cancel`
            // records it cancelled; a log that names nothing is refused
            // (exit 2), each on its own copy.
            for (command, status) in [("resume", "started"), ("cancel", "cancelled")] {
                let copy = Sandbox::new();
                copy_tree(sandbox.path(), copy.path());
                let output = self.planrun(&copy, &[command, RUN], "2026-01-01T00:39:00Z").run();
                let refused = output.code == 2
                    && (output.stderr.contains("interrupted before its first checkpoint")
                        || output.stderr.contains("no run `t`"));
                // A fresh start of the plan may pause at its gate (exit 3).
                let published = copy.workspace().join("runs").join(RUN).is_dir();
                let ended =
                    output.code != 2 && published && (status != "cancelled" || copy.state(RUN)["status"] == status);
                if !refused && !ended {
                    return Err(format!(
                        "`{command}` of a run killed before its first checkpoint\n{}",
                        output.snapshot()
                    ));
                }
            }
            return Ok(None);
        }
        if show.code != 0 {
            return Err(format!("`show` right after the kill\n{}", show.snapshot()));
        }
        let copy = Sandbox::new();
        copy_tree(sandbox.path(), copy.path());
        let cancel = self.planrun(&copy, &["cancel", RUN], "2026-01-01T00:39:00Z").run();
        let state: Value = serde_json::from_str(&show.stdout).map_err(|error| format!("show --json: {error}"))?;
        let ended = !matches!(state["status"].as_str(), Some("running" | "waiting_approval"));
        if cancel.code != 0 && !(ended && cancel.code == 1) {
            return Err(format!("`cancel` right after the kill\n{}\n{}", show.stdout, cancel.snapshot()));
        }
        Ok(Some(show))
    }

    /// Every kill point of every phase, judged on two threads.
    fn run_all(&self) -> Vec<Verdict> {
        let templates: std::collections::BTreeMap<usize, Sandbox> =
            self.killed.clone().map(|phase| (phase, self.prepared(phase))).collect();
        let points: Vec<KillPoint> =
            self.killed.clone().flat_map(|phase| self.persistence_points(phase, &templates[&phase])).collect();
        let next = AtomicUsize::new(0);
        let verdicts = Mutex::new(Vec::new());
        let failures = Mutex::new(Vec::new());
        std::thread::scope(|scope| {
            for _ in 0..2 {
                scope.spawn(|| {
                    while let Some(point) = points.get(next.fetch_add(1, Ordering::Relaxed)) {
                        match self.trial(point, &templates[&point.phase]) {
                            Ok(verdict) => verdicts.lock().expect("verdicts").push(verdict),
                            Err(failure) => failures.lock().expect("failures").push(failure),
                        }
                    }
                });
            }
        });
        let failures = failures.into_inner().expect("failures");
        assert!(
            failures.is_empty(),
            "{} of {} kill points failed:\n{}",
            failures.len(),
            points.len(),
            failures.join("\n\n")
        );
        let mut verdicts = verdicts.into_inner().expect("verdicts");
        verdicts.sort_by_key(|verdict| (verdict.point.phase, verdict.point.syscall.clone(), verdict.point.nth));
        assert_eq!(verdicts.len(), points.len());
        verdicts
    }
}

/// The persistence points of a clean `strace -f` log: `(syscall, n)` for
/// the n-th call of `syscall` by its process. Persistence must come from
/// one process (the count is per process), children's reads and output
/// are not persistence.
fn parse_points(text: &str) -> Vec<(String, usize)> {
    let mut counts: std::collections::HashMap<(String, String), usize> = std::collections::HashMap::new();
    let mut processes = std::collections::BTreeSet::new();
    let mut points = Vec::new();
    for line in text.lines() {
        let (pid, call) = match line.split_once(' ') {
            Some((pid, rest)) if pid.chars().all(|c| c.is_ascii_digit()) => (pid.to_string(), rest.trim_start()),
            _ => (String::new(), line),
        };
        if call.starts_with("<...") {
            continue;
        }
        let Some((name, args)) = call.split_once('(') else { continue };
        if !PERSISTING.contains(&name) {
            continue;
        }
        let count = counts.entry((pid.clone(), name.to_string())).or_default();
        *count += 1;
        if persists(name, args) {
            processes.insert(pid);
            points.push((name.to_string(), *count));
        }
    }
    assert!(
        processes.len() <= 1,
        "persistence from several processes {processes:?}: the kill count is per process\n{text}"
    );
    points
}

/// Whether a traced call can persist: writes to a file (not to the
/// terminal or the output pipes), opens that can create or write.
fn persists(name: &str, args: &str) -> bool {
    match name {
        "write" | "pwrite64" | "writev" | "pwritev" | "pwritev2" => {
            args.split(',').next().and_then(|fd| fd.trim().parse::<u32>().ok()).is_some_and(|fd| fd > 2)
        }
        "open" | "openat" => ["O_WRONLY", "O_RDWR", "O_CREAT", "O_TRUNC"].iter().any(|flag| args.contains(flag)),
        _ => true,
    }
}

fn copy_tree(from: &Path, to: &Path) {
    fs::create_dir_all(to).expect("copy dir");
    for entry in fs::read_dir(from).expect("read dir").flatten() {
        let target = to.join(entry.file_name());
        let kind = entry.file_type().expect("file type");
        if kind.is_dir() {
            copy_tree(&entry.path(), &target);
        } else if kind.is_file() {
            fs::copy(entry.path(), &target).expect("copy file");
        }
    }
}

fn strace_is_installed() {
    let status = Command::new("strace").arg("-V").output();
    assert!(
        status.is_ok_and(|output| output.status.success()),
        "`strace` is needed for the crash harness (apt-get install -y strace); it fails, never skips"
    );
}

fn count(verdicts: &[Verdict], phase: usize, keep: impl Fn(&Verdict) -> bool) -> usize {
    verdicts.iter().filter(|verdict| verdict.point.phase == phase && keep(verdict)).count()
}

#[test]
fn the_ticket_demo_killed_at_every_persistence_point_never_closes_twice_and_recovers_through_the_ticket_store() {
    strace_is_installed();
    let scenario = Scenario {
        name: "ticket demo",
        setup: ticket_setup,
        in_sandbox: false,
        phases: TICKET_PHASES,
        killed: 0..TICKET_PHASES.len(),
        hmac_key: None,
        effect: Some(Effect::TicketClose),
    };
    let verdicts = scenario.run_all();
    for (phase, name) in ["run", "approve", "resume"].iter().enumerate() {
        let points = count(&verdicts, phase, |_| true);
        let done = count(&verdicts, phase, |verdict| verdict.ending == Ending::Done);
        let recovered =
            count(&verdicts, phase, |verdict| verdict.evidence.iter().any(|kind| kind == "recovered_from_receipt"));
        println!(
            "crash points · ticket demo · {name}: {points} kill points, {done} done ({recovered} recovered from a receipt), {} tool_result_uncertain",
            points - done
        );
        assert!(points > 0, "{name}: no kill points");
    }
    // The resume: the close happens here.
    let points = count(&verdicts, 2, |_| true);
    let done = count(&verdicts, 2, |verdict| verdict.ending == Ending::Done);
    assert!(done * 100 >= points * 95, "only {done} of {points} kill points of the resume end `done`");
    for verdict in verdicts.iter().filter(|verdict| verdict.point.phase == 2 && verdict.applied_before_kill) {
        // Closed before the kill: either its checkpoint already covered
        // the close, or recovery asked the ticket store and reused its
        // receipt — never a second close (checked by every trial).
        let from_the_store = verdict.evidence.iter().any(|kind| kind == "recovered_from_receipt");
        let covered = verdict.evidence.iter().any(|kind| kind == "receipt");
        assert!(from_the_store || covered, "{verdict:?}");
        if from_the_store {
            assert!(verdict.vouched_by.iter().any(|by| by == "ticket_store"), "{verdict:?}");
        }
    }
    let applied = count(&verdicts, 2, |verdict| verdict.applied_before_kill);
    assert!(applied > 0, "some kill points of the resume come after the close");
    // Before the run, approval and close: every phase ends done.
    assert_eq!(count(&verdicts, 0, |verdict| verdict.ending == Ending::Done), count(&verdicts, 0, |_| true));
    assert_eq!(count(&verdicts, 1, |verdict| verdict.ending == Ending::Done), count(&verdicts, 1, |_| true));
}

#[test]
fn a_keyed_write_killed_at_every_persistence_point_is_written_once() {
    strace_is_installed();
    let scenario = Scenario {
        name: "keyed write",
        setup: keyed_write_setup,
        in_sandbox: true,
        phases: KEYED_WRITE_PHASES,
        killed: 0..KEYED_WRITE_PHASES.len(),
        hmac_key: None,
        effect: Some(Effect::KeyedWrite("out.txt")),
    };
    let verdicts = scenario.run_all();
    let points = verdicts.len();
    let done = verdicts.iter().filter(|verdict| verdict.ending == Ending::Done).count();
    let vouched = verdicts.iter().filter(|verdict| verdict.vouched_by.iter().any(|by| by == "target_digest")).count();
    println!(
        "crash points · keyed write: {points} kill points, {done} done ({vouched} vouched for by the target's digest)"
    );
    assert_eq!(done, points, "a keyed write's target can always answer: nothing is uncertain");
    assert!(verdicts.iter().any(|verdict| verdict.point.phase == 2 && verdict.applied_before_kill));
}

#[test]
fn a_plain_run_killed_at_every_persistence_point_is_resumed_to_done() {
    strace_is_installed();
    let scenario = Scenario {
        name: "flow_pwd",
        setup: Sandbox::new,
        in_sandbox: false,
        phases: PLAIN_PHASES,
        killed: 0..PLAIN_PHASES.len(),
        hmac_key: None,
        effect: None,
    };
    let verdicts = scenario.run_all();
    println!("crash points · flow_pwd: {} kill points, all done", verdicts.len());
    assert!(verdicts.iter().all(|verdict| verdict.ending == Ending::Done));
}

#[test]
fn the_ticket_demo_resume_killed_at_every_persistence_point_under_the_key_never_closes_twice() {
    // Under the key an authentic `done` note that the ticket store
    // contradicts ends uncertain: no honest crash may produce one.
    strace_is_installed();
    let scenario = Scenario {
        name: "ticket demo under the key",
        setup: ticket_setup,
        in_sandbox: false,
        phases: TICKET_PHASES,
        killed: 2..3,
        hmac_key: Some("s3cret"),
        effect: Some(Effect::TicketClose),
    };
    let verdicts = scenario.run_all();
    let done = verdicts.iter().filter(|verdict| verdict.ending == Ending::Done).count();
    let recovered =
        verdicts.iter().filter(|verdict| verdict.evidence.iter().any(|kind| kind == "recovered_from_receipt")).count();
    println!(
        "crash points · ticket demo under the key · resume: {} kill points, {done} done ({recovered} recovered from a receipt)",
        verdicts.len()
    );
    assert_eq!(done, verdicts.len(), "no honest crash leaves an uncertain close");
    assert!(recovered > 0);
}
