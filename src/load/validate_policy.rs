//! Policy tree → [`Policy`], collecting every finding of the file in one pass.
//!
//! Every section is optional and has defaults (`defaults.rs`). Shell
//! rules are compiled here: regex tokens are anchored, prefix rules are
//! refused for programs that run other programs, and each rule's `match` /
//! `not_match` examples are checked against the rule itself with the
//! runtime's own matcher ([`crate::policy::args_match`]), path slots judged
//! by the confinement rules of this policy's `files.deny` and the protected
//! folders: an example the runtime would deny fails here.
//!
//! Adding a key: add it to its section in `keys.rs` and read it in the
//! section's function.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use crate::confine::{PathDenied, PathRules, is_within};
use crate::diag::{Diagnostic, Span};
use crate::load::defaults::{
    DEFAULT_BUDGET, DEFAULT_DECISION, DEFAULT_FILES_DENY, DEFAULT_MAX_BYTES, DEFAULT_RETRY_CAP, DEFAULT_SEARCH_PATH,
    default_attempts, default_rule_id,
};
use crate::load::keys::{BUDGET, FILES, POLICY, RETRY, RULE, SHELL, TOKEN_TABLE};
use crate::load::node::Node;
use crate::load::table::{
    TableReader, bare_name, check_version, compile_regex, empty_table, error_count, expect_array, section, string_map,
    strings, wrong_type,
};
use crate::load::{validate_backoff, validate_mcp, validate_sandbox, validate_secrets};
use crate::model::{
    ArgMatcher, ArgPattern, Budget, Decision, FailureClass, FilePolicy, Policy, RetryBackoff, RetryPolicy, ShellPolicy,
    ShellRule, SlotKind, SourceRef,
};
use crate::policy::args_match;

const RETRY_CAP: &str = "cap";

/// Programs that run other programs: a prefix rule for one of them would
/// allow anything, so it is refused at load.
const NO_PREFIX: &[&str] = &[
    "sh", "bash", "dash", "zsh", "fish", "ksh", "csh", "tcsh", "python", "python3", "perl", "ruby", "node", "deno",
    "bun", "php", "lua", "env", "timeout", "xargs", "nice", "nohup", "sudo", "doas", "su", "stdbuf", "time", "watch",
    "strace", "find", "npm", "npx", "pip", "pip3", "cargo", "apt", "apt-get", "dpkg", "yum", "dnf", "brew", "gem",
    "uv",
];

/// Builds the policy named `name`, or returns `None` when the file has
/// errors (all of them reported).
/// With `workspace` known, a `shell.search_path` folder inside it is an
/// error: programs a plan wrote there would run.
/// With `parent` (the merged policy named by `extends`), the rule examples'
/// path slots are judged by the merged `files.deny`, and unnamed rules are
/// numbered after the parent's (`extends.rs` merges the two).
pub(crate) fn validate_policy(
    root: &Node,
    name: &str,
    source: SourceRef,
    workspace: Option<&Path>,
    parent: Option<&Policy>,
    diagnostics: &mut Vec<Diagnostic>,
) -> Option<Policy> {
    let errors_before = error_count(diagnostics);
    let mut reader = TableReader::new(root, "a policy file", "", POLICY.keys, diagnostics)?;
    check_version(&mut reader, diagnostics);
    reader.string("description", diagnostics);
    reader.string("extends", diagnostics);
    // `files` first: the rule examples' path slots are judged by its
    // `deny` globs. Its findings still come after the shell's, in file order.
    let mut files_findings = Vec::new();
    let files = files(reader.get("files"), &mut files_findings);
    let mut judged = files.clone().unwrap_or(FilePolicy { deny: Vec::new(), max_read_bytes: 0, max_write_bytes: 0 });
    if let Some(parent) = parent {
        judged.deny.extend(parent.files.deny.iter().cloned());
    }
    let slots = PathRules::new(&judged);
    let first_index = parent.map_or(0, |parent| parent.shell.allow.len());
    let shell = shell(reader.get("shell"), &slots, first_index, workspace, diagnostics);
    diagnostics.extend(files_findings);
    let retry = retry(reader.get("retry"), diagnostics);
    let backoff = validate_backoff::policy_backoff(reader.get("retry_backoff"), diagnostics);
    let budget = budget(reader.get("budget"), diagnostics);
    let secrets = validate_secrets::secrets(reader.get("secrets"), &source.path, diagnostics);
    let empty = BTreeMap::new();
    let declared = [secrets.as_ref().unwrap_or(&empty), parent.map_or(&empty, |parent| &parent.secrets)];
    let mcp = validate_mcp::servers(reader.get("mcp"), &declared, diagnostics);
    let first_http = parent.map_or(0, |parent| parent.http.allow.len());
    let http = crate::load::validate_http_policy::http(reader.get("http"), first_http, diagnostics);
    let models = crate::load::validate_agent::models(reader.get("models"), &source.path, diagnostics);
    reader.finish(diagnostics);
    if error_count(diagnostics) > errors_before {
        return None;
    }
    let (shell, files, mut retry, budget, secrets, mcp, http, models) =
        (shell?, files?, retry?, budget?, secrets?, mcp?, http?, models?);
    retry.backoff = backoff?;
    Some(Policy {
        name: name.to_string(),
        shell,
        files,
        retry,
        budget,
        secrets,
        source,
        extends: Vec::new(),
        mcp,
        http,
        models,
    })
}

