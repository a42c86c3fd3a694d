//! The layering rule of `src/`, checked on every test run.
//!
//! Every top-level module of `src/` has a layer in [`LAYERS`]; a module may
//! name (in a `use` or in code, through `crate::` or `super::`) only modules
//! of a lower layer. That one rule gives what `src/lib.rs` draws: the engine
//! knows no use case and no front end, `ops` knows no front end, `cli` and
//! `server` never import each other, and no two top-level modules import
//! each other. Inside a folder (`src/<a>/<b>.rs`), the modules may not
//! import each other in a cycle. Outside `src/store/`, no statement both
//! names a run folder (`runs`, `bridge`, `.planrun`) and
//! calls the file system to change files: run records go through the store.
//!
//! A new top-level module needs a row in [`LAYERS`] (and in the map of
//! `src/lib.rs`); the test says so. Comments and string literals are read
//! past, so a doc comment that names a module is no import.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::Path;

/// Layer of each top-level module, lowest first. A module may import only
/// modules whose layer is strictly lower. `cli` sits above `server` only to
/// start it (`planrun serve`); the service never reaches the command line.
/// The service's use cases are `ops::service`: below `server`, their HTTP
/// front end.
const LAYERS: &[(&str, u8)] = &[
    ("diag", 0),
    ("digest", 0),
    ("exit", 0),
    ("fence", 0),
    ("strict_json", 0),
    ("redact", 0),
    ("template", 1),
    ("model", 2),
    ("confine", 3),
    ("policy", 4),
    ("load", 5),
    ("store", 5),
    ("snapshot", 5),
    ("router", 6),
    ("tools", 6),
    ("preview", 7),
    ("runtime", 7),
    ("ops", 8),
    ("server", 9),
    ("cli", 10),
    // The `planrun-sandbox` trampoline (src/bin/): a second front end.
    ("bin", 11),
];

/// Calls that create, change or remove files.
const FS_CALLS: &[&str] = &[
    "OpenOptions",
    "File::create",
    "fs::write",
    "fs::rename",
    "fs::remove_file",
    "fs::remove_dir_all",
    "fs::create_dir",
    "fs::create_dir_all",
    "sync_all",
    "sync_data",
    "write_atomic",
];

/// Names of the run folders, as they appear in code (string literals are
/// read for this check only).
const RUN_FOLDERS: &[&str] =
    &["\"runs\"", "\"runs/", "\"bridge\"", "\"bridge/", "\".planrun\"", "\".planrun/", "runs_root", "records_root"];

#[test]
fn the_source_tree_keeps_its_layers() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let files = source_files(root);
    assert!(files.len() > 50, "read only {} files under src/", files.len());
    let findings = check(&files);
    assert!(findings.is_empty(), "layering: {} finding(s)\n{}", findings.len(), findings.join("\n"));
}

#[test]
fn an_import_up_the_layers_is_found() {
    let files = vec![
        file("src/model/plan.rs", "use crate::runtime::Interpreter;\n"),
        file("src/runtime/mod.rs", "pub struct Interpreter;\n"),
        file("src/ops/run.rs", "fn f() { crate::cli::main(); }\n"),
        file("src/cli/mod.rs", "pub fn main() {}\n"),
    ];
    let findings = check(&files);
    assert_eq!(
        findings,
        [
            "import runs up the layers: model (layer 2) -> runtime (layer 7) in src/model/plan.rs",
            "import runs up the layers: ops (layer 8) -> cli (layer 10) in src/ops/run.rs",
        ]
    );
}

#[test]
fn front_ends_may_not_import_each_other_and_a_new_module_needs_a_layer() {
    let files = vec![
        file("src/server/app.rs", "use crate::{cli::output, ops};\n"),
        file("src/cli/output.rs", "// crate::server is named in a comment only\n"),
        file("src/widgets.rs", "pub fn w() {}\n"),
    ];
    let findings = check(&files);
    assert_eq!(
        findings,
        [
            "module `widgets` has no layer: give it one in tests/layering.rs (LAYERS) and in the map of src/lib.rs",
            "import runs up the layers: server (layer 9) -> cli (layer 10) in src/server/app.rs",
        ]
    );
}

