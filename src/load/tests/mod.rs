//! Loader and validator tests: one case per diagnostic code with its
//! position, TOML/YAML equivalence, defaults and rendering.

use std::path::{Path, PathBuf};

use crate::diag::{Diagnostic, Severity, render};
use crate::load::{Catalog, Loader};
use crate::model::{Action, Decision, FailureClass, Plan, Policy};

/// A temporary folder holding the files of one test.
struct Files {
    dir: tempfile::TempDir,
}

impl Files {
    fn new() -> Self {
        Files { dir: tempfile::tempdir().expect("temp dir") }
    }

    fn write(&self, name: &str, text: &str) -> PathBuf {
        let path = self.dir.path().join(name);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent).expect("mkdir");
        }
        std::fs::write(&path, text).expect("write");
        path
    }

    fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }
}

/// `code@line:col` of each finding (`code` alone when it has no span).
fn found(loader: &Loader) -> Vec<String> {
    loader.diagnostics().iter().map(|diagnostic| position(loader, diagnostic)).collect()
}

fn position(loader: &Loader, diagnostic: &Diagnostic) -> String {
    match diagnostic.span {
        Some(span) => {
            let file = loader.sources().get(span.source).expect("source");
            let (line, column) = file.line_col(span.start);
            format!("{}@{line}:{column}", diagnostic.code)
        }
        None => diagnostic.code.to_string(),
    }
}

fn plan_text(name: &str, text: &str) -> (Loader, Option<Plan>) {
    let files = Files::new();
    let path = files.write(name, text);
    let mut loader = Loader::new();
    let plan = loader.load_plan(&path);
    (loader, plan)
}

fn policy_text(name: &str, text: &str) -> (Loader, Option<Policy>) {
    let files = Files::new();
    let path = files.write(name, text);
    let mut loader = Loader::new();
    let policy = loader.load_policy(&path);
    (loader, policy)
}

fn plan_errors(text: &str) -> Vec<String> {
    let (loader, plan) = plan_text("p.toml", text);
    assert!(plan.is_none() || !loader.has_errors(), "{:?}", found(&loader));
    found(&loader)
}

fn policy_errors(text: &str) -> Vec<String> {
    let (loader, policy) = policy_text("default.toml", text);
    assert!(policy.is_none() == loader.has_errors(), "{:?}", found(&loader));
    found(&loader)
}

const FLOW_TOML: &str = r#"version = 1
id = "flow_pwd"
description = "pwd → write report.txt → read it back"
keywords = ["test flow pwd to file"]
policy = "default"
default = true

[[steps]]
id = "step-1"
kind = "shell"
command = ["pwd"]
timeout_secs = 10

[[steps]]
id = "step-2"
kind = "write_file"
path = "report-{{ run.id }}.txt"
content = "{{ last.output_text }}"
retry = 2

[[steps]]
id = "step-3"
kind = "read_file"
path = "report.txt"

[[steps]]
id = "step-4"
kind = "flaky"
failures = 2
output = "{{ steps.step-1.output_text }}"

[[steps]]
id = "step-5"
kind = "finish"
message = "done"
"#;

const FLOW_YAML: &str = r#"version: 1
id: flow_pwd
description: "pwd → write report.txt → read it back"
keywords: ["test flow pwd to file"]
policy: default
default: true
steps:
  - id: step-1
    kind: shell
    command: [pwd]
    timeout_secs: 10
  - id: step-2
    kind: write_file
    path: "report-{{ run.id }}.txt"
    content: '{{ last.output_text }}'
    retry: 2
  - id: step-3
    kind: read_file
    path: report.txt
  - id: step-4
    kind: flaky
    failures: 2
    output: "{{ steps.step-1.output_text }}"
  - id: step-5
    kind: finish
    message: done
"#;

#[test]
fn toml_and_yaml_twins_load_to_the_same_model() {
    let (toml_loader, toml_plan) = plan_text("flow.toml", FLOW_TOML);
    let (yaml_loader, yaml_plan) = plan_text("flow.yaml", FLOW_YAML);
    assert_eq!(found(&toml_loader), Vec::<String>::new());
    assert_eq!(found(&yaml_loader), Vec::<String>::new());
    let toml_plan = toml_plan.expect("toml plan");
    let yaml_plan = yaml_plan.expect("yaml plan");
    let toml_json = serde_json::to_value(&toml_plan).expect("json");
    assert_eq!(toml_json, serde_json::to_value(&yaml_plan).expect("json"));
    assert_eq!(toml_plan.steps.len(), 5);
    assert_eq!(toml_json["steps"][0]["kind"], "shell");
    assert_eq!(toml_plan.keyword_spans.len(), 1);
    assert_eq!(toml_plan.source.sha256.len(), 64);
    assert!(matches!(toml_plan.steps[3].action, Action::Flaky { failures: 2, .. }));
}

