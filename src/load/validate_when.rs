//! A step's `when`: one test (`value` and exactly one comparison), or
//! `all = [ … ]` / `any = [ … ]` of tests (one level: an item is a test with
//! its own `value`), then `otherwise` and, for `otherwise = "fail"`, the
//! `message` the run fails with.

use crate::diag::Diagnostic;
use crate::load::keys::{WHEN, WHEN_TEST};
use crate::load::node::Node;
use crate::load::table::{TableReader, compile_regex, error_count};
use crate::load::validate_step::ActionBuilder;
use crate::model::{Bound, Check, Condition, ConditionTest, Test, WhenFalse};

/// The comparison keys of a test; exactly one per test.
const COMPARISONS: [&str; 9] = ["equals", "not_equals", "contains", "matches", "lt", "le", "gt", "ge", "exists"];

impl ActionBuilder<'_, '_, '_> {
    /// `when = { value = "…", <comparison> = …, otherwise = …, message = "…" }`,
    /// or `when = { all | any = [ { value = "…", <comparison> = … }, … ], … }`.
    pub(super) fn when(&mut self) -> Option<Condition> {
        let node = self.reader.get("when")?;
        let errors_before = error_count(self.diagnostics);
        let mut reader = TableReader::new(node, "`when`", " in `when`", WHEN.keys, self.diagnostics)?;
        let lists = [("all", reader.array("all", self.diagnostics)), ("any", reader.array("any", self.diagnostics))];
        let listed: Vec<&str> = ["all", "any"].into_iter().filter(|key| reader.has(key)).collect();
        let check = match listed.as_slice() {
            [] => self.test(&mut reader, node, "`when`").map(Check::One),
            [list] => {
                if let Some(beside) = ["value"].iter().chain(COMPARISONS.iter()).find(|key| reader.has(key)) {
                    self.diagnostics.push(
                        Diagnostic::error("invalid-value", format!("`when` has both `{list}` and `{beside}`"))
                            .with_span(reader.key_span(beside).unwrap_or(node.span))
                            .with_label(format!("each test of `{list}` has its own `value` and comparison"))
                            .with_help(format!("move `{beside}` into an item of `{list}`")),
                    );
                }
                let items = lists.iter().find(|(key, _)| key == list).and_then(|(_, items)| *items);
                let tests = items.and_then(|items| self.tests(&mut reader, list, items));
                tests.map(|tests| if *list == "all" { Check::All { all: tests } } else { Check::Any { any: tests } })
            }
            _ => {
                self.diagnostics.push(
                    Diagnostic::error("invalid-value", "`when` has both `all` and `any`")
                        .with_span(reader.key_span("any").unwrap_or(node.span))
                        .with_label("one level only: `all` or `any`")
                        .with_help("split the condition over two steps, or write it as one list"),
                );
                None
            }
        };
        let otherwise = reader
            .choice(
                "otherwise",
                "`otherwise`",
                &[
                    ("skip", WhenFalse::Skip),
                    ("already_satisfied", WhenFalse::AlreadySatisfied),
                    ("fail", WhenFalse::Fail),
                ],
                self.diagnostics,
            )
            .map(|otherwise| otherwise.unwrap_or(WhenFalse::Skip));
        let message = reader.string("message", self.diagnostics).map(|(_, message)| message);
        let message_span = reader.key_span("message");
        reader.finish(self.diagnostics);
        let message = match (otherwise, message) {
            (Some(WhenFalse::Fail), None) => {
                self.diagnostics.push(
                    Diagnostic::error("missing-key", "missing key `message` in `when`")
                        .with_span(node.span)
                        .with_label("`otherwise = \"fail\"` needs a `message`")
                        .with_help("say why the run fails, e.g. `message = \"the folder is over the limit\"`"),
                );
                None
            }
            (Some(WhenFalse::Fail), Some(message)) => self.template(message, "`when.message`"),
            (Some(_), Some(_)) => {
                self.diagnostics.push(
                    Diagnostic::error("invalid-value", "`message` in `when` without `otherwise = \"fail\"`")
                        .with_span(message_span.unwrap_or(node.span))
                        .with_label("only a failing condition has a message")
                        .with_help("add `otherwise = \"fail\"`, or remove `message`"),
                );
                None
            }
            (_, _) => None,
        };
        if error_count(self.diagnostics) > errors_before {
            return None;
        }
        Some(Condition { check: check?, otherwise: otherwise?, message })
    }

    /// The items of `all` or `any`: a non-empty list of tests.
    fn tests(&mut self, reader: &mut TableReader<'_>, list: &str, items: &[Node]) -> Option<Vec<Test>> {
        if items.is_empty() {
            self.diagnostics.push(
                Diagnostic::error("invalid-value", format!("`when.{list}` is empty"))
                    .with_span(reader.key_span(list).unwrap_or_default())
                    .with_label("list at least one test"),
            );
            return None;
        }
        let mut tests = Vec::new();
        for (index, item) in items.iter().enumerate() {
            let what = format!("`when.{list}[{index}]`");
            let Some(mut item_reader) =
                TableReader::new(item, &what, format!(" in {what}"), WHEN_TEST.keys, self.diagnostics)
            else {
                continue;
            };
            let test = self.test(&mut item_reader, item, &what);
            item_reader.finish(self.diagnostics);
            tests.extend(test);
        }
        (tests.len() == items.len()).then_some(tests)
    }

    /// A numeric bound: a number, or a template (an input, a step's
    /// output) read as a number when the test runs. A template with no
    /// reference must be a number already.
    fn bound(&mut self, reader: &mut TableReader<'_>, key: &str, what: &str) -> Option<Bound> {
        let node = reader.get(key)?;
        let Some(text) = node.as_str() else {
            return reader.number(key, self.diagnostics).map(|(bound, _)| Bound::Number(bound));
        };
        let template = self.template(node, &format!("{}.{key}`", what.trim_end_matches('`')))?;
        if template.is_literal() && text.trim().parse::<f64>().is_err() {
            self.diagnostics.push(
                Diagnostic::error("wrong-type", format!("`{key}` in {what} is {text:?}, not a number"))
                    .with_span(node.span)
                    .with_label("expected a number or a template such as `{{ inputs.limit }}`"),
            );
            return None;
        }
        Some(Bound::Template(template))
    }

    /// One test of `reader`: `value` and exactly one comparison.
    fn test(&mut self, reader: &mut TableReader<'_>, node: &Node, what: &str) -> Option<Test> {
        let value = reader.required_string("value", self.diagnostics).map(|(_, value)| value);
        let present: Vec<&str> = COMPARISONS.into_iter().filter(|key| reader.has(key)).collect();
        let mut test = None;
        for key in COMPARISONS {
            let parsed = match key {
                "lt" | "le" | "gt" | "ge" => self.bound(reader, key, what).map(|bound| match key {
                    "lt" => ConditionTest::Lt(bound),
                    "le" => ConditionTest::Le(bound),
                    "gt" => ConditionTest::Gt(bound),
                    _ => ConditionTest::Ge(bound),
                }),
                "exists" => reader.bool(key, self.diagnostics).map(ConditionTest::Exists),
                _ => reader.string(key, self.diagnostics).and_then(|(text, text_node)| match key {
                    "equals" => Some(ConditionTest::Equals(text.to_string())),
                    "not_equals" => Some(ConditionTest::NotEquals(text.to_string())),
                    "contains" => Some(ConditionTest::Contains(text.to_string())),
                    _ => compile_regex(text, false, text_node, self.diagnostics).map(ConditionTest::Matches),
                }),
            };
            test = test.or(parsed);
        }
        if present.len() != 1 {
            self.diagnostics.push(
                Diagnostic::error("invalid-value", format!("{what} needs exactly one comparison"))
                    .with_span(present.get(1).and_then(|key| reader.key_span(key)).unwrap_or(node.span))
                    .with_label(format!("found {}", present.len()))
                    .with_help(format!(
                        "use one of {}",
                        COMPARISONS.iter().map(|key| format!("`{key}`")).collect::<Vec<_>>().join(", ")
                    )),
            );
            return None;
        }
        let value = self.template(value?, &format!("{}.value`", what.trim_end_matches('`')))?;
        Some(Test { value, test: test? })
    }
}
