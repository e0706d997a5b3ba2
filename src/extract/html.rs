//! HTML → text, with a real HTML5 parser (`scraper`, on `html5ever`).
//!
//! What a reader sees is kept and what a browser never shows is dropped: `<head>`, scripts,
//! styles, templates, `hidden` elements. Block elements (paragraphs, list items, headings,
//! table rows, …) become paragraphs separated by blank lines; whitespace inside a paragraph is
//! collapsed as a browser does, except inside `<pre>`, whose lines are kept. The tree is walked
//! iteratively, so deeply nested markup cannot overflow the stack.

use ego_tree::iter::Edge;
use scraper::{Html, Node};

use super::decode::{decode, normalize};
use super::{ExtractError, Page, Sniffed};

/// Elements whose content is never shown as text.
const HIDDEN: &[&str] = &[
    "head", "script", "style", "noscript", "template", "svg", "math", "iframe", "object", "canvas",
    "select", "datalist", "audio", "video",
];

/// Elements that start and end a paragraph.
const BLOCKS: &[&str] = &[
    "address",
    "article",
    "aside",
    "blockquote",
    "body",
    "caption",
    "center",
    "dd",
    "details",
    "dialog",
    "dir",
    "div",
    "dl",
    "dt",
    "fieldset",
    "figcaption",
    "figure",
    "footer",
    "form",
    "h1",
    "h2",
    "h3",
    "h4",
    "h5",
    "h6",
    "header",
    "hgroup",
    "hr",
    "html",
    "legend",
    "li",
    "main",
    "menu",
    "nav",
    "ol",
    "p",
    "pre",
    "section",
    "summary",
    "table",
    "tbody",
    "tfoot",
    "thead",
    "tr",
    "ul",
];

/// Extracts the visible text of an HTML document as one page.
pub fn extract_html(bytes: &[u8], sniffed: &Sniffed) -> Result<Vec<Page>, ExtractError> {
    let source = decode(bytes, sniffed.encoding);
    let document = Html::parse_document(&source);
    let mut out = TextBuilder::default();
    // Depth of hidden ancestors: text is dropped while it is above zero.
    let mut hidden = 0usize;
    for edge in document.tree.root().traverse() {
        match edge {
            Edge::Open(node) => match node.value() {
                Node::Element(element) => {
                    let name = element.name();
                    if hidden > 0 || is_hidden(element) {
                        hidden += 1;
                        continue;
                    }
                    match name {
                        "br" => out.line_break(),
                        "td" | "th" => out.cell_break(),
                        "pre" => {
                            out.paragraph_break();
                            out.preformatted += 1;
                        }
                        _ if BLOCKS.contains(&name) => out.paragraph_break(),
                        _ => {}
                    }
                }
                Node::Text(text) if hidden == 0 => out.push_text(text),
                _ => {}
            },
            Edge::Close(node) => {
                if let Node::Element(element) = node.value() {
                    if hidden > 0 {
                        hidden -= 1;
                        continue;
                    }
                    let name = element.name();
                    if name == "pre" {
                        out.preformatted = out.preformatted.saturating_sub(1);
                    }
                    if BLOCKS.contains(&name) {
                        out.paragraph_break();
                    }
                }
            }
        }
    }
    let text = normalize(&out.finish());
    if text.trim().is_empty() {
        return Err(ExtractError::NoText);
    }
    Ok(vec![Page { number: 1, text }])
}

fn is_hidden(element: &scraper::node::Element) -> bool {
    if HIDDEN.contains(&element.name()) || element.attr("hidden").is_some() {
        return true;
    }
    element.attr("style").is_some_and(|style| {
        let compact: String = style
            .chars()
            .filter(|c| !c.is_whitespace())
            .collect::<String>()
            .to_ascii_lowercase();
        compact.contains("display:none")
    })
}

/// Accumulates text with browser-like whitespace rules.
#[derive(Default)]
struct TextBuilder {
    out: String,
    /// Whitespace was seen since the last visible character; becomes one space if more follows.
    pending_space: bool,
    /// Nesting depth of `<pre>`: inside, text is copied verbatim.
    preformatted: usize,
}

