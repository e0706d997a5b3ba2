use sha2::{Digest, Sha256};

use super::pieces::sentences;
use super::*;

/// One token per whitespace-separated word: makes expected sizes easy to read.
struct Words;
impl TokenCounter for Words {
    fn count(&self, text: &str) -> usize {
        text.split_whitespace().count()
    }
}

fn page(number: u32, text: &str) -> Page {
    Page {
        number,
        text: text.to_owned(),
    }
}

fn words(prefix: &str, n: usize) -> String {
    (0..n)
        .map(|i| format!("{prefix}{i}"))
        .collect::<Vec<_>>()
        .join(" ")
}

fn cfg(target_tokens: usize, overlap_tokens: usize) -> ChunkConfig {
    ChunkConfig {
        target_tokens,
        overlap_tokens,
    }
}

#[test]
fn paragraphs_that_fit_stay_whole_and_are_never_split() {
    let a = format!("{}.", words("a", 6));
    let b = format!("{}.", words("b", 6));
    let c = format!("{}.", words("c", 6));
    let text = format!("{a}\n\n{b}\n\n\n{c}");
    let chunks = chunk_pages(&[page(1, &text)], &cfg(14, 0), &Words);
    let texts: Vec<&str> = chunks.iter().map(|c| c.text.as_str()).collect();
    assert_eq!(texts, vec![format!("{a}\n\n{b}"), c.clone()]);
}

#[test]
fn long_paragraphs_break_at_sentence_ends_including_cjk_enders() {
    let text = "One two three. Four five six! Seven eight nine? Ten eleven twelve.";
    let chunks = chunk_pages(&[page(1, text)], &cfg(7, 0), &Words);
    let texts: Vec<&str> = chunks.iter().map(|c| c.text.as_str()).collect();
    assert_eq!(
        texts,
        vec![
            "One two three. Four five six!",
            "Seven eight nine? Ten eleven twelve."
        ]
    );

    let cjk = "今日は晴れです。明日は雨でしょう！散歩に行きますか？";
    let chunks = chunk_pages(&[page(1, cjk)], &cfg(12, 0), &ApproxTokens);
    let texts: Vec<&str> = chunks.iter().map(|c| c.text.as_str()).collect();
    assert_eq!(
        texts,
        vec![
            "今日は晴れです。",
            "明日は雨でしょう！",
            "散歩に行きますか？"
        ]
    );
}

#[test]
fn decimals_and_inner_dots_do_not_end_sentences() {
    assert_eq!(
        sentences("Pi is 3.14 (roughly). See e.g.x. Next."),
        vec!["Pi is 3.14 (roughly). ", "See e.g.x. ", "Next."]
    );
}

#[test]
fn an_overlong_sentence_is_hard_split_between_words() {
    let text = words("w", 25);
    let chunks = chunk_pages(&[page(1, &text)], &cfg(10, 0), &Words);
    assert_eq!(chunks.len(), 3);
    assert!(chunks.iter().all(|c| c.token_count <= 10));
    let rejoined: Vec<&str> = chunks.iter().map(|c| c.text.as_str()).collect();
    assert_eq!(rejoined.join(" "), text);
}

#[test]
fn a_giant_word_is_cut_within_budget() {
    let blob = "x".repeat(1000);
    let chunks = chunk_pages(&[page(1, &blob)], &cfg(20, 0), &ApproxTokens);
    assert!(chunks.iter().all(|c| c.token_count <= 20));
    let rejoined: String = chunks.iter().map(|c| c.text.as_str()).collect();
    assert_eq!(rejoined, blob);
}

#[test]
fn each_chunk_starts_with_the_tail_of_the_previous_one() {
    let text = words("w", 40);
    let chunks = chunk_pages(&[page(1, &text)], &cfg(10, 3), &Words);
    assert!(chunks.len() > 1);
    for pair in chunks.windows(2) {
        let previous: Vec<&str> = pair[0].text.split_whitespace().collect();
        let next: Vec<&str> = pair[1].text.split_whitespace().collect();
        assert_eq!(next[..3], previous[previous.len() - 3..]);
    }
    for chunk in &chunks {
        assert!(chunk.token_count <= 10, "{}", chunk.text);
    }
    let last = chunks.last().unwrap();
    assert!(last.text.ends_with("w39"));
}

#[test]
fn a_chunk_never_spans_a_page_break() {
    let pages = [
        page(1, &format!("{}.", words("p", 8))),
        page(2, &format!("{}.", words("q", 8))),
        page(3, "   "),
        page(4, &format!("{}.", words("r", 8))),
    ];
    let chunks = chunk_pages(&pages, &cfg(10, 2), &Words);
    let summary: Vec<(i32, &str)> = chunks
        .iter()
        .map(|c| (c.page, c.text.split_whitespace().next().unwrap()))
        .collect();
    // Each page starts its own chunk and nothing of page 1 is carried onto page 2.
    assert_eq!(summary, vec![(1, "p0"), (2, "q0"), (4, "r0")]);
    assert!(chunks.iter().all(|c| !c.text.contains('p') || c.page == 1));
    assert!(!chunks[1].text.contains("p7"));
}

