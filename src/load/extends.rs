//! `extends = "NAME"`: a policy built on another policy of the same folder.
//!
//! The parent is loaded first (itself merged with its own parent, so
//! chains work), the child is validated with the parent in view (its rule
//! examples are judged by the merged `files.deny`), then the two merge:
//!
//! - lists that restrict add up and always win: `shell.blocked`,
//!   `files.deny`;
//! - `shell.allow` rules add up, the parent's first; a rule `id` both files
//!   give is an error naming both files;
//! - limits take the stricter value of those the files give: every
//!   `budget` key, `retry` attempts per class and `cap`,
//!   `files.max_read_bytes` / `max_write_bytes`;
//! - settings the child gives replace the parent's: `shell.search_path`,
//!   `shell.env`;
//! - the sandbox takes the stricter: `shell.sandbox` (`landlock` over
//!   `none`) and `shell.require_sandbox` (true if either file says so).
//!
//! - `[[http.allow]]` rules add up (the parent's first, each with its
//!   origin), `http.deny` adds up and wins, `http.max_response_bytes` and
//!   `http.timeout_secs` take the stricter value.
//!
//! Adding a policy section: merge it in [`merge`] by one of these kinds
//! (`[secrets.NAME]` and `[mcp.servers.NAME]` are unions where the child
//! wins a name clash; `shell.env_allow` is a
//! union) and document it in docs/policies.md ("Reuse a policy: extends").
//!
//! A cycle, a parent that does not exist (with a did-you-mean) and a parent
//! with errors are reported at the `extends` value.

use std::path::{Path, PathBuf};

use crate::diag::Diagnostic;
use crate::load::checked::FileKind;
use crate::load::did_you_mean::did_you_mean;
use crate::load::loader::Loader;
use crate::load::node::Node;
use crate::load::read_file::{EXTENSIONS, Format, ReadFile};
use crate::load::validate_policy::validate_policy;
use crate::model::Policy;

/// A policy's name: its file stem.
fn stem(path: &Path) -> String {
    path.file_stem().map(|stem| stem.to_string_lossy().into_owned()).unwrap_or_default()
}

/// Whether the child file sets `section.key`.
fn gives(root: &Node, section: &str, key: &str) -> bool {
    root.get(section).and_then(|table| table.get(key)).is_some()
}

impl Loader {
    /// Validates the policy file at `path` (read as `read`, parsed as
    /// `root`) and merges it onto the policy it extends. `chain` holds the
    /// files whose parents are being loaded (for cycles).
    pub(super) fn resolve_policy(
        &mut self,
        path: &Path,
        read: ReadFile,
        root: &Node,
        chain: &mut Vec<PathBuf>,
    ) -> Option<Policy> {
        let parse_errors = self.file_has_errors(read.id);
        let parent = match root.get("extends") {
            Some(node) => match node.as_str() {
                Some(parent) => self.parent_policy(path, parent, node, chain),
                // Not a string: validation reports the type.
                None => Err(()),
            },
            None => Ok(None),
        };
        let name = stem(path);
        let workspace = self.workspace.as_deref();
        let policy = validate_policy(
            root,
            &name,
            read.source,
            workspace,
            parent.as_ref().ok().and_then(Option::as_ref),
            &mut self.diagnostics,
        )
        .filter(|_| !parse_errors);
        let mut policy = policy?;
        self.set_origins(&mut policy, root);
        let merged = match parent.ok()? {
            Some(parent) => self.merge(parent, policy, root),
            None => Some(policy),
        }?;
        let errors_before = crate::load::table::error_count(&self.diagnostics);
        crate::load::validate_mcp::server_command_findings(&merged, root, &mut self.diagnostics);
        (crate::load::table::error_count(&self.diagnostics) == errors_before).then_some(merged)
    }