/// `search-path-in-workspace`: a search path folder that is the workspace,
/// inside it or a link into it (resolved as the kernel would, so a folder
/// the plan has not created yet counts too).
fn in_workspace(text: &str, node: &Node, workspace: Option<&Path>, diagnostics: &mut Vec<Diagnostic>) -> bool {
    let Some(workspace) = workspace.filter(|workspace| is_within(Path::new(text), workspace)) else {
        return false;
    };
    diagnostics.push(
        Diagnostic::error(
            "search-path-in-workspace",
            format!("search path entry `{text}` is inside the workspace `{}`", workspace.display()),
        )
        .with_span(node.span)
        .with_label("a program a plan writes there would run")
        .with_help(
            "name folders outside the workspace (`--workspace`, `PLANRUN_WORKSPACE`): programs are never looked up in it",
        ),
    );
    true
}

fn shell(
    node: Option<&Node>,
    slots: &PathRules,
    first_index: usize,
    workspace: Option<&Path>,
    diagnostics: &mut Vec<Diagnostic>,
) -> Option<ShellPolicy> {
    let empty = empty_table();
    let mut reader = section(node, "shell", SHELL.keys, &empty, diagnostics)?;
    let blocked = reader
        .array("blocked", diagnostics)
        .map(|items| strings(items, "shell.blocked", diagnostics, bare_name))
        .unwrap_or_default();
    let search_path: Vec<PathBuf> = match reader.array("search_path", diagnostics) {
        Some(items) => strings(items, "shell.search_path", diagnostics, |text, node, diagnostics| {
            let absolute = text.starts_with('/');
            if !absolute {
                diagnostics.push(
                    Diagnostic::error("invalid-value", format!("search path entry `{text}` is not absolute"))
                        .with_span(node.span)
                        .with_label("expected an absolute folder")
                        .with_help(
                            "programs are found only in fixed absolute folders, never relative to the workspace",
                        ),
                );
            }
            absolute && !in_workspace(text, node, workspace, diagnostics)
        })
        .into_iter()
        .map(PathBuf::from)
        .collect(),
        None => DEFAULT_SEARCH_PATH.iter().map(PathBuf::from).collect(),
    };
    let env = match reader.get("env") {
        Some(node) => string_map(node, "shell.env", diagnostics),
        None => {
            let path =
                search_path.iter().map(|folder| folder.to_string_lossy().into_owned()).collect::<Vec<_>>().join(":");
            BTreeMap::from([("PATH".to_string(), path), ("LANG".to_string(), "C.UTF-8".to_string())])
        }
    };
    let env_allow = reader
        .array("env_allow", diagnostics)
        .map(|items| validate_secrets::env_allow(items, diagnostics))
        .unwrap_or_default();
    let sandbox = validate_sandbox::settings(&mut reader, diagnostics);
    let mut allow = Vec::new();
    let mut rules_ok = true;
    if let Some(items) = reader.array("allow", diagnostics) {
        for (index, item) in items.iter().enumerate() {
            match rule(item, first_index + index, slots, diagnostics) {
                Some(rule) => allow.push(rule),
                None => rules_ok = false,
            }
        }
    }
    reader.finish(diagnostics);
    let (sandbox, require_sandbox) = sandbox?;
    rules_ok.then_some(ShellPolicy { blocked, allow, search_path, env, env_allow, sandbox, require_sandbox })
}

