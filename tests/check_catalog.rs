//! `check` sees what the run will see: checking one plan file also checks it
//! against the rest of the catalog (routing clashes), a template reference
//! that can never resolve refuses the plan before anything runs, the hint
//! for a blocked program does not suggest an allow rule, and a broken plan
//! names itself in the error every goal then gets. Each case works on a
//! sandbox copy of the repository's plans and policies.

use std::fs;
use std::path::Path;

use crate::common::{Output, ROOT, Sandbox};

/// A sandbox holding a copy of the repository's `plans/` and `policies/`
/// (not recursive: `policies/service/` is not needed here), plus `extra`
/// written as `plans/<name>`.
fn catalog_with(extra: &[(&str, &str)]) -> Sandbox {
    let sandbox = Sandbox::new();
    for folder in ["plans", "policies"] {
        for entry in fs::read_dir(Path::new(ROOT).join(folder)).expect("read folder").flatten() {
            let path = entry.path();
            if path.is_file() {
                let name = path.file_name().expect("file name").to_string_lossy().into_owned();
                sandbox.write(&format!("{folder}/{name}"), &fs::read_to_string(&path).expect("read file"));
            }
        }
    }
    for (name, text) in extra {
        sandbox.write(&format!("plans/{name}"), text);
    }
    sandbox
}

fn planrun(sandbox: &Sandbox, args: &[&str]) -> Output {
    sandbox.planrun().in_sandbox().args(args).run()
}

/// The diagnostic codes a `check` printed, in order, without the
/// `no-scenario` note every new plan here gets (`planrun_test.rs` tests it).
fn codes(output: &Output) -> Vec<String> {
    output
        .stdout
        .lines()
        .filter_map(|line| line.split_once('[').filter(|(severity, _)| !severity.contains(' ')))
        .filter_map(|(_, rest)| rest.split_once(']').map(|(code, _)| code.to_string()))
        .filter(|code| code != "no-scenario")
        .collect()
}

const CLASHING: &str = r#"version = 1
id = "new_inspect"
description = "a second plan for the same goal"
keywords = ["Inspect Project"]

[[steps]]
id = "done"
kind = "finish"
"#;

#[test]
fn checking_one_file_finds_its_keyword_clash_with_the_rest_of_the_catalog() {
    let sandbox = catalog_with(&[("new.toml", CLASHING)]);
    let output = planrun(&sandbox, &["check", "plans/new.toml"]);
    assert_eq!(output.code, 2, "{}", output.snapshot());
    assert_eq!(codes(&output), ["duplicate-keyword"], "{}", output.stdout);
    assert!(output.stdout.contains("--> plans/new.toml:4:"), "{}", output.stdout);
    assert!(
        output.stdout.contains("is also a keyword of plan `inspect_project` (`plans/inspect_project.toml`)"),
        "{}",
        output.stdout
    );
    assert!(output.stdout.contains("checked 1 plan(s)"), "{}", output.stdout);
    // The same clash, once, when the whole catalog is checked.
    let whole = planrun(&sandbox, &["check"]);
    assert_eq!(whole.code, 2, "{}", whole.snapshot());
    assert_eq!(codes(&whole).iter().filter(|code| *code == "duplicate-keyword").count(), 1, "{}", whole.stdout);
}

#[test]
fn checking_one_file_finds_a_second_default_and_a_shadowed_keyword() {
    let second_default =
        "version = 1\nid = \"other_default\"\ndefault = true\n\n[[steps]]\nid = \"done\"\nkind = \"finish\"\n";
    let shadowing = "version = 1\nid = \"inspect_deeper\"\nkeywords = [\"inspect project deeply\"]\n\n[[steps]]\nid = \"done\"\nkind = \"finish\"\n";
    let sandbox = catalog_with(&[("second.toml", second_default), ("shadow.toml", shadowing)]);
    let output = planrun(&sandbox, &["check", "plans/second.toml"]);
    assert_eq!(output.code, 2, "{}", output.snapshot());
    assert_eq!(codes(&output), ["multiple-default-plans"], "{}", output.stdout);
    assert!(output.stdout.contains("after `fallback` (`plans/fallback.toml`)"), "{}", output.stdout);
    let output = planrun(&sandbox, &["check", "plans/shadow.toml"]);
    assert_eq!(output.code, 0, "a note only: {}", output.snapshot());
    assert_eq!(codes(&output), ["route-overlap"], "{}", output.stdout);
    assert!(output.stdout.contains("--> plans/shadow.toml:3:"), "{}", output.stdout);
}