    /// Each rule's origin (`shell.allow`, `http.allow`): the file as shown
    /// and the rule's line.
    fn set_origins(&self, policy: &mut Policy, root: &Node) {
        let items = |section: &str| {
            root.get(section).and_then(|table| table.get("allow")).and_then(Node::as_array).unwrap_or(&[])
        };
        let origin = |item: &Node| {
            self.sources.get(item.span.source).map(|file| {
                let (line, _) = file.line_col(item.span.start);
                format!("{}:{line}", file.name)
            })
        };
        for (rule, item) in policy.shell.allow.iter_mut().zip(items("shell")) {
            rule.origin = origin(item);
        }
        for (rule, item) in policy.http.allow.iter_mut().zip(items("http")) {
            rule.origin = origin(item);
        }
    }

    /// The merged policy `name` beside `child`; `Err` (reported at `node`)
    /// when it is missing, in a cycle or invalid.
    fn parent_policy(
        &mut self,
        child: &Path,
        name: &str,
        node: &Node,
        chain: &mut Vec<PathBuf>,
    ) -> Result<Option<Policy>, ()> {
        let dir = child.parent().unwrap_or(Path::new(""));
        let Some(path) = self.find_policy(dir, name) else {
            self.diagnostics.push(self.missing_parent(dir, name, node));
            return Err(());
        };
        if path == child || chain.contains(&path) {
            let start = chain.iter().position(|seen| *seen == path).unwrap_or(chain.len());
            let names: Vec<String> =
                chain[start..].iter().chain([&child.to_path_buf(), &path]).map(|path| stem(path)).collect();
            self.diagnostics.push(
                Diagnostic::error("policy-extends-cycle", format!("policies extend each other: {}", names.join(" → ")))
                    .with_span(node.span)
                    .with_label("this `extends` closes the cycle")
                    .with_help("a policy may extend another only when that one does not extend it back"),
            );
            return Err(());
        }
        let policy = match self.policy_cache.get(&path) {
            Some(cached) => cached.clone(),
            None => {
                chain.push(child.to_path_buf());
                let policy = self
                    .read(&path, FileKind::Policy)
                    .and_then(|(read, root)| self.resolve_policy(&path, read, &root, chain));
                chain.pop();
                self.policy_cache.insert(path.clone(), policy.clone());
                policy
            }
        };
        let Some(policy) = policy else {
            self.diagnostics.push(
                Diagnostic::error("invalid-parent-policy", format!("policy `{name}` has errors"))
                    .with_span(node.span)
                    .with_label("extended here")
                    .with_help("fix the parent policy's findings first"),
            );
            return Err(());
        };
        Ok(Some(policy))
    }

    /// `unknown-parent-policy`, with the closest policy name of the folder.
    fn missing_parent(&self, dir: &Path, name: &str, node: &Node) -> Diagnostic {
        let files: Vec<PathBuf> = match &self.copies {
            Some(copies) => copies.keys().filter(|path| path.parent() == Some(dir)).cloned().collect(),
            None => std::fs::read_dir(dir)
                .map(|entries| entries.filter_map(Result::ok).map(|entry| entry.path()).collect())
                .unwrap_or_default(),
        };
        let known: Vec<String> =
            files.iter().filter(|path| Format::of(path).is_some()).map(|path| stem(path)).collect();
        let tried = EXTENSIONS.map(|extension| format!("`{name}.{extension}`")).join(", ");
        let mut diagnostic = Diagnostic::error("unknown-parent-policy", format!("no policy `{name}` to extend"))
            .with_span(node.span)
            .with_label(format!("looked for {tried} beside this file"));
        if let Some(close) = did_you_mean(name, known.iter().map(String::as_str)) {
            diagnostic = diagnostic.with_help(format!("did you mean `{close}`?"));
        }
        diagnostic
    }

