//! OCR with tesseract: PDF pages without a usable text layer, and uploaded images.
//!
//! Every helper (`pdfinfo`, `pdftoppm`, `tesseract`) reads untrusted bytes, so each runs as the
//! PDF child does: the docket binary re-run as `docket __extract-pdf`, which caps its address
//! space and then execs the helper ([`Helper`]), killed at the deadline. Each call gets the
//! full per-extractor timeout, and a call reads one page (PDFs) or one file (images), so a
//! document's OCR time is bounded by its page count, which is capped by
//! [`OcrSettings::max_pages`] before any work starts.
//!
//! PDF pages are rendered one at a time ([`raster`]), blank renders are skipped, and the
//! languages of each page are chosen by script detection or fixed by configuration
//! ([`tesseract`]). `progress` is called after every page so the document can show how far
//! OCR got. tesseract runs single-threaded (`OMP_THREAD_LIMIT=1`): the OCR job kind's own
//! concurrency decides how many cores OCR takes, not tesseract's thread pool.

pub mod raster;
pub mod tesseract;

use std::path::{Path, PathBuf};

use super::ExtractSettings;
use super::image::{self, ImageInfo};
use super::pdf::{EXIT_OUT_OF_MEMORY, EXIT_SETUP_FAILED, child_command};
use super::{ExtractError, Page};
use crate::extract::pdf::process::{self, Run};

/// Which languages tesseract reads with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Languages {
    /// Detect each page's script and use the candidates of that script (the default, over
    /// [`tesseract::DEFAULT_LANGUAGES`]).
    Auto(Vec<String>),
    /// Always these, joined with `+` (e.g. `deu+eng`).
    Fixed(Vec<String>),
}

impl Languages {
    /// Parses `DOCKET_OCR_LANGS`: `auto`, or tesseract codes joined by `+` (or commas).
    pub fn parse(value: &str) -> Result<Languages, String> {
        let value = value.trim();
        if value.is_empty() || value.eq_ignore_ascii_case("auto") {
            return Ok(Languages::default());
        }
        let codes: Vec<String> = value
            .split(['+', ','])
            .map(str::trim)
            .filter(|code| !code.is_empty())
            .map(str::to_owned)
            .collect();
        let valid = |code: &String| {
            code.chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
        };
        if codes.is_empty() || !codes.iter().all(valid) {
            return Err(format!(
                "DOCKET_OCR_LANGS must be `auto` or tesseract language codes joined by `+` (got {value:?})"
            ));
        }
        Ok(Languages::Fixed(codes))
    }
}

impl Default for Languages {
    fn default() -> Self {
        Languages::Auto(
            tesseract::DEFAULT_LANGUAGES
                .iter()
                .map(|code| (*code).to_owned())
                .collect(),
        )
    }
}

/// OCR's settings and helper programs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OcrSettings {
    /// Off: pages without text stay empty and a document without any fails as before.
    pub enabled: bool,
    pub languages: Languages,
    /// The most pages one document may need OCR on; past it the document fails with a reason.
    pub max_pages: u32,
    /// The most pixels an uploaded image page may declare.
    pub max_image_pixels: u64,
    pub tesseract: PathBuf,
    pub pdftoppm: PathBuf,
    pub pdfinfo: PathBuf,
}

impl Default for OcrSettings {
    fn default() -> Self {
        OcrSettings {
            enabled: true,
            languages: Languages::default(),
            max_pages: 200,
            max_image_pixels: 50_000_000,
            tesseract: PathBuf::from("tesseract"),
            pdftoppm: PathBuf::from("pdftoppm"),
            pdfinfo: PathBuf::from("pdfinfo"),
        }
    }
}

/// What OCR did to a document, for its extractor label.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OcrRun {
    /// `tesseract 5.3.0`.
    pub engine: String,
    /// Every language used, in order of first use.
    pub languages: Vec<String>,
    /// The pages it read (not those skipped as blank).
    pub pages: Vec<u32>,
}

impl OcrRun {
    fn new(engine: String) -> Self {
        OcrRun {
            engine,
            languages: Vec::new(),
            pages: Vec::new(),
        }
    }

    fn used(&mut self, number: u32, languages: &[String]) {
        self.pages.push(number);
        for lang in languages {
            if !self.languages.contains(lang) {
                self.languages.push(lang.clone());
            }
        }
    }

    /// `ocr (tesseract 5.3.0, kor+eng)`.
    pub fn label(&self) -> String {
        if self.languages.is_empty() {
            format!("ocr ({})", self.engine)
        } else {
            format!("ocr ({}, {})", self.engine, self.languages.join("+"))
        }
    }
}

