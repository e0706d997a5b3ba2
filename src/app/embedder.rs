//! The embedder and the PDF limits of a process, built from its (plain, validated) settings.
//!
//! Why here and not in `config`: building them does I/O. Choosing the provider looks at the
//! model directory, the local model is read from disk (about 90 MB for the default), and PDF
//! isolation needs this binary's path. [`EmbedderChoice::of`] looks at the disk once; the
//! process builds from that answer.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;

use crate::config::{EmbedderKind, PREVIOUS_DEFAULT_MODEL, PipelineSettings, model_cache_dir};
use crate::embed::{Embedder, HashEmbedder, Limiter, LocalConfig, LocalEmbedder, OpenAiEmbedder};
use crate::extract::{ExtractSettings, Languages};

/// Which provider a process embeds with, decided once from its settings and the disk.
#[derive(Debug, Clone)]
pub struct EmbedderChoice {
    /// The provider in effect: the configured one, else `local` when its model is present,
    /// else `hash`.
    pub kind: EmbedderKind,
    /// Why the provider is not a semantic one, when that is a fallback rather than a choice:
    /// for the log at start-up and for the page.
    pub warning: Option<String>,
    /// Whether the process runs docket's default local model (no `DOCKET_MODEL_DIR`).
    pub follows_default: bool,
}

impl EmbedderChoice {
    /// Decides from `settings`, looking once at whether the model directory holds a model.
    pub fn of(settings: &PipelineSettings) -> Self {
        let present = settings.model_files_present();
        let kind = match settings.embedder {
            Some(kind) => kind,
            None if present => EmbedderKind::Local,
            None => EmbedderKind::Hash,
        };
        let warning = (settings.embedder.is_none() && !present).then(|| {
            format!(
                "no embedding model in {} and DOCKET_EMBEDDER is unset: using the hashing embedder, \
                 which matches spellings, not meaning; run scripts/get-model.sh for semantic search",
                settings.model_dir().display()
            )
        });
        let follows_default = settings.model_dir.is_none() && kind == EmbedderKind::Local;
        EmbedderChoice {
            kind,
            warning,
            follows_default,
        }
    }

    /// The embedder, with the process's one rate limiter inside it. A local model is loaded
    /// here, and so is the previous default model when this process follows the default and
    /// that model is installed (to search the vectors it made).
    pub fn embedder(&self, settings: &PipelineSettings) -> anyhow::Result<Embedder> {
        match self.kind {
            EmbedderKind::Hash => Ok(Embedder::Hash(HashEmbedder::new(settings.hash_dims))),
            EmbedderKind::Local => {
                let own = LocalEmbedder::load(&settings.local())
                    .context("loading the local embedding model")?;
                Ok(Embedder::Local(match self.previous_default_dir() {
                    Some(dir) => with_previous(own, dir, settings),
                    None => own,
                }))
            }
            EmbedderKind::Openai => {
                let limiter = Arc::new(Limiter::new(settings.rate_limits()));
                OpenAiEmbedder::new(settings.openai(), limiter)
                    .map(Embedder::OpenAi)
                    .context("configuring the OpenAI-compatible embedder")
            }
        }
    }

    /// The previous default model's directory, when this process runs the default and that
    /// model is installed.
    fn previous_default_dir(&self) -> Option<PathBuf> {
        let dir = model_cache_dir(PREVIOUS_DEFAULT_MODEL?);
        (self.follows_default && dir.join("model.safetensors").is_file()).then_some(dir)
    }
}

/// `own` with the previous default model beside it; `own` alone (and a warning) when that
/// model does not load.
fn with_previous(own: LocalEmbedder, dir: PathBuf, settings: &PipelineSettings) -> LocalEmbedder {
    // The previous default made its vectors in f32, before int8 existed.
    let config = LocalConfig {
        model_dir: dir.clone(),
        precision: crate::embed::Precision::F32,
        ..settings.local()
    };
    match LocalEmbedder::load(&config) {
        Ok(previous) => own.with_previous(previous),
        Err(err) => {
            tracing::warn!(
                "the previous default model in {} does not load, so vectors it made cannot be \
                 searched here: {err}",
                dir.display()
            );
            own
        }
    }
}

/// Extraction settings for every format; the isolated extractor is this very binary.
pub fn extract_settings(settings: &PipelineSettings) -> anyhow::Result<ExtractSettings> {
    let exe = std::env::current_exe().context("finding the docket binary for PDF isolation")?;
    let mut limits = ExtractSettings::new(exe);
    limits.timeout = Duration::from_secs(settings.extract_timeout_secs.max(1));
    limits.memory_bytes = settings.extract_memory_mb.max(64) * 1024 * 1024;
    limits.ocr.enabled = settings.ocr;
    // Validated with the settings; parsed again here to build the value.
    limits.ocr.languages = Languages::parse(&settings.ocr_langs)
        .map_err(|err| anyhow::anyhow!("DOCKET_OCR_LANGS: {err}"))?;
    limits.ocr.max_pages = settings.ocr_max_pages;
    Ok(limits)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::tests::settings;

    #[test]
    fn embedder_defaults_to_local_only_when_the_model_files_are_there() {
        let dir = tempfile::tempdir().expect("temp dir");
        let path = dir.path().to_str().expect("utf-8 path").to_owned();
        let empty = EmbedderChoice::of(&settings(&["--model-dir", &path]));
        assert_eq!(empty.kind, EmbedderKind::Hash);
        let warning = empty.warning.expect("a fallback warns");
        assert!(warning.contains("get-model.sh"), "{warning}");
        assert!(
            !warning.contains("  "),
            "one sentence, not a source line break: {warning}"
        );

        for file in ["config.json", "tokenizer.json", "model.safetensors"] {
            std::fs::write(dir.path().join(file), b"{}").expect("write");
        }
        let present = EmbedderChoice::of(&settings(&["--model-dir", &path]));
        assert_eq!(present.kind, EmbedderKind::Local);
        assert!(present.warning.is_none());

        let chosen = EmbedderChoice::of(&settings(&["--model-dir", &path, "--embedder", "hash"]));
        assert_eq!(chosen.kind, EmbedderKind::Hash);
        assert!(chosen.warning.is_none());
    }
}
