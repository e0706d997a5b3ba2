//! `GET /api/openapi.json`: the OpenAPI 3.1 description of the whole API, for clients written
//! in other languages (generated from it rather than from the README's table).
//!
//! Nothing here is written by hand but the frame: every operation is the `#[utoipa::path]` of
//! its handler and every schema the `ToSchema` of the type the handler reads or answers, and
//! the router is built from the same declarations ([`super::api_routes`]), so a route cannot
//! exist without its operation. [`finish`] adds what every operation shares: the error
//! answers of its authentication (401, and 403 where only an admin may act) and the JSON error
//! body for any other status.
//!
//! The document is public like the page: it reveals no data, a client generator fetches it
//! before it has a token, and the routes it lists (admin-only ones included) are the same for
//! every deployment.

use std::sync::LazyLock;

use axum::http::header;
use axum::response::{IntoResponse, Response};
use utoipa::Modify;
use utoipa::openapi::security::{ApiKey, ApiKeyValue, HttpAuthScheme, HttpBuilder, SecurityScheme};
use utoipa::openapi::{ContentBuilder, OpenApi, Ref, RefOr, ResponseBuilder};

use super::error::{ApiError, ErrorAnswer};

/// The frame of the document: what the operations do not say themselves.
#[derive(utoipa::OpenApi)]
#[openapi(
    info(
        title = "docket",
        description = "Durable document ingestion and semantic search on PostgreSQL. Every \
            error answers with `{\"error\": {\"code\", \"message\"}}`; clients match on `code`."
    ),
    modifiers(&Schemes),
    // Schemas no operation names by itself: a query parameter's enum (`?sort=`).
    components(schemas(ErrorAnswer, crate::documents::Sort)),
    tags(
        (name = "documents", description = "Upload, list, read, download, delete and reprocess"),
        (name = "search", description = "Search the chunks; what embeds them"),
        (name = "collections", description = "Named sets of documents that tokens reach"),
        (name = "jobs", description = "The queue: look at, enqueue, retry and cancel jobs (admin)"),
        (name = "schedules", description = "Jobs enqueued by cron expression (admin)"),
        (name = "models", description = "Model versions and switching between them (admin)"),
        (name = "webhooks", description = "Signed deliveries of document events (admin)"),
        (name = "events", description = "A server-sent event stream of changes"),
        (name = "meta", description = "This document"),
    )
)]
pub struct ApiDoc;

/// The bearer token (`DOCKET_API_TOKEN` or an issued token) and, for the event stream only,
/// the same token as a query parameter.
struct Schemes;

impl Modify for Schemes {
    fn modify(&self, openapi: &mut OpenApi) {
        let components = openapi.components.get_or_insert_with(Default::default);
        components.add_security_scheme(
            "bearer",
            SecurityScheme::Http(
                HttpBuilder::new()
                    .scheme(HttpAuthScheme::Bearer)
                    .description(Some(
                        "`Authorization: Bearer <token>`: DOCKET_API_TOKEN (an admin) or an \
                         issued token (its role and collections). An operation whose \
                         requirement lists the role `admin` answers 403 to any other token. \
                         On loopback before any token exists, no token is needed.",
                    ))
                    .build(),
            ),
        );
        components.add_security_scheme(
            "access_token",
            SecurityScheme::ApiKey(ApiKey::Query(ApiKeyValue::with_description(
                "access_token",
                "The bearer token as a query parameter, for EventSource, which cannot send \
                 headers (GET /api/events only).",
            ))),
        );
    }
}

/// `GET /api/openapi.json`: this API's OpenAPI 3.1 document.
#[utoipa::path(
    get,
    path = "/api/openapi.json",
    operation_id = "get_openapi",
    tag = "meta",
    responses((status = 200, description = "The OpenAPI 3.1 document", content_type = "application/json", body = serde_json::Value))
)]
pub async fn document() -> Result<Response, ApiError> {
    static JSON: LazyLock<Result<String, String>> =
        LazyLock::new(|| serde_json::to_string(&openapi()).map_err(|err| err.to_string()));
    let json = JSON
        .as_ref()
        .map_err(|err| ApiError::internal(anyhow::anyhow!("{err}")))?;
    Ok(([(header::CONTENT_TYPE, "application/json")], json.clone()).into_response())
}

/// The whole document, built from the declarations the router is built from.
pub fn openapi() -> OpenApi {
    let (_, mut doc) = super::with_public_routes(super::api_routes()).split_for_parts();
    finish(&mut doc);
    doc
}

/// Adds to every operation what its security implies and the error body of every other
/// status: 401 where a token is required, 403 where the requirement names the role `admin`.
fn finish(doc: &mut OpenApi) {
    let error = |description: &str| {
        RefOr::T(
            ResponseBuilder::new()
                .description(description)
                .content(
                    "application/json",
                    ContentBuilder::new()
                        .schema(Some(Ref::from_schema_name("ErrorAnswer")))
                        .build(),
                )
                .build(),
        )
    };
    for item in doc.paths.paths.values_mut() {
        let operations = [
            &mut item.get,
            &mut item.put,
            &mut item.post,
            &mut item.delete,
            &mut item.options,
            &mut item.head,
            &mut item.patch,
            &mut item.trace,
        ];
        for operation in operations.into_iter().flatten() {
            let (token, admin) = requirements(operation);
            let responses = &mut operation.responses.responses;
            if token {
                responses
                    .entry("401".into())
                    .or_insert_with(|| error("No token, or an unknown one (`unauthorized`)"));
            }
            if admin {
                responses.entry("403".into()).or_insert_with(|| {
                    error("The token is not an admin's (`forbidden`), or the request came from another web origin")
                });
                let note = "Needs an admin token.";
                let description = operation.description.get_or_insert_with(String::new);
                if !description.contains(note) {
                    if !description.is_empty() {
                        description.push_str("\n\n");
                    }
                    description.push_str(note);
                }
            }
            responses.entry("default".into()).or_insert_with(|| {
                error("Any other error (400 bad input, 408 too slow, 503 the database or embedder unavailable…)")
            });
        }
    }
}

/// Whether `operation` requires a token, and whether it must be an admin's.
fn requirements(operation: &utoipa::openapi::path::Operation) -> (bool, bool) {
    let Some(security) = &operation.security else {
        return (false, false);
    };
    let json = serde_json::to_value(security).unwrap_or_default();
    let requirements = json.as_array().cloned().unwrap_or_default();
    let token = !requirements.is_empty()
        && requirements
            .iter()
            .all(|r| r.as_object().is_some_and(|r| !r.is_empty()));
    let admin = requirements.iter().any(|r| {
        r.get("bearer")
            .and_then(|roles| roles.as_array())
            .is_some_and(|roles| roles.iter().any(|role| role == "admin"))
    });
    (token, admin)
}
