//! The XML of every zip-family format, walked once into blocks: paragraphs (with a heading
//! level where the format marks one) and tables (rows of cell text). Formats differ only in
//! their element names ([`Vocabulary`]) and in how a heading is marked (a callback).
//!
//! Hostile XML: a document type declaration is refused outright (none of these formats uses
//! one, and it is where entity bombs live); entity references other than XML's five and
//! character references are never expanded, since quick-xml does not expand them and neither
//! do we; nesting deeper than [`MAX_DEPTH`] is refused.

use quick_xml::Reader;
use quick_xml::events::{BytesRef, BytesStart, Event};

use crate::extract::ExtractError;

/// The deepest element nesting read; real documents stay far below it.
pub(crate) const MAX_DEPTH: usize = 256;

/// A format's element names (local names, without namespace prefix).
pub(crate) struct Vocabulary {
    /// Elements that hold one paragraph.
    pub paragraph: &'static [&'static str],
    /// Elements whose character data is text; character data elsewhere is ignored.
    pub text: &'static [&'static str],
    /// Elements that stand for white space: tabs, line breaks.
    pub space: &'static [&'static str],
    /// Elements whose whole content is left out (field codes, slide-number fields).
    pub skip: &'static [&'static str],
    pub table: &'static str,
    pub row: &'static str,
    pub cell: &'static str,
    /// An element that starts a new part of the flow (ODP's `draw:page`): [`Block::Break`].
    pub part: Option<&'static str>,
}

/// What a walk yields, in document order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Block {
    /// A paragraph's text, with its heading level (1 = top) when it is a heading.
    Paragraph { text: String, level: Option<u8> },
    /// A table's rows of cell text; a table nested in a cell is flattened into that cell.
    Table(Vec<Vec<String>>),
    /// The start of a new part (a slide in a one-file presentation).
    Break,
}

/// Where the walk is.
#[derive(Default)]
struct Walk {
    blocks: Vec<Block>,
    /// Open paragraphs, innermost last: (text, heading level).
    paragraphs: Vec<(String, Option<u8>)>,
    /// Open elements' local names (for the text and skip rules).
    open: Vec<String>,
    /// Depth of tables; only the outermost builds rows.
    tables: usize,
    rows: Vec<Vec<String>>,
    row: Vec<String>,
    cell: Option<String>,
    /// Depth inside a skipped element, 0 when not skipping.
    skipping: usize,
}

/// Walks one XML part. `heading` sees every start tag and returns a heading level when the tag
/// makes the paragraph it sits in a heading.
pub(crate) fn walk(
    xml: &str,
    format: &'static str,
    words: &Vocabulary,
    heading: &dyn Fn(&BytesStart) -> Option<u8>,
) -> Result<Vec<Block>, ExtractError> {
    let mut reader = Reader::from_str(xml);
    let mut walk = Walk::default();
    loop {
        let event = reader.read_event().map_err(|err| ExtractError::Corrupt {
            format,
            reason: format!("its XML does not parse ({err})"),
        })?;
        match event {
            Event::Start(start) => {
                walk.start(&start, words, heading)?;
            }
            Event::Empty(start) => {
                walk.start(&start, words, heading)?;
                walk.end(words);
            }
            Event::End(_) => walk.end(words),
            Event::Text(text) => {
                if walk.takes_text(words) {
                    let text = text.xml_content().unwrap_or_default();
                    walk.push_text(&text);
                }
            }
            Event::CData(data) => {
                if walk.takes_text(words) {
                    walk.push_text(&String::from_utf8_lossy(&data));
                }
            }
            Event::GeneralRef(reference) => {
                if walk.takes_text(words)
                    && let Some(c) = resolve(&reference)
                {
                    walk.push_text(c.encode_utf8(&mut [0; 4]));
                }
            }
            Event::DocType(_) => {
                return Err(ExtractError::TooComplex {
                    reason: "an XML part declares a document type (DTD), which this format \
                             never uses (an entity bomb?)"
                        .into(),
                });
            }
            Event::Eof => break,
            Event::Decl(_) | Event::PI(_) | Event::Comment(_) => {}
        }
    }
    walk.flush_paragraphs();
    Ok(walk.blocks)
}

