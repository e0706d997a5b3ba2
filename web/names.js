// File names as the page shows them. A name is the uploader's text: it may hold bidirectional
// controls (a right-to-left override makes "report\u202Egpj.txt" display as "reporttxt.jpg"),
// so every control is shown as a visible marker ([RLO]) and the name sits in its own <bdi>, so
// it can neither reorder itself nor the text around it. Loaded after app.js; see app.js for
// the rules every script of the page keeps.
"use strict";

// Unicode's bidirectional formatting characters, with the short names people look up.
const BIDI_CONTROLS = {
  "\u061C": "ALM",
  "\u200E": "LRM",
  "\u200F": "RLM",
  "\u202A": "LRE",
  "\u202B": "RLE",
  "\u202C": "PDF",
  "\u202D": "LRO",
  "\u202E": "RLO",
  "\u2066": "LRI",
  "\u2067": "RLI",
  "\u2068": "FSI",
  "\u2069": "PDI",
};
const BIDI_PATTERN = /[\u061C\u200E\u200F\u202A-\u202E\u2066-\u2069]/g;

/** The name with every bidirectional control replaced by a visible marker. */
function visibleName(name) {
  return String(name ?? "").replace(BIDI_PATTERN, (c) => `[${BIDI_CONTROLS[c]}]`);
}

/** Whether the name holds bidirectional controls (the page then says so in a title). */
function hasBidiControls(name) {
  BIDI_PATTERN.lastIndex = 0;
  return BIDI_PATTERN.test(String(name ?? ""));
}

/** A file name as an isolated, spoof-proof node: `<bdi>` with the visible form as its text. */
function nameNode(name, className) {
  const node = el("bdi", visibleName(name), className);
  if (hasBidiControls(name)) node.title = "This name holds invisible direction controls, shown in brackets";
  return node;
}
