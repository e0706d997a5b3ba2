//! RTF documents: the text a word processor shows, with tables as rows and `\outlinelevel`
//! paragraphs as headings.
//!
//! RTF is groups (`{…}`), control words (`\par`, `\u8364`, `\'e9`) and text. Groups that are not
//! shown — font, colour and style tables, document info, pictures, field instructions and every
//! `\*` destination — are skipped whole. Characters come as `\uN` (UTF-16 units, followed by
//! `\ucN` fallback characters that are skipped) or as `\'hh` bytes in the document's code page
//! (`\ansicpgN`, decoded with `encoding_rs`, so a Korean `\ansicpg949` file reads). Table cells
//! end at `\cell` and rows at `\row`; rows are linearised as `header: value; …`
//! ([`super::csv::linearise`]). Group nesting is capped at [`MAX_DEPTH`] and `\binN` data is
//! stepped over by its length, so the scan is one bounded pass.

use encoding_rs::{Encoding, WINDOWS_1252};

use super::csv::linearise;
use super::{ExtractError, Location, Section};

/// The deepest group nesting read; Word writes a few dozen at most.
const MAX_DEPTH: usize = 1_000;
/// A heading is a short paragraph.
const MAX_HEADING_CHARS: usize = 200;
/// Destinations whose content is not document text.
const SKIPPED: &[&str] = &[
    "fonttbl",
    "colortbl",
    "stylesheet",
    "info",
    "pict",
    "fldinst",
    "listtable",
    "listoverridetable",
    "rsidtbl",
    "generator",
    "xmlnstbl",
    "themedata",
    "colorschememapping",
    "datastore",
    "latentstyles",
    "filetbl",
    "revtbl",
    "object",
    "objdata",
    "nonshppict",
];

/// Extracts an RTF document's text, in sections under its headings.
pub fn extract_rtf(bytes: &[u8]) -> Result<Vec<Section>, ExtractError> {
    if !bytes.starts_with(b"{\\rtf") {
        return Err(ExtractError::Corrupt {
            format: "RTF document",
            reason: "it does not start with {\\rtf".into(),
        });
    }
    let mut reader = Reader::new(bytes);
    reader.run()?;
    let sections = reader.out.finish();
    if sections.is_empty() {
        return Err(ExtractError::NoText);
    }
    Ok(sections)
}

/// Properties that groups save and restore.
#[derive(Debug, Clone, Copy, Default)]
struct State {
    /// Inside a destination that is not shown.
    skip: bool,
    /// Fallback characters after each `\uN`.
    uc: usize,
    /// The paragraph is in a table.
    in_table: bool,
    /// The paragraph's outline level (0 = a top heading).
    outline: Option<usize>,
}

struct Reader<'a> {
    bytes: &'a [u8],
    at: usize,
    stack: Vec<State>,
    state: State,
    encoding: &'static Encoding,
    /// `\'hh` bytes not yet decoded (a double-byte character comes as two of them).
    pending: Vec<u8>,
    /// A high surrogate from `\uN` waiting for its low half.
    high: Option<u16>,
    /// Fallback characters still to skip after a `\uN`.
    to_skip: usize,
    out: Builder,
}

impl<'a> Reader<'a> {
    fn new(bytes: &'a [u8]) -> Self {
        Reader {
            bytes,
            at: 0,
            stack: Vec::new(),
            state: State {
                uc: 1,
                ..State::default()
            },
            encoding: WINDOWS_1252,
            pending: Vec::new(),
            high: None,
            to_skip: 0,
            out: Builder::default(),
        }
    }

    fn run(&mut self) -> Result<(), ExtractError> {
        while let Some(&byte) = self.bytes.get(self.at) {
            self.at += 1;
            match byte {
                b'{' => {
                    self.flush_bytes();
                    if self.stack.len() >= MAX_DEPTH {
                        return Err(ExtractError::TooComplex {
                            reason: format!("its groups nest more than {MAX_DEPTH} deep"),
                        });
                    }
                    self.stack.push(self.state);
                    self.to_skip = 0;
                }
                b'}' => {
                    self.flush_bytes();
                    self.state = self.stack.pop().unwrap_or(self.state);
                    self.to_skip = 0;
                }
                b'\\' => self.control()?,
                b'\r' | b'\n' => {}
                _ => {
                    if self.skip_fallback() {
                        continue;
                    }
                    self.flush_bytes();
                    self.text_char(char::from(byte));
                }
            }
        }
        self.flush_bytes();
        Ok(())
    }

    /// Whether this character is a `\uN` fallback to drop.
    fn skip_fallback(&mut self) -> bool {
        if self.to_skip > 0 {
            self.to_skip -= 1;
            return true;
        }
        false
    }

