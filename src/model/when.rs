//! A step's `when`: one test of a rendered value, or `all`/`any` of several
//! (one level: the items of `all` and `any` are tests, never lists), and what
//! a false condition means ([`WhenFalse`]).

use regex::Regex;
use serde::{Serialize, Serializer};

use crate::model::WhenFalse;
use crate::template::{RenderContext, Template};

fn regex_text<S: Serializer>(regex: &Regex, serializer: S) -> Result<S::Ok, S::Error> {
    serializer.serialize_str(regex.as_str())
}

/// A step's `when`: the step runs only when its check holds.
#[derive(Debug, Clone, Serialize)]
pub struct Condition {
    #[serde(flatten)]
    pub check: Check,
    /// What a false condition means.
    pub otherwise: WhenFalse,
    /// With `otherwise = "fail"`: the run's error (a template).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub message: Option<Template>,
}

/// The tests of a condition: one, all of several, or any of several.
#[derive(Debug, Clone, Serialize)]
#[serde(untagged)]
pub enum Check {
    One(Test),
    All { all: Vec<Test> },
    Any { any: Vec<Test> },
}

/// One test: `value` (rendered) passes `test`.
#[derive(Debug, Clone, Serialize)]
pub struct Test {
    pub value: Template,
    #[serde(flatten)]
    pub test: ConditionTest,
}

/// The comparison of a test.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ConditionTest {
    Equals(String),
    NotEquals(String),
    Contains(String),
    #[serde(serialize_with = "regex_text")]
    Matches(Regex),
    /// The value, read as a number, is less than this.
    Lt(Bound),
    Le(Bound),
    Gt(Bound),
    Ge(Bound),
    /// Whether the value renders without error and is not blank.
    Exists(bool),
}

/// The bound of a numeric test: a number, or a template (an input, a
/// step's output) whose rendered text must read as one when the test runs.
#[derive(Debug, Clone, Serialize)]
#[serde(untagged)]
pub enum Bound {
    Number(f64),
    Template(Template),
}

impl Bound {
    /// The bound as a number; a template is rendered first, and a text
    /// that is not a finite number is an error (a `template_error`).
    pub fn number(&self, context: &dyn RenderContext) -> Result<f64, String> {
        match self {
            Bound::Number(number) => Ok(*number),
            Bound::Template(template) => {
                let text = template
                    .render(context)
                    .map_err(|error| format!("`when` bound `{}` could not be resolved: {error}", template.source()))?;
                match text.trim().parse::<f64>() {
                    Ok(number) if number.is_finite() => Ok(number),
                    _ => Err(format!("`when` bound `{}` is {text:?}, not a number", template.source())),
                }
            }
        }
    }
}

impl std::fmt::Display for Bound {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Bound::Number(number) => write!(f, "{number}"),
            Bound::Template(template) => f.write_str(template.source()),
        }
    }
}

/// How a condition came out: whether it holds, the value(s) it tested and
/// the test(s), for the `condition_evaluated` event.
#[derive(Debug, Clone, PartialEq)]
pub struct Evaluation {
    pub holds: bool,
    pub value: String,
    pub test: String,
}

impl ConditionTest {
    /// Whether `value` passes; a numeric test on a value that is not a
    /// number is an error (a `template_error` of the step).
    pub fn holds(&self, value: &str, context: &dyn RenderContext) -> Result<bool, String> {
        let number = |bound: &Bound| match value.trim().parse::<f64>() {
            Ok(number) if number.is_finite() => Ok((number, bound.number(context)?)),
            _ => Err(format!("`when` value {value:?} is not a number (the test is `{}`)", self.describe())),
        };
        Ok(match self {
            ConditionTest::Equals(expected) => value == expected,
            ConditionTest::NotEquals(expected) => value != expected,
            ConditionTest::Contains(needle) => value.contains(needle.as_str()),
            ConditionTest::Matches(regex) => regex.is_match(value),
            ConditionTest::Lt(bound) => number(bound).map(|(number, bound)| number < bound)?,
            ConditionTest::Le(bound) => number(bound).map(|(number, bound)| number <= bound)?,
            ConditionTest::Gt(bound) => number(bound).map(|(number, bound)| number > bound)?,
            ConditionTest::Ge(bound) => number(bound).map(|(number, bound)| number >= bound)?,
            ConditionTest::Exists(expected) => value.trim().is_empty() != *expected,
        })
    }