    /// `child` on top of `parent` (see the module notes); `None` when both
    /// give a rule the same id.
    fn merge(&mut self, parent: Policy, mut child: Policy, root: &Node) -> Option<Policy> {
        let shell_parent: Vec<_> =
            parent.shell.allow.iter().map(|rule| (rule.name.as_str(), rule.origin.as_deref())).collect();
        let shell_child: Vec<&str> = child.shell.allow.iter().map(|rule| rule.name.as_str()).collect();
        let http_parent: Vec<_> =
            parent.http.allow.iter().map(|rule| (rule.name.as_str(), rule.origin.as_deref())).collect();
        let http_child: Vec<&str> = child.http.allow.iter().map(|rule| rule.name.as_str()).collect();
        let mut errors = self.duplicate_rules("shell", &shell_parent, &shell_child, root);
        errors.extend(self.duplicate_rules("http", &http_parent, &http_child, root));
        if !errors.is_empty() {
            self.diagnostics.extend(errors);
            return None;
        }
        let mut merged = parent.clone();
        merged.name = child.name;
        merged.source = child.source;
        // The digest a run records covers the whole chain: a parent edited
        // after a run started is a changed policy for `resume` and `approve`
        // like an edit of the file itself.
        let chain = format!("{}\nextends {}\n", merged.source.sha256, parent.source.sha256);
        merged.source.sha256 = crate::digest::sha256_hex(chain.as_bytes());
        merged.extends = std::iter::once(parent.source.path.clone()).chain(parent.extends).collect();
        let shell = &mut merged.shell;
        for program in child.shell.blocked {
            if !shell.blocked.contains(&program) {
                shell.blocked.push(program);
            }
        }
        shell.allow.append(&mut child.shell.allow);
        if gives(root, "shell", "search_path") {
            shell.search_path = child.shell.search_path;
        }
        if gives(root, "shell", "env") {
            shell.env = child.shell.env;
        }
        for name in child.shell.env_allow {
            if !shell.env_allow.contains(&name) {
                shell.env_allow.push(name);
            }
        }
        // The sandbox: the stricter of those the files give.
        if gives(root, "shell", "sandbox") {
            shell.sandbox = shell.sandbox.max(child.shell.sandbox);
        }
        shell.require_sandbox |= child.shell.require_sandbox;
        // `[secrets.NAME]`: a union; the child wins a name clash.
        merged.secrets.extend(child.secrets);
        // `[mcp.servers.NAME]`: a union; the child wins a name clash.
        merged.mcp.servers.extend(child.mcp.servers);
        // `[models.NAME]`: a union; the child wins a name clash.
        merged.models.extend(child.models);
        let files = &mut merged.files;
        for glob in child.files.deny {
            if !files.deny.contains(&glob) {
                files.deny.push(glob);
            }
        }
        let stricter = |given: bool, parent: &mut u64, child: u64| {
            if given {
                *parent = (*parent).min(child);
            }
        };
        stricter(gives(root, "files", "max_read_bytes"), &mut files.max_read_bytes, child.files.max_read_bytes);
        stricter(gives(root, "files", "max_write_bytes"), &mut files.max_write_bytes, child.files.max_write_bytes);
        let retry = &mut merged.retry;
        for (class, attempts) in child.retry.max_attempts {
            if gives(root, "retry", class.as_str()) {
                let entry = retry.max_attempts.entry(class).or_insert(attempts);
                *entry = (*entry).min(attempts);
            }
        }
        if gives(root, "retry", "cap") {
            retry.cap = retry.cap.min(child.retry.cap);
        }
        // `[retry_backoff]`: the child's keys replace the parent's.
        let (given, child_backoff) = (|key| gives(root, "retry_backoff", key), child.retry.backoff);
        retry.backoff = retry.backoff.with_all(&crate::model::BackoffOverride {
            initial_ms: given("initial_ms").then_some(child_backoff.initial_ms),
            max_ms: given("max_ms").then_some(child_backoff.max_ms),
            multiplier: given("multiplier").then_some(child_backoff.multiplier),
            jitter: given("jitter").then_some(child_backoff.jitter),
        });
        let (budget, given) = (&mut merged.budget, &child.budget);
        stricter(gives(root, "budget", "max_steps"), &mut budget.max_steps, given.max_steps);
        stricter(gives(root, "budget", "max_tool_calls"), &mut budget.max_tool_calls, given.max_tool_calls);
        let consecutive = gives(root, "budget", "max_consecutive_failures");
        stricter(consecutive, &mut budget.max_consecutive_failures, given.max_consecutive_failures);
        stricter(gives(root, "budget", "step_timeout_secs"), &mut budget.step_timeout_secs, given.step_timeout_secs);
        stricter(gives(root, "budget", "max_output_bytes"), &mut budget.max_output_bytes, given.max_output_bytes);
        budget.max_run_secs = match (budget.max_run_secs, given.max_run_secs) {
            (Some(parent), Some(child)) => Some(parent.min(child)),
            (parent, child) => parent.or(child),
        };
        // `[http]`: rules add up (the parent's first), `deny` adds up and
        // wins, the limits take the stricter value.
        let http = &mut merged.http;
        http.allow.append(&mut child.http.allow);
        for pattern in child.http.deny {
            if !http.deny.contains(&pattern) {
                http.deny.push(pattern);
            }
        }
        let max_response = gives(root, "http", "max_response_bytes");
        stricter(max_response, &mut http.max_response_bytes, child.http.max_response_bytes);
        stricter(gives(root, "http", "timeout_secs"), &mut http.timeout_secs, child.http.timeout_secs);
        // `http.proxy`: the child's where it names one, else the parent's.
        if child.http.proxy.is_some() {
            http.proxy = child.http.proxy;
        }
        self.diagnostics.push(merged_note(&merged, root));
        Some(merged)
    }