impl TextBuilder {
    fn push_text(&mut self, text: &str) {
        if self.preformatted > 0 {
            self.out.push_str(text);
            self.pending_space = false;
            return;
        }
        for c in text.chars() {
            if c.is_whitespace() {
                self.pending_space = true;
                continue;
            }
            if self.pending_space && !self.out.is_empty() && !self.out.ends_with(['\n', ' ']) {
                self.out.push(' ');
            }
            self.pending_space = false;
            self.out.push(c);
        }
    }

    fn line_break(&mut self) {
        self.trim_trailing_spaces();
        self.out.push('\n');
        self.pending_space = false;
    }

    /// Table cells of one row stay on one line, separated by a space.
    fn cell_break(&mut self) {
        self.pending_space = true;
    }

    fn paragraph_break(&mut self) {
        self.trim_trailing_spaces();
        if !self.out.is_empty() && !self.out.ends_with("\n\n") {
            let missing = if self.out.ends_with('\n') { 1 } else { 2 };
            self.out.push_str(&"\n".repeat(missing));
        }
        self.pending_space = false;
    }

    fn trim_trailing_spaces(&mut self) {
        let kept = self.out.trim_end_matches([' ', '\t']).len();
        self.out.truncate(kept);
    }

    fn finish(self) -> String {
        self.out
    }
}

/// Whether decoded text starts like an HTML document: after whitespace, comments and an XML
/// prolog, a doctype naming html, or markup that opens `<html>`, `<head>` or `<body>` within
/// the first KiB. Text that merely mentions a tag later on stays text.
pub(crate) fn looks_like_html(text: &str) -> bool {
    let mut rest = text.trim_start_matches('\u{feff}').trim_start();
    loop {
        if let Some(after) = rest.strip_prefix("<!--") {
            match after.find("-->") {
                Some(end) => rest = after[end + 3..].trim_start(),
                None => return false,
            }
        } else if rest.starts_with("<?xml") {
            match rest.find("?>") {
                Some(end) => rest = rest[end + 2..].trim_start(),
                None => return false,
            }
        } else {
            break;
        }
    }
    if !rest.starts_with('<') {
        return false;
    }
    let head: String = rest
        .chars()
        .take(1024)
        .collect::<String>()
        .to_ascii_lowercase();
    if head.starts_with("<!doctype html") {
        return true;
    }
    ["<html", "<head", "<body"].iter().any(|tag| {
        head.match_indices(tag).any(|(at, _)| {
            head[at + tag.len()..]
                .chars()
                .next()
                .is_some_and(|c| c == '>' || c == '/' || c.is_ascii_whitespace())
        })
    })
}

/// The charset an HTML document declares in its first KiB: `<meta charset=…>`,
/// `<meta http-equiv=… content="…; charset=…">`, or an XML prolog's `encoding="…"`.
/// UTF-16 labels are read as UTF-8, as browsers do, since a page that was really UTF-16 would
/// have had a byte-order mark.
pub(crate) fn declared_encoding(bytes: &[u8]) -> Option<&'static encoding_rs::Encoding> {
    let head = &bytes[..bytes.len().min(1024)];
    let lower: Vec<u8> = head.to_ascii_lowercase();
    let label = meta_charset(&lower).or_else(|| xml_encoding(&lower))?;
    let encoding = encoding_rs::Encoding::for_label(label)?;
    if encoding == encoding_rs::UTF_16LE || encoding == encoding_rs::UTF_16BE {
        return Some(encoding_rs::UTF_8);
    }
    Some(encoding)
}

fn meta_charset(lower: &[u8]) -> Option<&[u8]> {
    let mut rest = lower;
    while let Some(at) = find(rest, b"<meta") {
        let tag_end = find(&rest[at..], b">").map_or(rest.len(), |end| at + end);
        let tag = &rest[at..tag_end];
        if let Some(value) = find(tag, b"charset=").map(|i| &tag[i + 8..]) {
            return Some(attribute_value(value));
        }
        rest = &rest[tag_end..];
    }
    None
}