/// The character a reference stands for: a character reference or one of XML's five.
fn resolve(reference: &BytesRef) -> Option<char> {
    if reference.is_char_ref() {
        return reference.resolve_char_ref().ok().flatten();
    }
    match reference.decode().ok()?.as_ref() {
        "amp" => Some('&'),
        "lt" => Some('<'),
        "gt" => Some('>'),
        "quot" => Some('"'),
        "apos" => Some('\''),
        _ => None,
    }
}

/// The local name of a tag as text.
pub(crate) fn local(start: &BytesStart) -> String {
    String::from_utf8_lossy(start.local_name().as_ref()).into_owned()
}

/// The value of the attribute whose local name is `name` (any prefix).
pub(crate) fn attribute(start: &BytesStart, name: &str) -> Option<String> {
    start
        .attributes()
        .flatten()
        .find_map(|attr| (attr.key.local_name().as_ref() == name.as_bytes()).then(|| value(&attr)))
}

/// An attribute's value with XML's five entities and character references resolved.
pub(crate) fn value(attr: &quick_xml::events::attributes::Attribute) -> String {
    let raw = String::from_utf8_lossy(&attr.value);
    match quick_xml::escape::unescape(&raw) {
        Ok(text) => text.into_owned(),
        Err(_) => raw.into_owned(),
    }
}

impl Walk {
    fn start(
        &mut self,
        start: &BytesStart,
        words: &Vocabulary,
        heading: &dyn Fn(&BytesStart) -> Option<u8>,
    ) -> Result<(), ExtractError> {
        if self.open.len() >= MAX_DEPTH {
            return Err(ExtractError::TooComplex {
                reason: format!("XML nested more than {MAX_DEPTH} elements deep"),
            });
        }
        let name = local(start);
        if self.skipping > 0 || words.skip.contains(&name.as_str()) {
            self.skipping += 1;
            self.open.push(name);
            return Ok(());
        }
        if words.part == Some(name.as_str()) && self.tables == 0 {
            self.flush_paragraphs();
            self.blocks.push(Block::Break);
        } else if words.paragraph.contains(&name.as_str()) {
            self.paragraphs.push((String::new(), None));
        } else if words.space.contains(&name.as_str()) {
            self.push_text(" ");
        } else if name == words.table {
            self.tables += 1;
        } else if name == words.row && self.tables == 1 {
            self.row.clear();
        } else if name == words.cell && self.tables == 1 {
            self.cell = Some(String::new());
        }
        if let Some(level) = heading(start)
            && let Some(paragraph) = self.paragraphs.last_mut()
        {
            paragraph.1 = Some(level);
        }
        self.open.push(name);
        Ok(())
    }

    fn end(&mut self, words: &Vocabulary) {
        let Some(name) = self.open.pop() else {
            return;
        };
        if self.skipping > 0 {
            self.skipping -= 1;
            return;
        }
        if words.paragraph.contains(&name.as_str()) {
            if let Some((text, level)) = self.paragraphs.pop() {
                self.paragraph_done(text, level);
            }
        } else if name == words.table {
            self.tables = self.tables.saturating_sub(1);
            if self.tables == 0 {
                let rows = std::mem::take(&mut self.rows);
                self.flush_paragraphs();
                self.blocks.push(Block::Table(rows));
            }
        } else if name == words.row && self.tables == 1 {
            let row = std::mem::take(&mut self.row);
            self.rows.push(row);
        } else if name == words.cell && self.tables == 1 {
            let cell = self.cell.take().unwrap_or_default();
            self.row.push(collapse(&cell));
        }
    }

    /// A finished paragraph goes to the cell it sits in, or becomes a block.
    fn paragraph_done(&mut self, text: String, level: Option<u8>) {
        let text = collapse(&text);
        if let Some(cell) = self.cell.as_mut().filter(|_| self.tables > 0) {
            if !text.is_empty() {
                if !cell.is_empty() {
                    cell.push(' ');
                }
                cell.push_str(&text);
            }
        } else if !text.is_empty() {
            self.blocks.push(Block::Paragraph { text, level });
        }
    }

    /// Paragraphs left open (a table or part starts inside one, as in HWPX) give out their
    /// text so far, and stay open for what follows.
    fn flush_paragraphs(&mut self) {
        let mut flushed = Vec::new();
        for (text, level) in &mut self.paragraphs {
            let text = collapse(&std::mem::take(text));
            if !text.is_empty() {
                flushed.push(Block::Paragraph {
                    text,
                    level: *level,
                });
            }
        }
        self.blocks.extend(flushed);
    }

