//! [`EmbedError`], the one error type of the embedding module, and [`classify`], the one place
//! that turns an HTTP status or a transport failure into a retry strategy.
//!
//! Every error says who is at fault and what the caller should do: wait and retry
//! ([`EmbedError::RateLimited`], [`EmbedError::Transient`]) or stop and let a person look
//! ([`EmbedError::Permanent`], [`EmbedError::Config`]). The job queue maps these onto
//! reschedule-without-an-attempt, retry-with-backoff, and dead.

use std::time::{Duration, SystemTime};

use reqwest::StatusCode;
use reqwest::header::HeaderMap;

use super::secret::Secret;

/// Why an embedding call failed, labelled by what the caller should do about it.
#[derive(Debug, thiserror::Error)]
pub enum EmbedError {
    /// The provider refused for rate limiting (HTTP 429); come back after `retry_after`.
    #[error("embedding provider rate limit reached{}: {message}", after(*.retry_after))]
    RateLimited {
        /// When the provider said to come back, if it said.
        retry_after: Option<Duration>,
        /// The provider's message.
        message: String,
    },
    /// A failure that may pass by itself: 5xx, timeout, refused or reset connection.
    #[error("embedding provider unavailable{}: {message}", after(*.retry_after))]
    Transient {
        /// What went wrong.
        message: String,
        /// When the provider said to come back, if it said.
        retry_after: Option<Duration>,
    },
    /// The provider rejected the request (4xx) or answered with something unusable (wrong
    /// count, wrong dimensions, non-finite values); retrying the same input will not help.
    #[error("embedding request failed permanently: {message}")]
    Permanent {
        /// The provider's message, or the mismatch found in its answer.
        message: String,
    },
    /// The embedder's own configuration is unusable (bad URL, unknown dimensions).
    #[error("embedder misconfigured: {message}")]
    Config {
        /// What is wrong and which setting fixes it.
        message: String,
    },
}

fn after(retry_after: Option<Duration>) -> String {
    retry_after
        .map(|d| format!(" (retry after {:.3}s)", d.as_secs_f64()))
        .unwrap_or_default()
}

impl EmbedError {
    /// When to try again, if the provider said (or the error implies it).
    pub fn retry_after(&self) -> Option<Duration> {
        match self {
            Self::RateLimited { retry_after, .. } | Self::Transient { retry_after, .. } => {
                *retry_after
            }
            Self::Permanent { .. } | Self::Config { .. } => None,
        }
    }

    /// True for a provider rate limit: the job should be rescheduled without spending an attempt.
    pub fn is_rate_limited(&self) -> bool {
        matches!(self, Self::RateLimited { .. })
    }

    /// True when retrying cannot help: the job should go to `dead` with this message.
    pub fn is_permanent(&self) -> bool {
        matches!(self, Self::Permanent { .. } | Self::Config { .. })
    }

    /// A stable snake_case code for APIs and metrics.
    pub fn code(&self) -> &'static str {
        match self {
            Self::RateLimited { .. } => "embedding_rate_limited",
            Self::Transient { .. } => "embedding_unavailable",
            Self::Permanent { .. } => "embedding_rejected",
            Self::Config { .. } => "embedding_misconfigured",
        }
    }

    pub(crate) fn permanent(message: impl Into<String>) -> Self {
        Self::Permanent {
            message: message.into(),
        }
    }

    /// The same error with every occurrence of `secret` removed from its message: providers
    /// sometimes quote the key they rejected.
    pub(crate) fn redact(self, secret: Option<&Secret>) -> Self {
        let Some(secret) = secret else { return self };
        match self {
            Self::RateLimited {
                retry_after,
                message,
            } => Self::RateLimited {
                retry_after,
                message: secret.scrub(&message),
            },
            Self::Transient {
                message,
                retry_after,
            } => Self::Transient {
                message: secret.scrub(&message),
                retry_after,
            },
            Self::Permanent { message } => Self::Permanent {
                message: secret.scrub(&message),
            },
            Self::Config { message } => Self::Config {
                message: secret.scrub(&message),
            },
        }
    }
}

/// What went wrong with one HTTP exchange, before classification.
pub(crate) enum Failure<'a> {
    /// The provider answered with a non-success status.
    Status {
        status: StatusCode,
        headers: &'a HeaderMap,
        body: &'a str,
    },
    /// No (complete) answer arrived.
    Transport(&'a reqwest::Error),
}