fn rule(node: &Node, index: usize, slots: &PathRules, diagnostics: &mut Vec<Diagnostic>) -> Option<ShellRule> {
    let errors_before = error_count(diagnostics);
    let default_name = default_rule_id(&index.to_string());
    let mut reader =
        TableReader::new(node, &format!("`{default_name}`"), format!(" in `{default_name}`"), RULE.keys, diagnostics)?;
    let name = match reader.string("id", diagnostics) {
        Some((id, _)) => {
            reader.set_context(format!(" in rule `{id}`"));
            id.to_string()
        }
        None => default_name,
    };
    let program = reader
        .required_string("program", diagnostics)
        .and_then(|(program, node)| bare_name(program, node, diagnostics).then_some((program, node)));
    let args = match reader.get("args") {
        Some(node) => arg_patterns(node, diagnostics),
        None => Some(vec![ArgPattern(Vec::new())]),
    };
    let prefix = reader.bool("prefix", diagnostics).unwrap_or(false);
    if prefix && let Some((program, _)) = program.filter(|(program, _)| NO_PREFIX.contains(program)) {
        let span = reader.key_span("prefix").unwrap_or(node.span);
        diagnostics.push(
            Diagnostic::error("prefix-rule-refused", format!("a prefix rule for `{program}` would allow any command"))
                .with_span(span)
                .with_label(format!("`{program}` runs other programs"))
                .with_help("list the exact argument lists in `args` instead"),
        );
    }
    let decision = reader
        .choice(
            "decision",
            "decision",
            &[("allow", Decision::Allow), ("prompt", Decision::Prompt), ("forbidden", Decision::Forbidden)],
            diagnostics,
        )
        .map(|decision| decision.unwrap_or(DEFAULT_DECISION));
    let reason = reader.string("reason", diagnostics).map(|(text, _)| text.to_string());
    let matching = examples(&mut reader, "match", diagnostics);
    let not_matching = examples(&mut reader, "not_match", diagnostics);
    let network = validate_sandbox::network(&mut reader, diagnostics);
    reader.finish(diagnostics);

    if let Some(args) = &args {
        for (example, tokens) in &matching {
            if !args_match(args, prefix, tokens, slots) {
                let mut diagnostic = mismatch(example, "is not accepted by this rule", "`match`");
                if let Some(denied) = slot_denial(args, tokens, slots) {
                    diagnostic = diagnostic.with_help(format!(
                        "{denied}; a `path` slot takes only paths the file tools may touch, so the runtime denies this example"
                    ));
                }
                diagnostics.push(diagnostic);
            }
        }
        for (example, tokens) in &not_matching {
            if args_match(args, prefix, tokens, slots) {
                diagnostics.push(mismatch(example, "is accepted by this rule", "`not_match`"));
            }
        }
    }
    if error_count(diagnostics) > errors_before {
        return None;
    }
    Some(ShellRule {
        name,
        program: program?.0.to_string(),
        args: args?,
        prefix,
        decision: decision?,
        reason,
        network: network?,
        origin: None,
    })
}

fn mismatch(example: &Node, what: &str, list: &str) -> Diagnostic {
    Diagnostic::error("rule-example-mismatch", format!("{list} example {what}"))
        .with_span(example.span)
        .with_label(format!("listed in {list}"))
        .with_help("fix the rule's `args` or the example")
}

