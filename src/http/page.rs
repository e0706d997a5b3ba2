//! The static web page, embedded in the binary at build time: no build step, no CDN, and a
//! strict Content-Security-Policy so that nothing but our own files runs.

use axum::http::header;
use axum::response::{IntoResponse, Response};

/// Only our own scripts, styles and API; no inline script, no framing.
pub const CONTENT_SECURITY_POLICY: &str = "default-src 'none'; script-src 'self'; \
     style-src 'self'; img-src 'self' data:; connect-src 'self'; form-action 'self'; \
     base-uri 'none'; frame-ancestors 'none'";

pub async fn index() -> Response {
    asset(
        "text/html; charset=utf-8",
        include_str!("../../web/index.html"),
    )
}

pub async fn script() -> Response {
    asset(
        "text/javascript; charset=utf-8",
        include_str!("../../web/app.js"),
    )
}

/// The page's other scripts, one role each (loaded after app.js, which starts the page once
/// all are in).
pub async fn names_script() -> Response {
    script_asset(include_str!("../../web/names.js"))
}

pub async fn list_script() -> Response {
    script_asset(include_str!("../../web/list.js"))
}

pub async fn reader_script() -> Response {
    script_asset(include_str!("../../web/reader.js"))
}

pub async fn webhooks_script() -> Response {
    script_asset(include_str!("../../web/webhooks.js"))
}

pub async fn collections_script() -> Response {
    script_asset(include_str!("../../web/collections.js"))
}

pub async fn search_script() -> Response {
    script_asset(include_str!("../../web/search.js"))
}

fn script_asset(body: &'static str) -> Response {
    asset("text/javascript; charset=utf-8", body)
}

pub async fn style() -> Response {
    asset("text/css; charset=utf-8", include_str!("../../web/app.css"))
}

fn asset(content_type: &'static str, body: &'static str) -> Response {
    (
        [
            (header::CONTENT_TYPE, content_type),
            (header::CONTENT_SECURITY_POLICY, CONTENT_SECURITY_POLICY),
            (header::X_CONTENT_TYPE_OPTIONS, "nosniff"),
            (header::REFERRER_POLICY, "no-referrer"),
            (header::CACHE_CONTROL, "no-cache"),
        ],
        body,
    )
        .into_response()
}
