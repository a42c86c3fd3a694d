//! A validated plan: the steps to run and the keywords that route goals to it.

use serde::Serialize;

use crate::diag::Span;
use crate::model::{BudgetOverride, Condition, Expect, InputSpec, OnFailure, Risk, RunStatus, VerifyCheck};
use crate::template::{JsonTemplate, Template};

/// Where a model came from: the path as the user named it (relative to the
/// current directory when it is below it) and the SHA-256 of the file's bytes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SourceRef {
    pub path: String,
    pub sha256: String,
}

/// The policy a plan runs under when it names none, and the one
/// `planrun policy check` asks without `--policy`.
pub const DEFAULT_POLICY: &str = "default";

/// A plan file after validation.
///
/// Invariants: `version` was 1; step ids are unique and non-empty; every
/// template parsed; a shell step's program is a literal bare name; every file
/// path is literal or built only from `{{ run.id }}`.
#[derive(Debug, Clone, Serialize)]
pub struct Plan {
    pub id: String,
    pub description: String,
    /// Routing keywords as written (matching lowercases them).
    pub keywords: Vec<String>,
    /// Name of the policy file (`policies/<policy>.toml`);
    /// [`DEFAULT_POLICY`] when the plan names none.
    pub policy: String,
    /// Whether this plan takes the goals that match no keyword.
    pub default: bool,
    /// The status a run of this plan is documented to end with. Plans that
    /// demonstrate a negative scenario (a denied command, a bad template) say
    /// `failed`; `planrun check` then reports their expected findings as notes.
    pub expected_status: RunStatus,
    /// The values a run takes (`[inputs.NAME]`), in file order.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub inputs: Vec<InputSpec>,
    pub steps: Vec<Step>,
    /// Limits that lower the policy's budget for this plan.
    #[serde(skip_serializing_if = "BudgetOverride::is_empty")]
    pub budget: BudgetOverride,
    /// Completion checks: a run may end `done` only when all hold.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub verify: Vec<VerifyCheck>,
    /// Plans the service's controller may run instead of this one when a
    /// run of it failed and a recovery rule of the service policy rewrites
    /// the goal to one of them (ids of other plans of the catalog).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub recovery_plans: Vec<String>,
    #[serde(skip)]
    pub source: SourceRef,
    /// Span of each keyword in the source file, parallel to `keywords`.
    #[serde(skip)]
    pub keyword_spans: Vec<Span>,
}

/// One step of a plan.
#[derive(Debug, Clone, Serialize)]
pub struct Step {
    pub id: String,
    #[serde(flatten)]
    pub action: Action,
    /// Per-step timeout; never above the policy's `budget.step_timeout_secs`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub timeout_secs: Option<u64>,
    /// Max attempts for this step; never above the policy's `retry.cap`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub retry: Option<u32>,
    /// `retry_backoff`: this step's own wait settings over the policy's.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub retry_backoff: Option<crate::model::BackoffOverride>,
    /// What the step's final failure does: end the run (default) or go on.
    #[serde(skip_serializing_if = "OnFailure::is_fail")]
    pub on_failure: OnFailure,
    /// `approval = "required"`: the run pauses before this step until a
    /// person approves the frozen action.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub approval: bool,
    /// Declared risk; `None` takes the kind's default (see [`Step::risk`]).
    #[serde(rename = "risk", skip_serializing_if = "Option::is_none")]
    pub declared_risk: Option<Risk>,
    /// Receipt key for writes: literal or built only from `{{ run.id }}`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub idempotency_key: Option<Template>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub when: Option<Condition>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub expect: Option<Expect>,
    /// A `shell` step's own environment variables (names the policy's
    /// `shell.env_allow` lists); values are templates and the only place a
    /// `{{ secrets.NAME }}` may appear.
    #[serde(skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub env: std::collections::BTreeMap<String, Template>,
    /// Span of the whole step table in the source file.
    #[serde(skip)]
    pub span: Span,
}

