//! Chunking: pages of text → overlapping chunks of about `target_tokens` tokens, ready to embed.
//!
//! Pure and deterministic: the same pages and settings always give the same chunks, byte for
//! byte, so re-running the step upserts identical rows and `content_hash` can tell unchanged
//! text apart.
//!
//! How text is cut, in order of preference:
//! 1. at paragraph boundaries (blank lines; a page break is one too): a paragraph that fits is
//!    never split;
//! 2. at sentence boundaries (`.`, `!`, `?`, `…` before whitespace; `。`, `！`, `？`, `．`
//!    anywhere), for paragraphs too long for one chunk;
//! 3. between words (or CJK characters), only inside a sentence longer than a chunk; inside a
//!    single enormous "word" (a URL, base64) as a last resort.
//!
//! Each chunk after the first starts with the tail of the previous one (at most
//! `overlap_tokens`, cut at a word boundary) so a sentence split across chunks is still found
//! whole by one of them. A page break always ends a chunk and no overlap is carried across it,
//! so a chunk's `page` is the page all of its text comes from (a short page gives a short
//! chunk; citing the wrong page would be worse). Paragraphs inside a chunk are separated by a
//! blank line.
//!
//! Whitespace is normalised first: a run of spaces and tabs becomes one space, a line break stays
//! one, and a run holding a blank line becomes one blank line. Whitespace costs no tokens, so
//! without this "a", 30 MB of spaces and "b" would be one chunk that every search hit carries.
//! No space is ever added, so CJK text gains none. Chunks are bounded in bytes as well as tokens
//! ([`ChunkConfig::max_bytes`]), for text a counter finds cheap (one enormous word is a single
//! unknown token to some tokenizers).
//!
//! Linear in the input: every cut is found by looking only at the text it cuts off (a search that
//! doubles, then bisects, inside one enormous word), never at the rest of the page.

use sha2::{Digest, Sha256};

use crate::extract::Page;

/// How big chunks are and how much consecutive chunks share, in tokens.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ChunkConfig {
    /// The most tokens a chunk should hold (as counted by the [`TokenCounter`]).
    pub target_tokens: usize,
    /// How many tokens from the end of a chunk are repeated at the start of the next; at most
    /// half of `target_tokens` is used.
    pub overlap_tokens: usize,
}

/// The most bytes a chunk may hold per token of its target: far above what prose takes (about
/// 5 bytes a token in English, 9 in Cyrillic, 3 to 12 in CJK and Thai scripts), so it only binds
/// on text a counter finds cheap.
pub const MAX_BYTES_PER_TOKEN: usize = 16;

impl ChunkConfig {
    /// The most bytes of text one chunk holds.
    pub fn max_bytes(&self) -> usize {
        self.target_tokens.max(1) * MAX_BYTES_PER_TOKEN
    }
}

impl Default for ChunkConfig {
    fn default() -> Self {
        ChunkConfig {
            target_tokens: 200,
            overlap_tokens: 30,
        }
    }
}

/// Counts tokens the way the embedding model will, or close to it.
pub trait TokenCounter {
    /// The number of tokens in `text`.
    fn count(&self, text: &str) -> usize;
}

/// A tokenizer-free estimate, used until a real tokenizer is plugged in through
/// [`TokenCounter`]: each CJK character (Han, kana, Hangul) and each punctuation mark is one
/// token, and each other run of letters and digits is one token per four characters, rounded
/// up (so "the" is 1, "token" 2, "extraction" 3), which is close to what BPE vocabularies give
/// for English prose. Whitespace is free.
#[derive(Debug, Clone, Copy, Default)]
pub struct ApproxTokens;

impl TokenCounter for ApproxTokens {
    fn count(&self, text: &str) -> usize {
        let mut tokens = 0;
        let mut word_chars = 0usize;
        for c in text.chars() {
            if is_word_char(c) {
                word_chars += 1;
                continue;
            }
            tokens += word_chars.div_ceil(4);
            word_chars = 0;
            if !c.is_whitespace() {
                tokens += 1;
            }
        }
        tokens + word_chars.div_ceil(4)
    }
}

