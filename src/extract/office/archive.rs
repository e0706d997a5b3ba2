//! A zip container read under hostile-file caps.
//!
//! The sizes a zip declares can lie, so every cap is enforced on the bytes actually inflated:
//! entry count, bytes per entry, bytes over the whole document, and the inflation ratio of any
//! entry past a megabyte (a zip bomb inflates a thousandfold; XML rarely passes fifty). The
//! declared sizes are checked first too, so the common bomb is refused before any inflating.

use std::io::{Cursor, Read};

use zip::ZipArchive;
use zip::result::ZipError;

use crate::extract::ExtractError;

/// The most entries a container may list.
pub(crate) const MAX_ENTRIES: usize = 10_000;
/// The most bytes one entry may inflate to.
pub(crate) const MAX_ENTRY_BYTES: u64 = 128 << 20;
/// The most bytes all the entries read from one document may inflate to.
pub(crate) const MAX_TOTAL_BYTES: u64 = 256 << 20;
/// The highest inflation ratio of an entry larger than [`RATIO_FLOOR`].
pub(crate) const MAX_RATIO: u64 = 200;
/// Entries smaller than this are never refused for their ratio (tiny XML compresses well).
const RATIO_FLOOR: u64 = 1 << 20;

/// An opened container: its entries, read on demand, counted against the caps.
pub(crate) struct Archive<'a> {
    zip: ZipArchive<Cursor<&'a [u8]>>,
    /// The format as a person knows it, for messages ("Word document").
    format: &'static str,
    /// Bytes inflated so far.
    inflated: u64,
}

impl<'a> Archive<'a> {
    /// Opens `bytes` as a zip and checks what its directory declares.
    pub(crate) fn open(bytes: &'a [u8], format: &'static str) -> Result<Self, ExtractError> {
        let zip = ZipArchive::new(Cursor::new(bytes)).map_err(|err| zip_error(format, &err))?;
        if zip.len() > MAX_ENTRIES {
            return Err(too_complex(format!(
                "{} entries in the container, more than the limit of {MAX_ENTRIES}",
                zip.len()
            )));
        }
        let declared: u64 = zip
            .decompressed_size()
            .unwrap_or(0)
            .try_into()
            .unwrap_or(u64::MAX);
        if declared > MAX_TOTAL_BYTES {
            return Err(too_complex(format!(
                "it unpacks to {} MiB, more than the limit of {} MiB",
                declared >> 20,
                MAX_TOTAL_BYTES >> 20
            )));
        }
        Ok(Archive {
            zip,
            format,
            inflated: 0,
        })
    }

    /// The names of all entries, in directory order.
    pub(crate) fn names(&self) -> Vec<String> {
        self.zip.file_names().map(str::to_owned).collect()
    }

    /// Whether an entry of this name exists.
    pub(crate) fn has(&self, name: &str) -> bool {
        self.zip.index_for_name(name).is_some()
    }

    /// The inflated bytes of entry `name`, or `None` when there is no such entry.
    pub(crate) fn read(&mut self, name: &str) -> Result<Option<Vec<u8>>, ExtractError> {
        let name = name.trim_start_matches('/');
        let Some(index) = self.zip.index_for_name(name) else {
            return Ok(None);
        };
        self.read_index(index).map(Some)
    }

    /// Entry `name` as UTF-8 text (XML parts are UTF-8 in every format read here).
    pub(crate) fn read_text(&mut self, name: &str) -> Result<Option<String>, ExtractError> {
        let Some(bytes) = self.read(name)? else {
            return Ok(None);
        };
        String::from_utf8(bytes)
            .map(Some)
            .map_err(|_| ExtractError::Corrupt {
                format: self.format,
                reason: format!("{name} is not UTF-8 text"),
            })
    }

    /// Inflates every entry once, to hold the whole container to the caps before it is handed
    /// to a reader that opens it by itself (calamine).
    pub(crate) fn check_all(&mut self) -> Result<(), ExtractError> {
        for index in 0..self.zip.len() {
            self.read_index(index)?;
        }
        Ok(())
    }

    fn read_index(&mut self, index: usize) -> Result<Vec<u8>, ExtractError> {
        let format = self.format;
        let mut entry = self
            .zip
            .by_index(index)
            .map_err(|err| zip_error(format, &err))?;
        let name = entry.name().to_owned();
        let compressed = entry.compressed_size().max(1);
        if entry.size() > RATIO_FLOOR && entry.size() / compressed > MAX_RATIO {
            return Err(bomb(&name, entry.size() / compressed));
        }
        let budget = MAX_ENTRY_BYTES.min(MAX_TOTAL_BYTES.saturating_sub(self.inflated));
        let mut out = Vec::with_capacity(usize::try_from(entry.size().min(budget)).unwrap_or(0));
        let mut chunk = [0u8; 64 * 1024];
        loop {
            let read = match entry.read(&mut chunk) {
                Ok(0) => break,
                Ok(read) => read,
                Err(err) => {
                    return Err(ExtractError::Corrupt {
                        format,
                        reason: format!("{name} cannot be unpacked ({err})"),
                    });
                }
            };
            out.extend_from_slice(&chunk[..read]);
            let size = out.len() as u64;
            if size > budget {
                return Err(too_complex(format!(
                    "it unpacks to more than {} MiB",
                    budget >> 20
                )));
            }
            if size > RATIO_FLOOR && size / compressed > MAX_RATIO {
                return Err(bomb(&name, size / compressed));
            }
        }
        self.inflated += out.len() as u64;
        Ok(out)
    }
}

fn too_complex(reason: String) -> ExtractError {
    ExtractError::TooComplex { reason }
}

fn bomb(name: &str, ratio: u64) -> ExtractError {
    too_complex(format!(
        "{name} inflates {ratio} times its packed size, more than the limit of {MAX_RATIO} (a zip bomb?)"
    ))
}

/// A zip error as the person who uploaded the file should read it.
fn zip_error(format: &'static str, err: &ZipError) -> ExtractError {
    match err {
        ZipError::UnsupportedArchive(what)
            if what.contains("assword") || what.contains("ncrypt") =>
        {
            ExtractError::Encrypted { format }
        }
        ZipError::UnsupportedArchive(what) => ExtractError::Corrupt {
            format,
            reason: format!("an unsupported zip feature ({what})"),
        },
        ZipError::InvalidPassword => ExtractError::Encrypted { format },
        other => ExtractError::Corrupt {
            format,
            reason: format!("the zip container is cut short or damaged ({other})"),
        },
    }
}
