//! `GET /api/search` and `GET /api/info`: searching the chunks, and what produces the vectors
//! (so the page can say whether search understands meaning or only spellings).

use axum::extract::State;
use serde::Deserialize;
use serde_json::{Value, json};

use super::AppState;
use super::error::{ApiError, database};
use super::input::{Json, Query};
use crate::documents::DocumentId;
use crate::search::{DEFAULT_K, Mode, SearchError, SearchRequest, SearchResults};

/// Query of `GET /api/search`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SearchQuery {
    q: Option<String>,
    k: Option<i64>,
    mode: Option<String>,
    document: Option<i64>,
    model_version: Option<String>,
    /// `document` gathers the hits by document (`groups`); absent or empty, a flat list only.
    group: Option<String>,
}

/// `GET /api/search?q=…&k=…&mode=hybrid|vector|text&document=…&model_version=…&group=document`.
pub async fn search(
    State(state): State<AppState>,
    Query(query): Query<SearchQuery>,
) -> Result<Json<SearchResults>, ApiError> {
    let mode = match query.mode.as_deref() {
        None | Some("") => Mode::default(),
        Some(mode) => Mode::parse(mode).ok_or_else(|| {
            ApiError::bad_request(
                "invalid_mode",
                format!("unknown mode {mode:?}; expected hybrid, vector or text"),
            )
        })?,
    };
    let group = match query.group.as_deref() {
        None | Some("") => false,
        Some("document") => true,
        Some(other) => {
            return Err(ApiError::bad_request(
                "invalid_group",
                format!("unknown group {other:?}; expected document"),
            ));
        }
    };
    let request = SearchRequest {
        query: query.q.unwrap_or_default(),
        k: query.k.unwrap_or(DEFAULT_K),
        mode,
        document: query.document.map(DocumentId),
        model_version: query.model_version.filter(|v| !v.is_empty()),
        group,
    };
    state
        .searcher
        .search(&request)
        .await
        .map(Json)
        .map_err(search_error)
}

fn search_error(err: SearchError) -> ApiError {
    let message = err.to_string();
    match err {
        SearchError::EmptyQuery => ApiError::bad_request("empty_query", message),
        SearchError::QueryTooLong(_) => ApiError::bad_request("query_too_long", message),
        SearchError::InvalidK(_) => ApiError::bad_request("invalid_k", message),
        SearchError::UnknownModel(_) => ApiError::NotFound {
            code: "model_version_not_found",
            message,
        },
        SearchError::NoActiveModel => ApiError::Conflict {
            code: "no_active_model",
            message,
        },
        SearchError::ModelNotEmbeddable { .. } => ApiError::Conflict {
            code: "model_version_not_embeddable",
            message,
        },
        SearchError::NoVectors(_) => ApiError::Conflict {
            code: "no_vectors",
            message,
        },
        // The provider's message is about the provider, not the request; it never holds a key.
        SearchError::Embed(err) if !err.is_permanent() => ApiError::Unavailable {
            code: "embedding_unavailable",
            message: format!("the embedding provider is not answering right now: {err}"),
        },
        SearchError::Embed(err) => ApiError::Internal(anyhow::Error::new(err)),
        SearchError::Database(err) => database(err),
    }
}

/// `GET /api/info`: the active model version, and what embeds this server's queries and
/// documents (`embedder`), with `warning` set when that is the hashing fallback for a missing
/// local model.
pub async fn info(State(state): State<AppState>) -> Result<Json<Value>, ApiError> {
    let active = crate::models::active(&state.pool).await.map_err(database)?;
    let own = state.searcher.model();
    Ok(Json(json!({
        "version": env!("CARGO_PKG_VERSION"),
        "active_model": active,
        "embedder": {
            "model_version": own.model_version,
            "provider": own.provider,
            "model": own.model,
            "dims": own.dims,
            "semantic": state.searcher.is_semantic(),
            "warning": state.embedder_warning.as_deref(),
        },
        // What uploads may be: the page's drop zone and file picker are built from it.
        "formats": crate::extract::FORMATS,
    })))
}