#[test]
fn a_cycle_inside_a_folder_is_found_and_super_in_an_inline_module_is_its_file() {
    let files = vec![
        file("src/store/a.rs", "use super::b::B;\npub struct A;\n"),
        file("src/store/b.rs", "use crate::store::a::A;\npub struct B;\n"),
        // `super` inside `mod tests` is the file itself, not its folder.
        file(
            "src/store/c.rs",
            "pub struct C;\n#[cfg(test)]\nmod tests {\n    use super::C;\n    use super::super::d::D;\n}\n",
        ),
        file("src/store/d.rs", "pub struct D;\nfn f() { let _ = \"super::c::C\"; let _ = '\"'; }\n"),
    ];
    let findings = check(&files);
    assert_eq!(findings, ["cycle inside src/store/: a -> b (src/store/a.rs); b -> a (src/store/b.rs)"]);
}

#[test]
fn run_folder_writes_outside_the_store_are_found() {
    let files = vec![
        file("src/ops/clean.rs", "fn f(w: &std::path::Path) { std::fs::remove_dir_all(w.join(\"runs\")).ok(); }\n"),
        file("src/store/run_dir.rs", "fn f(w: &std::path::Path) { std::fs::remove_dir_all(w.join(\"runs\")).ok(); }\n"),
    ];
    assert_eq!(check(&files), ["run-folder I/O outside the store: src/ops/clean.rs"]);
}

pub(crate) struct SourceFile {
    /// Path from the repository root, with `/`.
    pub(crate) path: String,
    pub(crate) text: String,
}

fn file(path: &str, text: &str) -> SourceFile {
    SourceFile { path: path.to_owned(), text: text.to_owned() }
}

pub(crate) fn source_files(root: &Path) -> Vec<SourceFile> {
    let mut out = Vec::new();
    let mut stack = vec![root.join("src")];
    while let Some(dir) = stack.pop() {
        let entries = fs::read_dir(&dir).unwrap_or_else(|e| panic!("read {}: {e}", dir.display()));
        for entry in entries {
            let path = entry.expect("a directory entry").path();
            if path.is_dir() {
                stack.push(path);
            } else if path.extension().is_some_and(|e| e == "rs") {
                let text = fs::read_to_string(&path).unwrap_or_else(|e| panic!("read {}: {e}", path.display()));
                let rel = path.strip_prefix(root).unwrap_or(&path);
                out.push(SourceFile { path: rel.to_string_lossy().replace('\\', "/"), text });
            }
        }
    }
    out.sort_by(|a, b| a.path.cmp(&b.path));
    out
}

/// `src/a/b/c.rs` → `[a, b, c]`; `src/a/mod.rs` → `[a]`; `src/lib.rs` → `[lib]`.
fn module_of(path: &str) -> Vec<String> {
    let inner = path.trim_start_matches("src/").trim_end_matches(".rs");
    let mut parts: Vec<String> = inner.split('/').map(str::to_owned).collect();
    if parts.len() > 1 && parts.last().is_some_and(|p| p == "mod") {
        parts.pop();
    }
    parts
}

