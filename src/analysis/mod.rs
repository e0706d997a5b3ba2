//! Text analysis: the words of a chunk or of a query → the terms keyword search indexes and
//! matches. Pure and deterministic; the same function serves indexing, queries and highlighting,
//! so a term the index holds is exactly a term a query can name and a snippet can mark.
//!
//! Why our own analysis rather than PostgreSQL's `to_tsvector`: ranking needs BM25 (term
//! frequencies, document frequencies, lengths), highlighting needs each term's place in the
//! original text, and Chinese, Japanese and Korean need character bigrams, which no built-in
//! PostgreSQL parser produces. Doing all three from one Rust function keeps them in agreement.
//!
//! How a text becomes terms:
//! 1. **Words** are maximal runs of letters, digits and combining marks. A run is split where it
//!    passes between CJK characters (Hangul, Han, kana) and other letters, so "stable로" is the
//!    word "stable" and the Korean particle "로".
//! 2. **Other scripts' words** are lower-cased and NFKC-normalised (full-width Latin becomes
//!    ASCII), dropped when they are stop words of the text's language, and stemmed with that
//!    language's Snowball stemmer ("limiting" → "limit"). Text in a language without a stemmer
//!    keeps whole words and drops English stop words, the words most often mixed into it.
//!    Words longer than [`MAX_WORD_CHARS`] (hashes, base64) are not indexed.
//! 3. **CJK runs** become overlapping character bigrams ("수렴하나요" → 수렴 렴하 하나 나요), a
//!    lone character a unigram. No dictionary is needed, and a question meets its passage through
//!    the bigrams they share even when their word endings differ ("수렴하는데" shares 수렴, 렴하).
//!
//! The language of a text comes from [`detect`] (whatlang, restricted to the languages we can
//! stem plus the CJK ones, which makes its guesses on short texts better). A query's language
//! is uncertain, and documents use other languages than their readers' questions, so a query
//! word is looked up in several forms ([`query`]).

use std::collections::HashSet;
use std::sync::LazyLock;

use rust_stemmers::{Algorithm, Stemmer};
use unicode_normalization::UnicodeNormalization;
use unicode_normalization::char::is_combining_mark;
use whatlang::{Detector, Lang};

pub mod query;

/// Longest word indexed, in characters: longer runs are identifiers, hashes or base64, which
/// people do not type and which would bloat the index.
pub const MAX_WORD_CHARS: usize = 40;

/// Bump when [`analyze`] changes its output: chunks indexed by an older version are indexed
/// again in the background (`search::index`).
pub const ANALYZER_VERSION: i16 = 1;

/// How words of one text are analysed: by the rules of a language with a stemmer, or by the
/// language-neutral rules (whole words, English stop words).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Language {
    /// ISO 639-1 code, or `simple` for the language-neutral rules.
    code: &'static str,
    stemmer: Option<Algorithm>,
}

/// The languages with a stemmer, by whatlang's name and ours.
const STEMMED: [(Lang, &str, Algorithm); 18] = [
    (Lang::Eng, "en", Algorithm::English),
    (Lang::Fra, "fr", Algorithm::French),
    (Lang::Deu, "de", Algorithm::German),
    (Lang::Spa, "es", Algorithm::Spanish),
    (Lang::Ita, "it", Algorithm::Italian),
    (Lang::Por, "pt", Algorithm::Portuguese),
    (Lang::Nld, "nl", Algorithm::Dutch),
    (Lang::Swe, "sv", Algorithm::Swedish),
    (Lang::Dan, "da", Algorithm::Danish),
    (Lang::Nob, "no", Algorithm::Norwegian),
    (Lang::Fin, "fi", Algorithm::Finnish),
    (Lang::Hun, "hu", Algorithm::Hungarian),
    (Lang::Ron, "ro", Algorithm::Romanian),
    (Lang::Tur, "tr", Algorithm::Turkish),
    (Lang::Rus, "ru", Algorithm::Russian),
    (Lang::Ell, "el", Algorithm::Greek),
    (Lang::Ara, "ar", Algorithm::Arabic),
    (Lang::Tam, "ta", Algorithm::Tamil),
];

/// Languages recognised without a stemmer: their text is analysed by the neutral rules, but
/// knowing them keeps whatlang from calling Korean or Ukrainian something we would stem.
const UNSTEMMED: [(Lang, &str); 4] = [
    (Lang::Kor, "ko"),
    (Lang::Jpn, "ja"),
    (Lang::Cmn, "zh"),
    (Lang::Ukr, "uk"),
];

static DETECTOR: LazyLock<Detector> = LazyLock::new(|| {
    let allowed = STEMMED
        .iter()
        .map(|(lang, _, _)| *lang)
        .chain(UNSTEMMED.iter().map(|(lang, _)| *lang))
        .collect();
    Detector::with_allowlist(allowed)
});

impl Language {
    /// English, the language most often mixed into others, whose forms every query also tries.
    pub const ENGLISH: Language = Language {
        code: "en",
        stemmer: Some(Algorithm::English),
    };