#[test]
fn checking_one_file_does_not_repeat_the_other_files_own_findings() {
    // `deny_bash.toml` and friends have notes of their own; a clean new plan
    // gets none of them.
    let clean = "version = 1\nid = \"clean\"\nkeywords = [\"a clean new goal\"]\n\n[[steps]]\nid = \"done\"\nkind = \"finish\"\n";
    // With its scenario declared, it gets no `no-scenario` note either.
    let scenario = "version = 1\n\n[[scenarios]]\nname = \"clean\"\ngoal = \"a clean new goal\"\nrun_id = \"clean\"\nexpect_code = 0\n";
    let sandbox = catalog_with(&[("clean.toml", clean), ("clean.scenarios.toml", scenario)]);
    let output = planrun(&sandbox, &["check", "plans/clean.toml"]);
    assert_eq!(output.code, 0, "{}", output.snapshot());
    assert_eq!(codes(&output), Vec::<String>::new(), "{}", output.stdout);
    assert!(output.stdout.contains("0 error(s), 0 warning(s), 0 note(s)"), "{}", output.stdout);
}

const UNKNOWN_REFERENCE: &str = r#"version = 1
id = "typo"
keywords = ["copy the listing"]

[[steps]]
id = "list"
kind = "write_file"
path = "canary.txt"
content = "the first step ran"

[[steps]]
id = "save"
kind = "write_file"
path = "listing.txt"
content = "{{ steps.lst.output_text }}"

[[steps]]
id = "done"
kind = "finish"
"#;

#[test]
fn an_unknown_template_reference_is_an_error_and_nothing_runs() {
    let sandbox = catalog_with(&[("typo.toml", UNKNOWN_REFERENCE)]);
    let output = planrun(&sandbox, &["check", "plans/typo.toml"]);
    assert_eq!(output.code, 2, "{}", output.snapshot());
    assert_eq!(codes(&output), ["template-unknown-step"], "{}", output.stdout);
    assert!(output.stdout.starts_with("error[template-unknown-step]"), "{}", output.stdout);
    assert!(output.stdout.contains("did you mean `list`?"), "{}", output.stdout);

    let run = planrun(&sandbox, &["--plan", "plans/typo.toml", "--run-id", "typo"]);
    assert_eq!(run.code, 2, "{}", run.snapshot());
    assert!(run.stderr.contains("error[template-unknown-step]"), "{}", run.stderr);
    assert!(!sandbox.workspace().join("runs/typo").exists(), "a refused plan creates no run folder");
    assert!(!sandbox.workspace().join("canary.txt").exists(), "the step before the bad reference must not run");
}

#[test]
fn a_forward_template_reference_is_an_error_and_nothing_runs() {
    let forward = UNKNOWN_REFERENCE.replace("steps.lst.output_text", "steps.done.output_text");
    let sandbox = catalog_with(&[("typo.toml", &forward)]);
    let output = planrun(&sandbox, &["check", "plans/typo.toml"]);
    assert_eq!(output.code, 2, "{}", output.snapshot());
    assert_eq!(codes(&output), ["template-forward-reference"], "{}", output.stdout);
    let run = planrun(&sandbox, &["--goal", "copy the listing", "--run-id", "typo"]);
    assert_eq!(run.code, 2, "{}", run.snapshot());
    assert!(!sandbox.workspace().join("runs/typo").exists(), "a refused plan creates no run folder");
    assert!(!sandbox.workspace().join("canary.txt").exists(), "the step before the bad reference must not run");
}

#[test]
fn the_hint_for_a_blocked_program_says_no_allow_rule_can_help() {
    let blocked = "version = 1\nid = \"uses_bash\"\nkeywords = [\"list with bash\"]\n\n[[steps]]\nid = \"list\"\nkind = \"shell\"\ncommand = [\"bash\", \"-c\", \"ls\"]\n\n[[steps]]\nid = \"done\"\nkind = \"finish\"\n";
    let sandbox = catalog_with(&[("bash.toml", blocked)]);
    let output = planrun(&sandbox, &["check", "plans/bash.toml"]);
    assert_eq!(output.code, 1, "a warning: {}", output.snapshot());
    assert_eq!(codes(&output), ["shell-always-denied"], "{}", output.stdout);
    assert!(
        output.stdout.contains("`bash` is in `shell.blocked`, which no `[[shell.allow]]` rule can override"),
        "{}",
        output.stdout
    );
    assert!(!output.stdout.contains("allow the command in the policy"), "{}", output.stdout);

    // A program that is merely not allowed still gets the allow-rule hint.
    let unlisted = blocked.replace("[\"bash\", \"-c\", \"ls\"]", "[\"ls\", \"-R\", \"/\"]");
    fs::write(sandbox.path().join("plans/bash.toml"), unlisted).expect("write plan");
    let output = planrun(&sandbox, &["check", "plans/bash.toml"]);
    assert_eq!(codes(&output), ["shell-always-denied"], "{}", output.stdout);
    assert!(output.stdout.contains("allow the command in the policy's `[[shell.allow]]`"), "{}", output.stdout);
}