/// The argument lists of `match` or `not_match`.
fn examples<'n>(
    reader: &mut TableReader<'n>,
    key: &str,
    diagnostics: &mut Vec<Diagnostic>,
) -> Vec<(&'n Node, Vec<String>)> {
    let Some(items) = reader.array(key, diagnostics) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for (index, item) in items.iter().enumerate() {
        let what = format!("`{key}[{index}]`");
        let Some(tokens) = expect_array(item, &what, diagnostics) else {
            continue;
        };
        let strings = strings(tokens, &format!("{key}[{index}]"), diagnostics, |_, _, _| true);
        if strings.len() == tokens.len() {
            out.push((item, strings));
        }
    }
    out
}

fn arg_patterns(node: &Node, diagnostics: &mut Vec<Diagnostic>) -> Option<Vec<ArgPattern>> {
    let items = expect_array(node, "`args`", diagnostics)?;
    if items.is_empty() {
        diagnostics.push(
            Diagnostic::error("invalid-value", "`args` is empty: the rule would match nothing")
                .with_span(node.span)
                .with_help("omit `args` to allow the program alone, or list argument lists"),
        );
        return None;
    }
    let mut patterns = Vec::new();
    let mut ok = true;
    for (index, item) in items.iter().enumerate() {
        let Some(tokens) = expect_array(item, &format!("`args[{index}]`"), diagnostics) else {
            ok = false;
            continue;
        };
        let mut matchers = Vec::new();
        for (position, token) in tokens.iter().enumerate() {
            match matcher(token, &format!("args[{index}][{position}]"), diagnostics) {
                Some(matcher) => matchers.push(matcher),
                None => ok = false,
            }
        }
        patterns.push(ArgPattern(matchers));
    }
    ok.then_some(patterns)
}

fn matcher(node: &Node, where_: &str, diagnostics: &mut Vec<Diagnostic>) -> Option<ArgMatcher> {
    if let Some(text) = node.as_str() {
        return Some(ArgMatcher::Literal(text.to_string()));
    }
    if node.as_table().is_none() {
        diagnostics.push(wrong_type(node, &format!("`{where_}`"), "a string or a table such as `{ regex = \"…\" }`"));
        return None;
    }
    let mut reader =
        TableReader::new(node, &format!("`{where_}`"), format!(" in `{where_}`"), TOKEN_TABLE.keys, diagnostics)?;
    let regex = reader.string("regex", diagnostics);
    let slot = reader.string("slot", diagnostics);
    let allow_dash = reader.bool("allow_dash", diagnostics);
    reader.finish(diagnostics);
    match (regex, slot) {
        (Some((pattern, pattern_node)), None) => {
            if let Some(span) = reader_span_for(allow_dash, node) {
                diagnostics.push(
                    Diagnostic::error("invalid-value", "`allow_dash` applies to slots only")
                        .with_span(span)
                        .with_help("a regex decides for itself whether a token may start with `-`"),
                );
                return None;
            }
            compile_regex(pattern, true, pattern_node, diagnostics).map(ArgMatcher::Regex)
        }
        (None, Some(("path", _))) => {
            Some(ArgMatcher::Slot { kind: SlotKind::Path, allow_dash: allow_dash.unwrap_or(false) })
        }
        (None, Some((other, slot_node))) => {
            diagnostics.push(
                Diagnostic::error("invalid-value", format!("unknown slot kind `{other}`"))
                    .with_span(slot_node.span)
                    .with_label("expected `path`"),
            );
            None
        }
        (Some(_), Some(_)) | (None, None) => {
            diagnostics.push(
                Diagnostic::error("invalid-value", "a token table needs exactly one of `regex` and `slot`")
                    .with_span(node.span)
                    .with_help("write `{ regex = \"…\" }` or `{ slot = \"path\" }`"),
            );
            None
        }
    }
}

/// The token table's span when it sets `allow_dash` (for a regex token).
fn reader_span_for(allow_dash: Option<bool>, node: &Node) -> Option<Span> {
    allow_dash.map(|_| node.get("allow_dash").map_or(node.span, |value| value.span))
}

