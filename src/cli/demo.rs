//! `planrun demo`: the ticket demo, end to end, as a
//! person would run it: run (pauses for approval), approve, resume with the
//! crash hook (the process dies after the close and its receipt), resume
//! again (recovery from the receipt), then the demo's summary as JSON.
//!
//! Every stage is a real `planrun` process, so the crash is a real crash.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};

use clap::Args;
use serde_json::{Value, json};

use crate::cli::DirArgs;
use crate::cli::output::fail;
use crate::diag::display_path;
use crate::model::EvidenceKind;
use crate::ops::ExitStatus;
use crate::runtime::RuntimeEnv;
use crate::tools::tickets::TICKETS_FILE;

#[derive(Debug, Args)]
pub struct DemoArgs {
    /// Run the demo in this folder (it must not exist yet); default: a new
    /// temporary folder, printed at the end.
    #[arg(long, value_name = "DIR")]
    pub dir: Option<PathBuf>,
}

const RUN_ID: &str = "ticket-demo";

/// Exit code: 0 when every stage behaved as the demo's acceptance checklist
/// says, 1 when one did not, 2 for bad input (the folder exists, the demo
/// files are missing).
pub fn demo(args: &DemoArgs, dirs: &DirArgs, env: &RuntimeEnv) -> ExitCode {
    let plan = dirs.plans.join("ticket_close.toml");
    let tickets = dirs.plans.join("ticket_close.tickets.json");
    for file in [&plan, &tickets] {
        if !file.is_file() {
            return fail(ExitStatus::InvalidInput, &format!("the demo needs `{}`", display_path(file)));
        }
    }
    let dir = match &args.dir {
        Some(dir) => {
            if dir.exists() {
                return fail(
                    ExitStatus::InvalidInput,
                    &format!("`{}` exists; the demo needs a new folder", display_path(dir)),
                );
            }
            dir.clone()
        }
        None => std::env::temp_dir().join(format!("planrun-demo-{}", std::process::id())),
    };
    let workspace = dir.join("workspace");
    if let Err(error) = fs::create_dir_all(&workspace).and_then(|()| fs::copy(&tickets, workspace.join(TICKETS_FILE))) {
        return fail(ExitStatus::InvalidInput, &format!("cannot prepare `{}`: {error}", display_path(&workspace)));
    }
    match stages(&plan, &dirs.policies, &workspace, env) {
        Ok(summary) => {
            anstream::println!("{}", serde_json::to_string_pretty(&summary).unwrap_or_default());
            anstream::eprintln!("planrun: demo records in {}", display_path(&workspace.join("runs").join(RUN_ID)));
            let ok = summary["status"] == "ok";
            ExitStatus::from_success(ok).into()
        }
        Err(message) => fail(ExitStatus::Failed, &message),
    }
}

fn stages(plan: &Path, policies: &Path, workspace: &Path, env: &RuntimeEnv) -> Result<Value, String> {
    let exe = std::env::current_exe().map_err(|error| format!("cannot find the planrun binary: {error}"))?;
    let run = |args: &[&str], crash: Option<&str>| {
        let mut command = Command::new(&exe);
        command.args(args).arg("--workspace").arg(workspace).arg("--policies").arg(policies);
        command.env_remove("PLANRUN_CRASH_AT");
        if let Some(crash) = crash {
            command.env("PLANRUN_CRASH_AT", crash);
        }
        command.output().map_err(|error| format!("cannot run planrun: {error}"))
    };
    let close_count = || -> Result<u64, String> {
        let text = fs::read_to_string(workspace.join(TICKETS_FILE)).map_err(|error| error.to_string())?;
        let value: Value = crate::strict_json::parse(&text).map_err(|error| error.to_string())?;
        Ok(value["tickets"]["ticket-7"]["close_count"].as_u64().unwrap_or(u64::MAX))
    };
    let plan = plan.to_string_lossy().into_owned();
    let started = run(&["--plan", &plan, "--run-id", RUN_ID, "--quiet"], None)?;
    let paused = started.status.code() == Some(i32::from(ExitStatus::WaitingApproval));
    let before_approval = close_count()?;
    let approved = run(&["approve", RUN_ID], None)?.status.success();
    let crashed = run(&["resume", RUN_ID, "--quiet"], Some("close:after_effect"))?;
    let crashed_by_hook = !crashed.status.success() && crashed.status.code().is_none();
    let after_crash = close_count()?;
    let resumed = run(&["resume", RUN_ID, "--quiet"], None)?.status.success();
    let after_recovery = close_count()?;

    let run_id = crate::store::RunId::parse(RUN_ID).map_err(|error| error.to_string())?;
    let loaded = crate::ops::show(workspace, &run_id, env).map_err(|error| error.to_string())?;
    let state = &loaded.state;
    let mut event_types: Vec<&str> = Vec::new();
    for event in &loaded.audit {
        let key = matches!(
            event.event_type.as_str(),
            "approval_requested"
                | "approval_granted"
                | "run_resumed"
                | "receipt_lookup"
                | "receipt_recorded"
                | "receipt_reused"
                | "completion_verified"
        );
        if key && !event_types.contains(&event.event_type.as_str()) {
            event_types.push(&event.event_type);
        }
    }
    let recovered = state.evidence.iter().any(|evidence| evidence.kind == EvidenceKind::RecoveredFromReceipt);
    let phase = match state.status {
        crate::model::RunStatus::Done => "completed",
        other => other.as_str(),
    };
    let checklist = json!({
        "paused_for_approval_with_exit_3": paused,
        "close_count_0_before_approval": before_approval == 0,
        "approved": approved,
        "process_died_after_the_close": crashed_by_hook && after_crash == 1,
        "resumed_without_a_second_close": resumed && after_recovery == 1,
        "evidence_recovered_from_receipt": recovered,
        "completion_verified": state.evidence.iter().any(|evidence| evidence.kind == EvidenceKind::Verify)
            && state.evidence.iter().filter(|evidence| evidence.kind == EvidenceKind::Verify).all(|evidence| evidence.passed),
    });
    let all = checklist.as_object().is_some_and(|items| items.values().all(|value| value == &json!(true)));
    Ok(json!({
        "status": if all { "ok" } else { "failed" },
        "phase": phase,
        "steps": state.counters.steps,
        "tool_calls": state.counters.tool_calls,
        "close_count": after_recovery,
        "event_types": event_types,
        "checklist": checklist,
        "run_id": RUN_ID,
    }))
}
