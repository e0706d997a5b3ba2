// docket's page: upload, watch documents move through the pipeline, search, fix failures, run
// and pause schedules, follow a switch of the embedding model, and manage webhooks.
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

// ---- Header: the model, the embedder, a switch in progress ----------------------------------

function producerName(provider) {
  return {
    hash: "the hashing fallback",
    openai: "an OpenAI-compatible API",
    local: "the local model",
  }[provider] || provider;
}

/** The drop zone's text and the file picker's `accept`, from the server's list of formats. */
function showFormats(formats) {
  if (!Array.isArray(formats) || formats.length === 0) return;
  const names = formats.map((f) => f.name);
  const list = names.length > 1 ? `${names.slice(0, -1).join(", ")} or ${names[names.length - 1]}` : names[0];
  $("drop-zone").querySelector("span").textContent = `Drop files here, or choose files: ${list}`;
  const accept = formats.flatMap((f) => [...f.extensions, ...f.mime]);
  $("file-input").setAttribute("accept", accept.join(","));
}

async function refreshInfo() {
  try {
    const info = await api("/api/info");
    showFormats(info.formats);
    const target = $("model");
    target.replaceChildren();
    const active = info.active_model;
    if (!active) {
      target.append("Model: none active yet");
    } else {
      target.dataset.version = active.model_version;
      target.append(`Model: ${active.model_version} (${producerName(active.provider)}, ${active.dims} dimensions)`);
      if (active.provider === "hash") {
        target.append(" ");
        target.append(el("span", "not semantic: matches spellings, not meaning", "warn"));
      }
    }
    // What this server embeds queries (and new documents) with; it may differ from the active
    // version while a switch waits for a worker configured for the new one.
    const embedder = info.embedder;
    const line = $("embedder");
    line.dataset.version = embedder.model_version;
    line.dataset.provider = embedder.provider;
    line.textContent = `Embedder here: ${producerName(embedder.provider)}, ${embedder.model} `
      + `(${embedder.model_version}${embedder.semantic ? "" : ", not semantic"})`;
    const warning = $("embedder-warning");
    warning.textContent = embedder.warning ? `Warning: ${embedder.warning}` : "";
    warning.hidden = !embedder.warning;
  } catch (err) {
    reportError("Could not load the model", err);
  }
}

/**
 * A switch is under way while documents are still searched under an older version, or while the
 * active version lacks complete sets and an older one exists: then the header shows how far the
 * re-embedding has come.
 */
async function refreshModels() {
  lastModelsRefresh = Date.now();
  try {
    const { models } = await api("/api/models");
    const active = models.find((m) => m.active);
    const older = models.filter((m) => !m.active);
    const stillOld = older.reduce((n, m) => n + m.documents_searchable, 0);
    const box = $("switch");
    const underway = Boolean(active)
      && (stillOld > 0 || (older.length > 0 && active.documents_complete < active.documents_total));
    box.hidden = !underway;
    box.dataset.state = underway ? "underway" : "idle";
    if (!underway) return;
    const bar = $("switch-progress");
    bar.max = Math.max(active.documents_total, 1);
    bar.value = active.documents_complete;
    box.dataset.complete = String(active.documents_complete);
    box.dataset.total = String(active.documents_total);
    const rest = stillOld > 0
      ? `; ${stillOld} still searched under ${older.filter((m) => m.documents_searchable > 0).map((m) => m.model_version).join(", ")}`
      : "";
    $("switch-label").textContent =
      `Model switch: ${active.documents_complete} of ${active.documents_total} documents re-embedded under ${active.model_version}${rest}`;
  } catch (err) {
    reportError("Could not load the model versions", err);
  }
}

// /api/models counts every document's sets: refresh it from live events at most this often.
const MODELS_EVERY_MS = 2000;
let lastModelsRefresh = 0;
let modelsPending = null;

function scheduleModelsRefresh() {
  if (modelsPending) return;
  const wait = Math.max(0, lastModelsRefresh + MODELS_EVERY_MS - Date.now());
  modelsPending = setTimeout(() => {
    modelsPending = null;
    refreshModels();
  }, wait);
}

function refreshHeader() {
  refreshInfo();
  refreshModels();
}