#[test]
fn spans_point_at_keys_and_values_in_both_formats() {
    let (loader, _) = plan_text("flow.toml", &FLOW_TOML.replace("retry = 2", "retri = 2"));
    assert_eq!(found(&loader), ["unknown-key@19:1"]);
    let (loader, _) = plan_text("flow.yaml", &FLOW_YAML.replace("retry: 2", "retri: 2"));
    assert_eq!(found(&loader), ["unknown-key@16:5"]);
}

/// A minimal valid plan header; tests append steps.
const HEAD: &str = "version = 1\nid = \"p\"\ndefault = true\n";

fn with_steps(steps: &str) -> String {
    format!("{HEAD}{steps}")
}

#[test]
fn io_error_and_unsupported_extension_name_the_path() {
    let files = Files::new();
    let mut loader = Loader::new();
    assert!(loader.load_plan(&files.path("missing.toml")).is_none());
    assert!(loader.load_plan(&files.write("plan.json", "{}")).is_none());
    assert_eq!(found(&loader), ["io-error", "unsupported-extension"]);
    assert!(loader.diagnostics()[0].message.contains("missing.toml"));
    assert!(loader.diagnostics()[1].message.contains("plan.json"));
}

#[test]
fn a_missing_file_is_named_missing_whatever_its_extension() {
    let files = Files::new();
    let mut loader = Loader::new();
    assert!(loader.load_plan(&files.path("missing")).is_none());
    assert_eq!(found(&loader), ["io-error"]);
    let message = &loader.diagnostics()[0].message;
    assert!(message.contains("`: No such file or directory"), "{message}");
}

/// A FIFO would block the read forever and a link to a device would fill
/// memory: both are refused at once, as is a file over the size limit.
#[test]
fn only_regular_files_up_to_the_limit_are_read() {
    let files = Files::new();
    let fifo = files.path("fifo.toml");
    let made = std::process::Command::new("mkfifo").arg(&fifo).status().expect("mkfifo runs");
    assert!(made.success());
    let device = files.path("zero.toml");
    std::os::unix::fs::symlink("/dev/zero", &device).expect("symlink");
    let big = files.write("big.toml", &format!("{HEAD}description = \"{}\"\n", "x".repeat(4 * 1024 * 1024)));
    let mut loader = Loader::new();
    for path in [&fifo, &device, &big] {
        assert!(loader.load_plan(path).is_none());
    }
    assert_eq!(found(&loader), ["io-error", "io-error", "io-error"]);
    let messages: Vec<&str> = loader.diagnostics().iter().map(|diagnostic| diagnostic.message.as_str()).collect();
    assert!(messages[0].ends_with("not a regular file"), "{messages:?}");
    assert!(messages[1].ends_with("not a regular file"), "{messages:?}");
    assert!(messages[2].ends_with("larger than 4 MiB, the most a plan or policy file may be"), "{messages:?}");
}

#[test]
fn syntax_errors_have_a_position() {
    let (loader, _) = plan_text("p.toml", "version = 1\nid = \"p\n");
    assert_eq!(found(&loader), ["syntax-error@2:8"]);
    let (loader, _) = plan_text("p.toml", "version = 1\nversion = 2\n");
    assert_eq!(found(&loader), ["syntax-error@2:1"]);
    let (loader, _) = plan_text("p.yaml", "version: 1\nid: [a\n");
    assert_eq!(found(&loader)[0].split('@').next(), Some("syntax-error"));
}

#[test]
fn yaml_duplicate_key_points_at_the_second_and_names_the_first_line() {
    let (loader, plan) = plan_text("p.yaml", "version: 1\nid: p\nsteps:\n  - id: a\n    kind: finish\n    id: b\n");
    assert!(plan.is_none());
    assert_eq!(found(&loader), ["duplicate-key@6:5"]);
    assert_eq!(loader.diagnostics()[0].message, "duplicate key `id`, first defined on line 4");
}

