//! CSV and TSV files, and the table linearisation every reader of tables shares.
//!
//! A table is read by people through its header, and a question about a cell should find the
//! cell's row, so each row becomes one line `header: value; header: value` ([`linearise`]),
//! with the first row of two or more cells as the header. Sheets are returned in [`Section`]s of a few
//! rows each ([`sheet_sections`]), so a hit says which rows it is from.
//!
//! The bytes are decoded with the encoding sniffing found ([`super::sniff()`], the detector of
//! [`super::decode`]: a CP932 or EUC-KR file reads), then split with RFC 4180 quoting (quoted
//! cells may hold the delimiter, doubled quotes and line breaks). The delimiter is the one of
//! tab, semicolon and comma that the first line uses most.

use encoding_rs::Encoding;

use super::decode::{decode, normalize};
use super::{ExtractError, Location, Section};

/// A section holds rows until its text passes this many characters: a hit then names a few
/// rows, not the whole sheet.
const SECTION_CHARS: usize = 1_500;
/// A header cell is a name, not a sentence: a first row with a longer cell is data.
const MAX_HEADER_CHARS: usize = 40;
/// The most cells a CSV file may have (a 100 MB file of one-character cells has 50 million).
const MAX_CELLS: usize = 5_000_000;

/// Reads a CSV or TSV file as a sheet named `name` (the file stem, or "CSV").
pub fn extract_csv(
    bytes: &[u8],
    encoding: Option<&'static Encoding>,
    name: &str,
) -> Result<Vec<Section>, ExtractError> {
    let text = decode(bytes, encoding);
    let rows = parse(&text)?;
    let numbered = rows.into_iter().zip(1u32..).map(|(row, n)| (n, row));
    let name = if name.trim().is_empty() { "CSV" } else { name };
    let sections = sheet_sections(name, numbered);
    if sections.is_empty() {
        return Err(ExtractError::NoText);
    }
    Ok(sections)
}

/// Splits decoded text into rows of cells.
fn parse(text: &str) -> Result<Vec<Vec<String>>, ExtractError> {
    let delimiter = delimiter(text);
    let mut rows = Vec::new();
    let mut row = Vec::new();
    let mut cell = String::new();
    let mut quoted = false;
    let mut cells = 0usize;
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '"' if quoted && chars.peek() == Some(&'"') => {
                chars.next();
                cell.push('"');
            }
            '"' if quoted => quoted = false,
            '"' if cell.trim().is_empty() => {
                cell.clear();
                quoted = true;
            }
            c if c == delimiter && !quoted => row.push(std::mem::take(&mut cell)),
            '\r' if !quoted => {}
            '\n' if !quoted => {
                row.push(std::mem::take(&mut cell));
                cells += row.len();
                rows.push(std::mem::take(&mut row));
            }
            c => cell.push(c),
        }
        if cells > MAX_CELLS {
            return Err(ExtractError::TooComplex {
                reason: format!("the table has more than {MAX_CELLS} cells"),
            });
        }
    }
    if !cell.is_empty() || !row.is_empty() {
        row.push(cell);
        rows.push(row);
    }
    Ok(rows)
}

/// Tab, semicolon or comma: whichever the first line has most of (comma on a tie).
fn delimiter(text: &str) -> char {
    let first = text.lines().find(|l| !l.trim().is_empty()).unwrap_or("");
    let count = |d: char| first.matches(d).count();
    [',', ';', '\t']
        .into_iter()
        .max_by_key(|&d| (count(d), d == ','))
        .unwrap_or(',')
}

/// Rows (numbered as the program shows them) → the sheet's sections of linearised rows.
pub(crate) fn sheet_sections(
    name: &str,
    rows: impl IntoIterator<Item = (u32, Vec<String>)>,
) -> Vec<Section> {
    let mut sections = Vec::new();
    let mut text = String::new();
    let mut span: Option<(u32, u32)> = None;
    for (number, line) in linearise_numbered(rows) {
        if text.len() + line.len() > SECTION_CHARS && !text.is_empty() {
            sections.extend(sheet_section(name, span.take(), std::mem::take(&mut text)));
        }
        if !text.is_empty() {
            text.push('\n');
        }
        text.push_str(&line);
        span = Some(span.map_or((number, number), |(first, _)| (first, number)));
    }
    sections.extend(sheet_section(name, span, text));
    sections
}

fn sheet_section(name: &str, span: Option<(u32, u32)>, text: String) -> Option<Section> {
    let (first_row, last_row) = span?;
    Some(Section {
        location: Location::Sheet {
            name: name.to_owned(),
            first_row,
            last_row,
        },
        text,
    })
}

/// A table's rows as lines: `header: value; header: value`, the header being the first row
/// with two or more non-empty cells (one-cell rows above it are titles, kept as they are),
/// unless one of its cells is longer than a name: then no row is a header and each row is its
/// cells joined by `; ` (label/value tables, common in Korean forms). Empty cells are left out; a value under an empty or identical header
/// stands alone. Empty rows give no line.
pub(crate) fn linearise(rows: &[Vec<String>]) -> Vec<String> {
    let numbered = rows.iter().cloned().zip(1u32..).map(|(row, n)| (n, row));
    linearise_numbered(numbered)
        .into_iter()
        .map(|(_, line)| line)
        .collect()
}

