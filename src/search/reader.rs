//! The reader: a document's extracted text as a person reads it, by location (pages, slides,
//! sheets, sections), rebuilt from its chunks so that what the view shows is exactly what
//! search reads.
//!
//! Chunks overlap (each after the first on a page starts with the tail of the one before,
//! [`crate::chunk`]), so the text of a section is its chunks stitched with each overlap
//! removed: the longest end of the previous chunk that the next one starts with. Every chunk's
//! whole range (overlap included) is kept as character offsets into its section's text, so a
//! client can mark the passage a search hit found without any markup in the answer.
//!
//! A window is bounded: at most [`WINDOW_CHUNKS`] chunks and about [`WINDOW_BYTES`] of text
//! (always at least one chunk), from a chunk index on, with the index to continue from. A page
//! longer than a window (a 30 MB text file is one page) is cut between chunks; the section
//! that goes on in the next window says so (`continues`), and the one continued says
//! `continued`.

use serde::Serialize;
use sqlx::PgPool;

use crate::documents::DocumentId;

/// Most chunks in one window.
pub const WINDOW_CHUNKS: i64 = 200;
/// About the most text in one window, in bytes (a window stops after the chunk that passes it).
pub const WINDOW_BYTES: usize = 256 * 1024;
/// How many chunks before a requested one a window may start, to show the start of its page.
pub const LEAD_CHUNKS: i32 = 20;

/// One chunk's place in its section's text.
#[derive(utoipa::ToSchema, Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ChunkSpan {
    pub chunk_index: i32,
    /// Character offsets (Unicode scalar values, not bytes) into the section's `text`, the
    /// overlap with the chunk before included.
    pub start: usize,
    pub end: usize,
}

/// A page, slide, sheet or section of the text.
#[derive(utoipa::ToSchema, Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Section {
    /// The page (PDFs, images, text) or the section's ordinal (structured formats).
    pub page: i32,
    /// As a person names it: "page 3", "slide 2", "Sheet1, rows 4–9", a heading path.
    pub label: String,
    /// Whether OCR read this page (`None`: extracted before docket recorded it).
    pub ocr: Option<bool>,
    /// The text, chunk overlaps removed.
    pub text: String,
    pub chunks: Vec<ChunkSpan>,
    /// The section began in an earlier window.
    pub continued: bool,
    /// The section goes on in the next window.
    pub continues: bool,
}

/// A window of a document's text.
#[derive(utoipa::ToSchema, Debug, Clone, Serialize)]
pub struct TextWindow {
    /// The first chunk in the window.
    pub from: i32,
    /// The chunk index the next window starts at; `None` after the last.
    pub next: Option<i32>,
    /// Every chunk of the document.
    pub total_chunks: i64,
    /// The pages OCR read; `None` for documents extracted before docket recorded it.
    pub ocr_pages: Option<Vec<i32>>,
    pub sections: Vec<Section>,
}

/// A stored chunk, as the reader needs it.
#[derive(Debug, Clone)]
pub struct StoredChunk {
    pub chunk_index: i32,
    pub page: i32,
    pub location: Option<String>,
    pub text: String,
}

/// Where a window starts: at a chunk, or so that it shows `chunk`'s page from its start (at
/// most [`LEAD_CHUNKS`] before).
#[derive(Debug, Clone, Copy)]
pub enum Start {
    From(i32),
    Around(i32),
}

/// The window of document `id`'s text at `start`; `None` when the document does not exist.
pub async fn window(
    pool: &PgPool,
    id: DocumentId,
    start: Start,
) -> Result<Option<TextWindow>, sqlx::Error> {
    let Some(document) = sqlx::query!(
        r#"select ocr_pages, (select count(*) from chunks where document_id = $1) as "total!"
           from documents where id = $1"#,
        id.0
    )
    .fetch_optional(pool)
    .await?
    else {
        return Ok(None);
    };
    let from = match start {
        Start::From(from) => from.max(0),
        Start::Around(at) => sqlx::query_scalar!(
            "select min(c.chunk_index)
             from chunks c
             join chunks hit on hit.document_id = c.document_id and hit.page = c.page
             where c.document_id = $1 and hit.chunk_index = $2 and c.chunk_index >= $2 - $3",
            id.0,
            at,
            LEAD_CHUNKS,
        )
        .fetch_one(pool)
        .await?
        .unwrap_or(at.max(0)),
    };
    // One chunk before the window (its overlap is cut from the first) and one after (to know
    // whether there is more).
    let rows = sqlx::query_as!(
        StoredChunk,
        "select chunk_index, page, location, text
         from chunks
         where document_id = $1 and chunk_index >= $2 - 1
         order by chunk_index
         limit $3",
        id.0,
        from,
        WINDOW_CHUNKS + 2,
    )
    .fetch_all(pool)
    .await?;
    let ocr_pages = document.ocr_pages;
    let (sections, next) = stitch(&rows, from, ocr_pages.as_deref());
    Ok(Some(TextWindow {
        from,
        next,
        total_chunks: document.total,
        ocr_pages,
        sections,
    }))
}

