//! What a search box query asks for: the words to rank by, each in the forms it is looked up
//! in, quoted phrases a hit must contain, and `-words` it must not.
//!
//! The syntax is the one people know from web search engines: words are OR-ed and ranked (a
//! hit need not contain them all), `"a phrase"` must appear as written, `-word` and
//! `-"a phrase"` exclude, and a bare `OR` is ignored (every word is optional already).
//!
//! **Forms.** A chunk's words were stemmed by the rules of the chunk's language, which a query
//! does not know: a French question may be asked of English manuals, a Korean one contains
//! English words that the Korean chunk kept whole. So each query word is looked up as it would
//! be indexed under the query's own detected language, under English, and under the neutral
//! rules; search scores a chunk by the best form of each word, never by two forms of one word.

use std::collections::BTreeSet;

use super::{Language, analyze, detect_reliably};

/// A parsed query.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Query {
    /// The words to rank by, each as the distinct terms it may be indexed as.
    pub words: Vec<Vec<String>>,
    /// Quoted phrases, each as its words (lower-cased): a hit contains every phrase.
    pub phrases: Vec<Vec<String>>,
    /// Terms of excluded words and phrases: a hit contains none of them.
    pub excluded: Vec<String>,
}

impl Query {
    /// Every term of every word, paired with the word's position in [`Query::words`]: the
    /// shape the ranking query takes (`unnest($terms, $words)`).
    pub fn term_pairs(&self) -> (Vec<String>, Vec<i32>) {
        let mut terms = Vec::new();
        let mut words = Vec::new();
        for (at, forms) in self.words.iter().enumerate() {
            for form in forms {
                terms.push(form.clone());
                words.push(i32::try_from(at).unwrap_or(i32::MAX));
            }
        }
        (terms, words)
    }

    /// Every term a highlight may mark.
    pub fn all_terms(&self) -> BTreeSet<&str> {
        self.words.iter().flatten().map(String::as_str).collect()
    }
}

