//! The checks that only show across files: plan ids and keywords are
//! unique (routing must be unambiguous), exactly one plan is the default
//! (these routing checks are in `route_checks.rs`), every plan names an
//! existing policy, and a plan's step settings stay within its policy
//! (`retry` ≤ `retry.cap`, `timeout_secs` ≤ `budget.step_timeout_secs`, a
//! literal command or path the policy always denies). A new check goes in
//! [`cross_check`] (or `plan_vs_policy` when it needs the plan's policy, or
//! `route_findings` when it is about routing).

use std::collections::BTreeMap;
use std::path::Path;

use crate::confine::PathRules;
use crate::diag::Diagnostic;
use crate::load::loaded_plan::LoadedPlan;
use crate::load::route_checks::{recovery_plan_findings, route_findings};
use crate::model::{Action, DEFAULT_POLICY, Policy};
use crate::policy::{display_argv, evaluate_argv};

/// Which checks `cross_check` runs.
pub(super) struct Checks {
    /// Report `no-default-plan` and `unknown-recovery-plan` (only when the
    /// whole catalog is known).
    pub(super) default_required: bool,
    /// Report `unknown-policy` for policies not in the loaded set.
    pub(super) policies_known: bool,
}

/// `unknown-policy`: `loaded` names a policy that was not found.
pub(super) fn unknown_policy(loaded: &LoadedPlan, help: String) -> Diagnostic {
    let plan = &loaded.plan;
    Diagnostic::error(
        "unknown-policy",
        format!("plan `{}` names policy `{}`, which does not exist", plan.id, plan.policy),
    )
    .with_span(loaded.spans.policy.unwrap_or(loaded.spans.id))
    .with_help(help)
}

/// The findings across `plans` and `policies` that `checks` asks for.
pub(super) fn cross_check(
    plans: &[LoadedPlan],
    policies: &BTreeMap<String, Policy>,
    checks: &Checks,
    diagnostics: &mut Vec<Diagnostic>,
) {
    diagnostics.extend(route_findings(plans).into_iter().map(|finding| finding.diagnostic));
    if checks.default_required {
        diagnostics.extend(recovery_plan_findings(plans).into_iter().map(|finding| finding.diagnostic));
    }

    let defaults: Vec<&LoadedPlan> = plans.iter().filter(|loaded| loaded.plan.default).collect();
    if defaults.is_empty() && !plans.is_empty() && checks.default_required {
        diagnostics.push(
            Diagnostic::error("no-default-plan", "no plan has `default = true`")
                .with_help("mark exactly one plan `default = true`; it takes the goals that match no keyword"),
        );
    }
    for loaded in plans {
        match policies.get(&loaded.plan.policy) {
            Some(policy) => plan_vs_policy(loaded, policy, diagnostics),
            None if checks.policies_known => {
                let known = policies.keys().map(|name| format!("`{name}`")).collect::<Vec<_>>().join(", ");
                let help = if known.is_empty() {
                    "add the policy file to the policies folder".to_string()
                } else {
                    format!("known policies: {known}")
                };
                diagnostics.push(unknown_policy(loaded, help));
            }
            None => {}
        }
    }
}

fn plan_vs_policy(loaded: &LoadedPlan, policy: &Policy, diagnostics: &mut Vec<Diagnostic>) {
    // The policy's file rules, compiled once for both checks.
    let rules = PathRules::new(&policy.files);
    shell_always_denied(loaded, policy, &rules, diagnostics);
    file_always_denied(loaded, policy, &rules, diagnostics);
    crate::load::validate_secrets::plan_env_findings(loaded, policy, diagnostics);
    crate::load::validate_mcp::plan_mcp_findings(loaded, policy, diagnostics);
    crate::load::validate_http_policy::http_always_denied(loaded, policy, diagnostics);
    crate::load::validate_agent::agent_findings(loaded, policy, diagnostics);
    for (step, spans) in loaded.plan.steps.iter().zip(&loaded.spans.steps) {
        let settings = [
            (StepLimit::RetryCap, step.retry.map(u64::from), spans.retry, u64::from(policy.retry.cap)),
            (StepLimit::StepTimeout, step.timeout_secs, spans.timeout, policy.budget.step_timeout_secs),
        ];
        for (limit, asked, span, allowed) in settings {
            if let (Some(asked), Some(span)) = (asked, span)
                && asked > allowed
            {
                let finding = limit.exceeded(&step.id, &policy.name, asked, allowed);
                diagnostics.push(loaded.soften(finding.with_span(span)));
            }
        }
    }
}

/// A step setting its policy bounds: `retry` by `retry.cap`, `timeout_secs`
/// by `budget.step_timeout_secs`.
#[derive(Debug, Clone, Copy)]
enum StepLimit {
    RetryCap,
    StepTimeout,
}