// ---- Views (hash routing) -------------------------------------------------------------------

const VIEWS = ["documents", "detail", "search", "jobs", "schedules", "webhooks"];
const NAV = ["documents", "search", "jobs", "schedules", "webhooks"];
let current = { view: "documents", id: null };

function route() {
  const hash = location.hash.replace(/^#/, "");
  const match = /^document\/(\d+)$/.exec(hash);
  if (match) current = { view: "detail", id: Number(match[1]) };
  else if (VIEWS.includes(hash) && hash !== "detail") current = { view: hash, id: null };
  else current = { view: "documents", id: null };
  for (const view of VIEWS) $(`view-${view}`).hidden = view !== current.view;
  for (const link of NAV) {
    const active = current.view === link || (link === "documents" && current.view === "detail");
    if (active) $(`nav-${link}`).setAttribute("aria-current", "page");
    else $(`nav-${link}`).removeAttribute("aria-current");
  }
  showError("");
  refreshView();
  // Another view is a good moment to catch changes nothing notifies about (an activation).
  refreshHeader();
}

function refreshView() {
  if (current.view === "documents") return refreshDocuments();
  if (current.view === "detail") return refreshDetail(current.id);
  if (current.view === "jobs") return refreshJobs();
  if (current.view === "schedules") return refreshSchedules();
  if (current.view === "webhooks") return refreshWebhooks();
  return Promise.resolve();
}

function refreshAll() {
  refreshHeader();
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
  if (progress) cell.append(el("span", progress, "reason"));
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
  const dd = el("dd", value);
  list.append(el("dt", term), dd);
  return dd;
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
    const progress = progressText(doc);
    fact(facts, "Step", progress ? `${doc.status} (${progress})` : doc.status);
    fact(facts, "Type", doc.content_type);
    fact(facts, "Size", formatBytes(doc.byte_size));
    fact(facts, "Pages", doc.page_count == null ? "–" : doc.page_count);
    fact(facts, "Chunks", doc.chunk_count);
    fact(facts, "Extractor", doc.extractor || "–");
    if (doc.extract_note) fact(facts, "Extraction note", doc.extract_note);
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

/** One passage: where it is (its location, a link that opens the original there) and its
 * snippet. */
function hitNode(hit, switching) {
  const item = el("li", null, "hit");
  item.dataset.documentId = String(hit.document_id);
  item.dataset.page = String(hit.page);
  const where = el("p", null, "where");
  // The location as a person names it ("slide 2", "Sheet1, rows 4–9", a heading path);
  // plain text has none.
  if (hit.location) where.append(el("span", hit.location, "page"), " · ");
  const open = el("a", hit.content_type === "application/pdf" ? `open at page ${hit.page}` : "original file", "open");
  open.href = `/api/documents/${hit.document_id}/file`;
  open.addEventListener("click", (event) => {
    event.preventDefault();
    openOriginal(hit);
  });
  where.append(open);
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
  const link = el("a", group.filename, "filename");
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
    const params = new URLSearchParams({ q, mode, k: "10", group: "document" });
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
    status.textContent = `${count} for “${q}”, ${body.mode}${note}.${skipped.join("")}`;
  } catch (err) {
    results.replaceChildren();
    status.textContent = `Search failed: ${err.message}`;
  }
});

// ---- Jobs -----------------------------------------------------------------------------------

async function refreshJobs() {
  try {
    const [stats, dead, recent] = await Promise.all([
      api("/api/queue/stats"),
      api("/api/jobs?status=dead&limit=50"),
      api("/api/jobs?limit=20"),
    ]);
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
    const recentRows = recent.jobs.map((job) => {
      const row = el("tr");
      row.dataset.jobId = String(job.id);
      row.dataset.kind = job.kind;
      row.dataset.status = job.status;
      row.append(
        el("td", `#${job.id}`),
        el("td", job.kind),
        el("td", job.status, `status status-${job.status}`),
        el("td", `${job.attempts} of ${job.max_attempts}`),
        el("td", formatTime(job.created_at)),
      );
      return row;
    });
    document.querySelector("#recent-jobs tbody").replaceChildren(...recentRows);
  } catch (err) {
    reportError("Could not load the jobs", err);
  }
}

