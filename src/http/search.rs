//! `GET /api/search` and `GET /api/info`: searching the chunks, and what produces the vectors
//! (so the page can say whether search understands meaning or only spellings).

use axum::extract::State;
use axum::http::HeaderName;
use serde::{Deserialize, Serialize};

use super::AppState;
use super::auth::Caller;
use super::error::{ApiError, Code};
use super::input::{Json, Query};
use crate::documents::DocumentId;
use crate::models::ModelVersion;
use crate::search::{DEFAULT_K, Mode, SearchRequest, SearchResults, server_timing};

/// The standard header naming where a response's time went.
const SERVER_TIMING: HeaderName = HeaderName::from_static("server-timing");

/// Query of `GET /api/search`.
#[derive(utoipa::IntoParams, Debug, Deserialize)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
pub struct SearchQuery {
    q: Option<String>,
    k: Option<i64>,
    mode: Option<String>,
    document: Option<i64>,
    /// Only these collections (repeatable); none: every collection the caller may read.
    #[serde(default)]
    collection: Vec<String>,
    model_version: Option<String>,
    /// `document` gathers the hits by document (`groups`); absent or empty, a flat list only.
    group: Option<String>,
    /// Only hits at least this relevant (0 to 1); `0` returns every hit.
    min_relevance: Option<f64>,
}

/// `GET /api/search?q=…&k=…&mode=hybrid|vector|text&document=…&collection=…&model_version=…&group=document`.
#[utoipa::path(
    get,
    path = "/search",
    operation_id = "search",
    tag = "search",
    params(SearchQuery),
    responses((status = 200, body = SearchResults, headers(("server-timing" = String, description = "where the search's time went: `plan`, `embed`, `nearest`, `keywords`, `complete` and `hits` in ms (a hybrid search's lists overlap)"))), (status = 400, description = "an empty or long query, or a bad k, mode or group", body = super::error::ErrorAnswer), (status = 404, description = "an unknown model version", body = super::error::ErrorAnswer), (status = 409, description = "no active model, or the version cannot be searched by vector here", body = super::error::ErrorAnswer)),
    security(("bearer" = []))
)]
pub async fn search(
    State(state): State<AppState>,
    Caller(access): Caller,
    Query(query): Query<SearchQuery>,
) -> Result<([(HeaderName, String); 1], Json<SearchResults>), ApiError> {
    let mode = match query.mode.as_deref() {
        None | Some("") => Mode::default(),
        Some(mode) => Mode::parse(mode).ok_or_else(|| {
            ApiError::new(
                Code::InvalidMode,
                format!("unknown mode {mode:?}; expected hybrid, vector or text"),
            )
        })?,
    };
    let group = match query.group.as_deref() {
        None | Some("") => false,
        Some("document") => true,
        Some(other) => {
            return Err(ApiError::new(
                Code::InvalidGroup,
                format!("unknown group {other:?}; expected document"),
            ));
        }
    };
    let collections = access.reach(&state.pool, &query.collection).await?;
    let request = SearchRequest {
        query: query.q.unwrap_or_default(),
        k: query.k.unwrap_or(DEFAULT_K),
        mode,
        document: query.document.map(DocumentId),
        collections,
        model_version: query.model_version.filter(|v| !v.is_empty()),
        group,
        min_relevance: query.min_relevance,
    };
    let results = state.searcher.search(&request).await?;
    let timing = [(SERVER_TIMING, server_timing(&results.stages))];
    Ok((timing, Json(results)))
}

/// Answer of `GET /api/info`.
#[derive(utoipa::ToSchema, Debug, Serialize)]
pub struct Info {
    /// docket's own version.
    pub version: &'static str,
    /// The version searches use unless they name one; none before a worker registered one.
    pub active_model: Option<ModelVersion>,
    pub embedder: EmbedderInfo,
    /// What uploads may be: the page's drop zone and file picker are built from it.
    #[schema(value_type = Vec<Object>)]
    pub formats: &'static [crate::extract::formats::Format],
}

/// What embeds this server's queries (and its worker's documents).
#[derive(utoipa::ToSchema, Debug, Serialize)]
pub struct EmbedderInfo {
    pub model_version: String,
    pub provider: String,
    pub model: String,
    pub dims: i32,
    /// False for the hashing embedder, which matches spellings, not meaning.
    pub semantic: bool,
    /// Why this is the hashing fallback for a missing local model, when it is.
    pub warning: Option<String>,
}

/// `GET /api/info`: the active model version, and what embeds this server's queries and
/// documents (`embedder`), with `warning` set when that is the hashing fallback for a missing
/// local model.
#[utoipa::path(
    get,
    path = "/info",
    operation_id = "get_info",
    tag = "search",
    responses((status = 200, body = Info)),
    security(("bearer" = []))
)]
pub async fn info(State(state): State<AppState>) -> Result<Json<Info>, ApiError> {
    let own = state.searcher.model();
    Ok(Json(Info {
        version: env!("CARGO_PKG_VERSION"),
        active_model: crate::models::active(&state.pool).await?,
        embedder: EmbedderInfo {
            model_version: own.model_version.clone(),
            provider: own.provider.clone(),
            model: own.model.clone(),
            dims: own.dims,
            semantic: state.searcher.is_semantic(),
            warning: state.embedder_warning.as_deref().map(str::to_owned),
        },
        formats: crate::extract::FORMATS,
    }))
}
