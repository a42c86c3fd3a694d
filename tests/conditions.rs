//! `when`: every comparison (`equals`, `not_equals`, `contains`, `matches`,
//! `lt`/`le`/`gt`/`ge`, `exists`) true and false, `all`/`any` lists,
//! a value that is not a number failing the step (`template_error`),
//! `exists` on an `output_json` field that is missing, `otherwise = "fail"`
//! (exit 1, `condition_failed`, the message shown, no later step run),
//! bounds from an input or a step's output (one that renders no number
//! fails the step) and the loader's refusals with `file:line:column`.

use crate::common::{Sandbox, TEST_POLICY};

fn plan(body: &str) -> String {
    format!("version = 1\nid = \"test\"\n\n{body}")
}

/// Writes `data.json`, reads it (`output_json`), and echoes `42`: the values
/// the conditions test.
const SETUP: &str = "[[steps]]\nid = \"write\"\nkind = \"write_file\"\npath = \"data.json\"\ncontent = '{\"f\": \"x\", \"n\": 7}'\n\n[[steps]]\nid = \"read\"\nkind = \"read_file\"\npath = \"data.json\"\n\n[[steps]]\nid = \"num\"\nkind = \"shell\"\ncommand = [\"echo\", \"42\"]\n\n";

/// A step writing `canary.txt`, guarded by `when` (given as inline-table text).
fn guarded(when: &str) -> String {
    format!(
        "{SETUP}[[steps]]\nid = \"guarded\"\nkind = \"write_file\"\npath = \"canary.txt\"\ncontent = \"ran\"\nwhen = {when}\n"
    )
}

/// Runs the guarded plan: `Some(ran)` when it ended `done`.
fn runs_guarded(when: &str) -> (bool, Sandbox) {
    let sandbox = Sandbox::new();
    let output = sandbox.run_plan(&plan(&guarded(when)), TEST_POLICY);
    assert_eq!(output.code, 0, "{when}\n{}", output.snapshot());
    let ran = sandbox.workspace().join("canary.txt").exists();
    (ran, sandbox)
}

const NUM: &str = "{{ steps.num.output_text }}";

#[test]
fn every_comparison_holds_and_fails() {
    let cases: Vec<(String, bool)> = vec![
        (format!("{{ value = \"{NUM}\", equals = \"42\\n\" }}"), true),
        (format!("{{ value = \"{NUM}\", equals = \"41\" }}"), false),
        (format!("{{ value = \"{NUM}\", not_equals = \"41\" }}"), true),
        (format!("{{ value = \"{NUM}\", contains = \"4\" }}"), true),
        (format!("{{ value = \"{NUM}\", contains = \"5\" }}"), false),
        (format!("{{ value = \"{NUM}\", matches = \"^4[0-9]\" }}"), true),
        (format!("{{ value = \"{NUM}\", matches = \"^5\" }}"), false),
        (format!("{{ value = \"{NUM}\", lt = 43 }}"), true),
        (format!("{{ value = \"{NUM}\", lt = 42 }}"), false),
        (format!("{{ value = \"{NUM}\", le = 42 }}"), true),
        (format!("{{ value = \"{NUM}\", le = 41.5 }}"), false),
        (format!("{{ value = \"{NUM}\", gt = 41.5 }}"), true),
        (format!("{{ value = \"{NUM}\", gt = 42 }}"), false),
        (format!("{{ value = \"{NUM}\", ge = 42 }}"), true),
        (format!("{{ value = \"{NUM}\", ge = 100 }}"), false),
        ("{ value = \"{{ steps.read.output_json.f }}\", exists = true }".to_string(), true),
        ("{ value = \"{{ steps.read.output_json.missing }}\", exists = true }".to_string(), false),
        ("{ value = \"{{ steps.read.output_json.missing }}\", exists = false }".to_string(), true),
        ("{ value = \"{{ steps.read.output_json.f }}\", exists = false }".to_string(), false),
        (format!("{{ all = [{{ value = \"{NUM}\", gt = 10 }}, {{ value = \"{NUM}\", lt = 50 }}] }}"), true),
        (format!("{{ all = [{{ value = \"{NUM}\", gt = 10 }}, {{ value = \"{NUM}\", lt = 20 }}] }}"), false),
        (format!("{{ any = [{{ value = \"{NUM}\", lt = 10 }}, {{ value = \"{NUM}\", contains = \"2\" }}] }}"), true),
        (format!("{{ any = [{{ value = \"{NUM}\", lt = 10 }}, {{ value = \"{NUM}\", contains = \"9\" }}] }}"), false),
    ];
    for (when, expected) in cases {
        let (ran, sandbox) = runs_guarded(&when);
        assert_eq!(ran, expected, "{when}");
        let history = sandbox.history("t");
        let last = history.last().expect("the guarded step is recorded");
        assert_eq!(last["status"], if expected { "done" } else { "skipped" }, "{when}");
    }
}