// ---- Schedules ------------------------------------------------------------------------------

function timeNode(iso, fallback) {
  if (!iso) return el("span", fallback);
  const node = el("time", formatTime(iso));
  node.dateTime = iso;
  node.title = iso;
  return node;
}

function scheduleItem(schedule) {
  const item = el("li");
  item.dataset.name = schedule.name;
  item.dataset.enabled = String(schedule.enabled);
  item.append(el("h3", schedule.name));
  const facts = el("dl", null, "facts");
  fact(facts, "Cron", schedule.cron);
  fact(facts, "Time zone", schedule.timezone);
  fact(facts, "Job kind", schedule.kind);
  const state = fact(facts, "State", schedule.enabled ? "enabled" : "disabled");
  state.className = `state state-${schedule.enabled ? "enabled" : "disabled"}`;
  const next = fact(facts, "Next firing", null);
  next.className = "next-firing";
  if (schedule.enabled) next.append(timeNode(schedule.next_firing, "none"));
  else next.append("none while disabled");
  const last = fact(facts, "Last firing", null);
  last.className = "last-firing";
  last.append(timeNode(schedule.last_fired_for, "never"));
  const plan = schedule.next_run_sends;
  if (plan) {
    const sends = fact(
      facts,
      "Next run sends",
      plan.documents === 0
        ? "nothing: every document is embedded under the active version"
        : `${plan.chunks} chunk${plan.chunks === 1 ? "" : "s"}, about ${plan.tokens} tokens, for ${plan.documents} document${plan.documents === 1 ? "" : "s"} (text already embedded is copied, not sent)`,
    );
    sends.className = "next-run-sends";
    sends.dataset.chunks = String(plan.chunks);
    sends.dataset.tokens = String(plan.tokens);
  }
  item.append(facts);

  const actions = el("div", null, "actions");
  const path = `/api/schedules/${encodeURIComponent(schedule.name)}`;
  const runNow = el("button", "Run now");
  runNow.type = "button";
  runNow.setAttribute("aria-label", `Run ${schedule.name} now`);
  runNow.addEventListener("click", async () => {
    runNow.disabled = true;
    try {
      const body = await api(`${path}/run-now`, { method: "POST" });
      const status = $("schedule-status");
      status.replaceChildren(`${schedule.name}: job #${body.job_id} enqueued; `);
      const link = el("a", "see the jobs view");
      link.href = "#jobs";
      status.append(link, ".");
      status.dataset.jobId = String(body.job_id);
    } catch (err) {
      reportError(`Could not run ${schedule.name}`, err);
    } finally {
      runNow.disabled = false;
    }
  });
  const toggle = el("button", schedule.enabled ? "Disable" : "Enable");
  toggle.type = "button";
  toggle.className = "toggle";
  toggle.setAttribute("aria-label", `${schedule.enabled ? "Disable" : "Enable"} ${schedule.name}`);
  toggle.addEventListener("click", async () => {
    toggle.disabled = true;
    try {
      await api(path, {
        method: "PATCH",
        headers: { "Content-Type": "application/json" },
        body: JSON.stringify({ enabled: !schedule.enabled }),
      });
      $("schedule-status").textContent = `${schedule.name} is ${schedule.enabled ? "disabled" : "enabled"}.`;
      await refreshSchedules();
      // The list was rebuilt: keep the keyboard where it was.
      const again = document.querySelector(`#schedule-list li[data-name="${CSS.escape(schedule.name)}"] .toggle`);
      if (again) again.focus();
    } catch (err) {
      reportError(`Could not change ${schedule.name}`, err);
      toggle.disabled = false;
    }
  });
  actions.append(runNow, toggle);
  item.append(actions);
  return item;
}

async function refreshSchedules() {
  try {
    const { schedules } = await api("/api/schedules");
    $("schedule-list").replaceChildren(...schedules.map(scheduleItem));
    $("schedules-empty").hidden = schedules.length > 0;
  } catch (err) {
    reportError("Could not load the schedules", err);
  }
}

// ---- Webhooks -------------------------------------------------------------------------------