    /// `duplicate-rule-id` for each child rule of `[[SECTION.allow]]` whose
    /// id a parent rule of the same section has.
    fn duplicate_rules(
        &self,
        section: &str,
        parent: &[(&str, Option<&str>)],
        child: &[&str],
        root: &Node,
    ) -> Vec<Diagnostic> {
        let items = root.get(section).and_then(|table| table.get("allow")).and_then(Node::as_array).unwrap_or(&[]);
        child
            .iter()
            .zip(items)
            .filter_map(|(name, item)| {
                let (_, origin) = parent.iter().find(|(first, _)| first == name)?;
                let span = item.get("id").map_or(item.span, |id| id.span);
                let here = self.sources.location(span);
                let there = origin.unwrap_or("the parent policy");
                Some(
                    Diagnostic::error(
                        "duplicate-rule-id",
                        format!("{section} rule id `{name}` is given in `{there}` and in `{here}`"),
                    )
                    .with_span(span)
                    .with_label("also a rule of the extended policy")
                    .with_help("rules add up across `extends`: give this rule another id"),
                )
            })
            .collect()
    }
}

/// The note `planrun check` shows for a policy that extends another: the
/// chain and each merged rule with where it came from.
fn merged_note(policy: &Policy, root: &Node) -> Diagnostic {
    let rules: Vec<String> = policy
        .shell
        .allow
        .iter()
        .map(|rule| format!("rule {} ({})", rule.name, rule.origin.as_deref().unwrap_or("built in")))
        .collect();
    let mut note = Diagnostic::note(
        "policy-extends",
        format!(
            "policy `{}` extends {}",
            policy.name,
            policy.extends.iter().map(|path| format!("`{path}`")).collect::<Vec<_>>().join(" → ")
        ),
    )
    .with_help(format!("merged rules: {}", if rules.is_empty() { "none".to_string() } else { rules.join(", ") }));
    if let Some(node) = root.get("extends") {
        note = note
            .with_span(node.span)
            .with_label("rules, blocked programs and denied paths add up; limits take the stricter value");
    }
    note
}
