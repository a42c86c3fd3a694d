//! `planrun completions bash|zsh|fish` and `planrun man`: generated from the
//! one clap definition, so every subcommand (the ones added later too) is in
//! each script and in the manual page.

use clap::CommandFactory;

use crate::common::Sandbox;

/// Every visible subcommand of `planrun`, from the command definition.
fn subcommands() -> Vec<String> {
    let command = planrun::cli::Cli::command();
    let names: Vec<String> =
        command.get_subcommands().filter(|sub| !sub.is_hide_set()).map(|sub| sub.get_name().to_string()).collect();
    assert!(names.len() >= 14, "the definition lost its subcommands: {names:?}");
    for name in ["check", "show", "completions", "man"] {
        assert!(names.iter().any(|known| known == name), "`{name}` missing from {names:?}");
    }
    names
}

#[test]
fn each_shell_gets_a_script_that_names_every_subcommand() {
    let sandbox = Sandbox::new();
    let names = subcommands();
    for (shell, marker) in
        [("bash", "complete -F _planrun"), ("zsh", "#compdef planrun"), ("fish", "complete -c planrun")]
    {
        let output = sandbox.planrun().args(["completions", shell]).expect_code(0).run();
        assert!(output.stdout.contains(marker), "{shell}: no `{marker}` in\n{}", output.stdout);
        for name in &names {
            assert!(output.stdout.contains(name.as_str()), "{shell}: `{name}` is not completed");
        }
        assert!(output.stdout.contains("workspace"), "{shell}: global options are completed too");
    }
    assert!(!sandbox.workspace().exists(), "generating a script touches no workspace");
}

#[test]
fn an_unknown_shell_is_a_usage_error() {
    let output = Sandbox::new().planrun().args(["completions", "tcsh"]).run();
    assert_eq!(output.code, 2, "{}", output.snapshot());
    assert!(output.stderr.contains("possible values: bash, zsh, fish"), "{}", output.stderr);
    assert!(output.stdout.is_empty());
}

#[test]
fn the_man_page_names_every_subcommand() {
    let output = Sandbox::new().planrun().args(["man"]).expect_code(0).run();
    assert!(output.stdout.starts_with(".ie"), "roff: {}", output.stdout);
    assert!(output.stdout.contains(".TH planrun 1"), "{}", output.stdout);
    let subcommands_section = output.stdout.split(".SH SUBCOMMANDS").nth(1).expect("a SUBCOMMANDS section");
    for name in subcommands() {
        assert!(
            subcommands_section.contains(&format!("planrun\\-{}(1)", name.replace('-', "\\-"))),
            "`{name}` is not in the SUBCOMMANDS section"
        );
    }
    assert!(output.stdout.contains("PLANRUN_WORKSPACE"), "environment variables are documented");
}

#[test]
fn man_out_dir_writes_one_page_per_subcommand() {
    let sandbox = Sandbox::new();
    let dir = sandbox.path().join("man/man1");
    sandbox.planrun().args(["man", "--out-dir", &dir.display().to_string()]).expect_code(0).run();
    let main = std::fs::read_to_string(dir.join("planrun.1")).expect("planrun.1");
    assert!(main.contains(".TH planrun 1"), "{main}");
    for name in subcommands() {
        let page = std::fs::read_to_string(dir.join(format!("planrun-{name}.1")))
            .unwrap_or_else(|error| panic!("planrun-{name}.1: {error}"));
        assert!(page.contains(&format!(".TH planrun-{name} 1")), "planrun-{name}.1: {page}");
    }

    let blocked = sandbox.write("not-a-folder", "a file");
    let output = sandbox.planrun().args(["man", "--out-dir", &blocked.join("man1").display().to_string()]).run();
    assert_eq!(output.code, 2, "{}", output.snapshot());
    assert!(output.stderr.contains("cannot write the man page"), "{}", output.stderr);
}
