//! `POST /api/documents`: multipart uploads, field `file`, repeatable.
//!
//! A request is read whole before anything is stored, so its limits (at most [`MAX_FILES`]
//! files, at most `DOCKET_MAX_UPLOAD_BYTES` per file, and files adding up to that or
//! [`MIN_REQUEST_BYTES`], whichever is more) refuse it with nothing stored rather than after some
//! files committed. An oversize file is read and dropped, so
//! memory stays bounded by the limit; uploads are read at most `DOCKET_UPLOAD_CONCURRENCY` at
//! once (the rest wait their turn, within the request timeout), which bounds the memory of all
//! uploads together.
//!
//! The request is one upload (`documents::uploads`): opened before its first file is stored and
//! closed after its last, so `upload.settled` can say when all its documents settled.
//!
//! Then each file gets its own result: a bad name, an unsupported type, an oversize file or a
//! failure to store one file is that file's error, and the others are stored all the same.

use axum::extract::{Multipart, State};
use axum::http::StatusCode;
use serde::Serialize;

use super::AppState;
use super::auth::Caller;
use super::error::{ApiError, Code, ErrorBody};
use super::input::Json;
use super::input::Query;
use crate::access::{Access, Role};
use crate::collections::{self, CollectionError, CollectionId};
use crate::documents::{Document, NewDocument, UploadId, uploads};
use crate::extract;

/// The most files one upload request may carry.
pub const MAX_FILES: usize = 100;

/// The least the files of one request may add up to, whatever the per-file limit: `docket
/// ingest` sends up to 16 MiB of small files per request by default.
pub const MIN_REQUEST_BYTES: u64 = 32 << 20;

/// Answer of `POST /api/documents`: one result per file, in file order.
#[derive(utoipa::ToSchema, Debug, Serialize)]
pub struct UploadAnswer {
    pub results: Vec<UploadResult>,
}

/// One file's outcome in an upload (docs/ARCHITECTURE.md §9).
#[derive(utoipa::ToSchema, Debug, Serialize)]
pub struct UploadResult {
    pub filename: String,
    /// The stored document (the existing one for a duplicate); none when refused.
    pub document: Option<Document>,
    pub duplicate: bool,
    pub error: Option<ErrorBody>,
    /// What this file alone would answer; the request's status when every file was refused.
    #[serde(skip)]
    status: StatusCode,
}

impl UploadResult {
    fn refused(filename: String, error: ApiError) -> Self {
        UploadResult {
            filename,
            document: None,
            duplicate: false,
            status: error.status(),
            error: Some(error.into_body()),
        }
    }
}

/// One part as read: its bytes, or none when it was over the per-file limit.
struct Received {
    filename: String,
    bytes: Option<Vec<u8>>,
}

/// Body of `POST /api/documents`, as the OpenAPI document describes it: the handler reads the
/// parts as they stream ([`receive`]), never this struct.
#[derive(utoipa::ToSchema)]
#[allow(dead_code)]
pub struct UploadForm {
    /// One part per file, each with its file name; at most 100.
    #[schema(value_type = Vec<String>, format = Binary)]
    file: Vec<Vec<u8>>,
}

/// Query of `POST /api/documents`.
#[derive(utoipa::IntoParams, Debug, serde::Deserialize)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
pub struct UploadQuery {
    /// The collection the files go into; `default` when absent.
    collection: Option<String>,
}

