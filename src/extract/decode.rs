//! Bytes → `String` for text kinds, shared by sniffing and extraction.
//!
//! Decoding is `encoding_rs`'s, plus ISO-2022-KR, which `encoding_rs` deliberately does not
//! decode (WHATWG maps it to the replacement encoding) but which old Korean mail and text
//! archives still use. Also here: the test for "this decoded text is really binary junk".

use std::borrow::Cow;

use encoding_rs::{EUC_KR, Encoding, REPLACEMENT, UTF_8};

/// The escape sequence that announces KS X 1001 in ISO-2022-KR (RFC 1557).
const ISO_2022_KR_DESIGNATOR: &[u8] = b"\x1b$)C";
/// Shift Out: following bytes are KS X 1001 pairs.
const SHIFT_OUT: u8 = 0x0e;
/// Shift In: back to ASCII.
const SHIFT_IN: u8 = 0x0f;

/// Whether 7-bit bytes announce ISO-2022-KR.
pub(crate) fn looks_like_iso_2022_kr(bytes: &[u8]) -> bool {
    bytes.is_ascii()
        && bytes
            .windows(ISO_2022_KR_DESIGNATOR.len())
            .any(|w| w == ISO_2022_KR_DESIGNATOR)
}

/// Decodes `bytes`; a byte-order mark, if present, overrides `encoding` and is removed.
/// `None` means UTF-8. Malformed sequences become U+FFFD rather than failing.
pub(crate) fn decode(bytes: &[u8], encoding: Option<&'static Encoding>) -> String {
    let encoding = encoding.unwrap_or(UTF_8);
    if encoding == REPLACEMENT && Encoding::for_bom(bytes).is_none() {
        return decode_iso_2022_kr(bytes);
    }
    let (text, actual, _) = encoding.decode(bytes);
    if actual == EUC_KR {
        return compose_makeup_sequences(&text).into_owned();
    }
    text.into_owned()
}

/// ISO-2022-KR is EUC-KR with the high bit cleared inside SO…SI runs: restore the bit and let
/// `encoding_rs` decode EUC-KR. The designator line and the shift bytes are dropped.
fn decode_iso_2022_kr(bytes: &[u8]) -> String {
    let mut euc = Vec::with_capacity(bytes.len());
    let mut shifted = false;
    let mut rest = bytes;
    while let Some((&byte, tail)) = rest.split_first() {
        if rest.starts_with(ISO_2022_KR_DESIGNATOR) {
            rest = &rest[ISO_2022_KR_DESIGNATOR.len()..];
            continue;
        }
        match byte {
            SHIFT_OUT => shifted = true,
            SHIFT_IN => shifted = false,
            // Line ends reset the shift state (RFC 1557) and are never part of a pair.
            b'\n' | b'\r' => {
                shifted = false;
                euc.push(byte);
            }
            0x21..=0x7e if shifted => euc.push(byte | 0x80),
            _ => euc.push(byte),
        }
        rest = tail;
    }
    let (text, _) = EUC_KR.decode_without_bom_handling(&euc);
    text.into_owned()
}

/// The Hangul filler, which opens a KS X 1001:1998 Annex 3 make-up sequence and stands for an
/// absent jamo inside one.
const HANGUL_FILLER: char = '\u{3164}';
/// Compatibility jamo usable as an initial consonant, in syllable-composition order.
const INITIALS: &str = "ㄱㄲㄴㄷㄸㄹㅁㅂㅃㅅㅆㅇㅈㅉㅊㅋㅌㅍㅎ";
/// Compatibility jamo usable as a final consonant, in syllable-composition order.
const FINALS: &str = "ㄱㄲㄳㄴㄵㄶㄷㄹㄺㄻㄼㄽㄾㄿㅀㅁㅂㅄㅅㅆㅇㅈㅊㅋㅌㅍㅎ";

/// The syllable spelled by initial, medial and final compatibility jamo (the final may be the
/// filler, for none), if they form one.
fn compose_syllable(initial: char, medial: char, last: char) -> Option<char> {
    let l = INITIALS.chars().position(|c| c == initial)? as u32;
    let v = u32::from(medial).checked_sub(0x314f).filter(|v| *v < 21)?;
    let t = if last == HANGUL_FILLER {
        0
    } else {
        FINALS.chars().position(|c| c == last)? as u32 + 1
    };
    char::from_u32(0xac00 + (l * 21 + v) * 28 + t)
}

/// EUC-KR (KS X 1001) can spell any of the 11,172 Hangul syllables, not only its 2,350
/// precomposed ones, as "filler, initial, medial, final" (Annex 3); `encoding_rs` decodes the
/// four jamo separately. This joins each valid sequence into its syllable.
fn compose_makeup_sequences(text: &str) -> Cow<'_, str> {
    if !text.contains(HANGUL_FILLER) {
        return Cow::Borrowed(text);
    }
    let chars: Vec<char> = text.chars().collect();
    let mut out = String::with_capacity(text.len());
    let mut i = 0;
    while i < chars.len() {
        let syllable = match chars.get(i..i + 4) {
            Some(&[HANGUL_FILLER, l, v, t]) => compose_syllable(l, v, t),
            _ => None,
        };
        if let Some(syllable) = syllable {
            out.push(syllable);
            i += 4;
            continue;
        }
        out.push(chars[i]);
        i += 1;
    }
    Cow::Owned(out)
}

