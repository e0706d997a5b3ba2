//! HTML → text, with a real HTML5 parser (`scraper`, on `html5ever`).
//!
//! What a reader sees is kept and what a browser never shows is dropped: `<head>`, scripts,
//! styles, templates, `hidden` elements. Block elements (paragraphs, list items, headings,
//! table rows, …) become paragraphs separated by blank lines; whitespace inside a paragraph is
//! collapsed as a browser does, except inside `<pre>`, whose lines are kept. The tree is walked
//! iteratively, so deeply nested markup cannot overflow the stack.
//!
//! The parser runs in the worker process, so the markup is measured before it is parsed
//! ([`check_bounds`]): at most [`MAX_HTML_BYTES`], [`MAX_ELEMENTS`] elements and an estimated
//! nesting of [`MAX_DEPTH`]. The tree costs a few hundred bytes per element, and the HTML5
//! tree builder scans its stack of open elements for many tags, so tens of MB of `<p>` or
//! 200,000 nested elements would cost gigabytes or hours; past a limit the document fails with
//! a readable reason instead. Browsers stop nesting at a similar depth (Chromium at 512).

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

/// The largest HTML document parsed, in bytes of decoded text.
pub const MAX_HTML_BYTES: usize = 32 << 20;
/// The most elements (start tags) an HTML document may have.
pub const MAX_ELEMENTS: usize = 250_000;
/// The deepest estimated nesting of elements.
pub const MAX_DEPTH: usize = 512;

/// Elements that never have content.
const VOID: &[&str] = &[
    "area", "base", "basefont", "bgsound", "br", "col", "embed", "frame", "hr", "image", "img",
    "input", "keygen", "link", "meta", "param", "source", "track", "wbr",
];

/// Elements a parser closes by itself when the next one of their kind (or their parent's end)
/// comes: left unclosed, they do not nest.
const SELF_CLOSING: &[&str] = &[
    "p", "li", "dt", "dd", "tr", "td", "th", "option", "optgroup", "rb", "rt", "rp", "rtc",
    "thead", "tbody", "tfoot", "colgroup", "caption",
];

/// Elements whose content is text up to their end tag, never markup.
const RAW_TEXT: &[&str] = &[
    "script", "style", "textarea", "title", "xmp", "iframe", "noembed", "noframes",
];

/// Measures the markup before it is parsed (see the module documentation). The scan is a
/// tokenizer's rough cut, in one pass: tags are counted, and nesting is estimated from start
/// tags minus end tags, leaving out void and self-closing elements, comments and the content of
/// raw-text elements.
pub fn check_bounds(source: &str) -> Result<(), ExtractError> {
    let too = |reason: String| Err(ExtractError::TooComplex { reason });
    if source.len() > MAX_HTML_BYTES {
        return too(format!(
            "the HTML is {} MiB; docket reads at most {} MiB",
            source.len() >> 20,
            MAX_HTML_BYTES >> 20
        ));
    }
    let bytes = source.as_bytes();
    let (mut at, mut elements, mut depth, mut deepest) = (0usize, 0usize, 0usize, 0usize);
    while let Some(offset) = bytes[at..].iter().position(|&b| b == b'<') {
        let open = at + offset;
        let rest = &bytes[open + 1..];
        if rest.starts_with(b"!--") {
            at = find(&rest[3..], b"-->").map_or(bytes.len(), |end| open + 4 + end + 3);
            continue;
        }
        let closing = rest.first() == Some(&b'/');
        let name_start = usize::from(closing);
        let name_len = rest[name_start..]
            .iter()
            .take_while(|b| b.is_ascii_alphanumeric())
            .count();
        if name_len == 0 || !rest[name_start].is_ascii_alphabetic() {
            // Not a tag ("a < b", a doctype): text goes on right after the '<'.
            at = open + 1;
            continue;
        }
        // An unterminated tag runs to the end of the text, as the tokenizer reads it.
        let tag_end = find(rest, b">").map_or(bytes.len(), |end| open + 1 + end + 1);
        at = tag_end;
        let name =
            source[open + 1 + name_start..open + 1 + name_start + name_len].to_ascii_lowercase();
        let nests = !VOID.contains(&name.as_str()) && !SELF_CLOSING.contains(&name.as_str());
        if closing {
            if nests {
                depth = depth.saturating_sub(1);
            }
            continue;
        }
        elements += 1;
        if elements > MAX_ELEMENTS {
            return too(format!("the HTML has more than {MAX_ELEMENTS} elements"));
        }
        if RAW_TEXT.contains(&name.as_str()) {
            let end_tag = format!("</{name}");
            let lower_rest = &bytes[at..];
            at += find_ignoring_case(lower_rest, end_tag.as_bytes()).unwrap_or(lower_rest.len());
            continue;
        }
        let self_closed = tag_end >= 2 && bytes.get(tag_end - 2) == Some(&b'/');
        if nests && !self_closed {
            depth += 1;
            deepest = deepest.max(depth);
            if deepest > MAX_DEPTH {
                return too(format!(
                    "the HTML nests elements more than {MAX_DEPTH} deep"
                ));
            }
        }
    }
    Ok(())
}

/// Extracts the visible text of an HTML document as one page.
pub fn extract_html(bytes: &[u8], sniffed: &Sniffed) -> Result<Vec<Page>, ExtractError> {
    let source = decode(bytes, sniffed.encoding);
    check_bounds(&source)?;
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

fn find_ignoring_case(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack
        .windows(needle.len())
        .position(|w| w.eq_ignore_ascii_case(needle))
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

    fn bounded(source: &str) -> Result<Vec<Page>, ExtractError> {
        let sniffed = Sniffed {
            kind: DocKind::Html,
            encoding: Some(encoding_rs::UTF_8),
            content_type: "text/html",
        };
        extract_html(source.as_bytes(), &sniffed)
    }

    #[test]
    fn deep_nesting_and_floods_of_elements_fail_with_a_reason_before_parsing() {
        let nested = format!(
            "<body>{}deep{}</body>",
            "<div>".repeat(5_000),
            "</div>".repeat(5_000)
        );
        let err = bounded(&nested).unwrap_err();
        assert_eq!(err.code(), "document_too_complex");
        assert!(err.to_string().contains("512 deep"), "{err}");
        let unclosed_bold: String = (0..2_000).map(|i| format!("<b id={i}>x")).collect();
        assert_eq!(
            bounded(&unclosed_bold).unwrap_err().code(),
            "document_too_complex"
        );
        let flood = format!("<body>{}</body>", "<p>x".repeat(300_000));
        let err = bounded(&flood).unwrap_err();
        assert!(err.to_string().contains("elements"), "{err}");
    }

    #[test]
    fn ordinary_markup_is_within_the_bounds() {
        // Unclosed paragraphs and list items, void elements, scripts full of tags, comments.
        let mut page = String::from("<!doctype html><html><head><meta charset=utf-8>");
        page.push_str("<script>let s = '<div><div><div>'; if (a<b) {}</script>");
        page.push_str("<!-- <div><div> --></head><body>");
        for i in 0..2_000 {
            page.push_str(&format!(
                "<div><p>para {i}<br><img src=x.png><ul><li>a<li>b</ul></div>"
            ));
        }
        page.push_str("</body></html>");
        assert!(check_bounds(&page).is_ok());
        let text = bounded(&page).expect("extracts").remove(0).text;
        assert!(text.contains("para 1999"));
        assert!(!text.contains("let s"));
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
