//! Paragraphs rebuilt from the line output of PDF extractors and OCR.
//!
//! `pdftotext`, `pdf-extract` and tesseract print one line per printed line, so a sentence that
//! wraps is cut by newlines, a word hyphenated at the margin is split in two ("informa-" /
//! "tion"), and `pdf-extract` often puts a blank line after every line, which erases the
//! difference between a line end and a paragraph end. The chunker cuts at blank lines first,
//! so left alone that output makes chunks end mid-sentence. Here each page becomes paragraphs
//! separated by one blank line, each paragraph on one line:
//!
//! - **Breaks.** When most lines of a page are followed by a blank line, single blank lines are
//!   line ends and only runs of two or more are paragraph breaks; otherwise every blank line
//!   is one. Inside a block, a new paragraph also starts at a list item (a bullet, or `1.`,
//!   `2.3`, `(a)`, `a)` before a capitalised word), after a heading (a short line without
//!   closing punctuation followed by a full, capitalised line), and after a short line that
//!   ends a sentence ("short": under three quarters of the page's usual full line).
//! - **Joins.** Lines are joined with one space; a line ending in letter + hyphen joins the next
//!   without a space, dropping the hyphen when the next line starts in lower case ("informa-" +
//!   "tion") and keeping it otherwise ("Just-in-" + "Time"); a soft hyphen is dropped; lines of
//!   Han or kana text join without a space, as those scripts write no spaces (Hangul does).
//!
//! Mistakes lean towards joining: two paragraphs run together still split at sentence ends in
//! the chunker, while a false break inside a sentence splits exactly what search needs whole.

/// Share of lines followed by a single blank line above which blank lines are line ends.
const SPACED_SHARE: f64 = 0.6;
/// A line shorter than this share of the page's full line width counts as short.
const SHORT_LINE: f64 = 0.75;
/// A heading is shorter than this share of the full width.
const HEADING_LINE: f64 = 0.6;

/// Rebuilds the paragraphs of one page of normalised text (`\n` line ends).
pub fn rebuild(text: &str) -> String {
    let lines: Vec<&str> = text.lines().map(str::trim).collect();
    let width = full_width(&lines);
    let spaced = blank_lines_are_line_ends(&lines);
    let mut paragraphs: Vec<String> = Vec::new();
    let mut current = String::new();
    let mut previous: Option<&str> = None;
    let mut blanks = 0usize;
    for line in lines {
        if line.is_empty() {
            blanks += 1;
            continue;
        }
        let hard_break = blanks >= if spaced { 2 } else { 1 };
        blanks = 0;
        let starts_new = match previous {
            None => true,
            Some(prev) => hard_break || breaks_between(prev, line, width),
        };
        if starts_new {
            if !current.is_empty() {
                paragraphs.push(std::mem::take(&mut current));
            }
            current.push_str(line);
        } else {
            join(&mut current, line);
        }
        previous = Some(line);
    }
    if !current.is_empty() {
        paragraphs.push(current);
    }
    paragraphs.join("\n\n")
}

/// The width of a full line: the 75th percentile of line lengths in characters, so short
/// last lines and headings do not pull it down.
fn full_width(lines: &[&str]) -> usize {
    let mut lengths: Vec<usize> = lines
        .iter()
        .filter(|l| !l.is_empty())
        .map(|l| l.chars().count())
        .collect();
    if lengths.is_empty() {
        return 0;
    }
    lengths.sort_unstable();
    lengths[(lengths.len() * 3 / 4).min(lengths.len() - 1)]
}

/// Whether most text lines are followed by exactly one blank line (pdf-extract's habit).
fn blank_lines_are_line_ends(lines: &[&str]) -> bool {
    let mut text_lines = 0usize;
    let mut spaced = 0usize;
    for (i, line) in lines.iter().enumerate() {
        if line.is_empty() || i + 2 >= lines.len() {
            continue;
        }
        text_lines += 1;
        if lines[i + 1].is_empty() && !lines[i + 2].is_empty() {
            spaced += 1;
        }
    }
    text_lines >= 4 && spaced as f64 >= SPACED_SHARE * text_lines as f64
}

