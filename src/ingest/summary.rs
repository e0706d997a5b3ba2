//! The end-of-run report of `docket ingest`: counts, and each rejected file with its reason.
//!
//! Text for people (stdout), or with `--json` one object for scripts. Rejections carry the
//! server's stable code, so a script can tell "too large" from "not a document".

use std::path::PathBuf;

use serde::Serialize;
use serde_json::json;

use super::FileOutcome;

/// A file that was not accepted.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Rejection {
    /// The local path.
    pub path: PathBuf,
    /// The server's error code (`unsupported_type`, …) or a local one (`not_found`, `unreadable`).
    pub code: String,
    /// Why, for a person.
    pub message: String,
}

/// What a run did so far.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Summary {
    /// Files that became new documents.
    pub new: usize,
    /// Files whose bytes were already stored.
    pub duplicate: usize,
    /// Files refused, by the server or before sending.
    pub rejected: Vec<Rejection>,
}

impl Summary {
    /// Counts one server outcome.
    pub fn record(&mut self, path: PathBuf, outcome: FileOutcome) {
        match outcome {
            FileOutcome::New { .. } => self.new += 1,
            FileOutcome::Duplicate { .. } => self.duplicate += 1,
            FileOutcome::Rejected { code, message } => self.reject(path, code, message),
        }
    }

    /// Counts one rejected file.
    pub fn reject(&mut self, path: PathBuf, code: String, message: String) {
        self.rejected.push(Rejection {
            path,
            code,
            message,
        });
    }

    /// Files with an outcome so far.
    pub fn sent(&self) -> usize {
        self.new + self.duplicate + self.rejected.len()
    }

    /// The summary as text: a count line, then one line per rejected file.
    pub fn to_text(&self, url: &str) -> String {
        let mut text = format!(
            "{} files → {url}: {} new, {} duplicate, {} rejected\n",
            self.sent(),
            self.new,
            self.duplicate,
            self.rejected.len()
        );
        for rejection in &self.rejected {
            text.push_str(&format!(
                "  rejected {}: {}: {}\n",
                rejection.path.display(),
                rejection.code,
                rejection.message
            ));
        }
        text
    }

    /// The summary as one JSON object.
    pub fn to_json(&self) -> serde_json::Value {
        json!({
            "new": self.new,
            "duplicate": self.duplicate,
            "rejected": self.rejected.len(),
            "rejections": self.rejected,
        })
    }

    /// Prints to stdout, as text or JSON.
    pub fn print(&self, as_json: bool, url: &str) {
        if as_json {
            println!("{}", self.to_json());
        } else {
            print!("{}", self.to_text(url));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rejections_are_listed_with_code_and_message() {
        let mut summary = Summary::default();
        summary.record("a.pdf".into(), FileOutcome::New { document_id: 1 });
        summary.record("b.pdf".into(), FileOutcome::Duplicate { document_id: 1 });
        summary.record(
            "c.pdf".into(),
            FileOutcome::Rejected {
                code: "unsupported_type".into(),
                message: "the file is a PNG image".into(),
            },
        );
        let text = summary.to_text("http://127.0.0.1:8080");
        assert!(
            text.starts_with("3 files → http://127.0.0.1:8080: 1 new, 1 duplicate, 1 rejected\n"),
            "{text}"
        );
        assert!(
            text.contains("  rejected c.pdf: unsupported_type: the file is a PNG image\n"),
            "{text}"
        );
        assert_eq!(
            summary.to_json()["rejections"][0]["code"],
            "unsupported_type"
        );
    }
}
