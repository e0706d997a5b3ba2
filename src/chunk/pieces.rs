//! Cutting text into pieces that are never cut further: paragraphs, sentences, and slices of
//! overlong sentences and words, each within the bounds of one chunk.

use super::tokens::is_cjk;
use super::{Bounds, TokenCounter};
use crate::extract::Page;

/// A run of source text that is never cut further: a paragraph, a sentence, or a slice of an
/// overlong sentence. `text` is a slice of the page, trailing whitespace included, so pieces of
/// one paragraph concatenate back into the original.
pub(super) struct Piece<'a> {
    pub page: u32,
    pub text: &'a str,
    pub tokens: usize,
    pub starts_paragraph: bool,
    /// The first piece of a paragraph that did not fit in one piece.
    pub opens_split_paragraph: bool,
}

pub(super) fn split_into_pieces<'a>(
    pages: &'a [Page],
    bounds: &Bounds,
    counter: &dyn TokenCounter,
) -> Vec<Piece<'a>> {
    let budget = bounds.tokens;
    let fits = |text: &str, tokens: usize| tokens <= budget && text.len() <= bounds.bytes;
    let mut pieces = Vec::new();
    for page in pages {
        for paragraph in paragraphs(&page.text) {
            let tokens = counter.count(paragraph);
            if fits(paragraph, tokens) {
                pieces.push(Piece {
                    page: page.number,
                    text: paragraph,
                    tokens,
                    starts_paragraph: true,
                    opens_split_paragraph: false,
                });
                continue;
            }
            let first = pieces.len();
            for sentence in sentences(paragraph) {
                let tokens = counter.count(sentence);
                if fits(sentence, tokens) {
                    pieces.push(Piece {
                        page: page.number,
                        text: sentence,
                        tokens,
                        starts_paragraph: false,
                        opens_split_paragraph: false,
                    });
                    continue;
                }
                for slice in hard_split(sentence, bounds, counter) {
                    pieces.push(Piece {
                        page: page.number,
                        text: slice,
                        tokens: counter.count(slice),
                        starts_paragraph: false,
                        opens_split_paragraph: false,
                    });
                }
            }
            if let Some(opening) = pieces.get_mut(first) {
                opening.starts_paragraph = true;
                opening.opens_split_paragraph = true;
            }
        }
    }
    pieces
}

/// Maximal runs of non-blank lines, without the line break that ends the last one.
fn paragraphs(text: &str) -> impl Iterator<Item = &str> {
    let mut spans = Vec::new();
    let mut start: Option<usize> = None;
    let mut end = 0;
    let mut offset = 0;
    for line in text.split_inclusive('\n') {
        if line.trim().is_empty() {
            if let Some(s) = start.take() {
                spans.push(&text[s..end]);
            }
        } else {
            start.get_or_insert(offset);
            end = offset + line.trim_end().len();
        }
        offset += line.len();
    }
    if let Some(s) = start {
        spans.push(&text[s..end]);
    }
    spans.into_iter()
}

/// Sentences of a paragraph, each with the whitespace that follows it; they concatenate back
/// into the paragraph.
pub(super) fn sentences(paragraph: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let mut start = 0;
    let mut chars = paragraph.char_indices().peekable();
    while let Some((_, c)) = chars.next() {
        let wide = is_wide_sentence_end(c);
        if !wide && !matches!(c, '.' | '!' | '?' | '…') {
            continue;
        }
        while let Some(&(_, next)) = chars.peek() {
            if !is_closer(next) {
                break;
            }
            chars.next();
        }
        let followed_by_space = chars.peek().is_none_or(|&(_, next)| next.is_whitespace());
        if !wide && !followed_by_space {
            continue;
        }
        while let Some(&(_, next)) = chars.peek() {
            if !next.is_whitespace() {
                break;
            }
            chars.next();
        }
        let end = chars.peek().map_or(paragraph.len(), |&(i, _)| i);
        if end > start {
            out.push(&paragraph[start..end]);
        }
        start = end;
    }
    if start < paragraph.len() {
        out.push(&paragraph[start..]);
    }
    out
}