/// Whether `next` starts a new paragraph after `prev` inside one block.
fn breaks_between(prev: &str, next: &str, width: usize) -> bool {
    if is_list_item(next) {
        return true;
    }
    let prev_len = prev.chars().count() as f64;
    let width = width as f64;
    let starts_capital = next
        .chars()
        .next()
        .is_some_and(|c| c.is_uppercase() || c.is_ascii_digit() || is_unspaced(c) || is_hangul(c));
    let last = prev.chars().last().unwrap_or(' ');
    // A heading is followed by body text, which runs the full width; requiring that keeps a
    // short line inside ragged text from passing for one.
    let next_is_full = next.chars().count() as f64 >= SHORT_LINE * width;
    if prev_len < HEADING_LINE * width
        && !is_closing_punctuation(last)
        && starts_capital
        && next_is_full
        && !ends_with_hyphen(prev)
    {
        return true;
    }
    prev_len < SHORT_LINE * width && ends_sentence(prev) && starts_capital
}

/// A bullet, or a number or letter enumerator before a capitalised (or non-Latin) word.
fn is_list_item(line: &str) -> bool {
    let mut chars = line.chars();
    let Some(first) = chars.next() else {
        return false;
    };
    let bullets = [
        '•', '◦', '▪', '▫', '●', '○', '■', '□', '➢', '►', '▸', '✓', '–', '—', '-', '*', '·',
    ];
    if bullets.contains(&first) {
        return chars.next().is_some_and(char::is_whitespace);
    }
    let Some((marker, rest)) = line.split_once(' ') else {
        return false;
    };
    let rest_starts_word = rest
        .trim_start()
        .chars()
        .next()
        .is_some_and(|c| c.is_uppercase() || (c.is_alphabetic() && !c.is_ascii()));
    if !rest_starts_word {
        return false;
    }
    // `1`, `1.`, `2.3`, `2.3.1`, `1)`; bare numbers only up to three digits (a year is not
    // an item number).
    let numbered = {
        let core = marker.trim_end_matches(['.', ')']);
        !core.is_empty()
            && core.split('.').all(|part| {
                !part.is_empty() && part.len() <= 3 && part.chars().all(|c| c.is_ascii_digit())
            })
    };
    // `(a)`, `a)`, `(iv)`.
    let lettered = {
        let inner = marker.strip_prefix('(').unwrap_or(marker);
        inner.len() <= 5
            && inner.ends_with(')')
            && inner[..inner.len() - 1]
                .chars()
                .all(|c| c.is_ascii_alphanumeric())
            && inner.len() > 1
    };
    numbered || lettered
}

fn ends_sentence(line: &str) -> bool {
    let trimmed = line.trim_end_matches(['"', '\'', '”', '’', ')', ']', '」', '』', '）']);
    trimmed
        .chars()
        .last()
        .is_some_and(|c| matches!(c, '.' | '!' | '?' | ':' | '…' | '。' | '！' | '？' | '：'))
}

fn is_closing_punctuation(c: char) -> bool {
    matches!(
        c,
        '.' | ',' | ';' | ':' | '!' | '?' | '…' | '。' | '、' | '，' | '；' | '！' | '？' | '-'
    )
}

fn ends_with_hyphen(line: &str) -> bool {
    line.ends_with(['-', '\u{2010}', '\u{ad}'])
}

/// Appends `next` to the paragraph, repairing hyphenation and spacing.
fn join(paragraph: &mut String, next: &str) {
    if paragraph.ends_with('\u{ad}') {
        paragraph.pop();
        paragraph.push_str(next);
        return;
    }
    let mut tail = paragraph.chars().rev();
    let last = tail.next();
    let before = tail.next();
    let next_first = next.chars().next();
    let hyphenated =
        matches!(last, Some('-' | '\u{2010}')) && before.is_some_and(char::is_alphabetic);
    if hyphenated {
        if next_first.is_some_and(char::is_lowercase) {
            paragraph.pop();
        }
        paragraph.push_str(next);
        return;
    }
    if last.is_some_and(is_unspaced) && next_first.is_some_and(is_unspaced) {
        paragraph.push_str(next);
        return;
    }
    paragraph.push(' ');
    paragraph.push_str(next);
}

