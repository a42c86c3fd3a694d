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
pub mod http;
pub mod mcp;
mod mcp_step;
pub mod model_call;
mod model_tls;
mod outcome;
mod pipes;
mod process;
pub mod sandbox;
mod shell;
mod shell_step;
pub mod tickets;
mod verdict;

#[cfg(test)]
mod tests;

use std::collections::BTreeMap;
use std::time::Duration;

use crate::confine::{ProgramResolver, Workspace};
use crate::fence::Fence;
use crate::model::{Decision, FailureClass, FileFacts, FlakyFacts, Policy, ToolFacts};
use crate::redact::Redactor;
use crate::store::SharedSync;
use crate::tools::children::ChildNote;

pub use files::{FileError, TargetContent, WriteSync, read_file, target_content, write_file};
pub use outcome::{ToolFailure, ToolOutcome, ToolSuccess, Vouch};
pub use shell::{ChildEvent, STDERR_TAIL_BYTES, ShellCommand, ShellRun, run_shell};
pub use shell_step::ShellSettings;
pub use verdict::{ActionVerdict, action_verdict};

/// An action with every template rendered: exactly what will run.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
pub enum ResolvedAction {
    Shell {
        argv: Vec<String>,
        /// The step's `env` as written (templates, never a secret's value).
        #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
        env: BTreeMap<String, String>,
        /// The secrets the step's `env` gives the program, by name.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        secrets: Vec<String>,
        /// The working directory, workspace-relative; `None`: the workspace.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        cwd: Option<String>,
        /// What the program reads on stdin; `None`: nothing (`/dev/null`).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        stdin: Option<String>,
    },
    WriteFile {
        path: String,
        content: String,
    },
    ReadFile {
        path: String,
    },
    Finish {
        message: Option<String>,
    },
    Flaky {
        failures: u32,
        output: String,
    },
    TicketLookup {
        ticket_id: String,
    },
    TicketClose {
        ticket_id: String,
    },
    Mcp {
        server: String,
        tool: String,
        /// The rendered arguments (a JSON object).
        arguments: serde_json::Value,
    },
    Http {
        method: String,
        /// The URL with its templated parts rendered (percent-encoded).
        url: String,
        /// The step's `headers` as written (templates, never a secret's value).
        #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
        headers: BTreeMap<String, String>,
        /// The secrets the step's `headers` send, by name.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        secrets: Vec<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        body: Option<String>,
        /// The body is the step's `json` document.
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        json_body: bool,
        /// Accepted statuses (`expect.status`); empty: any 2xx.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        expect_status: Vec<u16>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        max_response_bytes: Option<u64>,
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        response_headers: Vec<String>,
    },
}

impl ResolvedAction {
    /// The kind name, as plan files spell it.
    pub fn kind(&self) -> &'static str {
        match self {
            ResolvedAction::Shell { .. } => "shell",
            ResolvedAction::WriteFile { .. } => "write_file",
            ResolvedAction::ReadFile { .. } => "read_file",
            ResolvedAction::Finish { .. } => "finish",
            ResolvedAction::Flaky { .. } => "flaky",
            ResolvedAction::TicketLookup { .. } => "ticket_lookup",
            ResolvedAction::TicketClose { .. } => "ticket_close",
            ResolvedAction::Mcp { .. } => "mcp",
            ResolvedAction::Http { .. } => "http",
        }
    }

    /// What the action targets, for approval scopes: `program:git`,
    /// `file:report.txt`, `ticket:ticket-7`.
    pub fn scope(&self) -> String {
        match self {
            ResolvedAction::Shell { argv, .. } => format!("program:{}", argv.first().map(String::as_str).unwrap_or("")),
            ResolvedAction::WriteFile { path, .. } | ResolvedAction::ReadFile { path } => format!("file:{path}"),
            ResolvedAction::TicketLookup { ticket_id } | ResolvedAction::TicketClose { ticket_id } => {
                format!("ticket:{ticket_id}")
            }
            ResolvedAction::Finish { .. } | ResolvedAction::Flaky { .. } => "run".to_string(),
            ResolvedAction::Mcp { server, tool, .. } => format!("mcp:{server}/{tool}"),
            ResolvedAction::Http { url, .. } => match crate::policy::HttpTarget::parse(url) {
                Ok(target) => format!("http:{}://{}:{}", target.scheme, target.host, target.port),
                Err(_) => "http:".to_string(),
            },
        }
    }
}

