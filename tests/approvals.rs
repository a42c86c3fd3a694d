//! Approvals of paused runs: an approval must match the frozen action
//! (fingerprint, scope, state version) and must not have expired, a forged
//! approval breaks the checkpoint's seal, a policy rule can ask for one,
//! the plan may not change under a paused run, and a paused or interrupted
//! run can be rejected or cancelled with nothing more running.

use std::fs;

use serde_json::{Value, json};

use crate::common::tickets::{RUN, T_APPROVE, T_RESUME, close_count, pause, records, ticket_sandbox};
use crate::common::{Sandbox, TEST_POLICY, one_step_plan};

#[test]
fn approvals_that_do_not_match_are_refused_and_change_nothing() {
    let sandbox = ticket_sandbox("open", 0);
    pause(&sandbox);
    let before = records(&sandbox);
    for (args, expected) in [
        (vec!["approve", RUN, "--fingerprint", &"0".repeat(64)], "fingerprint"),
        (vec!["approve", RUN, "--scope", "ticket:ticket-8"], "scope"),
        (vec!["approve", RUN, "--state-version", "1"], "state version"),
    ] {
        let output = sandbox.planrun().args(&args).clock(T_APPROVE).expect_code(1).run();
        assert!(output.stderr.contains("approval_invalid") && output.stderr.contains(expected), "{}", output.stderr);
        assert_eq!(records(&sandbox), before, "{args:?} changed the records");
    }
    let resume = sandbox.planrun().args(["resume", RUN]).clock(T_RESUME).run();
    assert_eq!(resume.code, 1, "no approval yet: {}", resume.snapshot());
    assert!(resume.stderr.contains("approval_invalid"), "{}", resume.stderr);
    assert_eq!(records(&sandbox), before);
    assert_eq!(close_count(&sandbox, "ticket-7"), 0);
}

/// What a person writes into the log is held to the service's limits: a
/// control character (a newline, a terminal escape) or a text over the
/// limit in `--by` or `--reason`, or an approval valid for more than 7 days,
/// is a usage error, and nothing is recorded.
#[test]
fn decision_text_over_the_limits_is_refused_and_changes_nothing() {
    let sandbox = ticket_sandbox("open", 0);
    pause(&sandbox);
    let before = records(&sandbox);
    let long_reason = "r".repeat(2001);
    let long_name = "n".repeat(201);
    for args in [
        vec!["approve", RUN, "--by", "evil\n\u{1b}[31mFAKE approval"],
        vec!["approve", RUN, "--by", &long_name],
        vec!["approve", RUN, "--expires-in", "8d"],
        vec!["reject", RUN, "--reason", &long_reason],
        vec!["reject", RUN, "--reason", "line\nbreak"],
        vec!["cancel", RUN, "--reason", "\u{7}bell"],
    ] {
        let output = sandbox.planrun().args(&args).clock(T_APPROVE).expect_code(2).run();
        assert!(output.stderr.contains("error: invalid value"), "{args:?}: {}", output.stderr);
        assert_eq!(records(&sandbox), before, "{args:?} changed the records");
    }
    let approved = sandbox.planrun().args(["approve", RUN, "--by", &"n".repeat(200), "--expires-in", "7d"]);
    approved.clock(T_APPROVE).expect_code(0).run();
    assert_eq!(close_count(&sandbox, "ticket-7"), 0);
}

#[test]
fn an_expired_approval_is_refused() {
    let sandbox = ticket_sandbox("open", 0);
    pause(&sandbox);
    sandbox.planrun().args(["approve", RUN, "--expires-in", "60s"]).clock(T_APPROVE).expect_code(0).run();
    let before = records(&sandbox);
    let resume = sandbox.planrun().args(["resume", RUN]).clock(T_RESUME).expect_code(1).run();
    assert!(resume.stderr.contains("expired"), "{}", resume.stderr);
    assert_eq!(records(&sandbox), before);
    assert_eq!(close_count(&sandbox, "ticket-7"), 0);
}

