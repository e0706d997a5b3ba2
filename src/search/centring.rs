//! Centring by script: each vector moved part of the way away from the mean vector of the
//! writing system its text is in, so that a question in one language can find the passage
//! that answers it in another.
//!
//! Why: a multilingual encoder puts every text of one language near a common point (the
//! language's mean), so a Korean question is closer to any Korean chunk than to the English
//! passage that answers it. Measured on the development set with multilingual-e5-small, vector
//! mode alone put the answer of a cross-lingual question in the top 5 a quarter of the time
//! (BENCHMARKS.md, issue 23). Subtracting the per-language mean from query and chunk vectors is
//! the known remedy for this bias; subtracting only a share of it ([`SHARE`]) keeps most of
//! what the mean also carries about the topic, so same-language ranking barely moves.
//!
//! Script, not language, because it is what can be told from a few hundred characters as
//! reliably for a chunk as for a ten-word question, and it is the axis the bias runs along for
//! the languages docket serves (Korean in Hangul, Chinese and Japanese in Han and kana, the
//! European languages in Latin). A text in several scripts (a Korean LaTeX manual is half
//! commands) is moved away from each script's mean in proportion to its letters in it
//! ([`mixture`]).
//!
//! The means are fitted per embedding model (`docket bench search-quality --fit-centring`, over
//! the development corpus' chunks that are essentially in one script, at least 50 of a script)
//! and committed in [`fitted`]; a model without means is searched uncentred. For
//! multilingual-e5-small there are Latin and Hangul means; the corpus has too few Chinese and
//! Japanese chunks for a Han mean, so text in Han and kana is not centred yet. The HNSW index
//! holds the stored, uncentred vectors: the centred query asks it for more neighbours than
//! needed and they are rescored by the centred cosine ([`super::vector`]).

use crate::analysis::Script;

mod fitted;

/// How much of its script's mean is taken off each vector. On the development set (hybrid,
/// BENCHMARKS.md, issue 23) 0.3 lifted cross-lingual passage@5 from 0.40 to 0.60 for 0.016 of
/// same-language passage@5; 0.5 and 0.7 gained no more across languages and lost more within
/// one (vector mode alone: same-language passage@5 0.065 lower at 0.5 than at 0.3).
pub const SHARE: f32 = 0.3;

/// One model's mean vector per script.
type Means = &'static [(Script, &'static [f32])];

/// One model's per-script means, and the share of them taken off.
#[derive(Debug, Clone, Copy)]
pub struct Centring {
    means: Means,
    share: f32,
}

impl Centring {
    /// The centring of the model `model_id` (as [`crate::embed::Embedder::model_id`] names
    /// it) by `share`, if means were fitted for it and the share is above 0.
    pub fn for_model(model_id: &str, share: f32) -> Option<Centring> {
        if share <= 0.0 {
            return None;
        }
        fitted::FITTED
            .iter()
            .find(|(key, _)| model_id.contains(key))
            .map(|(_, means)| Centring { means, share })
    }

    /// `vector` with the share of its text's script mean taken off: for a text in several
    /// scripts, of each script's mean in proportion to the text's letters in it
    /// ([`mixture`]). Unchanged where no script of the text has a mean, or when the lengths
    /// differ (a vector of another model).
    pub fn centre(&self, vector: &[f32], text: &str) -> Vec<f32> {
        let mut centred = vector.to_vec();
        for (script, weight) in mixture(text) {
            let Some((_, mean)) = self.means.iter().find(|(s, _)| *s == script) else {
                continue;
            };
            if mean.len() != vector.len() {
                return vector.to_vec();
            }
            for (v, m) in centred.iter_mut().zip(mean.iter()) {
                *v -= self.share * weight * m;
            }
        }
        centred
    }

    /// The cosine of the centred query `query` to a chunk's stored `vector`, centred by the
    /// script of `start` (the beginning of the chunk's text).
    pub fn similarity(&self, query: &[f32], vector: &[f32], start: &str) -> f64 {
        cosine(query, &self.centre(vector, start))
    }
}

/// How much a letter of each script weighs in [`mixture`]: a Hangul syllable or a Han
/// character carries about as much of a word as two or three Latin letters, so counting them
/// one for one would call a Korean chunk full of LaTeX commands Latin.
fn weight(script: Script) -> f32 {
    match script {
        Script::Hangul | Script::Han => 2.5,
        _ => 1.0,
    }
}

/// The script of one letter, as far as centring goes; `None` for what is not a letter.
fn script_of(c: char) -> Option<Script> {
    Some(match c {
        '\u{AC00}'..='\u{D7A3}' | '\u{1100}'..='\u{11FF}' | '\u{3130}'..='\u{318F}' => {
            Script::Hangul
        }
        '\u{3040}'..='\u{30FF}' | '\u{3400}'..='\u{4DBF}' | '\u{4E00}'..='\u{9FFF}' => Script::Han,
        '\u{0370}'..='\u{03FF}' => Script::Greek,
        '\u{0400}'..='\u{04FF}' => Script::Cyrillic,
        c if c.is_alphabetic() && c < '\u{0250}' => Script::Latin,
        c if c.is_alphabetic() => Script::Other,
        _ => return None,
    })
}

