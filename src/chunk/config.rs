//! How big chunks are: the settings that are part of every model version's name.

/// How big chunks are and how much consecutive chunks share, in tokens.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ChunkConfig {
    /// The most tokens a chunk should hold (as counted by the [`TokenCounter`](super::TokenCounter)).
    pub target_tokens: usize,
    /// How many tokens from the end of a chunk are repeated at the start of the next; at most
    /// half of `target_tokens` is used.
    pub overlap_tokens: usize,
}

/// The most bytes a chunk may hold per token of its target: far above what prose takes (about
/// 5 bytes a token in English, 9 in Cyrillic, 3 to 12 in CJK and Thai scripts), so it only binds
/// on text a counter finds cheap.
pub const MAX_BYTES_PER_TOKEN: usize = 16;

impl ChunkConfig {
    /// The most bytes of text one chunk holds.
    pub fn max_bytes(&self) -> usize {
        self.target_tokens.max(1) * MAX_BYTES_PER_TOKEN
    }
}

impl Default for ChunkConfig {
    fn default() -> Self {
        ChunkConfig {
            target_tokens: 200,
            overlap_tokens: 30,
        }
    }
}
