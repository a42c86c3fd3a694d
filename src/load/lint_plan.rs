//! Per-plan lints: what the validators let through but the run would trip
//! on. A template reference that can never resolve (an unknown step, a
//! step that runs later or the step itself, `last` in the first step) is an
//! error: the run would start, execute the steps before it and only then
//! fail, so the loader refuses the plan instead. What is legal but
//! suspicious (fields a step never produces, unreachable steps, paths
//! outside the workspace) is a warning, or a note in a plan that documents
//! a failing scenario.

use crate::diag::{Diagnostic, SourceFile, Span};
use crate::load::did_you_mean::did_you_mean;
use crate::load::loaded_plan::{LoadedPlan, SiteKind};
use crate::load::table::value_span;
use crate::model::{Action, InputType, Plan};
use crate::template::{Field, RefTarget, Reference};

/// `template-field-never-produced`: an `output_json` reference to a step
/// (or, for `last`, the step before) whose kind never produces structured
/// output, or a `stderr_text` reference to one that runs no program.
/// Unknown and forward references are reported on their own.
fn field_never_produced(plan: &Plan, site: usize, reference: &Reference, span: Span) -> Option<Diagnostic> {
    let (target, field) = match &reference.target {
        RefTarget::Last(field) => (site.checked_sub(1)?, field),
        RefTarget::Step { id, field } => {
            (plan.steps.iter().position(|step| &step.id == id).filter(|at| *at < site)?, field)
        }
        RefTarget::RunId | RefTarget::RunGoal | RefTarget::Input(_) | RefTarget::Secret(_) => return None,
    };
    let step = &plan.steps[target];
    let (reads, produced_by, label, help) = match field {
        Field::OutputText | Field::Status => return None,
        Field::ExitCode if matches!(step.action, Action::Shell { .. }) => return None,
        Field::ExitCode => (
            "an exit code",
            "`exit_code`",
            "always fails with `template_error`",
            "use `status`, or refer to a `shell` step (the kind with `exit_code`)",
        ),
        Field::OutputJson(_) if step.action.may_produce_json() => return None,
        Field::StderrText if matches!(step.action, Action::Shell { .. }) => return None,
        Field::OutputJson(_) => (
            "structured output",
            "`output_json`",
            "always fails with `template_error`",
            "use `output_text`, or refer to a `read_file`, `ticket_lookup` or `ticket_close` step (the kinds with `output_json`)",
        ),
        Field::StderrText => (
            "stderr",
            "`stderr_text`",
            "always empty",
            "use `output_text`, or refer to a `shell` step (the kind with `stderr_text`)",
        ),
    };
    Some(
        Diagnostic::warning(
            "template-field-never-produced",
            format!(
                "`{{{{ {} }}}}` reads {reads}, but step `{}` is a `{}` step, which never produces {produced_by}",
                reference.expr,
                step.id,
                step.action.kind()
            ),
        )
        .with_span(span)
        .with_label(label)
        .with_help(help),
    )
}

