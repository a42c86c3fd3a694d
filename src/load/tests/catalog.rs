//! Catalogs: the checks across files, `--plan FILE` with its policy, the
//! shipped examples and a rendered diagnostic.

use super::*;

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
        "error[unknown-key]: unknown key `comand` in step `step-1`\n --> {name}:7:3\n  |\n7 |   comand = [\"pwd\"]\n  |   ^^^^^^ did you mean `command`?\n  |\n  = help: allowed keys: `id`, `kind`, `command`, `env`, `cwd`, `stdin`, `timeout_secs`, `retry`, `retry_backoff`, `on_failure`, `approval`, `risk`, `idempotency_key`, `when`, `expect`\n"
    );
    assert_eq!(text, expected);
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