/// Slices of an overlong sentence, cut between words (or CJK characters), each within the
/// piece bounds when the words allow it.
fn hard_split<'a>(sentence: &'a str, bounds: &Bounds, counter: &dyn TokenCounter) -> Vec<&'a str> {
    let mut out = Vec::new();
    let mut start = 0;
    let mut tokens = 0;
    let atoms = atom_starts(sentence);
    for (i, &atom_start) in atoms.iter().enumerate() {
        let atom_end = atoms.get(i + 1).copied().unwrap_or(sentence.len());
        let atom = &sentence[atom_start..atom_end];
        let atom_tokens = counter.count(atom);
        if atom_tokens > bounds.tokens || atom.len() > bounds.bytes {
            if atom_start > start {
                out.push(&sentence[start..atom_start]);
            }
            out.extend(split_word(atom, bounds.tokens, bounds.bytes, counter));
            start = atom_end;
            tokens = 0;
            continue;
        }
        let over = tokens + atom_tokens > bounds.tokens || atom_end - start > bounds.bytes;
        if over && atom_start > start {
            out.push(&sentence[start..atom_start]);
            start = atom_start;
            tokens = 0;
        }
        tokens += atom_tokens;
    }
    if start < sentence.len() {
        out.push(&sentence[start..]);
    }
    out
}

/// Cuts one enormous word into slices of at most `budget` tokens and `max_bytes` bytes (at
/// least one character each, so progress is certain).
///
/// The counter may not be additive, so each cut is searched for: the prefix length doubles
/// until it no longer fits, then the last step is bisected. Only prefixes up to twice the
/// slice are counted, so the word costs about its own length times a logarithm; searching
/// over the whole rest of the word for every slice was quadratic (minutes on a 10 MB word).
fn split_word<'a>(
    word: &'a str,
    budget: usize,
    max_bytes: usize,
    counter: &dyn TokenCounter,
) -> Vec<&'a str> {
    let mut out = Vec::new();
    let mut rest = word;
    while !rest.is_empty() {
        let fits = |end: usize| end <= max_bytes && counter.count(&rest[..end]) <= budget;
        let mut good = ceil_boundary(rest, 1);
        let mut step = good;
        let mut bad = None;
        while good < rest.len() {
            let candidate = ceil_boundary(rest, good + step);
            if fits(candidate) {
                good = candidate;
                step *= 2;
            } else {
                bad = Some(candidate);
                break;
            }
        }
        if let Some(mut bad) = bad {
            loop {
                let mid = floor_boundary(rest, good + (bad - good) / 2);
                if mid <= good {
                    break;
                }
                if fits(mid) {
                    good = mid;
                } else {
                    bad = mid;
                }
            }
        }
        out.push(&rest[..good]);
        rest = &rest[good..];
    }
    out
}

/// The first character boundary at or after `at` (the end of `text` at most).
fn ceil_boundary(text: &str, at: usize) -> usize {
    let mut at = at.min(text.len());
    while !text.is_char_boundary(at) {
        at += 1;
    }
    at
}

/// The last character boundary at or before `at`.
fn floor_boundary(text: &str, at: usize) -> usize {
    let mut at = at.min(text.len());
    while !text.is_char_boundary(at) {
        at -= 1;
    }
    at
}

/// Byte offsets where a word or a CJK character starts; whitespace belongs to the atom before.
pub(super) fn atom_starts(text: &str) -> Vec<usize> {
    let mut starts = Vec::new();
    let mut previous: Option<char> = None;
    for (i, c) in text.char_indices() {
        let starts_atom = match previous {
            None => true,
            Some(p) => !c.is_whitespace() && (p.is_whitespace() || is_cjk(c) || is_cjk(p)),
        };
        if starts_atom {
            starts.push(i);
        }
        previous = Some(c);
    }
    starts
}

/// Full-width sentence enders, which need no space after them.
fn is_wide_sentence_end(c: char) -> bool {
    matches!(c, '。' | '！' | '？' | '．' | '｡')
}

/// Closing quotes and brackets that belong to the sentence they end.
fn is_closer(c: char) -> bool {
    matches!(
        c,
        '"' | '\'' | '”' | '’' | ')' | ']' | '」' | '』' | '）' | '】' | '》' | '〉'
    )
}
