//! Text → segments.

use serde::{Serialize, Serializer};

/// A parsed template: literal text and references, in order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Template {
    source: String,
    segments: Vec<Segment>,
}

/// One piece of a template.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Segment {
    Literal(String),
    Ref(Reference),
}

/// A `{{ … }}` reference.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reference {
    /// The expression as written between the braces, trimmed.
    pub expr: String,
    /// Byte range of the whole `{{ … }}` in the template's source text.
    pub start: usize,
    pub end: usize,
    pub target: RefTarget,
}

/// What a reference points at.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RefTarget {
    /// The most recently completed step.
    Last(Field),
    /// A named step.
    Step { id: String, field: Field },
    /// The run id.
    RunId,
}

/// Which part of a step's output.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Field {
    OutputText,
    /// The end of what a shell step's program wrote to stderr (empty for
    /// the other kinds).
    StderrText,
    /// A field path into the step's structured output.
    OutputJson(Vec<String>),
}

/// A malformed template, with the byte range of the offending part.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct TemplateSyntaxError {
    pub start: usize,
    pub end: usize,
    pub message: String,
}

impl Template {
    /// Parses template text.
    pub fn parse(text: &str) -> Result<Template, TemplateSyntaxError> {
        let mut segments = Vec::new();
        let mut rest_start = 0;
        while let Some(found) = text[rest_start..].find("{{") {
            let open = rest_start + found;
            if open > rest_start {
                segments.push(Segment::Literal(text[rest_start..open].to_string()));
            }
            let Some(close_rel) = text[open + 2..].find("}}") else {
                return Err(TemplateSyntaxError {
                    start: open,
                    end: text.len(),
                    message: "unclosed `{{`: a reference ends with `}}`".to_string(),
                });
            };
            let close = open + 2 + close_rel;
            let expr = text[open + 2..close].trim();
            let target =
                parse_expr(expr).map_err(|message| TemplateSyntaxError { start: open, end: close + 2, message })?;
            segments.push(Segment::Ref(Reference { expr: expr.to_string(), start: open, end: close + 2, target }));
            rest_start = close + 2;
        }
        if rest_start < text.len() {
            segments.push(Segment::Literal(text[rest_start..].to_string()));
        }
        Ok(Template { source: text.to_string(), segments })
    }

    /// A template that is only literal text.
    pub fn literal(text: &str) -> Template {
        let segments = if text.is_empty() { Vec::new() } else { vec![Segment::Literal(text.to_string())] };
        Template { source: text.to_string(), segments }
    }

    /// The text as written in the plan.
    pub fn source(&self) -> &str {
        &self.source
    }

    pub fn segments(&self) -> &[Segment] {
        &self.segments
    }

    /// Whether the template holds no reference at all.
    pub fn is_literal(&self) -> bool {
        self.references().next().is_none()
    }

    /// Whether every reference is `{{ run.id }}` (the only reference allowed
    /// in control fields such as paths).
    pub fn only_run_id(&self) -> bool {
        self.references().all(|reference| reference.target == RefTarget::RunId)
    }

    pub fn references(&self) -> impl Iterator<Item = &Reference> {
        self.segments.iter().filter_map(|segment| match segment {
            Segment::Ref(reference) => Some(reference),
            Segment::Literal(_) => None,
        })
    }
}

impl Serialize for Template {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(&self.source)
    }
}

fn parse_expr(expr: &str) -> Result<RefTarget, String> {
    let parts: Vec<&str> = expr.split('.').collect();
    let hint = "expected `last.output_text`, `steps.<id>.output_text`, `steps.<id>.stderr_text`, `steps.<id>.output_json.<field>` or `run.id`";
    if parts.iter().any(|part| part.is_empty() || part.chars().any(char::is_whitespace)) {
        return Err(format!("malformed reference `{{{{ {expr} }}}}`: {hint}"));
    }
    match parts.as_slice() {
        ["run", "id"] => Ok(RefTarget::RunId),
        ["last", field @ ..] => Ok(RefTarget::Last(parse_field(expr, field, hint)?)),
        ["steps", id, field @ ..] => {
            Ok(RefTarget::Step { id: (*id).to_string(), field: parse_field(expr, field, hint)? })
        }
        _ => Err(format!("unknown reference `{{{{ {expr} }}}}`: {hint}")),
    }
}

fn parse_field(expr: &str, field: &[&str], hint: &str) -> Result<Field, String> {
    match field {
        ["output_text"] => Ok(Field::OutputText),
        ["stderr_text"] => Ok(Field::StderrText),
        ["output_json", path @ ..] if !path.is_empty() => {
            Ok(Field::OutputJson(path.iter().map(|part| (*part).to_string()).collect()))
        }
        ["output_json"] => Err(format!("`{{{{ {expr} }}}}` names no field: write `output_json.<field>`")),
        _ => Err(format!("unknown field in `{{{{ {expr} }}}}`: {hint}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_literals_and_references_with_optional_whitespace() {
        let template = Template::parse("a {{last.output_text}} b {{ steps.step-1.output_json.x.y }}{{ run.id }}")
            .expect("valid template");
        let targets: Vec<_> = template.references().map(|reference| reference.target.clone()).collect();
        assert_eq!(
            targets,
            vec![
                RefTarget::Last(Field::OutputText),
                RefTarget::Step {
                    id: "step-1".to_string(),
                    field: Field::OutputJson(vec!["x".to_string(), "y".to_string()])
                },
                RefTarget::RunId,
            ]
        );
        assert_eq!(template.segments().len(), 5);
        let stderr = Template::parse("{{ steps.test.stderr_text }}").expect("valid template");
        let target = stderr.references().map(|reference| reference.target.clone()).next();
        assert_eq!(target, Some(RefTarget::Step { id: "test".to_string(), field: Field::StderrText }));
        assert!(Template::parse("{{ steps.test.stderr_text.x }}").is_err());
    }

    #[test]
    fn rejects_malformed_references_with_their_range() {
        for (text, start) in
            [("x {{ last.output_text", 2), ("{{ foo }}", 0), ("{{ last }}", 0), ("{{ steps.a.output_json }}", 0)]
        {
            let error = Template::parse(text).expect_err(text);
            assert_eq!(error.start, start, "{text}");
        }
    }

    #[test]
    fn a_template_without_braces_is_literal() {
        let template = Template::parse("hello } {").expect("literal");
        assert!(template.is_literal());
        assert!(Template::parse("runs/{{ run.id }}.txt").expect("valid").only_run_id());
        assert!(!Template::parse("{{ last.output_text }}").expect("valid").only_run_id());
    }
}
