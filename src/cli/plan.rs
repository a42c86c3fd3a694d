//! `planrun plan --goal TEXT | --plan FILE`: a preview that never executes.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Args;

use crate::cli::DirArgs;
use crate::cli::output::{BOLD, CYAN, DIM, GREEN, RED, YELLOW, invalid_catalog, paint};
use crate::model::FailureClass;
use crate::ops::{self, ExitStatus, PreviewTarget};
use crate::preview::{Preview, Verdict};

#[derive(Debug, Args)]
pub struct PlanArgs {
    /// Preview this plan file.
    #[arg(long, value_name = "FILE", conflicts_with = "goal", required_unless_present = "goal")]
    pub plan: Option<PathBuf>,
    /// Route this goal to a plan, then preview that plan.
    #[arg(long, value_name = "TEXT", value_parser = crate::cli::parse_goal)]
    pub goal: Option<String>,
    /// Print the preview as JSON.
    #[arg(long)]
    pub json: bool,
}

/// Exit code: 0 when the preview was shown (whatever it predicts), 2 when
/// the files are invalid or the goal routes nowhere. Nothing is executed or
/// created in either case.
pub fn plan(args: &PlanArgs, dirs: &DirArgs) -> ExitCode {
    let target = match (&args.plan, &args.goal) {
        (Some(plan), _) => PreviewTarget::PlanFile { plan, policies: &dirs.policies },
        (None, goal) => PreviewTarget::Goal {
            goal: goal.as_deref().unwrap_or_default(),
            plans: &dirs.plans,
            policies: &dirs.policies,
        },
    };
    let preview = match ops::preview(target) {
        Ok(preview) => preview,
        Err(error) => return invalid_catalog(&error),
    };
    if args.json {
        anstream::println!("{}", serde_json::to_string_pretty(&preview).unwrap_or_default());
    } else {
        print_preview(&preview);
    }
    ExitStatus::Done.into()
}

fn print_preview(preview: &Preview) {
    let plan = &preview.plan;
    let policy = &preview.policy;
    anstream::println!(
        "{} {} ({}) · policy {} ({})",
        paint(BOLD, "plan"),
        paint(BOLD, &plan.id),
        plan.path,
        policy.name,
        policy.path
    );
    if !plan.description.is_empty() {
        anstream::println!("description: {}", plan.description);
    }
    if !plan.keywords.is_empty() {
        let keywords = plan.keywords.iter().map(|keyword| format!("{keyword:?}")).collect::<Vec<_>>().join(", ");
        anstream::println!("keywords: {keywords}");
    }
    for input in &plan.inputs {
        anstream::println!("input: {}", describe_input(input));
    }
    if plan.expected_status == "failed" {
        anstream::println!(
            "expected: the run ends {} (this plan documents a negative scenario)",
            paint(YELLOW, "failed")
        );
    }
    if let Some(route) = &preview.route {
        anstream::println!("route: goal {:?} → {}", route.decision.goal, paint(GREEN, &plan.id));
        for candidate in &route.decision.candidates {
            anstream::println!(
                "  candidate {:<24} keyword {:?} ({} characters)",
                candidate.plan_id,
                candidate.keyword,
                candidate.length
            );
        }
        anstream::println!("  why: {}", route.why);
    }
    let budget = &policy.budget;
    anstream::println!(
        "budget: {} steps · {} tool calls · {} consecutive failures · {}s per step · {} output bytes · {} · retry cap {}",
        budget.max_steps,
        budget.max_tool_calls,
        budget.max_consecutive_failures,
        budget.step_timeout_secs,
        budget.max_output_bytes,
        budget.max_run_secs.map_or("no run deadline".to_string(), |secs| format!("{secs}s per run")),
        policy.retry_cap
    );
    anstream::println!(
        "{}",
        paint(
            DIM,
            "preview only: nothing runs; ⟨…⟩ is filled in at run time; security_denied and template_error are never retried"
        )
    );
    for step in &preview.steps {
        anstream::println!();
        let unreachable =
            if step.reachable { String::new() } else { format!("  {}", paint(YELLOW, "never runs (after `finish`)")) };
        anstream::println!("  {}. {} {}{unreachable}", step.number, paint(BOLD, &step.id), step.kind);
        for field in &step.payload {
            anstream::println!("       {:<10}{}", field.name, shown(&field.shown));
        }
        if let Some(when) = &step.when {
            anstream::println!("       {:<10}{}", "when", shown(when));
        }
        if let Some(verdict) = &step.verdict {
            anstream::println!("       {:<10}{}", "policy", verdict_text(verdict));
        }
        anstream::println!("       {:<10}{}", "attempts", attempts_text(&step.max_attempts));
        anstream::println!("       {:<10}{}s", "timeout", step.timeout_secs);
        anstream::println!("       {:<10}{}", "risk", step.risk);
        if let Some(key) = &step.idempotency_key {
            anstream::println!("       {:<10}{}", "receipt", shown(key));
        }
        anstream::println!(
            "       {:<10}{}",
            "approval",
            if step.needs_approval { "required" } else { "not required" }
        );
    }
    if !plan.verify.is_empty() {
        anstream::println!();
        anstream::println!("completion is verified by:");
        for check in &plan.verify {
            anstream::println!("  - {check}");
        }
    }
    if !preview.findings.is_empty() {
        anstream::println!();
        anstream::println!("findings (see `planrun check {}`):", plan.path);
        for finding in &preview.findings {
            let text = |key: &str| finding[key].as_str().unwrap_or_default().to_string();
            let location = &finding["location"];
            let severity = text("severity");
            let style = if severity == "warning" { YELLOW } else { CYAN };
            anstream::println!(
                "  {}[{}] {}:{}: {}",
                paint(style, &severity),
                text("code"),
                location["line"],
                location["column"],
                text("message")
            );
        }
    }
}