/// The share of each script in `text`'s letters, weighted by [`weight`], largest first; empty
/// for a text without letters.
pub fn mixture(text: &str) -> Vec<(Script, f32)> {
    let mut totals: Vec<(Script, f32)> = Vec::new();
    for script in text.chars().filter_map(script_of) {
        match totals.iter_mut().find(|(s, _)| *s == script) {
            Some((_, total)) => *total += weight(script),
            None => totals.push((script, weight(script))),
        }
    }
    let sum: f32 = totals.iter().map(|(_, t)| t).sum();
    for (_, total) in &mut totals {
        *total /= sum;
    }
    totals.sort_by(|a, b| b.1.total_cmp(&a.1));
    totals
}

/// The cosine similarity of two vectors (0 when either is all zeros).
pub fn cosine(a: &[f32], b: &[f32]) -> f64 {
    let (mut dot, mut aa, mut bb) = (0.0f64, 0.0f64, 0.0f64);
    for (x, y) in a.iter().zip(b) {
        let (x, y) = (f64::from(*x), f64::from(*y));
        dot += x * y;
        aa += x * x;
        bb += y * y;
    }
    if aa == 0.0 || bb == 0.0 {
        0.0
    } else {
        dot / (aa.sqrt() * bb.sqrt())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const LATIN: &[f32] = &[1.0, 0.0, 0.0];
    const HANGUL: &[f32] = &[0.0, 1.0, 0.0];
    const MEANS: &[(Script, &[f32])] = &[(Script::Latin, LATIN), (Script::Hangul, HANGUL)];

    #[test]
    fn centring_takes_a_share_of_the_scripts_mean_off() {
        let centring = Centring {
            means: MEANS,
            share: 0.3,
        };
        let v = [0.5, 0.5, 0.5];
        let near = |a: Vec<f32>, b: [f32; 3]| a.iter().zip(b).all(|(x, y)| (x - y).abs() < 1e-6);
        assert!(near(
            centring.centre(&v, "an English sentence"),
            [0.2, 0.5, 0.5]
        ));
        assert!(near(
            centring.centre(&v, "한국어 문장입니다"),
            [0.5, 0.2, 0.5]
        ));
        // Half the weighted letters in each script: half of each mean's share.
        assert!(near(centring.centre(&v, "가나 abcde"), [0.35, 0.35, 0.5]));
        // No mean for Cyrillic, none for a text without letters, none for another length.
        assert_eq!(centring.centre(&v, "русский текст"), v.to_vec());
        assert_eq!(centring.centre(&v, "12345"), v.to_vec());
        assert_eq!(centring.centre(&[1.0, 2.0], "English"), vec![1.0, 2.0]);
    }

    #[test]
    fn a_hangul_syllable_weighs_more_than_a_latin_letter() {
        // 13 syllables (32.5) against 17 letters of LaTeX commands.
        let mixed = mixture("\\section{ko} \\begin{doc} 한국어로 쓴 문서의 본문입니다");
        assert_eq!(
            mixed.first().map(|(s, _)| *s),
            Some(Script::Hangul),
            "{mixed:?}"
        );
        let total: f32 = mixed.iter().map(|(_, w)| w).sum();
        assert!((total - 1.0).abs() < 1e-6);
        assert!(mixture("1 + 2 = 3").is_empty());
    }

    #[test]
    fn centring_brings_two_languages_of_one_meaning_closer() {
        let centring = Centring {
            means: MEANS,
            share: 0.3,
        };
        // One meaning (the third axis) in two languages, and another English text.
        let english = [0.7, 0.1, 0.7];
        let korean = [0.1, 0.7, 0.7];
        let other_english = [0.95, 0.0, 0.3];
        assert!(cosine(&english, &other_english) > cosine(&english, &korean));
        let e = centring.centre(&english, "English");
        let k = centring.centre(&korean, "한국어");
        let o = centring.centre(&other_english, "English too");
        assert!(cosine(&e, &k) > cosine(&english, &korean));
        // Centred, the same meaning in the other language ranks above the other English text.
        assert!(cosine(&e, &k) > cosine(&e, &o));
    }

    #[test]
    fn cosine_of_zero_vectors_is_zero() {
        assert_eq!(cosine(&[0.0, 0.0], &[1.0, 0.0]), 0.0);
        assert!((cosine(&[1.0, 1.0], &[2.0, 2.0]) - 1.0).abs() < 1e-12);
    }
}
