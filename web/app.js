// docket's page: upload, watch documents move through the pipeline, search, fix failures, run
// and pause schedules, follow a switch of the embedding model, and manage webhooks.
//
// This file holds what every view shares (the API, the header, routing, the document detail,
// jobs, schedules, live updates); names.js shows file names safely, list.js the uploads and the
// document list, reader.js the extracted text, search.js the search view. They are classic
// scripts loaded in that order; the page starts once all are in (DOMContentLoaded).
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
  showTypeFilter(formats);
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

const VIEWS = ["documents", "detail", "read", "search", "jobs", "schedules", "webhooks"];
const NAV = ["documents", "search", "jobs", "schedules", "webhooks"];
let current = { view: "documents", id: null, query: "" };

/** The view the address names: `#document/ID`, `#read/ID?at=N`, `#search?q=…&mode=…`, … */
function parseHash(hash) {
  const [path, query = ""] = hash.replace(/^#/, "").split(/\?(.*)/s);
  const match = /^(document|read)\/(\d+)$/.exec(path);
  if (match) return { view: match[1] === "document" ? "detail" : "read", id: Number(match[2]), query };
  if (VIEWS.includes(path) && path !== "detail" && path !== "read") return { view: path, id: null, query };
  return { view: "documents", id: null, query: "" };
}

function route() {
  const before = current.view;
  const shown = current.id;
  current = parseHash(location.hash);
  if (current.view !== "detail" || current.id !== shown) retryWatch = null;
  for (const view of VIEWS) $(`view-${view}`).hidden = view !== current.view;
  // A new view takes the keyboard to its heading, as a new page would.
  if (before !== current.view) {
    const heading = $(`view-${current.view}`).querySelector("h2");
    if (heading && document.activeElement === document.body) {
      heading.tabIndex = -1;
      heading.focus({ preventScroll: true });
    }
  }
  // The address names the document: its Read link must lead there before (and whether or not)
  // its details load, or a quick click reads another document's text, or none.
  if (current.view === "detail") $("detail-read").href = `#read/${current.id}`;
  if (current.view === "search") showSearch(current.query);
  if (current.view === "read") showReader(current.id, current.query);
  for (const link of NAV) {
    const active = current.view === link || (link === "documents" && (current.view === "detail" || current.view === "read"));
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
  // The reader and search show what was asked for; live changes do not redo them.
  return Promise.resolve();
}

function refreshAll() {
  refreshHeader();
  refreshView();
}

window.addEventListener("hashchange", route);

// ---- Document detail ------------------------------------------------------------------------

function fact(list, term, value) {
  const dd = el("dd", value);
  list.append(el("dt", term), dd);
  return dd;
}

/** The document a job works on, if its payload names one. */
function jobDocumentId(job) {
  const id = job.payload && job.payload.document_id;
  return Number.isInteger(id) ? id : null;
}

/**
 * A retry a person asked for on this document's view, followed until the document settles:
 * `{ id, final }`, `final` the words for how it ended once it has (kept until another view).
 */
let retryWatch = null;

/** What the followed retry has done to `doc` so far, in words; null when nothing is followed. */
function retryProgress(doc) {
  if (!retryWatch || retryWatch.id !== doc.id) return null;
  if (retryWatch.final) return retryWatch.final;
  if (doc.status === "ready") {
    retryWatch.final = { text: "Tried again: ready, searchable.", failed: false };
  } else if (doc.status === "failed") {
    retryWatch.final = { text: `Tried again, and it failed: ${doc.error ? doc.error.message : "no reason given"}`, failed: true };
  }
  if (retryWatch.final) return retryWatch.final;
  const progress = progressText(doc);
  return { text: `Trying again: ${progress || doc.status}…`, failed: false };
}

/** Starts following a retry of document `id`, then shows the document as it is now. */
function followRetry(id) {
  retryWatch = { id, final: null };
  return refreshDetail(id);
}

/**
 * Whether a person's Retry can help with `job`: it is dead or cancelled; its document (when it
 * names one) still exists, did not fail for a reason the API marks permanent (the same bytes
 * fail the same way), and has no newer job that replaced this one.
 */
function retryHelps(job, doc) {
  if (job.status !== "dead" && job.status !== "cancelled") return false;
  if (jobDocumentId(job) === null) return true;
  if (!doc) return false;
  if (doc.status === "failed" && doc.error && doc.error.permanent === true) return false;
  const newest = Array.isArray(doc.jobs) ? Math.max(...doc.jobs.map((j) => j.id)) : job.id;
  return newest === job.id;
}

/**
 * A job: its kind and document, status, attempts (of its current run: a person's retry starts
 * a fresh one) and errors; Retry where a run can help. When its document failed for a reason
 * the API marks permanent (the file's own fault: encrypted, malformed, no text), advice
 * replaces the button. `doc` is the job's document when known, `null` when it is gone;
 * `afterRetry(job)` runs once the server took the retry.
 */
function jobItem(job, afterRetry, doc) {
  const item = el("li");
  item.dataset.jobId = String(job.id);
  item.dataset.status = job.status;
  const title = el("p");
  const documentId = jobDocumentId(job);
  title.append(el("strong", `${job.kind} #${job.id}`));
  if (documentId !== null) {
    title.append(" of ");
    if (doc) {
      const link = el("a", null, "job-document");
      link.href = `#document/${documentId}`;
      link.append(nameNode(doc.filename));
      title.append(link);
    } else {
      title.append(el("span", `document ${documentId} (deleted)`, "job-document"));
    }
  }
  title.append(` — ${job.status}, `);
  title.append(el("span", `attempts ${job.attempts} of ${job.max_attempts}`, "attempts"));
  if (job.retries > 0) title.append(el("span", `, retried by a person ${job.retries === 1 ? "once" : `${job.retries} times`}`, "retries"));
  item.append(title);
  if (job.last_error) item.append(el("p", `Last error: ${job.last_error}`, "error"));
  const errors = Array.isArray(job.errors) ? job.errors : [];
  if (errors.length > 0) {
    const details = el("details", null, "history");
    details.append(el("summary", `Error history (${errors.length})`));
    const list = el("ol");
    const retriedAt = job.retried_at ? new Date(job.retried_at) : null;
    for (const entry of errors) {
      const earlier = retriedAt && new Date(entry.at) <= retriedAt ? " (before the last retry)" : "";
      list.append(el("li", `attempt ${entry.attempt}${earlier}, ${formatTime(entry.at)}: ${entry.error}`));
    }
    details.append(list);
    item.append(details);
  }
  if (job.status !== "dead" && job.status !== "cancelled") return item;
  const permanent = doc && doc.status === "failed" && doc.error && doc.error.permanent === true;
  if (permanent) {
    item.append(el(
      "p",
      `Retrying cannot help: ${doc.error.message}. The same file fails the same way; upload a corrected copy, or delete this document.`,
      "advice",
    ));
    return item;
  }
  if (!retryHelps(job, doc)) return item; // gone, or replaced by a newer job: nothing to act on
  const retry = el("button", "Retry");
  retry.type = "button";
  retry.setAttribute("aria-label", `Retry ${job.kind} job ${job.id}`);
  const note = el("span", "", "outcome");
  note.setAttribute("role", "status");
  retry.addEventListener("click", async () => {
    retry.disabled = true;
    note.textContent = " Retrying…";
    try {
      const fresh = await api(`/api/jobs/${job.id}/retry`, { method: "POST" });
      note.textContent = ` Queued again: attempt 1 of ${fresh.max_attempts} next.`;
      afterRetry(fresh);
    } catch (err) {
      note.textContent = ` Could not retry: ${err.message}`;
      retry.disabled = false;
    }
  });
  item.append(retry, note);
  return item;
}

async function refreshDetail(id) {
  if (id === null) return;
  try {
    const doc = await api(`/api/documents/${id}`);
    if (current.view !== "detail" || current.id !== id) return;
    $("detail-gone").hidden = true;
    $("detail-body").hidden = false;
    $("detail-heading").replaceChildren(nameNode(doc.filename));
    $("detail-heading").dataset.filename = doc.filename;
    $("detail-read").href = `#read/${doc.id}`;
    const facts = $("detail-facts");
    facts.replaceChildren();
    const progress = progressText(doc);
    fact(facts, "Step", progress ? `${doc.status} (${progress})` : doc.status);
    fact(facts, "Type", doc.content_type);
    fact(facts, "Size", formatBytes(doc.byte_size));
    fact(facts, "Pages", doc.page_count == null ? "–" : doc.page_count);
    fact(facts, "Chunks", doc.chunk_count);
    fact(facts, "Extractor", doc.extractor || "–");
    const note = extractionNote(doc);
    if (note) fact(facts, "Extraction note", note).className = "note";
    fact(facts, "Uploaded", formatTime(doc.created_at));
    fact(facts, "SHA-256", doc.sha256);
    const error = $("detail-error");
    error.hidden = !doc.error;
    error.textContent = doc.error ? `This document failed: ${doc.error.message}` : "";
    const outcome = retryProgress(doc);
    const line = $("detail-retry");
    line.textContent = outcome ? outcome.text : "";
    line.classList.toggle("error", Boolean(outcome && outcome.failed));
    line.hidden = !outcome;
    // The whole document again, from its original bytes, where a run can help: a writer's
    // retry (the job's Retry below needs an admin).
    const again = doc.status === "failed" && !(doc.error && doc.error.permanent === true);
    $("detail-again").hidden = !again;
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
    const jobs = doc.jobs.map((job) => jobItem({ ...job, payload: { document_id: doc.id } }, () => followRetry(id), doc));
    $("detail-jobs").replaceChildren(...jobs);
  } catch (err) {
    if (err instanceof ApiError && err.status === 404) {
      showGoneDocument(id);
      return;
    }
    reportError("Could not load the document", err);
  }
}

/**
 * How the text was obtained, as the server describes it (one description, written with the
 * state it describes); documents extracted before it was recorded show their old note.
 */
function extractionNote(doc) {
  if (doc.extraction) return doc.extraction.summary;
  return doc.extract_note || null;
}

/** A document that does not exist (deleted, or never was): said so, with nothing to act on. */
function showGoneDocument(id, name) {
  $("detail-heading").textContent = "Document gone";
  $("detail-body").hidden = true;
  $("detail-error").hidden = true;
  $("detail-facts").replaceChildren();
  const gone = $("detail-gone");
  gone.textContent = name
    ? `“${visibleName(name)}” was deleted, with its text and vectors.`
    : `Document ${id} does not exist: it was deleted, or never was.`;
  gone.hidden = false;
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
    link.download = $("detail-heading").dataset.filename || "document";
    link.click();
    setTimeout(() => URL.revokeObjectURL(url), 10000);
  } catch (err) {
    reportError("Could not download the file", err);
  }
});

