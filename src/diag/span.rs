//! Source files and byte spans.

use std::ops::Range;
use std::sync::Arc;

/// Index of a file in a [`SourceMap`].
pub type SourceId = usize;

/// A byte range in one source file.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Span {
    pub source: SourceId,
    pub start: usize,
    pub end: usize,
}

impl Span {
    pub fn new(source: SourceId, range: Range<usize>) -> Self {
        Span { source, start: range.start, end: range.end }
    }
}

/// A file's display name and text, with a line index for position lookups.
#[derive(Debug)]
pub struct SourceFile {
    /// The path as shown to users (relative to the current directory when
    /// the file is below it).
    pub name: String,
    pub text: String,
    line_starts: Vec<usize>,
}

impl SourceFile {
    pub fn new(name: impl Into<String>, text: impl Into<String>) -> Self {
        let text = text.into();
        let mut line_starts = vec![0];
        line_starts.extend(text.match_indices('\n').map(|(index, _)| index + 1));
        SourceFile { name: name.into(), text, line_starts }
    }

    /// 1-based line and column (in characters) of a byte offset.
    pub fn line_col(&self, offset: usize) -> (usize, usize) {
        let offset = offset.min(self.text.len());
        let line = match self.line_starts.binary_search(&offset) {
            Ok(line) => line,
            Err(next) => next - 1,
        };
        let start = self.line_starts[line];
        let column = self.text.get(start..offset).map_or(0, |prefix| prefix.chars().count());
        (line + 1, column + 1)
    }

    /// The text of a 1-based line, without its line ending.
    pub fn line_text(&self, line: usize) -> &str {
        let Some(&start) = self.line_starts.get(line.saturating_sub(1)) else {
            return "";
        };
        let end = self.line_starts.get(line).map_or(self.text.len(), |next| next - 1);
        self.text.get(start..end).unwrap_or("").trim_end_matches('\r')
    }

    /// Byte offset of the first byte of a 1-based line and 1-based column
    /// (in characters); used by parsers that report positions, not offsets.
    pub fn offset_of(&self, line: usize, column: usize) -> usize {
        let Some(&start) = self.line_starts.get(line.saturating_sub(1)) else {
            return self.text.len();
        };
        let rest = &self.text[start..];
        rest.char_indices().nth(column.saturating_sub(1)).map_or(self.text.len(), |(index, _)| start + index)
    }
}

/// All files loaded in one command, so spans can name their file by index.
#[derive(Debug, Default, Clone)]
pub struct SourceMap {
    files: Vec<Arc<SourceFile>>,
}

impl SourceMap {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn add(&mut self, file: SourceFile) -> SourceId {
        self.files.push(Arc::new(file));
        self.files.len() - 1
    }

    pub fn get(&self, id: SourceId) -> Option<&SourceFile> {
        self.files.get(id).map(|file| file.as_ref())
    }

    /// The file shown as `name`, if it was loaded.
    pub fn named(&self, name: &str) -> Option<&SourceFile> {
        self.files.iter().map(|file| file.as_ref()).find(|file| file.name == name)
    }

    /// `file:line:column` of a span's start.
    pub fn location(&self, span: Span) -> String {
        match self.get(span.source) {
            Some(file) => {
                let (line, column) = file.line_col(span.start);
                format!("{}:{line}:{column}", file.name)
            }
            None => "<unknown>".to_string(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn line_col_counts_characters_not_bytes() {
        let file = SourceFile::new("x.toml", "a = 1\nкл = \"в\"\n");
        let offset = file.text.find('=').map(|first| first + 1).unwrap_or(0);
        assert_eq!(file.line_col(offset), (1, 4));
        let second = file.text.rfind('=').unwrap_or(0);
        assert_eq!(file.line_col(second), (2, 4));
        assert_eq!(file.line_text(2), "кл = \"в\"");
        assert_eq!(file.offset_of(2, 4), second);
    }
}