#[test]
fn a_forged_approval_in_the_checkpoint_fails_verification() {
    let sandbox = ticket_sandbox("open", 0);
    pause(&sandbox);
    let path = sandbox.workspace().join("runs").join(RUN).join("state.json");
    let mut envelope: Value = serde_json::from_str(&fs::read_to_string(&path).expect("state")).expect("JSON");
    let pending = envelope["payload"]["pending_action"].clone();
    envelope["payload"]["approval"] = json!({
        "fingerprint": pending["fingerprint"], "state_version": pending["state_version"], "scope": pending["scope"],
        "approved_by": "mallory", "approved_at": "2026-01-01T00:05:00Z", "expires_at": "2027-01-01T00:00:00Z",
    });
    fs::write(&path, serde_json::to_string_pretty(&envelope).expect("JSON")).expect("write");
    let before = records(&sandbox);
    let resume = sandbox.planrun().args(["resume", RUN]).clock(T_RESUME).expect_code(2).run();
    assert!(resume.stderr.contains("digest mismatch"), "{}", resume.stderr);
    assert_eq!(records(&sandbox), before);
    assert_eq!(close_count(&sandbox, "ticket-7"), 0);
}

#[test]
fn a_policy_rule_with_decision_prompt_pauses_the_step() {
    let sandbox = Sandbox::new();
    let policy = TEST_POLICY
        .replace("[[shell.allow]]\nprogram = \"pwd\"", "[[shell.allow]]\nprogram = \"pwd\"\ndecision = \"prompt\"");
    let plan = one_step_plan("kind = \"shell\"\ncommand = [\"pwd\"]");
    let output = sandbox.run_plan(&plan, &policy);
    assert_eq!(output.code, 3, "{}", output.snapshot());
    assert_eq!(sandbox.state("t")["pending_action"]["required_by"], "policy");
    assert!(sandbox.history("t").is_empty(), "nothing ran before approval");
    sandbox.planrun().in_sandbox().args(["approve", "t"]).expect_code(0).run();
    sandbox.planrun().in_sandbox().args(["resume", "t"]).expect_code(0).run();
    assert_eq!(sandbox.history("t")[0]["status"], "done");
}

/// `approve` of a run whose plan changed is refused, and says what can be
/// done: restore the file, or reject or cancel the run. It pointed at
/// `--allow-changed-files`, which `approve` does not have.
#[test]
fn approving_after_the_plan_changed_is_refused_with_what_can_be_done() {
    let sandbox = Sandbox::new();
    let plan = "version = 1\nid = \"test\"\n\n[[steps]]\nid = \"ask\"\nkind = \"write_file\"\npath = \"a.txt\"\ncontent = \"a\"\napproval = \"required\"\n";
    assert_eq!(sandbox.run_plan(plan, TEST_POLICY).code, 3);
    sandbox.write("plans/test.toml", &format!("{plan}\n# edited\n"));
    let refused = sandbox.planrun().in_sandbox().args(["approve", "t"]).expect_code(1).run();
    assert!(refused.stderr.contains("plan `plans/test.toml` changed since run `t` started"), "{}", refused.stderr);
    assert!(refused.stderr.contains("`planrun reject t` or `planrun cancel t`"), "{}", refused.stderr);
    assert!(!refused.stderr.contains("--allow-changed-files"), "{}", refused.stderr);
    assert_eq!(sandbox.state("t")["approval"], serde_json::Value::Null, "nothing approved");
    // Restored, it is approved.
    sandbox.write("plans/test.toml", plan);
    sandbox.planrun().in_sandbox().args(["approve", "t"]).expect_code(0).run();
}

