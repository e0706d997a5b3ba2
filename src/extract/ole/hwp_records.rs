//! HWP 5.0's record layer: a stream is a run of tagged records (a 32-bit header of tag, level
//! and size, the size extended by a second word when it is 0xFFF), and a paragraph's text is
//! UTF-16 with control characters inline. Everything here reads file data through checked
//! accessors.

use super::budget::Budget;
use crate::extract::ExtractError;

/// Tag numbers start here (HWPTAG_BEGIN).
const BEGIN: u16 = 0x10;
/// DocInfo: a style (names and the paragraph shape it uses).
pub const STYLE: u16 = BEGIN + 10;
/// ViewText: the distribution document's key material, 256 bytes.
pub const DISTRIBUTE_DOC_DATA: u16 = BEGIN + 12;
/// BodyText: a paragraph starts.
pub const PARA_HEADER: u16 = BEGIN + 50;
/// BodyText: the paragraph's characters.
pub const PARA_TEXT: u16 = BEGIN + 51;
/// BodyText: a control (table, footnote, header, shape…) anchored in the paragraph.
pub const CTRL_HEADER: u16 = BEGIN + 55;
/// BodyText: a list of paragraphs inside a control (a table cell, a footnote's body).
pub const LIST_HEADER: u16 = BEGIN + 56;
/// BodyText: a table's dimensions.
pub const TABLE: u16 = BEGIN + 61;

/// One record: its tag, nesting level and payload.
#[derive(Debug, Clone, Copy)]
pub struct Record<'a> {
    pub tag: u16,
    pub level: u16,
    pub data: &'a [u8],
}

impl Record<'_> {
    /// The little-endian `u16` at `at`, if the payload is long enough.
    pub fn u16_at(&self, at: usize) -> Option<u16> {
        let bytes = self.data.get(at..at.checked_add(2)?)?;
        Some(u16::from_le_bytes([bytes[0], bytes[1]]))
    }

    /// The little-endian `u32` at `at`, if the payload is long enough.
    pub fn u32_at(&self, at: usize) -> Option<u32> {
        let bytes = self.data.get(at..at.checked_add(4)?)?;
        Some(u32::from_le_bytes([bytes[0], bytes[1], bytes[2], bytes[3]]))
    }
}

/// Splits a stream into records; a record that runs past the end is a damaged file.
pub fn records<'a>(stream: &'a [u8], budget: &mut Budget) -> Result<Vec<Record<'a>>, ExtractError> {
    let mut out = Vec::new();
    let mut rest = stream;
    while !rest.is_empty() {
        let (header, tail) =
            split_u32(rest).ok_or_else(|| damaged("a record header is cut short"))?;
        let tag = (header & 0x3ff) as u16;
        let level = ((header >> 10) & 0x3ff) as u16;
        let (size, tail) = match header >> 20 {
            0xfff => split_u32(tail).ok_or_else(|| damaged("a record size is cut short"))?,
            size => (size, tail),
        };
        let size = usize::try_from(size).unwrap_or(usize::MAX);
        let data = tail
            .get(..size)
            .ok_or_else(|| damaged("a record runs past the end of its stream"))?;
        budget.take_record()?;
        out.push(Record { tag, level, data });
        rest = &tail[size..];
    }
    Ok(out)
}

fn split_u32(bytes: &[u8]) -> Option<(u32, &[u8])> {
    let (head, tail) = bytes.split_first_chunk::<4>()?;
    Some((u32::from_le_bytes(*head), tail))
}

/// The error for an HWP file whose records do not add up.
pub fn damaged(reason: &str) -> ExtractError {
    ExtractError::Corrupt {
        format: "HWP document",
        reason: reason.to_owned(),
    }
}