/// Maps a failed exchange to a strategy: 429 → rate limited; 408, 5xx, timeouts and connection
/// failures → transient; every other status (400, 401, 403, 404, 422, …) and unbuildable
/// requests → permanent, carrying the provider's `error.message`.
pub(crate) fn classify(failure: Failure<'_>) -> EmbedError {
    match failure {
        Failure::Status {
            status,
            headers,
            body,
        } => {
            let message = format!("HTTP {status}: {}", provider_message(body));
            let retry_after = match retry_after_from(headers, SystemTime::now()) {
                ServerSays::Nothing => None,
                ServerSays::Wait(wait) => Some(wait),
                ServerSays::Absurd(raw) => {
                    // Not believed: a pause that long would stop every embedding and vector
                    // search of the process. The job retries later, spending an attempt.
                    return EmbedError::Transient {
                        message: format!(
                            "{message} (the provider asked to wait {raw}, more than the {} s docket believes)",
                            MAX_RETRY_AFTER.as_secs()
                        ),
                        retry_after: Some(MAX_RETRY_AFTER),
                    };
                }
            };
            if status == StatusCode::TOO_MANY_REQUESTS {
                EmbedError::RateLimited {
                    retry_after,
                    message,
                }
            } else if status.is_server_error() || status == StatusCode::REQUEST_TIMEOUT {
                EmbedError::Transient {
                    message,
                    retry_after,
                }
            } else {
                EmbedError::Permanent { message }
            }
        }
        Failure::Transport(error) => {
            let message = error_chain(error);
            if error.is_builder() {
                EmbedError::Config { message }
            } else {
                // Timeouts, refused or reset connections, bodies cut short: all may pass.
                EmbedError::Transient {
                    message,
                    retry_after: None,
                }
            }
        }
    }
}

/// The provider's `error.message` from an OpenAI-shaped body, else the (shortened) body itself.
fn provider_message(body: &str) -> String {
    let parsed = serde_json::from_str::<serde_json::Value>(body).ok();
    let message = parsed.as_ref().and_then(|v| {
        v.pointer("/error/message")
            .or_else(|| v.get("error"))
            .or_else(|| v.get("message"))
            .and_then(|m| m.as_str())
    });
    match message {
        Some(m) => m.to_owned(),
        None if body.trim().is_empty() => "(empty body)".to_owned(),
        None => body.chars().take(500).collect(),
    }
}

fn error_chain(error: &reqwest::Error) -> String {
    let mut message = error.to_string();
    let mut source = std::error::Error::source(error);
    while let Some(cause) = source {
        message.push_str(": ");
        message.push_str(&cause.to_string());
        source = cause.source();
    }
    message
}

/// The longest wait a provider is believed about. A longer `Retry-After` (or reset) is a bug or
/// an attack on our side of the contract: honouring it would pause the process-wide limiter,
/// and with it every embedding and vector search, for as long as it says (decades, or a panic
/// for values no `Duration` holds).
pub const MAX_RETRY_AFTER: Duration = Duration::from_secs(15 * 60);

/// What a failed answer says about when to come back.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum ServerSays {
    Nothing,
    /// A wait no longer than [`MAX_RETRY_AFTER`].
    Wait(Duration),
    /// A wait longer than [`MAX_RETRY_AFTER`], as the header said it.
    Absurd(String),
}

