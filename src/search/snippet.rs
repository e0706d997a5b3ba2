//! Snippets: the window of a chunk's text where the query's words are densest, with those words
//! as character ranges. Pure text code, no SQL: clients build the emphasis from the ranges, so a
//! document's text never becomes markup.
//!
//! What is marked is decided by the same analysis that indexed the chunk
//! ([`crate::analysis`]): a word is highlighted when one of its terms is a form of a query word,
//! so stems match ("limits" for "limiting"), stop words never light up, and a word is never
//! matched inside another ("act" does not mark "enactment"). CJK bigrams are marked as the
//! characters they cover, overlapping bigrams merged into one range.
//!
//! The window is the one holding the most distinct query terms, so a snippet shows why the
//! chunk matched instead of the page header every chunk of a document starts with.

use std::collections::BTreeSet;

use serde::Serialize;

use crate::analysis::{self, Language};

/// Characters of context a snippet shows.
const SNIPPET_CHARS: usize = 240;

/// A highlighted part of a snippet: `[start, end)` in characters (Unicode scalar values).
#[derive(utoipa::ToSchema, Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Highlight {
    pub start: usize,
    pub end: usize,
}

/// A snippet of `text` (analysed under `language`) for a query's terms.
pub fn snippet(text: &str, language: Language, terms: &BTreeSet<&str>) -> (String, Vec<Highlight>) {
    let chars: Vec<char> = text.chars().collect();
    let matches: Vec<(usize, usize, String)> = analysis::analyze(text, language)
        .into_iter()
        .filter(|t| terms.contains(t.text.as_str()))
        .map(|t| (t.start, t.end, t.text))
        .collect();
    let first = best_window(&matches);
    // Start a little before the window's first match, at a word boundary when one is near.
    let mut start = first.saturating_sub(SNIPPET_CHARS / 6);
    if start > 0
        && let Some(space) = chars[start..first].iter().position(|c| c.is_whitespace())
    {
        start += space + 1;
    }
    let end = (start + SNIPPET_CHARS).min(chars.len());
    let prefix = if start > 0 { "…" } else { "" };
    let body: String = chars[start..end].iter().collect();
    let body = body.trim_end();
    let body_len = body.chars().count();
    let suffix = if end < chars.len() { "…" } else { "" };
    let offset = prefix.chars().count();
    let mut highlights: Vec<Highlight> = Vec::new();
    for &(s, e, _) in &matches {
        if s < start || e > start + body_len {
            continue;
        }
        let (s, e) = (s - start + offset, e - start + offset);
        match highlights.last_mut() {
            // Overlapping or touching bigrams of one CJK run become one range.
            Some(last) if s <= last.end => last.end = last.end.max(e),
            _ => highlights.push(Highlight { start: s, end: e }),
        }
    }
    (format!("{prefix}{body}{suffix}"), highlights)
}

/// Where the window of [`SNIPPET_CHARS`] holding the most distinct matched terms starts (the
/// first match's offset; 0 without matches). `matches` are in text order.
fn best_window(matches: &[(usize, usize, String)]) -> usize {
    let mut best = (0, 0);
    for (i, (start, _, _)) in matches.iter().enumerate() {
        let distinct: BTreeSet<&str> = matches[i..]
            .iter()
            .take_while(|(s, _, _)| s - start < SNIPPET_CHARS * 5 / 6)
            .map(|(_, _, t)| t.as_str())
            .collect();
        if distinct.len() > best.1 {
            best = (*start, distinct.len());
        }
    }
    best.0
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analysis::query;

    fn marked(text: &str, language: Language, q: &str) -> (String, Vec<String>) {
        let parsed = query::parse(q);
        let (snippet, highlights) = snippet(text, language, &parsed.all_terms());
        let chars: Vec<char> = snippet.chars().collect();
        let words = highlights
            .iter()
            .map(|h| chars[h.start..h.end].iter().collect())
            .collect();
        (snippet, words)
    }

    #[test]
    fn stems_match_whole_words_and_stop_words_never_light_up() {
        let (_, words) = marked(
            "There the act limits the enactment; acts and limiting rules.",
            Language::ENGLISH,
            "the act of limiting",
        );
        assert_eq!(words, vec!["act", "limits", "acts", "limiting"]);
    }

    #[test]
    fn cjk_bigrams_are_marked_as_the_characters_they_cover() {
        let text = "데비안은 빠르게 수렴하는데 시간이 걸립니다";
        let (_, words) = marked(text, Language::SIMPLE, "수렴하나요");
        assert_eq!(words, vec!["수렴하"]);
        let (snippet, words) = marked(
            "日本語のテキストで東京タワーを検索します",
            Language::SIMPLE,
            "東京タワー",
        );
        assert_eq!(words, vec!["東京タワー"]);
        assert!(snippet.starts_with("日本語"));
    }

    #[test]
    fn the_window_is_where_the_query_words_are_densest() {
        let text = format!(
            "Chapter 3 header queue. {} The queue claims jobs with skip locked and leases. {}",
            "filler words here. ".repeat(40),
            "more filler. ".repeat(40)
        );
        let (snippet, words) = marked(&text, Language::ENGLISH, "queue claims leases");
        assert!(
            snippet.starts_with('…') && snippet.ends_with('…'),
            "{snippet}"
        );
        assert!(snippet.contains("skip locked"), "{snippet}");
        assert_eq!(words, vec!["queue", "claims", "leases"]);
    }

    #[test]
    fn markup_in_a_chunk_stays_plain_text_in_the_snippet() {
        let (snippet, words) = marked(
            "<script>alert(1)</script> hello",
            Language::ENGLISH,
            "hello",
        );
        assert!(snippet.starts_with("<script>"));
        assert_eq!(words, vec!["hello"]);
    }
}
