//! `planrun approve <run_id>`: shows the frozen action and records an
//! approval bound to its fingerprint, state version, scope and an expiry.

use std::process::ExitCode;
use std::time::Duration;

use clap::Args;
use serde_json::json;

use crate::cli::DirArgs;
use crate::cli::output::{BOLD, fail, fail_with, paint};
use crate::model::MAX_APPROVAL_SECS;
use crate::ops::{self, ApproveInput, ExitStatus};
use crate::runtime::RuntimeEnv;
use crate::runtime::approval::ApprovalClaims;

#[derive(Debug, Args)]
pub struct ApproveArgs {
    /// The run waiting for approval.
    pub run_id: String,
    /// The fingerprint you reviewed; refused if it is not the frozen action's.
    #[arg(long, value_name = "HEX")]
    pub fingerprint: Option<String>,
    /// The target you approve (e.g. `ticket:ticket-7`); refused if it differs.
    #[arg(long)]
    pub scope: Option<String>,
    /// The state version that froze the action; refused if it differs.
    #[arg(long, value_name = "N")]
    pub state_version: Option<u64>,
    /// How long the approval stays valid: `90s`, `15m`, `2h`, `1d`.
    #[arg(long, value_name = "DURATION", default_value = "1h", value_parser = parse_duration)]
    pub expires_in: Duration,
    /// Who approves (recorded in the audit log; at most 200 characters, no control characters).
    #[arg(long, value_name = "NAME", value_parser = crate::cli::parse_name)]
    pub by: Option<String>,
    /// Print the approval as JSON.
    #[arg(long)]
    pub json: bool,
}

/// `90s`, `15m`, `2h`, `1d` (a bare number is seconds).
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    let (number, unit) = match text.find(|character: char| !character.is_ascii_digit()) {
        Some(index) => text.split_at(index),
        None => (text, "s"),
    };
    let value: u64 = number.parse().map_err(|_| format!("`{text}` is not a duration such as `15m`"))?;
    let seconds = match unit {
        "s" => value,
        "m" => value.saturating_mul(60),
        "h" => value.saturating_mul(3600),
        "d" => value.saturating_mul(86_400),
        _ => return Err(format!("unknown unit `{unit}` in `{text}`: use s, m, h or d")),
    };
    if seconds == 0 {
        return Err("an approval must stay valid for at least one second".to_string());
    }
    if seconds > MAX_APPROVAL_SECS {
        return Err(format!("an approval stays valid at most 7 days (`7d`); `{text}` is longer"));
    }
    Ok(Duration::from_secs(seconds))
}

/// Exit code: 0 approved, 1 refused (not waiting, claims do not match), 2
/// bad input (run id, records that fail verification).
pub fn approve(args: &ApproveArgs, dirs: &DirArgs, env: &RuntimeEnv) -> ExitCode {
    let run_id = match crate::cli::run_id_arg(&args.run_id) {
        Ok(run_id) => run_id,
        Err(code) => return code,
    };
    let claims = ApprovalClaims {
        fingerprint: args.fingerprint.clone(),
        scope: args.scope.clone(),
        state_version: args.state_version,
    };
    let input = ApproveInput {
        workspace: &dirs.workspace,
        run_id: &run_id,
        claims: &claims,
        expires_in: args.expires_in,
        approved_by: args.by.clone(),
    };
    let outcome = match ops::approve(input, env) {
        Ok(outcome) => outcome,
        Err(error) => return fail_with(&error),
    };
    let (pending, approval) = (&outcome.pending, &outcome.approval);
    if args.json {
        let value = json!({"pending_action": pending, "approval": approval});
        match serde_json::to_string_pretty(&value) {
            Ok(text) => anstream::println!("{text}"),
            Err(error) => return fail(ExitStatus::Failed, &error.to_string()),
        }
    } else {
        anstream::println!("{} step {} of run {}", paint(BOLD, "approved:"), pending.step_id, args.run_id);
        anstream::println!("  kind          {}", pending.kind);
        anstream::println!("  action        {}", pending.action);
        anstream::println!("  risk          {}", pending.risk);
        anstream::println!("  scope         {}", pending.scope);
        anstream::println!("  idempotency   {}", pending.idempotency_key.as_deref().unwrap_or("-"));
        anstream::println!("  fingerprint   {}", pending.fingerprint);
        anstream::println!("  state version {}", pending.state_version);
        for source in &pending.provenance {
            anstream::println!("  provenance    {} = {:?} from {}", source.argument, source.value, source.source);
        }
        anstream::println!("  expires       {}", approval.expires_at);
        anstream::println!("continue with `planrun resume {}`", args.run_id);
    }
    outcome.exit_status().into()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_parse_with_units() {
        assert_eq!(parse_duration("90"), Ok(Duration::from_secs(90)));
        assert_eq!(parse_duration("15m"), Ok(Duration::from_secs(900)));
        assert_eq!(parse_duration("2h"), Ok(Duration::from_secs(7200)));
        assert_eq!(parse_duration("1d"), Ok(Duration::from_secs(86_400)));
        for bad in ["", "x", "5y", "0s", "-1s"] {
            assert!(parse_duration(bad).is_err(), "{bad}");
        }
    }
}
