//! The feature-hashing embedder: deterministic vectors with no model and no network.
//!
//! It exists for tests and for machines without a model. It is lexical, not semantic: texts that
//! share words and spellings land close together, synonyms do not. Each text becomes a bag of
//! features — its lower-cased words and the character 3-grams of each word (with `^`/`$` word
//! boundaries, so CJK text, which has no spaces, still yields many features) — and each feature
//! adds ±weight to one of `dims` buckets chosen by a 64-bit FNV-1a hash ("signed feature
//! hashing": the sign bit makes collisions cancel out on average instead of piling up).
//! The result is L2-normalised so cosine similarity is a dot product.
//!
//! FNV-1a is written out here rather than taken from `std`'s `DefaultHasher`, whose algorithm
//! may change between Rust releases: the vectors must stay identical for `hash:v1` forever.

/// Bucket count used when none is configured.
pub const DEFAULT_HASH_DIMS: usize = 384;

/// Weight of a whole-word feature; 3-grams weigh [`GRAM_WEIGHT`] so exact words dominate.
const WORD_WEIGHT: f32 = 1.0;
/// Weight of a character 3-gram feature.
const GRAM_WEIGHT: f32 = 0.5;

/// Deterministic signed feature hashing of words and character 3-grams into `dims` buckets.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HashEmbedder {
    dims: usize,
}

impl Default for HashEmbedder {
    fn default() -> Self {
        Self::new(DEFAULT_HASH_DIMS)
    }
}

impl HashEmbedder {
    /// An embedder producing `dims`-dimensional vectors (at least 1).
    pub fn new(dims: usize) -> Self {
        Self { dims: dims.max(1) }
    }

    /// The vector length.
    pub fn dims(&self) -> usize {
        self.dims
    }

    /// Embeds one text.
    ///
    /// A text with no word characters (empty, only spaces or punctuation) has no features; a zero
    /// vector would make cosine similarity undefined, so it maps to the first basis vector
    /// instead: every such text gets that same unit vector.
    pub fn embed_one(&self, text: &str) -> Vec<f32> {
        let mut vector = vec![0.0f32; self.dims];
        let lowered = text.to_lowercase();
        for word in lowered
            .split(|c: char| !c.is_alphanumeric())
            .filter(|w| !w.is_empty())
        {
            self.add_feature(&mut vector, b'w', word.as_bytes(), WORD_WEIGHT);
            let padded: Vec<char> = std::iter::once('^')
                .chain(word.chars())
                .chain(std::iter::once('$'))
                .collect();
            let mut gram = String::with_capacity(12);
            for window in padded.windows(3) {
                gram.clear();
                gram.extend(window);
                self.add_feature(&mut vector, b'g', gram.as_bytes(), GRAM_WEIGHT);
            }
        }
        let norm = vector.iter().map(|v| v * v).sum::<f32>().sqrt();
        if norm > 0.0 {
            for v in &mut vector {
                *v /= norm;
            }
        } else {
            vector[0] = 1.0;
        }
        vector
    }

    /// Embeds each text in order.
    pub fn embed_all(&self, texts: &[String]) -> Vec<Vec<f32>> {
        texts.iter().map(|t| self.embed_one(t)).collect()
    }

    fn add_feature(&self, vector: &mut [f32], kind: u8, bytes: &[u8], weight: f32) {
        // The kind byte keeps the word "abc" and the 3-gram "abc" apart.
        let hash = fnv1a(&[&[kind], bytes]);
        let bucket = (hash % self.dims as u64) as usize;
        let sign = if hash >> 63 == 0 { 1.0 } else { -1.0 };
        vector[bucket] += sign * weight;
    }
}

/// 64-bit FNV-1a over the concatenation of `parts`.
fn fnv1a(parts: &[&[u8]]) -> u64 {
    const OFFSET: u64 = 0xcbf2_9ce4_8422_2325;
    const PRIME: u64 = 0x0000_0100_0000_01b3;
    let mut hash = OFFSET;
    for &b in parts.iter().flat_map(|p| p.iter()) {
        hash ^= u64::from(b);
        hash = hash.wrapping_mul(PRIME);
    }
    hash
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cosine(a: &[f32], b: &[f32]) -> f32 {
        a.iter().zip(b).map(|(x, y)| x * y).sum()
    }

    fn norm(v: &[f32]) -> f32 {
        v.iter().map(|x| x * x).sum::<f32>().sqrt()
    }

    #[test]
    fn same_text_gives_the_same_vector_across_instances() {
        let a = HashEmbedder::new(384).embed_one("The quick brown fox");
        let b = HashEmbedder::new(384).embed_one("The quick brown fox");
        assert_eq!(a, b);
        assert_eq!(a.len(), 384);
    }

    #[test]
    fn vectors_are_unit_norm_including_empty_and_cjk_text() {
        let embedder = HashEmbedder::default();
        for text in [
            "hello world",
            "",
            "   ...  ",
            "東京の天気は晴れです",
            "Ünïcödé",
        ] {
            let v = embedder.embed_one(text);
            assert!(
                (norm(&v) - 1.0).abs() < 1e-5,
                "{text:?} has norm {}",
                norm(&v)
            );
        }
    }

    #[test]
    fn case_does_not_change_the_vector() {
        let embedder = HashEmbedder::default();
        assert_eq!(
            embedder.embed_one("Invoice TOTAL"),
            embedder.embed_one("invoice total")
        );
    }

    #[test]
    fn similar_texts_are_closer_than_unrelated_ones() {
        let embedder = HashEmbedder::default();
        let query = embedder.embed_one("payment terms of the invoice");
        let near = embedder.embed_one("the invoice payment terms are thirty days");
        let far = embedder.embed_one("mountain goats climb steep cliffs at dawn");
        assert!(cosine(&query, &near) > cosine(&query, &far) + 0.2);
    }

    #[test]
    fn similar_cjk_texts_are_closer_than_unrelated_ones() {
        let embedder = HashEmbedder::default();
        let query = embedder.embed_one("東京の天気");
        let near = embedder.embed_one("今日の東京の天気は晴れ");
        let far = embedder.embed_one("猫が魚を食べた");
        assert!(cosine(&query, &near) > cosine(&query, &far));
    }

    #[test]
    fn fnv1a_matches_the_published_test_vectors() {
        // hash:v1 vectors must never change; the hash is pinned to the FNV reference values.
        assert_eq!(fnv1a(&[b""]), 0xcbf2_9ce4_8422_2325);
        assert_eq!(fnv1a(&[b"a"]), 0xaf63_dc4c_8601_ec8c);
        assert_eq!(fnv1a(&[b"foo"]), 0xdcb2_7518_fed9_d577);
        assert_eq!(fnv1a(&[b"fo", b"o"]), fnv1a(&[b"foo"]));
    }
}