impl StepLimit {
    /// The warning for step `step` asking for `asked` where policy `policy`
    /// allows `allowed`.
    fn exceeded(self, step: &str, policy: &str, asked: u64, allowed: u64) -> Diagnostic {
        match self {
            StepLimit::RetryCap => Diagnostic::warning(
                "retry-above-cap",
                format!("step `{step}` asks for {asked} attempts; policy `{policy}` caps them at {allowed}"),
            )
            .with_label(format!("at most {allowed} attempts will run"))
            .with_help("lower `retry` or raise `retry.cap` in the policy"),
            StepLimit::StepTimeout => Diagnostic::warning(
                "timeout-above-budget",
                format!("step `{step}` asks for {asked}s; policy `{policy}` allows {allowed}s per step"),
            )
            .with_label(format!("the step is stopped after {allowed}s"))
            .with_help("lower `timeout_secs` or raise `budget.step_timeout_secs`"),
        }
    }
}

/// `shell-always-denied`: a shell step whose argv is fully literal and
/// that the policy forbids before the program is even looked up (blocked
/// name, no matching rule, a forbidding rule). Path slots are judged
/// lexically, which is never stricter than the runtime, so the finding
/// is certain; a step with templates is decided at run time.
fn shell_always_denied(loaded: &LoadedPlan, policy: &Policy, rules: &PathRules, diagnostics: &mut Vec<Diagnostic>) {
    for (step, spans) in loaded.plan.steps.iter().zip(&loaded.spans.steps) {
        let Action::Shell { command, .. } = &step.action else {
            continue;
        };
        let Some(argv) = command
            .iter()
            .map(|token| token.is_literal().then(|| token.source().to_string()))
            .collect::<Option<Vec<_>>>()
        else {
            continue;
        };
        let evaluation = evaluate_argv(&policy.shell, rules, &argv);
        if evaluation.is_allowed() {
            continue;
        }
        let mut diagnostic = Diagnostic::warning(
            "shell-always-denied",
            format!(
                "policy `{}` always denies step `{}` (`{}`): rule `{}`",
                policy.name,
                step.id,
                display_argv(&argv),
                evaluation.rule
            ),
        )
        .with_label(evaluation.reason)
        .with_help(denied_help(&evaluation.rule, policy, &argv));
        if let Some(span) = spans.command.or(Some(spans.id)) {
            diagnostic = diagnostic.with_span(span);
        }
        diagnostics.push(loaded.soften(diagnostic));
    }
}

/// `file-always-denied`: a `read_file` or `write_file` step whose path
/// is literal and that the policy's file rules refuse (empty, the
/// workspace itself, a protected folder such as `runs/`, `files.deny`),
/// as `planrun plan` shows it and the run would fail `security_denied`.
/// An absolute path or one with `..` is `path-outside-workspace`'s.
fn file_always_denied(loaded: &LoadedPlan, policy: &Policy, rules: &PathRules, diagnostics: &mut Vec<Diagnostic>) {
    for (step, spans) in loaded.plan.steps.iter().zip(&loaded.spans.steps) {
        for (key, path, span) in spans.confined_paths(step) {
            if !path.is_literal() {
                continue;
            }
            let Err(denied) = rules.check_path(path.source()) else {
                continue;
            };
            if denied.rule == "files.absolute" || denied.rule == "files.parent" {
                continue;
            }
            let diagnostic = Diagnostic::warning(
                "file-always-denied",
                format!(
                    "policy `{}` always denies step `{}` ({key} `{}`): rule `{}`",
                    policy.name,
                    step.id,
                    path.source().escape_debug(),
                    denied.rule
                ),
            )
            .with_span(span.unwrap_or(spans.id))
            .with_label(denied.to_string())
            .with_help(
                "name a file inside the workspace that the policy's `[files]` allow; `planrun plan` shows the verdict",
            );
            diagnostics.push(loaded.soften(diagnostic));
        }
    }
}

/// How to fix a `shell-always-denied` step. `shell.blocked` is checked
/// before any `[[shell.allow]]` rule, so for a blocked program an allow rule
/// can never help and the hint must not suggest one (nor suggest that the
/// plan's author weaken the policy's block list).
fn denied_help(rule: &str, policy: &Policy, argv: &[String]) -> String {
    let check = format!("check it with `{}`", policy_check_command(policy, argv));
    match argv.first() {
        Some(program) if rule == "shell.blocked" => format!(
            "`{program}` is in `shell.blocked`, which no `[[shell.allow]]` rule can override: \
             use another program or a `write_file`/`read_file` step; {check}"
        ),
        _ => format!("allow the command in the policy's `[[shell.allow]]`, or {check}"),
    }
}

/// The `planrun policy check` command that asks `policy` (not the default
/// one) about `argv`: `--policy` unless it is the default policy,
/// `--policies` unless its file is in the default `policies` folder.
fn policy_check_command(policy: &Policy, argv: &[String]) -> String {
    let mut words = vec!["planrun".to_string(), "policy".to_string(), "check".to_string()];
    let folder = Path::new(&policy.source.path).parent().unwrap_or(Path::new(""));
    if folder != Path::new("policies") {
        let folder = if folder.as_os_str().is_empty() { Path::new(".") } else { folder };
        words.extend(["--policies".to_string(), folder.display().to_string()]);
    }
    if policy.name != DEFAULT_POLICY {
        words.extend(["--policy".to_string(), policy.name.clone()]);
    }
    words.push("--".to_string());
    words.extend(argv.iter().cloned());
    display_argv(&words)
}
