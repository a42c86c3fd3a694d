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
    /// Filters applied to the resolved value, left to right
    /// (`{{ steps.a.output_text | trim | lines(3) }}`).
    pub filters: Vec<Filter>,
}

/// A filter after `|` in a reference.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Filter {
    /// The value as JSON: text becomes a JSON string, a structured value
    /// its JSON document. For building request bodies and JSON files.
    Json,
    /// Leading and trailing whitespace removed.
    Trim,
    /// Text up to the first line break.
    FirstLine,
    /// The first N lines.
    Lines(usize),
    /// The Nth word (1-based; words are separated by white space), or
    /// empty text when there are fewer: `du -sk data` prints `48\tdata`,
    /// and `word(1)` is `48`.
    Word(usize),
    /// This text when the reference cannot be resolved (a step that did not
    /// run, a field or an input that is absent) or resolves to empty text.
    Default(String),
}

impl Filter {
    /// The filter as written, for messages.
    pub fn describe(&self) -> String {
        match self {
            Filter::Json => "json".to_string(),
            Filter::Trim => "trim".to_string(),
            Filter::FirstLine => "first_line".to_string(),
            Filter::Lines(count) => format!("lines({count})"),
            Filter::Word(index) => format!("word({index})"),
            Filter::Default(text) => format!("default({text:?})"),
        }
    }
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
    /// The goal the user gave the run (`{{ run.goal }}`), as data; empty
    /// when the run was started by plan rather than by goal.
    RunGoal,
    /// An input the plan declares (`{{ inputs.NAME }}`).
    Input(String),
    /// A secret the policy declares (`{{ secrets.NAME }}`). The loader
    /// allows it only where a value is never recorded as given.
    Secret(String),
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
    /// How the step's latest attempt ended: `done`, `failed` or `skipped`.
    Status,
    /// A shell step's exit code (empty when the program did not exit).
    ExitCode,
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
            let error = |message| TemplateSyntaxError { start: open, end: close + 2, message };
            let mut pieces = split_filters(expr);
            let head = pieces.remove(0).trim();
            let target = parse_expr(head).map_err(error)?;
            let filters = pieces
                .iter()
                .map(|piece| parse_filter(expr, piece.trim()))
                .collect::<Result<Vec<_>, _>>()
                .map_err(error)?;
            segments.push(Segment::Ref(Reference {
                expr: expr.to_string(),
                start: open,
                end: close + 2,
                target,
                filters,
            }));
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

