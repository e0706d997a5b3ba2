//! The upload client: sends files to `POST /api/documents`, several per multipart request, and
//! reads one outcome per file back, in the order it sent them.
//!
//! File bodies are streamed from disk in 64 KiB pieces, so a large file never sits in memory
//! here, and every piece sent advances the progress bar. A per-file refusal (413, 415, 400) is
//! an outcome, not an error: the server answers with `results` even when the only file failed.
//! What stops a run is an [`IngestError`]: the server cannot be reached, refuses the token, or
//! answers something that is not the upload shape.

use std::time::Duration;

use indicatif::ProgressBar;
use reqwest::StatusCode;
use reqwest::multipart::{Form, Part};
use serde::Deserialize;
use tokio::io::AsyncReadExt as _;

use super::IngestError;
use crate::embed::Secret;

/// Bytes read from disk per piece of a streamed file body.
const PIECE_BYTES: usize = 64 * 1024;

/// One file to upload: the name the server stores and where its bytes come from.
#[derive(Debug)]
pub struct UploadFile {
    /// The filename sent in the multipart part (stored verbatim, never used as a path).
    pub filename: String,
    /// The bytes.
    pub body: UploadBody,
}

/// Where a file's bytes come from.
#[derive(Debug)]
pub enum UploadBody {
    /// An open file, streamed.
    File(tokio::fs::File),
    /// Bytes in memory (benchmarks generate their documents).
    Bytes(Vec<u8>),
}

/// What the server did with one file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FileOutcome {
    /// A new document was created.
    New {
        /// Its id.
        document_id: i64,
    },
    /// The same bytes were already there; this is the existing document.
    Duplicate {
        /// The existing document's id.
        document_id: i64,
    },
    /// The file was refused, with the server's stable code and readable message.
    Rejected {
        /// e.g. `file_too_large`, `unsupported_type`, `empty_file`.
        code: String,
        /// Why, for a person.
        message: String,
    },
}

/// A client of one docket server's upload API.
#[derive(Debug, Clone)]
pub struct Uploader {
    http: reqwest::Client,
    endpoint: reqwest::Url,
    token: Option<Secret>,
    /// Advanced by the bytes of file bodies as they are sent.
    progress: ProgressBar,
}

#[derive(Deserialize)]
struct UploadAnswer {
    results: Vec<UploadResult>,
}

#[derive(Deserialize)]
struct UploadResult {
    document: Option<DocumentRef>,
    #[serde(default)]
    duplicate: bool,
    error: Option<ErrorBody>,
}

#[derive(Deserialize)]
struct DocumentRef {
    id: i64,
}

#[derive(Deserialize)]
struct ErrorAnswer {
    error: ErrorBody,
}

#[derive(Deserialize)]
struct ErrorBody {
    code: String,
    message: String,
}

impl Uploader {
    /// A client of the server at `base_url` (e.g. `http://127.0.0.1:8080`); `token` is sent as
    /// a bearer token when set; `progress` counts body bytes sent (use a hidden bar for none).
    pub fn new(
        base_url: &str,
        token: Option<Secret>,
        progress: ProgressBar,
    ) -> Result<Self, IngestError> {
        let mut base = reqwest::Url::parse(base_url).map_err(|err| IngestError::InvalidUrl {
            url: base_url.to_owned(),
            reason: err.to_string(),
        })?;
        if !matches!(base.scheme(), "http" | "https") || base.cannot_be_a_base() {
            return Err(IngestError::InvalidUrl {
                url: base_url.to_owned(),
                reason: "expected an http:// or https:// URL".into(),
            });
        }
        // `join` would drop the last segment of a base without a trailing slash
        // (`http://host/docket` + `api/…`), so make the base a folder first.
        if !base.path().ends_with('/') {
            let path = format!("{}/", base.path());
            base.set_path(&path);
        }
        let endpoint = base
            .join("api/documents")
            .map_err(|err| IngestError::InvalidUrl {
                url: base_url.to_owned(),
                reason: err.to_string(),
            })?;
        let http = reqwest::Client::builder()
            .connect_timeout(Duration::from_secs(10))
            // No overall timeout: a large upload may take long. A server that stops answering
            // for two minutes is taken as gone.
            .read_timeout(Duration::from_secs(120))
            .build()
            .map_err(IngestError::Client)?;
        Ok(Self {
            http,
            endpoint,
            token,
            progress,
        })
    }

    /// Uploads into the collection `name` (`default` when never called).
    pub fn into_collection(mut self, name: &str) -> Self {
        self.endpoint
            .query_pairs_mut()
            .clear()
            .append_pair("collection", name);
        self
    }

