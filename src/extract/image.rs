//! What an uploaded image is before any decoder sees it: format, pages, dimensions, and
//! whether the file is whole.
//!
//! OCR decodes images with leptonica inside tesseract, under the child's memory cap. That cap
//! would stop a decompression bomb (a few KiB of PNG declaring 100 000 × 100 000 pixels), but
//! only as "ran out of memory"; reading the header first turns it into a reason a person
//! understands, and costs microseconds. A truncated file is caught here too (a PNG without its
//! `IEND` chunk, a JPEG without its end-of-image marker, a TIFF whose strips point past the end
//! of the file): decoders often "succeed" on those with a grey or cut-off page.

use super::ExtractError;

/// Image formats OCR reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ImageFormat {
    Png,
    Jpeg,
    Tiff,
}

impl ImageFormat {
    /// The file extension tesseract (leptonica) is given.
    pub fn extension(self) -> &'static str {
        match self {
            ImageFormat::Png => "png",
            ImageFormat::Jpeg => "jpg",
            ImageFormat::Tiff => "tif",
        }
    }
}

/// The header facts of an image.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ImageInfo {
    pub format: ImageFormat,
    /// Width and height of every page (one for PNG and JPEG, one per directory for TIFF).
    pub pages: Vec<(u32, u32)>,
}

/// The most TIFF directories walked: past the OCR page cap the count no longer matters, and a
/// cyclic chain must end.
const MAX_TIFF_PAGES: usize = 10_000;

/// Reads the header of a PNG, JPEG or TIFF and checks that the file is complete.
pub fn inspect(bytes: &[u8]) -> Result<ImageInfo, ExtractError> {
    if bytes.starts_with(b"\x89PNG\r\n\x1a\n") {
        return png(bytes);
    }
    if bytes.starts_with(b"\xff\xd8\xff") {
        return jpeg(bytes);
    }
    if bytes.starts_with(b"II*\0") || bytes.starts_with(b"MM\0*") {
        return tiff(bytes);
    }
    Err(ExtractError::Unsupported {
        detected: "application/octet-stream",
    })
}

/// Refuses an image whose largest page exceeds `max_pixels`.
pub fn check_size(info: &ImageInfo, max_pixels: u64) -> Result<(), ExtractError> {
    for &(width, height) in &info.pages {
        if width == 0 || height == 0 {
            return Err(malformed("it declares a page of zero pixels"));
        }
        if u64::from(width) * u64::from(height) > max_pixels {
            return Err(ExtractError::ImageTooLarge {
                width,
                height,
                max_megapixels: max_pixels / 1_000_000,
            });
        }
    }
    Ok(())
}

fn malformed(reason: &str) -> ExtractError {
    ExtractError::ImageMalformed {
        reason: reason.to_owned(),
    }
}

fn be32(bytes: &[u8], at: usize) -> Option<u32> {
    let b = bytes.get(at..at.checked_add(4)?)?;
    Some(u32::from_be_bytes([b[0], b[1], b[2], b[3]]))
}

fn png(bytes: &[u8]) -> Result<ImageInfo, ExtractError> {
    // The signature is followed by the IHDR chunk: length, "IHDR", width, height.
    if bytes.get(12..16) != Some(b"IHDR") {
        return Err(malformed("the PNG has no header chunk"));
    }
    let (Some(width), Some(height)) = (be32(bytes, 16), be32(bytes, 20)) else {
        return Err(malformed("the PNG header is cut short"));
    };
    // Walk the chunks: each is length, type, data, CRC. A whole file ends with IEND.
    let mut at = 8usize;
    loop {
        let Some(length) = be32(bytes, at) else {
            return Err(malformed("the PNG is truncated (no end chunk)"));
        };
        let kind = bytes.get(at + 4..at + 8);
        let next = at
            .checked_add(12)
            .and_then(|n| n.checked_add(length as usize));
        match next {
            Some(next) if next <= bytes.len() => {
                if kind == Some(b"IEND") {
                    break;
                }
                at = next;
            }
            _ => {
                return Err(malformed(
                    "the PNG is truncated (a chunk runs past the end)",
                ));
            }
        }
    }
    Ok(ImageInfo {
        format: ImageFormat::Png,
        pages: vec![(width, height)],
    })
}

