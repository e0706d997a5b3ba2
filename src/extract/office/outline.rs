//! Blocks → sections under their heading path: a heading closes the section before it and
//! opens one under the path of the headings above it ("2. Installation › 2.1 Requirements").

use super::xml::{Block, linearise};
use crate::extract::{Location, Section};

/// Sections built block by block.
#[derive(Default)]
pub(crate) struct Outline {
    /// The open headings: (level, text), outermost first.
    path: Vec<(u8, String)>,
    text: String,
    sections: Vec<Section>,
}

impl Outline {
    /// Adds blocks in document order.
    pub(crate) fn extend(&mut self, blocks: Vec<Block>) {
        for block in blocks {
            match block {
                Block::Paragraph {
                    text,
                    level: Some(level),
                } => {
                    self.close();
                    self.path.retain(|(open, _)| *open < level);
                    self.path.push((level, text.clone()));
                    self.push(&text);
                }
                Block::Paragraph { text, level: None } => self.push(&text),
                Block::Table(rows) => self.push(&linearise(&rows)),
                Block::Break => {}
            }
        }
    }

    /// Adds a section of its own under a fixed path (footnotes, comments), after the flow.
    pub(crate) fn appendix(&mut self, title: &str, text: String) {
        self.close();
        if !text.trim().is_empty() {
            self.sections.push(Section {
                location: Location::Section {
                    path: vec![title.to_owned()],
                },
                text,
            });
        }
    }

    /// The sections, in document order.
    pub(crate) fn finish(mut self) -> Vec<Section> {
        self.close();
        self.sections
    }

    fn push(&mut self, text: &str) {
        if text.is_empty() {
            return;
        }
        if !self.text.is_empty() {
            self.text.push_str("\n\n");
        }
        self.text.push_str(text);
    }

    fn close(&mut self) {
        if self.text.trim().is_empty() {
            self.text.clear();
            return;
        }
        self.sections.push(Section {
            location: Location::Section {
                path: self.path.iter().map(|(_, text)| text.clone()).collect(),
            },
            text: std::mem::take(&mut self.text),
        });
    }
}