/// Runtime references in cyan so they stand out from literal text.
fn shown(text: &str) -> String {
    let mut out = String::new();
    let mut rest = text;
    while let Some(start) = rest.find('⟨') {
        let Some(end) = rest[start..].find('⟩').map(|end| start + end + '⟩'.len_utf8()) else {
            break;
        };
        out.push_str(&rest[..start]);
        out.push_str(&paint(CYAN, &rest[start..end]));
        rest = &rest[end..];
    }
    out.push_str(rest);
    out
}

fn verdict_text(verdict: &Verdict) -> String {
    let decision = match verdict.decision {
        "allow" => paint(GREEN, "allow"),
        "forbidden" => paint(RED, "forbidden"),
        other => paint(CYAN, other),
    };
    match &verdict.rule {
        Some(rule) => format!("{decision} · rule `{rule}`: {}", verdict.reason),
        None => format!("{decision} · {}", verdict.reason),
    }
}

/// `2 on execution_error, file_error; 1 otherwise`.
fn attempts_text(attempts: &std::collections::BTreeMap<FailureClass, u32>) -> String {
    let mut by_count: std::collections::BTreeMap<u32, Vec<&str>> = std::collections::BTreeMap::new();
    for (class, count) in attempts {
        by_count.entry(*count).or_default().push(class.as_str());
    }
    let mut parts: Vec<String> = by_count
        .iter()
        .rev()
        .filter(|(count, _)| **count > 1)
        .map(|(count, classes)| format!("{count} on {}", classes.join(", ")))
        .collect();
    parts.push(if parts.is_empty() { "1 whatever fails".to_string() } else { "1 otherwise".to_string() });
    parts.join("; ")
}

/// `folder (path, required): the folder to measure` and the like.
fn describe_input(input: &crate::model::InputSpec) -> String {
    let mut facts = vec![input.ty.as_str().to_string()];
    if input.required {
        facts.push("required".to_string());
    }
    if let Some(default) = &input.default {
        facts.push(format!("default {default}"));
    }
    if !input.one_of.is_empty() {
        let values: Vec<String> = input.one_of.iter().map(ToString::to_string).collect();
        facts.push(format!("one of {}", values.join(", ")));
    }
    if let (Some(min), Some(max)) = (input.min, input.max) {
        facts.push(format!("{min} to {max}"));
    } else if let Some(min) = input.min {
        facts.push(format!("at least {min}"));
    } else if let Some(max) = input.max {
        facts.push(format!("at most {max}"));
    }
    if let Some(max) = input.max_length {
        facts.push(format!("at most {max} characters"));
    }
    if let Some(pattern) = input.pattern_text() {
        facts.push(format!("matching /{pattern}/"));
    }
    let description = if input.description.is_empty() { String::new() } else { format!(": {}", input.description) };
    format!("{} ({}){description}", input.name, facts.join(", "))
}
