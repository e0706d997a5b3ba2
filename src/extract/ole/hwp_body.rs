//! An HWP 5.0 section's records → blocks of text: paragraphs (with their style) and tables.
//!
//! Records form a tree by their level: a PARA_HEADER at level L owns the records above L that
//! follow it (its PARA_TEXT, its controls at L + 1); a control's lists (table cells, a
//! footnote's body, a text box) hold paragraphs at L + 2, each list opened by a LIST_HEADER.
//! The walk is recursive over controls, capped at [`MAX_DEPTH`] (tables in tables in tables…),
//! and a record out of place is skipped, not trusted.

use super::hwp_records::{
    CTRL_HEADER, LIST_HEADER, PARA_HEADER, PARA_TEXT, Record, TABLE, para_text,
};

/// How deep controls may nest (a table in a cell of a table…) before their content is skipped.
const MAX_DEPTH: usize = 16;
/// A control's id is four ASCII letters, stored as a little-endian word: "tbl " for tables.
const TABLE_ID: u32 = u32::from_be_bytes(*b"tbl ");

/// A control's list of paragraphs, with the (row, column) of the cell it fills, if it is one.
type List = (Option<(u16, u16)>, Vec<Block>);

/// A run of a section's content.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Block {
    /// A paragraph and the id of its style (DocInfo order).
    Paragraph { text: String, style: u8 },
    /// A table's rows, each row's cells in column order.
    Table(Vec<Vec<String>>),
}

/// The blocks of one section's records, in reading order.
pub fn blocks(records: &[Record<'_>]) -> Vec<Block> {
    let mut walk = Walk { records, at: 0 };
    let mut out = Vec::new();
    while let Some(record) = walk.peek() {
        if record.tag == PARA_HEADER {
            walk.paragraph(record.level, 0, &mut out);
        } else {
            walk.at += 1;
        }
    }
    out
}

struct Walk<'r, 'a> {
    records: &'r [Record<'a>],
    at: usize,
}

impl<'a> Walk<'_, 'a> {
    fn peek(&self) -> Option<Record<'a>> {
        self.records.get(self.at).copied()
    }

    /// Steps over the current record and every record nested under it.
    fn skip_subtree(&mut self, level: u16) {
        self.at += 1;
        while self.peek().is_some_and(|r| r.level > level) {
            self.at += 1;
        }
    }

    /// The paragraph at `self.at` (a PARA_HEADER at `level`): its text, then what its
    /// controls hold.
    fn paragraph(&mut self, level: u16, depth: usize, out: &mut Vec<Block>) {
        let style = self
            .peek()
            .and_then(|r| r.data.get(10).copied())
            .unwrap_or(0);
        self.at += 1;
        let mut text = String::new();
        let mut inner = Vec::new();
        while let Some(record) = self.peek().filter(|r| r.level > level) {
            match record.tag {
                PARA_TEXT if record.level == level + 1 => {
                    text.push_str(&para_text(record.data));
                    self.at += 1;
                }
                CTRL_HEADER if record.level == level + 1 && depth < MAX_DEPTH => {
                    self.control(record.level, depth + 1, &mut inner);
                }
                _ => self.skip_subtree(record.level),
            }
        }
        out.push(Block::Paragraph { text, style });
        out.append(&mut inner);
    }

    /// The control at `self.at` (a CTRL_HEADER at `level`): a table becomes a [`Block::Table`],
    /// any other control's paragraphs (footnotes, text boxes, headers) are added as they are.
    fn control(&mut self, level: u16, depth: usize, out: &mut Vec<Block>) {
        let Some(header) = self.peek() else { return };
        let is_table = header.u32_at(0) == Some(TABLE_ID);
        self.at += 1;
        let mut size: Option<(u16, u16)> = None;
        let mut lists: Vec<List> = Vec::new();
        while let Some(record) = self.peek().filter(|r| r.level > level) {
            if record.level != level + 1 {
                self.at += 1;
                continue;
            }
            match record.tag {
                TABLE => {
                    size = record.u16_at(4).zip(record.u16_at(6));
                    self.at += 1;
                }
                LIST_HEADER => {
                    // A cell's list header: paragraph count and flags (8 bytes), then the
                    // cell's column and row.
                    let address = record.u16_at(10).zip(record.u16_at(8));
                    lists.push((address, Vec::new()));
                    self.at += 1;
                }
                PARA_HEADER => {
                    if lists.is_empty() {
                        lists.push((None, Vec::new()));
                    }
                    if let Some((_, blocks)) = lists.last_mut() {
                        self.paragraph(record.level, depth, blocks);
                    }
                }
                _ => self.skip_subtree(record.level),
            }
        }
        match size {
            Some(size) if is_table => out.extend(table(size, lists)),
            _ => out.extend(lists.into_iter().flat_map(|(_, blocks)| blocks)),
        }
    }
}

/// A table's cells placed in rows. A cell whose address is missing or outside the table goes
/// after the previous one. A one-cell table is a frame around text, so its paragraphs stay
/// paragraphs.
fn table((rows, cols): (u16, u16), cells: Vec<List>) -> Vec<Block> {
    if cells.len() == 1 {
        return cells.into_iter().flat_map(|(_, blocks)| blocks).collect();
    }
    let mut placed: Vec<(u16, u16, String)> = Vec::with_capacity(cells.len());
    let mut next = (0u16, 0u16);
    for (address, blocks) in cells {
        let (row, col) = address
            .filter(|&(row, col)| row < rows && col < cols)
            .unwrap_or(next);
        next = (row, col.saturating_add(1));
        placed.push((row, col, cell_text(&blocks)));
    }
    placed.sort_by_key(|&(row, col, _)| (row, col));
    let mut grid: Vec<Vec<String>> = Vec::new();
    let mut current: Option<u16> = None;
    for (row, _, text) in placed {
        if current != Some(row) {
            grid.push(Vec::new());
            current = Some(row);
        }
        if let Some(last) = grid.last_mut() {
            last.push(text);
        }
    }
    vec![Block::Table(grid)]
}

/// A cell's content on one line: its paragraphs (and nested tables' cells) joined by spaces.
fn cell_text(blocks: &[Block]) -> String {
    let mut parts: Vec<&str> = Vec::new();
    for block in blocks {
        match block {
            Block::Paragraph { text, .. } => parts.push(text),
            Block::Table(rows) => parts.extend(rows.iter().flatten().map(String::as_str)),
        }
    }
    parts
        .iter()
        .flat_map(|part| part.split_whitespace())
        .collect::<Vec<_>>()
        .join(" ")
}