/// The text of a PARA_TEXT record. Control characters (code units below 32) are of three
/// widths: "char" controls are one unit (line break, paragraph end, hyphen, fixed-width and
/// non-breaking spaces); "inline" and "extended" controls take eight units (the code, six units
/// of parameters or a pointer to a control, the code again), and none of that is text. The
/// rest is UTF-16, surrogate pairs included, so syllables and astral characters come out
/// whole; a lone surrogate is dropped rather than shown as U+FFFD.
pub fn para_text(data: &[u8]) -> String {
    let units: Vec<u16> = data
        .chunks_exact(2)
        .map(|pair| u16::from_le_bytes([pair[0], pair[1]]))
        .collect();
    let mut text: Vec<u16> = Vec::with_capacity(units.len());
    let mut i = 0;
    while let Some(&unit) = units.get(i) {
        i += 1;
        if unit >= 32 {
            text.push(unit);
            continue;
        }
        match unit {
            // Line break inside a paragraph.
            10 => text.push(u16::from(b'\n')),
            // Hyphen; non-breaking space; fixed-width space.
            24 => text.push(u16::from(b'-')),
            30 | 31 => text.push(u16::from(b' ')),
            // Unusable, paragraph end, reserved one-unit controls.
            0 | 13 | 25..=29 => {}
            // A tab is an inline control: eight units that stand for one tab.
            9 => {
                text.push(u16::from(b'\t'));
                i += 7;
            }
            // Every other control is eight units wide.
            _ => i += 7,
        }
    }
    char::decode_utf16(text)
        .filter_map(Result::ok)
        .collect::<String>()
}

/// A style's names (DocInfo STYLE record): the local (Korean) and the English name.
pub fn style_names(record: &Record<'_>) -> Option<(String, String)> {
    let local_len = usize::from(record.u16_at(0)?);
    let local_end = 2 + local_len * 2;
    let local = utf16(record.data.get(2..local_end)?);
    let english_len = usize::from(record.u16_at(local_end)?);
    let english_start = local_end + 2;
    let english = utf16(
        record
            .data
            .get(english_start..english_start + english_len * 2)?,
    );
    Some((local, english))
}

fn utf16(bytes: &[u8]) -> String {
    let units = bytes
        .chunks_exact(2)
        .map(|pair| u16::from_le_bytes([pair[0], pair[1]]));
    char::decode_utf16(units).filter_map(Result::ok).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn units(units: &[u16]) -> Vec<u8> {
        units.iter().flat_map(|u| u.to_le_bytes()).collect()
    }

    #[test]
    fn controls_are_dropped_whole_and_syllables_kept() {
        // "한" then a table anchor (extended control 11, eight units), "국", a tab (inline,
        // eight units), "어", a paragraph end.
        let mut text = vec![0xd55c];
        text.extend([11, 0x6c74, 0x2062, 0, 0, 0, 0, 11]);
        text.push(0xad6d);
        text.extend([9, 0, 0, 0, 0, 0, 0, 9]);
        text.extend([0xc5b4, 13]);
        assert_eq!(para_text(&units(&text)), "한국\t어");
    }

    #[test]
    fn surrogate_pairs_decode_and_lone_halves_are_dropped() {
        // U+10330 (Gothic ahsa) as a pair, then a lone high surrogate, then "a".
        let text = [0xd800, 0xdf30, 0xd800, u16::from(b'a')];
        assert_eq!(para_text(&units(&text)), "\u{10330}a");
    }

    #[test]
    fn a_record_past_the_end_is_damaged_and_extended_sizes_read() {
        let mut budget = Budget::default();
        // Tag 0x43, level 1, size 4 but only 2 bytes follow.
        let header: u32 = 0x43 | (1 << 10) | (4 << 20);
        let mut bytes = header.to_le_bytes().to_vec();
        bytes.extend([1, 2]);
        assert!(matches!(
            records(&bytes, &mut budget),
            Err(ExtractError::Corrupt { .. })
        ));
        // Size 0xFFF: the real size (3) follows in its own word.
        let header: u32 = 0x43 | (0xfff << 20);
        let mut bytes = header.to_le_bytes().to_vec();
        bytes.extend(3u32.to_le_bytes());
        bytes.extend([7, 8, 9]);
        let parsed = records(&bytes, &mut budget).unwrap();
        assert_eq!(parsed.len(), 1);
        assert_eq!(parsed[0].data, [7, 8, 9]);
    }
}