$("detail-again").addEventListener("click", async () => {
  const id = current.id;
  const button = $("detail-again");
  button.disabled = true;
  try {
    await api(`/api/documents/${id}/reprocess`, { method: "POST" });
    await followRetry(id);
    $("detail-retry").focus();
  } catch (err) {
    reportError("Could not process the document again", err);
  } finally {
    button.disabled = false;
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
    const name = $("detail-heading").dataset.filename;
    await api(`/api/documents/${id}`, { method: "DELETE" });
    closeDelete();
    // Stay here and say what happened: the view shows the document gone, with no actions.
    showGoneDocument(id, name);
    $("detail-gone").tabIndex = -1;
    $("detail-gone").focus();
  } catch (err) {
    reportError("Could not delete the document", err);
  }
});

// ---- Jobs -----------------------------------------------------------------------------------

/** The documents jobs name, fetched once each: id → document, or null when it is gone. */
async function jobDocuments(jobs) {
  const ids = [...new Set(jobs.map(jobDocumentId).filter((id) => id !== null))];
  const found = await Promise.all(ids.map((id) => api(`/api/documents/${id}`).catch((err) => {
    if (err instanceof ApiError && err.status === 404) return null;
    throw err;
  })));
  return new Map(ids.map((id, i) => [id, found[i]]));
}

