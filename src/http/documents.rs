//! `/api/documents`: list, look at, download, delete and reprocess documents (uploads are in
//! [`super::upload`]).

use axum::body::Body;
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde::{Deserialize, Serialize};

use super::AppState;
use super::auth::Caller;
use super::error::{ApiError, Code};
use super::input::{Json, Path, Query, next_cursor, page_limit};
use crate::access::Access;
use crate::documents::{self, Document, DocumentId, DocumentStatus, EmbeddingSet, ListFilter};
use crate::pipeline;
use crate::queue::by_payload::{self, NamedJob};

/// Query of `GET /api/documents`.
#[derive(utoipa::IntoParams, Debug, Deserialize)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
pub struct ListQuery {
    status: Option<String>,
    /// Only these collections (repeatable); none: every collection the caller may read.
    #[serde(default)]
    collection: Vec<String>,
    /// A part of the file name, any case.
    name: Option<String>,
    /// Content types, comma-separated: documents of any of them.
    #[serde(rename = "type")]
    content_type: Option<String>,
    sort: Option<documents::Sort>,
    before: Option<i64>,
    offset: Option<i64>,
    limit: Option<i64>,
}

/// Answer of `GET /api/documents`.
#[derive(utoipa::ToSchema, Debug, Serialize)]
pub struct DocumentPage {
    /// Newest first.
    pub documents: Vec<Document>,
    /// The `before` of the following page (newest first, no offset); none after the last.
    pub next: Option<i64>,
    /// How many documents match the filters, on every page.
    pub total: i64,
}

/// Answer of `GET /api/documents/{id}`: the document's own fields, then what it is made of.
#[derive(utoipa::ToSchema, Debug, Serialize)]
pub struct DocumentDetail {
    #[serde(flatten)]
    pub document: Document,
    pub chunk_count: i64,
    /// Its vectors per model version, oldest first.
    pub embedding_sets: Vec<EmbeddingSet>,
    /// Every job whose payload names it, oldest first, with its error history.
    pub jobs: Vec<NamedJob>,
}

/// `GET /api/documents?status=&collection=&name=&type=&sort=newest|oldest|name|size&offset=&before=&limit=`:
/// the matching documents in that order with their `total`; `next` is the keyset cursor of the
/// following page for the default order.
#[utoipa::path(
    get,
    path = "/documents",
    operation_id = "list_documents",
    tag = "documents",
    params(ListQuery),
    responses((status = 200, body = DocumentPage), (status = 400, description = "a bad filter, sort, cursor or limit", body = super::error::ErrorAnswer)),
    security(("bearer" = []))
)]
pub async fn list(
    State(state): State<AppState>,
    Caller(access): Caller,
    Query(query): Query<ListQuery>,
) -> Result<Json<DocumentPage>, ApiError> {
    let status = match query.status.as_deref() {
        None => None,
        Some(s) => Some(DocumentStatus::parse(s).ok_or_else(|| {
            ApiError::new(
                Code::InvalidStatus,
                format!("unknown status {s:?}; expected uploaded, extracting, embedding, ready or failed"),
            )
        })?),
    };
    let limit = page_limit(query.limit)?;
    let offset = query.offset.unwrap_or(0);
    if offset < 0 {
        return Err(ApiError::new(
            Code::InvalidQuery,
            "offset must not be negative",
        ));
    }
    let filter = ListFilter {
        status,
        name: query.name,
        content_types: query
            .content_type
            .iter()
            .flat_map(|types| types.split(','))
            .map(|t| t.trim().to_owned())
            .filter(|t| !t.is_empty())
            .collect(),
        sort: query.sort.unwrap_or_default(),
        before: query.before.map(DocumentId),
        offset,
    };
    let reach = access.reach(&state.pool, &query.collection).await?;
    let (documents, total) = documents::list(&state.pool, &reach, &filter, limit).await?;
    let keyset = filter.sort == documents::Sort::Newest && offset == 0;
    let next = next_cursor(documents.iter().map(|d| d.id.0), limit).filter(|_| keyset);
    Ok(Json(DocumentPage {
        documents,
        next,
        total,
    }))
}

/// `GET /api/documents/{id}`: the document with its chunk count, embedding sets and jobs
/// (every job whose payload names it, with its error history).
#[utoipa::path(
    get,
    path = "/documents/{id}",
    operation_id = "get_document",
    tag = "documents",
    params(("id" = i64, Path, description = "The document's id")),
    responses((status = 200, body = DocumentDetail), (status = 404, description = "no such document, or not within the caller's reach", body = super::error::ErrorAnswer)),
    security(("bearer" = []))
)]
pub async fn get(
    State(state): State<AppState>,
    Caller(access): Caller,
    Path(id): Path<i64>,
) -> Result<Json<DocumentDetail>, ApiError> {
    let document = find(&state, &access, DocumentId(id)).await?;
    Ok(Json(DocumentDetail {
        chunk_count: documents::chunk_count(&state.pool, document.id).await?,
        embedding_sets: documents::embedding_sets(&state.pool, document.id).await?,
        jobs: by_payload::list(&state.pool, "document_id", id).await?,
        document,
    }))
}

