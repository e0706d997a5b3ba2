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
//!
//! The module is pure (text in, chunks out, no I/O) and sits below everything that needs to
//! count or cut text: the pipeline chunks with it, model versions name its settings, and the
//! local embedder counts with its [`TokenCounter`].
//!
//! Parts: `config` (sizes), `tokens` (counting), `pieces` (cutting text into
//! paragraphs, sentences and word runs) and `builder` (filling chunks with pieces and carrying
//! the overlap).

mod builder;
mod config;
mod pieces;
#[cfg(test)]
mod tests;
mod tokens;

pub use config::{ChunkConfig, MAX_BYTES_PER_TOKEN};
pub use tokens::{ApproxTokens, TokenCounter};

use crate::extract::Page;
use builder::Builder;
use pieces::split_into_pieces;

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
