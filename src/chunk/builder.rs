//! Filling one chunk: pieces are appended with the source's spacing (a blank line between
//! paragraphs), and the tail of a full chunk is carried into the next as its overlap.

use sha2::{Digest, Sha256};

use super::pieces::{Piece, atom_starts};
use super::{Chunk, TokenCounter};

/// The chunk being filled.
#[derive(Default)]
pub(super) struct Builder {
    /// The text so far, untrimmed so that the next piece of the same paragraph joins with the
    /// source's own spacing.
    pub raw: String,
    /// Where each piece (or the carried overlap) starts in `raw`, and its page.
    starts: Vec<(usize, u32)>,
    /// Tokens in `raw`, overlap included (sum of piece counts).
    pub tokens: usize,
    /// Tokens added since the overlap; zero means the chunk has nothing new yet.
    pub new_tokens: usize,
    new_pieces: usize,
}

impl Builder {
    pub fn starting_with(tail: Option<(String, u32)>, counter: &dyn TokenCounter) -> Builder {
        let mut builder = Builder::default();
        if let Some((text, page)) = tail {
            builder.tokens = counter.count(&text);
            builder.starts.push((0, page));
            builder.raw = text;
        }
        builder
    }

    /// The page of the text so far (a chunk never spans two), `None` while empty.
    pub fn page(&self) -> Option<u32> {
        self.starts.last().map(|&(_, page)| page)
    }

    pub fn has_new(&self) -> bool {
        self.new_pieces > 0
    }

    pub fn push(&mut self, piece: &Piece<'_>) {
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
    pub fn tail(
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

    pub fn finish(self, index: usize, counter: &dyn TokenCounter) -> Option<Chunk> {
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