/// Reads pages `numbers` of a PDF with OCR; returns their text (blank pages empty).
pub async fn read_pdf_pages(
    bytes: &[u8],
    numbers: &[u32],
    limits: &ExtractSettings,
    progress: &(dyn Fn(usize, usize) + Sync),
) -> Result<(Vec<Page>, OcrRun), ExtractError> {
    let settings = &limits.ocr;
    check_page_cap(numbers.len(), settings)?;
    let helper = Helper::new(limits, 1);
    let mut run = OcrRun::new(tesseract::version(settings).await);
    let (Some(&first), Some(&last)) = (numbers.iter().min(), numbers.iter().max()) else {
        return Ok((Vec::new(), run));
    };
    let dir = work_dir()?;
    let pdf = dir.path.join("document.pdf");
    write_private(&pdf, bytes).await?;
    let sizes = raster::page_sizes(settings, &helper, &pdf, first, last).await?;
    let mut pages = Vec::with_capacity(numbers.len());
    for (done, &number) in numbers.iter().enumerate() {
        let dpi = sizes
            .iter()
            .find(|(n, ..)| *n == number)
            .map_or(raster::OCR_DPI, |&(_, w, h)| raster::dpi_for(w, h));
        let image = raster::render(settings, &helper, &pdf, &dir.path, number, dpi).await?;
        let pgm = tokio::fs::read(&image)
            .await
            .map_err(|err| internal(format!("reading a rendered page: {err}")))?;
        let text = if raster::has_ink(&pgm) {
            drop(pgm);
            let languages =
                tesseract::choose_languages(settings, &helper, &image, Some(dpi)).await?;
            let text =
                tesseract::recognise(settings, &helper, &image, &languages, Some(dpi)).await?;
            run.used(number, &languages);
            text.replace('\x0c', "")
        } else {
            String::new()
        };
        let _ = tokio::fs::remove_file(&image).await;
        pages.push(Page { number, text });
        progress(done + 1, numbers.len());
    }
    Ok((pages, run))
}

/// Reads an uploaded image (every page of a multi-page TIFF) with OCR.
pub async fn read_image(
    bytes: &[u8],
    limits: &ExtractSettings,
    progress: &(dyn Fn(usize, usize) + Sync),
) -> Result<(Vec<Page>, OcrRun), ExtractError> {
    let settings = &limits.ocr;
    let info = inspect_image(bytes, settings)?;
    // tesseract reads every page of a TIFF in one call, so that call gets every page's time.
    let helper = Helper::new(limits, info.pages.len());
    let mut run = OcrRun::new(tesseract::version(settings).await);
    let dir = work_dir()?;
    let path = dir.path.join(format!("upload.{}", info.format.extension()));
    write_private(&path, bytes).await?;
    progress(0, info.pages.len());
    let languages = tesseract::choose_languages(settings, &helper, &path, None)
        .await
        .map_err(as_image_error)?;
    let text = tesseract::recognise(settings, &helper, &path, &languages, None)
        .await
        .map_err(as_image_error)?;
    let mut pieces: Vec<&str> = text.split('\x0c').collect();
    if pieces.len() > 1 && pieces.last().is_some_and(|last| last.trim().is_empty()) {
        pieces.pop();
    }
    let pages: Vec<Page> = pieces
        .into_iter()
        .zip(1u32..)
        .map(|(text, number)| Page {
            number,
            text: text.to_owned(),
        })
        .collect();
    for page in &pages {
        run.used(page.number, &languages);
    }
    progress(info.pages.len(), info.pages.len());
    Ok((pages, run))
}

/// The header facts of an image, refused when damaged, too large or over the page cap.
pub fn inspect_image(bytes: &[u8], settings: &OcrSettings) -> Result<ImageInfo, ExtractError> {
    let info = image::inspect(bytes)?;
    image::check_size(&info, settings.max_image_pixels)?;
    check_page_cap(info.pages.len(), settings)?;
    Ok(info)
}

/// Fails when `pages` exceeds the configured cap.
pub fn check_page_cap(pages: usize, settings: &OcrSettings) -> Result<(), ExtractError> {
    if pages > settings.max_pages as usize {
        return Err(ExtractError::OcrPageLimit {
            pages,
            limit: settings.max_pages,
        });
    }
    Ok(())
}

/// A helper failure on an image is the image's fault once the header checks passed: the
/// decoder could not read it.
fn as_image_error(err: ExtractError) -> ExtractError {
    match err {
        ExtractError::PdfMalformed { reason } => ExtractError::ImageMalformed { reason },
        other => other,
    }
}

fn internal(reason: String) -> ExtractError {
    ExtractError::Internal { reason }
}

fn work_dir() -> Result<raster::WorkDir, ExtractError> {
    raster::WorkDir::create()
        .map_err(|err| internal(format!("cannot create a temporary directory: {err}")))
}

async fn write_private(path: &Path, bytes: &[u8]) -> Result<(), ExtractError> {
    // The directory is private (0700); the file needs no mode of its own.
    tokio::fs::write(path, bytes)
        .await
        .map_err(|err| internal(format!("cannot write a temporary file: {err}")))
}