function deliveryRow(webhook, delivery) {
  const row = el("tr");
  row.dataset.deliveryId = delivery.id;
  row.dataset.status = delivery.status;
  const actions = el("td");
  if (delivery.status === "dead") {
    const retry = el("button", "Retry");
    retry.type = "button";
    retry.setAttribute("aria-label", `Retry delivery ${delivery.id}`);
    retry.addEventListener("click", async () => {
      retry.disabled = true;
      try {
        await api(`/api/webhooks/${webhook.id}/deliveries/${delivery.id}/retry`, { method: "POST" });
        $("webhook-status").textContent = "The delivery is queued again.";
      } catch (err) {
        reportError("Could not retry the delivery", err);
      }
      refreshWebhooks();
    });
    actions.append(retry);
  }
  row.append(
    el("td", delivery.event_type),
    el("td", delivery.status, `status status-${delivery.status}`),
    el("td", delivery.attempts),
    el("td", delivery.last_error || "–"),
    el("td", formatTime(delivery.created_at)),
    actions,
  );
  return row;
}

async function webhookItem(webhook) {
  const item = el("li");
  item.dataset.webhookId = String(webhook.id);
  item.append(el("h3", webhook.url, "name"));
  item.append(el("p", `Events: ${webhook.events.join(", ")}`));
  const { deliveries } = await api(`/api/webhooks/${webhook.id}/deliveries`);
  if (deliveries.length === 0) {
    item.append(el("p", "No deliveries yet."));
  } else {
    const table = el("table");
    table.append(el("caption", "Recent deliveries, newest first", "visually-hidden"));
    const head = el("tr");
    for (const name of ["Event", "Status", "Attempts", "Last error", "Created", ""]) {
      const th = el("th", name);
      th.scope = "col";
      head.append(th);
    }
    const thead = el("thead");
    thead.append(head);
    const body = el("tbody");
    body.append(...deliveries.map((d) => deliveryRow(webhook, d)));
    table.append(thead, body);
    const scroll = el("div", null, "scroll");
    scroll.append(table);
    item.append(scroll);
  }
  const remove = el("button", "Delete webhook");
  remove.type = "button";
  remove.addEventListener("click", async () => {
    try {
      await api(`/api/webhooks/${webhook.id}`, { method: "DELETE" });
    } catch (err) {
      reportError("Could not delete the webhook", err);
    }
    refreshWebhooks();
  });
  item.append(remove);
  return item;
}

async function refreshWebhooks() {
  try {
    const { webhooks, events } = await api("/api/webhooks");
    const box = $("webhook-events");
    if (box.querySelectorAll("input").length === 0) {
      for (const name of events) {
        const label = el("label");
        const input = el("input");
        input.type = "checkbox";
        input.name = "events";
        input.value = name;
        label.append(input, ` ${name}`);
        box.append(label);
      }
    }
    const items = await Promise.all(webhooks.map(webhookItem));
    $("webhook-list").replaceChildren(...items);
    $("webhooks-empty").hidden = webhooks.length > 0;
  } catch (err) {
    reportError("Could not load the webhooks", err);
  }
}

$("webhook-form").addEventListener("submit", async (event) => {
  event.preventDefault();
  const events = Array.from(document.querySelectorAll('#webhook-events input:checked')).map((i) => i.value);
  try {
    const created = await api("/api/webhooks", {
      method: "POST",
      headers: { "Content-Type": "application/json" },
      body: JSON.stringify({ url: $("webhook-url").value, events }),
    });
    $("webhook-secret").textContent = created.secret;
    $("webhook-secret-box").hidden = false;
    $("webhook-status").textContent = "Registered. Keep the secret: receivers verify signatures with it.";
    $("webhook-url").value = "";
  } catch (err) {
    $("webhook-secret-box").hidden = true;
    $("webhook-status").textContent = `Not registered: ${err.message}`;
  }
  refreshWebhooks();
});

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
  scheduleModelsRefresh();
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

// The jobs and schedules views show ages and times; keep them fresh even when nothing notifies.
setInterval(() => {
  if (current.view === "jobs") refreshJobs();
  if (current.view === "schedules") refreshSchedules();
  if (current.view === "webhooks") refreshWebhooks();
}, 5000);

route();
connectEvents();
