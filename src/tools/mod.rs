//! Tools: what actually touches the world. The interpreter hands a tool a
//! fully resolved action (templates already rendered); the tool asks the
//! policy, then acts, and reports a [`ToolOutcome`].
//!
//! Adding a step kind: add a variant to `model::Action` and to
//! [`ResolvedAction`], declare its keys in `load/keys.rs` (a `Variant` of
//! `STEP`) and build its action in `load/validate_step.rs`, then implement
//! it here.

pub mod children;
mod files;
pub mod guard;
mod process;
mod shell;
pub mod tickets;

use std::time::Duration;

use serde_json::Value;

use crate::confine::{ProgramResolver, Workspace};
use crate::fence::Fence;
use crate::model::{Decision, FailureClass, FileFacts, FlakyFacts, Policy, ShellFacts, ShellRanFacts, ToolFacts};
use crate::policy::{display_argv, evaluate_shell};
use crate::store::SharedSync;
use crate::tools::children::ChildNote;

pub use files::{FileError, TargetContent, WriteSync, read_file, target_content, write_file};
pub use shell::{ChildEvent, STDERR_TAIL_BYTES, ShellRun, run_shell};

/// An action with every template rendered: exactly what will run.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
pub enum ResolvedAction {
    Shell { argv: Vec<String> },
    WriteFile { path: String, content: String },
    ReadFile { path: String },
    Finish { message: Option<String> },
    Flaky { failures: u32, output: String },
    TicketLookup { ticket_id: String },
    TicketClose { ticket_id: String },
}

impl ResolvedAction {
    /// What the action targets, for approval scopes: `program:git`,
    /// `file:report.txt`, `ticket:ticket-7`.
    pub fn scope(&self) -> String {
        match self {
            ResolvedAction::Shell { argv } => format!("program:{}", argv.first().map(String::as_str).unwrap_or("")),
            ResolvedAction::WriteFile { path, .. } | ResolvedAction::ReadFile { path } => format!("file:{path}"),
            ResolvedAction::TicketLookup { ticket_id } | ResolvedAction::TicketClose { ticket_id } => {
                format!("ticket:{ticket_id}")
            }
            ResolvedAction::Finish { .. } | ResolvedAction::Flaky { .. } => "run".to_string(),
        }
    }
}

/// What a successful tool call produced.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ToolSuccess {
    pub output_text: String,
    pub output_json: Option<Value>,
}

/// Why a tool call failed.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolFailure {
    pub class: FailureClass,
    /// Lowercase, no final period; names the path or program involved.
    pub message: String,
    /// What the tool printed before failing (a shell step's stdout, or the
    /// output an `expect` check refused), kept in the attempt's record and
    /// so that an `expect.exit_code` can accept a non-zero exit; usually
    /// empty.
    pub output_text: String,
}

/// A tool call's result plus facts for the records (resolved program,
/// matched rule, exit code, byte counts). `facts` never hold step output.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolOutcome {
    pub result: Result<ToolSuccess, ToolFailure>,
    pub facts: ToolFacts,
    /// The end of what a program that ran wrote to stderr (see
    /// [`STDERR_TAIL_BYTES`]), whether it succeeded or failed;
    /// `None` for tools that have no stderr.
    pub stderr_text: Option<String>,
}

/// What an effect itself says about a keyed action it may already have
/// applied: the answer a recovery asks for before anything else, instead of
/// trusting the runtime's own note.
#[derive(Debug, Clone, PartialEq)]
pub enum Vouch {
    /// Applied, with the result the effect kept (or, for a file, the
    /// result the write reports).
    Applied(ToolSuccess),
    /// Definitely not applied: running it now is the first time.
    NotApplied,
    /// The key was applied for another intent.
    Conflict(String),
    /// The effect cannot tell (unreadable, malformed, or changed since).
    CannotAnswer(String),
}

/// Per-run tool state: the workspace handle, the policy, the cache of
/// resolved programs (each program is resolved once per run) and the
/// run's fence (a shell child is killed when it stops holding).
pub struct Tools<'a> {
    pub workspace: &'a Workspace,
    pub policy: &'a Policy,
    pub resolver: ProgramResolver,
    fence: Fence,
    /// Where a shell child is noted while it runs (see `children.rs`).
    children: Option<ChildNote>,
    /// The store's durability barrier `write_file` shares, if any.
    shared_sync: Option<SharedSync>,
}

