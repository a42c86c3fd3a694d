//! Segments + run context → text.

use serde_json::Value;

use crate::template::{Field, Filter, RefTarget, Reference, Segment, Template};

/// What a step left for later steps.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct StepOutput {
    pub output_text: String,
    pub output_json: Option<Value>,
    /// The end of a shell step's stderr; empty for the other kinds.
    pub stderr_text: String,
    /// How the step's latest attempt ended.
    pub status: StepState,
    /// A shell step's exit code, when its program exited.
    pub exit_code: Option<i32>,
}

/// How a step's latest attempt ended, as `{{ steps.<id>.status }}` reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum StepState {
    #[default]
    Done,
    Failed,
    Skipped,
}

impl StepState {
    pub fn as_str(self) -> &'static str {
        match self {
            StepState::Done => "done",
            StepState::Failed => "failed",
            StepState::Skipped => "skipped",
        }
    }
}

/// What rendering may look up.
pub trait RenderContext {
    fn run_id(&self) -> &str;
    /// Output of the most recently completed (`done`) step.
    fn last(&self) -> Option<&StepOutput>;
    /// Output of the latest completed attempt of step `id`.
    fn step(&self, id: &str) -> Option<&StepOutput>;
    /// The goal the run was started with, when it was started by goal.
    fn goal(&self) -> Option<&str> {
        None
    }
    /// The value of a declared input (given or defaulted).
    fn input(&self, _name: &str) -> Option<&Value> {
        None
    }
    /// The value of a declared secret, when the run was given it.
    fn secret(&self, _name: &str) -> Option<&str> {
        None
    }
}

/// A reference that could not be resolved at run time.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TemplateError {
    #[error("`{{{{ {expr} }}}}`: no step has completed yet")]
    NoLastStep { expr: String },
    #[error("`{{{{ {expr} }}}}`: step `{id}` has not completed in this run")]
    StepNotCompleted { expr: String, id: String },
    #[error("`{{{{ {expr} }}}}`: the step produced no structured output")]
    NoJsonOutput { expr: String },
    #[error("`{{{{ {expr} }}}}`: the structured output has no field `{field}`")]
    MissingJsonField { expr: String, field: String },
    #[error("`{{{{ {expr} }}}}`: the run was given no input `{name}`")]
    MissingInput { expr: String, name: String },
    #[error("`{{{{ {expr} }}}}`: the run was given no secret `{name}`")]
    MissingSecret { expr: String, name: String },
    #[error("`{{{{ {expr} }}}}`: the step's program did not exit with a code")]
    NoExitCode { expr: String },
}

/// A resolved reference before it becomes text: structured values keep
/// their shape until a filter or the final rendering decides.
enum Resolved {
    Text(String),
    Json(Value),
}

impl Resolved {
    fn into_text(self) -> String {
        match self {
            Resolved::Text(text) => text,
            Resolved::Json(Value::String(text)) => text,
            Resolved::Json(other) => other.to_string(),
        }
    }
}

impl Template {
    /// Renders the template. Substituted text is inserted verbatim and never
    /// scanned again.
    pub fn render(&self, context: &dyn RenderContext) -> Result<String, TemplateError> {
        let mut out = String::with_capacity(self.source().len());
        for segment in self.segments() {
            match segment {
                Segment::Literal(text) => out.push_str(text),
                Segment::Ref(reference) => out.push_str(&render_reference(reference, context)?),
            }
        }
        Ok(out)
    }

    /// Renders the template with each substituted value passed through
    /// `escape` (an `http` step's URL percent-encodes them); literal text
    /// is kept as written.
    pub fn render_escaped(
        &self,
        context: &dyn RenderContext,
        escape: impl Fn(&str) -> String,
    ) -> Result<String, TemplateError> {
        let mut out = String::with_capacity(self.source().len());
        for segment in self.segments() {
            match segment {
                Segment::Literal(text) => out.push_str(text),
                Segment::Ref(reference) => out.push_str(&escape(&render_reference(reference, context)?)),
            }
        }
        Ok(out)
    }

    /// The value of a template that is exactly one reference, keeping a
    /// structured value's shape (`json = { items = "{{ steps.a.output_json.items }}" }`
    /// puts the list itself, not its text); any other template renders to
    /// a JSON string.
    pub fn render_value(&self, context: &dyn RenderContext) -> Result<Value, TemplateError> {
        match self.segments() {
            [Segment::Ref(reference)] if reference.filters.is_empty() => Ok(match resolve(reference, context)? {
                Resolved::Text(text) => Value::String(text),
                Resolved::Json(value) => value,
            }),
            _ => Ok(Value::String(self.render(context)?)),
        }
    }
}