    /// Whether some reference names a secret.
    pub fn uses_secrets(&self) -> bool {
        self.references().any(|reference| matches!(reference.target, RefTarget::Secret(_)))
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

/// Splits `head | filter | filter(…)` at the `|`s outside quotes.
fn split_filters(expr: &str) -> Vec<&str> {
    let mut pieces = Vec::new();
    let mut start = 0;
    let mut quote: Option<char> = None;
    for (at, ch) in expr.char_indices() {
        match (quote, ch) {
            (Some(open), _) if ch == open => quote = None,
            (Some(_), _) => {}
            (None, '"' | '\'') => quote = Some(ch),
            (None, '|') => {
                pieces.push(&expr[start..at]);
                start = at + 1;
            }
            _ => {}
        }
    }
    pieces.push(&expr[start..]);
    pieces
}

const FILTER_HINT: &str = "filters are `json`, `trim`, `first_line`, `lines(N)`, `word(N)` and `default(\"text\")`";

fn parse_filter(expr: &str, text: &str) -> Result<Filter, String> {
    let (name, argument) = match text.split_once('(') {
        Some((name, rest)) => {
            let Some(argument) = rest.strip_suffix(')') else {
                return Err(format!("malformed filter `{text}` in `{{{{ {expr} }}}}`: an argument ends with `)`"));
            };
            (name.trim(), Some(argument.trim()))
        }
        None => (text, None),
    };
    match (name, argument) {
        ("json", None) => Ok(Filter::Json),
        ("trim", None) => Ok(Filter::Trim),
        ("first_line", None) => Ok(Filter::FirstLine),
        ("word", Some(index)) => match index.parse::<usize>() {
            Ok(index) if index > 0 => Ok(Filter::Word(index)),
            _ => Err(format!("`word({index})` in `{{{{ {expr} }}}}`: the position is a whole number above 0")),
        },
        ("lines", Some(count)) => match count.parse::<usize>() {
            Ok(count) if count > 0 => Ok(Filter::Lines(count)),
            _ => Err(format!("`lines({count})` in `{{{{ {expr} }}}}`: the count is a whole number above 0")),
        },
        ("default", Some(quoted)) => {
            let unquoted = quoted
                .strip_prefix('"')
                .and_then(|rest| rest.strip_suffix('"'))
                .or_else(|| quoted.strip_prefix('\'').and_then(|rest| rest.strip_suffix('\'')));
            match unquoted {
                Some(text) if !text.contains(['"', '\'']) => Ok(Filter::Default(text.to_string())),
                _ => Err(format!(
                    "`default({quoted})` in `{{{{ {expr} }}}}`: the default is quoted text, as in `default(\"none\")`"
                )),
            }
        }
        ("json" | "trim" | "first_line", Some(_)) => {
            Err(format!("filter `{name}` in `{{{{ {expr} }}}}` takes no argument"))
        }
        ("lines" | "word" | "default", None) => {
            Err(format!("filter `{name}` in `{{{{ {expr} }}}}` needs an argument: {FILTER_HINT}"))
        }
        _ => Err(format!("unknown filter `{name}` in `{{{{ {expr} }}}}`: {FILTER_HINT}")),
    }
}

fn parse_expr(expr: &str) -> Result<RefTarget, String> {
    let parts: Vec<&str> = expr.split('.').collect();
    let hint = "expected `last.<field>`, `steps.<id>.<field>` (fields `output_text`, `stderr_text`, `output_json.<field>`, `status`, `exit_code`), `inputs.<name>`, `secrets.<name>`, `run.id` or `run.goal`";
    if parts.iter().any(|part| part.is_empty() || part.chars().any(char::is_whitespace)) {
        return Err(format!("malformed reference `{{{{ {expr} }}}}`: {hint}"));
    }
    match parts.as_slice() {
        ["run", "id"] => Ok(RefTarget::RunId),
        ["run", "goal"] => Ok(RefTarget::RunGoal),
        ["inputs", name] => Ok(RefTarget::Input((*name).to_string())),
        ["secrets", name] => Ok(RefTarget::Secret((*name).to_string())),
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
        ["status"] => Ok(Field::Status),
        ["exit_code"] => Ok(Field::ExitCode),
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
    fn parses_inputs_secrets_the_goal_and_filters() {
        let template =
            Template::parse("{{ inputs.folder }} {{ run.goal | json }} {{ secrets.token }} {{ steps.t.status }}")
                .expect("valid");
        let targets: Vec<_> = template.references().map(|reference| reference.target.clone()).collect();
        assert_eq!(
            targets,
            vec![
                RefTarget::Input("folder".to_string()),
                RefTarget::RunGoal,
                RefTarget::Secret("token".to_string()),
                RefTarget::Step { id: "t".to_string(), field: Field::Status },
            ]
        );
        assert!(template.uses_secrets());
        let filtered =
            Template::parse("{{ last.output_text | trim | lines(3) | default(\"a | b\") | json }}").expect("valid");
        let reference = filtered.references().next().expect("one reference");
        assert_eq!(
            reference.filters,
            vec![Filter::Trim, Filter::Lines(3), Filter::Default("a | b".to_string()), Filter::Json]
        );
        for bad in [
            "{{ last.output_text | upper }}",
            "{{ last.output_text | lines(0) }}",
            "{{ last.output_text | lines }}",
            "{{ last.output_text | trim(1) }}",
            "{{ last.output_text | default(none) }}",
            "{{ inputs }}",
            "{{ inputs.a.b }}",
        ] {
            assert!(Template::parse(bad).is_err(), "{bad}");
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
