//! `planrun check` on broken files: each fixture in `tests/fixtures/broken/`
//! (a file, or a folder for findings across plans) has a golden snapshot of
//! the exact output in `snapshots/diagnostics/`, named after the fixture.
//! To add a case, add the fixture and accept its new snapshot.

use std::path::Path;

use planrun::load::Loader;

use crate::common::{ROOT, Sandbox, snapshot_settings};

/// One snapshot per fixture, found by `insta::glob!`: a new file or folder
/// in `tests/fixtures/broken/` is a new case with no list to keep.
#[test]
fn every_broken_fixture_has_its_exact_check_output() {
    let sandbox = Sandbox::new();
    let mut count = 0;
    snapshot_settings("diagnostics").bind(|| {
        // `?*`, not `*`: the walk also yields the folder itself, whose
        // relative path is empty.
        insta::glob!("fixtures/broken", "?*", |path| {
            count += 1;
            let name = path.file_name().expect("fixture name").to_string_lossy().into_owned();
            let relative = format!("tests/fixtures/broken/{name}");
            let output = sandbox.planrun().args(["check", &relative]).run();
            assert_ne!(output.code, 0, "{name} must not pass `check`: {}", output.snapshot());
            assert!(
                output.stdout.contains(&format!("--> {relative}:"))
                    || output.stdout.contains(&format!("--> {relative}/"))
                    || output.stdout.contains("error[io-error]"),
                "{name}: no position\n{}",
                output.stdout
            );
            // `glob!` would suffix the snapshot with the fixture's name; the
            // snapshot is named after the fixture alone, as it always was.
            let mut settings = insta::Settings::clone_current();
            settings.remove_snapshot_suffix();
            settings.bind(|| insta::assert_snapshot!(name, output.snapshot()));
        });
    });
    assert!(count >= 10, "fixtures missing: only {count} in tests/fixtures/broken");
}

#[test]
fn all_findings_of_a_file_come_out_in_one_pass() {
    let output = Sandbox::new().planrun().args(["check", "tests/fixtures/broken/many_errors.toml"]).run();
    let codes: Vec<&str> = output.stdout.lines().filter(|line| line.starts_with("error[")).collect();
    assert!(codes.len() >= 3, "{}", output.stdout);
}

#[test]
fn check_json_reports_code_severity_and_position() {
    let output =
        Sandbox::new().planrun().args(["check", "tests/fixtures/broken/unknown_key.toml", "--format", "json"]).run();
    assert_eq!(output.code, 2);
    let value: serde_json::Value = serde_json::from_str(&output.stdout).expect("JSON");
    let first = &value["diagnostics"][0];
    assert_eq!(first["severity"], "error");
    assert_eq!(first["code"], "unknown-key");
    assert_eq!(first["location"]["file"], "tests/fixtures/broken/unknown_key.toml");
    assert_eq!(first["location"]["line"], 3);
    assert_eq!(first["location"]["column"], 1);
}

#[test]
fn a_yaml_plan_and_its_toml_twin_load_to_the_same_model() {
    let mut loader = Loader::new();
    let root = Path::new(ROOT);
    let yaml = loader.load_plan(&root.join("plans/inspect_ru.yaml")).expect("YAML plan loads");
    let toml = loader.load_plan(&root.join("tests/fixtures/twin/inspect_ru.toml")).expect("TOML twin loads");
    assert!(!loader.has_errors());
    assert_eq!(serde_json::to_value(&yaml).expect("json"), serde_json::to_value(&toml).expect("json"));
}

#[test]
fn the_repository_plans_are_clean_apart_from_documented_negative_scenarios() {
    let mut loader = Loader::new();
    let root = Path::new(ROOT);
    loader.load_catalog(&root.join("plans"), &root.join("policies"));
    let serious: Vec<_> = loader
        .diagnostics()
        .iter()
        .filter(|diagnostic| diagnostic.severity > planrun::diag::Severity::Note)
        .map(|diagnostic| planrun::diag::render(loader.sources(), diagnostic))
        .collect();
    assert!(serious.is_empty(), "{}", serious.join("\n"));
}
