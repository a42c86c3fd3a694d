//! Plan files: one case per diagnostic code with its position, warnings
//! and template references.

use super::*;

#[test]
fn version_gate() {
    let errors = plan_errors(&with_steps("version = 2\n").replacen("version = 1\n", "", 1));
    assert!(errors.contains(&"unsupported-version@3:11".to_string()), "{errors:?}");
    let (loader, _) = plan_text("p.toml", "version = 2\nid = \"p\"\n[[steps]]\nid = \"a\"\nkind = \"finish\"\n");
    assert_eq!(found(&loader), ["unsupported-version@1:11"]);
    assert_eq!(loader.diagnostics()[0].help.as_deref(), Some("this planrun reads `version = 1`"));
    let (loader, _) = policy_text("default.toml", "[budget]\n");
    assert_eq!(found(&loader), ["missing-key@1:1"]);
}

#[test]
fn every_finding_of_a_file_comes_out_in_one_pass() {
    let text = with_steps(
        "description = 3\n[[steps]]\nid = \"a\"\nkind = \"shel\"\n[[steps]]\nid = \"b\"\nkind = \"finish\"\nmesage = \"x\"\n",
    );
    assert_eq!(plan_errors(&text), ["wrong-type@4:15", "unknown-step-kind@7:8", "unknown-key@11:1"]);
}

#[test]
fn unknown_keys_list_the_allowed_keys_with_a_suggestion() {
    let (loader, _) = plan_text("p.toml", &with_steps("[[steps]]\nid = \"a\"\nkind = \"shell\"\ncomand = [\"pwd\"]\n"));
    assert_eq!(found(&loader), ["missing-key@4:1", "unknown-key@7:1"]);
    let unknown = &loader.diagnostics()[1];
    assert_eq!(unknown.message, "unknown key `comand` in step `a`");
    assert_eq!(unknown.label.as_deref(), Some("did you mean `command`?"));
    assert_eq!(
        unknown.help.as_deref(),
        Some(
            "allowed keys: `id`, `kind`, `command`, `env`, `cwd`, `stdin`, `timeout_secs`, `retry`, `retry_backoff`, `on_failure`, `approval`, `risk`, `idempotency_key`, `when`, `expect`"
        )
    );
    // A payload key of another kind is unknown too.
    let errors = plan_errors(&with_steps("[[steps]]\nid = \"a\"\nkind = \"finish\"\ncommand = [\"pwd\"]\n"));
    assert_eq!(errors, ["unknown-key@7:1"]);
    let (loader, _) = plan_text("p.toml", &with_steps("[[steps]]\nid = \"a\"\nkind = \"finsh\"\n"));
    assert_eq!(loader.diagnostics()[0].label.as_deref(), Some("did you mean `finish`?"));
}

#[test]
fn plan_field_errors() {
    let cases: &[(&str, &str)] = &[
        ("[[steps]]\nid = \"a b\"\nkind = \"finish\"\n", "invalid-value@5:6"),
        ("steps = []\n", "invalid-value@4:9"),
        ("steps = 3\n", "wrong-type@4:9"),
        ("[[steps]]\nid = \"a\"\nkind = \"finish\"\ntimeout_secs = 0\n", "invalid-value@7:16"),
        (
            "[[steps]]\nid = \"a\"\nkind = \"finish\"\n[[steps]]\nid = \"a\"\nkind = \"finish\"\n",
            "duplicate-step-id@8:6",
        ),
        ("[[steps]]\nid = \"a\"\nkind = \"shell\"\ncommand = [\"ls\", \"{{ nope }}\"]\n", "template-syntax@7:19"),
        ("[[steps]]\nid = \"a\"\nkind = \"shell\"\ncommand = [\"/bin/rm\"]\n", "invalid-program@7:12"),
        ("[[steps]]\nid = \"a\"\nkind = \"shell\"\ncommand = [\"{{ run.id }}\"]\n", "invalid-program@7:12"),
        ("[[steps]]\nid = \"a\"\nkind = \"shell\"\ncommand = \"ls -la | wc\"\n", "shell-metacharacter@7:19"),
        ("[[steps]]\nid = \"a\"\nkind = \"shell\"\ncommand = \"ls 'x\"\n", "invalid-value@7:11"),
        (
            "[[steps]]\nid = \"a\"\nkind = \"read_file\"\npath = \"{{ last.output_text }}\"\n",
            "untrusted-control-field@7:9",
        ),
        ("expected_status = \"maybe\"\n", "invalid-value@4:19"),
        ("description = 1979-05-27\n", "wrong-type@4:15"),
        ("keywords = [\"\"]\n", "invalid-value@4:13"),
        ("policy = \"../x\"\n", "invalid-value@4:10"),
    ];
    for (steps, expected) in cases {
        let errors = plan_errors(&with_steps(steps));
        assert!(errors.contains(&expected.to_string()), "{steps}: {errors:?}");
    }
    let (loader, _) = plan_text(
        "p.toml",
        &with_steps("[[steps]]\nid = \"a\"\nkind = \"finish\"\n[[steps]]\nid = \"a\"\nkind = \"finish\"\n"),
    );
    let duplicate =
        loader.diagnostics().iter().find(|diagnostic| diagnostic.code == "duplicate-step-id").expect("duplicate");
    assert_eq!(duplicate.message, "duplicate step id `a`, first used on line 5");
}

