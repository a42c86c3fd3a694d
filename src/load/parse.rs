//! Parsing a file into a spanned [`Node`] tree, by its format.
//!
//! `.toml` is read with the `toml` crate's spanned parser
//! ([`toml::de::DeTable`], in `parse_toml.rs`), `.yaml`/`.yml` with
//! `saphyr-parser` events, from which `parse_yaml.rs` builds the tree so
//! that spans, duplicate keys and the YAML 1.2 core schema stay under our
//! control. Those two files are the only ones that know about either
//! parser: swapping one changes nothing else.
//!
//! Both refuse a file that nests too deep (`nesting.rs`).

use crate::diag::{Diagnostic, SourceFile, SourceId};
use crate::load::node::Node;
use crate::load::parse_toml::parse_toml;
use crate::load::parse_yaml::YamlBuilder;
use crate::load::read_file::Format;

/// Parses a file already in the source map. Returns `None` when the text is
/// not well-formed; the reasons are in `diagnostics`. Findings that do not
/// stop the tree from being built (a YAML anchor, say) are reported too, and
/// the tree is still returned so that validation can report the rest.
pub(crate) fn parse(
    file: &SourceFile,
    id: SourceId,
    format: Format,
    diagnostics: &mut Vec<Diagnostic>,
) -> Option<Node> {
    match format {
        Format::Toml => parse_toml(&file.text, id, diagnostics),
        Format::Yaml => YamlBuilder::new(file, id, diagnostics).document(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::diag::SourceMap;
    use crate::load::nesting::MAX_NESTING;

    /// `code@line:col` of each finding of parsing `text` as `format`, and
    /// whether a tree came out.
    fn parsed(format: Format, text: &str) -> (bool, Vec<String>) {
        let mut sources = SourceMap::new();
        let id = sources.add(SourceFile::new("nested", text));
        let file = sources.get(id).expect("source");
        let mut diagnostics = Vec::new();
        let tree = parse(file, id, format, &mut diagnostics);
        let found = diagnostics
            .iter()
            .map(|diagnostic| {
                let (line, column) = diagnostic.span.map_or((0, 0), |span| file.line_col(span.start));
                format!("{}@{line}:{column}", diagnostic.code)
            })
            .collect();
        (tree.is_some(), found)
    }

    fn toml_array(levels: usize) -> String {
        format!("a = {}{}\n", "[".repeat(levels), "]".repeat(levels))
    }

    #[test]
    fn the_limit_itself_loads_and_one_level_more_is_refused_in_both_formats() {
        // YAML: the root sequence is level 0, so MAX_NESTING + 1 dashes.
        assert_eq!(parsed(Format::Yaml, &format!("{}x\n", "- ".repeat(MAX_NESTING + 1))), (true, vec![]));
        assert_eq!(
            parsed(Format::Yaml, &format!("{}x\n", "- ".repeat(MAX_NESTING + 2))),
            (false, vec![format!("nesting-too-deep@1:{}", 2 * (MAX_NESTING + 1) + 1)])
        );
        // TOML: the root table is level 0, `a` is level 1.
        assert_eq!(parsed(Format::Toml, &toml_array(MAX_NESTING)), (true, vec![]));
        assert_eq!(
            parsed(Format::Toml, &toml_array(MAX_NESTING + 1)),
            (false, vec![format!("nesting-too-deep@1:{}", 4 + MAX_NESTING + 1)])
        );
    }

    #[test]
    fn bombs_of_every_shape_end_in_one_finding_not_an_abort() {
        let levels = 10_000;
        let block_sequences = format!("{}x\n", "- ".repeat(levels));
        let block_mappings: String =
            (0..levels).map(|level| format!("{}k:\n", "  ".repeat(level))).collect::<String>() + "x\n";
        let flow_sequences = format!("a: {}{}\n", "[".repeat(levels), "]".repeat(levels));
        let flow_mappings = format!("a: {}1{}\n", "{b: ".repeat(levels), "}".repeat(levels));
        for (name, text) in [
            ("block sequences", &block_sequences),
            ("block mappings", &block_mappings),
            // saphyr's scanner refuses these first (its 255-level guard).
            ("flow sequences", &flow_sequences),
            ("flow mappings", &flow_mappings),
        ] {
            let (tree, found) = parsed(Format::Yaml, text);
            assert!(!tree, "{name}");
            assert_eq!(found.len(), 1, "{name}: {found:?}");
            assert!(found[0].starts_with("nesting-too-deep@"), "{name}: {found:?}");
        }
        let inline_tables = format!("a = {}1{}\n", "{b = ".repeat(levels), "}".repeat(levels));
        let dotted_header = format!("[{}]\nx = 1\n", vec!["t"; levels].join("."));
        let dotted_then_inline = format!("[{}]\n{}", vec!["t"; 60].join("."), toml_array(10));
        for (name, text) in [
            // The toml crate's 80-level guard refuses these first.
            ("inline arrays", toml_array(levels)),
            ("inline tables", inline_tables),
            ("dotted header", dotted_header),
            // Each part is below both guards; together they are too deep.
            ("dotted header and inline arrays", dotted_then_inline),
        ] {
            let (tree, found) = parsed(Format::Toml, &text);
            assert!(!tree, "{name}");
            assert_eq!(found.len(), 1, "{name}: {found:?}");
            assert!(found[0].starts_with("nesting-too-deep@"), "{name}: {found:?}");
        }
    }
}