    fn takes_text(&self, words: &Vocabulary) -> bool {
        self.skipping == 0
            && self
                .open
                .last()
                .is_some_and(|name| words.text.contains(&name.as_str()))
    }

    fn push_text(&mut self, text: &str) {
        if let Some((paragraph, _)) = self.paragraphs.last_mut() {
            paragraph.push_str(text);
        } else if let Some(cell) = self.cell.as_mut() {
            cell.push_str(text);
        }
    }
}

/// Runs of white space folded to one space, ends trimmed.
pub(crate) fn collapse(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// A table as text, one row a line: the first row names the columns and each later row reads
/// `header: value; header: value`, so a question about a cell finds its row.
pub(crate) fn linearise(rows: &[Vec<String>]) -> String {
    let rows: Vec<&Vec<String>> = rows
        .iter()
        .filter(|row| row.iter().any(|cell| !cell.is_empty()))
        .collect();
    let Some((header, body)) = rows.split_first() else {
        return String::new();
    };
    let mut lines = vec![join_cells(header)];
    for row in body {
        let pairs: Vec<String> = row
            .iter()
            .enumerate()
            .filter(|(_, value)| !value.is_empty())
            .map(|(at, value)| match header.get(at) {
                Some(name) if !name.is_empty() && name != value => format!("{name}: {value}"),
                _ => value.clone(),
            })
            .collect();
        lines.push(pairs.join("; "));
    }
    lines.join("\n")
}

fn join_cells(row: &[String]) -> String {
    let cells: Vec<&str> = row
        .iter()
        .map(String::as_str)
        .filter(|c| !c.is_empty())
        .collect();
    cells.join("; ")
}

/// Blocks as plain text: paragraphs and tables separated by blank lines.
pub(crate) fn plain(blocks: &[Block]) -> String {
    let parts: Vec<String> = blocks
        .iter()
        .filter_map(|block| match block {
            Block::Paragraph { text, .. } => Some(text.clone()),
            Block::Table(rows) => Some(linearise(rows)),
            Block::Break => None,
        })
        .filter(|text| !text.is_empty())
        .collect();
    parts.join("\n\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    const WORDS: Vocabulary = Vocabulary {
        paragraph: &["p"],
        text: &["t"],
        space: &["tab"],
        skip: &["skip"],
        table: "tbl",
        row: "tr",
        cell: "tc",
        part: None,
    };

    fn blocks(xml: &str) -> Result<Vec<Block>, ExtractError> {
        walk(xml, "test document", &WORDS, &|_| None)
    }

    #[test]
    fn a_dtd_is_refused_and_no_entity_is_expanded() {
        let bomb = r#"<!DOCTYPE d [<!ENTITY a "aaaaaaaaaa"><!ENTITY b "&a;&a;&a;">]><d><p><t>&b;</t></p></d>"#;
        let err = blocks(bomb).unwrap_err();
        assert_eq!(err.code(), "document_too_complex");
        assert!(err.to_string().contains("DTD"), "{err}");
        // Without a DTD an unknown entity is dropped; XML's own and character references stay.
        let found = blocks("<d><p><t>a &b; &amp; &#xD55C;</t></p></d>").unwrap();
        assert_eq!(
            found,
            vec![Block::Paragraph {
                text: "a & 한".into(),
                level: None
            }]
        );
    }

    #[test]
    fn nesting_past_the_limit_is_refused() {
        let deep = format!(
            "{}{}",
            "<x>".repeat(MAX_DEPTH + 1),
            "</x>".repeat(MAX_DEPTH + 1)
        );
        assert_eq!(blocks(&deep).unwrap_err().code(), "document_too_complex");
    }

    #[test]
    fn tables_read_row_by_row_under_their_header() {
        let xml = "<d><tbl><tr><tc><p><t>Name</t></p></tc><tc><p><t>Value</t></p></tc></tr>\
                   <tr><tc><p><t>Alpha</t></p></tc><tc><p><t>100</t></p></tc></tr></tbl>\
                   <p><t>after</t><skip><t>hidden</t></skip></p></d>";
        let found = blocks(xml).unwrap();
        assert_eq!(
            plain(&found),
            "Name; Value\nName: Alpha; Value: 100\n\nafter"
        );
    }
}
