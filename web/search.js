// The search view. Its state lives in the address (`#search?q=…&mode=…`), so a search survives
// a reload and can be bookmarked or shared; changing the mode searches again; an empty query
// clears the results. A query is sent as typed, never cut: one too long is refused with the
// server's own message. Each hit opens the document's extracted text at its passage
// (reader.js), and the original file is one click away. Loaded after app.js and names.js; see
// app.js for the rules every script of the page keeps.
"use strict";

/** The snippet as DOM nodes: plain text with <mark> around the server's highlight ranges. */
function snippetNode(hit) {
  const paragraph = el("p", null, "snippet");
  const chars = Array.from(hit.snippet || ""); // ranges count characters, not UTF-16 units
  let at = 0;
  for (const { start, end } of hit.highlights || []) {
    if (start < at || end > chars.length || start >= end) continue;
    paragraph.append(chars.slice(at, start).join(""));
    paragraph.append(el("mark", chars.slice(start, end).join("")));
    at = end;
  }
  paragraph.append(chars.slice(at).join(""));
  return paragraph;
}

/** Opens a hit's original file: a PDF at the hit's page (`#page=N`, which browsers' PDF
 * viewers honour), anything else as a download. Fetched with the token when one is set, since a
 * plain link cannot send it. */
async function openOriginal(hit) {
  try {
    const response = await fetch(`/api/documents/${hit.document_id}/file`, { headers: authHeaders() });
    if (!response.ok) throw new Error(`the server answered ${response.status}`);
    const blob = await response.blob();
    const pdf = (hit.content_type || blob.type) === "application/pdf";
    const url = URL.createObjectURL(pdf ? new Blob([blob], { type: "application/pdf" }) : blob);
    const link = el("a");
    if (pdf) {
      link.href = `${url}#page=${hit.page}`;
      link.target = "_blank";
      link.rel = "noopener";
    } else {
      link.href = url;
      link.download = hit.filename;
    }
    link.click();
    setTimeout(() => URL.revokeObjectURL(url), 60000);
  } catch (err) {
    reportError("Could not open the file", err);
  }
}

/** How likely a passage answers the question, in words a person reads (relevance is the
 * estimated probability, calibrated so that 0.5 means even odds). */
function relevanceWords(relevance) {
  if (relevance >= 0.8) return "strong match";
  if (relevance >= 0.5) return "likely match";
  if (relevance >= 0.2) return "possible match";
  return "weak match";
}

/** A bar and its words for a hit's relevance. */
function relevanceNode(hit) {
  const relevance = Number(hit.relevance) || 0;
  const words = relevanceWords(relevance);
  const span = el("span", null, `relevance ${words.split(" ")[0]}`);
  const meter = document.createElement("meter");
  meter.min = 0;
  meter.max = 1;
  meter.low = 0.5;
  meter.high = 0.8;
  meter.optimum = 1;
  meter.value = relevance;
  meter.setAttribute("aria-label", `${words}: ${Math.round(relevance * 100)}% likely to answer`);
  span.append(meter, ` ${words}`);
  span.title = `${Math.round(relevance * 100)}% likely to answer the question`;
  return span;
}

/** One passage: where it is, a link to it in the extracted text, the original file, and its
 * snippet. */
function hitNode(hit, switching) {
  const item = el("li", null, "hit");
  item.dataset.documentId = String(hit.document_id);
  item.dataset.page = String(hit.page);
  item.dataset.chunk = String(hit.chunk_index);
  const where = el("p", null, "where");
  // The location as a person names it ("slide 2", "Sheet1, rows 4–9", a heading path).
  const label = hit.location || `page ${hit.page}`;
  const read = el("a", "show in the text", "read");
  read.href = `#read/${hit.document_id}?at=${hit.chunk_index}`;
  read.setAttribute("aria-label", `show in the text: ${label} of ${visibleName(hit.filename)}`);
  const open = el("a", hit.content_type === "application/pdf" ? `PDF at page ${hit.page}` : "original file", "open");
  open.href = `/api/documents/${hit.document_id}/file`;
  open.setAttribute("aria-label", `${open.textContent} of ${visibleName(hit.filename)}`);
  open.addEventListener("click", (event) => {
    event.preventDefault();
    openOriginal(hit);
  });
  where.append(relevanceNode(hit), " · ", el("span", label, "page"), " · ", read, " · ", open);
  // During a model switch, say which version's vector found the chunk.
  if (switching && hit.model_version) where.append(el("span", ` · under ${hit.model_version}`, "version"));
  item.append(where, snippetNode(hit));
  return item;
}

