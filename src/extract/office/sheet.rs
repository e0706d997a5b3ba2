//! Spreadsheets (XLSX, ODS) through calamine: every sheet in workbook order, each cell as its
//! cached value (a formula's last computed result, as the program showed it). A sheet's first
//! row of two or more cells names the columns; each later row is linearised `header: value; …`, and rows
//! are grouped into sections of about [`SECTION_CHARS`] so a hit names the rows it sits in
//! ("Q1, rows 4–9").
//!
//! calamine opens the zip itself, so the container is first held to the caps by inflating it
//! once ([`Archive::check_all`]).

use std::io::Cursor;

use calamine::{Data, Ods, Range, Reader, Xlsx, open_workbook_from_rs};

use super::archive::Archive;
use super::xml::linearise;
use crate::extract::{ExtractError, Location, Section};

/// About how much text one section of rows holds: near one chunk.
const SECTION_CHARS: usize = 1500;

/// The sections of an XLSX workbook.
pub(crate) fn read_xlsx(bytes: &[u8]) -> Result<Vec<Section>, ExtractError> {
    let format = "Excel workbook";
    Archive::open(bytes, format)?.check_all()?;
    let book: Xlsx<_> =
        open_workbook_from_rs(Cursor::new(bytes)).map_err(|e| corrupt(format, &e))?;
    sheets(book, format)
}

/// The sections of an ODS spreadsheet.
pub(crate) fn read_ods(bytes: &[u8]) -> Result<Vec<Section>, ExtractError> {
    let format = "OpenDocument spreadsheet";
    Archive::open(bytes, format)?.check_all()?;
    let book: Ods<_> =
        open_workbook_from_rs(Cursor::new(bytes)).map_err(|e| corrupt(format, &e))?;
    sheets(book, format)
}

fn sheets<'a, R>(mut book: R, format: &'static str) -> Result<Vec<Section>, ExtractError>
where
    R: Reader<Cursor<&'a [u8]>>,
    R::Error: std::fmt::Display,
{
    let mut sections = Vec::new();
    for name in book.sheet_names() {
        let range = book
            .worksheet_range(&name)
            .map_err(|err| corrupt(format, &err))?;
        sections.extend(sheet_sections(&name, &range));
    }
    Ok(sections)
}

/// One sheet's rows, linearised under its header row and grouped.
fn sheet_sections(name: &str, range: &Range<Data>) -> Vec<Section> {
    // Row numbers as the program shows them: the range may start below row 1.
    let first_row = range.start().map_or(1, |(row, _)| row + 1);
    let mut header: Option<Vec<String>> = None;
    let mut sections = Vec::new();
    let mut lines: Vec<String> = Vec::new();
    let mut span: Option<(u32, u32)> = None;
    for (at, row) in range.rows().enumerate() {
        let cells: Vec<String> = row
            .iter()
            .map(|c| c.to_string().trim().to_owned())
            .collect();
        if cells.iter().all(String::is_empty) {
            continue;
        }
        let number = first_row + u32::try_from(at).unwrap_or(u32::MAX - first_row);
        let filled = cells.iter().filter(|c| !c.is_empty()).count();
        let line = match &header {
            // A lone cell above the columns is a title, not a header.
            None if filled < 2 => linearise(&[cells]),
            None => {
                header = Some(cells.clone());
                linearise(&[cells])
            }
            Some(header) => {
                let text = linearise(&[header.clone(), cells]);
                text.split_once('\n')
                    .map_or(text.clone(), |(_, row)| row.to_owned())
            }
        };
        span = Some(span.map_or((number, number), |(start, _)| (start, number)));
        lines.push(line);
        if lines.iter().map(String::len).sum::<usize>() >= SECTION_CHARS {
            sections.push(section(name, span.take(), std::mem::take(&mut lines)));
        }
    }
    if !lines.is_empty() {
        sections.push(section(name, span, lines));
    }
    sections
}

fn section(name: &str, span: Option<(u32, u32)>, lines: Vec<String>) -> Section {
    let (first_row, last_row) = span.unwrap_or((1, 1));
    Section {
        location: Location::Sheet {
            name: name.to_owned(),
            first_row,
            last_row,
        },
        text: lines.join("\n"),
    }
}

fn corrupt(format: &'static str, err: &dyn std::fmt::Display) -> ExtractError {
    ExtractError::Corrupt {
        format,
        reason: format!("the workbook cannot be read ({err})"),
    }
}
