//! `planrun route "<goal>"`.

use std::process::ExitCode;

use clap::Args;

use crate::cli::DirArgs;
use crate::cli::output::{BOLD, GREEN, RED, invalid_catalog, paint};
use crate::ops;
use crate::router::RouteOutcome;

#[derive(Debug, Args)]
pub struct RouteArgs {
    /// The goal text to route.
    #[arg(value_parser = crate::cli::parse_goal)]
    pub goal: String,
    /// Print the decision as JSON.
    #[arg(long)]
    pub json: bool,
}

/// Exit code: 0 when a plan was chosen, 2 when the goal is ambiguous, routes
/// nowhere, or the plan files are invalid.
pub fn route(args: &RouteArgs, dirs: &DirArgs) -> ExitCode {
    let routed = match ops::route(&args.goal, &dirs.plans, &dirs.policies) {
        Ok(routed) => routed,
        Err(error) => return invalid_catalog(&error),
    };
    let (catalog, decision) = (&routed.catalog, &routed.decision);
    if args.json {
        anstream::println!("{}", serde_json::to_string_pretty(&decision).unwrap_or_default());
    } else {
        anstream::println!("goal: {:?}", decision.goal);
        if decision.candidates.is_empty() {
            anstream::println!("candidates: none");
        } else {
            anstream::println!("candidates:");
            for candidate in &decision.candidates {
                let path = catalog
                    .plans
                    .iter()
                    .find(|plan| plan.id == candidate.plan_id)
                    .map(|plan| plan.source.path.as_str())
                    .unwrap_or_default();
                anstream::println!(
                    "  {:<24} keyword {:?} ({} characters)  {path}",
                    candidate.plan_id,
                    candidate.keyword,
                    candidate.length
                );
            }
        }
        let winner = match &decision.outcome {
            RouteOutcome::Matched { plan_id, .. } | RouteOutcome::Default { plan_id, .. } => paint(GREEN, plan_id),
            RouteOutcome::Ambiguous { .. } | RouteOutcome::NoRoute => paint(RED, "none"),
        };
        anstream::println!("{} {winner}", paint(BOLD, "winner:"));
        anstream::println!("why: {}", decision.explanation());
    }
    routed.exit_status().into()
}
