//! `docket ingest PATH…`: uploads files and folders through the HTTP API.
//!
//! The CLI is a plain client of `POST /api/documents`, so it works against any docket server,
//! local or remote, with the same checks a browser upload gets (type sniffing, size limit,
//! duplicates). Files go several per request, bounded by count and by bytes, streamed from
//! disk ([`client`]); a file larger than the byte bound goes alone. The size limit is the
//! server's (it answers 413 for that file), because only the server knows it.
//!
//! A run ends with a summary: new, duplicate, and rejected files with each reason. Uploads are
//! idempotent (same bytes → the existing document), so a run that stopped half-way is finished
//! by running it again.
//!
//! Exit status: 0 when every file was accepted (new or duplicate), 1 when any was rejected,
//! 2 when the run could not finish (see [`IngestError`]).

pub mod client;
pub mod summary;
pub mod walk;

use std::path::PathBuf;
use std::process::ExitCode;

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

pub use client::{FileOutcome, UploadBody, UploadFile, Uploader};
pub use summary::Summary;

use crate::embed::Secret;

/// The most files the server takes in one request (`MAX_FILES` of the upload handler).
const SERVER_MAX_FILES: usize = 100;

/// What the help text says about exit codes.
pub const EXIT_STATUS_HELP: &str = "Exit status: 0 when every file was accepted (new or \
duplicate), 1 when any file was rejected (each is listed with its reason), 2 when the run could \
not finish (server unreachable, token refused, unexpected answer). Running again is safe: files \
already uploaded come back as duplicates.";

/// Options of `docket ingest`.
#[derive(Debug, Clone, clap::Args)]
pub struct IngestArgs {
    /// Files and folders to upload; folders are walked recursively, hidden entries skipped.
    #[arg(required = true, value_name = "PATH")]
    pub paths: Vec<PathBuf>,

    /// Base URL of the docket server.
    #[arg(long, env = "DOCKET_URL", default_value = "http://127.0.0.1:8080")]
    pub url: String,

    /// Bearer token of the server's API, when it requires one.
    #[arg(long, env = "DOCKET_API_TOKEN", hide_env_values = true)]
    pub api_token: Option<String>,

    /// The collection the files go into (the server's `default` when absent).
    #[arg(long, value_name = "NAME")]
    pub collection: Option<String>,

    /// Most files per upload request (at most 100, the server's bound).
    #[arg(long, default_value_t = 20, value_parser = clap::value_parser!(u16).range(1..=100))]
    pub batch_files: u16,

    /// Most bytes of files per upload request; a larger file is sent alone.
    #[arg(long, default_value_t = 16 * 1024 * 1024)]
    pub batch_bytes: u64,

    /// Print the summary as one JSON object instead of text.
    #[arg(long)]
    pub json: bool,
}

/// Why a run could not finish. Per-file refusals are not errors: they are in the summary.
#[derive(Debug, thiserror::Error)]
pub enum IngestError {
    /// `--url` is not an http(s) URL.
    #[error("invalid server URL {url:?}: {reason}")]
    InvalidUrl {
        /// What was given.
        url: String,
        /// What is wrong with it.
        reason: String,
    },
    /// The HTTP client could not be built (TLS set-up).
    #[error("cannot set up the HTTP client")]
    Client(#[source] reqwest::Error),
    /// Nothing answers at the URL.
    #[error(
        "cannot reach docket at {url}: is `docket serve` running there? (set --url or DOCKET_URL)"
    )]
    Unreachable {
        /// The upload endpoint.
        url: String,
        /// The connection error.
        #[source]
        source: reqwest::Error,
    },
    /// The connection broke or timed out during an upload, or a file could not be read.
    #[error("the upload to {url} failed midway")]
    Transfer {
        /// The upload endpoint.
        url: String,
        /// The transport error.
        #[source]
        source: reqwest::Error,
    },
    /// 401: no token, or the wrong one.
    #[error("the server refused the API token{}", if *token_sent { " (check DOCKET_API_TOKEN)" } else { ": it requires one, set DOCKET_API_TOKEN" })]
    Unauthorized {
        /// Whether a token was sent at all.
        token_sent: bool,
    },
    /// The server refused the whole request with its error shape.
    #[error("the server answered {status} {code}: {message}")]
    Server {
        /// HTTP status.
        status: u16,
        /// The server's error code.
        code: String,
        /// The server's message.
        message: String,
    },
    /// The answer is not the upload shape (not docket, or a proxy page).
    #[error("unexpected answer from the server (HTTP {status}): {detail}")]
    UnexpectedAnswer {
        /// HTTP status.
        status: u16,
        /// What was wrong, or the start of the body.
        detail: String,
    },
}