/// What a step does, with its payload. Each kind validates its own keys.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Action {
    /// Run a program without a shell. `command[0]` is a literal bare program
    /// name; the other tokens may hold templates (their rendered values are
    /// checked by the allowlist like any other argument).
    /// `cwd` is a workspace-relative folder (literal or built from
    /// `{{ run.id }}`, confined like a file path); `stdin` is a template
    /// whose rendered text the program reads on its standard input.
    Shell {
        command: Vec<Template>,
        #[serde(skip_serializing_if = "Option::is_none")]
        cwd: Option<Template>,
        #[serde(skip_serializing_if = "Option::is_none")]
        stdin: Option<Template>,
    },
    /// Write `content`, or the rendered `json` document (pretty, with a
    /// final newline), to a workspace-relative `path`. The loader makes
    /// sure exactly one of the two is there.
    WriteFile {
        path: Template,
        #[serde(skip_serializing_if = "Option::is_none")]
        content: Option<Template>,
        #[serde(skip_serializing_if = "Option::is_none")]
        json: Option<JsonTemplate>,
    },
    /// Read a workspace-relative `path`; its text becomes the step output.
    ReadFile { path: Template },
    /// End the run `done`. The optional message becomes the step output.
    Finish {
        #[serde(skip_serializing_if = "Option::is_none")]
        message: Option<Template>,
    },
    /// A deterministic test tool: fails with `execution_error` on its first
    /// `failures` attempts, then succeeds with `output`.
    Flaky { failures: u32, output: Template },
    /// Reads a ticket of the demo ticket system (`tickets.json`); structured
    /// output with the ticket's fields, `customer_note` marked untrusted.
    TicketLookup { ticket_id: String },
    /// Closes a ticket of the demo ticket system, once per idempotency key.
    TicketClose { ticket_id: String },
    /// Calls tool `tool` of the policy's MCP server `server` (both literal)
    /// with `arguments` (a table whose string leaves are templates). The
    /// result's content is the step output, marked untrusted.
    Mcp { server: String, tool: String, arguments: JsonTemplate },
    /// Sends one HTTP request the policy's `[http]` allows. `url`'s scheme,
    /// host and port are literal (the loader checks); `headers` values are
    /// templates and may use secrets (sent, never recorded). At most one of
    /// `body` and `json`. The response body is untrusted data.
    Http {
        method: String,
        url: Template,
        #[serde(skip_serializing_if = "std::collections::BTreeMap::is_empty")]
        headers: std::collections::BTreeMap<String, Template>,
        #[serde(skip_serializing_if = "Option::is_none")]
        body: Option<Template>,
        #[serde(skip_serializing_if = "Option::is_none")]
        json: Option<JsonTemplate>,
        #[serde(skip_serializing_if = "Option::is_none")]
        max_response_bytes: Option<u64>,
        #[serde(skip_serializing_if = "Vec::is_empty")]
        response_headers: Vec<String>,
    },
    /// A bounded agent: a model proposes one action per turn, the runtime
    /// validates it and runs it through the same path as a planned step.
    Agent(crate::model::AgentSpec),
}