/// The bytes without EUC-KR make-up sequences, for the encoding detector: their run of
/// row-4 bytes reads as kana to it and tips Korean text towards EUC-JP.
pub(crate) fn without_makeup_sequences(bytes: &[u8]) -> Cow<'_, [u8]> {
    // Row 4 of KS X 1001 maps in order onto U+3131..=U+3164 (jamo, then the filler).
    let jamo =
        |b: u8| char::from_u32(0x3131 + u32::from(b.checked_sub(0xa1)?)).filter(|_| b <= 0xd4);
    let makeup_at = |i: usize| -> bool {
        let Some(seq) = bytes.get(i..i + 8) else {
            return false;
        };
        let row4 = seq.chunks(2).all(|pair| pair[0] == 0xa4);
        row4 && seq[1] == 0xd4
            && matches!(
                (jamo(seq[3]), jamo(seq[5]), jamo(seq[7])),
                (Some(l), Some(v), Some(t)) if compose_syllable(l, v, t).is_some()
            )
    };
    let mut out: Option<Vec<u8>> = None;
    let mut i = 0;
    while i < bytes.len() {
        if makeup_at(i) {
            out.get_or_insert_with(|| bytes[..i].to_vec());
            i += 8;
            continue;
        }
        // Keep two-byte characters whole so a sequence is only seen at a character start.
        let width = if bytes[i] >= 0x81 { 2 } else { 1 };
        let end = (i + width).min(bytes.len());
        if let Some(out) = out.as_mut() {
            out.extend_from_slice(&bytes[i..end]);
        }
        i = end;
    }
    out.map_or(Cow::Borrowed(bytes), Cow::Owned)
}

/// Whether decoded text is binary junk rather than a document: any NUL, or more than about
/// 1.5% control characters (C0 other than tab, line feed, carriage return and form feed; C1)
/// and replacement characters.
pub(crate) fn is_binary_junk(text: &str) -> bool {
    let mut total = 0usize;
    let mut bad = 0usize;
    for c in text.chars() {
        total += 1;
        match c {
            '\0' => return true,
            '\t' | '\n' | '\r' | '\x0c' => {}
            c if c.is_control() || c == char::REPLACEMENT_CHARACTER => bad += 1,
            _ => {}
        }
    }
    bad > total / 64 + 1
}

/// Normalises decoded text for storage: one line ending (`\n`), no byte-order mark, control
/// characters other than tab and newline turned into spaces (a form feed becomes a paragraph
/// break), trailing spaces dropped from lines.
pub(crate) fn normalize(text: &str) -> String {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\r' => {
                if chars.peek() == Some(&'\n') {
                    chars.next();
                }
                push_newline(&mut out);
            }
            '\n' | '\u{2028}' | '\u{2029}' | '\u{85}' => push_newline(&mut out),
            '\x0c' => {
                push_newline(&mut out);
                push_newline(&mut out);
            }
            '\t' => out.push('\t'),
            c if c.is_control() => out.push(' '),
            c => out.push(c),
        }
    }
    let trimmed = out.trim_end().len();
    out.truncate(trimmed);
    out
}

fn push_newline(out: &mut String) {
    let kept = out.trim_end_matches([' ', '\t']).len();
    out.truncate(kept);
    out.push('\n');
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn iso_2022_kr_decodes_to_hangul() {
        // "한국어" in EUC-KR is C7 D1 B1 B9 BE EE; ISO-2022-KR clears the high bits.
        let bytes = b"\x1b$)C\nabc \x0e\x47\x51\x31\x39\x3e\x6e\x0f def\n";
        assert!(looks_like_iso_2022_kr(bytes));
        assert_eq!(decode(bytes, Some(REPLACEMENT)), "\nabc 한국어 def\n");
    }

    #[test]
    fn euc_kr_makeup_sequences_become_syllables() {
        // Filler, ㅆ, ㅠ, filler (no final) spells 쓔; then a precomposed 쓩 (BE B1).
        let bytes = b"\xa4\xd4\xa4\xb6\xa4\xd0\xa4\xd4\xbe\xb1~";
        assert_eq!(decode(bytes, Some(EUC_KR)), "쓔쓩~");
        assert_eq!(&*without_makeup_sequences(bytes), b"\xbe\xb1~");
    }

    #[test]
    fn bom_overrides_the_given_encoding() {
        let bytes = b"\xff\xfeh\0i\0";
        assert_eq!(decode(bytes, Some(UTF_8)), "hi");
    }

    #[test]
    fn nul_or_many_controls_is_junk_but_prose_is_not() {
        assert!(is_binary_junk("abc\0def"));
        assert!(is_binary_junk(&"ab\x01\x02\x03".repeat(20)));
        assert!(!is_binary_junk(
            "Plain prose.\n\tIndented line.\x0cNext page."
        ));
    }

    #[test]
    fn normalize_unifies_line_ends_and_strips_trailing_space() {
        assert_eq!(
            normalize("\u{feff}a  \r\nb\rc\x0cd\x07e \n\n"),
            "a\nb\nc\n\nd e"
        );
    }
}
