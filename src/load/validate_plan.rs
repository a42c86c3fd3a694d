//! Plan tree → [`Plan`], collecting every finding of the file in one pass.
//!
//! `validate_plan` builds the model and reports errors; `lint_plan` then
//! reports what is legal but suspicious in one plan (templates that cannot
//! resolve, unreachable steps, paths outside the workspace) as warnings, or
//! as notes when the plan documents a failing scenario. Checks that need the
//! policy or other plans live in `cross_check.rs`.
//!
//! One step's keys and payload are validated in `validate_step.rs`; the
//! per-plan lints live in `lint_plan.rs`; the validated plan and its spans,
//! which all three share, in `loaded_plan.rs`.
//!
//! Adding a step kind: add it to `keys::STEP`'s variants with its payload
//! keys and build its [`Action`] in `validate_step.rs`.

use std::collections::HashMap;

use crate::diag::{Diagnostic, SourceFile, Span};
use crate::load::keys::{PLAN, PLAN_BUDGET, VERIFY};
use crate::load::loaded_plan::{LoadedPlan, PlanSpans};
use crate::load::node::Node;
use crate::load::table::{TableReader, check_version, error_count, expect_string, name_or_error, wrong_type};
use crate::load::validate_inputs::inputs;
use crate::load::validate_step::step;
use crate::model::{BudgetOverride, DEFAULT_POLICY, Plan, RunStatus, SourceRef, Step, VerifyCheck};

/// Builds the plan, or returns `None` when the file has errors (all of them
/// reported).
pub(crate) fn validate_plan(
    root: &Node,
    file: &SourceFile,
    source: SourceRef,
    diagnostics: &mut Vec<Diagnostic>,
) -> Option<LoadedPlan> {
    let errors_before = error_count(diagnostics);
    let mut spans = PlanSpans::default();
    let mut reader = TableReader::new(root, "a plan file", "", PLAN.keys, diagnostics)?;
    check_version(&mut reader, diagnostics);

    let id = reader.required_string("id", diagnostics).and_then(|(id, node)| {
        spans.id = node.span;
        name_or_error(id, node, "plan id", 64, diagnostics)
    });
    let description = reader.string("description", diagnostics).map_or_else(String::new, |(text, _)| text.to_string());

    let mut keywords = Vec::new();
    let mut keyword_spans = Vec::new();
    if let Some(items) = reader.array("keywords", diagnostics) {
        for (index, item) in items.iter().enumerate() {
            let Some(keyword) = expect_string(item, &format!("`keywords[{index}]`"), diagnostics) else {
                continue;
            };
            if keyword.trim().is_empty() {
                diagnostics.push(
                    Diagnostic::error("invalid-value", "a keyword may not be empty")
                        .with_span(item.span)
                        .with_label("empty keyword"),
                );
                continue;
            }
            keywords.push(keyword.to_string());
            keyword_spans.push(item.span);
        }
    }

    let policy = match reader.string("policy", diagnostics) {
        Some((name, node)) => {
            spans.policy = Some(node.span);
            name_or_error(name, node, "policy name", usize::MAX, diagnostics)
        }
        None => Some(DEFAULT_POLICY.to_string()),
    };
    spans.default = reader.key_span("default");
    let default = reader.bool("default", diagnostics).unwrap_or(false);
    let expected_status = reader
        .choice(
            "expected_status",
            "`expected_status`",
            &[("done", RunStatus::Done), ("failed", RunStatus::Failed)],
            diagnostics,
        )
        .map(|status| status.unwrap_or(RunStatus::Done));

    let inputs = inputs(reader.get("inputs"), diagnostics);
    spans.steps_key = reader.key_span("steps");
    let mut steps = Vec::new();
    if let Some(node) = reader.required("steps", diagnostics) {
        match node.as_array() {
            None => diagnostics.push(wrong_type(node, "`steps`", "an array of tables")),
            Some([]) => diagnostics.push(
                Diagnostic::error("invalid-value", "`steps` is empty")
                    .with_span(node.span)
                    .with_label("a plan needs at least one step")
                    .with_help("add a `[[steps]]` table"),
            ),
            Some(items) => {
                let mut first_seen: HashMap<String, Span> = HashMap::new();
                for (index, item) in items.iter().enumerate() {
                    let built = step(item, index, file, &mut spans, diagnostics);
                    let Some((step, step_spans)) = built else {
                        continue;
                    };
                    if let Some(first) = first_seen.get(&step.id) {
                        let (line, _) = file.line_col(first.start);
                        diagnostics.push(
                            Diagnostic::error(
                                "duplicate-step-id",
                                format!("duplicate step id `{}`, first used on line {line}", step.id),
                            )
                            .with_span(step_spans.id)
                            .with_label("used again here")
                            .with_help("give every step of a plan its own id"),
                        );
                        continue;
                    }
                    first_seen.insert(step.id.clone(), step_spans.id);
                    steps.push(step);
                    spans.steps.push(step_spans);
                }
            }
        }
    }
    let budget = plan_budget(&mut reader, diagnostics);
    let verify = verify_checks(&mut reader, &steps, diagnostics);
    let recovery_plans = recovery_plans(&mut reader, id.as_deref(), &mut spans, diagnostics);
    reader.finish(diagnostics);

    if error_count(diagnostics) > errors_before {
        return None;
    }
    let (Some(id), Some(policy), Some(expected_status), Some(inputs), Some(budget), Some(verify)) =
        (id, policy, expected_status, inputs, budget, verify)
    else {
        return None;
    };
    Some(LoadedPlan {
        plan: Plan {
            id,
            description,
            keywords,
            policy,
            default,
            expected_status,
            inputs,
            steps,
            budget,
            verify,
            recovery_plans,
            source,
            keyword_spans,
        },
        spans,
    })
}