/// The key a keyed action runs under and the digest of the intent it was
/// first applied for (see the runtime's receipts).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ActionKey<'k> {
    pub key: &'k str,
    pub intent: &'k str,
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
    /// The run's secret values, replaced in every outcome.
    redactor: Redactor,
    /// The current step's own `env`, rendered (the policy's `shell.env`
    /// wins on a clash).
    step_env: BTreeMap<String, String>,
    /// The current `http` step's `headers`, rendered (secrets included).
    step_headers: BTreeMap<String, String>,
    /// The client and resolver of `http` steps.
    http: http::HttpTool,
}

impl<'a> Tools<'a> {
    pub fn new(workspace: &'a Workspace, policy: &'a Policy) -> Self {
        let resolver = ProgramResolver::new(&policy.shell).outside(workspace.root());
        Tools {
            workspace,
            policy,
            resolver,
            fence: Fence::unbounded(),
            children: None,
            shared_sync: None,
            redactor: Redactor::default(),
            step_env: BTreeMap::new(),
            step_headers: BTreeMap::new(),
            http: http::HttpTool::default(),
        }
    }

    /// The same tools, resolving the host names of `http` steps with
    /// `resolver` (the system's by default).
    pub fn with_resolver(mut self, resolver: std::sync::Arc<dyn http::Resolve>) -> Self {
        self.http = http::HttpTool::new(resolver);
        self
    }