/// The findings for a set of source files, sorted: modules without a layer,
/// imports up the layers, cycles inside a folder, run-folder I/O.
fn check(files: &[SourceFile]) -> Vec<String> {
    let layer: BTreeMap<&str, u8> = LAYERS.iter().copied().collect();
    let mut tops = BTreeSet::new();
    let mut children: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for f in files {
        let m = module_of(&f.path);
        if m[0] == "lib" || m[0] == "main" {
            continue;
        }
        tops.insert(m[0].clone());
        if m.len() >= 2 {
            children.entry(m[0].clone()).or_default().insert(m[1].clone());
        }
    }
    let mut no_layer = Vec::new();
    let mut upward = BTreeSet::new();
    let mut inner: BTreeMap<String, BTreeMap<String, BTreeMap<String, String>>> = BTreeMap::new();
    let mut io = Vec::new();
    for top in &tops {
        if !layer.contains_key(top.as_str()) {
            no_layer.push(format!(
                "module `{top}` has no layer: give it one in tests/layering.rs (LAYERS) and in the map of src/lib.rs"
            ));
        }
    }
    for f in files {
        let me = module_of(&f.path);
        if me[0] == "lib" || me[0] == "main" {
            continue;
        }
        let code = Code::read(&f.text);
        for path in imported_paths(&code.text, &me) {
            let Some(first) = path.first() else { continue };
            if !tops.contains(first) {
                continue;
            }
            if *first != me[0] {
                if let (Some(&from), Some(&to)) = (layer.get(me[0].as_str()), layer.get(first.as_str()))
                    && to >= from
                {
                    upward.insert(format!(
                        "import runs up the layers: {} (layer {from}) -> {first} (layer {to}) in {}",
                        me[0], f.path
                    ));
                }
            } else if me.len() >= 2 && path.len() >= 2 && path[1] != me[1] {
                let siblings = children.get(first);
                if siblings.is_some_and(|s| s.contains(&path[1])) {
                    inner
                        .entry(me[0].clone())
                        .or_default()
                        .entry(me[1].clone())
                        .or_default()
                        .entry(path[1].clone())
                        .or_insert_with(|| f.path.clone());
                }
            }
        }
        let writes_runs = code.with_strings.split(';').any(|statement| {
            FS_CALLS.iter().any(|c| contains_word(statement, c)) && RUN_FOLDERS.iter().any(|r| statement.contains(r))
        });
        if !f.path.starts_with("src/store/") && writes_runs {
            io.push(format!("run-folder I/O outside the store: {}", f.path));
        }
    }
    let mut cycles = Vec::new();
    for (top, graph) in &inner {
        for cycle in cycles_of(graph) {
            let ties: Vec<String> = cycle
                .iter()
                .flat_map(|a| {
                    cycle.iter().filter_map(move |b| {
                        graph.get(a).and_then(|to| to.get(b)).map(|at| format!("{a} -> {b} ({at})"))
                    })
                })
                .collect();
            cycles.push(format!("cycle inside src/{top}/: {}", ties.join("; ")));
        }
    }
    let mut findings = no_layer;
    findings.extend(upward);
    findings.extend(cycles);
    findings.extend(io);
    findings
}

fn contains_word(text: &str, word: &str) -> bool {
    text.match_indices(word).any(|(at, _)| {
        let before = text[..at].chars().next_back();
        let after = text[at + word.len()..].chars().next();
        let ident = |c: Option<char>| c.is_some_and(|c| c.is_alphanumeric() || c == '_');
        !ident(before) && !ident(after)
    })
}

/// Strongly connected components of more than one module (Tarjan).
fn cycles_of(graph: &BTreeMap<String, BTreeMap<String, String>>) -> Vec<Vec<String>> {
    struct Walk<'g> {
        graph: &'g BTreeMap<String, BTreeMap<String, String>>,
        index: BTreeMap<&'g str, usize>,
        low: BTreeMap<&'g str, usize>,
        stack: Vec<&'g str>,
        on_stack: BTreeSet<&'g str>,
        out: Vec<Vec<String>>,
    }
    impl<'g> Walk<'g> {
        fn visit(&mut self, v: &'g str) {
            let n = self.index.len();
            self.index.insert(v, n);
            self.low.insert(v, n);
            self.stack.push(v);
            self.on_stack.insert(v);
            for w in self.graph.get(v).into_iter().flat_map(|to| to.keys()) {
                if !self.index.contains_key(w.as_str()) {
                    self.visit(w);
                    let lw = self.low[w.as_str()];
                    let lv = self.low.get_mut(v).expect("visited");
                    *lv = (*lv).min(lw);
                } else if self.on_stack.contains(w.as_str()) {
                    let iw = self.index[w.as_str()];
                    let lv = self.low.get_mut(v).expect("visited");
                    *lv = (*lv).min(iw);
                }
            }
            if self.low[v] == self.index[v] {
                let mut component = Vec::new();
                while let Some(w) = self.stack.pop() {
                    self.on_stack.remove(w);
                    component.push(w.to_owned());
                    if w == v {
                        break;
                    }
                }
                if component.len() > 1 {
                    component.sort();
                    self.out.push(component);
                }
            }
        }
    }
    let mut walk = Walk {
        graph,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        on_stack: BTreeSet::new(),
        out: Vec::new(),
    };
    for v in graph.keys() {
        if !walk.index.contains_key(v.as_str()) {
            walk.visit(v);
        }
    }
    walk.out
}

