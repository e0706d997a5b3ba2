//! PDF pages → grey images for tesseract, with poppler's `pdfinfo` and `pdftoppm`.
//!
//! Both parse the (possibly hostile) PDF, so both run as the isolated child does: under the
//! memory cap and the deadline. The resolution is [`OCR_DPI`], lowered for pages so large that
//! the image would pass [`MAX_PAGE_PIXELS`]. A rasterised page with almost no dark pixels is
//! blank and skips tesseract, which saves a second or more per blank page.

use std::path::{Path, PathBuf};

use super::{Helper, OcrSettings};
use crate::extract::ExtractError;

/// Rendering resolution for OCR. Measured on the corpus' scans against `ocrmypdf --sidecar`
/// (character agreement, tesseract eng): 150 dpi loses the 2400-dpi typewriter page (0.15),
/// 200 dpi reaches 0.97 on average, 300 dpi 0.98, 400 dpi falls back (0.95) and costs 1.3×
/// the time of 300. 300 dpi is also what tesseract's models are trained around.
pub const OCR_DPI: u32 = 300;
/// The largest page image rendered: an A4 page at 300 dpi is 8.7 Mpx; a poster-sized page is
/// rendered at a lower resolution instead of into gigabytes.
pub const MAX_PAGE_PIXELS: f64 = 40e6;
/// A pixel at or below this grey level (of 255) is ink.
const INK_LEVEL: u8 = 128;
/// Fewer ink pixels than this is a blank page: one small character at 300 dpi has several
/// hundred.
const MIN_INK_PIXELS: usize = 200;

/// A private directory for one OCR run, removed with everything in it when dropped.
pub(super) struct WorkDir {
    pub path: PathBuf,
}

impl WorkDir {
    pub fn create() -> std::io::Result<WorkDir> {
        use std::os::unix::fs::DirBuilderExt;
        let path = std::env::temp_dir().join(format!("docket-ocr-{}", uuid::Uuid::new_v4()));
        std::fs::DirBuilder::new().mode(0o700).create(&path)?;
        Ok(WorkDir { path })
    }
}

impl Drop for WorkDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.path);
    }
}

/// Page sizes in points from `pdfinfo -f FIRST -l LAST`, by page number.
pub(super) async fn page_sizes(
    settings: &OcrSettings,
    helper: &Helper<'_>,
    pdf: &Path,
    first: u32,
    last: u32,
) -> Result<Vec<(u32, f64, f64)>, ExtractError> {
    let args = [
        "-f".to_owned(),
        first.to_string(),
        "-l".to_owned(),
        last.to_string(),
        pdf.display().to_string(),
    ];
    let out = helper.run(&settings.pdfinfo, &args, 1 << 20).await?;
    Ok(parse_page_sizes(&String::from_utf8_lossy(&out)))
}

/// Lines like `Page    3 size: 612 x 792 pts (letter)`.
fn parse_page_sizes(text: &str) -> Vec<(u32, f64, f64)> {
    text.lines()
        .filter_map(|line| {
            let rest = line.strip_prefix("Page")?;
            let (number, rest) = rest.trim_start().split_once(' ')?;
            let dims = rest.trim_start().strip_prefix("size:")?;
            let mut parts = dims.split_whitespace();
            let width: f64 = parts.next()?.parse().ok()?;
            let _x = parts.next()?;
            let height: f64 = parts.next()?.parse().ok()?;
            Some((number.parse().ok()?, width, height))
        })
        .collect()
}

/// The resolution for a page of `width` × `height` points.
pub(super) fn dpi_for(width: f64, height: f64) -> u32 {
    let inches = (width / 72.0) * (height / 72.0);
    if inches <= 0.0 || !inches.is_finite() {
        return OCR_DPI;
    }
    let fitting = (MAX_PAGE_PIXELS / inches).sqrt();
    (fitting.floor() as u32).clamp(36, OCR_DPI)
}

/// Renders page `number` as an 8-bit grey PGM in `dir`; returns its path.
pub(super) async fn render(
    settings: &OcrSettings,
    helper: &Helper<'_>,
    pdf: &Path,
    dir: &Path,
    number: u32,
    dpi: u32,
) -> Result<PathBuf, ExtractError> {
    let prefix = dir.join(format!("page-{number}"));
    let args = [
        "-q".to_owned(),
        "-f".to_owned(),
        number.to_string(),
        "-l".to_owned(),
        number.to_string(),
        "-r".to_owned(),
        dpi.to_string(),
        "-gray".to_owned(),
        "-singlefile".to_owned(),
        pdf.display().to_string(),
        prefix.display().to_string(),
    ];
    helper.run(&settings.pdftoppm, &args, 1 << 16).await?;
    let path = prefix.with_extension("pgm");
    if !path.is_file() {
        return Err(ExtractError::PdfMalformed {
            reason: format!("page {number} could not be rendered"),
        });
    }
    Ok(path)
}

/// Whether a binary PGM (`P5`, 8-bit) has enough ink to be worth reading. Anything that does
/// not parse is handed to tesseract, which has the final word.
pub(super) fn has_ink(pgm: &[u8]) -> bool {
    let Some(pixels) = pgm_pixels(pgm) else {
        return true;
    };
    pixels.iter().filter(|&&p| p <= INK_LEVEL).count() >= MIN_INK_PIXELS
}

/// The pixel bytes of a `P5` PGM with maxval 255, after its header.
fn pgm_pixels(pgm: &[u8]) -> Option<&[u8]> {
    if !pgm.starts_with(b"P5") {
        return None;
    }
    // Header: magic, width, height, maxval, separated by whitespace (no comments from poppler),
    // then one whitespace byte and the pixels.
    let mut fields = 0;
    let mut at = 2;
    while fields < 3 {
        while pgm.get(at)?.is_ascii_whitespace() {
            at += 1;
        }
        let start = at;
        while pgm.get(at)?.is_ascii_digit() {
            at += 1;
        }
        if start == at {
            return None;
        }
        if fields == 2 && &pgm[start..at] != b"255" {
            return None;
        }
        fields += 1;
    }
    pgm.get(at + 1..)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn page_sizes_come_from_pdfinfo_lines() {
        let text = "Pages:           3\nPage    1 size: 612 x 792 pts (letter)\nPage    1 rot:  0\n\
                    Page    2 size: 120 x 85.92 pts\n";
        assert_eq!(
            parse_page_sizes(text),
            vec![(1, 612.0, 792.0), (2, 120.0, 85.92)]
        );
    }

    #[test]
    fn big_pages_get_a_lower_resolution() {
        assert_eq!(dpi_for(595.0, 842.0), OCR_DPI);
        // A 1 m × 1 m poster (2835 pt square) stays under the pixel cap.
        let dpi = dpi_for(2835.0, 2835.0);
        assert!(dpi < 200, "{dpi}");
        let side = 2835.0 / 72.0 * f64::from(dpi);
        assert!(side * side <= MAX_PAGE_PIXELS);
    }

    #[test]
    fn a_white_page_has_no_ink_and_a_dark_one_has() {
        let mut white = b"P5\n40 10\n255\n".to_vec();
        white.extend(std::iter::repeat_n(255u8, 400));
        assert!(!has_ink(&white));
        let mut dark = b"P5 40 10 255\n".to_vec();
        dark.extend(std::iter::repeat_n(10u8, 400));
        assert!(has_ink(&dark));
    }
}
