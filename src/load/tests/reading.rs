//! Reading and parsing files: TOML/YAML twins, spans, unreadable files,
//! syntax errors and the YAML core schema.

use super::*;

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