/// Han, kana and CJK punctuation: scripts written without spaces between words.
fn is_unspaced(c: char) -> bool {
    matches!(c as u32,
        0x3000..=0x30ff   // CJK punctuation, hiragana, katakana
        | 0x3400..=0x4dbf // Han extension A
        | 0x4e00..=0x9fff // Han
        | 0xf900..=0xfaff // Han compatibility
        | 0xff00..=0xffef // full-width forms
        | 0x20000..=0x2fa1f)
}

fn is_hangul(c: char) -> bool {
    matches!(c as u32, 0xac00..=0xd7a3 | 0x1100..=0x11ff | 0x3130..=0x318f)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pdf_extract_blank_line_output_becomes_paragraphs() {
        let text = "The extract step turns bytes into pages and every page into\n\n\
                    chunks of about two hundred tokens, which the embed step turns\n\n\
                    into vectors.\n\n\n\
                    A second paragraph starts after two blank lines and it runs on\n\n\
                    to the end of the page.";
        assert_eq!(
            rebuild(text),
            "The extract step turns bytes into pages and every page into chunks of about two \
             hundred tokens, which the embed step turns into vectors.\n\n\
             A second paragraph starts after two blank lines and it runs on to the end of the page."
        );
    }

    #[test]
    fn a_short_line_ending_a_sentence_ends_its_paragraph() {
        let text = "This line is as long as every other full line in this block of text\n\
                    and so is this one, until the paragraph comes to an end here.\n\
                    Short last line.\n\
                    The next paragraph starts on the following line and is long too.";
        let rebuilt = rebuild(text);
        let paragraphs: Vec<&str> = rebuilt.split("\n\n").collect();
        assert_eq!(paragraphs.len(), 2, "{rebuilt}");
        assert!(paragraphs[0].ends_with("end here. Short last line."));
    }

    #[test]
    fn end_of_line_hyphenation_is_repaired() {
        assert_eq!(
            rebuild("no usable informa-\ntion in this Just-in-\nTime compiler"),
            "no usable information in this Just-in-Time compiler"
        );
        assert_eq!(rebuild("soft\u{ad}\nhyphen"), "softhyphen");
        // A dash after a space is punctuation, not hyphenation.
        assert_eq!(rebuild("one -\ntwo"), "one - two");
    }

    #[test]
    fn list_items_and_headings_keep_their_own_paragraphs() {
        let text = "2 Package options\n\
                    Options that are not listed are handed to the CJKutf8 package as they\n\
                    are, without a warning of any kind.\n\
                    • the first item of a list\n\
                    • a second item that wraps onto\n\
                    the next line\n\
                    (a) Lettered items as well\n\
                    In 2019 the court said so, and\n\
                    2019 was a year.";
        let rebuilt = rebuild(text);
        let paragraphs: Vec<&str> = rebuilt.split("\n\n").collect();
        assert_eq!(
            paragraphs,
            vec![
                "2 Package options",
                "Options that are not listed are handed to the CJKutf8 package as they are, \
                 without a warning of any kind.",
                "• the first item of a list",
                "• a second item that wraps onto the next line",
                "(a) Lettered items as well In 2019 the court said so, and 2019 was a year.",
            ]
        );
    }

    #[test]
    fn han_and_kana_lines_join_without_spaces_and_hangul_with_one() {
        assert_eq!(
            rebuild("わたくしといふ現象は\n風景やみんなと"),
            "わたくしといふ現象は風景やみんなと"
        );
        assert_eq!(
            rebuild("한글 문서에 최적화된\n줄바꿈 기능"),
            "한글 문서에 최적화된 줄바꿈 기능"
        );
    }
}