    /// The rendered `headers` the next `http` step sends (secrets
    /// included; never recorded).
    pub fn set_step_headers(&mut self, headers: BTreeMap<String, String>) {
        self.step_headers = headers;
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

    /// Every outcome from now on is redacted with `redactor`.
    pub fn set_redactor(&mut self, redactor: Redactor) {
        self.redactor = redactor;
    }

    /// The environment variables the next shell step adds to the policy's
    /// (rendered from its `env`; empty for a step without one).
    pub fn set_step_env(&mut self, env: BTreeMap<String, String>) {
        self.step_env = env;
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

    /// The policy's decision for an action before it runs
    /// ([`action_verdict`]): `prompt` means the runtime must get a person's
    /// approval first (only shell rules say `prompt`); the tools decide
    /// again when they run.
    pub fn decide(&mut self, action: &ResolvedAction) -> Decision {
        action_verdict(self.policy, self.workspace, &mut self.resolver, action).decision
    }

    /// Runs one attempt of an action. `attempt` is 1-based. `approved` says
    /// whether a person approved this exact action; a command whose rule
    /// says `prompt` is refused without it (the runtime asks first; this is
    /// the last line of defence).
    /// What it reports is redacted: no secret value of the run leaves.
    pub fn execute(&mut self, action: &ResolvedAction, attempt: u32, timeout: Duration, approved: bool) -> ToolOutcome {
        let outcome = self.run_action(action, attempt, timeout, approved);
        self.redacted(outcome)
    }

    /// Redacts the run's secret values out of `outcome`: its output, structured
    /// output, stderr and message.
    fn redacted(&self, mut outcome: ToolOutcome) -> ToolOutcome {
        let redactor = &self.redactor;
        if redactor.is_empty() {
            return outcome;
        }
        match &mut outcome.result {
            Ok(success) => {
                redactor.in_place(&mut success.output_text);
                if let Some(value) = &mut success.output_json {
                    redactor.value(value);
                }
            }
            Err(failure) => {
                redactor.in_place(&mut failure.message);
                redactor.in_place(&mut failure.output_text);
            }
        }
        if let Some(stderr) = &mut outcome.stderr_text {
            redactor.in_place(stderr);
        }
        outcome
    }

    fn run_action(&mut self, action: &ResolvedAction, attempt: u32, timeout: Duration, approved: bool) -> ToolOutcome {
        let max_bytes = self.policy.files.max_read_bytes.max(self.policy.files.max_write_bytes);
        match action {
            ResolvedAction::Shell { argv, cwd, stdin, .. } => {
                let settings = ShellSettings { cwd: cwd.as_deref(), stdin: stdin.as_deref() };
                self.shell(argv, settings, timeout, approved)
            }
            ResolvedAction::TicketLookup { ticket_id } => {
                ToolOutcome::from_result(tickets::lookup(self.workspace, ticket_id, max_bytes))
            }
            ResolvedAction::TicketClose { ticket_id } => {
                ToolOutcome::from_result(tickets::close(self.workspace, ticket_id, max_bytes))
            }
            ResolvedAction::WriteFile { path, content } => self.write(path, content),
            ResolvedAction::ReadFile { path } => self.read(path),
            ResolvedAction::Mcp { server, tool, arguments } => self.mcp(server, tool, arguments, timeout),
            ResolvedAction::Http { .. } => self.http(action, None, timeout),
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

    /// What the effect says about keyed `action` (`keyed`), for the
    /// tools that can answer: the ticket system keeps the receipt of a
    /// keyed close in `tickets.json`; a file answers by its content digest.
    /// `None`: this kind of action keeps no receipts.
    pub fn vouch(&self, action: &ResolvedAction, keyed: ActionKey<'_>) -> Option<Vouch> {
        let ActionKey { key, intent } = keyed;
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
            ResolvedAction::Http { .. } => Some(Vouch::SendAgainUnderKey),
            _ => None,
        }
    }

    /// Runs one attempt of keyed `action`: like [`Tools::execute`], except
    /// that a ticket close keeps its receipt in the same atomic write.
    pub fn execute_keyed(
        &mut self,
        action: &ResolvedAction,
        keyed: ActionKey<'_>,
        attempt: u32,
        timeout: Duration,
        approved: bool,
    ) -> ToolOutcome {
        match action {
            ResolvedAction::TicketClose { ticket_id } => {
                let max_bytes = self.policy.files.max_read_bytes.max(self.policy.files.max_write_bytes);
                let outcome = ToolOutcome::from_result(tickets::close_with_receipt(
                    self.workspace,
                    ticket_id,
                    keyed.key,
                    keyed.intent,
                    max_bytes,
                ));
                self.redacted(outcome)
            }
            ResolvedAction::Http { .. } => {
                let outcome = self.http(action, Some(keyed.key), timeout);
                self.redacted(outcome)
            }
            _ => self.execute(action, attempt, timeout, approved),
        }
    }

    /// Sends an `http` action (with `Idempotency-Key: key` when keyed).
    fn http(&mut self, action: &ResolvedAction, key: Option<&str>, timeout: Duration) -> ToolOutcome {
        let ResolvedAction::Http {
            method,
            url,
            body,
            json_body,
            expect_status,
            max_response_bytes,
            response_headers,
            ..
        } = action
        else {
            return ToolOutcome::failure(FailureClass::UnknownError, "not an http action".to_string(), ToolFacts::None);
        };
        let call = http::HttpCall {
            method,
            url,
            headers: &self.step_headers,
            body: body.as_deref(),
            json_body: *json_body,
            idempotency_key: key,
            expect_status,
            max_response_bytes: *max_response_bytes,
            response_headers,
            timeout,
        };
        self.http.call(&self.policy.http, &call)
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

/// What a write reports: the same words when it runs and when a recovery
/// finds its content already in place.
fn written(bytes: impl std::fmt::Display, path: &str) -> String {
    format!("wrote {bytes} bytes to {path}")
}
