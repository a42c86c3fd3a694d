//! The one declarative list of every key of plan, policy and service policy
//! files.
//!
//! Each table of a file is a [`Section`]: its keys with their type,
//! whether they are required and a one-line doc. The validators read tables
//! through [`crate::load::table::TableReader`], which takes its allowed keys
//! from these lists (and, in debug builds, refuses to read a key that is not
//! listed); `schema.rs` generates the JSON Schema from the same lists. So a
//! key exists for the validator and for editors, or for neither.
//!
//! Adding a key: add a [`KeySpec`] to its section and read it in the
//! section's validator function (for the service policy, in
//! `validate_service_policy.rs`). A key a file may leave out names its
//! default with [`KeySpec::defaults_to`], from the constant the validator
//! reads (`defaults.rs`, or the model's), so its description never says
//! another value. Adding a step kind: add a
//! [`Variant`] to [`STEP`] and build its action in `validate_step.rs`.

use std::borrow::Cow;

use crate::load::defaults::{
    DEFAULT_BUDGET, DEFAULT_DECISION, DEFAULT_FILES_DENY, DEFAULT_FLAKY_FAILURES, DEFAULT_FLAKY_OUTPUT,
    DEFAULT_MAX_BYTES, DEFAULT_RETRY_CAP, DEFAULT_SEARCH_PATH, default_attempts, default_rule_id,
};
use crate::model::{DEFAULT_BACKOFF_INITIAL_MS, DEFAULT_BACKOFF_MAX_MS, DEFAULT_BACKOFF_MULTIPLIER};
use crate::model::{
    DEFAULT_CLOCK, DEFAULT_CONTROLLER_LIMITS, DEFAULT_DECISION_TIMEOUT_SECS, DEFAULT_FOLDER, DEFAULT_GIT_BRANCH,
    DEFAULT_MAX_GOAL_CHARS, DEFAULT_MAX_TOKENS, DEFAULT_POLICY, DEFAULT_TEMPERATURE, FailureClass,
};
use DefaultValue::{Code, Computed, Float, Number};