/// When the provider asked us to come back.
///
/// An explicit `retry-after-ms` or `Retry-After` (seconds or HTTP date) wins. Otherwise the
/// OpenAI reset headers are used: the reset of whichever limit reports zero remaining, or the
/// later of the two resets when neither says. Negative and unparsable values are ignored; waits
/// past [`MAX_RETRY_AFTER`] are [`ServerSays::Absurd`].
pub(crate) fn retry_after_from(headers: &HeaderMap, now: SystemTime) -> ServerSays {
    let text = |name: &str| {
        headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .map(str::trim)
    };
    let judged = |seconds: f64, raw: &str| {
        if seconds > MAX_RETRY_AFTER.as_secs_f64() {
            ServerSays::Absurd(raw.to_owned())
        } else {
            ServerSays::Wait(Duration::from_secs_f64(seconds.max(0.0)))
        }
    };
    if let Some(raw) = text("retry-after-ms")
        && let Ok(ms) = raw.parse::<f64>()
        && !ms.is_nan()
        && ms >= 0.0
    {
        return judged(ms / 1000.0, &format!("{raw} ms"));
    }
    if let Some(value) = text("retry-after") {
        if let Ok(seconds) = value.parse::<f64>()
            && !seconds.is_nan()
            && seconds >= 0.0
        {
            return judged(seconds, &format!("{value} s"));
        }
        if let Ok(date) = chrono::DateTime::parse_from_rfc2822(value) {
            let at = SystemTime::from(date);
            let wait = at.duration_since(now).unwrap_or(Duration::ZERO);
            return judged(wait.as_secs_f64(), value);
        }
    }
    let reset = |kind: &str| {
        let raw = text(&format!("x-ratelimit-reset-{kind}"))?;
        let seconds = go_duration_seconds(raw)?;
        let exhausted = text(&format!("x-ratelimit-remaining-{kind}")) == Some("0");
        Some((seconds, raw, exhausted))
    };
    let resets: Vec<(f64, &str, bool)> = [reset("requests"), reset("tokens")]
        .into_iter()
        .flatten()
        .collect();
    let latest = |exhausted_only: bool| {
        resets
            .iter()
            .filter(|(_, _, exhausted)| *exhausted || !exhausted_only)
            .max_by(|a, b| a.0.total_cmp(&b.0))
    };
    match latest(true).or_else(|| latest(false)) {
        Some((seconds, raw, _)) => judged(*seconds, raw),
        None => ServerSays::Nothing,
    }
}

/// Parses a Go-style duration as OpenAI sends it: `20ms`, `1s`, `6m0s`, `1.5s`, `1h2m3s`.
pub fn parse_go_duration(text: &str) -> Option<Duration> {
    Duration::try_from_secs_f64(go_duration_seconds(text)?).ok()
}

/// The seconds a Go-style duration names, however many (possibly infinite).
fn go_duration_seconds(text: &str) -> Option<f64> {
    let mut rest = text.trim();
    if rest.is_empty() {
        return None;
    }
    let mut total = 0.0f64;
    while !rest.is_empty() {
        let number_len = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(rest.len());
        let number: f64 = rest[..number_len].parse().ok()?;
        rest = &rest[number_len..];
        let unit_len = rest
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(rest.len());
        let seconds_per_unit = match &rest[..unit_len] {
            "h" => 3600.0,
            "m" => 60.0,
            "s" => 1.0,
            "ms" => 1e-3,
            "us" | "µs" | "μs" => 1e-6,
            "ns" => 1e-9,
            _ => return None,
        };
        rest = &rest[unit_len..];
        total += number * seconds_per_unit;
    }
    Some(total)
}