/** A document's results: its best passage, and the others behind "N more in this document". */
function groupNode(group, switching) {
  const [best, ...more] = group.hits;
  const item = hitNode(best, switching);
  item.classList.add("group");
  const title = el("p", null, "title");
  const link = el("a", null, "filename");
  link.append(nameNode(group.filename));
  link.href = `#document/${group.document_id}`;
  title.append(link);
  item.prepend(title);
  if (more.length > 0) {
    const details = el("details", null, "more");
    details.append(el("summary", `${more.length} more in this document`));
    const list = el("ol", null, "more-hits");
    list.append(...more.map((hit) => hitNode(hit, switching)));
    details.append(list);
    item.append(details);
  }
  return item;
}

/** What the address says to search for: `{ q, mode }` from `#search?q=…&mode=…`. */
function searchState(query) {
  const params = new URLSearchParams(query || "");
  const mode = ["hybrid", "vector", "text"].includes(params.get("mode")) ? params.get("mode") : "hybrid";
  return { q: params.get("q") || "", mode };
}

let lastSearch = null;

/** Shows the search the address names (route() calls this for `#search…`). */
function showSearch(query) {
  const { q, mode } = searchState(query);
  $("search-q").value = q;
  $("search-mode").value = mode;
  const key = `${mode}\n${q}`;
  if (!q) {
    lastSearch = null;
    $("search-results").replaceChildren();
    $("search-status").textContent = "";
    return;
  }
  if (key === lastSearch) return;
  lastSearch = key;
  runSearch(q, mode);
}

/** Puts a search in the address; the hashchange that follows runs it. */
function searchFor(q, mode) {
  const hash = q ? `#search?${new URLSearchParams({ q, mode })}` : "#search";
  if (location.hash === hash) {
    lastSearch = null;
    route();
  } else {
    location.hash = hash;
  }
}

async function runSearch(q, mode) {
  const status = $("search-status");
  const results = $("search-results");
  results.replaceChildren();
  status.textContent = "Searching…";
  try {
    const params = withCollection(new URLSearchParams({ q, mode, k: "10", group: "document" }));
    const body = await api(`/api/search?${params}`);
    const versions = Array.isArray(body.versions) ? body.versions : [];
    const switching = versions.length > 1;
    const groups = Array.isArray(body.groups) ? body.groups : [];
    results.replaceChildren(...groups.map((group) => groupNode(group, switching)));
    const passages = groups.reduce((n, g) => n + g.hits.length, 0);
    const note = body.semantic === false && mode !== "text" ? " (vectors from the hashing fallback: not semantic)" : "";
    const skipped = versions.filter((v) => !v.searched && v.reason).map((v) => ` Not searched by vector: ${v.model_version}: ${v.reason}.`);
    const count = groups.length === 0
      ? "No results"
      : `${passages} result${passages === 1 ? "" : "s"} in ${groups.length} document${groups.length === 1 ? "" : "s"}`;
    // Relevance is a calibrated probability: below 0.5 for every hit, say so plainly.
    const weak = body.no_good_match && groups.length > 0
      ? " No good match: each is less likely than not to answer the question."
      : "";
    status.textContent = `${count} for “${q}”, ${body.mode}${note}.${weak}${skipped.join("")}`;
    status.classList.toggle("no-good-match", Boolean(body.no_good_match));
  } catch (err) {
    lastSearch = null;
    results.replaceChildren();
    status.textContent = `Search failed: ${err.message}`;
  }
}

$("search-form").addEventListener("submit", (event) => {
  event.preventDefault();
  searchFor($("search-q").value.trim(), $("search-mode").value);
});

$("search-mode").addEventListener("change", () => {
  const q = $("search-q").value.trim();
  if (q) searchFor(q, $("search-mode").value);
});