    /// Whole words, English stop words: for languages without a stemmer and unknown text.
    pub const SIMPLE: Language = Language {
        code: "simple",
        stemmer: None,
    };

    /// The language stored for a chunk (`chunks.language`); unknown codes get the neutral rules.
    pub fn from_code(code: &str) -> Language {
        STEMMED
            .iter()
            .find(|(_, ours, _)| *ours == code)
            .map(|(_, ours, algorithm)| Language {
                code: ours,
                stemmer: Some(*algorithm),
            })
            .unwrap_or(Language::SIMPLE)
    }

    /// What `chunks.language` stores.
    pub fn code(self) -> &'static str {
        self.code
    }

    fn is_stop_word(self, word: &str) -> bool {
        stop_words(self.code).contains(word)
    }

    fn stem(self, word: String) -> String {
        match self.stemmer {
            Some(algorithm) => Stemmer::create(algorithm).stem(&word).into_owned(),
            None => word,
        }
    }
}

/// The stop words of a language (English ones for the neutral rules), as a set built once.
fn stop_words(code: &str) -> &'static HashSet<&'static str> {
    static SETS: LazyLock<Vec<(&'static str, HashSet<&'static str>)>> = LazyLock::new(|| {
        STEMMED
            .iter()
            .map(|(_, code, _)| *code)
            .chain(["simple"])
            .map(|code| {
                let list = if code == "simple" { "en" } else { code };
                let words = stop_words::lookup(list).unwrap_or(&[]);
                (code, words.iter().copied().collect())
            })
            .collect()
    });
    static EMPTY: LazyLock<HashSet<&'static str>> = LazyLock::new(HashSet::new);
    SETS.iter()
        .find(|(c, _)| *c == code)
        .map_or(&*EMPTY, |(_, set)| set)
}

/// The language of `text`: one we stem, or [`Language::SIMPLE`] for Korean, Japanese,
/// Chinese and whatever else whatlang cannot place among the languages we know.
pub fn detect(text: &str) -> Language {
    DETECTOR
        .detect_lang(text)
        .map_or(Language::SIMPLE, stemmed_or_simple)
}

/// Like [`detect`], but `None` unless whatlang is sure: a few words of a query are often
/// mistaken for another language, whose stems would then only add noise.
pub fn detect_reliably(text: &str) -> Option<Language> {
    let info = DETECTOR.detect(text)?;
    info.is_reliable().then(|| stemmed_or_simple(info.lang()))
}

fn stemmed_or_simple(lang: Lang) -> Language {
    STEMMED
        .iter()
        .find(|(l, _, _)| *l == lang)
        .map_or(Language::SIMPLE, |(_, code, algorithm)| Language {
            code,
            stemmer: Some(*algorithm),
        })
}

/// The writing system a text is mostly in, as far as keyword matching goes: two texts in
/// different ones share no index terms (Japanese and Chinese share Han characters, so they are
/// one here).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Script {
    Latin,
    Cyrillic,
    Greek,
    Hangul,
    /// Han characters and kana: Chinese and Japanese.
    Han,
    Other,
}

/// The script most of `text`'s letters are in; `None` for text without letters.
pub fn script(text: &str) -> Option<Script> {
    use whatlang::Script as W;
    Some(match whatlang::detect_script(text)? {
        W::Latin => Script::Latin,
        W::Cyrillic => Script::Cyrillic,
        W::Greek => Script::Greek,
        W::Hangul => Script::Hangul,
        W::Mandarin | W::Hiragana | W::Katakana => Script::Han,
        _ => Script::Other,
    })
}

/// One indexed term and where it came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Term {
    /// What the index stores: a stem, a whole word, or a CJK bigram.
    pub text: String,
    /// `[start, end)` of its source in the analysed text, in characters.
    pub start: usize,
    pub end: usize,
    /// Which word of the text it came from, counting stop words and each CJK bigram as one:
    /// the same text analysed under two languages gives its terms the same numbers.
    pub word: usize,
}

/// Whether `c` is written without spaces between words (or, for Hangul, is best matched by
/// parts of words): Hangul, Han and kana.
pub fn is_cjk(c: char) -> bool {
    matches!(c as u32,
        0x1100..=0x11FF     // Hangul Jamo
        | 0x3005..=0x3007   // 々 〆 〇
        | 0x3040..=0x30FF   // Hiragana, Katakana
        | 0x3130..=0x318F   // Hangul compatibility Jamo
        | 0x31F0..=0x31FF   // Katakana phonetic extensions
        | 0x3400..=0x4DBF   // CJK extension A
        | 0x4E00..=0x9FFF   // CJK unified ideographs
        | 0xA960..=0xA97F   // Hangul Jamo extended A
        | 0xAC00..=0xD7FF   // Hangul syllables, Jamo extended B
        | 0xF900..=0xFAFF   // CJK compatibility ideographs
        | 0xFF66..=0xFF9F   // half-width Katakana
        | 0x20000..=0x3134F // CJK extensions B–G
    )
}

pub(crate) fn is_word_char(c: char) -> bool {
    c.is_alphanumeric() || is_combining_mark(c) || is_cjk(c)
}