impl<'a> Tools<'a> {
    pub fn new(workspace: &'a Workspace, policy: &'a Policy) -> Self {
        let resolver = ProgramResolver::new(&policy.shell).outside(workspace.root());
        Tools { workspace, policy, resolver, fence: Fence::unbounded(), children: None, shared_sync: None }
    }

    /// The same tools, noting each shell child in `children` while it runs,
    /// so that a process continuing the run after this one was killed can
    /// stop it.
    pub fn with_children(mut self, children: Option<ChildNote>) -> Self {
        self.children = children;
        self
    }

    /// The same tools, with `write_file` waiting for `shared_sync` (the
    /// store's barrier, shared with concurrent writers) instead of syncing
    /// on its own ([`WriteSync::Shared`]).
    pub fn with_shared_sync(mut self, shared_sync: Option<SharedSync>) -> Self {
        self.shared_sync = shared_sync;
        self
    }

    /// The same tools, acting for a holder whose hold is `fence`: a
    /// command still running when the fence stops holding is killed (its
    /// whole process group).
    pub fn with_fence(mut self, fence: Fence) -> Self {
        self.fence = fence;
        self
    }

    /// The shell children started from now on are step `step_id`'s: their
    /// note names it (see `children.rs`).
    pub fn at_step(&mut self, step_id: &str) {
        if let Some(children) = &mut self.children {
            children.at_step(step_id);
        }
    }

    /// Stops the shell child a killed predecessor left running (see
    /// `children.rs`).
    pub fn stop_left_over_child(&self) -> Option<children::Stopped> {
        self.children.as_ref().and_then(ChildNote::stop_left_over)
    }

    /// Drops the note of the last shell child once the run has paused or
    /// ended, where its store keeps notes outside the run's records.
    pub fn forget_children(&self) {
        if let Some(children) = &self.children {
            children.forget();
        }
    }

    /// The policy's decision for an action before it runs: `prompt` means
    /// the runtime must get a person's approval first. Only shell commands
    /// have rules with decisions; file paths are checked when they run.
    pub fn decide(&mut self, action: &ResolvedAction) -> Decision {
        match action {
            ResolvedAction::Shell { argv } => {
                evaluate_shell(&self.policy.shell, self.workspace, &mut self.resolver, argv).decision
            }
            _ => Decision::Allow,
        }
    }

    /// Runs one attempt of an action. `attempt` is 1-based. `approved` says
    /// whether a person approved this exact action; a command whose rule
    /// says `prompt` is refused without it (the runtime asks first; this is
    /// the last line of defence).
    pub fn execute(&mut self, action: &ResolvedAction, attempt: u32, timeout: Duration, approved: bool) -> ToolOutcome {
        let max_bytes = self.policy.files.max_read_bytes.max(self.policy.files.max_write_bytes);
        match action {
            ResolvedAction::Shell { argv } => self.shell(argv, timeout, approved),
            ResolvedAction::TicketLookup { ticket_id } => {
                ToolOutcome::from_result(tickets::lookup(self.workspace, ticket_id, max_bytes))
            }
            ResolvedAction::TicketClose { ticket_id } => {
                ToolOutcome::from_result(tickets::close(self.workspace, ticket_id, max_bytes))
            }
            ResolvedAction::WriteFile { path, content } => self.write(path, content),
            ResolvedAction::ReadFile { path } => self.read(path),
            ResolvedAction::Finish { message } => {
                ToolOutcome::success(message.clone().unwrap_or_default(), None, ToolFacts::None)
            }
            ResolvedAction::Flaky { failures, output } => {
                let facts = ToolFacts::Flaky(FlakyFacts { attempt, failures: *failures });
                if attempt <= *failures {
                    ToolOutcome::failure(
                        FailureClass::ExecutionError,
                        format!("flaky: simulated failure on attempt {attempt} (this step fails its first {failures})"),
                        facts,
                    )
                } else {
                    ToolOutcome::success(output.clone(), None, facts)
                }
            }
        }
    }

