//! Relevance: the estimated probability that a hit answers the question, from the signals of
//! both lists ([`Signals`]), so that a person can tell an answer from noise and a search can
//! say "no good match".
//!
//! Why a fitted probability and not the lists' own scores: a cosine of 0.85 is a strong match
//! for one model and noise for another, a BM25 score means nothing across queries, and a fused
//! min-max score is 1 for the best hit of every query, answerable or not. Each signal here is
//! on a scale that means the same for every query (the cosine itself; BM25 as a share of the
//! most the query's words could score), and a logistic model per mode maps them to the
//! probability that the chunk holds the passage that answers the question. The models were
//! fitted on the development set (`docket bench search-quality --fit`, which writes the
//! coefficients below; `scripts/fit-relevance.py` does the fitting and reports how well the
//! probabilities match the observed rates, BENCHMARKS.md): 0.5 means even odds, in every mode.
//!
//! Each embedding model has its own fit, since cosines of two models are not on one scale; a
//! model without one (a remote provider's) gets the keyword calibration alone in text mode and
//! a conservative one from the cosine's rank elsewhere, and says so (`calibrated: false` in
//! the search's answer).

use super::{Mode, Signals};

/// A logistic model over a candidate's signals: `σ(bias + Σ weight · signal)`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Logit {
    pub bias: f64,
    pub cosine: f64,
    pub keyword: f64,
    /// Added when the chunk is in another script than the query.
    pub other_language: f64,
    /// The keyword share's weight when the chunk is in another script than the query (added
    /// to `keyword`): keywords rarely match across scripts, so their absence says less.
    pub keyword_other: f64,
    /// Weights of the shortfalls from the search's best cosine and keyword share.
    pub cosine_gap: f64,
    pub keyword_gap: f64,
}

impl Logit {
    /// The probability for `signals`; a missing signal counts as 0.
    pub fn probability(&self, signals: &Signals) -> f64 {
        let other = if signals.other_language { 1.0 } else { 0.0 };
        let keyword = signals.keyword.unwrap_or(0.0);
        let z = self.bias
            + self.cosine * signals.cosine.unwrap_or(0.0)
            + (self.keyword + self.keyword_other * other) * keyword
            + self.other_language * other
            + self.cosine_gap * signals.cosine_gap
            + self.keyword_gap * signals.keyword_gap;
        1.0 / (1.0 + (-z).exp())
    }
}

/// The three modes' models for one embedding model.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Calibration {
    pub vector: Logit,
    pub text: Logit,
    pub hybrid: Logit,
    /// Whether these were fitted for the model (false: the fallback for models without a fit).
    pub fitted: bool,
}

impl Calibration {
    /// The calibration of the model `model_id` (as [`crate::embed::Embedder::model_id`] names
    /// it), or the fallback.
    pub fn for_model(model_id: &str) -> Calibration {
        FITTED
            .iter()
            .find(|(id, _)| model_id.contains(id))
            .map_or(FALLBACK, |(_, calibration)| *calibration)
    }

    /// The relevance of a candidate of `mode` with `signals`.
    pub fn relevance(&self, mode: Mode, signals: &Signals) -> f64 {
        let model = match mode {
            Mode::Vector => &self.vector,
            Mode::Text => &self.text,
            Mode::Hybrid => &self.hybrid,
        };
        model.probability(signals)
    }
}

/// Text mode needs no vectors, so its model is the same for every embedding model. Fitted on
/// the development set's text-mode hits (791 hits, 69 answers; expected calibration error
/// 0.022, BENCHMARKS.md).
const TEXT: Logit = Logit {
    bias: -2.896,
    cosine: 0.0,
    keyword: 7.701,
    other_language: 0.0,
    keyword_other: 0.0,
    cosine_gap: 0.0,
    keyword_gap: -20.902,
};

/// For models without a fit: keywords as fitted, vectors given little weight, so relevance
/// leans on what is known to be calibrated.
const FALLBACK: Calibration = Calibration {
    vector: Logit {
        bias: -3.0,
        cosine: 3.0,
        keyword: 0.0,
        other_language: 0.0,
        keyword_other: 0.0,
        cosine_gap: -10.0,
        keyword_gap: 0.0,
    },
    text: TEXT,
    hybrid: Logit {
        cosine: 1.5,
        cosine_gap: -5.0,
        ..TEXT
    },
    fitted: false,
};

/// multilingual-e5-small (the default model) on centred cosines (`search::centring`, share
/// 0.3), fitted on the development set (`docket bench search-quality --fit`, 2026-12-05):
/// vector 820 hits / 80 answers, hybrid 1,136 hits / 89 answers (the union of the hybrid,
/// min-max and RRF top tens); BENCHMARKS.md, issue 23, gives how well they match.
const E5_SMALL: Calibration = Calibration {
    vector: Logit {
        bias: -11.303,
        cosine: 12.616,
        keyword: 0.0,
        other_language: 0.0,
        keyword_other: 0.0,
        cosine_gap: -38.052,
        keyword_gap: 0.0,
    },
    text: TEXT,
    hybrid: Logit {
        bias: -6.335,
        cosine: 5.601,
        keyword: 5.991,
        other_language: 0.586,
        keyword_other: -0.945,
        cosine_gap: -30.211,
        keyword_gap: -8.309,
    },
    fitted: true,
};

/// The fitted calibrations, by a part of the model id they apply to (int8 vectors are within
/// a cosine of 0.99 of f32's, so `…-int8` shares its model's).
const FITTED: &[(&str, Calibration)] = &[("multilingual-e5-small", E5_SMALL)];

#[cfg(test)]
mod tests {
    use super::*;

    fn signals(cosine: f64, keyword: f64) -> Signals {
        Signals {
            cosine: Some(cosine),
            keyword: Some(keyword),
            ..Signals::default()
        }
    }

    #[test]
    fn relevance_is_a_probability_that_grows_with_each_signal() {
        for calibration in [FALLBACK].into_iter().chain(FITTED.iter().map(|(_, c)| *c)) {
            for mode in [Mode::Vector, Mode::Text, Mode::Hybrid] {
                let low = calibration.relevance(mode, &signals(0.2, 0.0));
                let high = calibration.relevance(mode, &signals(0.95, 0.9));
                assert!((0.0..=1.0).contains(&low) && (0.0..=1.0).contains(&high));
                assert!(high > low, "{mode:?}: {low} then {high}");
            }
        }
    }
}