/** Jobs retried from the jobs view, newest first: each line follows the job's document. */
const retriedJobs = [];

function retriedHere(job) {
  retriedJobs.unshift(job);
  refreshJobs();
}

/** One line per job retried here: how its fresh run, and its document, are doing. */
function showRetried(docs) {
  const lines = retriedJobs.slice(0, 10).map((job) => {
    const doc = docs.get(jobDocumentId(job));
    let text = `${job.kind} #${job.id}: queued again`;
    if (doc && doc.status === "ready") text = `${job.kind} #${job.id} of ${visibleName(doc.filename)}: ready, searchable.`;
    else if (doc && doc.status === "failed") text = `${job.kind} #${job.id} of ${visibleName(doc.filename)} failed again: ${doc.error ? doc.error.message : "no reason given"}`;
    else if (doc) text = `${job.kind} #${job.id} of ${visibleName(doc.filename)}: ${progressText(doc) || doc.status}…`;
    const item = el("li", text, doc && doc.status === "failed" ? "error" : null);
    item.dataset.jobId = String(job.id);
    item.dataset.status = doc ? doc.status : "";
    return item;
  });
  $("retried-jobs").replaceChildren(...lines);
  $("retried-jobs").hidden = lines.length === 0;
}

async function refreshJobs() {
  try {
    const [stats, dead, recent] = await Promise.all([
      api("/api/queue/stats"),
      api("/api/jobs?status=dead&limit=50"),
      api("/api/jobs?limit=20"),
    ]);
    const docs = await jobDocuments([...dead.jobs, ...recent.jobs, ...retriedJobs]);
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
    $("dead-jobs").replaceChildren(...dead.jobs.map((job) => jobItem(job, (fresh) => retriedHere(fresh), docs.get(jobDocumentId(job)))));
    showRetried(docs);
    $("dead-empty").hidden = dead.jobs.length > 0;
    const recentRows = recent.jobs.map((job) => {
      const row = el("tr");
      row.dataset.jobId = String(job.id);
      row.dataset.kind = job.kind;
      row.dataset.status = job.status;
      const documentId = jobDocumentId(job);
      const doc = docs.get(documentId);
      const what = el("td", null, "name");
      if (doc) {
        const link = el("a", null, "job-document");
        link.href = `#document/${documentId}`;
        link.append(nameNode(doc.filename));
        what.append(link);
      } else if (documentId !== null) {
        what.append(`document ${documentId} (deleted)`);
      } else {
        what.append("–");
      }
      row.append(
        el("td", `#${job.id}`),
        el("td", job.kind),
        what,
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
  runNow.setAttribute("aria-label", `Run now: ${schedule.name}`);
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

// Every script of the page is in once the document is parsed (they are deferred, in order).
document.addEventListener("DOMContentLoaded", () => {
  route();
  connectEvents();
});