/// What a key's value must be.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Type {
    String,
    /// A name: ASCII letters, digits, `_`, `-`, at most `max` bytes.
    Name {
        max: usize,
    },
    Integer {
        min: i64,
    },
    /// An integer from `min` to `max`, both included.
    Range {
        min: i64,
        max: i64,
    },
    /// A number (integer or float) from `min` to `max`, both included.
    Number {
        min: f64,
        max: f64,
    },
    Boolean,
    /// `version`: the integer 1.
    Version,
    /// One of these strings.
    Enum(&'static [&'static str]),
    /// The discriminator of a section with variants (a step's `kind`).
    Kind,
    Array(&'static Type),
    /// A non-empty array.
    NonEmptyArray(&'static Type),
    Table(&'static Section),
    /// A table whose keys are free and whose values have this type.
    Map(&'static Type),
    /// Any of these types.
    AnyOf(&'static [Type]),
    /// A table or an array of any depth whose string leaves are templates
    /// (a step's `json`).
    Document,
}

/// One key of a table.
#[derive(Debug, Clone, Copy)]
pub(crate) struct KeySpec {
    pub name: &'static str,
    pub ty: Type,
    pub required: bool,
    /// One line, lowercase, no final period; the default and `after`
    /// follow it (see [`KeySpec::description`]).
    pub doc: &'static str,
    /// What a file that leaves the key out gets, read from the constant the
    /// validator reads: shown as ` (default …)` after `doc`.
    pub default: Option<DefaultValue>,
    /// Text after the default (`; may hold templates`).
    pub after: &'static str,
}

/// A key's default as its description shows it.
#[derive(Debug, Clone, Copy)]
pub(crate) enum DefaultValue {
    Number(u64),
    /// Shown with its point (`0.0`).
    Float(f64),
    /// Words of code, each in backquotes, separated by commas.
    Code(&'static [&'static str]),
    /// Code made by the function the validator calls, in backquotes.
    Computed(fn() -> String),
}

impl KeySpec {
    /// This key, defaulting to `default` when a file leaves it out.
    const fn defaults_to(self, default: DefaultValue) -> KeySpec {
        KeySpec { default: Some(default), ..self }
    }

    /// This key, with `after` following its default in its description.
    const fn then(self, after: &'static str) -> KeySpec {
        KeySpec { after, ..self }
    }

    /// The key's one line: `doc`, its default, `after` (the schema's
    /// `description`).
    pub(crate) fn description(&self) -> Cow<'static, str> {
        let Some(default) = self.default else {
            return Cow::Borrowed(self.doc);
        };
        let shown = match default {
            DefaultValue::Number(number) => number.to_string(),
            DefaultValue::Float(number) => format!("{number:?}"),
            DefaultValue::Code(words) => words.iter().map(|word| format!("`{word}`")).collect::<Vec<_>>().join(", "),
            DefaultValue::Computed(code) => format!("`{}`", code()),
        };
        Cow::Owned(format!("{} (default {shown}){}", self.doc, self.after))
    }
}

/// One table of a file.
#[derive(Debug)]
pub(crate) struct Section {
    /// Human name, used as the schema title.
    pub title: &'static str,
    pub doc: &'static str,
    /// Keys every table of this section may hold.
    pub keys: &'static [KeySpec],
    /// Extra keys chosen by the [`Type::Kind`] key's value.
    pub variants: &'static [Variant],
}

/// The keys one value of the discriminator adds (a step kind's payload).
#[derive(Debug)]
pub(crate) struct Variant {
    pub name: &'static str,
    pub doc: &'static str,
    pub keys: &'static [KeySpec],
}

impl Section {
    pub(crate) fn variant(&self, name: &str) -> Option<&'static Variant> {
        self.variants.iter().find(|variant| variant.name == name)
    }
}

const fn key(name: &'static str, ty: Type, doc: &'static str) -> KeySpec {
    KeySpec { name, ty, required: false, doc, default: None, after: "" }
}

const fn required(name: &'static str, ty: Type, doc: &'static str) -> KeySpec {
    KeySpec { name, ty, required: true, doc, default: None, after: "" }
}

const STRING: Type = Type::String;
const STRINGS: Type = Type::Array(&Type::String);
/// Any finite number (a `when` bound).
const ANY_NUMBER: Type = Type::Number { min: f64::MIN, max: f64::MAX };
/// A string, a number or a boolean: an input's value.
const SCALAR: Type = Type::AnyOf(&[Type::String, Type::Integer { min: i64::MIN }, ANY_NUMBER, Type::Boolean]);
const POSITIVE: Type = Type::Integer { min: 1 };
const VERSION: KeySpec = required("version", Type::Version, "file format version; this planrun reads 1");

/// A plan file.
pub(crate) static PLAN: Section = Section {
    title: "planrun plan",
    doc: "a plan: the steps to run and the keywords that route goals to it",
    keys: &[
        VERSION,
        required("id", Type::Name { max: 64 }, "unique plan id (ASCII letters, digits, `_`, `-`)"),
        key("description", STRING, "one line shown by `planrun list` and `planrun plan`"),
        key(
            "keywords",
            STRINGS,
            "routing keywords: a goal containing one (case-insensitive) routes here; the longest match wins",
        ),
        key("policy", Type::Name { max: usize::MAX }, "the policy file's name in the policies folder")
            .defaults_to(Code(&[DEFAULT_POLICY])),
        key("default", Type::Boolean, "whether this plan takes the goals that match no keyword (exactly one plan)"),
        key(
            "expected_status",
            Type::Enum(&["done", "failed"]),
            "how a run of this plan is documented to end; `failed` turns its check warnings into notes",
        ),
        key(
            "inputs",
            Type::Map(&Type::Table(&INPUT)),
            "the values a run takes (`[inputs.NAME]`), given with `--input NAME=VALUE`, `--inputs FILE`, a request's \
             `inputs` or a scenario's `inputs`; read as `{{ inputs.NAME }}`",
        ),
        required("steps", Type::NonEmptyArray(&Type::Table(&STEP)), "the steps, run in order"),
        key("budget", Type::Table(&PLAN_BUDGET), "limits that may only lower the policy's budget for this plan"),
        key(
            "verify",
            Type::Array(&Type::Table(&VERIFY)),
            "completion checks against fresh evidence; a run may end `done` only when all hold",
        ),
        key(
            "recovery_plans",
            Type::Array(&Type::Name { max: 64 }),
            "ids of other plans the service's controller may run instead when a run of this plan failed and a \
             recovery rule rewrites the goal to one of them (default none)",
        ),
    ],
    variants: &[],
};

/// One `[inputs.NAME]` of a plan.
pub(crate) static INPUT: Section = Section {
    title: "plan input",
    doc: "a value a run takes, checked before anything runs",
    keys: &[
        required(
            "type",
            Type::Enum(crate::model::InputType::NAMES),
            "the value's type; only a `path` may fill a step's `path`",
        ),
        key("description", STRING, "one line shown by `planrun plan` and in the missing-input message"),
        key("required", Type::Boolean, "whether a run must give it (never with `default`)"),
        key("default", SCALAR, "the value when a run gives none; must fit the type and constraints"),
        key("one_of", Type::NonEmptyArray(&SCALAR), "the closed set of accepted values"),
        key("pattern", STRING, "`string` and `path`: a regex the whole value must match"),
        key("min", ANY_NUMBER, "`integer` and `number`: the smallest accepted value"),
        key("max", ANY_NUMBER, "`integer` and `number`: the largest accepted value"),
        key("max_length", POSITIVE, "`string` and `path`: at most this many characters"),
    ],
    variants: &[],
};

/// A plan's `[budget]`: downward overrides of the policy's budget.
pub(crate) static PLAN_BUDGET: Section = Section {
    title: "plan budget",
    doc: "limits for this plan; each is the smaller of this value and the policy's",
    keys: &[
        key("max_steps", POSITIVE, "steps per run"),
        key("max_tool_calls", POSITIVE, "tool calls per run (receipt and verifier look-ups count)"),
        key("max_consecutive_failures", POSITIVE, "failed attempts in a row"),
        key("step_timeout_secs", POSITIVE, "timeout of every step, in seconds"),
        key("max_run_secs", POSITIVE, "whole-run deadline in seconds, counted from the run's start"),
    ],
    variants: &[],
};

/// One `[[verify]]` check.
pub(crate) static VERIFY: Section = Section {
    title: "verify check",
    doc: "a completion check, evaluated on fresh evidence after the last step",
    keys: &[required("kind", Type::Kind, "what to check")],
    variants: &[
        Variant {
            name: "file",
            doc: "a workspace file exists (and contains a text)",
            keys: &[
                required("path", STRING, "workspace-relative path"),
                key("contains", STRING, "a text the file must contain"),
            ],
        },
        Variant {
            name: "ticket_status",
            doc: "a fresh `ticket_lookup` shows this status",
            keys: &[
                required("ticket_id", STRING, "the ticket to look up"),
                required("equals", STRING, "the status it must have"),
            ],
        },
        Variant {
            name: "receipt",
            doc: "the idempotency receipt of a step exists and matches the intent it recorded",
            keys: &[required("step", STRING, "the id of a step with an `idempotency_key`")],
        },
    ],
};

/// The comparisons of a `when` test (exactly one per test), shared by a
/// `when` with one test and the tests of its `all` or `any`.
const EQUALS: KeySpec = key("equals", STRING, "the value must equal this");
const NOT_EQUALS: KeySpec = key("not_equals", STRING, "the value must differ from this");
const CONTAINS: KeySpec = key("contains", STRING, "the value must contain this");
const MATCHES: KeySpec = key("matches", STRING, "the value must match this regex");
/// A numeric `when` bound: a number, or a template that renders one.
const BOUND: Type = Type::AnyOf(&[ANY_NUMBER, Type::String]);
const BOUND_TEMPLATE: &str = "; or a template that renders a number, such as `{{ inputs.limit }}`";
const LT: KeySpec = key("lt", BOUND, "the value, read as a number, must be less than this").then(BOUND_TEMPLATE);
const LE: KeySpec = key("le", BOUND, "the value, read as a number, must be at most this").then(BOUND_TEMPLATE);
const GT: KeySpec = key("gt", BOUND, "the value, read as a number, must be greater than this").then(BOUND_TEMPLATE);
const GE: KeySpec = key("ge", BOUND, "the value, read as a number, must be at least this").then(BOUND_TEMPLATE);
const EXISTS: KeySpec =
    key("exists", Type::Boolean, "`true`: the value must render without error and not be blank; `false`: the opposite");

/// A step's `when`.
pub(crate) static WHEN: Section = Section {
    title: "when",
    doc: "run the step only when `value` passes its test (exactly one comparison), or when `all` or `any` of a list of tests pass",
    keys: &[
        key("value", STRING, "the text tested; may hold templates; required unless `all` or `any` is given"),
        EQUALS,
        NOT_EQUALS,
        CONTAINS,
        MATCHES,
        LT,
        LE,
        GT,
        GE,
        EXISTS,
        key(
            "all",
            Type::NonEmptyArray(&Type::Table(&WHEN_TEST)),
            "every test of the list must pass (in order; one level)",
        ),
        key(
            "any",
            Type::NonEmptyArray(&Type::Table(&WHEN_TEST)),
            "at least one test of the list must pass (in order; one level)",
        ),
        key(
            "otherwise",
            Type::Enum(&["skip", "already_satisfied", "fail"]),
            "when false: skip the step (default), end the run `done` with `already_satisfied`, or end it `failed` with `condition_failed`",
        ),
        key(
            "message",
            STRING,
            "with `otherwise = \"fail\"` (and only then, required): the run's error; may hold templates",
        ),
    ],
    variants: &[],
};

/// One test of a `when`'s `all` or `any`.
pub(crate) static WHEN_TEST: Section = Section {
    title: "when test",
    doc: "`value` and exactly one comparison",
    keys: &[
        required("value", STRING, "the text tested; may hold templates"),
        EQUALS,
        NOT_EQUALS,
        CONTAINS,
        MATCHES,
        LT,
        LE,
        GT,
        GE,
        EXISTS,
    ],
    variants: &[],
};

/// A step's `expect`.
pub(crate) static EXPECT: Section = Section {
    title: "expect",
    doc: "post-conditions on the step's result; a failed one is `verification_failed`",
    keys: &[
        key("exit_code", Type::Integer { min: 0 }, "for `shell`: the exit code that counts as success (default 0)"),
        key(
            "exit_codes",
            Type::NonEmptyArray(&Type::Integer { min: 0 }),
            "for `shell`: the exit codes that count as success; not with `exit_code`",
        ),
        key("output_contains", STRING, "the output must contain this text"),
        key("output_matches", STRING, "the output must match this regex"),
        key(
            "status",
            Type::NonEmptyArray(&Type::Range { min: 100, max: 599 }),
            "for `http`: the response statuses that count as success (default any 2xx)",
        ),
    ],
    variants: &[],
};

/// One `[[steps]]` table.
pub(crate) static STEP: Section = Section {
    title: "step",
    doc: "one step: an id, a kind and the kind's payload",
    keys: &[
        required("id", Type::Name { max: 64 }, "unique step id within the plan"),
        required("kind", Type::Kind, "what the step does; decides the payload keys"),
        key(
            "timeout_secs",
            POSITIVE,
            "per-step timeout in seconds; never above the policy's `budget.step_timeout_secs`",
        ),
        key("retry", POSITIVE, "max attempts for this step; never above the policy's `retry.cap`"),
        key(
            "retry_backoff",
            Type::Table(&STEP_BACKOFF),
            "the wait before each retry of this step; keys it leaves out are the policy's `retry_backoff`",
        ),
        key(
            "on_failure",
            Type::Enum(&["fail", "continue"]),
            "after the last attempt fails: end the run `failed` (`fail`, default) or record the failure and go on (`continue`)",
        ),
        key(
            "approval",
            Type::Enum(&["required"]),
            "`required`: the run pauses before this step until a person approves the frozen action",
        ),
        key("risk", Type::Enum(&["read", "write"]), "what the step may change (default by kind)"),
        key(
            "idempotency_key",
            STRING,
            "receipt key for a write: the effect happens once per key; literal or built from `{{ run.id }}` only",
        ),
        key("when", Type::Table(&WHEN), "a condition: a false one skips the step or ends the run `already_satisfied`"),
        key("expect", Type::Table(&EXPECT), "post-conditions on the step's result"),
    ],
    variants: &[
        Variant {
            name: "shell",
            doc: "run a program without a shell, if the policy allows the whole argv",
            keys: &[
                required(
                    "command",
                    Type::AnyOf(&[Type::NonEmptyArray(&Type::String), Type::String]),
                    "argv; the program is a literal bare name, arguments may hold templates; a string is split like a shell would, without metacharacters",
                ),
                key(
                    "env",
                    Type::Map(&Type::String),
                    "the program's own environment variables (names the policy's `shell.env_allow` lists); values \
                     may hold templates, the only place `{{ secrets.NAME }}` may appear",
                ),
                key(
                    "cwd",
                    STRING,
                    "working directory: an existing workspace folder, confined like a file path; only `{{ run.id }}` may appear in it (default the workspace)",
                ),
                key(
                    "stdin",
                    STRING,
                    "text the program reads on stdin, at most the policy's `budget.max_output_bytes`; may hold templates (default none: `/dev/null`)",
                ),
            ],
        },
        Variant {
            name: "write_file",
            doc: "write a file inside the workspace",
            keys: &[
                required("path", STRING, "workspace-relative path; only `{{ run.id }}` may appear in it"),
                key("content", STRING, "the text to write; may hold templates; exactly one of `content` and `json`"),
                key(
                    "json",
                    Type::Document,
                    "a table or array written as pretty JSON with a final newline; its string leaves are templates, each rendered on its own and escaped by the serialiser",
                ),
            ],
        },
        Variant {
            name: "read_file",
            doc: "read a file inside the workspace; its text is the step output",
            keys: &[required("path", STRING, "workspace-relative path; only `{{ run.id }}` may appear in it")],
        },
        Variant {
            name: "finish",
            doc: "end the run `done`",
            keys: &[key("message", STRING, "the step output; may hold templates")],
        },
        Variant {
            name: "flaky",
            doc: "a deterministic test tool: fails its first `failures` attempts with `execution_error`",
            keys: &[
                key("failures", Type::Integer { min: 0 }, "how many attempts fail before one succeeds")
                    .defaults_to(Number(DEFAULT_FLAKY_FAILURES as u64)),
                key("output", STRING, "the output once it succeeds")
                    .defaults_to(Code(&[DEFAULT_FLAKY_OUTPUT]))
                    .then("; may hold templates"),
            ],
        },
        Variant {
            name: "ticket_lookup",
            doc: "read a ticket of the demo ticket system (`tickets.json` in the workspace)",
            keys: &[required("ticket_id", STRING, "the ticket; literal (a target never comes from step output)")],
        },
        Variant {
            name: "ticket_close",
            doc: "close a ticket of the demo ticket system (a write: give it an `idempotency_key`)",
            keys: &[required("ticket_id", STRING, "the ticket; literal (a target never comes from step output)")],
        },
        Variant {
            name: "mcp",
            doc: "call a tool of an MCP server the policy declares and pins; its result is untrusted output",
            keys: &[
                required("server", Type::Name { max: 64 }, "a server of the policy's `[mcp.servers.NAME]`; literal"),
                required("tool", STRING, "a tool the server's `tools` pins; literal"),
                key(
                    "arguments",
                    Type::Document,
                    "the tool's arguments: a table whose string leaves are templates, checked against the tool's \
                     input schema before the call (default an empty table)",
                ),
            ],
        },
        Variant {
            name: "http",
            doc: "send one HTTP request the policy's `[[http.allow]]` rules allow; the response is untrusted data",
            keys: &[
                required("method", Type::Enum(HTTP_METHODS), "the request method"),
                required(
                    "url",
                    STRING,
                    "`http://` or `https://` URL; scheme, host and port literal, path and query may hold templates \
                     (each value percent-encoded)",
                ),
                key(
                    "headers",
                    Type::Map(&Type::String),
                    "request headers; values may hold templates and `{{ secrets.NAME }}` (sent, never recorded)",
                ),
                key("body", STRING, "the request body as text; may hold templates; not with `json`"),
                key(
                    "json",
                    Type::Document,
                    "a table or array sent as the JSON body (`content-type: application/json`); its string leaves are templates",
                ),
                key(
                    "max_response_bytes",
                    POSITIVE,
                    "the largest body kept; the rest is dropped and marked (never above the policy's `http.max_response_bytes`)",
                ),
                key("response_headers", STRINGS, "response headers the step's output names (`output_json.headers`)"),
            ],
        },
        Variant {
            name: "agent",
            doc: "a bounded agent: a model proposes one action per turn, the runtime validates and runs it",
            keys: &[
                required("goal", STRING, "what the model is asked to achieve; may hold templates"),
                required(
                    "tools",
                    Type::NonEmptyArray(&Type::String),
                    "the tools offered: shell and `[[http.allow]]` rule ids of the policy, `read_file`, `write_file`, \
                     `ticket_lookup`, `ticket_close`",
                ),
                required("model", STRING, "the policy's model profile (`[models.NAME]`)"),
                required("max_turns", Type::Range { min: 1, max: 100 }, "model answers per step at most"),
                key(
                    "max_model_calls",
                    Type::Range { min: 1, max: 100 },
                    "model calls per step at most (default `max_turns`)",
                ),
                key(
                    "max_tokens_in",
                    POSITIVE,
                    "prompt tokens per step at most, as the backend counts them (default no limit)",
                ),
                key(
                    "max_tokens_out",
                    POSITIVE,
                    "answer tokens per step at most, as the backend counts them (default no limit)",
                ),
                key(
                    "max_refusals",
                    Type::Range { min: 0, max: 100 },
                    "refused proposals per step before the step fails",
                )
                .defaults_to(Number(crate::model::DEFAULT_MAX_REFUSALS as u64)),
            ],
        },
    ],
};

/// The methods an `http` step may send.
pub(crate) const HTTP_METHODS: &[&str] = crate::model::HTTP_METHODS;

/// A policy file.
pub(crate) static POLICY: Section = Section {
    title: "planrun policy",
    doc: "a policy: what a plan's steps may do; every section is optional",
    keys: &[
        VERSION,
        key("description", STRING, "one line about the policy"),
        key(
            "extends",
            STRING,
            "another policy of the same folder this one builds on: rules and deny lists add up, limits take the stricter value",
        ),
        key("shell", Type::Table(&SHELL), "the shell allowlist and blocklist"),
        key("files", Type::Table(&FILES), "file confinement beyond the always-protected `runs/`, `bridge/`, `.git/`"),
        key("retry", Type::Table(&RETRY), "max attempts per failure class and the hard cap"),
        key(
            "retry_backoff",
            Type::Table(&RETRY_BACKOFF),
            "the wait before each retry: exponential, capped, with jitter",
        ),
        key("budget", Type::Table(&BUDGET), "limits that end a run `failed` with `budget_exhausted`"),
        key(
            "secrets",
            Type::Map(&Type::Table(&SECRET)),
            "`[secrets.NAME]`: where each secret a step's `env` may use comes from (default none)",
        ),
        key("mcp", Type::Table(&MCP), "the MCP servers `mcp` steps may call (default none)"),
        key("http", Type::Table(&HTTP), "the egress policy of `http` steps (default: no request allowed)"),
        key(
            "models",
            Type::Map(&Type::Table(&MODEL)),
            "`[models.NAME]`: the model profiles agent steps may use (default none)",
        ),
    ],
    variants: &[],
};

/// A policy's `[mcp]`.
pub(crate) static MCP: Section = Section {
    title: "mcp",
    doc: "the MCP servers `mcp` steps may call",
    keys: &[key(
        "servers",
        Type::Map(&Type::Table(&MCP_SERVER)),
        "`[mcp.servers.NAME]`: one table per server (default none)",
    )],
    variants: &[],
};

/// One `[mcp.servers.NAME]` table.
pub(crate) static MCP_SERVER: Section = Section {
    title: "mcp server",
    doc: "an MCP server started over stdio: an allowlisted program, its environment and its pinned tools",
    keys: &[
        required(
            "command",
            Type::NonEmptyArray(&Type::String),
            "argv of the server: a literal bare program name and literal arguments; the shell allowlist must allow it",
        ),
        key(
            "env",
            Type::Map(&Type::String),
            "the server's own environment variables on top of `shell.env`; values may hold `{{ secrets.NAME }}` only",
        ),
        key(
            "tools",
            Type::Map(&Type::String),
            "the tools steps may call, each pinned by the digest of its definition (`sha256:…`, see `planrun mcp pin`)",
        ),
        key("description", STRING, "one line about the server"),
    ],
    variants: &[],
};

/// A policy's `[http]`.
pub(crate) static HTTP: Section = Section {
    title: "http",
    doc: "which requests `http` steps may send: deny wins, then the first matching rule allows; nothing else is sent",
    keys: &[
        key("allow", Type::Array(&Type::Table(&HTTP_RULE)), "rules; the first that matches allows"),
        key("deny", STRINGS, "hosts never reached (exact or `*.suffix`), whatever a rule says"),
        key("max_response_bytes", POSITIVE, "the largest response body a step keeps")
            .defaults_to(Number(crate::model::DEFAULT_HTTP_MAX_RESPONSE_BYTES)),
        key("timeout_secs", POSITIVE, "the longest a request may take, in seconds")
            .defaults_to(Number(crate::model::DEFAULT_HTTP_TIMEOUT_SECS)),
        key(
            "proxy",
            STRING,
            "`http://host:port`: the proxy every request goes through (default none; proxies from the environment \
             are never used)",
        ),
    ],
    variants: &[],
};

/// One `[[http.allow]]` rule.
pub(crate) static HTTP_RULE: Section = Section {
    title: "http rule",
    doc: "one `[[http.allow]]` rule",
    keys: &[
        key("id", STRING, "a stable name for records").defaults_to(Computed(|| "http.allow[<index>]".to_string())),
        key("methods", Type::NonEmptyArray(&Type::Enum(HTTP_METHODS)), "the methods allowed")
            .defaults_to(Code(&["GET"])),
        key("scheme", Type::Enum(&["https", "http"]), "the scheme").defaults_to(Code(&["https"])),
        required("host", STRING, "the host: a name (exact), `*.suffix` (any name below), or an IP address"),
        key("port", Type::Range { min: 1, max: 65535 }, "the port (default the scheme's: 443 or 80)"),
        key("path", STRING, "a path prefix, matched by segment (`/v1` takes `/v1/…`, never `/v1beta`)")
            .defaults_to(Code(&["/"])),
        key("path_matches", STRING, "a regex the whole path must also match"),
        key(
            "private",
            Type::Boolean,
            "whether loopback, private, link-local and cloud-metadata addresses may be reached (default false)",
        ),
        key(
            "redirects",
            Type::Range { min: 0, max: crate::model::MAX_HTTP_REDIRECTS as i64 },
            "redirect hops followed, each judged by the policy again (default 0: none)",
        ),
        key("reason", STRING, "why the rule exists; shown with every decision it makes"),
        key("match", STRINGS, "example URLs the rule must allow with its first method (checked at load)"),
        key("not_match", STRINGS, "example URLs the rule must not allow with its first method (checked at load)"),
    ],
    variants: &[],
};

/// One `[models.NAME]` table of a policy.
pub(crate) static MODEL: Section = Section {
    title: "model profile",
    doc: "how an agent step reaches its model",
    keys: &[
        required(
            "backend",
            Type::Enum(&["openai", "ollama"]),
            "the protocol: OpenAI-compatible chat completions or Ollama's API",
        ),
        required(
            "endpoint",
            STRING,
            "`http://host:port` or `https://host[:port]` (with a path such as `/v1` for `openai`)",
        ),
        required("model", STRING, "the model name the server knows"),
        key("temperature", Type::Number { min: 0.0, max: 2.0 }, "sampling temperature").defaults_to(Float(0.0)),
        key("max_tokens", Type::Range { min: 16, max: 32768 }, "the answer's token limit").defaults_to(Number(512)),
        key("timeout_secs", Type::Range { min: 1, max: 3600 }, "one model call; on expiry the step fails")
            .defaults_to(Number(60)),
        key("api_key", STRING, "the secret (`[secrets.NAME]`) holding the bearer token (default none: no header)"),
        key(
            "ca_file",
            STRING,
            "`https://` only: a PEM file of the CA certificates to trust instead of the system's (relative to the \
             policy file)",
        ),
    ],
    variants: &[],
};

/// One `[secrets.NAME]` table.
pub(crate) static SECRET: Section = Section {
    title: "secret",
    doc: "where a secret's value comes from (exactly one of `from_env` and `from_file`); read when a run starts, never stored",
    keys: &[
        key("from_env", STRING, "the variable of planrun's environment that holds the value"),
        key(
            "from_file",
            STRING,
            "a file that holds the value (relative to the policy file's folder); one trailing newline is trimmed",
        ),
        key("description", STRING, "one line about the secret"),
    ],
    variants: &[],
};

pub(crate) static SHELL: Section = Section {
    title: "shell",
    doc: "how shell steps are decided and run",
    keys: &[
        key("blocked", STRINGS, "programs always forbidden, checked on the name and on the resolved file"),
        key("search_path", STRINGS, "absolute folders searched for programs").defaults_to(Code(DEFAULT_SEARCH_PATH)),
        key(
            "env",
            Type::Map(&Type::String),
            "the child's whole environment (default `PATH` from `search_path`, `LANG`)",
        ),
        key("allow", Type::Array(&Type::Table(&RULE)), "rules; where several match, the strictest decision wins"),
        key(
            "env_allow",
            STRINGS,
            "names a shell step's own `env` may set (default none); the policy's `shell.env` still wins on a clash",
        ),
        key(
            "sandbox",
            Type::Enum(&["landlock", "none"]),
            "the operating-system sandbox around every program a step starts: `landlock` or `none`",
        )
        .defaults_to(Code(&["landlock"])),
        key(
            "require_sandbox",
            Type::Boolean,
            "refuse to run (exit 2) where the kernel cannot enforce the sandbox, instead of running unconfined (default false)",
        ),
    ],
    variants: &[],
};

pub(crate) static RULE: Section = Section {
    title: "shell rule",
    doc: "one `[[shell.allow]]` rule",
    keys: &[
        key("id", STRING, "a stable name for records").defaults_to(Computed(|| default_rule_id("<index>"))),
        required("program", STRING, "the bare program name the rule is about"),
        key(
            "args",
            Type::NonEmptyArray(&Type::Array(&TOKEN)),
            "accepted argument lists, a matcher per token (default: the program alone)",
        ),
        key("prefix", Type::Boolean, "match only the leading arguments (refused for shells, interpreters, wrappers)"),
        key("decision", Type::Enum(&["allow", "prompt", "forbidden"]), "what a match decides")
            .defaults_to(Code(&[DEFAULT_DECISION.as_str()]))
            .then("; `prompt` makes the step wait for a person's approval"),
        key("reason", STRING, "why the rule exists; shown with every decision it makes"),
        key("match", Type::Array(&STRINGS), "argument lists the rule must accept (checked at load)"),
        key("not_match", Type::Array(&STRINGS), "argument lists the rule must refuse (checked at load)"),
        key("network", Type::Boolean, "the sandboxed program may open any network connection (default false)"),
        key(
            "network_ports",
            Type::Array(&Type::Range { min: 1, max: 65535 }),
            "the TCP ports the sandboxed program may connect to (default none; not with `network = true`)",
        ),
    ],
    variants: &[],
};

/// An argument matcher: a literal string or a token table.
const TOKEN: Type = Type::AnyOf(&[Type::String, Type::Table(&TOKEN_TABLE)]);

pub(crate) static TOKEN_TABLE: Section = Section {
    title: "token matcher",
    doc: "a token matched by regex or by a typed slot (exactly one of `regex` and `slot`)",
    keys: &[
        key("regex", STRING, "the whole token matches this regex"),
        key("slot", Type::Enum(&["path"]), "a typed slot: `path` accepts a confined workspace-relative path"),
        key("allow_dash", Type::Boolean, "whether the slot accepts a token starting with `-`"),
    ],
    variants: &[],
};

pub(crate) static FILES: Section = Section {
    title: "files",
    doc: "file confinement",
    keys: &[
        key("deny", STRINGS, "workspace-relative globs file tools never touch").defaults_to(Code(DEFAULT_FILES_DENY)),
        key("max_read_bytes", POSITIVE, "largest file a step may read").defaults_to(Number(DEFAULT_MAX_BYTES)),
        key("max_write_bytes", POSITIVE, "largest file a step may write").defaults_to(Number(DEFAULT_MAX_BYTES)),
    ],
    variants: &[],
};

/// Keys are the failure classes ([`crate::model::FailureClass::CONFIGURABLE`], a
/// test keeps them in step) and `cap`.
pub(crate) static RETRY: Section = Section {
    title: "retry",
    doc: "max attempts per failure class; `security_denied` and `template_error` are never retried",
    keys: &[
        key("security_denied", POSITIVE, "attempts after a policy denial")
            .defaults_to(Number(default_attempts(FailureClass::SecurityDenied) as u64)),
        key("template_error", POSITIVE, "attempts after an unresolvable template")
            .defaults_to(Number(default_attempts(FailureClass::TemplateError) as u64)),
        key("file_error", POSITIVE, "attempts after a file tool failure")
            .defaults_to(Number(default_attempts(FailureClass::FileError) as u64)),
        key("execution_error", POSITIVE, "attempts after a failed or timed-out process")
            .defaults_to(Number(default_attempts(FailureClass::ExecutionError) as u64)),
        key("unknown_error", POSITIVE, "attempts after any other failure")
            .defaults_to(Number(default_attempts(FailureClass::UnknownError) as u64)),
        key("cap", POSITIVE, "hard cap on attempts, whatever a step asks").defaults_to(Number(DEFAULT_RETRY_CAP)),
    ],
    variants: &[],
};

const JITTER: Type = Type::Enum(&["none", "equal", "full"]);

/// The policy's `[retry_backoff]`.
pub(crate) static RETRY_BACKOFF: Section = Section {
    title: "retry_backoff",
    doc: "the wait before each retry: `initial_ms`, then `multiplier` times longer each time, at most `max_ms`, spread by `jitter`",
    keys: &[
        key("initial_ms", Type::Integer { min: 0 }, "the wait after a step's first failure, in milliseconds")
            .defaults_to(Number(DEFAULT_BACKOFF_INITIAL_MS)),
        key("max_ms", Type::Integer { min: 0 }, "no wait is longer, whatever a step asks")
            .defaults_to(Number(DEFAULT_BACKOFF_MAX_MS)),
        key("multiplier", POSITIVE, "each wait is this many times the one before")
            .defaults_to(Number(DEFAULT_BACKOFF_MULTIPLIER as u64)),
        key(
            "jitter",
            JITTER,
            "`equal`: a point of the upper half of the wait; `full`: between zero and the wait; `none`: the wait itself",
        )
        .defaults_to(Code(&["equal"])),
    ],
    variants: &[],
};

/// A step's `retry_backoff`: the policy's keys, each optional.
pub(crate) static STEP_BACKOFF: Section = Section {
    title: "step retry_backoff",
    doc: "this step's wait before each retry; a key left out is the policy's",
    keys: &[
        key("initial_ms", Type::Integer { min: 0 }, "the wait after the step's first failure, in milliseconds"),
        key("max_ms", Type::Integer { min: 0 }, "the longest wait; never above the policy's `retry_backoff.max_ms`"),
        key("multiplier", POSITIVE, "each wait is this many times the one before"),
        key("jitter", JITTER, "`equal`, `full` or `none`"),
    ],
    variants: &[],
};

pub(crate) static BUDGET: Section = Section {
    title: "budget",
    doc: "limits per run",
    keys: &[
        key("max_steps", POSITIVE, "steps per run").defaults_to(Number(DEFAULT_BUDGET.max_steps)),
        key("max_tool_calls", POSITIVE, "tool calls per run").defaults_to(Number(DEFAULT_BUDGET.max_tool_calls)),
        key("max_consecutive_failures", POSITIVE, "failed attempts in a row")
            .defaults_to(Number(DEFAULT_BUDGET.max_consecutive_failures)),
        key("step_timeout_secs", POSITIVE, "timeout of every step, in seconds")
            .defaults_to(Number(DEFAULT_BUDGET.step_timeout_secs)),
        key("max_output_bytes", POSITIVE, "captured output per step; the rest is dropped and marked")
            .defaults_to(Number(DEFAULT_BUDGET.max_output_bytes)),
        key("max_run_secs", POSITIVE, "whole-run deadline in seconds, counted from the run's start (default none)"),
    ],
    variants: &[],
};

/// A service policy file (`policies/service/service.toml` or `.yaml`).
pub(crate) static SERVICE: Section = Section {
    title: "planrun service policy",
    doc: "the service policy of `planrun serve`: prompt guard, controller limits, recovery rules; every section is optional",
    keys: &[
        VERSION,
        key("description", STRING, "one line about the service policy"),
        key("guard", Type::Table(&GUARD), "the prompt guard, checked before anything executes"),
        key("controller", Type::Table(&CONTROLLER), "limits of the controller loop"),
        key(
            "recovery",
            Type::Array(&Type::Table(&RECOVERY)),
            "rewrite rules: when a bridge run fails and a rule matches, the controller retries with its goal",
        ),
        key("decision", Type::Table(&DECISION), "how the controller's decision requests are made"),
    ],
    variants: &[],
};

pub(crate) static DECISION: Section = Section {
    title: "decision",
    doc: "the controller's decision requests to a model; the defaults suit a small model on a CPU",
    keys: &[
        key(
            "timeout_secs",
            Type::Range { min: 1, max: 3600 },
            "one decision call; on expiry it is cancelled and the stub rules decide",
        )
        .defaults_to(Number(DEFAULT_DECISION_TIMEOUT_SECS)),
        key("max_tokens", Type::Range { min: 16, max: 4096 }, "the answer's token limit")
            .defaults_to(Number(DEFAULT_MAX_TOKENS as u64)),
        key("temperature", Type::Number { min: 0.0, max: 2.0 }, "sampling temperature")
            .defaults_to(Float(DEFAULT_TEMPERATURE)),
        key("system_prompt", STRING, "the system message, 1 to 4000 characters (default: the built-in one)"),
    ],
    variants: &[],
};

pub(crate) static GUARD: Section = Section {
    title: "guard",
    doc: "the prompt guard",
    keys: &[
        key(
            "max_goal_chars",
            Type::Range { min: 1, max: 100_000 },
            "goals longer than this, in characters, are refused",
        )
        .defaults_to(Number(DEFAULT_MAX_GOAL_CHARS as u64)),
        key("forbidden_patterns", STRINGS, "regexes; a goal matching any of them is refused (default none)"),
    ],
    variants: &[],
};

pub(crate) static CONTROLLER: Section = Section {
    title: "controller",
    doc: "limits of the controller loop",
    keys: &[
        key("max_iterations", Type::Range { min: 1, max: 20 }, "bridge runs per controller run")
            .defaults_to(Number(DEFAULT_CONTROLLER_LIMITS.max_iterations as u64)),
        key(
            "max_consecutive_failures",
            Type::Range { min: 1, max: 20 },
            "failed bridge runs in a row before the controller stops",
        )
        .defaults_to(Number(DEFAULT_CONTROLLER_LIMITS.max_consecutive_failures as u64)),
    ],
    variants: &[],
};

/// The failure class names ([`crate::model::FailureClass::ALL`], a test
/// keeps them in step).
pub(crate) const FAILURE_CLASSES: &[&str] = &[
    "security_denied",
    "template_error",
    "file_error",
    "execution_error",
    "unknown_error",
    "invalid_tool_result",
    "idempotency_conflict",
    "tool_result_uncertain",
    "verification_failed",
    "not_found",
];

pub(crate) static RECOVERY: Section = Section {
    title: "recovery rule",
    doc: "one `[[recovery]]` rule; it needs `when_failure_class` or `match`, and matches when every condition it names holds",
    keys: &[
        required("id", STRING, "a unique name, recorded with every recovery"),
        key("when_failure_class", Type::Enum(FAILURE_CLASSES), "the failure class of the failed bridge run"),
        key("match", STRING, "a regex the goal must match"),
        required("rewrite", STRING, "the goal of the retry (1 to 500 characters)"),
        key("reason", STRING, "why the rule exists (default `recovery rule <id>`)"),
    ],
    variants: &[],
};

/// An exit code a scenario expects; -1 is a process killed by a signal.
const EXIT_CODE: Type = Type::Integer { min: -1 };
/// The run statuses `expect_status` names.
const RUN_STATUSES: Type =
    Type::Enum(&["running", "waiting_approval", "done", "failed", "rejected", "cancelled", "waiting_input"]);
/// The record files of a run a scenario may snapshot.
pub(crate) const RECORD_FILES: &[&str] = &["plan.json", "state.json", "history.jsonl", "audit.jsonl"];

/// A scenario file (`plans/<plan>.scenarios.toml`).
pub(crate) static SCENARIO_FILE: Section = Section {
    title: "planrun scenarios",
    doc: "the declared scenarios of a plan: runs whose CLI output and records `planrun test` pins as golden snapshots",
    keys: &[
        VERSION,
        required("scenarios", Type::NonEmptyArray(&Type::Table(&SCENARIO)), "the scenarios, run in order"),
    ],
    variants: &[],
};

/// One `[[scenarios]]` table.
pub(crate) static SCENARIO: Section = Section {
    title: "scenario",
    doc: "one run in a fresh sandbox (exactly one of `goal` and `plan`), then its follow-up commands",
    keys: &[
        required("name", Type::Name { max: 64 }, "names its snapshots: `<name>@cli.snap`, `<name>@<record>.snap`"),
        key("goal", STRING, "run this goal (`planrun --goal`)"),
        key("plan", STRING, "run this plan file (`planrun --plan`), relative to the project root"),
        required("run_id", Type::Name { max: 64 }, "the run's id (`--run-id`)"),
        key("inputs", Type::Map(&SCALAR), "the plan's inputs for the run, each given as `--input NAME=VALUE`"),
        required("expect_code", EXIT_CODE, "the exit code of the run"),
        key("expect_status", RUN_STATUSES, "the run's status in `state.json` after the last command"),
        key("folder", Type::Name { max: 64 }, "the snapshot folder below the snapshots root")
            .defaults_to(Code(&[DEFAULT_FOLDER])),
        key("label", STRING, "a `===== <label>` line above the run's output in the CLI snapshot (default none)"),
        key("clock", STRING, "the RFC 3339 start of the run's test clock").defaults_to(Code(&[DEFAULT_CLOCK])),
        key(
            "env",
            Type::Map(&Type::String),
            "environment variables of the run (`PLANRUN_HMAC_KEY`, `PLANRUN_CRASH_AT` …)",
        ),
        key("fixtures", Type::Array(&Type::Table(&FIXTURE)), "files written into the fresh workspace before the run"),
        key(
            "git",
            Type::Array(&Type::Table(&GIT_FIXTURE)),
            "git repositories built with the real `git` in the fresh workspace, after the fixtures",
        ),
        key(
            "records",
            Type::Array(&Type::Enum(RECORD_FILES)),
            "record files of the run to snapshot (default all four)",
        ),
        key("files", STRINGS, "workspace files to snapshot after the last command"),
        key("normalize", Type::Array(&Type::Table(&NORMALIZE)), "rules for volatile text, applied to every snapshot"),
        key("steps", Type::Array(&Type::Table(&SCENARIO_STEP)), "follow-up commands against the same workspace"),
        key(
            "model_answers",
            STRINGS,
            "answers a scripted model serves in order to the scenario's agent steps (each the JSON text of one \
             answer; the last repeats), over loopback for every command (default none)",
        ),
    ],
    variants: &[],
};

/// One fixture file.
pub(crate) static FIXTURE: Section = Section {
    title: "fixture",
    doc: "a file of the fresh workspace (exactly one of `content` and `source`)",
    keys: &[
        required("path", STRING, "workspace-relative path"),
        key("content", STRING, "the file's text"),
        key("source", STRING, "a file to copy, relative to the scenario file, with its modification time"),
    ],
    variants: &[],
};

/// One git repository of a scenario's workspace.
pub(crate) static GIT_FIXTURE: Section = Section {
    title: "git fixture",
    doc: "a git repository built commit by commit with a fixed author, committer and dates, so its commit ids are stable",
    keys: &[
        required("path", STRING, "the repository's folder, workspace-relative"),
        key("branch", STRING, "the branch the commits go on").defaults_to(Code(&[DEFAULT_GIT_BRANCH])),
        required("commits", Type::NonEmptyArray(&Type::Table(&GIT_COMMIT)), "the commits, oldest first"),
    ],
    variants: &[],
};

/// One commit of a git fixture.
pub(crate) static GIT_COMMIT: Section = Section {
    title: "git fixture commit",
    doc: "one commit: files written and removed, then committed, then optionally tagged",
    keys: &[
        required("message", STRING, "the commit message"),
        key("files", Type::Map(&Type::String), "files written before the commit: repository-relative path to text"),
        key("remove", STRINGS, "files an earlier commit added, deleted before this commit"),
        key("tag", STRING, "a lightweight tag on the commit"),
    ],
    variants: &[],
};

/// One normalisation rule.
pub(crate) static NORMALIZE: Section = Section {
    title: "normalisation rule",
    doc: "every match of `regex` in a snapshot becomes `replacement`",
    keys: &[
        required("regex", STRING, "the volatile text"),
        required("replacement", STRING, "what it becomes; `$1` names a group"),
    ],
    variants: &[],
};

/// One follow-up command of a scenario.
pub(crate) static SCENARIO_STEP: Section = Section {
    title: "scenario step",
    doc: "a follow-up command run in the same sandbox after the run",
    keys: &[
        required("command", Type::NonEmptyArray(&Type::String), "planrun's arguments, e.g. `[\"resume\", \"t\"]`"),
        key("label", STRING, "the `===== <label>` line above its output (default the command's first word)"),
        key("clock", STRING, "the RFC 3339 start of its test clock").defaults_to(Code(&[DEFAULT_CLOCK])),
        key("env", Type::Map(&Type::String), "its environment variables"),
        key("expect_code", EXIT_CODE, "its exit code (default: not checked)"),
        key("normalize", Type::Array(&Type::Table(&NORMALIZE)), "rules for volatile text in its output only"),
    ],
    variants: &[],
};

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::FailureClass;

    #[test]
    fn retry_keys_are_the_failure_classes_and_the_cap() {
        let names: Vec<&str> = RETRY.keys.iter().map(|key| key.name).collect();
        let mut expected: Vec<&str> = FailureClass::CONFIGURABLE.iter().map(|class| class.as_str()).collect();
        expected.push("cap");
        assert_eq!(names, expected);
    }

    #[test]
    fn failure_class_names_are_the_failure_classes() {
        let expected: Vec<&str> = FailureClass::ALL.iter().map(|class| class.as_str()).collect();
        assert_eq!(FAILURE_CLASSES, expected.as_slice());
    }

    #[test]
    fn docs_are_one_lowercase_line_without_a_final_period() {
        fn check(section: &Section) {
            let keys = section.keys.iter().chain(section.variants.iter().flat_map(|variant| variant.keys.iter()));
            for key in keys {
                assert!(!key.doc.contains('\n') && !key.doc.ends_with('.'), "{}: {}", key.name, key.doc);
                assert!(!key.doc.starts_with(char::is_uppercase), "{}: {}", key.name, key.doc);
            }
        }
        for section in [
            &PLAN,
            &STEP,
            &POLICY,
            &SECRET,
            &MCP,
            &MCP_SERVER,
            &HTTP,
            &HTTP_RULE,
            &SHELL,
            &RULE,
            &TOKEN_TABLE,
            &FILES,
            &RETRY,
            &BUDGET,
            &SERVICE,
            &GUARD,
            &CONTROLLER,
            &RECOVERY,
            &DECISION,
        ] {
            check(section);
        }
    }
}
