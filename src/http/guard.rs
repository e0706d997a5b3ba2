//! The trust boundary against web pages: which `Host` docket answers and which origins may
//! change it.
//!
//! A browser lets any page it shows send requests to docket, and the bearer token alone does not
//! stop that on the default loopback bind, where no token is required. Two checks close it:
//!
//! - **Host allow-list.** Every request must name, in its `Host` header, a name docket is served
//!   under: `localhost` (and `*.localhost`), an IP literal, the host of `DOCKET_PUBLIC_URL`, or one
//!   of `DOCKET_ALLOWED_HOSTS`. A page that rebinds its own DNS name to 127.0.0.1 (DNS rebinding)
//!   still sends its own name, so it is refused and can read nothing. IP literals are safe to
//!   accept: a page served from an IP literal that reaches docket *is* docket's origin.
//! - **Origin check.** A state-changing request (anything but GET, HEAD, OPTIONS) that carries an
//!   `Origin` (or, absent one, a `Referer`) must come from docket's own origin: the scheme, host
//!   and port the request was sent to (its `Host`), or `DOCKET_PUBLIC_URL`'s. `Origin: null`
//!   (sandboxed frames, some redirects) is refused. Requests with neither header are not from a
//!   browser page (CLIs, scripts, `docket ingest`) and pass, as browsers always send `Origin`
//!   with a cross-origin POST, PUT, PATCH or DELETE.
//!
//! Both refusals are 403 with the JSON error format. The checks run before authentication and
//! before any handler, on every route. [`time_limit`] bounds how long an `/api` request may take.

use std::net::IpAddr;
use std::str::FromStr;

use axum::extract::{Request, State};
use axum::http::uri::Authority;
use axum::http::{HeaderMap, Method, Uri, header};
use axum::middleware::Next;
use axum::response::Response;

use super::AppState;
use super::error::{ApiError, Code};

/// The names and origin docket is served under, beyond loopback.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct HostPolicy {
    /// Lowercase host names (no port) accepted besides loopback names and IP literals.
    allowed_hosts: Vec<String>,
    /// Where people open docket when it is behind a proxy (`DOCKET_PUBLIC_URL`).
    public_origin: Option<Origin>,
}

impl HostPolicy {
    /// A policy accepting `allowed_hosts` and the origin of `public_url` (an `http(s)://` URL)
    /// besides loopback names and IP literals. The message says what is wrong with a bad value.
    pub fn new(public_url: Option<&str>, allowed_hosts: &[String]) -> Result<Self, String> {
        let public_origin = match public_url.map(str::trim).filter(|u| !u.is_empty()) {
            None => None,
            Some(url) => Some(Origin::parse(url).ok_or_else(|| {
                format!("DOCKET_PUBLIC_URL {url:?} is not an http:// or https:// URL")
            })?),
        };
        let mut hosts = Vec::new();
        for host in allowed_hosts
            .iter()
            .map(|h| h.trim())
            .filter(|h| !h.is_empty())
        {
            let authority = Authority::from_str(host)
                .map_err(|_| format!("DOCKET_ALLOWED_HOSTS entry {host:?} is not a host name"))?;
            hosts.push(normalise_host(authority.host()));
        }
        if let Some(origin) = &public_origin {
            hosts.push(origin.host.clone());
        }
        Ok(Self {
            allowed_hosts: hosts,
            public_origin,
        })
    }

    /// Whether `host` (a host name without port) is one docket is served under.
    fn allows_host(&self, host: &str) -> bool {
        let host = normalise_host(host);
        host == "localhost"
            || host.ends_with(".localhost")
            || host
                .trim_start_matches('[')
                .trim_end_matches(']')
                .parse::<IpAddr>()
                .is_ok()
            || self.allowed_hosts.contains(&host)
    }
}

/// A web origin: scheme, host and port (the scheme's default when the URL names none).
#[derive(Debug, Clone, PartialEq, Eq)]
struct Origin {
    scheme: String,
    host: String,
    port: u16,
}

impl Origin {
    /// The origin of an absolute `http(s)` URL; `None` for anything else (`null` included).
    fn parse(url: &str) -> Option<Self> {
        let uri: Uri = url.parse().ok()?;
        let scheme = uri.scheme_str()?.to_ascii_lowercase();
        let default_port = default_port(&scheme)?;
        let authority = uri.authority()?;
        Some(Self {
            host: normalise_host(authority.host()),
            port: authority.port_u16().unwrap_or(default_port),
            scheme,
        })
    }

    /// Whether this origin is the one a request with `Host: authority` was sent to. The scheme
    /// the client used is not visible here (a TLS proxy may sit in front), so the port is
    /// compared with the origin's scheme's default when `Host` names none.
    fn is_sent_to(&self, authority: &Authority) -> bool {
        let port = authority
            .port_u16()
            .or_else(|| default_port(&self.scheme))
            .unwrap_or(0);
        normalise_host(authority.host()) == self.host && port == self.port
    }
}