    /// What the effect says about keyed `action` (`key`, `intent`), for the
    /// tools that can answer: the ticket system keeps the receipt of a
    /// keyed close in `tickets.json`; a file answers by its content digest.
    /// `None`: this kind of action keeps no receipts.
    pub fn vouch(&self, action: &ResolvedAction, key: &str, intent: &str) -> Option<Vouch> {
        let max_bytes = self.policy.files.max_read_bytes.max(self.policy.files.max_write_bytes);
        match action {
            ResolvedAction::TicketClose { .. } => Some(match tickets::receipt_for(self.workspace, key, max_bytes) {
                Ok(None) => Vouch::NotApplied,
                Ok(Some(receipt)) if receipt.intent_digest != intent => {
                    Vouch::Conflict(format!("the ticket system applied key `{key}` for another intent"))
                }
                Ok(Some(receipt)) => Vouch::Applied(ToolSuccess {
                    output_text: receipt.result["output_text"].as_str().unwrap_or_default().to_string(),
                    output_json: Some(receipt.result["output_json"].clone()).filter(|value| !value.is_null()),
                }),
                Err(failure) => Vouch::CannotAnswer(failure.message),
            }),
            ResolvedAction::WriteFile { path, content } => {
                Some(match target_content(self.workspace, path, content, self.policy.files.max_read_bytes) {
                    Ok(TargetContent::Matches { .. }) => {
                        Vouch::Applied(ToolSuccess { output_text: written(content.len(), path), output_json: None })
                    }
                    Ok(TargetContent::Missing) => Vouch::NotApplied,
                    Ok(TargetContent::Differs { sha256 }) => Vouch::CannotAnswer(format!(
                        "`{path}` holds other content (sha256 {sha256}) than the write intended: it was not applied, or was changed since"
                    )),
                    Err(error) => Vouch::CannotAnswer(error.to_string()),
                })
            }
            _ => None,
        }
    }

    /// Runs one attempt of keyed `action`: like [`Tools::execute`], except
    /// that a ticket close keeps its receipt in the same atomic write.
    pub fn execute_keyed(
        &mut self,
        action: &ResolvedAction,
        (key, intent): (&str, &str),
        attempt: u32,
        timeout: Duration,
        approved: bool,
    ) -> ToolOutcome {
        match action {
            ResolvedAction::TicketClose { ticket_id } => {
                let max_bytes = self.policy.files.max_read_bytes.max(self.policy.files.max_write_bytes);
                ToolOutcome::from_result(tickets::close_with_receipt(self.workspace, ticket_id, key, intent, max_bytes))
            }
            _ => self.execute(action, attempt, timeout, approved),
        }
    }