/// Sections from `rows` (chunks in index order, possibly starting one before `from`), cut at
/// the window's bounds; also the index the next window starts at.
pub fn stitch(
    rows: &[StoredChunk],
    from: i32,
    ocr_pages: Option<&[i32]>,
) -> (Vec<Section>, Option<i32>) {
    let (before, rows) = match rows.first() {
        Some(first) if first.chunk_index < from => (Some(first), &rows[1..]),
        _ => (None, rows),
    };
    let mut sections: Vec<Section> = Vec::new();
    let mut previous = before;
    let mut bytes = 0usize;
    let mut next = None;
    for (taken, chunk) in rows.iter().enumerate() {
        let full = i64::try_from(taken).unwrap_or(i64::MAX) >= WINDOW_CHUNKS;
        if taken > 0 && (full || bytes >= WINDOW_BYTES) {
            next = Some(chunk.chunk_index);
            if let Some(last) = sections.last_mut() {
                last.continues = last.page == chunk.page;
            }
            break;
        }
        let same_page = previous.is_some_and(|p| p.page == chunk.page);
        let overlap = match previous {
            Some(p) if same_page => overlap_len(&p.text, &chunk.text),
            _ => 0,
        };
        let open = sections.last().is_some_and(|s| s.page == chunk.page);
        if !open {
            sections.push(Section {
                page: chunk.page,
                label: chunk
                    .location
                    .clone()
                    .unwrap_or_else(|| format!("page {}", chunk.page)),
                ocr: ocr_pages.map(|pages| pages.contains(&chunk.page)),
                text: String::new(),
                chunks: Vec::new(),
                continued: same_page,
                continues: false,
            });
        }
        if let Some(section) = sections.last_mut() {
            append(section, chunk, overlap, open);
        }
        bytes += chunk.text.len() - overlap;
        previous = Some(chunk);
    }
    (sections, next)
}

/// Appends `chunk` to `section`, leaving out its first `overlap` bytes (already there).
fn append(section: &mut Section, chunk: &StoredChunk, overlap: usize, open: bool) {
    let overlap_chars = chunk.text[..overlap].chars().count();
    let length = section.text.chars().count();
    // A chunk whose overlap was not found (or a continued section's first) starts its own
    // paragraph: chunks of one page are joined by a blank line, as the chunker separates them.
    let fresh = overlap == 0 && open;
    if fresh {
        section.text.push_str("\n\n");
    }
    let start = if fresh {
        length + 2
    } else {
        length.saturating_sub(overlap_chars)
    };
    section.text.push_str(&chunk.text[overlap..]);
    section.chunks.push(ChunkSpan {
        chunk_index: chunk.chunk_index,
        start,
        end: section.text.chars().count(),
    });
}

/// The length in bytes of the longest end of `previous` that `next` starts with, cut at a
/// character boundary; 0 when none is. The chunker carries its overlap this way, whole.
pub fn overlap_len(previous: &str, next: &str) -> usize {
    // Scanning from the longest candidate: a mismatch is nearly always at the first byte, so
    // this is close to linear in practice.
    let limit = previous.len().min(next.len());
    let first = previous.len() - limit;
    for (at, _) in previous.char_indices() {
        if at < first {
            continue;
        }
        let tail = &previous[at..];
        if next.starts_with(tail) {
            return tail.len();
        }
    }
    0
}

#[cfg(test)]
mod tests {
    use super::*;

    fn chunk(index: i32, page: i32, text: &str) -> StoredChunk {
        StoredChunk {
            chunk_index: index,
            page,
            location: None,
            text: text.to_owned(),
        }
    }

    #[test]
    fn overlaps_are_cut_once_and_spans_cover_whole_chunks() {
        let rows = [
            chunk(0, 1, "Alpha beta gamma. Delta epsilon"),
            chunk(1, 1, "Delta epsilon zeta eta."),
            chunk(2, 2, "한국어 문장입니다."),
        ];
        let (sections, next) = stitch(&rows, 0, Some(&[2]));
        assert_eq!(next, None);
        assert_eq!(sections.len(), 2);
        assert_eq!(
            sections[0].text,
            "Alpha beta gamma. Delta epsilon zeta eta."
        );
        assert_eq!(sections[0].label, "page 1");
        assert_eq!(sections[0].ocr, Some(false));
        let second: String = sections[0]
            .text
            .chars()
            .skip(sections[0].chunks[1].start)
            .take(sections[0].chunks[1].end - sections[0].chunks[1].start)
            .collect();
        assert_eq!(second, "Delta epsilon zeta eta.");
        assert_eq!(sections[1].ocr, Some(true));
        assert_eq!(
            sections[1].chunks[0].end,
            "한국어 문장입니다.".chars().count()
        );
    }

    #[test]
    fn chunks_without_overlap_are_separate_paragraphs() {
        let rows = [chunk(0, 1, "First part."), chunk(1, 1, "Second part.")];
        let (sections, _) = stitch(&rows, 0, None);
        assert_eq!(sections[0].text, "First part.\n\nSecond part.");
        assert_eq!(sections[0].chunks[1].start, 13);
        assert_eq!(sections[0].ocr, None);
    }

    #[test]
    fn a_window_after_the_first_cuts_the_overlap_with_the_chunk_before_it() {
        let rows = [chunk(4, 3, "one two three"), chunk(5, 3, "two three four")];
        let (sections, _) = stitch(&rows, 5, None);
        assert_eq!(sections.len(), 1);
        assert!(sections[0].continued);
        assert_eq!(sections[0].text, " four");
        assert_eq!(sections[0].chunks[0].start, 0);
    }

    #[test]
    fn the_overlap_is_the_longest_shared_end_at_a_character_boundary() {
        assert_eq!(overlap_len("abc def", "def ghi"), 3);
        assert_eq!(overlap_len("abc", "xyz"), 0);
        assert_eq!(overlap_len("가나다", "다라"), "다".len());
    }
}
