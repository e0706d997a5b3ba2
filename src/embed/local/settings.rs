//! What a Hugging Face / sentence-transformers model directory says about how to embed with it,
//! besides the weights: the max sequence length, the pooling, and the prompts (prefixes) that
//! queries and passages need.
//!
//! Why a module of its own: these come from up to four optional files with defaults and
//! fallbacks, and getting one wrong changes every vector silently (a prompt left off, a length
//! cut short), so each rule is written down here once, with its reason.

use std::path::Path;

use sha2::{Digest, Sha256};

use super::bert::BertConfig;
use super::config_error;
use crate::embed::{EmbedError, Purpose};

/// The texts put in front of queries and of passages before tokenizing.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Prompts {
    pub query: String,
    pub passage: String,
}

impl Prompts {
    /// The E5 family's prefixes, as its model cards require: without them its vectors for
    /// questions and for documents do not meet.
    pub fn e5() -> Self {
        Self {
            query: "query: ".to_owned(),
            passage: "passage: ".to_owned(),
        }
    }

    /// The prompt for `purpose`.
    pub fn for_purpose(&self, purpose: Purpose) -> &str {
        match purpose {
            Purpose::Query => &self.query,
            Purpose::Passage => &self.passage,
        }
    }

    /// Whether no text is ever prefixed.
    pub fn is_empty(&self) -> bool {
        self.query.is_empty() && self.passage.is_empty()
    }

    /// A short stable tag for the model version: the first 8 hex digits of the SHA-256 of both
    /// prompts. The prompts themselves hold colons and spaces, which a version name should not.
    pub fn tag(&self) -> String {
        let mut hash = Sha256::new();
        for part in ["query", &self.query, "passage", &self.passage] {
            hash.update(part.as_bytes());
            hash.update([0]);
        }
        hex::encode(hash.finalize())[..8].to_owned()
    }
}

/// `sentence_bert_config.json`'s part that matters here.
#[derive(serde::Deserialize)]
struct SentenceBertConfig {
    max_seq_length: Option<usize>,
}

/// `config_sentence_transformers.json`'s part that matters here.
#[derive(serde::Deserialize)]
struct SentenceTransformersConfig {
    #[serde(default)]
    prompts: std::collections::HashMap<String, String>,
}

/// `1_Pooling/config.json`'s part that matters here.
#[derive(serde::Deserialize)]
struct PoolingConfig {
    #[serde(default)]
    pooling_mode_mean_tokens: bool,
    #[serde(default)]
    pooling_mode_cls_token: bool,
    #[serde(default)]
    pooling_mode_max_tokens: bool,
}

/// The model's max sequence length: sentence-transformers' `max_seq_length` when the directory
/// has one, else what the position table holds; never more than the latter.
pub fn max_sequence_length(dir: &Path, config: &BertConfig) -> Result<usize, EmbedError> {
    let configured = read_optional::<SentenceBertConfig>(dir, "sentence_bert_config.json")?
        .and_then(|c| c.max_seq_length);
    let limit = config.max_tokens().map_err(|m| config_error(dir, m))?;
    Ok(configured.unwrap_or(limit).clamp(2, limit.max(2)))
}

/// The prompts: `config_sentence_transformers.json`'s `query` and `passage` (or `document`)
/// prompts when it names any; else, for a directory named like an E5 model
/// (`multilingual-e5-small`, `e5-base-v2`, …), whose downloads often lack the prompts, the E5
/// prefixes; else none (all-MiniLM-L6-v2 and most models).
pub fn prompts(dir: &Path) -> Result<Prompts, EmbedError> {
    let named =
        read_optional::<SentenceTransformersConfig>(dir, "config_sentence_transformers.json")?
            .map(|c| c.prompts)
            .unwrap_or_default();
    let get = |keys: &[&str]| {
        keys.iter()
            .find_map(|k| named.get(*k))
            .cloned()
            .unwrap_or_default()
    };
    let prompts = Prompts {
        query: get(&["query"]),
        passage: get(&["passage", "document"]),
    };
    if !prompts.is_empty() {
        return Ok(prompts);
    }
    Ok(if is_e5_name(&directory_name(dir)) {
        Prompts::e5()
    } else {
        Prompts::default()
    })
}

/// Refuses a pooling other than the mean, which is the only one the encoder computes.
pub fn check_pooling(dir: &Path) -> Result<(), EmbedError> {
    let Some(pooling) = read_optional::<PoolingConfig>(dir, "1_Pooling/config.json")? else {
        return Ok(());
    };
    if pooling.pooling_mode_mean_tokens
        && !pooling.pooling_mode_cls_token
        && !pooling.pooling_mode_max_tokens
    {
        Ok(())
    } else {
        Err(config_error(
            dir,
            "1_Pooling/config.json asks for a pooling other than the mean of the tokens, \
             which is the only one docket computes"
                .to_owned(),
        ))
    }
}

/// The directory's own name (after resolving links), standing for the model.
pub fn directory_name(dir: &Path) -> String {
    dir.canonicalize()
        .unwrap_or_else(|_| dir.to_path_buf())
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "model".to_owned())
}

/// `e5` as a whole dash- or underscore-separated word of the name, case aside.
fn is_e5_name(name: &str) -> bool {
    name.to_ascii_lowercase()
        .split(['-', '_', '.'])
        .any(|word| word == "e5")
}

fn read_optional<T: serde::de::DeserializeOwned>(
    dir: &Path,
    file: &str,
) -> Result<Option<T>, EmbedError> {
    match std::fs::read(dir.join(file)) {
        Ok(bytes) => serde_json::from_slice(&bytes)
            .map(Some)
            .map_err(|err| config_error(dir, format!("{file}: {err}"))),
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(err) => Err(config_error(dir, format!("{file}: {err}"))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn e5_prefixes_are_found_by_word_not_by_substring() {
        assert!(is_e5_name("multilingual-e5-small"));
        assert!(is_e5_name("E5-base-v2"));
        assert!(is_e5_name("intfloat_e5_large"));
        assert!(!is_e5_name("all-MiniLM-L6-v2"));
        assert!(!is_e5_name("model-e55"));
    }

    #[test]
    fn the_prompt_tag_changes_with_either_prompt() {
        let e5 = Prompts::e5();
        let other = Prompts {
            query: "query: ".to_owned(),
            passage: "doc: ".to_owned(),
        };
        assert_eq!(e5.tag().len(), 8);
        assert_ne!(e5.tag(), other.tag());
        assert_eq!(e5.tag(), Prompts::e5().tag());
    }
}