/// Errors and warnings about one valid plan.
pub(crate) fn lint_plan(loaded: &LoadedPlan, file: &SourceFile, diagnostics: &mut Vec<Diagnostic>) {
    let plan = &loaded.plan;
    let spans = &loaded.spans;
    let mut found = Vec::new();

    match plan.steps.iter().position(|step| matches!(step.action, Action::Finish { .. })) {
        None => {
            let mut diagnostic = Diagnostic::warning("no-finish", format!("plan `{}` has no `finish` step", plan.id))
                .with_help("end the plan with a step of kind `finish`");
            if let Some(span) = spans.steps_key.or(Some(spans.id)) {
                diagnostic = diagnostic.with_span(span);
            }
            found.push(diagnostic);
        }
        Some(finish) => {
            for (step, step_spans) in plan.steps.iter().zip(&spans.steps).skip(finish + 1) {
                found.push(
                    Diagnostic::warning(
                        "unreachable-step",
                        format!(
                            "step `{}` comes after `finish` step `{}` and never runs",
                            step.id, plan.steps[finish].id
                        ),
                    )
                    .with_span(step_spans.id)
                    .with_label("unreachable")
                    .with_help("move the `finish` step to the end"),
                );
            }
        }
    }

    for site in &spans.templates {
        for reference in site.template.references() {
            let span = value_span(&file.text, &site.node, reference.start, reference.end);
            let this = &plan.steps[site.step].id;
            if let Some(diagnostic) = field_never_produced(plan, site.step, reference, span) {
                found.push(diagnostic);
            }
            match &reference.target {
                RefTarget::Input(name) => match plan.input(name) {
                    None => {
                        let mut diagnostic = Diagnostic::error(
                            "template-unknown-input",
                            format!("`{{{{ {} }}}}` names no input of plan `{}`", reference.expr, plan.id),
                        )
                        .with_span(span)
                        .with_help(format!("declare it: `[inputs.{name}]` with its `type`"));
                        if let Some(suggestion) =
                            did_you_mean(name, plan.inputs.iter().map(|input| input.name.as_str()))
                        {
                            diagnostic = diagnostic.with_label(format!("did you mean `{suggestion}`?"));
                        }
                        found.push(diagnostic);
                    }
                    Some(input) if site.kind == SiteKind::Path && input.ty != InputType::Path => found.push(
                        Diagnostic::error(
                            "untrusted-control-field",
                            format!(
                                "input `{name}` is {}, and only a `path` input may fill a path",
                                input.ty.with_article()
                            ),
                        )
                        .with_span(span)
                        .with_label("a path input is confined to the workspace before the run starts")
                        .with_help(format!("declare it with `type = \"path\"` in `[inputs.{name}]`")),
                    ),
                    Some(_) => {}
                },
                RefTarget::Secret(_) if !matches!(site.kind, SiteKind::Env | SiteKind::Header) => found.push(
                    Diagnostic::error(
                        "secret-outside-env",
                        format!("`{{{{ {} }}}}` outside a step's `env`", reference.expr),
                    )
                    .with_span(span)
                    .with_label("a secret here would be recorded, shown or visible to other processes")
                    .with_help(
                        "pass the secret to the program in the step's `env` (`env = { NAME = \"{{ secrets.NAME }}\" }`): \
                         arguments show in `/proc` and every record, paths, contents, messages, conditions and keys \
                         are recorded as given",
                    ),
                ),
                RefTarget::Last(_) if site.step == 0 => found.push(
                    Diagnostic::error(
                        "template-last-in-first-step",
                        format!("`{{{{ {} }}}}` in the first step: no step has run yet", reference.expr),
                    )
                    .with_span(span)
                    .with_label("would fail with `template_error` when the run reaches it")
                    .with_help("refer to a step that runs earlier, or remove the reference"),
                ),
                RefTarget::Step { id, .. } => match plan.steps.iter().position(|step| &step.id == id) {
                    None => {
                        let mut diagnostic = Diagnostic::error(
                            "template-unknown-step",
                            format!("`{{{{ {} }}}}` names no step of plan `{}`", reference.expr, plan.id),
                        )
                        .with_span(span)
                        .with_help("refer to a step of this plan that runs before this one");
                        let ids = plan.steps.iter().map(|step| step.id.as_str());
                        if let Some(suggestion) = did_you_mean(id, ids) {
                            diagnostic = diagnostic.with_label(format!("did you mean `{suggestion}`?"));
                        }
                        found.push(diagnostic);
                    }
                    Some(target) if target >= site.step => {
                        let when = if target == site.step {
                            "the step itself".to_string()
                        } else {
                            format!("step `{id}`, which runs later")
                        };
                        found.push(
                            Diagnostic::error(
                                "template-forward-reference",
                                format!("`{{{{ {} }}}}` in step `{this}` refers to {when}", reference.expr),
                            )
                            .with_span(span)
                            .with_label("has no output yet when this step runs")
                            .with_help("refer only to steps that run before this one"),
                        );
                    }
                    Some(_) => {}
                },
                _ => {}
            }
        }
    }

    for (step, step_spans) in plan.steps.iter().zip(&spans.steps) {
        for (key, path, span) in step_spans.confined_paths(step) {
            let path = path.source();
            let absolute = path.starts_with('/') || path.starts_with('\\');
            let parent = path.split(['/', '\\']).any(|component| component == "..");
            if absolute || parent {
                let why = if absolute { "is absolute" } else { "has a `..` component" };
                let mut diagnostic = Diagnostic::warning(
                    "path-outside-workspace",
                    format!("{key} `{path}` in step `{}` {why}", step.id),
                )
                .with_label("the runtime denies paths outside the workspace")
                .with_help("use a path relative to the workspace");
                if let Some(span) = span {
                    diagnostic = diagnostic.with_span(span);
                }
                found.push(diagnostic);
            }
        }
    }

    diagnostics.extend(found.into_iter().map(|diagnostic| loaded.soften(diagnostic)));
}