impl Action {
    /// The kind name as written in plan files.
    pub fn kind(&self) -> &'static str {
        match self {
            Action::Shell { .. } => "shell",
            Action::WriteFile { .. } => "write_file",
            Action::ReadFile { .. } => "read_file",
            Action::Finish { .. } => "finish",
            Action::Flaky { .. } => "flaky",
            Action::TicketLookup { .. } => "ticket_lookup",
            Action::TicketClose { .. } => "ticket_close",
            Action::Mcp { .. } => "mcp",
            Action::Http { .. } => "http",
            Action::Agent(_) => "agent",
        }
    }

    /// Whether a step of this kind may change something outside the run's
    /// own record (run a program, write a file, close a ticket; the test
    /// tool `flaky` counts as one too). `read_file`, `ticket_lookup` and
    /// `finish` do not: running one again after a crash changes nothing,
    /// so the checkpoint after one may wait for the next one's sync (see
    /// [`crate::store::RunHandle::checkpoint_reads`]), and whatever the run
    /// recorded is made durable before a step of this kind starts.
    /// A `GET` or `HEAD` request is a read (sending it again changes
    /// nothing, by HTTP's own rules); any other method may change the world.
    pub fn may_change_the_world(&self) -> bool {
        match self {
            Action::Http { method, .. } => !is_safe_method(method),
            _ => !matches!(self, Action::ReadFile { .. } | Action::TicketLookup { .. } | Action::Finish { .. }),
        }
    }

    /// Whether a step of this kind may ever produce structured output
    /// (`output_json`): `read_file` (when the file holds JSON), the ticket
    /// tools and `mcp`.
    pub fn may_produce_json(&self) -> bool {
        matches!(
            self,
            Action::ReadFile { .. }
                | Action::TicketLookup { .. }
                | Action::TicketClose { .. }
                | Action::Mcp { .. }
                | Action::Http { .. }
                | Action::Agent(_)
        )
    }

    /// Every template in the payload, in payload order.
    pub fn templates(&self) -> Vec<&Template> {
        match self {
            Action::Shell { command, cwd, stdin } => command.iter().chain(cwd).chain(stdin).collect(),
            Action::WriteFile { path, content, json } => {
                std::iter::once(path).chain(content).chain(json.iter().flat_map(JsonTemplate::templates)).collect()
            }
            Action::ReadFile { path } => vec![path],
            Action::Finish { message } => message.iter().collect(),
            Action::Flaky { output, .. } => vec![output],
            Action::TicketLookup { .. } | Action::TicketClose { .. } => Vec::new(),
            Action::Mcp { arguments, .. } => arguments.templates(),
            Action::Http { url, headers, body, json, .. } => std::iter::once(url)
                .chain(headers.values())
                .chain(body)
                .chain(json.iter().flat_map(JsonTemplate::templates))
                .collect(),
            Action::Agent(agent) => vec![&agent.goal],
        }
    }

    /// The risk of this kind when a step declares none.
    pub fn default_risk(&self) -> Risk {
        match self {
            // An MCP tool may do anything its server does.
            Action::WriteFile { .. } | Action::TicketClose { .. } | Action::Mcp { .. } => Risk::Write,
            Action::Http { method, .. } if !is_safe_method(method) => Risk::Write,
            _ => Risk::Read,
        }
    }
}

impl Step {
    /// The step's risk: declared, or the kind's default.
    pub fn risk(&self) -> Risk {
        self.declared_risk.unwrap_or_else(|| self.action.default_risk())
    }

    /// Every template of the step: payload, idempotency key and condition.
    pub fn templates(&self) -> Vec<&Template> {
        let mut templates = self.action.templates();
        templates.extend(self.idempotency_key.as_ref());
        templates.extend(self.when.iter().flat_map(|condition| condition.templates()));
        templates.extend(self.env.values());
        templates
    }

    /// The secrets the step's `env` (or an `http` step's `headers`) uses,
    /// by name, sorted and unique.
    pub fn secrets(&self) -> Vec<String> {
        let headers = match &self.action {
            Action::Http { headers, .. } => Some(headers.values()),
            _ => None,
        };
        secret_names(self.env.values().chain(headers.into_iter().flatten()))
    }
}

/// The secrets `templates` name, sorted and unique.
pub(crate) fn secret_names<'t>(templates: impl Iterator<Item = &'t Template>) -> Vec<String> {
    let mut names: Vec<String> = templates
        .flat_map(|template| template.references())
        .filter_map(|reference| match &reference.target {
            crate::template::RefTarget::Secret(name) => Some(name.clone()),
            _ => None,
        })
        .collect();
    names.sort();
    names.dedup();
    names
}

/// `GET` and `HEAD`: methods HTTP defines as safe (no change requested).
pub fn is_safe_method(method: &str) -> bool {
    method == "GET" || method == "HEAD"
}

impl Plan {
    /// The declared input with this name.
    pub fn input(&self, name: &str) -> Option<&InputSpec> {
        self.inputs.iter().find(|input| input.name == name)
    }

    /// The step with this id.
    pub fn step(&self, id: &str) -> Option<&Step> {
        self.steps.iter().find(|step| step.id == id)
    }
}
