//! Policy files: rule examples, field errors and the defaults.

use super::*;

const RULES: &str = r#"version = 1
[shell]
blocked = ["rm"]
[[shell.allow]]
id = "git-status"
program = "git"
args = [["status"], ["log", { regex = "-n[0-9]+" }]]
match = [["status"], ["log", "-n5"]]
not_match = [["log", "-nx"], []]
[[shell.allow]]
program = "cat"
args = [[{ slot = "path" }]]
decision = "forbidden"
reason = "example"
match = [["notes.txt"]]
not_match = [["/etc/passwd"], ["../x"], ["-n"]]
"#;

#[test]
fn rule_examples_are_checked_at_load() {
    let (loader, policy) = policy_text("default.toml", RULES);
    assert_eq!(found(&loader), Vec::<String>::new());
    let policy = policy.expect("policy");
    assert_eq!(policy.shell.allow.len(), 2);
    assert_eq!(policy.shell.allow[0].name, "git-status");
    assert_eq!(policy.shell.allow[1].name, "shell.allow[1]");
    assert_eq!(policy.shell.allow[1].decision, Decision::Forbidden);

    let broken = RULES
        .replace("[\"log\", \"-n5\"]]", "[\"log\", \"-n5\"], [\"push\"]]")
        .replace("[[\"notes.txt\"]]", "[[\"notes.txt\"]]\n")
        .replace("[\"-n\"]]", "[\"-n\"], [\"ok.txt\"]]");
    assert_eq!(policy_errors(&broken), ["rule-example-mismatch@8:38", "rule-example-mismatch@17:49"]);
}

/// The examples are judged by the runtime's matcher: a path slot refuses
/// what confinement refuses (protected folders, `files.deny`), so such a
/// `not_match` example holds at load and a `match` example fails there, as
/// `evaluate_argv` decides for the loaded policy.
#[test]
fn rule_examples_follow_the_runtime_confinement() {
    let text = "version = 1\n[files]\ndeny = [\"secret/**\"]\n[[shell.allow]]\nid = \"cat-path\"\nprogram = \"cat\"\n\
                args = [[{ slot = \"path\" }]]\nmatch = [[\"notes.txt\"]]\n\
                not_match = [[\".git/config\"], [\"runs/x\"], [\"secret/a\"], [\"../x\"]]\n";
    let (loader, policy) = policy_text("default.toml", text);
    assert_eq!(found(&loader), Vec::<String>::new());
    let policy = policy.expect("policy");
    let rules = crate::confine::PathRules::new(&policy.files);
    for token in [".git/config", "runs/x", "secret/a", "../x"] {
        let argv = vec!["cat".to_string(), token.to_string()];
        assert_eq!(crate::policy::evaluate_argv(&policy.shell, &rules, &argv).decision, Decision::Forbidden);
    }
    let denied = text.replace("match = [[\"notes.txt\"]]", "match = [[\"notes.txt\"], [\"secret/a\"], [\"bridge/b\"]]");
    assert_eq!(policy_errors(&denied), ["rule-example-mismatch@8:25", "rule-example-mismatch@8:39"]);
}

#[test]
fn policy_field_errors() {
    let cases: &[(&str, &str)] = &[
        ("[[shell.allow]]\nprogram = \"git\"\nargs = [[{ regex = \"(\" }]]\n", "invalid-regex@4:20"),
        ("[[shell.allow]]\nprogram = \"bash\"\nprefix = true\n", "prefix-rule-refused@4:1"),
        ("[[shell.allow]]\nprogram = \"./x\"\n", "invalid-program@3:11"),
        ("[shell]\nsearch_path = [\"bin\"]\n", "invalid-value@3:16"),
        ("[retry]\ncap = 0\n", "invalid-value@3:7"),
        ("[budget]\nmax_step = 3\n", "unknown-key@3:1"),
        ("[files]\ndeny = \"runs/**\"\n", "wrong-type@3:8"),
        ("[[shell.allow]]\nprogram = \"git\"\ndecision = \"ask\"\n", "invalid-value@4:12"),
        ("[[shell.allow]]\nprogram = \"git\"\nargs = [[{ slot = \"file\" }]]\n", "invalid-value@4:19"),
    ];
    for (body, expected) in cases {
        let errors = policy_errors(&format!("version = 1\n{body}"));
        assert!(errors.contains(&expected.to_string()), "{body}: {errors:?}");
    }
    let (loader, _) =
        policy_text("default.toml", "version = 1\n[[shell.allow]]\nprogram = \"python\"\nprefix = true\n");
    assert!(loader.diagnostics()[0].message.contains("`python`"));
}