    /// The bound of a numeric test when it is a template.
    pub fn bound_template(&self) -> Option<&Template> {
        match self {
            ConditionTest::Lt(Bound::Template(template))
            | ConditionTest::Le(Bound::Template(template))
            | ConditionTest::Gt(Bound::Template(template))
            | ConditionTest::Ge(Bound::Template(template)) => Some(template),
            _ => None,
        }
    }

    /// `equals "closed"`, for messages.
    pub fn describe(&self) -> String {
        match self {
            ConditionTest::Equals(expected) => format!("equals {expected:?}"),
            ConditionTest::NotEquals(expected) => format!("does not equal {expected:?}"),
            ConditionTest::Contains(needle) => format!("contains {needle:?}"),
            ConditionTest::Matches(regex) => format!("matches /{}/", regex.as_str()),
            ConditionTest::Lt(bound) => format!("is less than {bound}"),
            ConditionTest::Le(bound) => format!("is at most {bound}"),
            ConditionTest::Gt(bound) => format!("is greater than {bound}"),
            ConditionTest::Ge(bound) => format!("is at least {bound}"),
            ConditionTest::Exists(true) => "exists".to_string(),
            ConditionTest::Exists(false) => "does not exist".to_string(),
        }
    }
}

impl Test {
    /// Whether the test holds, with the rendered value. A reference that
    /// cannot be resolved makes `exists` false (and `exists = false` true);
    /// for any other test it is an error.
    pub fn evaluate(&self, context: &dyn RenderContext) -> Result<(bool, String), String> {
        match (self.value.render(context), &self.test) {
            (Ok(value), test) => test.holds(&value, context).map(|holds| (holds, value)),
            (Err(_), ConditionTest::Exists(expected)) => Ok((!*expected, String::new())),
            (Err(error), _) => Err(format!("`when` could not be resolved: {error}")),
        }
    }
}

impl Condition {
    /// The tests of the condition, in order.
    pub fn tests(&self) -> &[Test] {
        match &self.check {
            Check::One(test) => std::slice::from_ref(test),
            Check::All { all } => all,
            Check::Any { any } => any,
        }
    }

    /// Every template of the condition: each test's value and templated
    /// bound, then `message`.
    pub fn templates(&self) -> impl Iterator<Item = &Template> {
        self.tests()
            .iter()
            .flat_map(|test| std::iter::once(&test.value).chain(test.test.bound_template()))
            .chain(self.message.as_ref())
    }

    /// Evaluates the tests in order; `all` stops at the first false one,
    /// `any` at the first true one. An error is a `template_error`.
    pub fn evaluate(&self, context: &dyn RenderContext) -> Result<Evaluation, String> {
        let (any, tests) = match &self.check {
            Check::One(test) => {
                let (holds, value) = test.evaluate(context)?;
                return Ok(Evaluation { holds, value, test: test.test.describe() });
            }
            Check::All { all } => (false, all),
            Check::Any { any } => (true, any),
        };
        let mut values = Vec::new();
        let mut holds = !any;
        for test in tests {
            let (passed, value) = test.evaluate(context)?;
            values.push(value);
            if passed == any {
                holds = any;
                break;
            }
        }
        Ok(Evaluation {
            holds,
            value: values.join("; "),
            test: self.describe(|template| template.source().to_string()),
        })
    }

    /// `{{ … }} equals "x"`, or `all of (…; …)`, for messages; `show`
    /// writes a tested value.
    pub fn describe(&self, show: impl Fn(&Template) -> String) -> String {
        let one = |test: &Test| format!("{} {}", show(&test.value), test.test.describe());
        match &self.check {
            Check::One(test) => one(test),
            Check::All { all } => format!("all of ({})", all.iter().map(one).collect::<Vec<_>>().join("; ")),
            Check::Any { any } => format!("any of ({})", any.iter().map(one).collect::<Vec<_>>().join("; ")),
        }
    }
}
