// Collections on the page: the picker in the header (which collection uploads go into, and
// which ones the list and search cover), what each collection holds, and a form to create one.
// The server decides what the caller may see: GET /api/collections lists only the caller's
// collections, so a reader's picker never names another team's. Loaded after app.js.
"use strict";

const COLLECTION_KEY = "docket.collection";

/** The picked collection's name, or "" for every collection the caller may read. */
function currentCollection() {
  const picker = document.getElementById("collection-picker");
  return picker ? picker.value : "";
}

/** `params` (a URLSearchParams) narrowed to the picked collection, when one is picked. */
function withCollection(params) {
  const name = currentCollection();
  if (name) params.set("collection", name);
  return params;
}

/** Where an upload goes: the picked collection, else `default`. */
function uploadPath() {
  const name = currentCollection() || "default";
  return `/api/documents?${new URLSearchParams({ collection: name })}`;
}

/** Fills the picker and the usage table from GET /api/collections. */
async function refreshCollections() {
  const picker = $("collection-picker");
  let body;
  try {
    body = await api("/api/collections");
  } catch (err) {
    if (err instanceof ApiError && err.status === 401) return;
    throw err;
  }
  const list = Array.isArray(body.collections) ? body.collections : [];
  const wanted = picker.value || localStorage.getItem(COLLECTION_KEY) || "";
  const all = el("option", "All collections");
  all.value = "";
  const options = list.map((c) => {
    const option = el("option", c.name);
    option.value = c.name;
    return option;
  });
  const before = picker.value;
  picker.replaceChildren(all, ...options);
  picker.value = list.some((c) => c.name === wanted) ? wanted : "";
  picker.dataset.loaded = "true";
  if (picker.value !== before) refreshDocuments();

  const rows = list.map((c) => {
    const tokens = (c.embedding_tokens || []).map((t) => `${t.tokens} (${t.model_version})`);
    const row = el("tr");
    row.append(
      el("td", c.name),
      el("td", String(c.documents)),
      el("td", String(c.chunks)),
      el("td", formatBytes(c.bytes)),
      el("td", tokens.join(", ") || "–"),
    );
    return row;
  });
  $("collection-usage").replaceChildren(...rows);
}

function setUpCollections() {
  const picker = $("collection-picker");
  picker.addEventListener("change", () => {
    localStorage.setItem(COLLECTION_KEY, picker.value);
    refreshDocuments();
    if (location.hash.startsWith("#search?")) {
      lastSearch = null;
      route();
    }
  });
  $("collection-form").addEventListener("submit", async (event) => {
    event.preventDefault();
    const input = $("collection-name");
    const status = $("collection-status");
    status.textContent = "";
    try {
      await api("/api/collections", {
        method: "POST",
        headers: { "Content-Type": "application/json" },
        body: JSON.stringify({ name: input.value.trim() }),
      });
      status.textContent = `Collection ${input.value.trim()} created.`;
      localStorage.setItem(COLLECTION_KEY, input.value.trim());
      picker.value = input.value.trim();
      input.value = "";
      await refreshCollections();
      refreshDocuments();
    } catch (err) {
      status.textContent = err.message;
    }
  });
  const refresh = () => refreshCollections().catch((err) => showError(err.message));
  // The counts are read when the table is opened; a token given later reloads the picker.
  $("collections").addEventListener("toggle", () => {
    if ($("collections").open) refresh();
  });
  $("token-form").addEventListener("submit", refresh);
  refresh();
}

document.addEventListener("DOMContentLoaded", setUpCollections);