fn xml_encoding(lower: &[u8]) -> Option<&[u8]> {
    let prolog_end = find(lower, b"?>")?;
    let prolog = lower.strip_prefix(b"<?xml")?;
    let prolog = &prolog[..prolog_end.saturating_sub(5)];
    let value = &prolog[find(prolog, b"encoding=")? + 9..];
    Some(attribute_value(value))
}

/// The value at the start of `raw`, without quotes, up to a quote, space, `;`, `/` or `>`.
fn attribute_value(raw: &[u8]) -> &[u8] {
    let raw = raw
        .strip_prefix(b"\"")
        .or(raw.strip_prefix(b"'"))
        .unwrap_or(raw);
    let end = raw
        .iter()
        .position(|b| matches!(b, b'"' | b'\'' | b';' | b'>' | b'/') || b.is_ascii_whitespace())
        .unwrap_or(raw.len());
    &raw[..end]
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|w| w == needle)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::extract::DocKind;

    fn html(source: &str) -> String {
        let sniffed = Sniffed {
            kind: DocKind::Html,
            encoding: Some(encoding_rs::UTF_8),
            content_type: "text/html",
        };
        let pages = extract_html(source.as_bytes(), &sniffed).unwrap();
        pages[0].text.clone()
    }

    #[test]
    fn inline_markup_joins_words_and_blocks_make_paragraphs() {
        let text = html(
            "<html><head><title>T</title></head><body><h1>Head  line</h1>\
             <p>One <b>bold</b>word\n  and   more.</p><ul><li>first</li><li>second</li></ul></body></html>",
        );
        assert_eq!(
            text,
            "Head line\n\nOne boldword and more.\n\nfirst\n\nsecond"
        );
    }

    #[test]
    fn pre_keeps_its_lines_and_hidden_content_is_dropped() {
        let text = html(
            "<body><pre>fn main() {\n    run();\n}</pre><div hidden>secret</div>\
             <span style=\"display: none\">gone</span><template><p>t</p></template>tail</body>",
        );
        assert_eq!(text, "fn main() {\n    run();\n}\n\ntail");
    }

    #[test]
    fn table_rows_are_paragraphs_and_cells_share_a_line() {
        let text =
            html("<table><tr><td>a</td><td>b</td></tr><tr><th>c</th><td>d</td></tr></table>");
        assert_eq!(text, "a b\n\nc d");
    }

    #[test]
    fn a_page_with_only_scripts_has_no_text() {
        let sniffed = Sniffed {
            kind: DocKind::Html,
            encoding: None,
            content_type: "text/html",
        };
        let err = extract_html(b"<html><script>x()</script></html>", &sniffed).unwrap_err();
        assert_eq!(err, ExtractError::NoText);
    }

    #[test]
    fn html_is_recognised_by_its_start_not_by_a_mention() {
        assert!(looks_like_html(
            "<?xml version=\"1.0\"?>\n<!DOCTYPE html PUBLIC \"x\"><html>"
        ));
        assert!(looks_like_html("<!-- c --><meta charset=utf-8><body>x"));
        assert!(!looks_like_html("# Notes\nWrite <html> first."));
        assert!(!looks_like_html("<hr> is a rule"));
    }

    #[test]
    fn declared_charsets_are_found_in_meta_and_prolog() {
        let meta = b"<meta http-equiv=\"Content-Type\" content=\"text/html; charset=EUC-KR\">";
        assert_eq!(declared_encoding(meta), Some(encoding_rs::EUC_KR));
        let prolog = b"<?xml version=\"1.0\" encoding='Shift_JIS'?><html>";
        assert_eq!(declared_encoding(prolog), Some(encoding_rs::SHIFT_JIS));
        assert_eq!(
            declared_encoding(b"<meta charset=utf-16>"),
            Some(encoding_rs::UTF_8)
        );
        assert_eq!(declared_encoding(b"<html><body>"), None);
    }
}