fn jpeg(bytes: &[u8]) -> Result<ImageInfo, ExtractError> {
    let mut at = 2usize;
    let mut size = None;
    // Markers up to the start of scan; each segment carries its own length.
    loop {
        let Some(&[0xff, marker]) = bytes.get(at..at + 2) else {
            return Err(malformed(
                "the JPEG is truncated or damaged before its image data",
            ));
        };
        if marker == 0xff {
            // Fill bytes before a marker.
            at += 1;
            continue;
        }
        if matches!(marker, 0x01 | 0xd0..=0xd7) {
            at += 2;
            continue;
        }
        let Some(length) = bytes
            .get(at + 2..at + 4)
            .map(|b| usize::from(u16::from_be_bytes([b[0], b[1]])))
        else {
            return Err(malformed("the JPEG is truncated"));
        };
        // Start-of-frame markers (not DHT C4, JPG C8, DAC CC) hold the dimensions.
        let is_frame = matches!(marker, 0xc0..=0xcf) && !matches!(marker, 0xc4 | 0xc8 | 0xcc);
        if is_frame {
            let (Some(h), Some(w)) = (bytes.get(at + 5..at + 7), bytes.get(at + 7..at + 9)) else {
                return Err(malformed("the JPEG frame header is cut short"));
            };
            size = Some((
                u32::from(u16::from_be_bytes([w[0], w[1]])),
                u32::from(u16::from_be_bytes([h[0], h[1]])),
            ));
        }
        if marker == 0xda {
            at += 2 + length;
            break;
        }
        if marker == 0xd9 {
            return Err(malformed("the JPEG ends before its image data"));
        }
        at += 2 + length;
    }
    let Some(size) = size else {
        return Err(malformed("the JPEG has no frame header"));
    };
    // Inside entropy-coded data 0xFF is always followed by 0x00 or a restart marker, so the
    // first FF D9 after the scan starts is the real end of the image.
    let scan = bytes.get(at..).unwrap_or_default();
    if !scan.windows(2).any(|w| w == [0xff, 0xd9]) {
        return Err(malformed("the JPEG is truncated (no end-of-image marker)"));
    }
    Ok(ImageInfo {
        format: ImageFormat::Jpeg,
        pages: vec![size],
    })
}

fn tiff(bytes: &[u8]) -> Result<ImageInfo, ExtractError> {
    let tiff = Tiff {
        bytes,
        little: bytes.starts_with(b"II"),
    };
    let mut pages = Vec::new();
    let mut seen = std::collections::HashSet::new();
    let mut ifd = tiff.u32_at(4).ok_or_else(tiff_truncated)? as usize;
    while ifd != 0 {
        if !seen.insert(ifd) || pages.len() >= MAX_TIFF_PAGES {
            break;
        }
        let (page, next) = tiff.page(ifd)?;
        pages.push(page);
        ifd = next;
    }
    if pages.is_empty() {
        return Err(malformed("the TIFF has no pages"));
    }
    Ok(ImageInfo {
        format: ImageFormat::Tiff,
        pages,
    })
}

fn tiff_truncated() -> ExtractError {
    malformed("the TIFF is truncated or damaged (a directory points past the end)")
}

/// A TIFF file's bytes, read in its byte order; every read is bounds-checked (`None` past the
/// end).
struct Tiff<'a> {
    bytes: &'a [u8],
    little: bool,
}

