//! Service policy files: the shipped one, every finding of a bad one, the
//! defaults and YAML.

use super::*;

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