    /// The upload endpoint, for messages.
    pub fn endpoint(&self) -> &str {
        self.endpoint.as_str()
    }

    /// Sends `files` in one multipart request; the outcomes come back in the same order.
    pub async fn upload(&self, files: Vec<UploadFile>) -> Result<Vec<FileOutcome>, IngestError> {
        let count = files.len();
        let mut form = Form::new();
        for file in files {
            let part = match file.body {
                UploadBody::Bytes(bytes) => {
                    self.progress.inc(bytes.len() as u64);
                    Part::bytes(bytes)
                }
                UploadBody::File(open) => Part::stream(reqwest::Body::wrap_stream(stream_file(
                    open,
                    self.progress.clone(),
                ))),
            };
            form = form.part("file", part.file_name(file.filename));
        }
        let mut request = self.http.post(self.endpoint.clone()).multipart(form);
        if let Some(token) = &self.token {
            request = request.bearer_auth(token.expose());
        }
        let response = match request.send().await {
            Ok(response) => response,
            Err(source) => return Err(self.failed_send(source).await),
        };
        let status = response.status();
        let body = response
            .bytes()
            .await
            .map_err(|source| self.transport(source))?;
        if status == StatusCode::UNAUTHORIZED {
            return Err(IngestError::Unauthorized {
                token_sent: self.token.is_some(),
            });
        }
        if let Ok(answer) = serde_json::from_slice::<UploadAnswer>(&body) {
            if answer.results.len() != count {
                return Err(IngestError::UnexpectedAnswer {
                    status: status.as_u16(),
                    detail: format!("{} results for {count} files", answer.results.len()),
                });
            }
            return Ok(answer.results.into_iter().map(outcome).collect());
        }
        if let Ok(answer) = serde_json::from_slice::<ErrorAnswer>(&body) {
            return Err(IngestError::Server {
                status: status.as_u16(),
                code: answer.error.code,
                message: answer.error.message,
            });
        }
        let text = String::from_utf8_lossy(&body);
        Err(IngestError::UnexpectedAnswer {
            status: status.as_u16(),
            detail: text.chars().take(200).collect(),
        })
    }

    /// What a request that broke while sending means. A server that refuses the token answers
    /// 401 before reading the body and closes the connection, so a client still writing a
    /// large body sees a broken pipe instead of the answer: ask `GET /api/info` (cheap, guarded
    /// by the same token) whether the token is the reason before calling it a transfer error.
    async fn failed_send(&self, source: reqwest::Error) -> IngestError {
        if source.is_connect() {
            return self.transport(source);
        }
        let Ok(info) = self.endpoint.join("info") else {
            return self.transport(source);
        };
        let mut probe = self.http.get(info).timeout(Duration::from_secs(10));
        if let Some(token) = &self.token {
            probe = probe.bearer_auth(token.expose());
        }
        match probe.send().await {
            Ok(answer) if answer.status() == StatusCode::UNAUTHORIZED => {
                IngestError::Unauthorized {
                    token_sent: self.token.is_some(),
                }
            }
            _ => self.transport(source),
        }
    }

    fn transport(&self, source: reqwest::Error) -> IngestError {
        let url = self.endpoint.to_string();
        if source.is_connect() {
            IngestError::Unreachable { url, source }
        } else {
            IngestError::Transfer { url, source }
        }
    }
}

fn outcome(result: UploadResult) -> FileOutcome {
    match (result.document, result.error) {
        (_, Some(error)) => FileOutcome::Rejected {
            code: error.code,
            message: error.message,
        },
        (Some(document), None) if result.duplicate => FileOutcome::Duplicate {
            document_id: document.id,
        },
        (Some(document), None) => FileOutcome::New {
            document_id: document.id,
        },
        (None, None) => FileOutcome::Rejected {
            code: "no_document".into(),
            message: "the server returned neither a document nor an error".into(),
        },
    }
}

/// The file's bytes as a stream of pieces, advancing `progress` as they are read.
fn stream_file(
    file: tokio::fs::File,
    progress: ProgressBar,
) -> impl futures::Stream<Item = std::io::Result<Vec<u8>>> + Send + 'static {
    futures::stream::try_unfold((file, progress), |(mut file, progress)| async move {
        let mut piece = vec![0u8; PIECE_BYTES];
        let read = file.read(&mut piece).await?;
        if read == 0 {
            return Ok(None);
        }
        piece.truncate(read);
        progress.inc(read as u64);
        Ok(Some((piece, (file, progress))))
    })
}