#[test]
fn string_commands_split_with_shell_words() {
    let (loader, plan) = plan_text(
        "p.toml",
        &with_steps(
            "[[steps]]\nid = \"a\"\nkind = \"shell\"\ncommand = \"echo 'hello world'\"\n[[steps]]\nid = \"z\"\nkind = \"finish\"\n",
        ),
    );
    assert_eq!(found(&loader), Vec::<String>::new());
    let plan = plan.expect("plan");
    let Action::Shell { command, .. } = &plan.steps[0].action else {
        panic!("not a shell step");
    };
    let words: Vec<&str> = command.iter().map(|token| token.source()).collect();
    assert_eq!(words, ["echo", "hello world"]);
}

#[test]
fn plan_warnings_and_notes() {
    let steps = "[[steps]]\nid = \"a\"\nkind = \"write_file\"\npath = \"../x\"\ncontent = \"x\"\n[[steps]]\nid = \"b\"\nkind = \"finish\"\n[[steps]]\nid = \"c\"\nkind = \"finish\"\n";
    let (loader, plan) = plan_text("p.toml", &with_steps(steps));
    assert!(plan.is_some());
    assert_eq!(found(&loader), ["unreachable-step@13:6", "path-outside-workspace@7:8"]);
    assert!(loader.diagnostics().iter().all(|d| d.severity == Severity::Warning));
    let failing = with_steps(steps).replace("default = true\n", "default = true\nexpected_status = \"failed\"\n");
    let (loader, plan) = plan_text("p.toml", &failing);
    assert!(plan.is_some());
    assert!(loader.diagnostics().iter().all(|d| d.severity == Severity::Note));
    assert!(
        loader.diagnostics()[0]
            .help
            .as_deref()
            .is_some_and(|help| help.ends_with("expected: this plan documents a failing scenario"))
    );
    let (loader, _) = plan_text("p.toml", &with_steps("[[steps]]\nid = \"a\"\nkind = \"flaky\"\n"));
    assert_eq!(found(&loader), ["no-finish@4:3"]);
}

/// A reference that can never resolve is an error that refuses the plan,
/// also in a plan that documents a failing scenario (errors are never
/// softened): the run must not start and execute the steps before it.
#[test]
fn unresolvable_template_references_refuse_the_plan() {
    let steps = "[[steps]]\nid = \"a\"\nkind = \"write_file\"\npath = \"x\"\ncontent = \"{{ last.output_text }} {{ steps.zz.output_text }} {{ steps.b.output_text }}\"\n[[steps]]\nid = \"b\"\nkind = \"finish\"\n";
    for text in [
        with_steps(steps),
        with_steps(steps).replace("default = true\n", "default = true\nexpected_status = \"failed\"\n"),
    ] {
        let (loader, plan) = plan_text("p.toml", &text);
        assert!(plan.is_none(), "a plan with an unresolvable reference must not load");
        let line = if text.contains("expected_status") { 9 } else { 8 };
        assert_eq!(
            found(&loader),
            [
                format!("template-last-in-first-step@{line}:12"),
                format!("template-unknown-step@{line}:35"),
                format!("template-forward-reference@{line}:62"),
            ]
        );
        assert!(loader.diagnostics().iter().all(|d| d.severity == Severity::Error));
    }
}

