//! The child side of PDF extraction: runs inside `docket __extract-pdf`.
//!
//! The child first caps its own address space (RLIMIT_AS) so that a decompression bomb ends in
//! a failed allocation here instead of memory pressure on the worker. Then it does one of two
//! things, chosen by environment variables the parent sets:
//! - read the PDF from stdin, run `pdf-extract` page by page inside `catch_unwind`, and print
//!   one JSON [`ChildReport`] on stdout; or
//! - replace itself with `pdftotext` (exec), which so inherits the same memory cap. This is how
//!   the fallback gets a memory limit without `unsafe` `pre_exec` or a util-linux dependency.
//! - replace itself with another helper named by [`ENV_EXEC`] (OCR's `pdfinfo`, `pdftoppm` and
//!   `tesseract`), passing on its own remaining arguments, under the same cap.
//!
//! Panic output is silenced (a hostile PDF would otherwise spray backtraces into the worker's
//! logs); the panic message is kept as the reason.

use std::any::Any;
use std::io::{Read, Write};
use std::os::unix::process::CommandExt;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::process::{Command, ExitCode};

use serde::{Deserialize, Serialize};

use crate::extract::Page;

/// Environment variable: the address-space cap in bytes.
pub(crate) const ENV_MEMORY: &str = "DOCKET_PDF_MEMORY_BYTES";
/// Environment variable: if set, exec this `pdftotext` on [`ENV_INPUT`] instead of parsing.
pub(super) const ENV_EXEC_PDFTOTEXT: &str = "DOCKET_PDF_EXEC_PDFTOTEXT";
/// Environment variable: the PDF file `pdftotext` reads.
pub(super) const ENV_INPUT: &str = "DOCKET_PDF_INPUT";
/// Environment variable: if set, exec this program with the arguments after the subcommand.
pub(crate) const ENV_EXEC: &str = "DOCKET_EXTRACT_EXEC";
/// Exit code when the child could not set itself up (limit, stdin, exec); not the PDF's fault.
pub(crate) const EXIT_SETUP_FAILED: u8 = 90;
/// Exit code when the memory cap left no room to start the parser thread or `pdftotext`.
pub(crate) const EXIT_OUT_OF_MEMORY: u8 = 91;

/// Used when the parent passes no limit, so the child is never unbounded.
const DEFAULT_MEMORY_BYTES: u64 = 1 << 30;
/// `pdf-extract` recurses through content streams and form XObjects; a large stack lets
/// legitimate deep nesting through, and the address-space cap still bounds it.
const PARSER_STACK_BYTES: usize = 64 << 20;

/// What the child reports on stdout.
#[derive(Debug, Serialize, Deserialize)]
#[serde(tag = "status", rename_all = "snake_case")]
pub(super) enum ChildReport {
    /// The document opened; `pages` holds every page that extracted, `failed_pages` the rest.
    Ok {
        pages: Vec<Page>,
        failed_pages: Vec<FailedPage>,
    },
    /// The document needs a password.
    Encrypted,
    /// The document could not be opened.
    Malformed { reason: String },
}

/// A page whose extraction failed while others succeeded.
#[derive(Debug, Serialize, Deserialize)]
pub(super) struct FailedPage {
    pub number: u32,
    pub reason: String,
}

/// Entry point of `docket __extract-pdf`.
pub fn run_child() -> ExitCode {
    let memory = std::env::var(ENV_MEMORY)
        .ok()
        .and_then(|v| v.parse::<u64>().ok())
        .unwrap_or(DEFAULT_MEMORY_BYTES);
    if let Err(err) = cap_address_space(memory) {
        eprintln!("docket pdf child: cannot set the memory limit: {err}");
        return ExitCode::from(EXIT_SETUP_FAILED);
    }
    if let Some(program) = std::env::var_os(ENV_EXEC) {
        let err = Command::new(&program)
            .args(std::env::args_os().skip(2))
            .env_remove(ENV_EXEC)
            .exec();
        eprintln!(
            "docket extract child: cannot run {}: {err}",
            program.to_string_lossy()
        );
        return ExitCode::from(exit_code_for(&err));
    }
    if let Some(pdftotext) = std::env::var_os(ENV_EXEC_PDFTOTEXT) {
        let Some(input) = std::env::var_os(ENV_INPUT) else {
            eprintln!("docket pdf child: {ENV_INPUT} is not set");
            return ExitCode::from(EXIT_SETUP_FAILED);
        };
        // `exec` only returns on failure.
        let err = Command::new(pdftotext)
            .arg("-enc")
            .arg("UTF-8")
            .arg(input)
            .arg("-")
            .exec();
        eprintln!("docket pdf child: cannot run pdftotext: {err}");
        return ExitCode::from(exit_code_for(&err));
    }

    let mut bytes = Vec::new();
    if let Err(err) = std::io::stdin().read_to_end(&mut bytes) {
        eprintln!("docket pdf child: cannot read the PDF: {err}");
        return ExitCode::from(EXIT_SETUP_FAILED);
    }
    std::panic::set_hook(Box::new(|_| {}));
    let worker = std::thread::Builder::new()
        .name("pdf-extract".into())
        .stack_size(PARSER_STACK_BYTES)
        .spawn(move || extract_pages(&bytes));
    let report = match worker.map(|handle| handle.join()) {
        Ok(Ok(report)) => report,
        Ok(Err(panic)) => ChildReport::Malformed {
            reason: panic_reason(panic.as_ref()),
        },
        Err(err) => {
            eprintln!("docket pdf child: cannot start the parser thread: {err}");
            return ExitCode::from(exit_code_for(&err));
        }
    };
    let mut stdout = std::io::stdout().lock();
    let written = serde_json::to_writer(&mut stdout, &report)
        .map_err(std::io::Error::from)
        .and_then(|()| stdout.flush());
    match written {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("docket pdf child: cannot write the report: {err}");
            ExitCode::from(EXIT_SETUP_FAILED)
        }
    }
}