/// One piece of text ready to embed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Chunk {
    /// Position in the document, from 0, without gaps.
    pub index: i32,
    /// The 1-based page on which the chunk's text starts.
    pub page: i32,
    /// The text, trimmed; never empty.
    pub text: String,
    /// `text`'s size according to the counter used.
    pub token_count: i32,
    /// SHA-256 of `text` (UTF-8).
    pub content_hash: [u8; 32],
}

/// Cuts pages into chunks; see the module documentation for where cuts fall.
pub fn chunk_pages(pages: &[Page], cfg: &ChunkConfig, counter: &dyn TokenCounter) -> Vec<Chunk> {
    let target = cfg.target_tokens.max(1);
    let overlap = cfg.overlap_tokens.min(target / 2);
    let max_bytes = cfg.max_bytes();
    let bounds = Bounds {
        // Every piece fits in a chunk next to a full overlap (and the blank line between).
        tokens: (target - overlap).max(1),
        bytes: max_bytes - overlap * MAX_BYTES_PER_TOKEN - 2,
        tail_bytes: overlap * MAX_BYTES_PER_TOKEN,
    };
    let pages: Vec<Page> = pages
        .iter()
        .map(|page| Page {
            number: page.number,
            text: normalise_whitespace(&page.text),
        })
        .collect();
    let pieces = split_into_pieces(&pages, &bounds, counter);

    let mut chunks = Vec::new();
    let mut builder = Builder::default();
    for piece in &pieces {
        // A page break always ends the chunk, and no overlap is carried over it: a chunk's
        // `page` is where search results send people, so all of its text must be on that page.
        if builder.page().is_some_and(|page| page != piece.page) {
            if builder.has_new()
                && let Some(chunk) = builder.finish(chunks.len(), counter)
            {
                chunks.push(chunk);
            }
            builder = Builder::default();
        }
        let full = builder.tokens + piece.tokens > target
            || builder.raw.len() + 2 + piece.text.len() > max_bytes;
        // A long paragraph starts a fresh chunk rather than filling the end of a half-full one.
        let long_paragraph_ahead = piece.opens_split_paragraph && builder.new_tokens * 2 >= target;
        if builder.has_new() && (full || long_paragraph_ahead) {
            let tail = builder.tail(overlap, bounds.tail_bytes, counter);
            if let Some(chunk) = builder.finish(chunks.len(), counter) {
                chunks.push(chunk);
            }
            builder = Builder::starting_with(tail, counter);
        }
        builder.push(piece);
    }
    if builder.has_new() {
        chunks.extend(builder.finish(chunks.len(), counter));
    }
    chunks
}

/// How big a piece and a carried tail may be.
struct Bounds {
    /// Tokens of one piece.
    tokens: usize,
    /// Bytes of one piece.
    bytes: usize,
    /// Bytes of the overlap carried into the next chunk.
    tail_bytes: usize,
}

/// Runs of whitespace become one space, one line break, or one blank line (see the module
/// documentation); leading and trailing whitespace goes.
fn normalise_whitespace(text: &str) -> String {
    let mut out = String::with_capacity(text.len().min(1 << 20));
    let mut in_space = false;
    let mut line_breaks = 0usize;
    for c in text.chars() {
        if c.is_whitespace() {
            in_space = true;
            line_breaks += usize::from(c == '\n');
            continue;
        }
        if in_space && !out.is_empty() {
            out.push_str(match line_breaks {
                0 => " ",
                1 => "\n",
                _ => "\n\n",
            });
        }
        in_space = false;
        line_breaks = 0;
        out.push(c);
    }
    out
}

