//! Legacy Excel workbooks (BIFF8 `.xls`), read with calamine: every sheet in workbook order,
//! each cell's value (formulas by their cached value), rows linearised through the sheet's
//! header ([`crate::extract::csv::sheet_sections`]).
//!
//! calamine parses the compound file again by itself; it is a maintained reader, but a panic
//! inside it on a hostile file must not reach the worker, so it runs under `catch_unwind` and
//! a panic becomes a damaged-file error.

use std::io::Cursor;
use std::panic::{AssertUnwindSafe, catch_unwind};

use calamine::{Data, Reader, Xls, XlsError};

use crate::extract::csv::sheet_sections;
use crate::extract::{ExtractError, Section};

const FORMAT: &str = "Excel 97–2003 workbook";

/// Extracts every sheet of an `.xls` file.
pub(super) fn extract(bytes: &[u8]) -> Result<Vec<Section>, ExtractError> {
    let read = catch_unwind(AssertUnwindSafe(|| read(bytes))).unwrap_or_else(|_| {
        Err(ExtractError::Corrupt {
            format: FORMAT,
            reason: "the workbook could not be parsed".into(),
        })
    });
    let sections = read?;
    if sections.is_empty() {
        return Err(ExtractError::NoText);
    }
    Ok(sections)
}

fn read(bytes: &[u8]) -> Result<Vec<Section>, ExtractError> {
    let mut workbook: Xls<_> = Xls::new(Cursor::new(bytes)).map_err(error)?;
    let mut sections = Vec::new();
    for name in workbook.sheet_names() {
        let range = workbook.worksheet_range(&name).map_err(error)?;
        let (first_row, first_col) = range.start().unwrap_or((0, 0));
        let rows = range.rows().zip(first_row..).map(|(cells, row)| {
            // Leading empty columns keep their place so cells stay under their header.
            let mut line: Vec<String> = vec![String::new(); first_col as usize];
            line.extend(cells.iter().map(cell_text));
            (row.saturating_add(1), line)
        });
        sections.extend(sheet_sections(&name, rows));
    }
    Ok(sections)
}

fn cell_text(cell: &Data) -> String {
    match cell {
        Data::Empty | Data::Error(_) => String::new(),
        other => other.to_string(),
    }
}

fn error(e: XlsError) -> ExtractError {
    match e {
        XlsError::Password => ExtractError::Encrypted { format: FORMAT },
        other => ExtractError::Corrupt {
            format: FORMAT,
            reason: other.to_string(),
        },
    }
}