/// Runs OCR's helper programs inside the isolated child, under the PDF limits.
pub(super) struct Helper<'a> {
    limits: &'a ExtractSettings,
    /// The deadline of one call: the extractor timeout per page the call reads.
    timeout: std::time::Duration,
}

impl<'a> Helper<'a> {
    fn new(limits: &'a ExtractSettings, pages: usize) -> Self {
        let pages = u32::try_from(pages.max(1)).unwrap_or(u32::MAX);
        Helper {
            limits,
            timeout: limits.timeout.saturating_mul(pages),
        }
    }

    /// Runs `program args…`; anything but a clean exit is an error.
    async fn run(
        &self,
        program: &Path,
        args: &[String],
        cap: u64,
    ) -> Result<Vec<u8>, ExtractError> {
        self.spawn(program, args, cap, false).await
    }

    /// Like [`Helper::run`], but an ordinary non-zero exit still returns the output.
    async fn run_lenient(
        &self,
        program: &Path,
        args: &[String],
        cap: u64,
    ) -> Result<Vec<u8>, ExtractError> {
        self.spawn(program, args, cap, true).await
    }

    async fn spawn(
        &self,
        program: &Path,
        args: &[String],
        cap: u64,
        lenient: bool,
    ) -> Result<Vec<u8>, ExtractError> {
        let mut command = child_command(self.limits);
        command
            .env(super::pdf::ENV_EXEC, program)
            .env("OMP_THREAD_LIMIT", "1")
            .args(args);
        let finished = match process::run(command, None, self.timeout, cap).await {
            Run::Finished(finished) if finished.overflowed => {
                return Err(ExtractError::OutOfMemory);
            }
            Run::Finished(finished) => finished,
            Run::TimedOut => return Err(ExtractError::Timeout),
            Run::SpawnFailed(err) => {
                return Err(internal(format!("cannot start the OCR helper: {err}")));
            }
        };
        if finished.status.success() {
            return Ok(finished.stdout);
        }
        let stderr = String::from_utf8_lossy(&finished.stderr);
        let code = finished.status.code();
        if code == Some(i32::from(EXIT_SETUP_FAILED)) {
            return Err(internal(stderr.trim().to_owned()));
        }
        let lowered = stderr.to_lowercase();
        let out_of_memory = [
            "memory allocation",
            "bad_alloc",
            "out of memory",
            "cannot allocate",
            "malloc fail",
            "failed to map segment",
        ];
        if code == Some(i32::from(EXIT_OUT_OF_MEMORY))
            || out_of_memory.iter().any(|needle| lowered.contains(needle))
        {
            return Err(ExtractError::OutOfMemory);
        }
        if lowered.contains("failed loading language")
            || lowered.contains("could not initialize tesseract")
        {
            return Err(internal(format!(
                "tesseract lacks a language pack ({}); install it or set DOCKET_OCR_LANGS",
                last_line(&stderr)
            )));
        }
        if lenient && code.is_some() {
            return Ok(finished.stdout);
        }
        let name = program.file_name().map_or_else(
            || program.display().to_string(),
            |n| n.to_string_lossy().into_owned(),
        );
        Err(ExtractError::PdfMalformed {
            reason: format!("{name} could not read it ({})", last_line(&stderr)),
        })
    }
}

/// The last non-blank line of a helper's complaint, shortened.
fn last_line(stderr: &str) -> String {
    let line = stderr
        .lines()
        .rev()
        .find(|line| !line.trim().is_empty())
        .unwrap_or("no message");
    line.trim().chars().take(160).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn languages_parse_auto_or_codes() {
        assert_eq!(Languages::parse("auto").unwrap(), Languages::default());
        assert_eq!(Languages::parse("").unwrap(), Languages::default());
        assert_eq!(
            Languages::parse("deu+eng").unwrap(),
            Languages::Fixed(vec!["deu".into(), "eng".into()])
        );
        assert!(Languages::parse("eng; rm -rf").is_err());
    }

    #[test]
    fn the_label_names_engine_and_languages() {
        let mut run = OcrRun::new("tesseract 5.3.0".into());
        run.used(1, &["kor".into(), "eng".into()]);
        run.used(2, &["eng".into()]);
        assert_eq!(run.label(), "ocr (tesseract 5.3.0, kor+eng)");
    }

    #[test]
    fn the_page_cap_gives_a_readable_reason() {
        let settings = OcrSettings {
            max_pages: 3,
            ..OcrSettings::default()
        };
        assert!(check_page_cap(3, &settings).is_ok());
        let err = check_page_cap(4, &settings).unwrap_err();
        assert_eq!(
            err.to_string(),
            "4 pages need OCR, more than the limit of 3 (DOCKET_OCR_MAX_PAGES)"
        );
    }
}