    fn control(&mut self) -> Result<(), ExtractError> {
        let Some(&first) = self.bytes.get(self.at) else {
            return Ok(());
        };
        if !first.is_ascii_alphabetic() {
            self.at += 1;
            return self.symbol(first);
        }
        let start = self.at;
        while self.bytes.get(self.at).is_some_and(u8::is_ascii_alphabetic) {
            self.at += 1;
        }
        let word = std::str::from_utf8(&self.bytes[start..self.at]).unwrap_or("");
        let number_start = self.at;
        if self.bytes.get(self.at) == Some(&b'-') {
            self.at += 1;
        }
        while self.bytes.get(self.at).is_some_and(u8::is_ascii_digit) {
            self.at += 1;
        }
        let parameter = std::str::from_utf8(&self.bytes[number_start..self.at])
            .ok()
            .and_then(|n| n.parse::<i64>().ok());
        // One space after a control word belongs to it.
        if self.bytes.get(self.at) == Some(&b' ') {
            self.at += 1;
        }
        if word != "u" && self.skip_fallback() {
            return Ok(());
        }
        self.word(word, parameter);
        Ok(())
    }

    /// `\'hh`, `\\`, `\{`, `\}`, `\~`, `\*` and the other one-character controls.
    fn symbol(&mut self, symbol: u8) -> Result<(), ExtractError> {
        match symbol {
            b'\'' => {
                let hex = self.bytes.get(self.at..self.at + 2).unwrap_or_default();
                self.at += hex.len();
                let value = std::str::from_utf8(hex)
                    .ok()
                    .and_then(|h| u8::from_str_radix(h, 16).ok());
                if let Some(value) = value
                    && !self.skip_fallback()
                    && !self.state.skip
                {
                    self.pending.push(value);
                }
            }
            b'*' => self.state.skip = true,
            b'\\' | b'{' | b'}' if !self.skip_fallback() => {
                self.flush_bytes();
                self.text_char(char::from(symbol));
            }
            b'~' => self.text_char(' '),
            b'_' => self.text_char('-'),
            b'\r' | b'\n' => self.paragraph_end(),
            _ => {}
        }
        Ok(())
    }

    fn word(&mut self, word: &str, parameter: Option<i64>) {
        self.flush_bytes();
        let text = |c: char, reader: &mut Self| reader.text_char(c);
        match word {
            _ if SKIPPED.contains(&word) => self.state.skip = true,
            "ansicpg" => {
                let label = parameter.map(code_page_label).unwrap_or("windows-1252");
                self.encoding = Encoding::for_label(label.as_bytes()).unwrap_or(WINDOWS_1252);
            }
            "uc" => self.state.uc = parameter.and_then(|n| usize::try_from(n).ok()).unwrap_or(1),
            "u" => {
                if let Some(n) = parameter {
                    // A signed 16-bit value: negative numbers are units above 0x7FFF.
                    self.unit((n & 0xffff) as u16);
                    self.to_skip = self.state.uc;
                }
            }
            "bin" => {
                let len = parameter.and_then(|n| usize::try_from(n).ok()).unwrap_or(0);
                self.at = self.at.saturating_add(len);
            }
            "par" | "sect" | "page" => self.paragraph_end(),
            "pard" => {
                self.state.in_table = false;
                self.state.outline = None;
            }
            "intbl" => self.state.in_table = true,
            "outlinelevel" => {
                self.state.outline = parameter.and_then(|n| usize::try_from(n).ok());
            }
            "cell" | "nestcell" => self.out.cell_end(),
            "row" | "nestrow" => self.out.row_end(),
            "line" => text('\n', self),
            "tab" => text('\t', self),
            "emdash" => text('—', self),
            "endash" => text('–', self),
            "bullet" => text('•', self),
            "lquote" => text('‘', self),
            "rquote" => text('’', self),
            "ldblquote" => text('“', self),
            "rdblquote" => text('”', self),
            "emspace" | "enspace" | "qmspace" => text(' ', self),
            _ => {}
        }
    }

    fn paragraph_end(&mut self) {
        self.flush_bytes();
        if self.state.skip {
            return;
        }
        if self.state.in_table {
            self.out.text.push(' ');
        } else {
            self.out.paragraph_end(self.state.outline);
        }
    }

    fn unit(&mut self, unit: u16) {
        if self.state.skip {
            return;
        }
        let units: Vec<u16> = match (self.high.take(), unit) {
            (_, 0xd800..=0xdbff) => {
                self.high = Some(unit);
                return;
            }
            (Some(high), 0xdc00..=0xdfff) => vec![high, unit],
            (_, unit) => vec![unit],
        };
        for c in char::decode_utf16(units).filter_map(Result::ok) {
            self.out.text.push(c);
        }
    }

    fn text_char(&mut self, c: char) {
        if !self.state.skip {
            self.out.text.push(c);
        }
    }

    fn flush_bytes(&mut self) {
        if self.pending.is_empty() {
            return;
        }
        let (text, _, _) = self.encoding.decode(&self.pending);
        if !self.state.skip {
            self.out.text.push_str(&text);
        }
        self.pending.clear();
    }
}