fn render_reference(reference: &Reference, context: &dyn RenderContext) -> Result<String, TemplateError> {
    let mut value = match resolve(reference, context) {
        Ok(value) => Some(value),
        Err(error) if reference.filters.iter().any(|filter| matches!(filter, Filter::Default(_))) => {
            // Only a missing value may be defaulted; a secret never is.
            match error {
                TemplateError::MissingSecret { .. } => return Err(error),
                _ => None,
            }
        }
        Err(error) => return Err(error),
    };
    for filter in &reference.filters {
        value = match (filter, value.take()) {
            (Filter::Default(text), None) => Some(Resolved::Text(text.clone())),
            (Filter::Default(text), Some(found)) => {
                let found = found.into_text();
                Some(Resolved::Text(if found.is_empty() { text.clone() } else { found }))
            }
            // A filter before `default` sees nothing to work on: it passes
            // the absence on.
            (_, None) => None,
            (Filter::Json, Some(Resolved::Text(text))) => Some(Resolved::Text(Value::String(text).to_string())),
            (Filter::Json, Some(Resolved::Json(value))) => Some(Resolved::Text(value.to_string())),
            (Filter::Trim, Some(found)) => Some(Resolved::Text(found.into_text().trim().to_string())),
            (Filter::FirstLine, Some(found)) => {
                Some(Resolved::Text(found.into_text().lines().next().unwrap_or_default().to_string()))
            }
            (Filter::Word(index), Some(found)) => Some(Resolved::Text(
                found.into_text().split_whitespace().nth(index - 1).unwrap_or_default().to_string(),
            )),
            (Filter::Lines(count), Some(found)) => {
                Some(Resolved::Text(found.into_text().lines().take(*count).collect::<Vec<_>>().join("\n")))
            }
        };
    }
    Ok(value.map(Resolved::into_text).unwrap_or_default())
}