#[test]
fn a_minimal_policy_has_the_documented_defaults() {
    let (loader, policy) = policy_text("strict.yaml", "version: 1\n");
    assert_eq!(found(&loader), Vec::<String>::new());
    let policy = policy.expect("policy");
    assert_eq!(policy.name, "strict");
    assert!(policy.shell.allow.is_empty() && policy.shell.blocked.is_empty());
    let search: Vec<String> = policy.shell.search_path.iter().map(|path| path.display().to_string()).collect();
    assert_eq!(search, ["/usr/local/bin", "/usr/bin", "/bin"]);
    assert_eq!(policy.shell.env.get("PATH").map(String::as_str), Some("/usr/local/bin:/usr/bin:/bin"));
    assert_eq!(policy.shell.env.get("LANG").map(String::as_str), Some("C.UTF-8"));
    assert_eq!(policy.files.deny, ["runs/**"]);
    assert_eq!(policy.files.max_read_bytes, 1_048_576);
    assert_eq!(policy.files.max_write_bytes, 1_048_576);
    assert_eq!(policy.retry.cap, 2);
    let attempts = |class| policy.retry.max_attempts.get(&class).copied();
    assert_eq!(attempts(FailureClass::SecurityDenied), Some(1));
    assert_eq!(attempts(FailureClass::TemplateError), Some(1));
    assert_eq!(attempts(FailureClass::FileError), Some(2));
    assert_eq!(attempts(FailureClass::ExecutionError), Some(2));
    assert_eq!(attempts(FailureClass::UnknownError), Some(1));
    assert_eq!(policy.budget.max_steps, 32);
    assert_eq!(policy.budget.max_tool_calls, 32);
    assert_eq!(policy.budget.max_consecutive_failures, 3);
    assert_eq!(policy.budget.step_timeout_secs, 30);
    assert_eq!(policy.budget.max_output_bytes, 1_048_576);
}

/// `docs/policies.md` shows the defaults in its example policy (beside
/// values it marks as not defaults): they are what a policy that leaves
/// every key out gets.
#[test]
fn the_documented_policy_defaults_are_the_defaults() {
    let page = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/policies.md")).expect("page");
    let start = page.find("```toml\n").expect("a TOML block") + "```toml\n".len();
    let block = &page[start..start + page[start..].find("```").expect("its end")];
    let (loader, documented) = policy_text("documented.toml", block);
    assert_eq!(found(&loader), Vec::<String>::new());
    let (documented, defaults) =
        (documented.expect("documented"), policy_text("d.toml", "version = 1\n").1.expect("d"));
    fn json(value: &impl serde::Serialize) -> serde_json::Value {
        serde_json::to_value(value).expect("json")
    }
    assert_eq!(json(&documented.shell.search_path), json(&defaults.shell.search_path));
    assert_eq!(json(&documented.shell.env), json(&defaults.shell.env));
    assert_eq!(json(&documented.files), json(&defaults.files));
    assert_eq!(json(&documented.retry), json(&defaults.retry));
    let budget = crate::model::Budget { max_run_secs: None, ..documented.budget };
    assert_eq!(json(&budget), json(&defaults.budget));
}
