// The documents view: uploads whose rows follow their document to "ready" or "failed: reason"
// (and can be cleared), and the list with name, step and type filters, a sort and pages.
// Loaded after app.js (its helpers) and names.js; see app.js for the rules every script of the
// page keeps.
"use strict";

const LIST_PAGE = 50;
let listOffset = 0;

// ---- Uploads --------------------------------------------------------------------------------

/** Upload rows still waiting for their document to finish: document id → row. */
const following = new Map();

function finishRow(item, text, failed) {
  const outcome = item.querySelector(".outcome");
  outcome.textContent = text;
  outcome.classList.toggle("error", Boolean(failed));
  item.dataset.state = failed ? "failed" : "done";
  $("uploads-clear").hidden = false;
}

/** Moves each followed upload row on to its document's current step. */
async function followUploads() {
  for (const [id, item] of following) {
    try {
      const doc = await api(`/api/documents/${id}`);
      item.dataset.status = doc.status;
      if (doc.status === "ready") {
        following.delete(id);
        finishRow(item, "Ready: searchable.", false);
      } else if (doc.status === "failed") {
        following.delete(id);
        finishRow(item, `Failed: ${doc.error ? doc.error.message : "no reason given"}`, true);
      } else {
        const progress = progressText(doc);
        item.querySelector(".outcome").textContent = `Processing: ${progress || doc.status}…`;
      }
    } catch (err) {
      if (err instanceof ApiError && err.status === 404) {
        following.delete(id);
        finishRow(item, "Deleted.", false);
      }
    }
  }
}

function upload(file) {
  const item = el("li");
  const name = el("span", null, "name");
  name.append(nameNode(file.name));
  const bar = el("progress");
  bar.max = 100;
  bar.value = 0;
  bar.setAttribute("aria-label", `Upload progress of ${visibleName(file.name)}`);
  const outcome = el("span", "Uploading…", "outcome");
  outcome.setAttribute("role", "status");
  item.append(name, bar, outcome);
  item.dataset.state = "uploading";
  $("uploads").prepend(item);

  const form = new FormData();
  form.append("file", file, file.name);
  const request = new XMLHttpRequest();
  request.open("POST", uploadPath());
  for (const [key, value] of Object.entries(authHeaders())) request.setRequestHeader(key, value);
  request.setRequestHeader("Accept", "application/json");
  request.upload.addEventListener("progress", (event) => {
    if (event.lengthComputable) bar.value = Math.round((event.loaded / event.total) * 100);
  });
  request.addEventListener("load", () => {
    bar.value = 100;
    let body = null;
    try {
      body = JSON.parse(request.responseText);
    } catch {
      body = null;
    }
    if (request.status === 401) {
      askForToken();
      finishRow(item, "Rejected: an access token is needed; enter it and upload again.", true);
      return;
    }
    const result = body && body.results && body.results[0];
    if (result && result.document) {
      const doc = result.document;
      const link = el("a");
      link.href = `#document/${doc.id}`;
      link.append(...name.childNodes);
      name.replaceChildren(link);
      if (result.duplicate) {
        finishRow(item, `Already uploaded: the same bytes are document ${doc.id} (${doc.status}).`, false);
      } else {
        outcome.textContent = "Uploaded; processing…";
        item.dataset.state = "processing";
        following.set(doc.id, item);
        followUploads();
      }
    } else {
      const error = (result && result.error) || (body && body.error);
      finishRow(item, `Rejected: ${error ? error.message : `the server answered ${request.status}`}`, true);
    }
    refreshDocuments();
  });
  request.addEventListener("error", () => finishRow(item, "Failed: the connection was lost during the upload.", true));
  request.send(form);
}

function uploadAll(files) {
  for (const file of files) upload(file);
}

$("file-input").addEventListener("change", (event) => {
  uploadAll(Array.from(event.target.files));
  event.target.value = "";
});

$("uploads-clear").addEventListener("click", () => {
  for (const item of $("uploads").querySelectorAll('li[data-state="done"], li[data-state="failed"]')) item.remove();
  $("uploads-clear").hidden = true;
  $("file-input").focus();
});

const dropZone = $("drop-zone");
for (const type of ["dragenter", "dragover"]) {
  dropZone.addEventListener(type, (event) => {
    event.preventDefault();
    dropZone.classList.add("over");
  });
}
for (const type of ["dragleave", "drop"]) {
  dropZone.addEventListener(type, () => dropZone.classList.remove("over"));
}
dropZone.addEventListener("drop", (event) => {
  event.preventDefault();
  if (event.dataTransfer) uploadAll(Array.from(event.dataTransfer.files));
});

