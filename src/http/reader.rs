//! `GET /api/documents/{id}/text`: what docket extracted from a document, by location, in
//! bounded windows ([`crate::search::reader`]), so a person can check what OCR read or how a
//! legacy encoding decoded, and a search hit can open the text at its passage.

use axum::extract::State;
use serde::{Deserialize, Serialize};

use super::AppState;
use super::auth::Caller;
use super::error::{ApiError, Code};
use super::input::{Json, Path, Query};
use crate::documents::DocumentId;
use crate::search::reader::{self, Start, TextWindow};

/// Query of `GET /api/documents/{id}/text`: `from` (a chunk index, default 0) starts the
/// window there; `at` (a hit's chunk index) starts it so that the chunk's page shows from its
/// start. At most one of them.
#[derive(utoipa::IntoParams, Debug, Deserialize)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
pub struct TextQuery {
    from: Option<i32>,
    at: Option<i32>,
}

/// Answer of `GET /api/documents/{id}/text`.
#[derive(utoipa::ToSchema, Debug, Serialize)]
pub struct DocumentText {
    pub document_id: DocumentId,
    pub filename: String,
    pub content_type: String,
    /// Which extractor read the text (`pdftotext`, `ocr (tesseract …)`, `docx`…).
    pub extractor: Option<String>,
    #[serde(flatten)]
    pub window: TextWindow,
}

/// `GET /api/documents/{id}/text?from=|at=`: a window of the extracted text; 404 for a
/// document that does not exist or that the caller may not read.
#[utoipa::path(
    get,
    path = "/documents/{id}/text",
    operation_id = "get_document_text",
    tag = "documents",
    params(("id" = i64, Path, description = "The document's id"), TextQuery),
    responses((status = 200, body = DocumentText), (status = 400, description = "both from and at", body = super::error::ErrorAnswer), (status = 404, description = "no such document, or not within the caller's reach", body = super::error::ErrorAnswer)),
    security(("bearer" = []))
)]
pub async fn text(
    State(state): State<AppState>,
    Caller(access): Caller,
    Path(id): Path<i64>,
    Query(query): Query<TextQuery>,
) -> Result<Json<DocumentText>, ApiError> {
    let start = match (query.from, query.at) {
        (Some(_), Some(_)) => {
            return Err(ApiError::new(
                Code::InvalidQuery,
                "give from or at, not both",
            ));
        }
        (_, Some(at)) => Start::Around(at),
        (from, None) => Start::From(from.unwrap_or(0)),
    };
    let id = DocumentId(id);
    let not_found = || ApiError::new(Code::DocumentNotFound, format!("document {id} not found"));
    // Outside the caller's collections a document is as absent as a missing one.
    let reach = access.reach(&state.pool, &[]).await?;
    let document = crate::documents::get_within(&state.pool, id, &reach)
        .await?
        .ok_or_else(not_found)?;
    let window = reader::window(&state.pool, id, start)
        .await?
        .ok_or_else(not_found)?;
    Ok(Json(DocumentText {
        document_id: id,
        filename: document.filename,
        content_type: document.content_type,
        extractor: document.extractor,
        window,
    }))
}