/// One piece of the query's syntax.
enum Piece<'a> {
    Words(&'a str),
    Phrase(&'a str),
    Excluded(&'a str),
}

/// Splits `query` into words, phrases and exclusions.
fn pieces(query: &str) -> Vec<Piece<'_>> {
    let mut pieces = Vec::new();
    let mut rest = query;
    while let Some(start) = rest.find(|c: char| !c.is_whitespace()) {
        rest = &rest[start..];
        let negated = rest.starts_with('-');
        let body = if negated { &rest[1..] } else { rest };
        if let Some(inner) = body.strip_prefix('"') {
            // An unclosed quote runs to the end, as in web search.
            let end = inner.find('"').unwrap_or(inner.len());
            let phrase = &inner[..end];
            pieces.push(if negated {
                Piece::Excluded(phrase)
            } else {
                Piece::Phrase(phrase)
            });
            rest = inner.get(end + 1..).unwrap_or("");
            continue;
        }
        let end = body.find(char::is_whitespace).unwrap_or(body.len());
        let token = &body[..end];
        if negated {
            if !token.is_empty() {
                pieces.push(Piece::Excluded(token));
            }
        } else if token != "OR" {
            pieces.push(Piece::Words(token));
        }
        rest = &body[end..];
    }
    pieces
}

/// The languages a query's words are analysed under: its own (when it can be told), English,
/// and the neutral rules.
fn languages(text: &str) -> Vec<Language> {
    let mut languages: Vec<Language> = detect_reliably(text).into_iter().collect();
    for language in [Language::ENGLISH, Language::SIMPLE] {
        if !languages.contains(&language) {
            languages.push(language);
        }
    }
    languages
}

/// The forms of each word of `text` under `languages`, in word order; words that are stop
/// words under every language are left out.
fn word_forms(text: &str, languages: &[Language]) -> Vec<Vec<String>> {
    let mut forms: Vec<(usize, BTreeSet<String>)> = Vec::new();
    for language in languages {
        for term in analyze(text, *language) {
            match forms.iter_mut().find(|(word, _)| *word == term.word) {
                Some((_, set)) => {
                    set.insert(term.text);
                }
                None => forms.push((term.word, BTreeSet::from([term.text]))),
            }
        }
    }
    forms.sort_by_key(|(word, _)| *word);
    forms
        .into_iter()
        .map(|(_, set)| set.into_iter().collect())
        .collect()
}

/// Parses a query typed by a person.
pub fn parse(query: &str) -> Query {
    let pieces = pieces(query);
    // Detect the language on everything the person typed that is not excluded.
    let positive: Vec<&str> = pieces
        .iter()
        .filter_map(|p| match p {
            Piece::Words(text) | Piece::Phrase(text) => Some(*text),
            Piece::Excluded(_) => None,
        })
        .collect();
    let languages = languages(&positive.join(" "));
    let mut parsed = Query::default();
    for piece in &pieces {
        match piece {
            Piece::Words(text) | Piece::Phrase(text) => {
                for forms in word_forms(text, &languages) {
                    if !parsed.words.contains(&forms) {
                        parsed.words.push(forms);
                    }
                }
                if let Piece::Phrase(text) = piece {
                    let words = phrase_words(text);
                    if !words.is_empty() {
                        parsed.phrases.push(words);
                    }
                }
            }
            Piece::Excluded(text) => {
                for forms in word_forms(text, &languages) {
                    parsed.excluded.extend(forms);
                }
            }
        }
    }
    parsed.excluded.sort();
    parsed.excluded.dedup();
    parsed
}

/// The words of a phrase as a person wrote them, lower-cased (stop words included: a phrase
/// is matched against the text itself).
fn phrase_words(text: &str) -> Vec<String> {
    text.split(|c: char| !super::is_word_char(c))
        .filter(|w| !w.is_empty())
        .map(str::to_lowercase)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn strings(words: &[&[&str]]) -> Vec<Vec<String>> {
        words
            .iter()
            .map(|w| w.iter().map(|s| s.to_string()).collect())
            .collect()
    }

    #[test]
    fn a_question_keeps_its_informative_words_in_stemmed_and_whole_forms() {
        let query = parse("Which newspapers were used to collect the articles?");
        assert_eq!(
            query.words,
            strings(&[
                &["newspap", "newspapers"],
                &["use", "used"],
                &["collect"],
                &["articl", "articles"],
            ])
        );
        assert!(query.phrases.is_empty() && query.excluded.is_empty());
    }

    #[test]
    fn stop_words_alone_leave_nothing_to_search_for() {
        assert!(parse("what is the").words.is_empty());
    }

    #[test]
    fn phrases_and_exclusions_are_parsed_like_web_search() {
        let query = parse("\"rate limiting\" queue -redis -\"message broker\" OR jobs");
        assert_eq!(
            query.phrases,
            vec![vec!["rate".to_string(), "limiting".to_string()]]
        );
        assert_eq!(
            query.words,
            strings(&[
                &["rate"],
                &["limit", "limiting"],
                &["queue"],
                &["job", "jobs"]
            ])
        );
        assert_eq!(
            query.excluded,
            vec!["broker", "messag", "message", "redi", "redis"]
        );
    }

    #[test]
    fn a_korean_question_is_bigrams_and_its_english_words_both_forms() {
        let query = parse("unstable로 올린 다음에");
        assert_eq!(
            query.words[0],
            vec!["unstabl".to_string(), "unstable".to_string()]
        );
        assert!(query.words.contains(&vec!["로".to_string()]));
        assert!(query.words.contains(&vec!["다음".to_string()]));
        assert!(query.words.contains(&vec!["음에".to_string()]));
    }

    #[test]
    fn term_pairs_name_each_terms_word() {
        let query = parse("limiting queues");
        let (terms, words) = query.term_pairs();
        assert_eq!(terms, vec!["limit", "limiting", "queue", "queues"]);
        assert_eq!(words, vec![0, 0, 1, 1]);
    }
}
