// docket's page: upload, watch documents move through the pipeline, search, and fix failures.
//
// Rules this file keeps: it talks only to docket's own API; every value from the server or a
// file is put in the page with textContent (never innerHTML), so a file named "<script>…"
// shows as text; errors appear in the page, never as alerts; no inline script or style (the
// Content-Security-Policy forbids both). Live updates come from /api/events (server-sent
// events); they only say "something changed", and the page refetches what it shows.
"use strict";

const TOKEN_KEY = "docket.token";
const STEPS = ["uploaded", "extracting", "embedding", "ready", "failed"];

const $ = (id) => document.getElementById(id);

/** Creates an element with text content and optional class. */
function el(tag, text, className) {
  const node = document.createElement(tag);
  if (text !== undefined && text !== null) node.textContent = String(text);
  if (className) node.className = className;
  return node;
}

function formatBytes(n) {
  if (n < 1024) return `${n} B`;
  if (n < 1024 * 1024) return `${(n / 1024).toFixed(1)} KiB`;
  return `${(n / 1024 / 1024).toFixed(1)} MiB`;
}

function formatTime(iso) {
  if (!iso) return "–";
  const date = new Date(iso);
  return Number.isNaN(date.getTime()) ? String(iso) : date.toLocaleString();
}

// ---- Talking to the API -------------------------------------------------------------------

function token() {
  return sessionStorage.getItem(TOKEN_KEY) || "";
}

function authHeaders() {
  const t = token();
  return t ? { Authorization: `Bearer ${t}` } : {};
}

class ApiError extends Error {
  constructor(status, code, message) {
    super(message);
    this.status = status;
    this.code = code;
  }
}

/** Fetches JSON from the API; throws ApiError with the server's message. */
async function api(path, options = {}) {
  const response = await fetch(path, {
    ...options,
    headers: { Accept: "application/json", ...authHeaders(), ...(options.headers || {}) },
  });
  if (response.status === 401) {
    askForToken();
    throw new ApiError(401, "unauthorized", "an access token is needed");
  }
  if (response.status === 204) return null;
  let body = null;
  try {
    body = await response.json();
  } catch {
    body = null;
  }
  if (!response.ok) {
    const error = body && body.error;
    throw new ApiError(
      response.status,
      error ? error.code : "http_error",
      error ? error.message : `the server answered ${response.status}`,
    );
  }
  return body;
}

function showError(message) {
  const box = $("page-error");
  box.textContent = message;
  box.hidden = !message;
}

function reportError(what, err) {
  if (err instanceof ApiError && err.status === 401) return; // the token form says it
  showError(`${what}: ${err.message}`);
}

function askForToken() {
  const form = $("token-form");
  if (form.hidden) {
    form.hidden = false;
    $("token-input").focus();
  }
}

$("token-form").addEventListener("submit", (event) => {
  event.preventDefault();
  sessionStorage.setItem(TOKEN_KEY, $("token-input").value.trim());
  $("token-input").value = "";
  $("token-form").hidden = true;
  showError("");
  connectEvents();
  refreshAll();
});

// ---- Header: the model ----------------------------------------------------------------------

async function refreshInfo() {
  try {
    const info = await api("/api/info");
    const target = $("model");
    target.replaceChildren();
    const active = info.active_model;
    if (!active) {
      target.append("Model: none active yet");
      return;
    }
    const producer = {
      hash: "the hashing fallback",
      openai: "an OpenAI-compatible API",
      local: "the local model",
    }[active.provider] || active.provider;
    target.append(`Model: ${active.model_version} (${producer}, ${active.dims} dimensions)`);
    if (active.provider === "hash") {
      target.append(" ");
      target.append(el("span", "not semantic: matches spellings, not meaning", "warn"));
    }
  } catch (err) {
    reportError("Could not load the model", err);
  }
}

// ---- Views (hash routing) -------------------------------------------------------------------

const VIEWS = ["documents", "detail", "search", "jobs"];
let current = { view: "documents", id: null };