impl Tiff<'_> {
    fn u16_at(&self, at: usize) -> Option<u32> {
        let b = self.bytes.get(at..at.checked_add(2)?)?;
        let pair = [b[0], b[1]];
        Some(u32::from(if self.little {
            u16::from_le_bytes(pair)
        } else {
            u16::from_be_bytes(pair)
        }))
    }

    fn u32_at(&self, at: usize) -> Option<u32> {
        let b = self.bytes.get(at..at.checked_add(4)?)?;
        let quad = [b[0], b[1], b[2], b[3]];
        Some(if self.little {
            u32::from_le_bytes(quad)
        } else {
            u32::from_be_bytes(quad)
        })
    }

    /// Value `i` of the directory entry at `at`, of type `kind` with `n` values: one SHORT (3)
    /// or LONG (4) sits in the entry, more sit at the offset it holds.
    fn value(&self, at: usize, kind: u32, n: u32, i: usize) -> Option<u32> {
        let width = if kind == 3 { 2 } else { 4 };
        let base = if n as usize * width <= 4 {
            at + 8
        } else {
            self.u32_at(at + 8)? as usize
        };
        let item = base.checked_add(i.checked_mul(width)?)?;
        if kind == 3 {
            self.u16_at(item)
        } else {
            self.u32_at(item)
        }
    }

    /// The page of the image directory at `ifd` (its width and height, its image data checked
    /// to lie inside the file) and the offset of the next directory (0 after the last).
    fn page(&self, ifd: usize) -> Result<((u32, u32), usize), ExtractError> {
        let count = self.u16_at(ifd).ok_or_else(tiff_truncated)? as usize;
        let (mut width, mut height) = (None, None);
        let mut offsets = Vec::new();
        let mut counts = Vec::new();
        for entry in 0..count {
            let at = ifd + 2 + entry * 12;
            let (Some(tag), Some(kind), Some(n)) =
                (self.u16_at(at), self.u16_at(at + 2), self.u32_at(at + 4))
            else {
                return Err(tiff_truncated());
            };
            match tag {
                256 => width = self.value(at, kind, n, 0),
                257 => height = self.value(at, kind, n, 0),
                // Strip or tile offsets and byte counts: read only to check the file's length.
                273 | 324 | 279 | 325 => {
                    let values: Option<Vec<u32>> = (0..(n as usize).min(1 << 16))
                        .map(|i| self.value(at, kind, n, i))
                        .collect();
                    let values = values.ok_or_else(tiff_truncated)?;
                    if matches!(tag, 273 | 324) {
                        offsets = values;
                    } else {
                        counts = values;
                    }
                }
                _ => {}
            }
        }
        let (Some(width), Some(height)) = (width, height) else {
            return Err(malformed("a TIFF page has no dimensions"));
        };
        let past_end = offsets.iter().zip(&counts).any(|(&offset, &count)| {
            u64::from(offset) + u64::from(count) > self.bytes.len() as u64
        });
        if past_end || offsets.is_empty() {
            return Err(malformed(
                "the TIFF is truncated (its image data runs past the end of the file)",
            ));
        }
        let next = self
            .u32_at(ifd + 2 + count * 12)
            .ok_or_else(tiff_truncated)? as usize;
        Ok(((width, height), next))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A PNG header declaring `width` × `height`, with an IEND chunk when `whole`.
    fn png_header(width: u32, height: u32, whole: bool) -> Vec<u8> {
        let mut bytes = b"\x89PNG\r\n\x1a\n".to_vec();
        bytes.extend_from_slice(&13u32.to_be_bytes());
        bytes.extend_from_slice(b"IHDR");
        bytes.extend_from_slice(&width.to_be_bytes());
        bytes.extend_from_slice(&height.to_be_bytes());
        bytes.extend_from_slice(&[1, 0, 0, 0, 0]);
        bytes.extend_from_slice(&[0; 4]);
        if whole {
            bytes.extend_from_slice(&0u32.to_be_bytes());
            bytes.extend_from_slice(b"IEND");
            bytes.extend_from_slice(&[0xae, 0x42, 0x60, 0x82]);
        }
        bytes
    }

    #[test]
    fn png_dimensions_and_truncation() {
        let info = inspect(&png_header(640, 480, true)).unwrap();
        assert_eq!(info.format, ImageFormat::Png);
        assert_eq!(info.pages, vec![(640, 480)]);
        let err = inspect(&png_header(640, 480, false)).unwrap_err();
        assert_eq!(err.code(), "image_malformed");
    }

    #[test]
    fn a_bomb_is_refused_by_its_declared_size() {
        let info = inspect(&png_header(100_000, 100_000, true)).unwrap();
        let err = check_size(&info, 50_000_000).unwrap_err();
        assert_eq!(
            err.to_string(),
            "the image is 100000 × 100000 pixels; docket reads images up to 50 megapixels"
        );
    }

    #[test]
    fn jpeg_without_its_end_marker_is_truncated() {
        // SOI, SOF0 (8-bit, 20 × 10, 1 component), SOS, two data bytes, EOI.
        let mut jpeg = vec![
            0xff, 0xd8, 0xff, 0xc0, 0, 11, 8, 0, 10, 0, 20, 1, 1, 0x11, 0,
        ];
        jpeg.extend_from_slice(&[0xff, 0xda, 0, 8, 1, 1, 0, 0, 63, 0, 0x12, 0x34]);
        let mut whole = jpeg.clone();
        whole.extend_from_slice(&[0xff, 0xd9]);
        assert_eq!(inspect(&whole).unwrap().pages, vec![(20, 10)]);
        assert_eq!(inspect(&jpeg).unwrap_err().code(), "image_malformed");
    }
}
