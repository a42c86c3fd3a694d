//! The `shell` step: the policy's verdict on the command, then the
//! program run under the step's bounds ([`run_shell`]), reported as
//! [`ShellFacts`] and, when it did not succeed, a message that says why.

use std::borrow::Cow;
use std::time::Duration;

use crate::confine::CwdRefused;
use crate::model::{Decision, FailureClass, NetworkAccess, ShellFacts, ShellRanFacts, ToolFacts};
use crate::policy::{ShellEvaluation, display_argv, evaluate_shell};
use crate::tools::children::ChildNote;
use crate::tools::sandbox::{self, SandboxError};
use crate::tools::shell::{ChildEvent, ShellCommand, ShellRun, run_shell};
use crate::tools::{ToolOutcome, Tools};

/// A shell step's own settings, rendered: its working directory
/// (workspace-relative) and the text it reads on stdin.
#[derive(Debug, Clone, Copy, Default)]
pub struct ShellSettings<'a> {
    pub cwd: Option<&'a str>,
    pub stdin: Option<&'a str>,
}

/// What the policy's verdict says, before the program is found or runs.
pub(super) fn verdict_facts(verdict: &ShellEvaluation) -> ShellFacts {
    ShellFacts {
        decision: verdict.decision,
        rule: verdict.rule.clone(),
        reason: verdict.reason.clone(),
        program: None,
        program_canonical: None,
        sandbox: None,
        ran: None,
    }
}

impl Tools<'_> {
    pub(super) fn shell(
        &mut self,
        argv: &[String],
        settings: ShellSettings<'_>,
        timeout: Duration,
        approved: bool,
    ) -> ToolOutcome {
        let shell = &self.policy.shell;
        let verdict = evaluate_shell(shell, self.workspace, &mut self.resolver, argv);
        let mut facts = verdict_facts(&verdict);
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
        // The step's folder and stdin are checked before anything starts.
        let cwd = match settings.cwd.map(|rel| self.workspace.check_cwd(rel)).transpose() {
            Ok(cwd) => cwd.unwrap_or_else(|| self.workspace.root().to_path_buf()),
            Err(CwdRefused::Denied(denied)) => {
                let message = format!("working directory {denied} (rule `{}`)", denied.rule);
                return ToolOutcome::failure(FailureClass::SecurityDenied, message, ToolFacts::Shell(facts));
            }
            Err(CwdRefused::Missing { path }) => {
                let message = format!("working directory `{path}` is not a folder of the workspace");
                return ToolOutcome::failure(FailureClass::FileError, message, ToolFacts::Shell(facts));
            }
        };
        let stdin_cap = self.policy.budget.max_output_bytes;
        if let Some(stdin) = settings.stdin.filter(|stdin| stdin.len() as u64 > stdin_cap) {
            let message = format!(
                "`{name}` was not started: its stdin is {} bytes, the limit is {stdin_cap} bytes (`budget.max_output_bytes`)",
                stdin.len()
            );
            return ToolOutcome::failure(FailureClass::SecurityDenied, message, ToolFacts::Shell(facts));
        }
        // The sandbox, with the network of the rule that allowed the command.
        let network = shell.allow.iter().find(|rule| rule.name == verdict.rule).map(|rule| &rule.network);
        let request = sandbox::Request {
            shell,
            workspace: self.workspace,
            program: &program.canonical,
            network: network.unwrap_or(&NetworkAccess::Off),
        };
        let confined = match sandbox::prepare(&request) {
            Ok(confined) => confined,
            Err(error) => {
                let class = match error {
                    SandboxError::Required(_) => FailureClass::SecurityDenied,
                    SandboxError::Io(_) => FailureClass::ExecutionError,
                };
                return ToolOutcome::failure(
                    class,
                    format!("`{name}` was not started: {error}"),
                    ToolFacts::Shell(facts),
                );
            }
        };
        facts.sandbox = Some(confined.facts);
        // A child that cannot be guarded is not started: the same failure
        // as one that cannot be spawned.
        let prepared = self.children.as_ref().map_or(Ok(()), ChildNote::prepare);
        let run = match prepared.and_then(|()| {
            // The step's own variables, then the policy's fixed ones, which
            // win on a clash.
            let env = if self.step_env.is_empty() {
                Cow::Borrowed(&shell.env)
            } else {
                let mut env = self.step_env.clone();
                env.extend(shell.env.iter().map(|(name, value)| (name.clone(), value.clone())));
                Cow::Owned(env)
            };
            let command = ShellCommand {
                program: &program.path,
                args: &argv[1..],
                env: &env,
                cwd: &cwd,
                stdin: settings.stdin.map(str::as_bytes),
                sandbox: confined.launch.as_ref(),
            };
            run_shell(&command, timeout, self.policy.budget.max_output_bytes, &self.fence, &|event| match (
                &self.children,
                event,
            ) {
                (Some(children), ChildEvent::Started(pid)) => children.started(pid),
                (Some(children), ChildEvent::Deadline(pid, deadline)) => children.deadline(pid, deadline),
                (Some(children), ChildEvent::Reaping(pid)) => {
                    children.reaping(pid);
                    Ok(())
                }
                (None, _) => Ok(()),
            })
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
        // A protected entry the program created at the top level (`.git`,
        // `.planrun/` …): the step fails; it is removed but for planrun's
        // own folders.
        let planted = confined.launch.as_ref().map(|launch| launch.planted(self.workspace)).unwrap_or_default();
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
        let message = if !planted.is_empty() {
            let names = planted.iter().map(|name| format!("`{name}`")).collect::<Vec<_>>().join(", ");
            Some(format!("`{name}` created {names} at the workspace's top level, which programs may not"))
        } else if run.fenced {
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
                let class =
                    if planted.is_empty() { FailureClass::ExecutionError } else { FailureClass::SecurityDenied };
                let mut outcome = ToolOutcome::failure(class, message, facts);
                if let Err(failure) = &mut outcome.result {
                    failure.output_text = run.stdout;
                }
                outcome
            }
        };
        outcome.stderr_text = Some(run.stderr);
        outcome
    }
}

/// The first whole non-empty line of what a program kept of its stderr,
/// for the error message (a tail that was cut starts inside a line).
fn first_stderr_line(run: &ShellRun) -> Option<&str> {
    let kept =
        if run.stderr_truncated { run.stderr.split_once('\n').map_or("", |(_, rest)| rest) } else { &run.stderr };
    kept.lines().map(str::trim).find(|line| !line.is_empty())
}

/// `1s`, `90s`, `1500ms`.
fn format_duration(duration: Duration) -> String {
    if duration.subsec_millis() == 0 {
        format!("{}s", duration.as_secs())
    } else {
        format!("{}ms", duration.as_millis())
    }
}