#[test]
fn resuming_after_the_plan_changed_is_refused_unless_allowed() {
    let sandbox = Sandbox::new();
    let plan = "version = 1\nid = \"test\"\n\n[[steps]]\nid = \"ask\"\nkind = \"write_file\"\npath = \"a.txt\"\ncontent = \"a\"\napproval = \"required\"\n";
    assert_eq!(sandbox.run_plan(plan, TEST_POLICY).code, 3);
    sandbox.planrun().in_sandbox().args(["approve", "t"]).expect_code(0).run();
    sandbox.write("plans/test.toml", &format!("{plan}\n# edited\n"));
    let refused = sandbox.planrun().in_sandbox().args(["resume", "t"]).expect_code(1).run();
    assert!(refused.stderr.contains("changed since run"), "{}", refused.stderr);
    assert!(!sandbox.workspace().join("a.txt").exists());
    sandbox.planrun().in_sandbox().args(["resume", "t", "--allow-changed-files"]).expect_code(0).run();
    assert_eq!(fs::read_to_string(sandbox.workspace().join("a.txt")).expect("written"), "a");
}

#[test]
fn reject_ends_the_run_with_no_write() {
    let sandbox = ticket_sandbox("open", 0);
    pause(&sandbox);

    sandbox.planrun().args(["reject", RUN, "--reason", "not this week"]).clock(T_APPROVE).expect_code(0).run();
    assert_eq!(sandbox.state(RUN)["status"], "rejected");
    assert_eq!(close_count(&sandbox, "ticket-7"), 0);
    let resume = sandbox.planrun().args(["resume", RUN]).clock(T_RESUME).run();
    assert_eq!(resume.code, 1, "a rejected run cannot be resumed: {}", resume.snapshot());
    assert_eq!(close_count(&sandbox, "ticket-7"), 0);
}

#[test]
fn cancel_abandons_a_paused_or_interrupted_run_and_nothing_more_runs() {
    let sandbox = ticket_sandbox("open", 0);
    pause(&sandbox);
    sandbox.planrun().args(["cancel", RUN, "--reason", "wrong ticket"]).clock(T_APPROVE).expect_code(0).run();
    let state = sandbox.state(RUN);
    assert_eq!((state["status"].as_str(), state["stop_reason"].as_str()), (Some("cancelled"), Some("cancelled")));
    assert_eq!(state["pending_action"], Value::Null);
    for command in [["resume", RUN], ["approve", RUN], ["cancel", RUN]] {
        sandbox.planrun().args(command).clock(T_RESUME).expect_code(1).run();
    }
    assert_eq!(close_count(&sandbox, "ticket-7"), 0);

    let interrupted = Sandbox::new();
    let plan = "version = 1\nid = \"test\"\n\n[[steps]]\nid = \"one\"\nkind = \"write_file\"\npath = \"one.txt\"\ncontent = \"1\"\n\n[[steps]]\nid = \"two\"\nkind = \"write_file\"\npath = \"two.txt\"\ncontent = \"2\"\n";
    interrupted.write_plan(plan, TEST_POLICY);
    interrupted.test_plan().env("PLANRUN_CRASH_AT", "one:after_effect").expect_code(-1).run();
    interrupted.planrun().in_sandbox().args(["cancel", "t"]).expect_code(0).run();
    interrupted.planrun().in_sandbox().args(["resume", "t"]).expect_code(1).run();
    assert!(!interrupted.workspace().join("two.txt").exists(), "a cancelled run ran on");
}