#[test]
fn yaml_anchors_aliases_and_multiple_documents_are_refused() {
    let text = "version: 1\nid: p\nsteps:\n  - &s {id: a, kind: finish}\n  - *s\n";
    let (loader, plan) = plan_text("p.yaml", text);
    assert!(plan.is_none());
    let codes = found(&loader);
    assert!(codes.contains(&"yaml-alias-unsupported@4:5".to_string()), "{codes:?}");
    assert!(codes.contains(&"yaml-alias-unsupported@5:5".to_string()), "{codes:?}");
    let (loader, _) = plan_text("p.yaml", "version: !!int 1\n");
    assert_eq!(found(&loader)[0], "yaml-tag-unsupported@1:10");
    let (loader, _) = plan_text("p.yaml", "version: 1\n---\nversion: 1\n");
    assert_eq!(found(&loader), ["yaml-multiple-documents@2:1"]);
}

#[test]
fn yaml_scalars_follow_the_core_schema() {
    use crate::load::NodeValue;
    let files = Files::new();
    let text = "a: ~\nb: True\nc: 0x1F\nd: 0o17\ne: -.inf\nf: 1.5e3\ng: '12'\nh: yes\ni: -7\nj:\n";
    let path = files.write("x.yaml", text);
    let mut loader = Loader::new();
    let (read, root) = loader.read_for_tests(&path).expect("parsed");
    assert_eq!(read, 0);
    let value = |key: &str| root.get(key).map(|node| node.value.clone());
    assert_eq!(value("a"), Some(NodeValue::Null));
    assert_eq!(value("b"), Some(NodeValue::Bool(true)));
    assert_eq!(value("c"), Some(NodeValue::Integer(31)));
    assert_eq!(value("d"), Some(NodeValue::Integer(15)));
    assert_eq!(value("e"), Some(NodeValue::Float(f64::NEG_INFINITY)));
    assert_eq!(value("f"), Some(NodeValue::Float(1500.0)));
    assert_eq!(value("g"), Some(NodeValue::String("12".into())));
    assert_eq!(value("h"), Some(NodeValue::String("yes".into())));
    assert_eq!(value("i"), Some(NodeValue::Integer(-7)));
    assert_eq!(value("j"), Some(NodeValue::Null));
    let (loader, _) = plan_text("p.yaml", "version: 1\n1: x\n");
    assert!(found(&loader).contains(&"non-string-key@2:1".to_string()));
}

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
            "allowed keys: `id`, `kind`, `command`, `timeout_secs`, `retry`, `approval`, `risk`, `idempotency_key`, `when`, `expect`"
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
    let Action::Shell { command } = &plan.steps[0].action else {
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

/// `docs/service.md` names the built-in service policy's values.
#[test]
fn the_documented_service_defaults_are_the_defaults() {
    use crate::model::{
        DEFAULT_CONTROLLER_LIMITS, DEFAULT_DECISION_TIMEOUT_SECS, DEFAULT_MAX_GOAL_CHARS, DEFAULT_MAX_TOKENS,
        DEFAULT_TEMPERATURE,
    };
    let page = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/service.md")).expect("page");
    let limits = DEFAULT_CONTROLLER_LIMITS;
    for sentence in [
        format!(
            "built-in defaults apply: {DEFAULT_MAX_GOAL_CHARS} characters, no patterns, {} iterations, {} consecutive \
             failures, no recovery rules, and decision requests of at most {DEFAULT_DECISION_TIMEOUT_SECS} s and \
             {DEFAULT_MAX_TOKENS} tokens at temperature {DEFAULT_TEMPERATURE}",
            limits.max_iterations, limits.max_consecutive_failures
        ),
        format!(
            "the defaults ({DEFAULT_DECISION_TIMEOUT_SECS} s, {DEFAULT_MAX_TOKENS} tokens, temperature \
             {DEFAULT_TEMPERATURE})"
        ),
    ] {
        assert!(page.contains(&sentence), "docs/service.md should say: {sentence}");
    }
}

fn catalog_of(files: &Files) -> (Loader, Catalog) {
    let mut loader = Loader::new();
    let catalog = loader.load_catalog(&files.path("plans"), &files.path("policies"));
    (loader, catalog)
}

#[test]
fn catalog_cross_file_checks() {
    let files = Files::new();
    files.write("policies/default.toml", "version = 1\n[retry]\ncap = 2\n[budget]\nstep_timeout_secs = 5\n");
    files.write(
        "plans/a.toml",
        "version = 1\nid = \"a\"\nkeywords = [\"Hello\", \"x\"]\ndefault = true\n[[steps]]\nid = \"s\"\nkind = \"finish\"\nretry = 3\ntimeout_secs = 9\n",
    );
    files.write(
        "plans/b.yaml",
        "version: 1\nid: a\nkeywords: [hello, y, Y]\ndefault: true\npolicy: strict\nsteps:\n  - {id: s, kind: finish}\n",
    );
    let (loader, catalog) = catalog_of(&files);
    assert_eq!(catalog.plans.len(), 2);
    assert_eq!(catalog.policies.len(), 1);
    assert_eq!(
        found(&loader),
        [
            "duplicate-plan-id@2:5",
            "duplicate-keyword@3:12",
            "duplicate-keyword@3:22",
            "multiple-default-plans@4:1",
            "retry-above-cap@8:9",
            "timeout-above-budget@9:16",
            "unknown-policy@5:9",
        ]
    );
    assert!(loader.diagnostics()[1].message.contains("plan `a`"));

    let files = Files::new();
    files.write("policies/default.toml", "version = 1\n");
    files.write("plans/a.toml", "version = 1\nid = \"a\"\n[[steps]]\nid = \"s\"\nkind = \"finish\"\n");
    let (loader, _) = catalog_of(&files);
    assert_eq!(found(&loader), ["unreachable-plan@2:6", "no-default-plan"]);
}

/// A literal file path the policy refuses is found before anything runs,
/// as `planrun plan` shows it; an allowed one and a templated one are not,
/// and `..` stays `path-outside-workspace`'s alone.
#[test]
fn a_literal_path_the_policy_refuses_is_file_always_denied() {
    let files = Files::new();
    let policy = files.write("policies/default.toml", "version = 1\n[files]\ndeny = [\"secrets/**\"]\n");
    let step = |id: &str, path: &str| format!("\n[[steps]]\nid = \"{id}\"\nkind = \"read_file\"\npath = \"{path}\"\n");
    let plan = format!(
        "{HEAD}{}{}{}{}{}{}\n[[steps]]\nid = \"end\"\nkind = \"finish\"\n",
        step("a", "runs/x.txt"),
        step("b", "."),
        step("c", "secrets/key"),
        step("d", "notes.txt"),
        step("e", "out-{{ run.id }}.txt"),
        step("f", "../up.txt"),
    );
    let plan_path = files.write("plans/p.toml", &plan);
    let mut loader = Loader::new();
    loader.load_paths(&[plan_path, policy]);
    assert_eq!(
        found(&loader),
        ["path-outside-workspace@33:8", "file-always-denied@8:8", "file-always-denied@13:8", "file-always-denied@18:8"]
    );
}

#[test]
fn plan_with_policy_and_paths() {
    let files = Files::new();
    let policy_path = files.write("policies/default.toml", "version = 1\n");
    let plan_path = files.write("plans/a.toml", FLOW_TOML);
    let mut loader = Loader::new();
    let (plan, policy) = loader.load_plan_with_policy(&plan_path, &files.path("policies")).expect("loads");
    assert_eq!((plan.id.as_str(), policy.name.as_str()), ("flow_pwd", "default"));

    let mut loader = Loader::new();
    let missing = loader.load_plan_with_policy(&plan_path, &files.path("nowhere"));
    assert!(missing.is_none());
    assert_eq!(found(&loader), ["unknown-policy@5:10"]);

    let mut loader = Loader::new();
    let catalog = loader.load_paths(&[files.path("plans"), policy_path]);
    // An empty policy allows no command: `pwd` is denied whatever happens.
    assert_eq!(found(&loader), ["shell-always-denied@11:11"]);
    assert_eq!((catalog.plans.len(), catalog.policies.len()), (1, 1));

    // A plan alone: without a policies folder nothing is known of its
    // policy; with one, the policy comes from there.
    let mut loader = Loader::new();
    let catalog = loader.load_paths(std::slice::from_ref(&plan_path));
    assert_eq!((found(&loader), catalog.policies.len()), (Vec::<String>::new(), 0));
    let mut loader = Loader::new();
    let catalog = loader.load_paths_with_policies(std::slice::from_ref(&plan_path), Some(&files.path("policies")));
    assert_eq!((found(&loader), catalog.policies.len()), (vec!["shell-always-denied@11:11".to_string()], 1));
    let mut loader = Loader::new();
    loader.load_paths_with_policies(&[plan_path], Some(&files.path("plans")));
    assert_eq!(found(&loader), ["unknown-policy@5:10"]);
}

#[test]
fn the_shipped_examples_load_cleanly() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    if !root.join("plans").is_dir() || !root.join("policies").is_dir() {
        return;
    }
    let mut loader = Loader::new();
    loader.load_catalog(&root.join("plans"), &root.join("policies"));
    assert!(!loader.has_errors(), "{:?}", found(&loader));
}

