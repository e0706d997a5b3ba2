//! Counting tokens: the trait the chunker measures text with, and the tokenizer-free estimate
//! used when the embedding model brings no tokenizer of its own.

/// Counts tokens the way the embedding model will, or close to it.
pub trait TokenCounter {
    /// The number of tokens in `text`.
    fn count(&self, text: &str) -> usize;
}

/// A tokenizer-free estimate, used until a real tokenizer is plugged in through
/// [`TokenCounter`]: each CJK character (Han, kana, Hangul) and each punctuation mark is one
/// token, and each other run of letters and digits is one token per four characters, rounded
/// up (so "the" is 1, "token" 2, "extraction" 3), which is close to what BPE vocabularies give
/// for English prose. Whitespace is free.
#[derive(Debug, Clone, Copy, Default)]
pub struct ApproxTokens;

impl TokenCounter for ApproxTokens {
    fn count(&self, text: &str) -> usize {
        let mut tokens = 0;
        let mut word_chars = 0usize;
        for c in text.chars() {
            if is_word_char(c) {
                word_chars += 1;
                continue;
            }
            tokens += word_chars.div_ceil(4);
            word_chars = 0;
            if !c.is_whitespace() {
                tokens += 1;
            }
        }
        tokens + word_chars.div_ceil(4)
    }
}

/// Han, kana, Hangul and their compatibility forms: written without spaces between words (or,
/// for Hangul, with syllables that tokenizers treat much like single characters).
pub(super) fn is_cjk(c: char) -> bool {
    matches!(c as u32,
        0x1100..=0x11ff
        | 0x2e80..=0x2fdf
        | 0x3040..=0x30ff
        | 0x3100..=0x31ff
        | 0x3400..=0x4dbf
        | 0x4e00..=0x9fff
        | 0xa960..=0xa97f
        | 0xac00..=0xd7ff
        | 0xf900..=0xfaff
        | 0xff66..=0xff9f
        | 0x20000..=0x2fa1f)
}

/// Characters that continue a word for counting: anything but whitespace, CJK and punctuation.
fn is_word_char(c: char) -> bool {
    let punctuation = c.is_ascii_punctuation()
        || matches!(c as u32, 0x2000..=0x206f | 0x3000..=0x303f | 0xff01..=0xff65);
    !c.is_whitespace() && !is_cjk(c) && !punctuation
}

#[cfg(test)]
mod tests {
    use super::{ApproxTokens, TokenCounter};

    #[test]
    fn approx_tokens_counts_words_by_length_and_cjk_by_character() {
        assert_eq!(ApproxTokens.count("the token extraction"), 1 + 2 + 3);
        assert_eq!(ApproxTokens.count("Hello, world!"), 2 + 1 + 2 + 1);
        assert_eq!(ApproxTokens.count("한국어 문장"), 5);
        assert_eq!(ApproxTokens.count("日本語の文。"), 6);
        assert_eq!(ApproxTokens.count("  \n\t "), 0);
    }
}