    fn shell(&mut self, argv: &[String], timeout: Duration, approved: bool) -> ToolOutcome {
        let shell = &self.policy.shell;
        let verdict = evaluate_shell(shell, self.workspace, &mut self.resolver, argv);
        let mut facts = ShellFacts {
            decision: verdict.decision,
            rule: verdict.rule.clone(),
            reason: verdict.reason.clone(),
            program: None,
            program_canonical: None,
            ran: None,
        };
        let name = argv.first().map(String::as_str).unwrap_or("");
        if verdict.decision == Decision::Prompt && !approved {
            return ToolOutcome::failure(
                FailureClass::SecurityDenied,
                format!("`{name}` needs a person's approval (rule `{}`)", verdict.rule),
                ToolFacts::Shell(facts),
            );
        }
        if verdict.decision == Decision::Forbidden {
            let subject =
                if argv.is_empty() { "the empty command".to_owned() } else { format!("`{}`", display_argv(argv)) };
            let verb = match verdict.rule.as_str() {
                "shell.blocked" => "is blocked by security policy",
                "shell.default-deny" => "is not in allowlist",
                "shell.bare-name" => "is not a bare program name",
                "shell.empty" => "is refused",
                _ => "is forbidden by security policy",
            };
            let subject = if verdict.rule == "shell.blocked" { format!("`{name}`") } else { subject };
            return ToolOutcome::failure(
                FailureClass::SecurityDenied,
                format!("{subject} {verb} (rule `{}`)", verdict.rule),
                ToolFacts::Shell(facts),
            );
        }
        let Some(program) = verdict.program else {
            return ToolOutcome::failure(
                FailureClass::ExecutionError,
                format!("`{name}` was not found in the policy's search path"),
                ToolFacts::Shell(facts),
            );
        };
        facts.program = Some(program.path.to_string_lossy().into_owned());
        if program.canonical != program.path {
            facts.program_canonical = Some(program.canonical.to_string_lossy().into_owned());
        }
        // A child that cannot be guarded is not started: the same failure
        // as one that cannot be spawned.
        let prepared = self.children.as_ref().map_or(Ok(()), ChildNote::prepare);
        let run = match prepared.and_then(|()| {
            run_shell(
                &program.path,
                &argv[1..],
                &shell.env,
                self.workspace.root(),
                timeout,
                self.policy.budget.max_output_bytes,
                &self.fence,
                &|event| match (&self.children, event) {
                    (Some(children), ChildEvent::Started(pid)) => children.started(pid),
                    (Some(children), ChildEvent::Deadline(pid, deadline)) => children.deadline(pid, deadline),
                    (Some(children), ChildEvent::Reaping(pid)) => {
                        children.reaping(pid);
                        Ok(())
                    }
                    (None, _) => Ok(()),
                },
            )
        }) {
            Ok(run) => run,
            Err(err) => {
                let err = err.to_string().to_lowercase();
                return ToolOutcome::failure(
                    FailureClass::ExecutionError,
                    format!("`{name}` could not be started: {err}"),
                    ToolFacts::Shell(facts),
                );
            }
        };
        // The runtime ends a fenced step as a lost lease; `fenced` says why
        // the child died, should anything read it.
        facts.ran = Some(ShellRanFacts {
            exit_code: run.exit_code,
            signal: run.signal,
            stdout_bytes: run.stdout_bytes,
            stderr_bytes: run.stderr_bytes,
            truncated: run.stdout_truncated || run.stderr_truncated,
            fenced: run.fenced,
            timed_out: run.timed_out && !run.fenced,
        });
        let facts = ToolFacts::Shell(facts);
        let message = if run.fenced {
            Some(format!("`{name}` was killed: this process's lease on the run ran out"))
        } else if run.timed_out {
            Some(format!("`{name}` timed out after {} and was killed", format_duration(timeout)))
        } else {
            match (run.exit_code, run.signal) {
                (Some(0), _) => None,
                (Some(code), _) => Some(match first_stderr_line(&run) {
                    Some(line) => format!("`{name}` exited with status {code}: {line}"),
                    None => format!("`{name}` exited with status {code}"),
                }),
                (None, Some(signal)) => Some(format!("`{name}` was killed by signal {signal}")),
                (None, None) => Some(format!("`{name}` ended without an exit status")),
            }
        };
        // Failed or not, the attempt keeps what the program printed.
        let mut outcome = match message {
            None => ToolOutcome::success(run.stdout, None, facts),
            Some(message) => {
                let mut outcome = ToolOutcome::failure(FailureClass::ExecutionError, message, facts);
                if let Err(failure) = &mut outcome.result {
                    failure.output_text = run.stdout;
                }
                outcome
            }
        };
        outcome.stderr_text = Some(run.stderr);
        outcome
    }

    fn write(&self, path: &str, content: &str) -> ToolOutcome {
        let mut facts = FileFacts { path: path.to_string(), bytes: None, decision: None, rule: None };
        let sync = self.shared_sync.as_deref().map_or(WriteSync::Own, WriteSync::Shared);
        match write_file(self.workspace, path, content, self.policy.files.max_write_bytes, sync) {
            Ok(bytes) => {
                facts.bytes = Some(bytes);
                ToolOutcome::success(written(bytes, path), None, ToolFacts::File(facts))
            }
            Err(err) => ToolOutcome::file_failure(err, facts),
        }
    }