function route() {
  const hash = location.hash.replace(/^#/, "");
  const match = /^document\/(\d+)$/.exec(hash);
  if (match) current = { view: "detail", id: Number(match[1]) };
  else if (VIEWS.includes(hash) && hash !== "detail") current = { view: hash, id: null };
  else current = { view: "documents", id: null };
  for (const view of VIEWS) $(`view-${view}`).hidden = view !== current.view;
  for (const link of ["documents", "search", "jobs"]) {
    const active = current.view === link || (link === "documents" && current.view === "detail");
    if (active) $(`nav-${link}`).setAttribute("aria-current", "page");
    else $(`nav-${link}`).removeAttribute("aria-current");
  }
  showError("");
  refreshView();
}

function refreshView() {
  if (current.view === "documents") return refreshDocuments();
  if (current.view === "detail") return refreshDetail(current.id);
  if (current.view === "jobs") return refreshJobs();
  return Promise.resolve();
}

function refreshAll() {
  refreshInfo();
  refreshView();
}

window.addEventListener("hashchange", route);

// ---- Uploads --------------------------------------------------------------------------------

function upload(file) {
  const item = el("li");
  const name = el("span", file.name, "name");
  const bar = el("progress");
  bar.max = 100;
  bar.value = 0;
  bar.setAttribute("aria-label", `Upload progress of ${file.name}`);
  const outcome = el("span", "Uploading…", "outcome");
  outcome.setAttribute("role", "status");
  item.append(name, bar, outcome);
  $("uploads").prepend(item);

  const form = new FormData();
  form.append("file", file, file.name);
  const request = new XMLHttpRequest();
  request.open("POST", "/api/documents");
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
      outcome.textContent = "Rejected: an access token is needed; enter it and upload again.";
      outcome.classList.add("error");
      return;
    }
    const result = body && body.results && body.results[0];
    if (result && result.error) {
      outcome.textContent = `Rejected: ${result.error.message}`;
      outcome.classList.add("error");
    } else if (result && result.duplicate) {
      outcome.textContent = "Already uploaded: the same bytes are a document already.";
    } else if (result && result.document) {
      outcome.textContent = "Uploaded; processing…";
    } else {
      const message = body && body.error ? body.error.message : `the server answered ${request.status}`;
      outcome.textContent = `Rejected: ${message}`;
      outcome.classList.add("error");
    }
    refreshDocuments();
  });
  request.addEventListener("error", () => {
    outcome.textContent = "Failed: the connection was lost during the upload.";
    outcome.classList.add("error");
  });
  request.send(form);
}

function uploadAll(files) {
  for (const file of files) upload(file);
}