fn resolve(reference: &Reference, context: &dyn RenderContext) -> Result<Resolved, TemplateError> {
    let expr = || reference.expr.clone();
    let (output, field) = match &reference.target {
        RefTarget::RunId => return Ok(Resolved::Text(context.run_id().to_string())),
        RefTarget::RunGoal => return Ok(Resolved::Text(context.goal().unwrap_or_default().to_string())),
        RefTarget::Input(name) => {
            return context
                .input(name)
                .map(|value| Resolved::Json(value.clone()))
                .ok_or_else(|| TemplateError::MissingInput { expr: expr(), name: name.clone() });
        }
        RefTarget::Secret(name) => {
            return context
                .secret(name)
                .map(|value| Resolved::Text(value.to_string()))
                .ok_or_else(|| TemplateError::MissingSecret { expr: expr(), name: name.clone() });
        }
        RefTarget::Last(field) => (context.last().ok_or_else(|| TemplateError::NoLastStep { expr: expr() })?, field),
        RefTarget::Step { id, field } => {
            (context.step(id).ok_or_else(|| TemplateError::StepNotCompleted { expr: expr(), id: id.clone() })?, field)
        }
    };
    match field {
        Field::OutputText => Ok(Resolved::Text(output.output_text.clone())),
        Field::StderrText => Ok(Resolved::Text(output.stderr_text.clone())),
        Field::Status => Ok(Resolved::Text(output.status.as_str().to_string())),
        Field::ExitCode => output
            .exit_code
            .map(|code| Resolved::Json(Value::from(code)))
            .ok_or_else(|| TemplateError::NoExitCode { expr: expr() }),
        Field::OutputJson(path) => {
            let mut value = output.output_json.as_ref().ok_or_else(|| TemplateError::NoJsonOutput { expr: expr() })?;
            for part in path {
                let next = match value {
                    Value::Object(map) => map.get(part),
                    Value::Array(items) => part.parse::<usize>().ok().and_then(|index| items.get(index)),
                    _ => None,
                };
                value = next.ok_or_else(|| TemplateError::MissingJsonField { expr: expr(), field: part.clone() })?;
            }
            Ok(Resolved::Json(value.clone()))
        }
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;

    struct Context {
        outputs: BTreeMap<String, StepOutput>,
        last: Option<StepOutput>,
    }

    impl RenderContext for Context {
        fn run_id(&self) -> &str {
            "run-1"
        }
        fn last(&self) -> Option<&StepOutput> {
            self.last.as_ref()
        }
        fn step(&self, id: &str) -> Option<&StepOutput> {
            self.outputs.get(id)
        }
    }

    fn context() -> Context {
        let json = StepOutput {
            output_text: "{}".to_string(),
            output_json: Some(serde_json::json!({"ticket": {"status": "open", "n": 3}})),
            stderr_text: String::new(),
            ..StepOutput::default()
        };
        let text = StepOutput {
            output_text: "{{ run.id }}".to_string(),
            output_json: None,
            stderr_text: "Ran 3 tests\nOK\n".to_string(),
            status: StepState::Failed,
            exit_code: Some(1),
        };
        Context {
            outputs: BTreeMap::from([("a".to_string(), json), ("b".to_string(), text.clone())]),
            last: Some(text),
        }
    }

    #[test]
    fn substituted_text_is_never_re_expanded() {
        let template = Template::parse("[{{ last.output_text }}] {{ run.id }}").expect("valid");
        assert_eq!(template.render(&context()).expect("renders"), "[{{ run.id }}] run-1");
    }

    #[test]
    fn stderr_text_renders_what_the_step_wrote_to_stderr() {
        let template = Template::parse("{{ steps.b.stderr_text }}|{{ last.stderr_text }}|{{ steps.a.stderr_text }}")
            .expect("valid");
        assert_eq!(template.render(&context()).expect("renders"), "Ran 3 tests\nOK\n|Ran 3 tests\nOK\n|");
    }

    #[test]
    fn json_fields_render_strings_bare_and_other_values_as_json() {
        let template = Template::parse("{{ steps.a.output_json.ticket.status }}/{{ steps.a.output_json.ticket.n }}")
            .expect("valid");
        assert_eq!(template.render(&context()).expect("renders"), "open/3");
    }

    #[test]
    fn filters_build_data_safely() {
        let cases = [
            ("{{ steps.b.stderr_text | json }}", "\"Ran 3 tests\\nOK\\n\""),
            ("{{ steps.a.output_json.ticket | json }}", "{\"status\":\"open\",\"n\":3}"),
            ("{{ steps.a.output_json.ticket.n | json }}", "3"),
            ("{{ steps.b.stderr_text | trim }}", "Ran 3 tests\nOK"),
            ("{{ steps.b.stderr_text | first_line }}", "Ran 3 tests"),
            ("{{ steps.b.stderr_text | word(2) }}:{{ steps.b.stderr_text | word(9) }}", "3:"),
            ("{{ steps.b.stderr_text | lines(1) | json }}", "\"Ran 3 tests\""),
            ("{{ steps.zzz.output_text | default(\"none\") }}", "none"),
            ("{{ steps.a.stderr_text | default('empty') }}", "empty"),
            ("{{ steps.a.output_json.nope | trim | default(\"-\") }}", "-"),
            ("{{ steps.b.status }}:{{ steps.b.exit_code }}:{{ steps.a.status }}", "failed:1:done"),
        ];
        for (text, expected) in cases {
            let rendered = Template::parse(text).expect("valid").render(&context()).expect(text);
            assert_eq!(rendered, expected, "{text}");
        }
        let error = Template::parse("{{ steps.a.exit_code }}").expect("valid").render(&context()).expect_err("no code");
        assert!(matches!(error, TemplateError::NoExitCode { .. }));
        let whole = Template::parse("{{ steps.a.output_json.ticket }}").expect("valid");
        assert_eq!(whole.render_value(&context()).expect("value"), serde_json::json!({"status": "open", "n": 3}));
    }

    #[test]
    fn unresolvable_references_fail() {
        let cases = [
            ("{{ steps.zzz.output_text }}", "step `zzz` has not completed"),
            ("{{ steps.b.output_json.x }}", "no structured output"),
            ("{{ steps.a.output_json.nope }}", "no field `nope`"),
        ];
        for (text, expected) in cases {
            let error = Template::parse(text).expect("valid").render(&context()).expect_err(text);
            assert!(error.to_string().contains(expected), "{error}");
        }
        let empty = Context { outputs: BTreeMap::new(), last: None };
        let error = Template::parse("{{ last.output_text }}").expect("valid").render(&empty).expect_err("no last");
        assert!(matches!(error, TemplateError::NoLastStep { .. }));
    }
}