/// Source text with comments removed: `text` also has every string and
/// character literal emptied (for imports), `with_strings` keeps them (for
/// the run-folder names). Inline `mod name {` blocks are marked in
/// `text` as `\u{1}name{` so `super::` can be resolved against them.
struct Code {
    pub(crate) text: String,
    with_strings: String,
}

impl Code {
    fn read(source: &str) -> Code {
        let chars: Vec<char> = source.chars().collect();
        let mut text = String::with_capacity(source.len());
        let mut with_strings = String::with_capacity(source.len());
        let mut i = 0;
        while i < chars.len() {
            let c = chars[i];
            let next = chars.get(i + 1).copied();
            if c == '/' && next == Some('/') {
                while i < chars.len() && chars[i] != '\n' {
                    i += 1;
                }
            } else if c == '/' && next == Some('*') {
                let mut depth = 0;
                while i < chars.len() {
                    if chars[i] == '/' && chars.get(i + 1) == Some(&'*') {
                        depth += 1;
                        i += 2;
                    } else if chars[i] == '*' && chars.get(i + 1) == Some(&'/') {
                        depth -= 1;
                        i += 2;
                        if depth == 0 {
                            break;
                        }
                    } else {
                        i += 1;
                    }
                }
            } else if let Some(end) = raw_string_end(&chars, i) {
                let literal: String = chars[i..end].iter().collect();
                with_strings.push_str(&literal);
                text.push_str("\"\"");
                i = end;
            } else if c == '"' {
                let start = i;
                i += 1;
                while i < chars.len() && chars[i] != '"' {
                    i += if chars[i] == '\\' { 2 } else { 1 };
                }
                i = (i + 1).min(chars.len());
                let literal: String = chars[start..i].iter().collect();
                with_strings.push_str(&literal);
                text.push_str("\"\"");
            } else if c == '\''
                && let Some(end) = char_literal_end(&chars, i)
            {
                text.push_str("' '");
                with_strings.push_str("' '");
                i = end;
            } else {
                text.push(c);
                with_strings.push(c);
                i += 1;
            }
        }
        Code { text, with_strings }
    }
}

/// Where a raw (byte) string starting at `i` ends: `r"…"`, `r#"…"#`, `br"…"`.
fn raw_string_end(chars: &[char], i: usize) -> Option<usize> {
    let mut j = i;
    if chars.get(j) == Some(&'b') {
        j += 1;
    }
    if chars.get(j) != Some(&'r') || (i > 0 && is_ident(chars[i - 1])) {
        return None;
    }
    j += 1;
    let mut hashes = 0;
    while chars.get(j) == Some(&'#') {
        hashes += 1;
        j += 1;
    }
    if chars.get(j) != Some(&'"') {
        return None;
    }
    j += 1;
    while j < chars.len() {
        if chars[j] == '"' && (1..=hashes).all(|k| chars.get(j + k) == Some(&'#')) {
            return Some(j + 1 + hashes);
        }
        j += 1;
    }
    Some(chars.len())
}

/// Where a character literal starting at `i` ends (`'a'`, `'\n'`,
/// `'\u{1F600}'`), or `None` for a lifetime or label.
fn char_literal_end(chars: &[char], i: usize) -> Option<usize> {
    match chars.get(i + 1)? {
        '\\' => {
            let mut j = i + 2;
            while j < chars.len() && chars[j] != '\'' && j < i + 12 {
                j += 1;
            }
            (chars.get(j) == Some(&'\'')).then_some(j + 1)
        }
        _ => (chars.get(i + 2) == Some(&'\'')).then_some(i + 3),
    }
}

