//! Segments + run context → text.

use serde_json::Value;

use crate::template::{Field, RefTarget, Reference, Segment, Template};

/// What a completed step left for later steps.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct StepOutput {
    pub output_text: String,
    pub output_json: Option<Value>,
    /// The end of a shell step's stderr; empty for the other kinds.
    pub stderr_text: String,
}

/// What rendering may look up.
pub trait RenderContext {
    fn run_id(&self) -> &str;
    /// Output of the most recently completed (`done`) step.
    fn last(&self) -> Option<&StepOutput>;
    /// Output of the latest completed attempt of step `id`.
    fn step(&self, id: &str) -> Option<&StepOutput>;
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
}

impl Template {
    /// Renders the template. Substituted text is inserted verbatim and never
    /// scanned again.
    pub fn render(&self, context: &dyn RenderContext) -> Result<String, TemplateError> {
        let mut out = String::with_capacity(self.source().len());
        for segment in self.segments() {
            match segment {
                Segment::Literal(text) => out.push_str(text),
                Segment::Ref(reference) => out.push_str(&resolve(reference, context)?),
            }
        }
        Ok(out)
    }
}

fn resolve(reference: &Reference, context: &dyn RenderContext) -> Result<String, TemplateError> {
    let expr = || reference.expr.clone();
    let (output, field) = match &reference.target {
        RefTarget::RunId => return Ok(context.run_id().to_string()),
        RefTarget::Last(field) => (context.last().ok_or_else(|| TemplateError::NoLastStep { expr: expr() })?, field),
        RefTarget::Step { id, field } => {
            (context.step(id).ok_or_else(|| TemplateError::StepNotCompleted { expr: expr(), id: id.clone() })?, field)
        }
    };
    match field {
        Field::OutputText => Ok(output.output_text.clone()),
        Field::StderrText => Ok(output.stderr_text.clone()),
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
            Ok(match value {
                Value::String(text) => text.clone(),
                other => other.to_string(),
            })
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
        };
        let text = StepOutput {
            output_text: "{{ run.id }}".to_string(),
            output_json: None,
            stderr_text: "Ran 3 tests\nOK\n".to_string(),
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