// ---- Document list --------------------------------------------------------------------------

// "OCR 3 of 10 pages" while a long step runs; the server clears progress when it ends.
function progressText(doc) {
  const p = doc.progress;
  if (doc.status !== "extracting" || !p || p.step !== "ocr") return null;
  return `OCR ${p.done} of ${p.total} page${p.total === 1 ? "" : "s"}`;
}

function statusCell(doc) {
  const cell = el("td", null, `status status-${doc.status}`);
  cell.append(el("span", doc.status));
  const progress = progressText(doc);
  // Progress is news, not an error: drawn muted, never in the failure colour.
  if (progress) cell.append(el("span", progress, "progress"));
  if (doc.error && doc.error.message) cell.append(el("span", doc.error.message, "reason"));
  return cell;
}

/** The list's query from the filter form, at the current page. */
function listQuery() {
  const params = new URLSearchParams({ limit: String(LIST_PAGE), offset: String(listOffset) });
  const name = $("filter-name").value.trim();
  if (name) params.set("name", name);
  if ($("filter-status").value) params.set("status", $("filter-status").value);
  if ($("filter-type").value) params.set("type", $("filter-type").value);
  if ($("filter-sort").value !== "newest") params.set("sort", $("filter-sort").value);
  return withCollection(params);
}

/** Answers to older list requests (a filter typed on, a page turned again) are dropped. */
let listRequest = 0;
let shownFilters = null;

async function refreshDocuments() {
  followUploads();
  // Other filters than the last shown start again at the first page, whoever refreshes first
  // (the filter's own handler, or a live event while the person types).
  const filters = listQuery();
  filters.delete("offset");
  if (filters.toString() !== shownFilters) listOffset = 0;
  shownFilters = filters.toString();
  const serial = ++listRequest;
  const offset = listOffset;
  try {
    const { documents, total } = await api(`/api/documents?${listQuery()}`);
    if (serial !== listRequest) return;
    const rows = documents.map((doc) => {
      const row = el("tr");
      row.dataset.id = String(doc.id);
      row.dataset.status = doc.status;
      const name = el("td", null, "name");
      const link = el("a");
      link.href = `#document/${doc.id}`;
      link.append(nameNode(doc.filename));
      name.append(link);
      row.append(name, statusCell(doc), el("td", formatBytes(doc.byte_size)), el("td", formatTime(doc.created_at)));
      return row;
    });
    document.querySelector("#doc-list tbody").replaceChildren(...rows);
    const filtered = listQuery().size > 2;
    $("doc-empty").textContent = filtered ? "No documents match these filters." : "No documents yet.";
    $("doc-empty").hidden = documents.length > 0;
    const counts = STEPS.map((step) => `${step} ${documents.filter((d) => d.status === step).length}`);
    const first = documents.length === 0 ? 0 : offset + 1;
    $("page-where").textContent = `${first}–${offset + documents.length} of ${total}`;
    $("page-prev").disabled = offset === 0;
    $("page-next").disabled = offset + documents.length >= total;
    $("doc-counts").textContent = `${documents.length} shown of ${total}: ${counts.join(", ")}`;
  } catch (err) {
    reportError("Could not load the documents", err);
  }
}

/** The type filter's choices: one per format the server reads (its MIME types together). */
function showTypeFilter(formats) {
  const select = $("filter-type");
  const chosen = select.value;
  const options = formats.map((f) => {
    const option = el("option", f.name);
    option.value = f.mime.join(",");
    return option;
  });
  const any = el("option", "any");
  any.value = "";
  select.replaceChildren(any, ...options);
  select.value = chosen;
}

let filterTimer = null;
$("doc-filter").addEventListener("input", () => {
  clearTimeout(filterTimer);
  filterTimer = setTimeout(refreshDocuments, 250);
});
$("doc-filter").addEventListener("submit", (event) => {
  event.preventDefault();
  refreshDocuments();
});
$("page-prev").addEventListener("click", () => {
  listOffset = Math.max(0, listOffset - LIST_PAGE);
  refreshDocuments();
});
$("page-next").addEventListener("click", () => {
  listOffset += LIST_PAGE;
  refreshDocuments();
});