/// Runs `docket ingest` and returns its exit status (see [`EXIT_STATUS_HELP`]).
pub async fn run(args: IngestArgs) -> ExitCode {
    let walked = {
        let paths = args.paths.clone();
        tokio::task::spawn_blocking(move || walk::collect(&paths)).await
    };
    let (files, problems) = match walked {
        Ok(walked) => walked,
        Err(err) => {
            eprintln!("error: listing the files failed: {err}");
            return ExitCode::from(2);
        }
    };
    let mut summary = Summary::default();
    for problem in problems {
        summary.reject(problem.path, problem.code.to_owned(), problem.message);
    }
    let total_bytes: u64 = files.iter().map(|f| f.size).sum();
    let progress = progress_bar(total_bytes, files.len());
    let token = args
        .api_token
        .clone()
        .filter(|t| !t.is_empty())
        .map(Secret::new);
    let uploader =
        Uploader::new(&args.url, token, progress.clone()).map(|uploader| match &args.collection {
            Some(name) => uploader.into_collection(name),
            None => uploader,
        });
    let result = match uploader {
        Ok(uploader) => send_all(&uploader, &args, files, &mut summary, &progress).await,
        Err(err) => Err(err),
    };
    progress.finish_and_clear();
    summary.print(args.json, &args.url);
    match result {
        Ok(()) if summary.rejected.is_empty() => ExitCode::SUCCESS,
        Ok(()) => ExitCode::from(1),
        Err(err) => {
            eprintln!("error: {}", error_chain(&err));
            if summary.sent() > 0 {
                eprintln!(
                    "the files above were handled; run the same command again to send the rest"
                );
            }
            ExitCode::from(2)
        }
    }
}

/// Sends `files` in batches bounded by `--batch-files` and `--batch-bytes`.
async fn send_all(
    uploader: &Uploader,
    args: &IngestArgs,
    files: Vec<walk::LocalFile>,
    summary: &mut Summary,
    progress: &ProgressBar,
) -> Result<(), IngestError> {
    let max_files = usize::from(args.batch_files).clamp(1, SERVER_MAX_FILES);
    let total = files.len() + summary.sent();
    for batch in batches(files, max_files, args.batch_bytes) {
        let mut sent: Vec<PathBuf> = Vec::with_capacity(batch.len());
        let mut uploads: Vec<UploadFile> = Vec::with_capacity(batch.len());
        for file in batch {
            match tokio::fs::File::open(&file.path).await {
                Ok(open) => {
                    uploads.push(UploadFile {
                        filename: upload_name(&file.path),
                        body: UploadBody::File(open),
                    });
                    sent.push(file.path);
                }
                Err(err) => {
                    progress.inc(file.size);
                    summary.reject(file.path, "unreadable".into(), err.to_string());
                }
            }
        }
        if uploads.is_empty() {
            continue;
        }
        let outcomes = uploader.upload(uploads).await?;
        for (path, outcome) in sent.into_iter().zip(outcomes) {
            summary.record(path, outcome);
        }
        progress.set_message(format!("{}/{total} files", summary.sent()));
    }
    Ok(())
}

/// Groups files in order: a batch closes when it has `max_files` files or the next file would
/// take it past `max_bytes` (a file larger than `max_bytes` makes a batch of its own).
fn batches(
    files: Vec<walk::LocalFile>,
    max_files: usize,
    max_bytes: u64,
) -> Vec<Vec<walk::LocalFile>> {
    let mut batches: Vec<Vec<walk::LocalFile>> = Vec::new();
    let mut current: Vec<walk::LocalFile> = Vec::new();
    let mut current_bytes: u64 = 0;
    for file in files {
        let full = current.len() >= max_files
            || (!current.is_empty() && current_bytes.saturating_add(file.size) > max_bytes);
        if full {
            batches.push(std::mem::take(&mut current));
            current_bytes = 0;
        }
        current_bytes = current_bytes.saturating_add(file.size);
        current.push(file);
    }
    if !current.is_empty() {
        batches.push(current);
    }
    batches
}

/// The name the server stores: the file's own name, as a browser upload would send it.
fn upload_name(path: &std::path::Path) -> String {
    path.file_name()
        .map(|name| name.to_string_lossy().into_owned())
        .unwrap_or_else(|| path.to_string_lossy().into_owned())
}

/// A byte-counting bar on stderr; indicatif draws nothing when stderr is not a terminal.
fn progress_bar(total_bytes: u64, files: usize) -> ProgressBar {
    let bar = ProgressBar::with_draw_target(Some(total_bytes), ProgressDrawTarget::stderr());
    if let Ok(style) = ProgressStyle::with_template(
        "{bar:30} {binary_bytes}/{binary_total_bytes} {binary_bytes_per_sec} {msg}",
    ) {
        bar.set_style(style);
    }
    bar.set_message(format!("0/{files} files"));
    bar
}

/// `error: cause: cause…`, the whole chain on one line.
fn error_chain(err: &dyn std::error::Error) -> String {
    let mut text = err.to_string();
    let mut source = err.source();
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file(name: &str, size: u64) -> walk::LocalFile {
        walk::LocalFile {
            path: PathBuf::from(name),
            size,
        }
    }

    fn names(batches: &[Vec<walk::LocalFile>]) -> Vec<Vec<String>> {
        batches
            .iter()
            .map(|b| b.iter().map(|f| f.path.display().to_string()).collect())
            .collect()
    }

    #[test]
    fn batches_close_at_the_file_count_and_the_byte_bound() {
        let files = vec![
            file("a", 10),
            file("b", 10),
            file("c", 10),
            file("big", 500),
            file("d", 60),
            file("e", 50),
        ];
        let grouped = batches(files, 2, 100);
        assert_eq!(
            names(&grouped),
            vec![vec!["a", "b"], vec!["c"], vec!["big"], vec!["d"], vec!["e"]]
        );
    }

    #[test]
    fn the_upload_name_is_the_file_name_alone() {
        assert_eq!(
            upload_name(std::path::Path::new("docs/2019/report.pdf")),
            "report.pdf"
        );
    }
}