fn default_port(scheme: &str) -> Option<u16> {
    match scheme {
        "http" => Some(80),
        "https" => Some(443),
        _ => None,
    }
}

/// Lowercase, without the trailing dot of a fully qualified name.
fn normalise_host(host: &str) -> String {
    host.trim_end_matches('.').to_ascii_lowercase()
}

/// The authority a request was sent to: its `Host` header, or the URI's (HTTP/2).
fn request_authority(request: &Request) -> Option<Result<Authority, ()>> {
    match request.headers().get(header::HOST) {
        Some(value) => Some(
            value
                .to_str()
                .ok()
                .and_then(|v| Authority::from_str(v).ok())
                .ok_or(()),
        ),
        None => request.uri().authority().cloned().map(Ok),
    }
}

/// What a browser says about the page that sent a request: `Origin`, else `Referer`.
fn claimed_source(headers: &HeaderMap) -> Option<&str> {
    headers
        .get(header::ORIGIN)
        .or_else(|| headers.get(header::REFERER))
        .map(|value| value.to_str().unwrap_or("null"))
}

fn changes_state(method: &Method) -> bool {
    !matches!(
        *method,
        Method::GET | Method::HEAD | Method::OPTIONS | Method::TRACE
    )
}

/// Refuses requests for a foreign `Host` and state-changing requests from another origin.
pub async fn check(
    State(state): State<AppState>,
    request: Request,
    next: Next,
) -> Result<Response, ApiError> {
    let policy = &state.guard.hosts;
    let authority = match request_authority(&request) {
        // No Host at all (HTTP/1.0): not a browser, which always sends one.
        None => None,
        Some(Ok(authority)) if policy.allows_host(authority.host()) => Some(authority),
        Some(_) => {
            return Err(ApiError::new(
                Code::HostNotAllowed,
                "this Host is not one docket is served under; add it to \
                 DOCKET_ALLOWED_HOSTS or DOCKET_PUBLIC_URL",
            ));
        }
    };
    if changes_state(request.method())
        && let Some(source) = claimed_source(request.headers())
    {
        let same_origin = Origin::parse(source).is_some_and(|origin| {
            authority.as_ref().is_some_and(|a| origin.is_sent_to(a))
                || policy.public_origin.as_ref() == Some(&origin)
        });
        if !same_origin {
            return Err(ApiError::new(
                Code::CrossOriginRequest,
                "requests that change docket must come from docket's own page \
                 (the Origin or Referer names another site)",
            ));
        }
    }
    Ok(next.run(request).await)
}

/// Answers 408 when the request takes longer than the request timeout: a client that sends
/// its upload a byte a minute must not hold an upload slot, or a connection's worth of
/// memory, for ever.
pub async fn time_limit(
    State(state): State<AppState>,
    request: Request,
    next: Next,
) -> Result<Response, ApiError> {
    let limit = state.guard.request_timeout;
    tokio::time::timeout(limit, next.run(request))
        .await
        .map_err(|_| {
            ApiError::new(
                Code::RequestTimeout,
                format!("the request took longer than {} seconds", limit.as_secs()),
            )
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn authority(text: &str) -> Authority {
        Authority::from_str(text).expect("authority")
    }

    #[test]
    fn loopback_names_ip_literals_and_configured_hosts_are_allowed() {
        let policy = HostPolicy::new(
            Some("https://Docket.Example.com/"),
            &["search.internal".into()],
        )
        .expect("valid policy");
        for host in [
            "localhost",
            "app.localhost",
            "127.0.0.1",
            "[::1]",
            "10.0.0.7",
            "docket.example.com",
            "docket.example.com.",
            "SEARCH.internal",
        ] {
            assert!(policy.allows_host(host), "{host}");
        }
        for host in ["evil.example", "localhost.evil.example", "example.com"] {
            assert!(!policy.allows_host(host), "{host}");
        }
        assert!(HostPolicy::new(Some("ftp://x"), &[]).is_err());
        assert!(HostPolicy::new(None, &["bad host/".into()]).is_err());
    }

    #[test]
    fn an_origin_matches_the_host_it_was_sent_to_with_default_ports() {
        let page = Origin::parse("http://127.0.0.1:8080").expect("origin");
        assert!(page.is_sent_to(&authority("127.0.0.1:8080")));
        assert!(!page.is_sent_to(&authority("127.0.0.1:9090")));
        assert!(!page.is_sent_to(&authority("localhost:8080")));
        let proxied = Origin::parse("https://docket.example.com/search?q=x").expect("origin");
        assert!(proxied.is_sent_to(&authority("docket.example.com")));
        assert!(proxied.is_sent_to(&authority("docket.example.com:443")));
        assert!(!proxied.is_sent_to(&authority("docket.example.com:80")));
        assert_eq!(Origin::parse("null"), None);
        assert_eq!(Origin::parse("file:///etc/passwd"), None);
    }
}