#[test]
fn a_rendered_diagnostic_marks_the_offending_key() {
    let files = Files::new();
    let path =
        files.write("x.toml", &with_steps("[[steps]]\nid = \"step-1\"\nkind = \"shell\"\n  comand = [\"pwd\"]\n"));
    let mut loader = Loader::new();
    loader.load_plan(&path);
    let unknown = loader.diagnostics().iter().find(|diagnostic| diagnostic.code == "unknown-key").expect("unknown key");
    let text = render(loader.sources(), unknown);
    let name = loader.sources().get(0).expect("file").name.clone();
    let expected = format!(
        "error[unknown-key]: unknown key `comand` in step `step-1`\n --> {name}:7:3\n  |\n7 |   comand = [\"pwd\"]\n  |   ^^^^^^ did you mean `command`?\n  |\n  = help: allowed keys: `id`, `kind`, `command`, `timeout_secs`, `retry`, `approval`, `risk`, `idempotency_key`, `when`, `expect`\n"
    );
    assert_eq!(text, expected);
}

fn service_text(name: &str, text: &str) -> (Loader, Option<crate::model::ServicePolicy>) {
    let files = Files::new();
    let path = files.write(name, text);
    let mut loader = Loader::new();
    let policy = loader.load_service_policy(&path);
    (loader, policy)
}