/// The terms of `text` analysed under `language`, in text order.
pub fn analyze(text: &str, language: Language) -> Vec<Term> {
    let chars: Vec<char> = text.chars().collect();
    let mut terms = Vec::new();
    let mut word = 0;
    let mut at = 0;
    while at < chars.len() {
        if !is_word_char(chars[at]) {
            at += 1;
            continue;
        }
        let cjk = is_cjk(chars[at]);
        let start = at;
        while at < chars.len() && is_word_char(chars[at]) && is_cjk(chars[at]) == cjk {
            at += 1;
        }
        let run = &chars[start..at];
        if cjk {
            cjk_terms(run, start, &mut word, &mut terms);
        } else {
            if let Some(text) = word_term(run, language) {
                terms.push(Term {
                    text,
                    start,
                    end: at,
                    word,
                });
            }
            word += 1;
        }
    }
    terms
}

/// A non-CJK word's term, or `None` for a stop word or an over-long run.
fn word_term(run: &[char], language: Language) -> Option<String> {
    if run.len() > MAX_WORD_CHARS {
        return None;
    }
    let lowered: String = run.iter().flat_map(|c| c.to_lowercase()).collect();
    // NFKC may turn full-width or compatibility forms into capitals again (e.g. Ⅻ → XII).
    let normal: String = lowered.nfkc().flat_map(char::to_lowercase).collect();
    if language.is_stop_word(&normal) {
        return None;
    }
    Some(language.stem(normal))
}

/// Overlapping bigrams of a CJK run (a unigram for a lone character), each its own word.
fn cjk_terms(run: &[char], start: usize, word: &mut usize, terms: &mut Vec<Term>) {
    // Per character, so that offsets keep pointing into the original text.
    let normal: Vec<String> = run
        .iter()
        .map(|c| std::iter::once(*c).nfkc().collect())
        .collect();
    if normal.len() == 1 {
        terms.push(Term {
            text: normal[0].clone(),
            start,
            end: start + 1,
            word: *word,
        });
        *word += 1;
        return;
    }
    for (i, pair) in normal.windows(2).enumerate() {
        terms.push(Term {
            text: format!("{}{}", pair[0], pair[1]),
            start: start + i,
            end: start + i + 2,
            word: *word,
        });
        *word += 1;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn texts(terms: &[Term]) -> Vec<&str> {
        terms.iter().map(|t| t.text.as_str()).collect()
    }

    #[test]
    fn english_words_are_stemmed_and_stop_words_dropped() {
        let terms = analyze("The workers are limiting their requests", Language::ENGLISH);
        assert_eq!(texts(&terms), vec!["worker", "limit", "request"]);
        // Offsets point at the original words.
        assert_eq!((terms[1].start, terms[1].end), (16, 24));
        // Stop words still count as words, so positions agree across languages.
        assert_eq!(terms[0].word, 1);
    }

    #[test]
    fn hangul_runs_become_overlapping_bigrams_that_survive_other_endings() {
        let question = analyze("수렴하나요", Language::SIMPLE);
        assert_eq!(texts(&question), vec!["수렴", "렴하", "하나", "나요"]);
        let passage = analyze("수렴하는데", Language::SIMPLE);
        let shared: Vec<&str> = texts(&question)
            .into_iter()
            .filter(|t| texts(&passage).contains(t))
            .collect();
        assert_eq!(shared, vec!["수렴", "렴하"]);
    }

    #[test]
    fn a_run_is_split_between_latin_and_cjk_characters() {
        let terms = analyze("stable로 되돌아갈", Language::SIMPLE);
        assert_eq!(texts(&terms), vec!["stable", "로", "되돌", "돌아", "아갈"]);
    }

    #[test]
    fn japanese_without_spaces_is_indexed_by_bigrams_with_character_offsets() {
        let terms = analyze("東京タワー", Language::SIMPLE);
        assert_eq!(texts(&terms), vec!["東京", "京タ", "タワ", "ワー"]);
        assert_eq!((terms[3].start, terms[3].end), (3, 5));
    }

    #[test]
    fn full_width_latin_and_half_width_kana_are_normalised() {
        let terms = analyze("ＡＰＩ ｶﾀ", Language::SIMPLE);
        assert_eq!(texts(&terms), vec!["api", "カタ"]);
    }

    #[test]
    fn languages_are_detected_among_those_we_know() {
        assert_eq!(
            detect("The quick brown fox jumps over the lazy dog near the river bank").code(),
            "en"
        );
        assert_eq!(
            detect("Le renard brun saute par-dessus le chien paresseux près de la rivière").code(),
            "fr"
        );
        assert_eq!(detect("데비안 배포판을 선택하는 방법").code(), "simple");
        assert_eq!(Language::from_code("de").code(), "de");
        assert_eq!(Language::from_code("ko"), Language::SIMPLE);
    }

    #[test]
    fn over_long_runs_are_not_indexed() {
        let hash = "a".repeat(MAX_WORD_CHARS + 1);
        assert!(analyze(&hash, Language::ENGLISH).is_empty());
    }
}