#[test]
fn all_stops_at_its_first_false_test_and_any_at_its_first_true_one() {
    // The second test would fail the step (not a number); it is never evaluated.
    let (ran, _) = runs_guarded(&format!(
        "{{ all = [{{ value = \"{NUM}\", lt = 10 }}, {{ value = \"{{{{ steps.read.output_json.f }}}}\", lt = 1 }}] }}"
    ));
    assert!(!ran);
    let (ran, _) = runs_guarded(&format!(
        "{{ any = [{{ value = \"{NUM}\", gt = 10 }}, {{ value = \"{{{{ steps.read.output_json.f }}}}\", lt = 1 }}] }}"
    ));
    assert!(ran);
}

#[test]
fn a_value_that_is_not_a_number_fails_the_step() {
    let sandbox = Sandbox::new();
    let output =
        sandbox.run_plan(&plan(&guarded("{ value = \"{{ steps.read.output_json.f }}\", lt = 3 }")), TEST_POLICY);
    assert_eq!(output.code, 1, "{}", output.snapshot());
    let state = sandbox.state("t");
    assert_eq!(state["stop_reason"], "step_failed", "{state}");
    let history = sandbox.history("t");
    let last = history.last().expect("the guarded step is recorded");
    assert_eq!(last["failure_class"], "template_error");
    let error = last["error"].as_str().unwrap_or_default();
    assert!(error.contains("`when` value \"x\" is not a number"), "{error}");
    assert!(!sandbox.workspace().join("canary.txt").exists(), "the guarded step ran");
}

#[test]
fn otherwise_fail_ends_the_run_with_the_message_and_nothing_later_runs() {
    let sandbox = Sandbox::new();
    let when = format!(
        "{{ value = \"{NUM}\", lt = 10, otherwise = \"fail\", message = \"the count {{{{ steps.num.output_text | trim }}}} is over the limit\" }}"
    );
    let body = format!(
        "{}\n[[steps]]\nid = \"later\"\nkind = \"write_file\"\npath = \"later.txt\"\ncontent = \"ran\"\n",
        guarded(&when)
    );
    let output = sandbox.run_plan(&plan(&body), TEST_POLICY);
    assert_eq!(output.code, 1, "{body}\n{}", output.snapshot());
    let state = sandbox.state("t");
    assert_eq!(state["status"], "failed", "{state}");
    assert_eq!(state["stop_reason"], "condition_failed", "{state}");
    assert_eq!(state["error"], "the count 42 is over the limit", "{state}");
    assert!(
        output.stderr.contains("the count 42 is over the limit")
            || output.stdout.contains("the count 42 is over the limit"),
        "{}",
        output.snapshot()
    );
    assert!(!sandbox.workspace().join("canary.txt").exists(), "the guarded step ran");
    assert!(!sandbox.workspace().join("later.txt").exists(), "a step after the failed condition ran");
    let history = sandbox.history("t");
    let last = history.last().expect("the guarded step is recorded");
    assert_eq!((last["step_id"].as_str(), last["status"].as_str()), (Some("guarded"), Some("skipped")));
    let show = sandbox.planrun().args(["show", "t"]).run();
    assert!(show.stdout.contains("the count 42 is over the limit"), "{}", show.snapshot());
    let verify = sandbox.planrun().args(["verify", "t"]).run();
    assert_eq!(verify.code, 0, "{}", verify.snapshot());

    // A true condition with `otherwise = "fail"` lets the run go on.
    let passing = Sandbox::new();
    let output = passing.run_plan(&plan(&body.replace("lt = 10", "lt = 100")), TEST_POLICY);
    assert_eq!(output.code, 0, "{}", output.snapshot());
    assert!(passing.workspace().join("later.txt").exists(), "the run stopped on a true condition");
}