/// `POST /api/documents?collection=NAME`.
#[utoipa::path(
    post,
    path = "/documents",
    operation_id = "upload_documents",
    tag = "documents",
    params(UploadQuery),
    request_body(content = UploadForm, content_type = "multipart/form-data", description = "One or more `file` parts"),
    responses((status = 201, description = "At least one file was stored as a new document", body = UploadAnswer), (status = 200, description = "Every stored file was a duplicate of an existing document", body = UploadAnswer), (status = 400, description = "a bad multipart body, no file or too many files (when every file was refused, the first for its name or emptiness, the answer is the results instead)", body = super::error::ErrorAnswer), (status = 403, description = "the collection is outside the caller's writing reach", body = super::error::ErrorAnswer), (status = 413, description = "the request is over its limit (when every file was refused, the first for its size, the answer is the results instead)", body = super::error::ErrorAnswer), (status = 415, description = "Every file was refused, the first for its type: each result says why", body = UploadAnswer)),
    security(("bearer" = []))
)]
pub async fn upload(
    State(state): State<AppState>,
    Caller(access): Caller,
    Query(query): Query<UploadQuery>,
    multipart: Multipart,
) -> Result<(StatusCode, Json<UploadAnswer>), ApiError> {
    let name = query
        .collection
        .as_deref()
        .unwrap_or(collections::DEFAULT_NAME);
    let collection = writable_collection(&state, &access, name).await?;
    // Waits its turn (the semaphore is never closed, so acquiring only fails if it were),
    // opening the request's upload meanwhile, so that the upload costs no wait of its own. A
    // request refused below leaves an open upload without documents, which never settles.
    let (slot, upload) = tokio::join!(
        state.guard.upload_slots.acquire(),
        uploads::open(&state.pool)
    );
    let _slot = slot.map_err(ApiError::internal)?;
    let upload = upload?;
    let received = receive(&state, multipart).await?;
    let mut results = Vec::with_capacity(received.len());
    for part in received {
        results.push(match part.bytes {
            Some(bytes) => store(&state, collection, upload, part.filename, &bytes).await,
            None => UploadResult::refused(
                part.filename,
                ApiError::new(
                    Code::FileTooLarge,
                    format!(
                        "the file is larger than the limit of {} bytes",
                        state.max_upload_bytes
                    ),
                ),
            ),
        });
    }
    close(&state, upload).await?;
    let created = results.iter().any(|r| r.document.is_some() && !r.duplicate);
    let all_failed = results.iter().all(|r| r.error.is_some());
    let status = if created {
        StatusCode::CREATED
    } else if all_failed {
        results[0].status
    } else {
        StatusCode::OK
    };
    Ok((status, Json(UploadAnswer { results })))
}

/// The collection `name`, when the caller may upload into it. Refused before a byte is read:
/// 403 for a collection outside the caller's writing reach whether or not it exists (so names
/// cannot be probed); only a caller that reaches every collection learns that one is missing.
async fn writable_collection(
    state: &AppState,
    access: &Access,
    name: &str,
) -> Result<CollectionId, ApiError> {
    let refused = || ApiError::forbidden(&format!("upload into collection {name:?}"));
    if access.role() < Role::Writer {
        return Err(refused());
    }
    match collections::find(&state.pool, name).await? {
        Some(id) if access.can_write(id) => Ok(id),
        None if access.collections().is_none() => {
            Err(CollectionError::NotFound(name.to_owned()).into())
        }
        _ => Err(refused()),
    }
}

/// Reads every part, checking the request's limits before anything is stored.
async fn receive(state: &AppState, mut multipart: Multipart) -> Result<Vec<Received>, ApiError> {
    let limit = state.max_upload_bytes;
    let request_limit = limit.max(MIN_REQUEST_BYTES);
    let mut received: Vec<Received> = Vec::new();
    let mut kept: u64 = 0;
    while let Some(mut field) = multipart.next_field().await.map_err(multipart_error)? {
        if field.name() != Some("file") {
            let name = field.name().unwrap_or("").to_owned();
            return Err(ApiError::new(
                Code::UnexpectedField,
                format!("unexpected form field {name:?}: send files in fields named \"file\""),
            ));
        }
        if received.len() == MAX_FILES {
            return Err(ApiError::new(
                Code::TooManyFiles,
                format!("at most {MAX_FILES} files per request; nothing was stored"),
            ));
        }
        let filename = form_filename(field.file_name().unwrap_or(""));
        let mut bytes: Vec<u8> = Vec::new();
        let mut size: u64 = 0;
        while let Some(chunk) = field.chunk().await.map_err(multipart_error)? {
            size += chunk.len() as u64;
            if size <= limit {
                bytes.extend_from_slice(&chunk);
            } else if !bytes.is_empty() {
                // Over the limit: keep reading (the next part follows) but keep nothing.
                bytes = Vec::new();
            }
        }
        let bytes = (size <= limit).then_some(bytes);
        kept += bytes.as_ref().map_or(0, |b| b.len() as u64);
        if kept > request_limit {
            return Err(ApiError::new(
                Code::RequestTooLarge,
                format!(
                    "the files of one request may add up to {request_limit} bytes; send fewer per request (nothing was stored)"
                ),
            ));
        }
        received.push(Received { filename, bytes });
    }
    if received.is_empty() {
        return Err(ApiError::new(
            Code::NoFile,
            "the request has no file: send multipart/form-data with one or more \"file\" fields",
        ));
    }
    Ok(received)
}