    fn read(&self, path: &str) -> ToolOutcome {
        let mut facts = FileFacts { path: path.to_string(), bytes: None, decision: None, rule: None };
        match read_file(self.workspace, path, self.policy.files.max_read_bytes) {
            Ok(text) => {
                facts.bytes = Some(text.len() as u64);
                let json = crate::strict_json::parse(&text).ok().filter(|value| value.is_object() || value.is_array());
                ToolOutcome::success(text, json, ToolFacts::File(facts))
            }
            Err(err) => ToolOutcome::file_failure(err, facts),
        }
    }
}

/// The first whole non-empty line of what a program kept of its stderr,
/// for the error message (a tail that was cut starts inside a line).
fn first_stderr_line(run: &ShellRun) -> Option<&str> {
    let kept =
        if run.stderr_truncated { run.stderr.split_once('\n').map_or("", |(_, rest)| rest) } else { &run.stderr };
    kept.lines().map(str::trim).find(|line| !line.is_empty())
}

/// What a write reports: the same words when it runs and when a recovery
/// finds its content already in place.
fn written(bytes: impl std::fmt::Display, path: &str) -> String {
    format!("wrote {bytes} bytes to {path}")
}

impl ToolOutcome {
    fn success(output_text: String, output_json: Option<Value>, facts: ToolFacts) -> Self {
        ToolOutcome { result: Ok(ToolSuccess { output_text, output_json }), facts, stderr_text: None }
    }

    fn failure(class: FailureClass, message: String, facts: ToolFacts) -> Self {
        let failure = ToolFailure { class, message, output_text: String::new() };
        ToolOutcome { result: Err(failure), facts, stderr_text: None }
    }

    fn from_result(result: Result<ToolSuccess, ToolFailure>) -> Self {
        ToolOutcome { result, facts: ToolFacts::None, stderr_text: None }
    }

    fn file_failure(err: FileError, mut facts: FileFacts) -> Self {
        if let FileError::Denied(denied) = &err {
            facts.decision = Some(Decision::Forbidden);
            facts.rule = Some(denied.rule.clone());
            let message = format!("{denied} (rule `{}`)", denied.rule);
            return ToolOutcome::failure(FailureClass::SecurityDenied, message, ToolFacts::File(facts));
        }
        ToolOutcome::failure(err.class(), err.to_string(), ToolFacts::File(facts))
    }
}

