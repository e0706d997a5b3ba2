//! The texts every side of `docket bench embed` embeds: whole English sentences from a fixed
//! list, put together to about 30 and about 250 tokens, each text starting at a different
//! sentence so no two are alike.

use docket::chunk::TokenCounter;

const TEXTS_PER_LENGTH: usize = 64;
const SHORT_TOKENS: usize = 30;
const LONG_TOKENS: usize = 250;

/// What the sides read from the scratch file.
#[derive(serde::Serialize, serde::Deserialize)]
pub struct Texts {
    pub short: Vec<String>,
    pub long: Vec<String>,
    pub batches: Vec<usize>,
}

impl Texts {
    /// The texts, sized with `counter` (special tokens counted as two).
    pub fn build(counter: &dyn TokenCounter, batches: &[usize]) -> Self {
        Self {
            short: build(counter, SHORT_TOKENS),
            long: build(counter, LONG_TOKENS),
            batches: batches.to_vec(),
        }
    }
}

fn build(counter: &dyn TokenCounter, tokens: usize) -> Vec<String> {
    (0..TEXTS_PER_LENGTH)
        .map(|i| {
            let mut text = String::new();
            let mut k = i;
            loop {
                let sentence = SENTENCES[k % SENTENCES.len()];
                let candidate = if text.is_empty() {
                    sentence.to_owned()
                } else {
                    format!("{text} {sentence}")
                };
                if counter.count(&candidate) + 2 > tokens && !text.is_empty() {
                    break;
                }
                text = candidate;
                k += 7;
            }
            text
        })
        .collect()
}

/// Varied English sentences; texts are built from them.
const SENTENCES: [&str; 24] = [
    "The invoice lists consulting hours, a travel allowance and a software licence.",
    "Payment is due within thirty days, and late payments accrue interest every month.",
    "Photosynthesis turns light into chemical energy stored in sugars.",
    "Chlorophyll absorbs mostly blue and red light while water is split to release oxygen.",
    "The committee postponed its decision on solar panels until the engineers report in spring.",
    "To reset the router, hold the button on the back for ten seconds until the lights flash.",
    "Medieval cathedrals took generations to build, and their styles changed along the way.",
    "Masons passed their knowledge from master to apprentice over many decades.",
    "The quarterly report shows revenue growing faster than costs in every region.",
    "A database index speeds up reads at the price of slower writes and more disk space.",
    "The recipe calls for two cups of flour, a pinch of salt and three eggs.",
    "Rain is expected over the weekend, with strong winds along the northern coast.",
    "The library extended its opening hours during the examination period.",
    "Each employee must complete the safety training before the end of the year.",
    "The museum's new wing displays ceramics from the early Bronze Age.",
    "Our support team answers questions by email within one working day.",
    "The contract may be terminated by either party with ninety days' written notice.",
    "Bees communicate the direction of flowers through a dance inside the hive.",
    "The train to the airport leaves every fifteen minutes from platform four.",
    "Version two of the API adds pagination and removes the deprecated search endpoint.",
    "The patient was advised to rest, drink fluids and return if the fever persists.",
    "Solar output peaks around noon, so batteries store the surplus for the evening.",
    "The novel follows three generations of a family running a small bakery.",
    "Warranty claims require the original receipt and the product's serial number.",
];