/// A run of source text that is never cut further: a paragraph, a sentence, or a slice of an
/// overlong sentence. `text` is a slice of the page, trailing whitespace included, so pieces of
/// one paragraph concatenate back into the original.
struct Piece<'a> {
    page: u32,
    text: &'a str,
    tokens: usize,
    starts_paragraph: bool,
    /// The first piece of a paragraph that did not fit in one piece.
    opens_split_paragraph: bool,
}

fn split_into_pieces<'a>(
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
fn sentences(paragraph: &str) -> Vec<&str> {
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
fn atom_starts(text: &str) -> Vec<usize> {
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

/// The chunk being filled.
#[derive(Default)]
struct Builder {
    /// The text so far, untrimmed so that the next piece of the same paragraph joins with the
    /// source's own spacing.
    raw: String,
    /// Where each piece (or the carried overlap) starts in `raw`, and its page.
    starts: Vec<(usize, u32)>,
    /// Tokens in `raw`, overlap included (sum of piece counts).
    tokens: usize,
    /// Tokens added since the overlap; zero means the chunk has nothing new yet.
    new_tokens: usize,
    new_pieces: usize,
}

impl Builder {
    fn starting_with(tail: Option<(String, u32)>, counter: &dyn TokenCounter) -> Builder {
        let mut builder = Builder::default();
        if let Some((text, page)) = tail {
            builder.tokens = counter.count(&text);
            builder.starts.push((0, page));
            builder.raw = text;
        }
        builder
    }

    /// The page of the text so far (a chunk never spans two), `None` while empty.
    fn page(&self) -> Option<u32> {
        self.starts.last().map(|&(_, page)| page)
    }

    fn has_new(&self) -> bool {
        self.new_pieces > 0
    }

    fn push(&mut self, piece: &Piece<'_>) {
        if piece.starts_paragraph && !self.raw.is_empty() {
            let kept = self.raw.trim_end().len();
            self.raw.truncate(kept);
            self.raw.push_str("\n\n");
        }
        self.starts.push((self.raw.len(), piece.page));
        self.raw.push_str(piece.text);
        self.tokens += piece.tokens;
        self.new_tokens += piece.tokens;
        self.new_pieces += 1;
    }

    /// The end of the text, at most `overlap` tokens and `max_bytes` bytes, starting at a word
    /// boundary, with the page it starts on.
    fn tail(
        &self,
        overlap: usize,
        max_bytes: usize,
        counter: &dyn TokenCounter,
    ) -> Option<(String, u32)> {
        if overlap == 0 {
            return None;
        }
        let mut best = None;
        for &start in atom_starts(&self.raw).iter().rev() {
            let candidate = &self.raw[start..];
            if candidate.trim().is_empty() {
                continue;
            }
            if candidate.len() > max_bytes || counter.count(candidate) > overlap {
                break;
            }
            best = Some(start);
        }
        let start = best?;
        Some((self.raw[start..].to_owned(), self.page_at(start)))
    }

    fn page_at(&self, offset: usize) -> u32 {
        self.starts
            .iter()
            .take_while(|(start, _)| *start <= offset)
            .last()
            .map_or(1, |&(_, page)| page)
    }

    fn finish(self, index: usize, counter: &dyn TokenCounter) -> Option<Chunk> {
        let leading = self.raw.len() - self.raw.trim_start().len();
        let text = self.raw.trim();
        if text.is_empty() {
            return None;
        }
        let page = self.page_at(leading);
        Some(Chunk {
            index: i32::try_from(index).unwrap_or(i32::MAX),
            page: i32::try_from(page).unwrap_or(i32::MAX),
            token_count: i32::try_from(counter.count(text)).unwrap_or(i32::MAX),
            content_hash: Sha256::digest(text.as_bytes()).into(),
            text: text.to_owned(),
        })
    }
}

/// Han, kana, Hangul and their compatibility forms: written without spaces between words (or,
/// for Hangul, with syllables that tokenizers treat much like single characters).
fn is_cjk(c: char) -> bool {
    matches!(c as u32,
        0x1100..=0x11ff
        | 0x2e80..=0x2fdf
        | 0x3040..=0x30ff
        | 0x3100..=0x31ff
        | 0x3400..=0x4dbf
        | 0x4e00..=0x9fff
        | 0xa960..=0xa97f
        | 0xac00..=0xd7ff
        | 0xf900..=0xfaff
        | 0xff66..=0xff9f
        | 0x20000..=0x2fa1f)
}

/// Characters that continue a word for counting: anything but whitespace, CJK and punctuation.
fn is_word_char(c: char) -> bool {
    let punctuation = c.is_ascii_punctuation()
        || matches!(c as u32, 0x2000..=0x206f | 0x3000..=0x303f | 0xff01..=0xff65);
    !c.is_whitespace() && !is_cjk(c) && !punctuation
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

#[cfg(test)]
mod tests {
    use super::*;

    /// One token per whitespace-separated word: makes expected sizes easy to read.
    struct Words;
    impl TokenCounter for Words {
        fn count(&self, text: &str) -> usize {
            text.split_whitespace().count()
        }
    }

    fn page(number: u32, text: &str) -> Page {
        Page {
            number,
            text: text.to_owned(),
        }
    }

    fn words(prefix: &str, n: usize) -> String {
        (0..n)
            .map(|i| format!("{prefix}{i}"))
            .collect::<Vec<_>>()
            .join(" ")
    }

    fn cfg(target_tokens: usize, overlap_tokens: usize) -> ChunkConfig {
        ChunkConfig {
            target_tokens,
            overlap_tokens,
        }
    }

    #[test]
    fn approx_tokens_counts_words_by_length_and_cjk_by_character() {
        assert_eq!(ApproxTokens.count("the token extraction"), 1 + 2 + 3);
        assert_eq!(ApproxTokens.count("Hello, world!"), 2 + 1 + 2 + 1);
        assert_eq!(ApproxTokens.count("한국어 문장"), 5);
        assert_eq!(ApproxTokens.count("日本語の文。"), 6);
        assert_eq!(ApproxTokens.count("  \n\t "), 0);
    }

    #[test]
    fn paragraphs_that_fit_stay_whole_and_are_never_split() {
        let a = format!("{}.", words("a", 6));
        let b = format!("{}.", words("b", 6));
        let c = format!("{}.", words("c", 6));
        let text = format!("{a}\n\n{b}\n\n\n{c}");
        let chunks = chunk_pages(&[page(1, &text)], &cfg(14, 0), &Words);
        let texts: Vec<&str> = chunks.iter().map(|c| c.text.as_str()).collect();
        assert_eq!(texts, vec![format!("{a}\n\n{b}"), c.clone()]);
    }

    #[test]
    fn long_paragraphs_break_at_sentence_ends_including_cjk_enders() {
        let text = "One two three. Four five six! Seven eight nine? Ten eleven twelve.";
        let chunks = chunk_pages(&[page(1, text)], &cfg(7, 0), &Words);
        let texts: Vec<&str> = chunks.iter().map(|c| c.text.as_str()).collect();
        assert_eq!(
            texts,
            vec![
                "One two three. Four five six!",
                "Seven eight nine? Ten eleven twelve."
            ]
        );

        let cjk = "今日は晴れです。明日は雨でしょう！散歩に行きますか？";
        let chunks = chunk_pages(&[page(1, cjk)], &cfg(12, 0), &ApproxTokens);
        let texts: Vec<&str> = chunks.iter().map(|c| c.text.as_str()).collect();
        assert_eq!(
            texts,
            vec![
                "今日は晴れです。",
                "明日は雨でしょう！",
                "散歩に行きますか？"
            ]
        );
    }

    #[test]
    fn decimals_and_inner_dots_do_not_end_sentences() {
        assert_eq!(
            sentences("Pi is 3.14 (roughly). See e.g.x. Next."),
            vec!["Pi is 3.14 (roughly). ", "See e.g.x. ", "Next."]
        );
    }

    #[test]
    fn an_overlong_sentence_is_hard_split_between_words() {
        let text = words("w", 25);
        let chunks = chunk_pages(&[page(1, &text)], &cfg(10, 0), &Words);
        assert_eq!(chunks.len(), 3);
        assert!(chunks.iter().all(|c| c.token_count <= 10));
        let rejoined: Vec<&str> = chunks.iter().map(|c| c.text.as_str()).collect();
        assert_eq!(rejoined.join(" "), text);
    }

    #[test]
    fn a_giant_word_is_cut_within_budget() {
        let blob = "x".repeat(1000);
        let chunks = chunk_pages(&[page(1, &blob)], &cfg(20, 0), &ApproxTokens);
        assert!(chunks.iter().all(|c| c.token_count <= 20));
        let rejoined: String = chunks.iter().map(|c| c.text.as_str()).collect();
        assert_eq!(rejoined, blob);
    }

    #[test]
    fn each_chunk_starts_with_the_tail_of_the_previous_one() {
        let text = words("w", 40);
        let chunks = chunk_pages(&[page(1, &text)], &cfg(10, 3), &Words);
        assert!(chunks.len() > 1);
        for pair in chunks.windows(2) {
            let previous: Vec<&str> = pair[0].text.split_whitespace().collect();
            let next: Vec<&str> = pair[1].text.split_whitespace().collect();
            assert_eq!(next[..3], previous[previous.len() - 3..]);
        }
        for chunk in &chunks {
            assert!(chunk.token_count <= 10, "{}", chunk.text);
        }
        let last = chunks.last().unwrap();
        assert!(last.text.ends_with("w39"));
    }

    #[test]
    fn a_chunk_never_spans_a_page_break() {
        let pages = [
            page(1, &format!("{}.", words("p", 8))),
            page(2, &format!("{}.", words("q", 8))),
            page(3, "   "),
            page(4, &format!("{}.", words("r", 8))),
        ];
        let chunks = chunk_pages(&pages, &cfg(10, 2), &Words);
        let summary: Vec<(i32, &str)> = chunks
            .iter()
            .map(|c| (c.page, c.text.split_whitespace().next().unwrap()))
            .collect();
        // Each page starts its own chunk and nothing of page 1 is carried onto page 2.
        assert_eq!(summary, vec![(1, "p0"), (2, "q0"), (4, "r0")]);
        assert!(chunks.iter().all(|c| !c.text.contains('p') || c.page == 1));
        assert!(!chunks[1].text.contains("p7"));
    }

    #[test]
    fn blank_input_gives_no_chunks_and_no_chunk_is_ever_empty() {
        assert!(chunk_pages(&[page(1, ""), page(2, " \n\n \t")], &cfg(10, 2), &Words).is_empty());
        let text = format!("{}\n\n\n\n{}", words("a", 30), words("b", 3));
        for chunk in chunk_pages(&[page(1, &text)], &cfg(7, 3), &Words) {
            assert!(!chunk.text.trim().is_empty());
            assert_eq!(chunk.text, chunk.text.trim());
        }
    }

    #[test]
    fn indexes_are_dense_and_hashes_are_sha256_of_the_text() {
        let text = words("w", 50);
        let chunks = chunk_pages(&[page(1, &text)], &ChunkConfig::default(), &ApproxTokens);
        let small = chunk_pages(&[page(1, &text)], &cfg(12, 4), &ApproxTokens);
        for (i, chunk) in small.iter().enumerate() {
            assert_eq!(chunk.index, i as i32);
            let expected: [u8; 32] = Sha256::digest(chunk.text.as_bytes()).into();
            assert_eq!(chunk.content_hash, expected);
        }
        assert_eq!(chunks.len(), 1);
        // The published SHA-256 digest of "hello".
        let hello = chunk_pages(&[page(1, "hello")], &ChunkConfig::default(), &ApproxTokens);
        assert_eq!(
            hex::encode(hello[0].content_hash),
            "2cf24dba5fb0a30e26e83b2ac5b9e29e1b161e5c1fa7425e73043362938b9824"
        );
    }

    #[test]
    fn chunking_is_deterministic() {
        let text = format!(
            "{}. {}!\n\n{}",
            words("a", 40),
            words("b", 70),
            words("c", 15)
        );
        let pages = [page(1, &text), page(2, "Tail page.")];
        let first = chunk_pages(&pages, &cfg(25, 5), &ApproxTokens);
        let second = chunk_pages(&pages, &cfg(25, 5), &ApproxTokens);
        assert_eq!(first, second);
        assert!(first.len() > 3);
    }

    /// Counts like [`ApproxTokens`] and adds up how many bytes it was asked to look at: the
    /// work chunking does, measured without a clock.
    #[derive(Default)]
    struct Metered {
        bytes: std::cell::Cell<usize>,
    }
    impl TokenCounter for Metered {
        fn count(&self, text: &str) -> usize {
            self.bytes.set(self.bytes.get() + text.len());
            ApproxTokens.count(text)
        }
    }

    /// Says every text is one token, as a tokenizer does for a word it does not know.
    struct OneToken;
    impl TokenCounter for OneToken {
        fn count(&self, _text: &str) -> usize {
            1
        }
    }

    #[test]
    fn chunking_one_enormous_word_is_linear_in_its_length() {
        let work = |mib: usize| {
            let word = "x".repeat(mib << 20);
            let counter = Metered::default();
            let chunks = chunk_pages(&[page(1, &word)], &ChunkConfig::default(), &counter);
            assert!(chunks.iter().all(|c| c.token_count <= 200));
            counter.bytes.get()
        };
        let (one, two) = (work(1), work(2));
        let ratio = two as f64 / one as f64;
        println!("bytes counted: 1 MiB word {one}, 2 MiB word {two}, ratio {ratio:.3}");
        assert!(
            ratio < 2.3,
            "2 MiB cost {ratio:.2} times the work of 1 MiB ({one} and {two} bytes counted): not linear"
        );
    }

    #[test]
    fn a_run_of_whitespace_is_one_space_and_costs_no_chunk() {
        let text = format!("a{}b", " ".repeat(1 << 20));
        let chunks = chunk_pages(&[page(1, &text)], &ChunkConfig::default(), &ApproxTokens);
        let texts: Vec<&str> = chunks.iter().map(|c| c.text.as_str()).collect();
        assert_eq!(texts, vec!["a b"]);
        let chunks = chunk_pages(
            &[page(1, "one \t two\r\n  three\n \n\n\t four  ")],
            &ChunkConfig::default(),
            &ApproxTokens,
        );
        assert_eq!(chunks[0].text, "one two\nthree\n\nfour");
    }

    #[test]
    fn chunks_are_bounded_in_bytes_when_tokens_are_cheap() {
        let text = words("w", 100_000);
        let cfg = ChunkConfig::default();
        let chunks = chunk_pages(&[page(1, &text)], &cfg, &OneToken);
        assert!(chunks.len() > 100, "{} chunks", chunks.len());
        for chunk in &chunks {
            assert!(
                chunk.text.len() <= cfg.max_bytes(),
                "{} bytes",
                chunk.text.len()
            );
        }
        let blob = "é".repeat(100_000);
        let chunks = chunk_pages(&[page(1, &blob)], &cfg, &OneToken);
        assert!(chunks.iter().all(|c| c.text.len() <= cfg.max_bytes()));
        let rejoined: String = chunks.iter().map(|c| c.text.as_str()).collect();
        assert_eq!(rejoined, blob);
    }

    #[test]
    fn overlap_larger_than_half_the_target_is_clamped() {
        let text = words("w", 30);
        let chunks = chunk_pages(&[page(1, &text)], &cfg(6, 100), &Words);
        assert!(chunks.iter().all(|c| c.token_count <= 6));
        assert!(chunks.last().unwrap().text.ends_with("w29"));
    }
}