/// The `encoding_rs` label of a Windows code page number.
fn code_page_label(page: i64) -> &'static str {
    match page {
        932 => "shift_jis",
        936 => "gbk",
        949 => "euc-kr",
        950 => "big5",
        874 => "windows-874",
        1250 => "windows-1250",
        1251 => "windows-1251",
        1253 => "windows-1253",
        1254 => "windows-1254",
        1255 => "windows-1255",
        1256 => "windows-1256",
        1257 => "windows-1257",
        1258 => "windows-1258",
        65001 => "utf-8",
        _ => "windows-1252",
    }
}

/// Paragraphs, tables and headings as they end.
#[derive(Default)]
struct Builder {
    /// The paragraph (or cell) being read.
    text: String,
    row: Vec<String>,
    table: Vec<Vec<String>>,
    blocks: Vec<String>,
    path: Vec<(usize, String)>,
    sections: Vec<Section>,
}

impl Builder {
    fn cell_end(&mut self) {
        let cell = std::mem::take(&mut self.text);
        self.row
            .push(cell.split_whitespace().collect::<Vec<_>>().join(" "));
    }

    fn row_end(&mut self) {
        if !self.text.trim().is_empty() {
            self.cell_end();
        }
        self.text.clear();
        let row = std::mem::take(&mut self.row);
        self.table.push(row);
    }

    fn table_end(&mut self) {
        if !self.row.is_empty() {
            self.row_end();
        }
        let table = std::mem::take(&mut self.table);
        let lines = linearise(&table);
        if !lines.is_empty() {
            self.blocks.push(lines.join("\n"));
        }
    }

    fn paragraph_end(&mut self, outline: Option<usize>) {
        self.table_end();
        let text = std::mem::take(&mut self.text);
        let text = text.trim();
        if text.is_empty() {
            return;
        }
        match outline {
            Some(level) if text.chars().count() <= MAX_HEADING_CHARS => {
                self.flush();
                self.path.retain(|(l, _)| *l < level);
                self.path.push((level, text.to_owned()));
            }
            _ => {}
        }
        self.blocks.push(text.to_owned());
    }

    fn flush(&mut self) {
        if self.blocks.is_empty() {
            return;
        }
        self.sections.push(Section {
            location: Location::Section {
                path: self.path.iter().map(|(_, t)| t.clone()).collect(),
            },
            text: std::mem::take(&mut self.blocks).join("\n\n"),
        });
    }

    fn finish(mut self) -> Vec<Section> {
        self.paragraph_end(None);
        self.flush();
        self.sections
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn text(rtf: &str) -> String {
        extract_rtf(rtf.as_bytes())
            .map(|s| {
                s.into_iter()
                    .map(|s| s.text)
                    .collect::<Vec<_>>()
                    .join("\n\n")
            })
            .unwrap_or_else(|e| format!("error: {e}"))
    }

    #[test]
    fn unicode_escapes_skip_their_fallback_and_code_pages_decode() {
        assert_eq!(text(r"{\rtf1\uc1 caf\u233?\par}"), "café");
        assert_eq!(
            text(r"{\rtf1\uc2 \u-10179\'3f\'3f\u-8576??x\par}"),
            "\u{1f680}x"
        );
        // 한 is C7 D1 in code page 949.
        assert_eq!(text(r"{\rtf1\ansi\ansicpg949 \'c7\'d1 a\par}"), "한 a");
    }

    #[test]
    fn hidden_destinations_are_skipped() {
        let rtf = r"{\rtf1{\fonttbl{\f0 Arial;}}{\*\generator Writer;}{\info{\title T}}Body {\field{\*\fldinst HYPERLINK x}{\fldrslt link}}\par}";
        assert_eq!(text(rtf), "Body link");
    }

    #[test]
    fn headings_become_the_path_and_tables_rows() {
        let path = format!(
            "{}/fixtures/office/extraction-test.rtf",
            env!("CARGO_MANIFEST_DIR")
        );
        let sections = extract_rtf(&std::fs::read(path).unwrap()).unwrap();
        let all: Vec<String> = sections.iter().map(|s| s.text.clone()).collect();
        let all = all.join("\n\n");
        assert!(
            all.starts_with("Comprehensive Extraction Test Document"),
            "{all}"
        );
        assert!(
            all.contains("Header 1: Cell 1A; Header 2: Cell 1B; Header 3: Cell 1C"),
            "{all}"
        );
        let table = sections
            .iter()
            .find(|s| s.text.contains("Cell 2B"))
            .unwrap();
        assert_eq!(
            table.location.label(),
            "Comprehensive Extraction Test Document › Second Section › Table Section"
        );
        assert!(
            !all.contains("Helvetica") && !all.contains("pandoc-test"),
            "{all}"
        );
    }

    #[test]
    fn absurd_nesting_is_refused() {
        let rtf = format!("{{\\rtf1 {}x{}", "{".repeat(5_000), "}".repeat(5_001));
        assert!(matches!(
            extract_rtf(rtf.as_bytes()),
            Err(ExtractError::TooComplex { .. })
        ));
    }
}