/// Under an address-space cap, failing to map a stack or a program means the cap is too small
/// (`ENOMEM`, or `EAGAIN` from thread creation); anything else is a setup failure.
fn exit_code_for(err: &std::io::Error) -> u8 {
    // `ENOMEM` is `OutOfMemory`, `EAGAIN` is `WouldBlock`.
    let out_of_memory = matches!(
        err.kind(),
        std::io::ErrorKind::OutOfMemory | std::io::ErrorKind::WouldBlock
    );
    if out_of_memory {
        EXIT_OUT_OF_MEMORY
    } else {
        EXIT_SETUP_FAILED
    }
}

fn cap_address_space(bytes: u64) -> std::io::Result<()> {
    let limit = rustix::process::Rlimit {
        current: Some(bytes),
        maximum: Some(bytes),
    };
    rustix::process::setrlimit(rustix::process::Resource::As, limit).map_err(std::io::Error::from)
}

/// Opens the document and extracts every page, each under its own `catch_unwind` so one bad
/// page does not lose the others.
fn extract_pages(bytes: &[u8]) -> ChildReport {
    let loaded = catch_unwind(|| pdf_extract::Document::load_mem(bytes));
    let mut doc = match loaded {
        Ok(Ok(doc)) => doc,
        Ok(Err(err)) => return classify_load_error(&err),
        Err(panic) => {
            return ChildReport::Malformed {
                reason: panic_reason(panic.as_ref()),
            };
        }
    };
    // Encrypted PDFs with an empty user password (owner-password-only) open without asking.
    if doc.is_encrypted() && doc.decrypt("").is_err() {
        return ChildReport::Encrypted;
    }
    let page_numbers: Vec<u32> = match catch_unwind(AssertUnwindSafe(|| doc.get_pages())) {
        Ok(pages) => pages.into_keys().collect(),
        Err(panic) => {
            return ChildReport::Malformed {
                reason: panic_reason(panic.as_ref()),
            };
        }
    };
    if page_numbers.is_empty() {
        return ChildReport::Malformed {
            reason: "the document has no pages".into(),
        };
    }
    let mut pages = Vec::with_capacity(page_numbers.len());
    let mut failed_pages = Vec::new();
    for number in page_numbers {
        let extracted = catch_unwind(AssertUnwindSafe(|| {
            let mut text = String::new();
            let mut output = pdf_extract::PlainTextOutput::new(&mut text);
            pdf_extract::output_doc_page(&doc, &mut output, number).map(|()| text)
        }));
        match extracted {
            Ok(Ok(text)) => pages.push(Page { number, text }),
            Ok(Err(err)) => failed_pages.push(FailedPage {
                number,
                reason: err.to_string(),
            }),
            Err(panic) => failed_pages.push(FailedPage {
                number,
                reason: panic_reason(panic.as_ref()),
            }),
        }
    }
    ChildReport::Ok {
        pages,
        failed_pages,
    }
}

fn classify_load_error(err: &pdf_extract::Error) -> ChildReport {
    if matches!(err, pdf_extract::Error::Decryption(_)) {
        return ChildReport::Encrypted;
    }
    ChildReport::Malformed {
        reason: err.to_string(),
    }
}

/// The message of a panic payload (`panic!` with a literal or with formatting).
fn panic_reason(payload: &(dyn Any + Send)) -> String {
    let message = payload
        .downcast_ref::<&str>()
        .map(|s| (*s).to_owned())
        .or_else(|| payload.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "unknown panic".to_owned());
    format!("the parser failed ({message})")
}