#[test]
fn the_loader_refuses_bad_conditions_with_their_place() {
    let line = 25; // the `when` line of `guarded`
    let cases = [
        (format!("{{ value = \"{NUM}\", lt = \"x\" }}"), "is \"x\", not a number".to_string()),
        ("{ all = [] }".to_string(), "`when.all` is empty".to_string()),
        (format!("{{ value = \"{NUM}\", lt = 1, gt = 2 }}"), "`when` needs exactly one comparison".to_string()),
        (format!("{{ value = \"{NUM}\" }}"), "`when` needs exactly one comparison".to_string()),
        (
            format!("{{ all = [{{ value = \"{NUM}\", lt = 1, equals = \"a\" }}] }}"),
            "`when.all[0]` needs exactly one comparison".to_string(),
        ),
        (format!("{{ all = [{{ value = \"{NUM}\", exists = \"yes\" }}] }}"), "must be a boolean".to_string()),
        (format!("{{ value = \"{NUM}\", lessthan = 1 }}"), "unknown key `lessthan`".to_string()),
        (format!("{{ value = \"{NUM}\", equals = \"a\", otherwise = \"fail\" }}"), "missing key `message`".to_string()),
        (
            format!("{{ value = \"{NUM}\", equals = \"a\", message = \"m\" }}"),
            "without `otherwise = \"fail\"`".to_string(),
        ),
        (
            format!("{{ value = \"{NUM}\", all = [{{ value = \"{NUM}\", lt = 1 }}] }}"),
            "`when` has both `all` and `value`".to_string(),
        ),
        (
            format!("{{ all = [{{ value = \"{NUM}\", lt = 1 }}], any = [{{ value = \"{NUM}\", lt = 1 }}] }}"),
            "`when` has both `all` and `any`".to_string(),
        ),
    ];
    for (when, message) in cases {
        let sandbox = Sandbox::new();
        let output = sandbox.run_plan(&plan(&guarded(&when)), TEST_POLICY);
        assert_eq!(output.code, 2, "{when}\n{}", output.snapshot());
        assert!(output.stderr.contains(&message), "{when}\n{}", output.stderr);
        let place = format!("plans/test.toml:{line}:");
        assert!(output.stderr.contains(&place), "{when}: {place}\n{}", output.stderr);
        assert!(!sandbox.workspace().join("runs").join("t").exists(), "a refused plan started a run");
    }
    // The suggestion for a misspelt comparison.
    let sandbox = Sandbox::new();
    let output = sandbox.run_plan(&plan(&guarded(&format!("{{ value = \"{NUM}\", exist = true }}"))), TEST_POLICY);
    assert!(output.stderr.contains("did you mean `exists`?"), "{}", output.stderr);
}

/// A plan whose guarded step compares `42` with the input `limit`.
fn limited(comparison: &str) -> String {
    plan(&format!(
        "[inputs.limit]\ntype = \"integer\"\ndefault = 50\n\n{}",
        guarded(&format!("{{ value = \"{NUM}\", {comparison} = \"{{{{ inputs.limit }}}}\" }}"))
    ))
}

#[test]
fn a_bound_can_be_an_input_or_an_output() {
    let ran = |plan: &str, args: &[&str]| {
        let sandbox = Sandbox::new();
        sandbox.write_plan(plan, TEST_POLICY);
        let output = sandbox.test_plan().args(args).run();
        assert_eq!(output.code, 0, "{}", output.snapshot());
        sandbox.workspace().join("canary.txt").exists()
    };
    assert!(ran(&limited("lt"), &[]), "42 < the default 50");
    assert!(!ran(&limited("lt"), &["--input", "limit=40"]), "42 < 40");
    assert!(ran(&limited("ge"), &["--input", "limit=42"]), "42 >= 42");
    // Another step's output as the bound: 42 <= 42.
    let (ran_on_output, _) = runs_guarded(&format!("{{ value = \"{NUM}\", le = \"{NUM}\" }}"));
    assert!(ran_on_output);
}

#[test]
fn a_rendered_bound_that_is_not_a_number_fails_the_step() {
    let sandbox = Sandbox::new();
    let when = "{ value = \"{{ steps.num.output_text }}\", lt = \"{{ steps.read.output_json.f }}\" }";
    let output = sandbox.run_plan(&plan(&guarded(when)), TEST_POLICY);
    assert_eq!(output.code, 1, "{}", output.snapshot());
    assert_eq!(sandbox.state("t")["stop_reason"], "step_failed");
    assert!(output.stderr.contains("template_error"), "{}", output.stderr);
    assert!(output.stderr.contains("is \"x\", not a number"), "{}", output.stderr);
    assert!(!sandbox.workspace().join("canary.txt").exists(), "the guarded step ran");
}

#[test]
fn a_bound_that_is_neither_a_number_nor_a_template_is_refused_at_load() {
    let sandbox = Sandbox::new();
    let output =
        sandbox.run_plan(&plan(&guarded("{ value = \"{{ steps.num.output_text }}\", lt = \"lots\" }")), TEST_POLICY);
    assert_eq!(output.code, 2, "{}", output.snapshot());
    assert!(output.stderr.contains("is \"lots\", not a number"), "{}", output.stderr);
    assert!(output.stderr.contains("plans/test.toml:25:"), "{}", output.stderr);
    // An input the plan does not declare is refused like anywhere else.
    let output = sandbox
        .run_plan(&plan(&guarded(&format!("{{ value = \"{NUM}\", lt = \"{{{{ inputs.nope }}}}\" }}"))), TEST_POLICY);
    assert_eq!(output.code, 2, "{}", output.snapshot());
    assert!(output.stderr.contains("nope"), "{}", output.stderr);
    assert!(!sandbox.workspace().join("runs").exists(), "a run started");
}