/// The plan's `recovery_plans`: plan ids, each once, never its own (whether
/// each names a plan of the catalog is a check across plans).
fn recovery_plans(
    reader: &mut TableReader<'_>,
    own_id: Option<&str>,
    spans: &mut PlanSpans,
    diagnostics: &mut Vec<Diagnostic>,
) -> Vec<String> {
    let mut ids: Vec<String> = Vec::new();
    let Some(items) = reader.array("recovery_plans", diagnostics) else {
        return ids;
    };
    for (index, item) in items.iter().enumerate() {
        let what = format!("`recovery_plans[{index}]`");
        let Some(id) = expect_string(item, &what, diagnostics) else {
            continue;
        };
        let Some(id) = name_or_error(id, item, "plan id", 64, diagnostics) else {
            continue;
        };
        let problem = if Some(id.as_str()) == own_id {
            Some(("the plan itself", "a plan is retried by its recovery rule's goal, not listed here"))
        } else if ids.contains(&id) {
            Some(("listed twice", "list each plan once"))
        } else {
            None
        };
        if let Some((label, help)) = problem {
            diagnostics.push(
                Diagnostic::error("invalid-value", format!("{what} `{id}` is {label}"))
                    .with_span(item.span)
                    .with_label(label)
                    .with_help(help),
            );
            continue;
        }
        ids.push(id);
        spans.recovery_plans.push(item.span);
    }
    ids
}

/// The plan's `[budget]`: `None` only after a reported error.
fn plan_budget(reader: &mut TableReader<'_>, diagnostics: &mut Vec<Diagnostic>) -> Option<BudgetOverride> {
    let Some(node) = reader.get("budget") else {
        return Some(BudgetOverride::default());
    };
    let errors_before = error_count(diagnostics);
    let mut table = TableReader::new(node, "`budget`", " in `[budget]`", PLAN_BUDGET.keys, diagnostics)?;
    let mut limit = |key: &str| table.integer(key, 1, diagnostics).map(|(value, _)| value.unsigned_abs());
    let budget = BudgetOverride {
        max_steps: limit("max_steps"),
        max_tool_calls: limit("max_tool_calls"),
        max_consecutive_failures: limit("max_consecutive_failures"),
        step_timeout_secs: limit("step_timeout_secs"),
        max_run_secs: limit("max_run_secs"),
    };
    table.finish(diagnostics);
    (error_count(diagnostics) == errors_before).then_some(budget)
}

/// The plan's `[[verify]]` checks: `None` only after a reported error.
fn verify_checks(
    reader: &mut TableReader<'_>,
    steps: &[Step],
    diagnostics: &mut Vec<Diagnostic>,
) -> Option<Vec<VerifyCheck>> {
    let Some(items) = reader.array("verify", diagnostics) else {
        return (!reader.has("verify")).then(Vec::new);
    };
    let errors_before = error_count(diagnostics);
    let mut checks = Vec::new();
    for (index, item) in items.iter().enumerate() {
        let what = format!("`verify[{index}]`");
        let Some(mut table) = TableReader::new(item, &what, format!(" in {what}"), VERIFY.keys, diagnostics) else {
            continue;
        };
        let Some((kind, kind_node)) = table.required_string("kind", diagnostics) else {
            continue;
        };
        let Some(variant) = VERIFY.variant(kind) else {
            let names = VERIFY.variants.iter().map(|variant| variant.name);
            diagnostics.push(
                Diagnostic::error("invalid-value", format!("unknown verify kind `{kind}`"))
                    .with_span(kind_node.span)
                    .with_help(format!(
                        "allowed kinds: {}",
                        names.map(|name| format!("`{name}`")).collect::<Vec<_>>().join(", ")
                    )),
            );
            continue;
        };
        table.allow(variant.keys);
        let check = match variant.name {
            "file" => {
                let path = table.required_string("path", diagnostics).map(|(text, _)| text.to_string());
                let contains = table.string("contains", diagnostics).map(|(text, _)| text.to_string());
                path.map(|path| VerifyCheck::File { path, contains })
            }
            "ticket_status" => {
                let ticket = table.required_string("ticket_id", diagnostics).map(|(text, _)| text.to_string());
                let equals = table.required_string("equals", diagnostics).map(|(text, _)| text.to_string());
                ticket.zip(equals).map(|(ticket_id, equals)| VerifyCheck::TicketStatus { ticket_id, equals })
            }
            _ => table.required_string("step", diagnostics).and_then(|(step, node)| {
                let keyed = steps.iter().any(|candidate| candidate.id == step && candidate.idempotency_key.is_some());
                if !keyed {
                    diagnostics.push(
                        Diagnostic::error("invalid-value", format!("step `{step}` has no `idempotency_key`"))
                            .with_span(node.span)
                            .with_label("no receipt to verify")
                            .with_help("name a step of this plan that has an `idempotency_key`"),
                    );
                    return None;
                }
                Some(VerifyCheck::Receipt { step: step.to_string() })
            }),
        };
        table.finish(diagnostics);
        checks.extend(check);
    }
    (error_count(diagnostics) == errors_before).then_some(checks)
}
