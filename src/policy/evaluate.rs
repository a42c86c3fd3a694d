//! Shell decisions: deny by default, explicit deny wins, whole-argv rules,
//! the strictest matching rule decides, and deny is checked again on what
//! the resolved program really is.

use serde::Serialize;
use serde::ser::SerializeStruct;

use crate::confine::{PathRules, ProgramResolver, ResolveError, ResolvedProgram, Workspace, is_bare_name};
use crate::model::{ArgMatcher, ArgPattern, Decision, ShellPolicy, ShellRule, SlotKind};

/// The decision on one argv, naming the rule that decided and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ShellEvaluation {
    pub decision: Decision,
    /// `shell.empty`, `shell.bare-name`, `shell.blocked`,
    /// `shell.default-deny`, or the matching rule's name.
    pub rule: String,
    /// Lowercase, no final period.
    pub reason: String,
    /// The resolved program for an allowed command; `None` when the command
    /// was refused before resolution or the program was not found.
    pub program: Option<ResolvedProgram>,
}

impl ShellEvaluation {
    fn forbidden(rule: &str, reason: String) -> Self {
        ShellEvaluation { decision: Decision::Forbidden, rule: rule.to_owned(), reason, program: None }
    }

    pub fn is_allowed(&self) -> bool {
        self.decision == Decision::Allow
    }
}

/// JSON for `planrun policy check`: `decision`, `rule`, `reason`,
/// `program` (the resolved path or null) and `program_canonical`.
impl Serialize for ShellEvaluation {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut out = serializer.serialize_struct("ShellEvaluation", 5)?;
        out.serialize_field("decision", &self.decision)?;
        out.serialize_field("rule", &self.rule)?;
        out.serialize_field("reason", &self.reason)?;
        out.serialize_field("program", &self.program.as_ref().map(|p| p.path.to_string_lossy().into_owned()))?;
        out.serialize_field(
            "program_canonical",
            &self.program.as_ref().map(|p| p.canonical.to_string_lossy().into_owned()),
        )?;
        out.end()
    }
}

