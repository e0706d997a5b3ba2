//! Is a page's text layer usable? Garbage detection for extracted PDF text.
//!
//! A PDF can hold text that no reader can use: fonts without a Unicode mapping come out as
//! replacement or private-use characters, control characters, or a legacy encoding read as
//! Latin-1 (`XiaoBiaoSong.pdf`: GBK bytes shown as `¹ØÓÚºì¾ü`; `TAMReview.pdf` pages 2–22:
//! glyph ids shown as C1 controls and Latin-1 symbols). Such a page is treated as having no
//! text layer, so OCR reads it, and the [`TextProblem`] says why.
//!
//! What counts as junk, character by character: U+FFFD, private-use code points, control
//! characters, and, when they outnumber the ASCII letters of the page, every non-ASCII
//! character of Latin-1 and Latin Extended-A/B (U+0080–U+024F). That last rule catches mojibake
//! without touching real European text, where accented letters are a small minority next to
//! plain ASCII letters.
//!
//! The threshold, [`JUNK_SHARE`] = 30 % of the visible characters, comes from the corpus
//! (`docket bench extract` prints each page's share): every page of readable text there scores
//! 0 %, every garbage page 70 % or more, so 30 % sits well inside the gap and leaves room for
//! real pages with many symbols. A page with visible characters but not a single letter of any
//! script (`truetype_font_nomapping.pdf`: `"7+%-`) is unusable too.

/// A page whose junk share reaches this is garbage (see the module docs for the measurement).
pub const JUNK_SHARE: f64 = 0.30;

/// Why a page's text layer is not used.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum TextProblem {
    /// No visible character at all (a scan, a blank page, text drawn as curves).
    Empty,
    /// Visible characters, but no letter of any script: unmapped glyphs or stray marks.
    NoLetters,
    /// Mostly junk characters; `share` is the junk share of the visible characters.
    Garbage { share: f64 },
}

impl TextProblem {
    /// A short phrase for the document's extraction note.
    pub fn describe(&self) -> String {
        match self {
            TextProblem::Empty => "no text layer".into(),
            TextProblem::NoLetters => "a text layer without letters".into(),
            TextProblem::Garbage { share } => format!(
                "a text layer of unmappable glyphs ({:.0}% junk)",
                share * 100.0
            ),
        }
    }
}

/// Judges one page's text; `None` means it is usable.
pub fn assess(text: &str) -> Option<TextProblem> {
    let mut visible = 0usize;
    let mut letters = 0usize;
    let mut ascii_letters = 0usize;
    let mut hard_junk = 0usize;
    let mut latin_high = 0usize;
    for c in text.chars() {
        if c.is_whitespace() {
            continue;
        }
        visible += 1;
        let code = c as u32;
        let private_use = matches!(code, 0xe000..=0xf8ff | 0xf0000..=0x10ffff);
        if c == char::REPLACEMENT_CHARACTER || private_use || c.is_control() {
            hard_junk += 1;
            continue;
        }
        if c.is_alphabetic() {
            letters += 1;
        }
        if c.is_ascii_alphabetic() {
            ascii_letters += 1;
        } else if (0x80..=0x24f).contains(&code) {
            latin_high += 1;
        }
    }
    if visible == 0 {
        return Some(TextProblem::Empty);
    }
    let mojibake = if latin_high > ascii_letters {
        latin_high
    } else {
        0
    };
    let share = (hard_junk + mojibake) as f64 / visible as f64;
    if share >= JUNK_SHARE {
        return Some(TextProblem::Garbage { share });
    }
    if letters == 0 {
        return Some(TextProblem::NoLetters);
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn real_text_in_many_scripts_is_usable() {
        for text in [
            "Trace-based Just-in-Time Type Specialization",
            "Größenordnung der Äquivalenzklassen, über die Menge",
            "Le président a déclaré qu'il était très ému.",
            "데비안 배포판을 따라가고 있는지",
            "建设用地节约集约利用",
            "Расположение основной надписи",
            "Page 12",
        ] {
            assert_eq!(assess(text), None, "{text}");
        }
    }

    #[test]
    fn gbk_read_as_latin1_is_garbage() {
        let problem = assess("¹ØÓÚºì¾ü×÷Õ½µÄÔ-Ôò ¡-¡-¡- £±\n£¨Ò»¾ÅÈýÆßÄê°ËÔÂÒ»ÈÕ£©");
        assert!(
            matches!(problem, Some(TextProblem::Garbage { share }) if share > 0.7),
            "{problem:?}"
        );
    }

    #[test]
    fn controls_replacement_and_private_use_are_garbage() {
        assert!(matches!(
            assess("\u{0083}\u{0092}\u{fffd}\u{e001} ab"),
            Some(TextProblem::Garbage { .. })
        ));
    }

    #[test]
    fn blank_and_letterless_pages_have_no_usable_text() {
        assert_eq!(assess(" \n\n "), Some(TextProblem::Empty));
        assert_eq!(assess("\"7+%-"), Some(TextProblem::NoLetters));
    }
}