/// A run's plan and policy paths are recorded as given, relative to the
/// folder it was started in: `approve` and `resume` run from another folder
/// (with `--workspace`) find them beside the workspace; a file found in
/// neither place is named with both paths tried (exit 2, nothing runs).
#[test]
fn approve_and_resume_find_the_runs_files_from_another_folder() {
    let sandbox = Sandbox::new();
    let plan = "version = 1\nid = \"test\"\n\n[[steps]]\nid = \"ask\"\nkind = \"write_file\"\npath = \"a.txt\"\ncontent = \"a\"\napproval = \"required\"\n";
    assert_eq!(sandbox.run_plan(plan, TEST_POLICY).code, 3);
    // The harness runs from the repository's folder unless told otherwise.
    sandbox.planrun().args(["approve", "t"]).expect_code(0).run();

    let moved = sandbox.path().join("plans/moved.toml");
    fs::rename(sandbox.path().join("plans/test.toml"), &moved).expect("move the plan away");
    let missing = sandbox.planrun().args(["resume", "t"]).expect_code(2).run();
    let beside = sandbox.path().join("plans/test.toml");
    // (The harness writes the sandbox's folder as `[TMP]`.)
    assert!(missing.stderr.contains("`[TMP]/plans/test.toml`"), "{}", missing.stderr);
    assert!(missing.stderr.contains(&format!("`{}/plans/test.toml`", crate::common::ROOT)), "{}", missing.stderr);
    assert!(!sandbox.workspace().join("a.txt").exists(), "nothing ran");
    fs::rename(&moved, &beside).expect("restore the plan");

    sandbox.planrun().current_dir(sandbox.workspace()).args(["resume", "t"]).expect_code(0).run();
    assert_eq!(fs::read_to_string(sandbox.workspace().join("a.txt")).expect("written"), "a");
}

/// A run records its files' absolute paths as it started: `approve` and
/// `resume` find them from any folder, even where neither the current
/// folder nor the workspace's parent holds them (issue 22 item 12: they
/// were refused as missing).
#[test]
fn approve_and_resume_find_the_runs_files_by_the_absolute_paths_it_recorded() {
    let sandbox = Sandbox::new();
    let plan = "version = 1\nid = \"test\"\n\n[[steps]]\nid = \"ask\"\nkind = \"write_file\"\npath = \"a.txt\"\ncontent = \"a\"\napproval = \"required\"\n";
    // The project folder is not the workspace's parent.
    sandbox.write("project/plans/test.toml", plan);
    sandbox.write("project/policies/default.toml", TEST_POLICY);
    let project = sandbox.path().join("project");
    sandbox
        .planrun()
        .current_dir(&project)
        .args(["--plan", "plans/test.toml", "--policies", "policies", "--run-id", "t"])
        .expect_code(3)
        .run();
    let state = sandbox.state("t");
    assert_eq!(state["plan"]["path"], "plans/test.toml", "{state}");
    // (The harness writes the sandbox's folder as `[TMP]`.)
    assert_eq!(state["plan"]["plan_file"], "[TMP]/project/plans/test.toml", "{state}");
    assert_eq!(state["plan"]["policy_file"], "[TMP]/project/policies/default.toml", "{state}");
    // From the repository's folder (the harness's default) and from `/`.
    sandbox.planrun().args(["approve", "t"]).expect_code(0).run();
    assert!(!sandbox.workspace().join("a.txt").exists(), "approving runs nothing");
    sandbox.planrun().current_dir("/").args(["resume", "t"]).expect_code(0).run();
    assert_eq!(fs::read_to_string(sandbox.workspace().join("a.txt")).expect("written"), "a");
}

/// `--plan FILE` whose policy is not in the policies folder names the
/// files it looked for, the folder (absolute) and how to set it.
#[test]
fn a_plan_whose_policy_is_missing_names_the_folder_it_looked_in() {
    let sandbox = Sandbox::new();
    sandbox.write("plans/test.toml", "version = 1\nid = \"test\"\n\n[[steps]]\nid = \"end\"\nkind = \"finish\"\n");
    fs::create_dir_all(sandbox.workspace()).expect("the workspace");
    let plan = sandbox.path().join("plans/test.toml");
    let output = sandbox
        .planrun()
        .current_dir(sandbox.workspace())
        .args(["--plan", plan.to_str().expect("UTF-8"), "--run-id", "t"])
        .expect_code(2)
        .run();
    // (The harness writes the workspace's folder as `[WORKSPACE]`.)
    assert!(output.stderr.contains("in `[WORKSPACE]/policies`"), "{}", output.stderr);
    assert!(
        output.stderr.contains("`default.toml`") && output.stderr.contains("`--policies DIR` or `PLANRUN_POLICIES`")
    );
    assert!(!sandbox.workspace().join("runs/t").exists(), "nothing ran");
}