#[test]
fn the_shipped_service_policy_is_valid() {
    let policies = Path::new(env!("CARGO_MANIFEST_DIR")).join("policies");
    let path = Loader::service_policy_file(&policies).expect("policies/service/service.toml");
    let mut loader = Loader::new();
    let policy = loader.load_service_policy(&path).expect("valid");
    assert_eq!(found(&loader), Vec::<String>::new());
    assert_eq!(policy.controller.max_iterations, 3);
    assert_eq!(policy.controller.max_consecutive_failures, 2);
    assert!(!policy.guard.forbidden_patterns.is_empty());
    assert!(policy.recovery[0].matches("test flow bad template", Some(FailureClass::TemplateError)));
    assert!(!policy.recovery[0].matches("test flow bad template", Some(FailureClass::SecurityDenied)));
}

#[test]
fn every_finding_of_a_bad_service_policy_is_reported_with_its_position() {
    let text = "version = 2\nextra = 1\n[guard]\nmax_goal_chars = 0\nforbidden_patterns = [\"(\"]\n\
                [controller]\nmax_iterations = \"3\"\nmax_iteration = 4\n[[recovery]]\nid = \"a\"\n\
                when_failure_class = \"nope\"\nrewrite = \"x\"\n[[recovery]]\nid = \"b\"\nrewrite = \"y\"\n\
                [[recovery]]\nid = \"c\"\nmatch = \"x\"\nrewrite = \"\"\n";
    let (loader, policy) = service_text("service.toml", text);
    assert!(policy.is_none());
    assert_eq!(
        found(&loader),
        [
            "unsupported-version@1:11",
            "invalid-value@4:18",
            "invalid-regex@5:23",
            "wrong-type@7:18",
            "unknown-key@8:1",
            "invalid-value@11:22",
            "missing-key@13:1",
            "invalid-value@19:11",
            "unknown-key@2:1",
        ]
    );
    let rendered: Vec<String> = loader.diagnostics().iter().map(|found| render(loader.sources(), found)).collect();
    let rendered = rendered.join("\n");
    for expected in [
        "`max_goal_chars` in `[guard]` must be between 1 and 100000, found 0",
        "did you mean `max_iterations`?",
        "allowed keys: `max_iterations`, `max_consecutive_failures`",
        "unknown failure class `nope`",
        "a recovery rule needs `when_failure_class` or `match`",
        "`rewrite` in recovery rule `c` must hold 1 to 500 characters",
    ] {
        assert!(rendered.contains(expected), "missing {expected:?} in:\n{rendered}");
    }
}