/// `1s`, `90s`, `1500ms`.
fn format_duration(duration: Duration) -> String {
    if duration.subsec_millis() == 0 {
        format!("{}s", duration.as_secs())
    } else {
        format!("{}ms", duration.as_millis())
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;
    use std::path::{Path, PathBuf};

    use super::*;
    use crate::model::{
        ArgMatcher, ArgPattern, Budget, FilePolicy, RetryPolicy, ShellPolicy, ShellRule, SlotKind, SourceRef,
    };

    fn rule(program: &str, args: Vec<Vec<ArgMatcher>>) -> ShellRule {
        ShellRule {
            name: format!("allow-{program}"),
            program: program.to_owned(),
            args: args.into_iter().map(ArgPattern).collect(),
            prefix: false,
            decision: Decision::Allow,
            reason: None,
        }
    }

    fn lit(s: &str) -> ArgMatcher {
        ArgMatcher::Literal(s.to_owned())
    }

    fn test_policy() -> Policy {
        let any = ArgMatcher::Regex(regex::Regex::new("^(?:.*)$").expect("regex"));
        let path = ArgMatcher::Slot { kind: SlotKind::Path, allow_dash: false };
        Policy {
            name: "test".into(),
            shell: ShellPolicy {
                blocked: vec!["bash".into(), "sh".into()],
                allow: vec![
                    rule("echo", vec![vec![any.clone()]]),
                    rule("ls", vec![vec![path]]),
                    rule("sleep", vec![vec![lit("5")]]),
                    rule("bash", vec![vec![]]),
                    rule("planrun-missing-tool", vec![vec![]]),
                    rule("seq", vec![vec![any]]),
                ],
                search_path: vec![PathBuf::from("/usr/bin"), PathBuf::from("/bin")],
                env: BTreeMap::from([("LANG".to_owned(), "C".to_owned())]),
            },
            files: FilePolicy { deny: vec!["secret/**".into()], max_read_bytes: 1000, max_write_bytes: 1000 },
            retry: RetryPolicy { max_attempts: BTreeMap::new(), cap: 3 },
            budget: Budget {
                max_steps: 100,
                max_tool_calls: 100,
                max_consecutive_failures: 3,
                step_timeout_secs: 10,
                max_output_bytes: 100,
                max_run_secs: None,
            },
            source: SourceRef { path: "policies/test.toml".into(), sha256: String::new() },
        }
    }

    fn shell(argv: &[&str]) -> ResolvedAction {
        ResolvedAction::Shell { argv: argv.iter().map(|s| s.to_string()).collect() }
    }

    fn failure(outcome: &ToolOutcome) -> (FailureClass, &str) {
        match &outcome.result {
            Err(failure) => (failure.class, failure.message.as_str()),
            Ok(success) => panic!("expected a failure, got {success:?}"),
        }
    }

    /// The facts as a step record holds them.
    fn facts(outcome: &ToolOutcome) -> Value {
        let details = crate::model::StepDetails::Attempt { tool: outcome.facts.clone(), keyed: None };
        serde_json::to_value(details).expect("facts")
    }

    fn run(root: &Path, action: ResolvedAction, attempt: u32) -> ToolOutcome {
        let policy = test_policy();
        let ws = Workspace::open(root, &policy.files).expect("open");
        let mut tools = Tools::new(&ws, &policy);
        tools.execute(&action, attempt, Duration::from_secs(10), false)
    }

    #[test]
    fn shell_success_keeps_output_out_of_details() {
        let tmp = tempfile::tempdir().expect("tempdir");
        let outcome = run(tmp.path(), shell(&["echo", "hello-output"]), 1);
        let success = outcome.result.as_ref().expect("success");
        assert_eq!(success.output_text, "hello-output\n");
        let details = facts(&outcome);
        assert!(!details.to_string().contains("hello-output"), "{details}");
        assert_eq!(facts(&outcome)["decision"], "allow");
        assert_eq!(facts(&outcome)["rule"], "allow-echo");
        assert_eq!(facts(&outcome)["exit_code"], 0);
        assert_eq!(facts(&outcome)["stdout_bytes"], 13);
        assert_eq!(facts(&outcome)["truncated"], false);
        assert!(facts(&outcome)["program"].as_str().expect("program").ends_with("/echo"));
    }

    #[test]
    fn shell_truncates_to_the_budget() {
        let tmp = tempfile::tempdir().expect("tempdir");
        let outcome = run(tmp.path(), shell(&["seq", "1000"]), 1);
        let success = outcome.result.as_ref().expect("success");
        assert_eq!(success.output_text.len(), 100);
        assert_eq!(facts(&outcome)["truncated"], true);
    }

    #[test]
    fn shell_denials_name_their_rule_and_run_nothing() {
        let tmp = tempfile::tempdir().expect("tempdir");
        let outcome = run(tmp.path(), shell(&["bash"]), 1);
        assert_eq!(
            failure(&outcome),
            (FailureClass::SecurityDenied, "`bash` is blocked by security policy (rule `shell.blocked`)")
        );
        assert_eq!(facts(&outcome)["decision"], "forbidden");
        let outcome = run(tmp.path(), shell(&["touch", "created"]), 1);
        assert_eq!(
            failure(&outcome),
            (FailureClass::SecurityDenied, "`touch created` is not in allowlist (rule `shell.default-deny`)")
        );
        assert!(!tmp.path().join("created").exists());
        let outcome = run(tmp.path(), shell(&["/bin/echo", "x"]), 1);
        assert_eq!(failure(&outcome).0, FailureClass::SecurityDenied);
        assert_eq!(facts(&outcome)["rule"], "shell.bare-name");
        let outcome = run(tmp.path(), shell(&["ls", "../"]), 1);
        assert_eq!(failure(&outcome).0, FailureClass::SecurityDenied);
    }

    #[test]
    fn shell_execution_errors() {
        let tmp = tempfile::tempdir().expect("tempdir");
        let outcome = run(tmp.path(), shell(&["ls", "missing-file"]), 1);
        let (class, message) = failure(&outcome);
        assert_eq!(class, FailureClass::ExecutionError);
        assert!(message.starts_with("`ls` exited with status 2: ") && message.contains("missing-file"), "{message}");
        assert_eq!(facts(&outcome)["exit_code"], 2);
        let outcome = run(tmp.path(), shell(&["planrun-missing-tool"]), 1);
        assert_eq!(
            failure(&outcome),
            (FailureClass::ExecutionError, "`planrun-missing-tool` was not found in the policy's search path")
        );
    }

    #[test]
    fn shell_timeout() {
        let tmp = tempfile::tempdir().expect("tempdir");
        let policy = test_policy();
        let ws = Workspace::open(tmp.path(), &policy.files).expect("open");
        let mut tools = Tools::new(&ws, &policy);
        let started = std::time::Instant::now();
        let outcome = tools.execute(&shell(&["sleep", "5"]), 1, Duration::from_secs(1), false);
        assert!(started.elapsed() < Duration::from_secs(4));
        assert_eq!(failure(&outcome), (FailureClass::ExecutionError, "`sleep` timed out after 1s and was killed"));
        assert_eq!(facts(&outcome)["timed_out"], true);
    }

    #[test]
    fn files() {
        let tmp = tempfile::tempdir().expect("tempdir");
        let write =
            |path: &str, content: &str| ResolvedAction::WriteFile { path: path.into(), content: content.into() };
        let read = |path: &str| ResolvedAction::ReadFile { path: path.into() };
        let outcome = run(tmp.path(), write("out/data.json", "{\"a\": 1}"), 1);
        assert_eq!(outcome.result.as_ref().expect("ok").output_text, "wrote 8 bytes to out/data.json");
        assert_eq!(facts(&outcome)["bytes"], 8);
        assert_eq!(facts(&outcome)["path"], "out/data.json");
        let outcome = run(tmp.path(), read("out/data.json"), 1);
        let success = outcome.result.as_ref().expect("ok");
        assert_eq!(success.output_text, "{\"a\": 1}");
        assert_eq!(success.output_json, Some(serde_json::json!({"a": 1})));
        run(tmp.path(), write("n.txt", "42"), 1).result.expect("ok");
        let outcome = run(tmp.path(), read("n.txt"), 1);
        assert_eq!(outcome.result.expect("ok").output_json, None);

        let outcome = run(tmp.path(), write("../escape.txt", "x"), 1);
        let (class, message) = failure(&outcome);
        assert_eq!(class, FailureClass::SecurityDenied);
        assert!(message.contains("(rule `files.parent`)"), "{message}");
        assert_eq!(facts(&outcome)["rule"], "files.parent");
        assert!(!tmp.path().parent().expect("parent").join("escape.txt").exists());
        let outcome = run(tmp.path(), write("secret/k", "x"), 1);
        assert_eq!(facts(&outcome)["rule"], "files.deny[0]");
        assert!(!tmp.path().join("secret").exists());
        let outcome = run(tmp.path(), read("missing.txt"), 1);
        assert_eq!(failure(&outcome), (FailureClass::FileError, "`missing.txt` was not found"));
    }

    #[test]
    fn finish_and_flaky() {
        let tmp = tempfile::tempdir().expect("tempdir");
        let outcome = run(tmp.path(), ResolvedAction::Finish { message: None }, 1);
        assert_eq!(outcome.result.expect("ok").output_text, "");
        let outcome = run(tmp.path(), ResolvedAction::Finish { message: Some("bye".into()) }, 1);
        assert_eq!(outcome.result.expect("ok").output_text, "bye");
        let flaky = ResolvedAction::Flaky { failures: 2, output: "fine".into() };
        for attempt in 1..=2 {
            let outcome = run(tmp.path(), flaky.clone(), attempt);
            assert_eq!(
                failure(&outcome),
                (
                    FailureClass::ExecutionError,
                    format!("flaky: simulated failure on attempt {attempt} (this step fails its first 2)").as_str()
                )
            );
        }
        let outcome = run(tmp.path(), flaky, 3);
        assert_eq!(outcome.result.expect("ok").output_text, "fine");
    }
}
