//! The caps every compound-file reader works under, so a small hostile file cannot make the
//! worker allocate or loop without end: bytes per stream and in total (after decompression),
//! and records parsed.

use crate::extract::ExtractError;

/// The most bytes one stream may hold once decompressed. The 1,030-page HWP report's largest
/// section is under 2 MiB.
pub const MAX_STREAM_BYTES: usize = 64 << 20;
/// The most bytes all streams of a document may hold once decompressed.
pub const MAX_TOTAL_BYTES: usize = 256 << 20;
/// The most records (HWP tag records) a document may have; the 1,030-page report has about
/// 300,000.
pub const MAX_RECORDS: usize = 4_000_000;

/// What is left of a document's allowance.
#[derive(Debug, Clone)]
pub struct Budget {
    bytes: usize,
    records: usize,
}

impl Default for Budget {
    fn default() -> Self {
        Budget {
            bytes: MAX_TOTAL_BYTES,
            records: MAX_RECORDS,
        }
    }
}

impl Budget {
    /// Accounts for a stream of `len` bytes (raw or decompressed).
    pub fn take_bytes(&mut self, len: usize) -> Result<(), ExtractError> {
        if len > MAX_STREAM_BYTES {
            return Err(too_complex(format!(
                "a stream holds more than {} MiB",
                MAX_STREAM_BYTES >> 20
            )));
        }
        self.bytes = self.bytes.checked_sub(len).ok_or_else(|| {
            too_complex(format!(
                "its streams hold more than {} MiB",
                MAX_TOTAL_BYTES >> 20
            ))
        })?;
        Ok(())
    }

    /// Accounts for one more record.
    pub fn take_record(&mut self) -> Result<(), ExtractError> {
        self.records = self
            .records
            .checked_sub(1)
            .ok_or_else(|| too_complex(format!("it has more than {MAX_RECORDS} records")))?;
        Ok(())
    }
}

fn too_complex(reason: String) -> ExtractError {
    ExtractError::TooComplex { reason }
}