$("file-input").addEventListener("change", (event) => {
  uploadAll(Array.from(event.target.files));
  event.target.value = "";
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

function statusCell(doc) {
  const cell = el("td", null, `status status-${doc.status}`);
  cell.append(el("span", doc.status));
  if (doc.error && doc.error.message) cell.append(el("span", doc.error.message, "reason"));
  return cell;
}

async function refreshDocuments() {
  try {
    const { documents } = await api("/api/documents?limit=200");
    const rows = documents.map((doc) => {
      const row = el("tr");
      row.dataset.id = String(doc.id);
      row.dataset.status = doc.status;
      const name = el("td", null, "name");
      const link = el("a", doc.filename);
      link.href = `#document/${doc.id}`;
      name.append(link);
      row.append(name, statusCell(doc), el("td", formatBytes(doc.byte_size)), el("td", formatTime(doc.created_at)));
      return row;
    });
    document.querySelector("#doc-list tbody").replaceChildren(...rows);
    $("doc-empty").hidden = documents.length > 0;
    const counts = STEPS.map((step) => `${step} ${documents.filter((d) => d.status === step).length}`);
    $("doc-counts").textContent = `${documents.length} shown: ${counts.join(", ")}`;
  } catch (err) {
    reportError("Could not load the documents", err);
  }
}

// ---- Document detail ------------------------------------------------------------------------

function fact(list, term, value) {
  list.append(el("dt", term), el("dd", value));
}

function jobItem(job, afterRetry) {
  const item = el("li");
  item.dataset.jobId = String(job.id);
  item.dataset.status = job.status;
  const title = el("p");
  title.append(el("strong", `${job.kind} #${job.id}`), ` — ${job.status}, `);
  title.append(el("span", `attempts ${job.attempts} of ${job.max_attempts}`, "attempts"));
  item.append(title);
  if (job.last_error) item.append(el("p", `Last error: ${job.last_error}`, "error"));
  const errors = Array.isArray(job.errors) ? job.errors : [];
  if (errors.length > 0) {
    const details = el("details", null, "history");
    details.append(el("summary", `Error history (${errors.length})`));
    const list = el("ol");
    for (const entry of errors) {
      list.append(el("li", `attempt ${entry.attempt}, ${formatTime(entry.at)}: ${entry.error}`));
    }
    details.append(list);
    item.append(details);
  }
  if (job.status === "dead" || job.status === "cancelled") {
    const retry = el("button", "Retry");
    retry.type = "button";
    retry.setAttribute("aria-label", `Retry ${job.kind} job ${job.id}`);
    const note = el("span", "", "outcome");
    note.setAttribute("role", "status");
    retry.addEventListener("click", async () => {
      retry.disabled = true;
      note.textContent = " Retrying…";
      try {
        await api(`/api/jobs/${job.id}/retry`, { method: "POST" });
        note.textContent = " Queued again.";
        afterRetry();
      } catch (err) {
        note.textContent = ` Could not retry: ${err.message}`;
        retry.disabled = false;
      }
    });
    item.append(retry, note);
  }
  return item;
}

async function refreshDetail(id) {
  if (id === null) return;
  try {
    const doc = await api(`/api/documents/${id}`);
    if (current.view !== "detail" || current.id !== id) return;
    $("detail-heading").textContent = doc.filename;
    const facts = $("detail-facts");
    facts.replaceChildren();
    fact(facts, "Step", doc.status);
    fact(facts, "Type", doc.content_type);
    fact(facts, "Size", formatBytes(doc.byte_size));
    fact(facts, "Pages", doc.page_count == null ? "–" : doc.page_count);
    fact(facts, "Chunks", doc.chunk_count);
    fact(facts, "Extractor", doc.extractor || "–");
    fact(facts, "Uploaded", formatTime(doc.created_at));
    fact(facts, "SHA-256", doc.sha256);
    const error = $("detail-error");
    error.hidden = !doc.error;
    error.textContent = doc.error ? `This document failed: ${doc.error.message} (${doc.error.code})` : "";
    $("detail-file").href = `/api/documents/${doc.id}/file`;
    const sets = doc.embedding_sets.map((set) => {
      const row = el("tr");
      row.append(
        el("td", set.model_version),
        el("td", `${set.embedded} of ${set.chunk_count}`),
        el("td", set.completed_at ? formatTime(set.completed_at) : "not yet"),
      );
      return row;
    });
    if (sets.length === 0) {
      const row = el("tr");
      const cell = el("td", "No vectors yet.");
      cell.colSpan = 3;
      row.append(cell);
      sets.push(row);
    }
    document.querySelector("#detail-sets tbody").replaceChildren(...sets);
    $("detail-jobs").replaceChildren(...doc.jobs.map((job) => jobItem(job, () => refreshDetail(id))));
  } catch (err) {
    if (err instanceof ApiError && err.status === 404) {
      showError(`Document ${id} does not exist (any more).`);
      return;
    }
    reportError("Could not load the document", err);
  }
}

// The original file needs the token when one is set; a plain link cannot send it.
$("detail-file").addEventListener("click", async (event) => {
  if (!token()) return;
  event.preventDefault();
  try {
    const response = await fetch(event.currentTarget.href, { headers: authHeaders() });
    if (!response.ok) throw new Error(`the server answered ${response.status}`);
    const url = URL.createObjectURL(await response.blob());
    const link = el("a");
    link.href = url;
    link.download = $("detail-heading").textContent;
    link.click();
    setTimeout(() => URL.revokeObjectURL(url), 10000);
  } catch (err) {
    reportError("Could not download the file", err);
  }
});

$("delete-button").addEventListener("click", () => {
  $("delete-confirm").hidden = false;
  $("delete-button").hidden = true;
  $("delete-no").focus();
});

function closeDelete() {
  $("delete-confirm").hidden = true;
  $("delete-button").hidden = false;
}

$("delete-no").addEventListener("click", () => {
  closeDelete();
  $("delete-button").focus();
});

$("delete-yes").addEventListener("click", async () => {
  const id = current.id;
  try {
    await api(`/api/documents/${id}`, { method: "DELETE" });
    closeDelete();
    location.hash = "#documents";
  } catch (err) {
    reportError("Could not delete the document", err);
  }
});

// ---- Search ---------------------------------------------------------------------------------

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

$("search-form").addEventListener("submit", async (event) => {
  event.preventDefault();
  const q = $("search-q").value.trim();
  const mode = $("search-mode").value;
  const status = $("search-status");
  const results = $("search-results");
  if (!q) {
    status.textContent = "Type something to search for.";
    return;
  }
  status.textContent = "Searching…";
  try {
    const params = new URLSearchParams({ q, mode, k: "20" });
    const body = await api(`/api/search?${params}`);
    const items = body.hits.map((hit) => {
      const item = el("li");
      item.dataset.documentId = String(hit.document_id);
      item.dataset.page = String(hit.page);
      const title = el("p");
      const link = el("a", hit.filename, "filename");
      link.href = `#document/${hit.document_id}`;
      title.append(link);
      item.append(title);
      const where = el("p", null, "where");
      where.append(el("span", `page ${hit.page}`, "page"), `, chunk ${hit.chunk_index}, score ${hit.score.toFixed(4)} · `);
      const file = el("a", "original file");
      file.href = `/api/documents/${hit.document_id}/file`;
      where.append(file);
      item.append(where, snippetNode(hit));
      return item;
    });
    results.replaceChildren(...items);
    const note = body.semantic === false && mode !== "text" ? " (vectors from the hashing fallback: not semantic)" : "";
    status.textContent = `${items.length} result${items.length === 1 ? "" : "s"} for “${q}”, ${body.mode}${note}.`;
  } catch (err) {
    results.replaceChildren();
    status.textContent = `Search failed: ${err.message}`;
  }
});

// ---- Jobs -----------------------------------------------------------------------------------

async function refreshJobs() {
  try {
    const [stats, dead] = await Promise.all([api("/api/queue/stats"), api("/api/jobs?status=dead&limit=50")]);
    const rows = stats.kinds.map((k) => {
      const row = el("tr");
      row.dataset.kind = k.kind;
      row.append(el("th", k.kind));
      row.firstChild.scope = "row";
      for (const value of [k.ready, k.running, k.done, k.dead, k.cancelled]) row.append(el("td", value));
      return row;
    });
    document.querySelector("#queue-stats tbody").replaceChildren(...rows);
    const age = stats.oldest_due_age_seconds;
    $("oldest-due").textContent = age == null ? "none" : `${age.toFixed(1)} s`;
    $("dead-jobs").replaceChildren(...dead.jobs.map((job) => jobItem(job, refreshJobs)));
    $("dead-empty").hidden = dead.jobs.length > 0;
  } catch (err) {
    reportError("Could not load the jobs", err);
  }
}

// ---- Live updates ---------------------------------------------------------------------------

let source = null;
let pending = null;

/** Many changes arrive together (a step's job and document); refetch once for them all. */
function scheduleRefresh() {
  if (pending) return;
  pending = setTimeout(() => {
    pending = null;
    refreshView();
  }, 150);
}

function connectEvents() {
  if (source) source.close();
  const t = token();
  // EventSource cannot send headers: the token goes in the query of this one route.
  const url = t ? `/api/events?access_token=${encodeURIComponent(t)}` : "/api/events";
  source = new EventSource(url);
  const live = $("live");
  // hello comes on every (re)connection: whatever happened while away, refetch.
  source.addEventListener("hello", () => {
    live.textContent = "Live updates: on";
    refreshAll();
  });
  source.addEventListener("resync", () => refreshAll());
  source.addEventListener("change", scheduleRefresh);
  source.addEventListener("error", () => {
    // EventSource retries by itself; a 401 ends it, so ask for the token then.
    live.textContent = "Live updates: reconnecting…";
    if (source.readyState === EventSource.CLOSED) {
      live.textContent = "Live updates: off";
      fetch("/api/info", { headers: authHeaders() }).then((r) => {
        if (r.status === 401) askForToken();
      }, () => {});
    }
  });
}

// The jobs view shows ages; keep them fresh even when nothing notifies.
setInterval(() => {
  if (current.view === "jobs") refreshJobs();
}, 5000);

route();
refreshInfo();
connectEvents();
