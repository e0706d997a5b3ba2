//! The [`Secret`] newtype that carries an API key through configuration and into request
//! headers without ever printing it.
//!
//! Keys leak through `Debug` derives on configs, through error messages that echo a request, and
//! through logs. Wrapping the key in a type whose `Debug` and `Display` both print `[redacted]`
//! closes the first path for every struct that holds one; [`Secret::scrub`] closes the second for
//! provider messages that echo what they were sent.

use std::fmt;

/// What a [`Secret`] prints instead of its value.
pub const REDACTED: &str = "[redacted]";

/// A credential that never shows itself in `Debug` or `Display` output.
///
/// Deliberately neither `Serialize` nor `PartialEq`: nothing should write it out, and comparing
/// keys belongs to constant-time code elsewhere.
#[derive(Clone)]
pub struct Secret(String);

impl Secret {
    /// Wraps a credential.
    pub fn new(value: impl Into<String>) -> Self {
        Self(value.into())
    }

    /// The credential itself, for the one place that must send it (an HTTP header).
    pub fn expose(&self) -> &str {
        &self.0
    }

    /// Replaces every occurrence of this secret in `text` by `[redacted]`, for messages written by
    /// someone else (a provider's error body may quote the key it rejected).
    pub fn scrub(&self, text: &str) -> String {
        // An empty key would "occur" between every character.
        if self.0.is_empty() {
            return text.to_owned();
        }
        text.replace(&self.0, REDACTED)
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(REDACTED)
    }
}

impl fmt::Display for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(REDACTED)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn debug_and_display_never_show_the_value() {
        let secret = Secret::new("sk-live-abc123");
        assert_eq!(format!("{secret:?}"), REDACTED);
        assert_eq!(format!("{secret}"), REDACTED);
        assert_eq!(secret.expose(), "sk-live-abc123");
    }

    #[test]
    fn scrub_removes_every_occurrence_of_the_value() {
        let secret = Secret::new("sk-live-abc123");
        let scrubbed = secret.scrub("bad key sk-live-abc123 (sk-live-abc123)");
        assert_eq!(scrubbed, "bad key [redacted] ([redacted])");
        assert_eq!(Secret::new("").scrub("abc"), "abc");
    }
}