/// Formats a duration the way [`parse_go_duration`] reads it (`345ms`, `1.5s`, `6m0s`).
pub fn format_go_duration(duration: Duration) -> String {
    let millis = duration.as_millis();
    if millis < 1000 {
        return format!("{millis}ms");
    }
    let minutes = millis / 60_000;
    let seconds = (millis % 60_000) as f64 / 1000.0;
    if minutes == 0 {
        format!("{seconds}s")
    } else {
        format!("{minutes}m{seconds}s")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use reqwest::header::HeaderValue;

    fn headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for (name, value) in pairs {
            map.insert(*name, HeaderValue::from_str(value).expect("valid header"));
        }
        map
    }

    fn wait(ms: u64) -> ServerSays {
        ServerSays::Wait(Duration::from_millis(ms))
    }

    #[test]
    fn absurd_waits_are_not_believed_and_never_panic() {
        let rate_limited = |pairs: &[(&'static str, &str)]| {
            classify(Failure::Status {
                status: StatusCode::TOO_MANY_REQUESTS,
                headers: &headers(pairs),
                body: "slow down",
            })
        };
        for pairs in [
            &[("retry-after-ms", "1e300")][..],
            &[("retry-after-ms", "inf")],
            &[("retry-after", "999999999")],
            &[("retry-after", "Fri, 01 Jan 2100 00:00:00 GMT")],
            &[
                ("x-ratelimit-reset-requests", "999999999h"),
                ("x-ratelimit-remaining-requests", "0"),
            ],
        ] {
            let error = rate_limited(pairs);
            assert!(
                !error.is_rate_limited() && !error.is_permanent(),
                "{pairs:?}: a transient error that pauses nobody, got {error:?}"
            );
            assert_eq!(error.retry_after(), Some(MAX_RETRY_AFTER), "{pairs:?}");
        }
        let sane = rate_limited(&[("retry-after", "120")]);
        assert!(sane.is_rate_limited());
        assert_eq!(sane.retry_after(), Some(Duration::from_secs(120)));
        let negative = rate_limited(&[("retry-after-ms", "-5")]);
        assert_eq!(negative.retry_after(), None);
    }

    #[test]
    fn go_durations_parse_as_openai_sends_them() {
        assert_eq!(parse_go_duration("20ms"), Some(Duration::from_millis(20)));
        assert_eq!(parse_go_duration("1s"), Some(Duration::from_secs(1)));
        assert_eq!(parse_go_duration("6m0s"), Some(Duration::from_secs(360)));
        assert_eq!(parse_go_duration("1.5s"), Some(Duration::from_millis(1500)));
        assert_eq!(parse_go_duration("1h2m3s"), Some(Duration::from_secs(3723)));
        assert_eq!(parse_go_duration("soon"), None);
        assert_eq!(parse_go_duration("5"), None);
        assert_eq!(parse_go_duration(""), None);
    }

    #[test]
    fn formatted_go_durations_parse_back() {
        for ms in [0u64, 7, 999, 1000, 1500, 59_999, 60_000, 361_250] {
            let d = Duration::from_millis(ms);
            assert_eq!(parse_go_duration(&format_go_duration(d)), Some(d), "{ms}ms");
        }
    }

    #[test]
    fn retry_after_reads_seconds_and_http_dates() {
        let now = SystemTime::UNIX_EPOCH + Duration::from_secs(1_445_412_470);
        let secs = headers(&[("retry-after", "7")]);
        assert_eq!(retry_after_from(&secs, now), wait(7_000));
        // 1 445 412 480 is Wed, 21 Oct 2015 07:28:00 GMT.
        let date = headers(&[("retry-after", "Wed, 21 Oct 2015 07:28:00 GMT")]);
        assert_eq!(retry_after_from(&date, now), wait(10_000));
        let past = headers(&[("retry-after", "Wed, 21 Oct 2015 07:00:00 GMT")]);
        assert_eq!(retry_after_from(&past, now), wait(0));
    }

    #[test]
    fn retry_after_prefers_the_exhausted_limits_reset() {
        let now = SystemTime::now();
        let map = headers(&[
            ("x-ratelimit-reset-requests", "6m0s"),
            ("x-ratelimit-remaining-requests", "12"),
            ("x-ratelimit-reset-tokens", "20ms"),
            ("x-ratelimit-remaining-tokens", "0"),
        ]);
        assert_eq!(retry_after_from(&map, now), wait(20));
        let neither = headers(&[
            ("x-ratelimit-reset-requests", "2s"),
            ("x-ratelimit-reset-tokens", "20ms"),
        ]);
        assert_eq!(retry_after_from(&neither, now), wait(2_000));
        let explicit = headers(&[("retry-after", "1"), ("x-ratelimit-reset-tokens", "9s")]);
        assert_eq!(retry_after_from(&explicit, now), wait(1_000));
        assert_eq!(
            retry_after_from(&HeaderMap::new(), now),
            ServerSays::Nothing
        );
    }

    #[test]
    fn statuses_map_to_their_strategies() {
        let empty = HeaderMap::new();
        let body = r#"{"error":{"message":"model not found","type":"invalid_request_error"}}"#;
        let class = |code: u16| {
            classify(Failure::Status {
                status: StatusCode::from_u16(code).expect("valid status"),
                headers: &empty,
                body,
            })
        };
        assert!(class(429).is_rate_limited());
        for code in [500, 502, 503, 504, 408] {
            let error = class(code);
            assert!(!error.is_permanent() && !error.is_rate_limited(), "{code}");
        }
        for code in [400, 401, 403, 404, 422] {
            let error = class(code);
            assert!(error.is_permanent(), "{code}");
            assert!(error.to_string().contains("model not found"), "{error}");
        }
    }

    #[test]
    fn non_json_error_bodies_are_quoted_shortened() {
        let error = classify(Failure::Status {
            status: StatusCode::BAD_GATEWAY,
            headers: &HeaderMap::new(),
            body: &"<html>bad gateway</html>".repeat(100),
        });
        assert!(error.to_string().contains("<html>bad gateway"));
        assert!(error.to_string().len() < 700);
    }
}