fn is_ident(c: char) -> bool {
    c.is_alphanumeric() || c == '_'
}

/// Every module path this file names through `crate::` or `super::`, as
/// absolute paths (`super::` resolved against the file's module and the
/// inline modules open where it stands).
fn imported_paths(text: &str, me: &[String]) -> BTreeSet<Vec<String>> {
    let mut found = BTreeSet::new();
    let chars: Vec<char> = text.chars().collect();
    // Inline modules open at each position: (name, brace depth at its `{`).
    let mut open: Vec<(String, usize)> = Vec::new();
    let mut depth = 0usize;
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        if c == '{' {
            depth += 1;
        } else if c == '}' {
            depth = depth.saturating_sub(1);
            while open.last().is_some_and(|(_, d)| *d > depth) {
                open.pop();
            }
        }
        let word_start = i == 0 || !is_ident(chars[i - 1]);
        if word_start && starts_with(&chars, i, "mod ") {
            let (name, after) = ident_at(&chars, skip_space(&chars, i + 4));
            let brace = skip_space(&chars, after);
            if !name.is_empty() && chars.get(brace) == Some(&'{') {
                open.push((name, depth + 1));
            }
        }
        if word_start && (starts_with(&chars, i, "crate::") || starts_with(&chars, i, "super::")) {
            let mut base: Vec<String> = Vec::new();
            let mut j = i;
            if starts_with(&chars, i, "super::") {
                base = me.to_vec();
                base.extend(open.iter().map(|(n, _)| n.clone()));
                while starts_with(&chars, j, "super::") {
                    base.pop();
                    j += "super::".len();
                }
            } else {
                j += "crate::".len();
            }
            for tail in use_tree(&chars, j) {
                let mut path = base.clone();
                path.extend(tail);
                if !path.is_empty() {
                    found.insert(path);
                }
            }
        }
        i += 1;
    }
    found
}

/// The paths of a use tree starting at `i`: `a::b::C`, `a::{b, c::d}`, `{a, b}`.
fn use_tree(chars: &[char], i: usize) -> Vec<Vec<String>> {
    let mut prefix = Vec::new();
    let mut j = i;
    loop {
        j = skip_space(chars, j);
        if chars.get(j) == Some(&'{') {
            let mut out = Vec::new();
            let mut k = j + 1;
            loop {
                k = skip_space(chars, k);
                match chars.get(k) {
                    None | Some('}') => break,
                    Some(',') => k += 1,
                    _ => {
                        for tail in use_tree(chars, k) {
                            let mut p = prefix.clone();
                            p.extend(tail);
                            out.push(p);
                        }
                        k = end_of_tree(chars, k);
                    }
                }
            }
            return out;
        }
        let (name, after) = ident_at(chars, j);
        if name.is_empty() {
            return if prefix.is_empty() { Vec::new() } else { vec![prefix] };
        }
        prefix.push(name);
        if starts_with(chars, after, "::") {
            j = after + 2;
        } else {
            return vec![prefix];
        }
    }
}

/// Index after one use tree item (up to its `,` or the closing `}` of the
/// group that holds it).
fn end_of_tree(chars: &[char], mut k: usize) -> usize {
    let mut depth = 0;
    while let Some(&c) = chars.get(k) {
        match c {
            '{' => depth += 1,
            '}' if depth == 0 => return k,
            '}' => depth -= 1,
            ',' if depth == 0 => return k,
            ';' => return k,
            _ => {}
        }
        k += 1;
    }
    k
}

fn starts_with(chars: &[char], i: usize, word: &str) -> bool {
    word.chars().enumerate().all(|(k, w)| chars.get(i + k) == Some(&w))
}

fn skip_space(chars: &[char], mut i: usize) -> usize {
    while chars.get(i).is_some_and(|c| c.is_whitespace()) {
        i += 1;
    }
    i
}

fn ident_at(chars: &[char], i: usize) -> (String, usize) {
    let mut j = i;
    while chars.get(j).is_some_and(|&c| is_ident(c)) {
        j += 1;
    }
    (chars[i.min(chars.len())..j].iter().collect(), j)
}