/// argv as one readable line, each token quoted when needed.
pub fn display_argv(argv: &[String]) -> String {
    argv.iter()
        .map(|token| {
            let plain =
                !token.is_empty() && token.bytes().all(|b| b.is_ascii_alphanumeric() || b"-_./=:,+@%".contains(&b));
            if plain { token.clone() } else { format!("{token:?}") }
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// How a rule's `path` slot judges a token: against a real workspace
/// (lexical checks plus symlinks, [`Workspace::check_slot_path`]) or, for
/// static analysis where no workspace may be touched, lexically only
/// ([`PathRules::check_path`], never stricter than the workspace).
pub trait PathSlots {
    fn slot_accepts(&self, token: &str) -> bool;
}

impl PathSlots for Workspace {
    fn slot_accepts(&self, token: &str) -> bool {
        self.check_slot_path(token).is_ok()
    }
}

impl PathSlots for PathRules {
    fn slot_accepts(&self, token: &str) -> bool {
        self.check_path(token).is_ok()
    }
}

/// Decides whether `argv` may run.
pub fn evaluate_shell(
    policy: &ShellPolicy,
    workspace: &Workspace,
    resolver: &mut ProgramResolver,
    argv: &[String],
) -> ShellEvaluation {
    evaluate_shell_with(policy, workspace, resolver, argv)
}

/// [`evaluate_shell`] with any [`PathSlots`]: the argv decision, then the
/// program's resolution (read-only: it looks at the search path's folders)
/// and the deny check on what it resolves to.
pub fn evaluate_shell_with(
    policy: &ShellPolicy,
    slots: &dyn PathSlots,
    resolver: &mut ProgramResolver,
    argv: &[String],
) -> ShellEvaluation {
    let evaluation = evaluate_argv(policy, slots, argv);
    if evaluation.decision == Decision::Forbidden {
        return evaluation;
    }
    let ShellEvaluation { decision, rule, reason, .. } = evaluation;
    let name = &argv[0];
    match resolver.resolve(name) {
        Ok(program) => {
            if let Some(hit) = program.names.iter().find(|found| policy.blocked.iter().any(|blocked| blocked == *found))
            {
                return ShellEvaluation::forbidden(
                    "shell.blocked",
                    format!("`{name}` resolves to `{}` and `{hit}` is in `shell.blocked`", program.canonical.display()),
                );
            }
            ShellEvaluation { decision, rule, reason, program: Some(program) }
        }
        Err(ResolveError::NotFound(_)) => ShellEvaluation { decision, rule, reason, program: None },
        Err(err @ ResolveError::InvalidName(_)) => ShellEvaluation::forbidden("shell.bare-name", err.to_string()),
        Err(err @ ResolveError::InWorkspace { .. }) => {
            ShellEvaluation::forbidden("shell.in-workspace", err.to_string())
        }
    }
}

/// The decision on the argv alone, before the program is resolved: empty,
/// bare name, `shell.blocked`, then the strictest matching rule or
/// `shell.default-deny`. A `forbidden` here is final whatever the machine;
/// an `allow` still needs [`evaluate_shell_with`] (`program` is `None`).
pub fn evaluate_argv(policy: &ShellPolicy, slots: &dyn PathSlots, argv: &[String]) -> ShellEvaluation {
    let Some(name) = argv.first() else {
        return ShellEvaluation::forbidden("shell.empty", "the command is empty".to_owned());
    };
    if !is_bare_name(name) {
        return ShellEvaluation::forbidden(
            "shell.bare-name",
            format!("`{}` is not a bare program name (no `/`, ASCII only)", name.escape_debug()),
        );
    }
    if policy.blocked.iter().any(|blocked| blocked == name) {
        return ShellEvaluation::forbidden("shell.blocked", format!("`{name}` is in `shell.blocked`"));
    }
    let command = display_argv(argv);
    let args = &argv[1..];
    let mut winner: Option<&ShellRule> = None;
    for rule in policy.allow.iter().filter(|rule| rule.program == *name) {
        if args_match(&rule.args, rule.prefix, args, slots) && winner.is_none_or(|best| rule.decision > best.decision) {
            winner = Some(rule);
        }
    }
    let Some(rule) = winner else {
        return ShellEvaluation::forbidden("shell.default-deny", format!("no `shell.allow` rule matches `{command}`"));
    };
    let reason = rule.reason.clone().unwrap_or_else(|| match rule.decision {
        Decision::Allow => format!("rule `{}` allows this command", rule.name),
        Decision::Prompt => format!("rule `{}` allows this command after a person approves it", rule.name),
        Decision::Forbidden => format!("rule `{}` forbids `{command}`", rule.name),
    });
    if rule.decision == Decision::Forbidden {
        return ShellEvaluation::forbidden(&rule.name, reason);
    }
    ShellEvaluation { decision: rule.decision, rule: rule.name.clone(), reason, program: None }
}

/// Whether a rule with these argument patterns accepts `args` (argv after
/// the program): some pattern matches all of them (or, for a prefix rule,
/// their leading tokens). The one argument matcher: the runtime decides with
/// it, and the loader checks each rule's `match` / `not_match` examples with
/// it (path slots judged by [`PathRules`]), so an example passes at load
/// exactly when the rule accepts it at run time.
pub fn args_match(patterns: &[ArgPattern], prefix: bool, args: &[String], slots: &dyn PathSlots) -> bool {
    patterns.iter().any(|pattern| pattern_matches(pattern, prefix, args, slots))
}

/// Whether `pattern` matches all of `args` (or, for a prefix rule, their
/// leading tokens).
fn pattern_matches(pattern: &ArgPattern, prefix: bool, args: &[String], slots: &dyn PathSlots) -> bool {
    let matchers = &pattern.0;
    let length_ok = if prefix { args.len() >= matchers.len() } else { args.len() == matchers.len() };
    length_ok && matchers.iter().zip(args).all(|(matcher, token)| token_matches(matcher, token, slots))
}

fn token_matches(matcher: &ArgMatcher, token: &str, slots: &dyn PathSlots) -> bool {
    match matcher {
        ArgMatcher::Literal(literal) => literal.as_bytes() == token.as_bytes(),
        ArgMatcher::Regex(regex) => {
            regex.find(token).is_some_and(|found| found.start() == 0 && found.end() == token.len())
        }
        ArgMatcher::Slot { kind: SlotKind::Path, allow_dash } => {
            (*allow_dash || !token.starts_with('-')) && slots.slot_accepts(token)
        }
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;
    use std::path::{Path, PathBuf};

    use regex::Regex;

    use super::*;
    use crate::model::FilePolicy;

    fn lit(s: &str) -> ArgMatcher {
        ArgMatcher::Literal(s.to_owned())
    }

    fn re(s: &str) -> ArgMatcher {
        ArgMatcher::Regex(Regex::new(&format!("^(?:{s})$")).expect("regex"))
    }

    fn path_slot(allow_dash: bool) -> ArgMatcher {
        ArgMatcher::Slot { kind: SlotKind::Path, allow_dash }
    }

    fn rule(name: &str, program: &str, args: Vec<Vec<ArgMatcher>>, decision: Decision) -> ShellRule {
        ShellRule {
            name: name.to_owned(),
            program: program.to_owned(),
            args: args.into_iter().map(ArgPattern).collect(),
            prefix: false,
            decision,
            reason: None,
            network: crate::model::NetworkAccess::Off,
            origin: None,
        }
    }

    fn which_dir(name: &str) -> PathBuf {
        ["/usr/bin", "/bin"]
            .iter()
            .map(PathBuf::from)
            .find(|dir| dir.join(name).exists())
            .unwrap_or_else(|| panic!("{name} not installed"))
    }

    fn policy_with(search_path: Vec<PathBuf>) -> ShellPolicy {
        policy(search_path)
    }

    fn policy(search_path: Vec<PathBuf>) -> ShellPolicy {
        use Decision::{Allow, Forbidden};
        let mut prefix = rule("git-log", "git", vec![vec![lit("log"), lit("--oneline")]], Allow);
        prefix.prefix = true;
        let mut echo = rule("echo-any", "echo", vec![vec![re("[a-z]+")]], Allow);
        echo.reason = Some("echo is harmless".to_owned());
        ShellPolicy {
            blocked: vec!["bash".into(), "sh".into(), "rm".into()],
            allow: vec![
                rule("rm-any", "rm", vec![vec![path_slot(false)]], Allow),
                rule("pwd", "pwd", vec![vec![]], Allow),
                rule("git-status", "git", vec![vec![lit("status")]], Allow),
                prefix,
                echo,
                rule("echo-secret", "echo", vec![vec![lit("secret")]], Forbidden),
                rule("cat-path", "cat", vec![vec![path_slot(false)]], Allow),
                rule("ls-path", "ls", vec![vec![], vec![path_slot(true)]], Allow),
                rule("ok", "ok", vec![vec![]], Allow),
                rule("ls-path-forbidden", "ls", vec![vec![lit("-R")]], Forbidden),
            ],
            search_path,
            env: BTreeMap::new(),
            env_allow: vec![],
            sandbox: crate::model::SandboxMode::None,
            require_sandbox: false,
        }
    }

    fn argv(line: &str) -> Vec<String> {
        line.split_whitespace().map(str::to_owned).collect()
    }

    #[test]
    fn table() {
        let tmp = tempfile::tempdir().expect("tempdir");
        let root = tmp.path().join("ws");
        std::fs::create_dir_all(root.join("src")).expect("mkdir");
        let files = FilePolicy { deny: vec![], max_read_bytes: 10, max_write_bytes: 10 };
        let ws = Workspace::open(&root, &files).expect("open");
        let policy = policy(vec![which_dir("ls"), which_dir("pwd")]);
        let mut resolver = ProgramResolver::new(&policy);
        use Decision::{Allow, Forbidden};
        let table: &[(Vec<String>, Decision, &str)] = &[
            (vec![], Forbidden, "shell.empty"),
            (argv("rm notes.txt"), Forbidden, "shell.blocked"),
            (argv("bash -c ls"), Forbidden, "shell.blocked"),
            (argv("/bin/rm x"), Forbidden, "shell.bare-name"),
            (argv("./rm x"), Forbidden, "shell.bare-name"),
            (vec!["l\u{e9}s".into()], Forbidden, "shell.bare-name"),
            (vec!["".into()], Forbidden, "shell.bare-name"),
            (argv("curl http://x"), Forbidden, "shell.default-deny"),
            (argv("git status"), Allow, "git-status"),
            (argv("git status --porcelain"), Forbidden, "shell.default-deny"),
            (argv("git push"), Forbidden, "shell.default-deny"),
            (argv("git"), Forbidden, "shell.default-deny"),
            (argv("git log --oneline"), Allow, "git-log"),
            (argv("git log --oneline -5"), Allow, "git-log"),
            (argv("git log"), Forbidden, "shell.default-deny"),
            (argv("echo hello"), Allow, "echo-any"),
            (argv("echo Hello"), Forbidden, "shell.default-deny"),
            (argv("echo hello!"), Forbidden, "shell.default-deny"),
            (argv("echo secret"), Forbidden, "echo-secret"),
            (argv("pwd"), Allow, "pwd"),
            (argv("pwd -P"), Forbidden, "shell.default-deny"),
            (argv("cat notes.txt"), Allow, "cat-path"),
            (argv("cat src/main.rs"), Allow, "cat-path"),
            (argv("cat ../x"), Forbidden, "shell.default-deny"),
            (argv("cat /etc/passwd"), Forbidden, "shell.default-deny"),
            (argv("cat -rf"), Forbidden, "shell.default-deny"),
            (argv("cat runs/x/state.json"), Forbidden, "shell.default-deny"),
            (argv("cat a b"), Forbidden, "shell.default-deny"),
            (argv("ls"), Allow, "ls-path"),
            (argv("ls -la"), Allow, "ls-path"),
            (argv("ls -R"), Forbidden, "ls-path-forbidden"),
            (argv("Git status"), Forbidden, "shell.default-deny"),
        ];
        for (argv, decision, rule) in table {
            let got = evaluate_shell(&policy, &ws, &mut resolver, argv);
            assert_eq!((got.decision, got.rule.as_str()), (*decision, *rule), "argv {argv:?}: {}", got.reason);
        }
    }

    #[test]
    fn reasons_and_json() {
        let tmp = tempfile::tempdir().expect("tempdir");
        let files = FilePolicy { deny: vec![], max_read_bytes: 10, max_write_bytes: 10 };
        let ws = Workspace::open(tmp.path(), &files).expect("open");
        let pwd_dir = which_dir("pwd");
        let policy = policy(vec![pwd_dir.clone()]);
        let mut resolver = ProgramResolver::new(&policy);
        let got = evaluate_shell(&policy, &ws, &mut resolver, &argv("git push"));
        assert_eq!(got.reason, "no `shell.allow` rule matches `git push`");
        let got = evaluate_shell(&policy, &ws, &mut resolver, &argv("echo hi"));
        assert_eq!(got.reason, "echo is harmless");
        let got = evaluate_shell(&policy, &ws, &mut resolver, &argv("pwd"));
        let json = serde_json::to_value(&got).expect("json");
        assert_eq!(json["decision"], "allow");
        assert_eq!(json["rule"], "pwd");
        assert_eq!(json["reason"], "rule `pwd` allows this command");
        assert_eq!(json["program"], pwd_dir.join("pwd").to_str().expect("utf8"));
        // Allowed but not on the search path: allow without a program.
        let empty = policy_with(vec![tmp.path().join("empty-bin")]);
        let mut resolver = ProgramResolver::new(&empty);
        let got = evaluate_shell(&empty, &ws, &mut resolver, &argv("git status"));
        assert_eq!(got.decision, Decision::Allow);
        assert_eq!(got.program, None);
    }

    #[test]
    fn symlink_to_a_blocked_program_is_denied_after_resolution() {
        let tmp = tempfile::tempdir().expect("tempdir");
        let bin = tmp.path().join("bin");
        let ws_root = tmp.path().join("ws");
        std::fs::create_dir_all(&bin).expect("mkdir");
        std::fs::create_dir_all(&ws_root).expect("mkdir");
        let bash = Path::new("/bin/bash");
        let target = if bash.exists() { bash.to_path_buf() } else { which_dir("sh").join("sh") };
        std::os::unix::fs::symlink(&target, bin.join("ok")).expect("symlink");
        let files = FilePolicy { deny: vec![], max_read_bytes: 10, max_write_bytes: 10 };
        let ws = Workspace::open(&ws_root, &files).expect("open");
        let policy = policy(vec![bin.clone()]);
        let mut resolver = ProgramResolver::new(&policy);
        let got = evaluate_shell(&policy, &ws, &mut resolver, &argv("ok"));
        assert_eq!(got.decision, Decision::Forbidden, "{}", got.reason);
        assert_eq!(got.rule, "shell.blocked");
        assert!(got.reason.contains("resolves to"), "{}", got.reason);
        assert!(got.program.is_none());
    }

    #[test]
    fn path_slot_refuses_symlinks_leading_out() {
        let tmp = tempfile::tempdir().expect("tempdir");
        let root = tmp.path().join("ws");
        std::fs::create_dir_all(&root).expect("mkdir");
        std::os::unix::fs::symlink("/etc/passwd", root.join("pw")).expect("symlink");
        let files = FilePolicy { deny: vec![], max_read_bytes: 10, max_write_bytes: 10 };
        let ws = Workspace::open(&root, &files).expect("open");
        let policy = policy(vec![]);
        let mut resolver = ProgramResolver::new(&policy);
        let got = evaluate_shell(&policy, &ws, &mut resolver, &argv("cat pw"));
        assert_eq!(got.rule, "shell.default-deny");
        // The lexical judgement cannot see the symlink: it is never stricter
        // than the workspace, so only its denials are certain.
        let rules = PathRules::new(&files);
        assert_eq!(evaluate_argv(&policy, &rules, &argv("cat pw")).rule, "cat-path");
        assert_eq!(evaluate_argv(&policy, &rules, &argv("cat ../pw")).rule, "shell.default-deny");
        assert_eq!(evaluate_argv(&policy, &rules, &argv("cat runs/x")).rule, "shell.default-deny");
    }
}