/// A multipart file name as the person named the file: browsers send a double quote in one as
/// `%22` (the HTML form encoding escapes it, and only it among printable characters), so it is
/// decoded here, once, rather than shown as `%22` everywhere.
fn form_filename(raw: &str) -> String {
    raw.replace("%22", "\"")
}

/// Why `filename` cannot be a document's name, if it cannot.
fn filename_problem(filename: &str) -> Option<&'static str> {
    if filename.is_empty() || filename.chars().count() > 1024 {
        return Some("a file needs a name of 1 to 1024 characters");
    }
    // PostgreSQL text cannot hold NUL, and no other control character belongs in a name.
    if filename.chars().any(char::is_control) {
        return Some("a file name may not contain control characters");
    }
    None
}

/// The request stored all its files: its upload may settle (`upload.settled`), now if its
/// documents already did.
async fn close(state: &AppState, upload: UploadId) -> Result<(), sqlx::Error> {
    let mut tx = state.pool.begin().await?;
    crate::webhooks::upload_closed(&mut tx, upload).await?;
    tx.commit().await
}

/// Stores one file; every failure is this file's result, never the request's.
async fn store(
    state: &AppState,
    collection: CollectionId,
    upload: UploadId,
    filename: String,
    bytes: &[u8],
) -> UploadResult {
    if let Some(problem) = filename_problem(&filename) {
        return UploadResult::refused(filename, ApiError::new(Code::InvalidFilename, problem));
    }
    let sniffed = match extract::sniff(bytes, &filename) {
        Ok(sniffed) => sniffed,
        Err(err) => return UploadResult::refused(filename, err.into()),
    };
    let stored = crate::pipeline::create_with_extract_job(
        &state.pool,
        &NewDocument {
            collection,
            filename: &filename,
            content_type: sniffed.content_type,
            bytes,
            upload: Some(upload),
        },
    )
    .await;
    match stored {
        Ok(stored) => UploadResult {
            filename,
            duplicate: stored.duplicate,
            document: Some(stored.document),
            error: None,
            status: if stored.duplicate {
                StatusCode::OK
            } else {
                StatusCode::CREATED
            },
        },
        Err(err) => {
            // Logged once with its cause; the client sees the stable code and status only.
            let error = ApiError::from(err);
            tracing::info_span!("upload", %filename).in_scope(|| error.log());
            let error = match error.code() {
                Code::Internal => {
                    ApiError::new(Code::Internal, "the file could not be stored; try again")
                }
                _ => error,
            };
            UploadResult::refused(filename, error)
        }
    }
}

fn multipart_error(err: axum::extract::multipart::MultipartError) -> ApiError {
    if err.status() == StatusCode::PAYLOAD_TOO_LARGE {
        return ApiError::new(Code::BodyTooLarge, err.body_text());
    }
    ApiError::new(Code::InvalidMultipart, err.body_text())
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_browser_escaped_quote_in_a_file_name_is_decoded() {
        assert_eq!(super::form_filename("a %22b%22.txt"), "a \"b\".txt");
        assert_eq!(super::form_filename("100% sure.txt"), "100% sure.txt");
    }

    use super::filename_problem;

    #[test]
    fn names_with_control_characters_are_refused() {
        assert!(filename_problem("notes.txt").is_none());
        assert!(filename_problem("문서 (2).pdf").is_none());
        assert!(filename_problem("bad\0name.txt").is_some());
        assert!(filename_problem("line\nbreak.txt").is_some());
        assert!(filename_problem("").is_some());
    }
}