#[test]
fn blank_input_gives_no_chunks_and_no_chunk_is_ever_empty() {
    assert!(chunk_pages(&[page(1, ""), page(2, " \n\n \t")], &cfg(10, 2), &Words).is_empty());
    let text = format!("{}\n\n\n\n{}", words("a", 30), words("b", 3));
    for chunk in chunk_pages(&[page(1, &text)], &cfg(7, 3), &Words) {
        assert!(!chunk.text.trim().is_empty());
        assert_eq!(chunk.text, chunk.text.trim());
    }
}

#[test]
fn indexes_are_dense_and_hashes_are_sha256_of_the_text() {
    let text = words("w", 50);
    let chunks = chunk_pages(&[page(1, &text)], &ChunkConfig::default(), &ApproxTokens);
    let small = chunk_pages(&[page(1, &text)], &cfg(12, 4), &ApproxTokens);
    for (i, chunk) in small.iter().enumerate() {
        assert_eq!(chunk.index, i as i32);
        let expected: [u8; 32] = Sha256::digest(chunk.text.as_bytes()).into();
        assert_eq!(chunk.content_hash, expected);
    }
    assert_eq!(chunks.len(), 1);
    // The published SHA-256 digest of "hello".
    let hello = chunk_pages(&[page(1, "hello")], &ChunkConfig::default(), &ApproxTokens);
    assert_eq!(
        hex::encode(hello[0].content_hash),
        "2cf24dba5fb0a30e26e83b2ac5b9e29e1b161e5c1fa7425e73043362938b9824"
    );
}

#[test]
fn chunking_is_deterministic() {
    let text = format!(
        "{}. {}!\n\n{}",
        words("a", 40),
        words("b", 70),
        words("c", 15)
    );
    let pages = [page(1, &text), page(2, "Tail page.")];
    let first = chunk_pages(&pages, &cfg(25, 5), &ApproxTokens);
    let second = chunk_pages(&pages, &cfg(25, 5), &ApproxTokens);
    assert_eq!(first, second);
    assert!(first.len() > 3);
}

/// Counts like [`ApproxTokens`] and adds up how many bytes it was asked to look at: the
/// work chunking does, measured without a clock.
#[derive(Default)]
struct Metered {
    bytes: std::cell::Cell<usize>,
}
impl TokenCounter for Metered {
    fn count(&self, text: &str) -> usize {
        self.bytes.set(self.bytes.get() + text.len());
        ApproxTokens.count(text)
    }
}

/// Says every text is one token, as a tokenizer does for a word it does not know.
struct OneToken;
impl TokenCounter for OneToken {
    fn count(&self, _text: &str) -> usize {
        1
    }
}

#[test]
fn chunking_one_enormous_word_is_linear_in_its_length() {
    let work = |mib: usize| {
        let word = "x".repeat(mib << 20);
        let counter = Metered::default();
        let chunks = chunk_pages(&[page(1, &word)], &ChunkConfig::default(), &counter);
        assert!(chunks.iter().all(|c| c.token_count <= 200));
        counter.bytes.get()
    };
    let (one, two) = (work(1), work(2));
    let ratio = two as f64 / one as f64;
    println!("bytes counted: 1 MiB word {one}, 2 MiB word {two}, ratio {ratio:.3}");
    assert!(
        ratio < 2.3,
        "2 MiB cost {ratio:.2} times the work of 1 MiB ({one} and {two} bytes counted): not linear"
    );
}

#[test]
fn a_run_of_whitespace_is_one_space_and_costs_no_chunk() {
    let text = format!("a{}b", " ".repeat(1 << 20));
    let chunks = chunk_pages(&[page(1, &text)], &ChunkConfig::default(), &ApproxTokens);
    let texts: Vec<&str> = chunks.iter().map(|c| c.text.as_str()).collect();
    assert_eq!(texts, vec!["a b"]);
    let chunks = chunk_pages(
        &[page(1, "one \t two\r\n  three\n \n\n\t four  ")],
        &ChunkConfig::default(),
        &ApproxTokens,
    );
    assert_eq!(chunks[0].text, "one two\nthree\n\nfour");
}

#[test]
fn chunks_are_bounded_in_bytes_when_tokens_are_cheap() {
    let text = words("w", 100_000);
    let cfg = ChunkConfig::default();
    let chunks = chunk_pages(&[page(1, &text)], &cfg, &OneToken);
    assert!(chunks.len() > 100, "{} chunks", chunks.len());
    for chunk in &chunks {
        assert!(
            chunk.text.len() <= cfg.max_bytes(),
            "{} bytes",
            chunk.text.len()
        );
    }
    let blob = "é".repeat(100_000);
    let chunks = chunk_pages(&[page(1, &blob)], &cfg, &OneToken);
    assert!(chunks.iter().all(|c| c.text.len() <= cfg.max_bytes()));
    let rejoined: String = chunks.iter().map(|c| c.text.as_str()).collect();
    assert_eq!(rejoined, blob);
}

#[test]
fn overlap_larger_than_half_the_target_is_clamped() {
    let text = words("w", 30);
    let chunks = chunk_pages(&[page(1, &text)], &cfg(6, 100), &Words);
    assert!(chunks.iter().all(|c| c.token_count <= 6));
    assert!(chunks.last().unwrap().text.ends_with("w29"));
}