#[test]
fn a_minimal_service_policy_takes_the_defaults() {
    let (loader, policy) = service_text("service.toml", "version = 1\n");
    let policy = policy.expect("valid");
    assert_eq!(found(&loader), Vec::<String>::new());
    let defaults = crate::model::ServicePolicy::default();
    assert_eq!(policy.guard.max_goal_chars, defaults.guard.max_goal_chars);
    assert_eq!(policy.guard.max_goal_chars, 2000);
    assert_eq!(policy.controller.max_iterations, 3);
    assert_eq!(policy.controller.max_consecutive_failures, 2);
    assert!(policy.guard.forbidden_patterns.is_empty());
    assert!(policy.recovery.is_empty());
    assert!(policy.source.ends_with("service.toml"), "{}", policy.source);
}

#[test]
fn a_yaml_service_policy_loads_like_its_toml_twin() {
    let toml = "version = 1\n[guard]\nmax_goal_chars = 300\nforbidden_patterns = [\"(?i)rm -rf\"]\n\
                [controller]\nmax_iterations = 5\n[[recovery]]\nid = \"r\"\nwhen_failure_class = \"template_error\"\n\
                rewrite = \"test flow pwd to file\"\n";
    let yaml = "version: 1\nguard:\n  max_goal_chars: 300\n  forbidden_patterns: [\"(?i)rm -rf\"]\n\
                controller:\n  max_iterations: 5\nrecovery:\n  - id: r\n    when_failure_class: template_error\n\
                \x20   rewrite: test flow pwd to file\n";
    let (_, from_toml) = service_text("service.toml", toml);
    let (loader, from_yaml) = service_text("service.yaml", yaml);
    assert_eq!(found(&loader), Vec::<String>::new());
    let (from_toml, from_yaml) = (from_toml.expect("toml"), from_yaml.expect("yaml"));
    for policy in [&from_toml, &from_yaml] {
        assert_eq!(policy.guard.max_goal_chars, 300);
        assert_eq!(policy.guard.forbidden_patterns[0].as_str(), "(?i)rm -rf");
        assert_eq!(policy.controller.max_iterations, 5);
        assert_eq!(policy.controller.max_consecutive_failures, 2);
        assert_eq!(policy.recovery[0].id, "r");
        assert_eq!(policy.recovery[0].reason, "recovery rule `r`");
        assert!(policy.recovery[0].matches("anything", Some(FailureClass::TemplateError)));
    }
    let (loader, _) = service_text("service.yaml", "version: 1\nguard:\n  max_goal_char: 3\n");
    assert_eq!(found(&loader), ["unknown-key@3:3"]);
}

#[test]
fn recovery_plans_name_other_plans_of_the_catalog() {
    let cases: &[(&str, &str)] = &[
        ("recovery_plans = [\"p\"]\n", "invalid-value@4:19"),
        ("recovery_plans = [\"x\", \"x\"]\n", "invalid-value@4:24"),
        ("recovery_plans = [\"a b\"]\n", "invalid-value@4:19"),
        ("recovery_plans = \"x\"\n", "wrong-type@4:18"),
    ];
    for (line, expected) in cases {
        let errors = plan_errors(&format!("{HEAD}{line}[[steps]]\nid = \"a\"\nkind = \"finish\"\n"));
        assert_eq!(errors, [expected.to_string()], "{line}");
    }
    let files = Files::new();
    files.write("policies/default.toml", "version = 1\n");
    let plan = |id: &str, extra: &str| {
        format!("version = 1\nid = \"{id}\"\nkeywords = [\"{id}\"]\n{extra}[[steps]]\nid = \"s\"\nkind = \"finish\"\n")
    };
    files.write("plans/a.toml", &plan("a", "default = true\nrecovery_plans = [\"b\", \"nope\"]\n"));
    files.write("plans/b.toml", &plan("b", ""));
    let (loader, catalog) = catalog_of(&files);
    assert_eq!(found(&loader), ["unknown-recovery-plan@5:24"]);
    assert_eq!(
        loader.diagnostics()[0].message,
        "plan `a` lists recovery plan `nope`, which is not a plan of the catalog"
    );
    assert_eq!(catalog.plans[0].recovery_plans, ["b", "nope"]);
    // `check` of one file looks its recovery plans up in the whole catalog.
    let mut loader = Loader::new();
    loader.load_paths_in_catalog(&[files.path("plans/a.toml")], &files.path("plans"), &files.path("policies"));
    assert_eq!(found(&loader), ["unknown-recovery-plan@5:24"]);
}