fn linearise_numbered(rows: impl IntoIterator<Item = (u32, Vec<String>)>) -> Vec<(u32, String)> {
    // None: not decided yet; Some(None): the table has no header row.
    let mut header: Option<Option<Vec<String>>> = None;
    let mut lines = Vec::new();
    for (number, row) in rows {
        let row: Vec<String> = row.iter().map(|cell| clean(cell)).collect();
        if row.iter().all(String::is_empty) {
            continue;
        }
        let Some(Some(names)) = &header else {
            lines.push((number, join_cells(&row)));
            // A row with one cell above the header is a title, not the header; a first row
            // with a long cell is data (a label/value table), and the table has no header.
            let filled: Vec<&String> = row.iter().filter(|c| !c.is_empty()).collect();
            if header.is_none() && filled.len() > 1 {
                let names = filled.iter().all(|c| c.chars().count() <= MAX_HEADER_CHARS);
                header = Some(names.then_some(row));
            }
            continue;
        };
        let pairs: Vec<String> = row
            .iter()
            .enumerate()
            .filter(|(_, value)| !value.is_empty())
            .map(
                |(i, value)| match names.get(i).filter(|n| !n.is_empty() && *n != value) {
                    Some(name) => format!("{name}: {value}"),
                    None => value.clone(),
                },
            )
            .collect();
        lines.push((number, pairs.join("; ")));
    }
    lines
}

fn join_cells(row: &[String]) -> String {
    row.iter()
        .filter(|c| !c.is_empty())
        .map(String::as_str)
        .collect::<Vec<_>>()
        .join("; ")
}

/// A cell on one line: line breaks and runs of whitespace become single spaces.
fn clean(cell: &str) -> String {
    normalize(cell)
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fixture(name: &str) -> Vec<u8> {
        let path = format!("{}/fixtures/office/{name}", env!("CARGO_MANIFEST_DIR"));
        std::fs::read(&path).unwrap_or_else(|e| panic!("{path}: {e}"))
    }

    fn read(name: &str) -> Vec<Section> {
        let bytes = fixture(name);
        let sniffed = crate::extract::sniff(&bytes, name).unwrap();
        extract_csv(&bytes, sniffed.encoding, "people").unwrap()
    }

    #[test]
    fn a_cp932_file_reads_in_japanese_through_its_header() {
        let sections = read("japanese-cp932.csv");
        assert_eq!(sections.len(), 1);
        let text = &sections[0].text;
        assert!(text.contains("佐藤太郎"), "{text}");
        assert_eq!(text.lines().count(), 4, "{text}");
        assert!(
            text.lines().nth(1).unwrap().contains(": 佐藤太郎"),
            "{text}"
        );
        assert_eq!(
            sections[0].location,
            Location::Sheet {
                name: "people".into(),
                first_row: 1,
                last_row: 4
            }
        );
    }

    #[test]
    fn a_title_row_empty_rows_and_a_multi_line_cell_read() {
        let text = &read("numbers-and-squares.csv")[0].text;
        assert!(text.starts_with("Sample CSV File"), "{text}");
        assert!(
            text.contains("\nNumber; Square\nNumber: 1; Square: 1\n"),
            "{text}"
        );
        assert!(text.lines().all(|l| !l.trim().is_empty()), "{text}");
    }

    #[test]
    fn quoted_cells_keep_delimiters_quotes_and_line_breaks() {
        let rows = parse("a,b\n\"x, y\",\"say \"\"hi\"\"\nthere\"\n").unwrap();
        assert_eq!(
            rows,
            vec![vec!["a", "b"], vec!["x, y", "say \"hi\"\nthere"]]
        );
    }

    #[test]
    fn rows_read_through_their_header() {
        let rows = vec![
            vec![String::new(), String::new()],
            vec!["Name".into(), "City".into()],
            vec!["Ana".into(), "Porto\nNorte".into()],
            vec!["Bo".into(), String::new()],
        ];
        assert_eq!(
            linearise(&rows),
            ["Name; City", "Name: Ana; City: Porto Norte", "Name: Bo"]
        );
        let labels = vec![
            vec![
                "Date".into(),
                "Embargoed until Tuesday morning, online from noon on Monday".into(),
            ],
            vec!["Contact".into(), "Press office".into()],
        ];
        assert_eq!(
            linearise(&labels),
            [
                "Date; Embargoed until Tuesday morning, online from noon on Monday",
                "Contact; Press office"
            ]
        );
    }

    #[test]
    fn tabs_win_over_commas_when_the_header_uses_them() {
        assert_eq!(delimiter("a\tb, c\td\n1\t2\t3"), '\t');
        assert_eq!(delimiter("a;b;c\n"), ';');
        assert_eq!(delimiter("just one cell\n"), ',');
    }

    #[test]
    fn long_sheets_are_cut_into_sections_of_rows() {
        let rows = (1..=200).map(|n| (n, vec![format!("row {n}"), "x".repeat(40)]));
        let sections = sheet_sections("Data", rows);
        assert!(sections.len() > 3);
        let Location::Sheet {
            first_row,
            last_row,
            ..
        } = &sections[1].location
        else {
            panic!("not a sheet: {:?}", sections[1].location);
        };
        assert!(first_row <= last_row && *first_row > 1);
        assert!(
            sections[1]
                .text
                .starts_with(&format!("row 1: row {first_row}"))
        );
    }
}
