//! The routing checks across plans: what decides which plan a goal goes
//! to (plan ids, keywords, the default plan). Each finding carries the plans
//! it is about, so that `planrun check plans/new.toml` can report the ones
//! between the checked file and the rest of the catalog without repeating
//! the other files' own findings.

use std::collections::HashMap;

use crate::diag::{Diagnostic, Span};
use crate::load::loaded_plan::LoadedPlan;
use crate::model::Plan;

/// A routing finding and the plans (indices into the checked list) it
/// involves.
pub(crate) struct RouteFinding {
    pub(crate) diagnostic: Diagnostic,
    pub(crate) plans: Vec<usize>,
}

impl RouteFinding {
    fn new(diagnostic: Diagnostic, plans: Vec<usize>) -> Self {
        RouteFinding { diagnostic, plans }
    }
}

/// `duplicate-plan-id`, `duplicate-keyword` and `multiple-default-plans`
/// (errors: routing would be ambiguous), `route-overlap` (a note) and
/// `unreachable-plan` (a warning). A finding about two plans points at the
/// later one, so put the plans under check last.
pub(crate) fn route_findings(plans: &[LoadedPlan]) -> Vec<RouteFinding> {
    let mut found = Vec::new();
    let mut ids: HashMap<&str, usize> = HashMap::new();
    for (index, loaded) in plans.iter().enumerate() {
        let plan = &loaded.plan;
        if let Some(&first) = ids.get(plan.id.as_str()) {
            let diagnostic = Diagnostic::error(
                "duplicate-plan-id",
                format!("plan id `{}` is already used by `{}`", plan.id, plans[first].plan.source.path),
            )
            .with_span(loaded.spans.id)
            .with_label("used again here")
            .with_help("give every plan its own id");
            found.push(RouteFinding::new(diagnostic, vec![first, index]));
        } else {
            ids.insert(&plan.id, index);
        }
    }

    let mut keywords: HashMap<String, usize> = HashMap::new();
    for (index, loaded) in plans.iter().enumerate() {
        let plan = &loaded.plan;
        for (keyword, span) in plan.keywords.iter().zip(&plan.keyword_spans) {
            let folded = keyword.to_lowercase();
            if let Some(&first) = keywords.get(&folded) {
                let other = &plans[first].plan;
                let message = if other.id == plan.id && other.source == plan.source {
                    format!("keyword `{keyword}` appears twice in plan `{}`", plan.id)
                } else {
                    format!("keyword `{keyword}` is also a keyword of plan `{}` (`{}`)", other.id, other.source.path)
                };
                let diagnostic = Diagnostic::error("duplicate-keyword", message)
                    .with_span(*span)
                    .with_label("routing would be ambiguous")
                    .with_help("keywords are compared case-insensitively; keep each in one plan");
                found.push(RouteFinding::new(diagnostic, vec![first, index]));
            } else {
                keywords.insert(folded, index);
            }
        }
    }

    found.extend(route_overlaps(plans));

    let defaults: Vec<usize> = (0..plans.len()).filter(|&index| plans[index].plan.default).collect();
    if let Some((&first, extra)) = defaults.split_first() {
        for &index in extra {
            let loaded = &plans[index];
            let mut diagnostic = Diagnostic::error(
                "multiple-default-plans",
                format!(
                    "plan `{}` is a second default plan, after `{}` (`{}`)",
                    loaded.plan.id, plans[first].plan.id, plans[first].plan.source.path
                ),
            )
            .with_label("only one plan may set this")
            .with_help("mark exactly one plan `default = true`");
            if let Some(span) = loaded.spans.default {
                diagnostic = diagnostic.with_span(span);
            }
            found.push(RouteFinding::new(diagnostic, vec![first, index]));
        }
    }
    found
}

/// `unknown-recovery-plan` (an error): an entry of a plan's
/// `recovery_plans` names no plan of `plans`. Only meaningful over the
/// whole catalog.
pub(crate) fn recovery_plan_findings(plans: &[LoadedPlan]) -> Vec<RouteFinding> {
    let mut found = Vec::new();
    for (index, loaded) in plans.iter().enumerate() {
        let plan = &loaded.plan;
        for (id, span) in plan.recovery_plans.iter().zip(&loaded.spans.recovery_plans) {
            if plans.iter().any(|other| other.plan.id == *id) {
                continue;
            }
            let diagnostic = Diagnostic::error(
                "unknown-recovery-plan",
                format!("plan `{}` lists recovery plan `{id}`, which is not a plan of the catalog", plan.id),
            )
            .with_span(*span)
            .with_label("no such plan")
            .with_help("name the `id` of another plan in the plans folder");
            found.push(RouteFinding::new(diagnostic, vec![index]));
        }
    }
    found
}

/// `route-overlap` (a note): keyword `a` of one plan is inside keyword
/// `b` of another, so every goal containing `b` goes to `b`'s plan (the
/// longest keyword wins). Deliberate specialisation looks exactly like
/// this, hence a note, not a warning. `unreachable-plan` (a warning): a
/// plan that is not the default and has no keyword can be run only with
/// `--plan`. Equal keywords are `duplicate-keyword` errors already.
fn route_overlaps(plans: &[LoadedPlan]) -> Vec<RouteFinding> {
    let mut found = Vec::new();
    let keywords: Vec<(usize, String, &str, Span)> = plans
        .iter()
        .enumerate()
        .flat_map(|(index, loaded)| {
            let plan = &loaded.plan;
            plan.keywords
                .iter()
                .zip(&plan.keyword_spans)
                .map(move |(keyword, span)| (index, keyword.to_lowercase(), keyword.as_str(), *span))
        })
        .collect();
    for (long_plan, long, long_text, span) in &keywords {
        for (short_plan, short, short_text, _) in &keywords {
            if long_plan == short_plan || long.len() <= short.len() || !long.contains(short.as_str()) {
                continue;
            }
            let (winner, shadowed): (&Plan, &Plan) = (&plans[*long_plan].plan, &plans[*short_plan].plan);
            let diagnostic = Diagnostic::note(
                "route-overlap",
                format!(
                    "keyword `{long_text}` of plan `{}` contains keyword `{short_text}` of plan `{}`",
                    winner.id, shadowed.id
                ),
            )
            .with_span(*span)
            .with_label(format!("goals containing this go to `{}`, never to `{}`", winner.id, shadowed.id))
            .with_help("the longest matching keyword wins; check with `planrun route \"<goal>\"`");
            found.push(RouteFinding::new(diagnostic, vec![*short_plan, *long_plan]));
        }
    }
    for (index, loaded) in plans.iter().enumerate() {
        let plan = &loaded.plan;
        if plan.default || !plan.keywords.is_empty() {
            continue;
        }
        let diagnostic = loaded.soften(
            Diagnostic::warning(
                "unreachable-plan",
                format!("plan `{}` has no keywords and is not the default: no goal routes to it", plan.id),
            )
            .with_span(loaded.spans.id)
            .with_label("reachable only with `--plan`")
            .with_help("add `keywords = [\"…\"]`"),
        );
        found.push(RouteFinding::new(diagnostic, vec![index]));
    }
    found
}