/// `stderr_text` is a step field like `output_text`: accepted after a
/// shell step, refused for a step that has not run, never in a control
/// field, and a warning where the step runs no program (always empty).
#[test]
fn stderr_text_references_are_checked_like_the_other_step_fields() {
    let shell = "[[steps]]\nid = \"t\"\nkind = \"shell\"\ncommand = [\"echo\"]\n";
    let write = |content: &str| {
        format!("[[steps]]\nid = \"w\"\nkind = \"write_file\"\npath = \"x\"\ncontent = \"{content}\"\n")
    };
    let end = "[[steps]]\nid = \"end\"\nkind = \"finish\"\n";
    let (loader, plan) =
        plan_text("p.toml", &with_steps(&format!("{shell}{}{end}", write("{{ steps.t.stderr_text }}"))));
    assert!(plan.is_some() && found(&loader).is_empty(), "{:?}", found(&loader));
    let (loader, plan) =
        plan_text("p.toml", &with_steps(&format!("{}{shell}{end}", write("{{ steps.t.stderr_text }}"))));
    assert!(plan.is_none());
    assert_eq!(found(&loader), ["template-forward-reference@8:12"]);
    let (loader, _) = plan_text("p.toml", &with_steps(&format!("{}{end}", write("{{ steps.tt.stderr_text }}"))));
    assert_eq!(found(&loader), ["template-unknown-step@8:12"]);
    let path = "[[steps]]\nid = \"r\"\nkind = \"read_file\"\npath = \"{{ steps.t.stderr_text }}\"\n";
    let (loader, _) = plan_text("p.toml", &with_steps(&format!("{shell}{path}")));
    assert!(found(&loader).iter().any(|code| code.starts_with("untrusted-control-field@")), "{:?}", found(&loader));
    let finish = "[[steps]]\nid = \"f\"\nkind = \"finish\"\nmessage = \"{{ last.stderr_text }}\"\n";
    let (loader, plan) = plan_text("p.toml", &with_steps(&format!("{shell}{}{finish}", write("x"))));
    assert!(plan.is_some());
    assert_eq!(found(&loader), ["template-field-never-produced@16:12"]);
    assert!(loader.diagnostics()[0].message.contains("never produces `stderr_text`"), "{:?}", loader.diagnostics());
}

/// `docs/plan-files.md` and `docs/authoring-and-review.md` name the
/// defaults of plan and scenario keys.
#[test]
fn the_documented_plan_defaults_are_the_defaults() {
    use crate::load::defaults::{DEFAULT_FLAKY_FAILURES, DEFAULT_FLAKY_OUTPUT};
    use crate::model::{DEFAULT_CLOCK, DEFAULT_FOLDER, DEFAULT_POLICY};
    let page = |name: &str| {
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("docs").join(name)).expect("page")
    };
    let (plans, scenarios) = ("plan-files.md", "authoring-and-review.md");
    for (name, said) in [
        (plans, format!("default \"{DEFAULT_POLICY}\"")),
        (
            plans,
            format!("`failures` (default {DEFAULT_FLAKY_FAILURES}), `output` (default `\"{DEFAULT_FLAKY_OUTPUT}\"`)"),
        ),
        (scenarios, format!("the snapshot folder below the snapshots root (default `{DEFAULT_FOLDER}`)")),
        (scenarios, format!("the RFC 3339 start of the run's test clock (default `{DEFAULT_CLOCK}`)")),
        (scenarios, format!("its clock start (default `{DEFAULT_CLOCK}`)")),
    ] {
        assert!(page(name).contains(&said), "docs/{name} should say: {said}");
    }
}