/// Why confinement refuses a token of `tokens` that stands where some
/// pattern has a `path` slot: what makes a `match` example fail that would
/// pass by its shape alone.
fn slot_denial(patterns: &[ArgPattern], tokens: &[String], slots: &PathRules) -> Option<PathDenied> {
    patterns.iter().flat_map(|ArgPattern(matchers)| matchers.iter().zip(tokens)).find_map(|(matcher, token)| {
        matches!(matcher, ArgMatcher::Slot { .. }).then(|| slots.check_path(token).err()).flatten()
    })
}

fn files(node: Option<&Node>, diagnostics: &mut Vec<Diagnostic>) -> Option<FilePolicy> {
    let empty = empty_table();
    let mut reader = section(node, "files", FILES.keys, &empty, diagnostics)?;
    let deny = match reader.array("deny", diagnostics) {
        Some(items) => strings(items, "files.deny", diagnostics, |_, _, _| true),
        None => DEFAULT_FILES_DENY.iter().map(|glob| glob.to_string()).collect(),
    };
    let max_read_bytes = bytes(&mut reader, "max_read_bytes", diagnostics);
    let max_write_bytes = bytes(&mut reader, "max_write_bytes", diagnostics);
    reader.finish(diagnostics);
    Some(FilePolicy { deny, max_read_bytes, max_write_bytes })
}

fn bytes(reader: &mut TableReader<'_>, key: &str, diagnostics: &mut Vec<Diagnostic>) -> u64 {
    positive(reader, key, DEFAULT_MAX_BYTES, diagnostics)
}

/// An integer ≥ 1 or the default (also after a reported error).
fn positive(reader: &mut TableReader<'_>, key: &str, default: u64, diagnostics: &mut Vec<Diagnostic>) -> u64 {
    reader.integer(key, 1, diagnostics).map_or(default, |(value, _)| value.unsigned_abs())
}

fn retry(node: Option<&Node>, diagnostics: &mut Vec<Diagnostic>) -> Option<RetryPolicy> {
    let empty = empty_table();
    let mut reader = section(node, "retry", RETRY.keys, &empty, diagnostics)?;
    let mut max_attempts = BTreeMap::new();
    for class in FailureClass::CONFIGURABLE {
        let attempts = positive(&mut reader, class.as_str(), u64::from(default_attempts(class)), diagnostics);
        max_attempts.insert(class, u32::try_from(attempts).unwrap_or(u32::MAX));
    }
    let cap = positive(&mut reader, RETRY_CAP, DEFAULT_RETRY_CAP, diagnostics);
    reader.finish(diagnostics);
    Some(RetryPolicy { max_attempts, cap: u32::try_from(cap).unwrap_or(u32::MAX), backoff: RetryBackoff::default() })
}

fn budget(node: Option<&Node>, diagnostics: &mut Vec<Diagnostic>) -> Option<Budget> {
    let empty = empty_table();
    let mut reader = section(node, "budget", BUDGET.keys, &empty, diagnostics)?;
    let budget = Budget {
        max_steps: positive(&mut reader, "max_steps", DEFAULT_BUDGET.max_steps, diagnostics),
        max_tool_calls: positive(&mut reader, "max_tool_calls", DEFAULT_BUDGET.max_tool_calls, diagnostics),
        max_consecutive_failures: positive(
            &mut reader,
            "max_consecutive_failures",
            DEFAULT_BUDGET.max_consecutive_failures,
            diagnostics,
        ),
        step_timeout_secs: positive(&mut reader, "step_timeout_secs", DEFAULT_BUDGET.step_timeout_secs, diagnostics),
        max_output_bytes: positive(&mut reader, "max_output_bytes", DEFAULT_BUDGET.max_output_bytes, diagnostics),
        max_run_secs: reader.integer("max_run_secs", 1, diagnostics).map(|(seconds, _)| seconds.unsigned_abs()),
    };
    reader.finish(diagnostics);
    Some(budget)
}
