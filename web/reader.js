// The reader: what docket extracted from a document, page by page (slide, sheet, section),
// with the pages OCR read marked, from GET /api/documents/{id}/text. `#read/ID?at=CHUNK` opens
// it at a search hit's passage, marked and scrolled to; the original file is one click away.
// The text comes in bounded windows: "Show more" appends the next. Loaded after app.js and
// names.js; see app.js for the rules every script of the page keeps.
"use strict";

let reading = { id: null, at: null, next: null };

/** A section's text as nodes: the passage of chunk `at` (character offsets) in a <mark>. */
function sectionText(section, at) {
  const paragraph = el("div", null, "text");
  const span = section.chunks.find((c) => c.chunk_index === at);
  if (!span) {
    paragraph.textContent = section.text;
    return paragraph;
  }
  const chars = Array.from(section.text);
  const mark = el("mark", chars.slice(span.start, span.end).join(""), "passage");
  mark.id = "passage";
  mark.tabIndex = -1;
  paragraph.append(chars.slice(0, span.start).join(""), mark, chars.slice(span.end).join(""));
  return paragraph;
}

function sectionNode(section, at) {
  const node = el("section", null, "page");
  node.dataset.page = String(section.page);
  const heading = el("h3", section.label);
  if (section.ocr) heading.append(" ", el("span", "read by OCR", "ocr"));
  if (section.continued) heading.append(" ", el("span", "(continued)", "muted"));
  node.setAttribute("aria-label", section.label);
  node.append(heading, sectionText(section, at));
  return node;
}

function showGone(message) {
  $("read-gone").textContent = message;
  $("read-gone").hidden = false;
  $("read-text").replaceChildren();
  for (const id of ["read-file", "read-more", "read-start"]) $(id).hidden = true;
  $("read-file").parentElement.hidden = true;
}

/** Loads a window of the text: from the start, after the last one (`append`), or at `at`. */
async function loadText(id, { at = null, from = 0, append = false } = {}) {
  const query = at !== null ? `at=${at}` : `from=${from}`;
  try {
    const body = await api(`/api/documents/${id}/text?${query}`);
    if (current.view !== "read" || current.id !== id) return;
    $("read-heading").replaceChildren("Extracted text of ", nameNode(body.filename));
    $("read-gone").hidden = true;
    $("read-file").parentElement.hidden = false;
    $("read-file").hidden = false;
    $("read-file").href = `/api/documents/${id}/file`;
    $("read-file").dataset.filename = body.filename;
    const ocr = body.ocr_pages && body.ocr_pages.length > 0
      ? `; OCR read ${body.ocr_pages.length} page${body.ocr_pages.length === 1 ? "" : "s"}`
      : "";
    $("read-facts").textContent = `${body.total_chunks} passage${body.total_chunks === 1 ? "" : "s"}, read by ${body.extractor || "–"}${ocr}.`;
    const nodes = body.sections.map((s) => sectionNode(s, at));
    const target = $("read-text");
    if (append) {
      // A page cut between two windows goes on in the same section.
      const last = target.lastElementChild;
      if (last && body.sections[0] && body.sections[0].continued && last.dataset.page === String(body.sections[0].page)) {
        last.querySelector(".text").append(body.sections[0].text);
        nodes.shift();
      }
      target.append(...nodes);
    } else {
      target.replaceChildren(...nodes);
    }
    if (body.sections.length === 0 && !append) target.append(el("p", "No text was extracted (yet)."));
    reading.next = body.next;
    $("read-more").hidden = body.next === null;
    $("read-start").hidden = append || body.from === 0;
    const passage = $("passage");
    if (passage && !append) {
      passage.scrollIntoView({ block: "center" });
      passage.focus({ preventScroll: true });
    }
  } catch (err) {
    if (err instanceof ApiError && err.status === 404) {
      $("read-heading").textContent = "Document gone";
      showGone(`Document ${id} does not exist: it was deleted, or never was.`);
      return;
    }
    reportError("Could not load the text", err);
  }
}

/** Shows the reader the address names (route() calls this for `#read/ID?at=N`). */
function showReader(id, query) {
  const at = new URLSearchParams(query || "").get("at");
  reading = { id, at: at === null ? null : Number(at), next: null };
  $("read-back").href = `#document/${id}`;
  $("read-text").replaceChildren();
  loadText(id, { at: Number.isInteger(reading.at) ? reading.at : null });
}

$("read-more").addEventListener("click", () => {
  if (reading.next !== null) loadText(reading.id, { from: reading.next, append: true });
});

$("read-start").addEventListener("click", () => {
  reading.at = null;
  loadText(reading.id, { from: 0 });
});

// The original file needs the token when one is set; a plain link cannot send it.
$("read-file").addEventListener("click", (event) => {
  event.preventDefault();
  openOriginal({ document_id: reading.id, filename: event.currentTarget.dataset.filename, page: 1 });
});
