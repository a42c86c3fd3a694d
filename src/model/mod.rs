//! The validated model: what the loader produces and the runtime consumes.
//!
//! Every type here upholds its invariants by construction: the only way to get
//! a [`Plan`], a [`Policy`] or a [`ServicePolicy`] from a file is through the validator in `crate::load`, which
//! has already checked versions, keys, types, references and rule examples.
//! Later stages never re-validate and never see raw file text.

mod agent;
mod backoff;
mod condition;
mod decision_text;
mod evidence;
mod facts;
mod failure;
mod http;
mod inputs;
mod mcp;
pub(crate) mod open_words;
mod plan;
mod policy;
mod run_status;
mod scenario;
mod service_policy;
mod when;

pub use agent::{AGENT_BUILTIN_TOOLS, AgentSpec, AgentTool, DEFAULT_MAX_REFUSALS, ModelBackend, ModelProfile};
pub use backoff::{
    BackoffOverride, DEFAULT_BACKOFF_INITIAL_MS, DEFAULT_BACKOFF_MAX_MS, DEFAULT_BACKOFF_MULTIPLIER, Jitter,
    RetryBackoff,
};
pub use condition::{
    Bound, BudgetOverride, Check, Condition, ConditionTest, Evaluation, Expect, OnFailure, Risk, Test, VerifyCheck,
    WhenFalse,
};
pub use decision_text::{MAX_APPROVAL_SECS, MAX_NAME_CHARS, MAX_REASON_CHARS, check_decision_text};
pub use evidence::{
    EvidenceDetail, EvidenceKind, ReceiptEvidence, ReceiptResult, ReconciledEvidence, SatisfiedEvidence,
};
pub use facts::{
    FileFacts, FlakyFacts, KeyedFacts, ReceiptUse, ReconciledFacts, SandboxFacts, ShellFacts, ShellRanFacts,
    StepDetails, StopReason, ToolFacts, VouchedBy,
};
pub use failure::FailureClass;
pub use http::{
    DEFAULT_HTTP_MAX_RESPONSE_BYTES, DEFAULT_HTTP_TIMEOUT_SECS, HTTP_METHODS, HostPattern, HttpFacts, HttpPolicy,
    HttpProxy, HttpRule, MAX_HTTP_REDIRECTS,
};
pub use inputs::{
    GivenInput, GivenValue, InputError, InputSource, InputSpec, InputType, InputValues, check_relative_path,
    inputs_from_object, json_type, parse_input_flag, resolve_inputs,
};
pub use mcp::{McpPolicy, McpServer};
pub use plan::{Action, DEFAULT_POLICY, Plan, SourceRef, Step, is_safe_method};
pub use policy::{
    ArgMatcher, ArgPattern, Budget, Decision, FilePolicy, NetworkAccess, Policy, RetryPolicy, SandboxMode,
    SecretSource, SecretSpec, ShellPolicy, ShellRule, SlotKind,
};
pub use run_status::RunStatus;
pub use scenario::{
    DEFAULT_CLOCK, DEFAULT_FOLDER, DEFAULT_GIT_BRANCH, DEFAULT_RECORDS, Fixture, FixtureContent, GIT_FIXTURE_AUTHOR,
    GIT_FIXTURE_EPOCH, GitCommit, GitFixture, Normalize, Scenario, ScenarioFile, Stage, file_snapshot_name,
};
pub use service_policy::{
    ControllerLimits, DEFAULT_CONTROLLER_LIMITS, DEFAULT_DECISION_TIMEOUT_SECS, DEFAULT_MAX_GOAL_CHARS,
    DEFAULT_MAX_TOKENS, DEFAULT_SYSTEM_PROMPT, DEFAULT_TEMPERATURE, DecisionSettings, GuardRules, MAX_REWRITE_CHARS,
    MAX_SYSTEM_PROMPT_CHARS, RecoveryRule, ServicePolicy,
};
