//! Snippets: a window of a chunk's text around the first match of the query, with the matches
//! as character ranges. Pure text code, no SQL: clients build the emphasis from the ranges, so a
//! document's text never becomes markup.

use serde::Serialize;

/// Characters of context a snippet shows around its first match.
const SNIPPET_CHARS: usize = 240;

/// A highlighted part of a snippet: `[start, end)` in characters (Unicode scalar values).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Highlight {
    pub start: usize,
    pub end: usize,
}

/// A window of `text` around the first match of any term, and the matches inside it.
pub fn snippet_of(text: &str, query: &str) -> (String, Vec<Highlight>) {
    snippet(text, &query_terms(query))
}

/// The words of a query worth highlighting, lower-cased: websearch operators (`or`, a leading
/// `-`) and single Latin letters are left out; CJK runs stay whole.
pub(super) fn query_terms(query: &str) -> Vec<Vec<char>> {
    let mut terms: Vec<Vec<char>> = Vec::new();
    for token in query.split_whitespace() {
        if token.starts_with('-') || token.eq_ignore_ascii_case("or") {
            continue;
        }
        for word in token.split(|c: char| !c.is_alphanumeric()) {
            let word: Vec<char> = word.chars().map(lower).collect();
            let worth = word.len() >= 2 || word.iter().any(|c| !c.is_ascii());
            if worth && !word.is_empty() && !terms.contains(&word) {
                terms.push(word);
            }
        }
    }
    terms
}

/// Lower-cases one character to one character, so offsets stay aligned with the original.
fn lower(c: char) -> char {
    c.to_lowercase().next().unwrap_or(c)
}

pub(super) fn snippet(text: &str, terms: &[Vec<char>]) -> (String, Vec<Highlight>) {
    let chars: Vec<char> = text.chars().collect();
    let lowered: Vec<char> = chars.iter().copied().map(lower).collect();
    let mut matches: Vec<(usize, usize)> = Vec::new();
    for term in terms {
        let mut at = 0;
        while at + term.len() <= lowered.len() {
            if lowered[at..at + term.len()] == term[..] {
                matches.push((at, at + term.len()));
                at += term.len();
            } else {
                at += 1;
            }
        }
    }
    matches.sort_unstable();
    // Merge overlapping or touching matches into one range.
    let mut merged: Vec<(usize, usize)> = Vec::new();
    for (start, end) in matches {
        match merged.last_mut() {
            Some(last) if start <= last.1 => last.1 = last.1.max(end),
            _ => merged.push((start, end)),
        }
    }
    let first = merged.first().map_or(0, |m| m.0);
    // Start a little before the first match, at a word boundary when one is near.
    let mut start = first.saturating_sub(SNIPPET_CHARS / 4);
    if start > 0
        && let Some(space) = chars[start..first].iter().position(|c| c.is_whitespace())
    {
        start += space + 1;
    }
    let end = (start + SNIPPET_CHARS).min(chars.len());
    let prefix = if start > 0 { "…" } else { "" };
    let suffix = if end < chars.len() { "…" } else { "" };
    let offset = prefix.chars().count();
    let body: String = chars[start..end].iter().collect();
    let snippet = format!("{prefix}{}{suffix}", body.trim_end());
    let body_len = body.trim_end().chars().count();
    let highlights = merged
        .into_iter()
        .filter(|&(s, e)| s >= start && e <= start + body_len)
        .map(|(s, e)| Highlight {
            start: s - start + offset,
            end: e - start + offset,
        })
        .collect();
    (snippet, highlights)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn marked(snippet: &str, highlights: &[Highlight]) -> Vec<String> {
        let chars: Vec<char> = snippet.chars().collect();
        highlights
            .iter()
            .map(|h| chars[h.start..h.end].iter().collect())
            .collect()
    }

    #[test]
    fn highlights_mark_every_query_word_case_insensitively() {
        let (snippet, highlights) =
            snippet_of("Python is fun. I like python and PYTHON.", "python fun");
        assert_eq!(
            marked(&snippet, &highlights),
            vec!["Python", "fun", "python", "PYTHON"]
        );
    }

    #[test]
    fn highlights_count_characters_not_bytes_in_cjk_text() {
        let text = "日本語のテキストで東京タワーを検索します";
        let (snippet, highlights) = snippet_of(text, "東京タワー");
        assert_eq!(marked(&snippet, &highlights), vec!["東京タワー"]);
        assert_eq!(highlights[0].start, 9);
    }

    #[test]
    fn a_late_match_gets_a_window_with_ellipses_and_shifted_ranges() {
        let text = format!("{} needle {}", "hay ".repeat(200), "hay ".repeat(200));
        let (snippet, highlights) = snippet_of(&text, "needle");
        assert!(
            snippet.starts_with('…') && snippet.ends_with('…'),
            "{snippet}"
        );
        assert!(snippet.chars().count() <= SNIPPET_CHARS + 2);
        assert_eq!(marked(&snippet, &highlights), vec!["needle"]);
    }

    #[test]
    fn websearch_operators_and_negated_words_are_not_highlighted() {
        let terms = query_terms("cats OR dogs -mice \"big cat\"");
        let words: Vec<String> = terms.iter().map(|t| t.iter().collect()).collect();
        assert_eq!(words, vec!["cats", "dogs", "big", "cat"]);
    }

    #[test]
    fn markup_in_a_chunk_stays_plain_text_in_the_snippet() {
        let (snippet, highlights) = snippet_of("<script>alert(1)</script> hello", "hello");
        assert!(snippet.starts_with("<script>"));
        assert_eq!(marked(&snippet, &highlights), vec!["hello"]);
    }
}