#[test]
fn the_policy_check_hint_names_the_policy_the_step_runs_under() {
    // Issue 22 item 9: the hint said `planrun policy check -- echo …`, which
    // asks `default` (it allows `echo`) about a step that runs under `team`.
    let plan = "version = 1\nid = \"warm\"\nkeywords = [\"warm up\"]\npolicy = \"team\"\n\n[[steps]]\nid = \"warm\"\nkind = \"shell\"\ncommand = [\"echo\", \"warming up\"]\n\n[[steps]]\nid = \"done\"\nkind = \"finish\"\n";
    let sandbox = catalog_with(&[("warm.toml", plan)]);
    let team = "version = 1\n\n[shell]\nsearch_path = [\"/usr/bin\", \"/bin\"]\n\n[[shell.allow]]\nprogram = \"pwd\"\n";
    sandbox.write("policies/team.toml", team);
    let output = planrun(&sandbox, &["check", "plans/warm.toml"]);
    assert_eq!(codes(&output), ["shell-always-denied"], "{}", output.stdout);
    let hint = "check it with `planrun policy check --policy team -- echo \"warming up\"`";
    assert!(output.stdout.contains(hint), "{}", output.stdout);
    // The suggested command answers as the run would; the old one did not.
    let asked = planrun(&sandbox, &["policy", "check", "--policy", "team", "--", "echo", "warming up"]);
    assert_eq!(asked.code, 1, "team forbids it: {}", asked.snapshot());
    assert_eq!(planrun(&sandbox, &["policy", "check", "--", "echo", "warming up"]).code, 0, "default allows it");

    // Policies read from another folder: the hint names it too.
    fs::rename(sandbox.path().join("policies"), sandbox.path().join("rules")).expect("rename");
    let output = planrun(&sandbox, &["check", "--policies", "rules", "plans/warm.toml"]);
    let hint = "`planrun policy check --policies rules --policy team -- echo \"warming up\"`";
    assert!(output.stdout.contains(hint), "{}", output.stdout);
}

const BROKEN: &str = "version = 1\nid = \"broken\"\nkeywords = [\"something new\"]\nstepz = []\n";

#[test]
fn a_broken_plan_names_itself_in_the_error_every_other_goal_gets() {
    let sandbox = catalog_with(&[("broken.toml", BROKEN)]);
    let expected = "error: plan `plans/broken.toml` has 2 error(s) (run `planrun check plans/broken.toml`); \
                    every goal is refused until it is fixed, because a broken plan or policy could change \
                    which plan a goal routes to";
    let run = planrun(&sandbox, &["--goal", "test flow pwd to file", "--run-id", "unrelated"]);
    assert_eq!(run.code, 2, "{}", run.snapshot());
    assert!(run.stderr.contains(expected), "{}", run.stderr);
    assert!(run.stderr.contains("--> plans/broken.toml:"), "the findings come first: {}", run.stderr);
    assert!(!sandbox.workspace().join("runs/unrelated").exists(), "nothing ran");
    for args in [&["route", "test flow pwd to file"][..], &["list"], &["plan", "--goal", "test flow pwd to file"]] {
        let output = planrun(&sandbox, args);
        assert_eq!(output.code, 2, "{args:?}: {}", output.snapshot());
        assert!(output.stderr.contains(expected), "{args:?}: {}", output.stderr);
    }
    assert!(!sandbox.workspace().exists(), "no command created the workspace");
}

#[test]
fn two_broken_files_are_both_named() {
    let sandbox = catalog_with(&[("broken.toml", BROKEN), ("broken_too.toml", "version = 1\nid = \"x\"\n")]);
    let run = planrun(&sandbox, &["--goal", "test flow pwd to file"]);
    assert_eq!(run.code, 2, "{}", run.snapshot());
    assert!(
        run.stderr.contains("error: errors in plan `plans/broken.toml` (2), plan `plans/broken_too.toml` (1) (run `planrun check`); every goal is refused until they are fixed"),
        "{}",
        run.stderr
    );
}

#[test]
fn a_catalog_error_in_no_file_still_says_why_every_goal_is_refused() {
    let sandbox = catalog_with(&[]);
    fs::remove_file(sandbox.path().join("plans/fallback.toml")).expect("remove the default plan");
    let run = planrun(&sandbox, &["--goal", "test flow pwd to file", "--run-id", "unrelated"]);
    assert_eq!(run.code, 2, "{}", run.snapshot());
    assert!(run.stderr.contains("error[no-default-plan]"), "{}", run.stderr);
    assert!(
        run.stderr.contains(
            "error: the catalog has 1 error(s) (run `planrun check`); every goal is refused until it is fixed"
        ),
        "{}",
        run.stderr
    );
    assert!(!sandbox.workspace().join("runs/unrelated").exists(), "nothing ran");
}

#[test]
fn a_broken_policy_is_named_as_a_policy() {
    let sandbox = catalog_with(&[]);
    sandbox.write("policies/extra.toml", "version = 1\nbogus = true\n");
    let run = planrun(&sandbox, &["route", "test flow pwd to file", "--plans", "./plans/"]);
    assert_eq!(run.code, 2, "{}", run.snapshot());
    assert!(
        run.stderr
            .contains("error: policy `policies/extra.toml` has 1 error(s) (run `planrun check policies/extra.toml`)"),
        "{}",
        run.stderr
    );
}