/// `GET /api/documents/{id}/file`: the original bytes, always as a download so that an
/// uploaded HTML page never renders on our origin.
#[utoipa::path(
    get,
    path = "/documents/{id}/file",
    operation_id = "get_document_file",
    tag = "documents",
    params(("id" = i64, Path, description = "The document's id")),
    responses((status = 200, description = "The original bytes, as an attachment", content_type = "application/octet-stream", body = String), (status = 404, description = "no such document, or not within the caller's reach", body = super::error::ErrorAnswer)),
    security(("bearer" = []))
)]
pub async fn file(
    State(state): State<AppState>,
    Caller(access): Caller,
    Path(id): Path<i64>,
) -> Result<Response, ApiError> {
    let document = find(&state, &access, DocumentId(id)).await?;
    let bytes = documents::bytes(&state.pool, DocumentId(id))
        .await?
        .ok_or_else(|| not_found(id))?;
    Ok((
        [
            (header::CONTENT_TYPE, document.content_type.clone()),
            (
                header::CONTENT_DISPOSITION,
                content_disposition(&document.filename),
            ),
            (header::X_CONTENT_TYPE_OPTIONS, "nosniff".to_owned()),
            (
                header::CONTENT_SECURITY_POLICY,
                "sandbox; default-src 'none'".to_owned(),
            ),
        ],
        Body::from(bytes),
    )
        .into_response())
}

/// `attachment` with an ASCII fallback name and the exact name in RFC 5987 form.
fn content_disposition(filename: &str) -> String {
    let base = filename.rsplit(['/', '\\']).next().unwrap_or(filename);
    let ascii: String = base
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || ".-_ ".contains(c) {
                c
            } else {
                '_'
            }
        })
        .collect();
    let mut encoded = String::new();
    for byte in base.bytes() {
        if byte.is_ascii_alphanumeric() || b".-_".contains(&byte) {
            encoded.push(char::from(byte));
        } else {
            encoded.push_str(&format!("%{byte:02X}"));
        }
    }
    format!("attachment; filename=\"{ascii}\"; filename*=UTF-8''{encoded}")
}

/// `DELETE /api/documents/{id}`: the document, its bytes, chunks and vectors; its pipeline
/// jobs are cancelled.
#[utoipa::path(
    delete,
    path = "/documents/{id}",
    operation_id = "delete_document",
    tag = "documents",
    params(("id" = i64, Path, description = "The document's id")),
    responses((status = 204, description = "Deleted"), (status = 403, description = "the caller may read but not change it", body = super::error::ErrorAnswer), (status = 404, description = "no such document, or not within the caller's reach", body = super::error::ErrorAnswer)),
    security(("bearer" = []))
)]
pub async fn delete(
    State(state): State<AppState>,
    Caller(access): Caller,
    Path(id): Path<i64>,
) -> Result<StatusCode, ApiError> {
    writable(
        &state,
        &access,
        DocumentId(id),
        "delete documents in this collection",
    )
    .await?;
    if pipeline::delete_document(&state.pool, DocumentId(id)).await? {
        Ok(StatusCode::NO_CONTENT)
    } else {
        Err(not_found(id))
    }
}

/// `POST /api/documents/{id}/reprocess`: extract and embed again from the original bytes.
#[utoipa::path(
    post,
    path = "/documents/{id}/reprocess",
    operation_id = "reprocess_document",
    tag = "documents",
    params(("id" = i64, Path, description = "The document's id")),
    responses((status = 202, description = "Its extraction is enqueued again", body = Document), (status = 403, description = "the caller may read but not change it", body = super::error::ErrorAnswer), (status = 404, description = "no such document, or not within the caller's reach", body = super::error::ErrorAnswer)),
    security(("bearer" = []))
)]
pub async fn reprocess(
    State(state): State<AppState>,
    Caller(access): Caller,
    Path(id): Path<i64>,
) -> Result<(StatusCode, Json<Document>), ApiError> {
    let id = DocumentId(id);
    writable(
        &state,
        &access,
        id,
        "reprocess documents in this collection",
    )
    .await?;
    if !pipeline::reprocess(&state.pool, id).await? {
        return Err(not_found(id.0));
    }
    Ok((StatusCode::ACCEPTED, Json(find(&state, &access, id).await?)))
}

/// The document, when the caller may read it: 404 otherwise, exactly as for a missing id.
async fn find(state: &AppState, access: &Access, id: DocumentId) -> Result<Document, ApiError> {
    let reach = access.reach(&state.pool, &[]).await?;
    documents::get_within(&state.pool, id, &reach)
        .await?
        .ok_or_else(|| not_found(id.0))
}

/// The document, when the caller may change it: 404 when it may not even read it, 403 when it
/// may read but not write it.
async fn writable(
    state: &AppState,
    access: &Access,
    id: DocumentId,
    what: &str,
) -> Result<Document, ApiError> {
    let document = find(state, access, id).await?;
    if !access.can_write(document.collection_id) {
        return Err(ApiError::forbidden(what));
    }
    Ok(document)
}

fn not_found(id: i64) -> ApiError {
    ApiError::new(Code::DocumentNotFound, format!("document {id} not found"))
}

#[cfg(test)]
mod tests {
    use super::content_disposition;

    #[test]
    fn content_disposition_never_carries_a_path_or_quotes() {
        let header = content_disposition("../../etc/\"passwd\"");
        assert!(
            header.starts_with("attachment; filename=\"_passwd_\""),
            "{header}"
        );
        assert!(header.contains("filename*=UTF-8''%22passwd%22"), "{header}");
        let korean = content_disposition("문서.pdf");
        assert!(
            korean.contains("filename*=UTF-8''%EB%AC%B8%EC%84%9C.pdf"),
            "{korean}"
        );
    }
}
