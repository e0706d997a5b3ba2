// docket's page in a real browser: Debian's chromium driven by playwright-core, against a real
// `docket serve` (the debug binary cargo built) on a fresh PostgreSQL database. DOCKET_EMBEDDER is
// left unset and DOCKET_MODEL_DIR points at an empty directory, so docket falls back to the
// hashing embedder exactly as on a machine without the model, and says so. Nothing is mocked: files are uploaded through the page's own file input, the
// pipeline runs in the server's workers, and the page follows it through server-sent events.
//
// Run with `make browser-test` (or `npm test` here after `cargo build`). Screenshots of each
// view at 360 px and 1280 px go to test-output/browser/ at the repository root.

import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { spawn, execFileSync } from "node:child_process";
import { mkdirSync, mkdtempSync, rmSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import http from "node:http";
import { chromium } from "playwright-core";

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../..");
const BINARY = path.join(ROOT, "target/debug/docket");
const OUTPUT = path.join(ROOT, "test-output/browser");
const FIXTURES = path.join(ROOT, "fixtures");
// Generous: a cold debug build extracts PDFs in child processes on a shared 2-core machine.
const PIPELINE_TIMEOUT = 120_000;

const READY_FILES = ["text/pdfjs-README.md", "pdf/cjk-ko-doc.pdf"];
const BROKEN_FILE = "malformed/invalid.pdf";
// No double quotes: browsers percent-encode them in multipart file names.
const EVIL_NAME = "<script>window.__xss=1</script><img src=x onerror=window.__xss=2>.txt";

let server;
let serverLog = "";
let baseUrl;
let browser;
let page;
let adminUrl;
let databaseName;
let databaseUrl;
let emptyModelDir;
const pageProblems = [];

/** The server the tests' database lives on: DATABASE_URL, else what scripts/db.sh finds. */
function serverUrl() {
  const url = process.env.DATABASE_URL || execFileSync(path.join(ROOT, "scripts/db.sh"), { encoding: "utf8" }).trim();
  return new URL(url);
}

function psql(url, sql) {
  execFileSync("psql", ["-X", "-q", "-v", "ON_ERROR_STOP=1", url, "-c", sql], { stdio: ["ignore", "ignore", "pipe"] });
}

/** The one value `sql` selects from the test database, as psql prints it. */
function psqlValue(sql) {
  return execFileSync("psql", ["-X", "-q", "-tA", "-v", "ON_ERROR_STOP=1", databaseUrl, "-c", sql], {
    encoding: "utf8",
    stdio: ["ignore", "pipe", "pipe"],
  }).trim();
}

/** JSON from docket's API, outside the page (what an operator's script would do). */
async function apiJson(pathAndQuery, options = {}) {
  const response = await fetch(`${baseUrl}${pathAndQuery}`, {
    ...options,
    headers: { "Content-Type": "application/json", ...(options.headers || {}) },
  });
  assert.ok(response.ok, `${pathAndQuery}: ${response.status} ${await response.clone().text()}`);
  return response.json();
}

/** Starts `docket serve` on a port the OS picks and resolves with its base URL. */
function startServer(databaseUrl) {
  return new Promise((resolve, reject) => {
    const env = {
      ...process.env,
      DATABASE_URL: databaseUrl,
      DOCKET_MODEL_DIR: emptyModelDir,
      DOCKET_API_TOKEN: "",
      DOCKET_POLL_MS: "500",
      // The webhook receiver of the webhooks test listens on loopback.
      DOCKET_WEBHOOK_ALLOW_LOOPBACK: "true",
      RUST_LOG: "info,sqlx=warn",
      NO_COLOR: "1",
    };
    // Unset, so the default applies: the local model, missing here, hence the hash fallback.
    delete env.DOCKET_EMBEDDER;
    server = spawn(BINARY, ["serve", "--bind", "127.0.0.1:0"], {
      cwd: ROOT,
      env,
      stdio: ["ignore", "ignore", "pipe"],
    });
    const timer = setTimeout(() => reject(new Error(`docket serve did not start:\n${serverLog}`)), 60_000);
    server.stderr.setEncoding("utf8");
    server.stderr.on("data", (text) => {
      serverLog += text;
      const match = /listening on (http:\/\/127\.0\.0\.1:\d+)/.exec(serverLog.replace(/\x1b\[[0-9;]*m/g, ""));
      if (match) {
        clearTimeout(timer);
        resolve(match[1]);
      }
    });
    server.on("exit", (code) => {
      clearTimeout(timer);
      reject(new Error(`docket serve exited with ${code}:\n${serverLog}`));
    });
  });
}

before(async () => {
  mkdirSync(OUTPUT, { recursive: true });
  const url = serverUrl();
  databaseName = `docket_browser_${process.pid}_${Date.now()}`;
  const admin = new URL(url);
  admin.pathname = "/postgres";
  adminUrl = admin.toString();
  psql(adminUrl, `create database ${databaseName}`);
  const own = new URL(url);
  own.pathname = `/${databaseName}`;
  databaseUrl = own.toString();
  emptyModelDir = mkdtempSync(path.join(os.tmpdir(), "docket-no-model-"));
  baseUrl = await startServer(databaseUrl);
  browser = await chromium.launch({
    executablePath: "/usr/bin/chromium",
    args: [
      "--headless",
      "--no-sandbox",
      "--disable-gpu",
      "--disable-background-networking",
      "--disable-component-update",
      "--no-first-run",
    ],
  });
  page = await browser.newPage({ viewport: { width: 1280, height: 900 } });
  // A CSP violation or a script error is a failure of the page, whatever the test checks.
  page.on("console", (message) => {
    if (message.type() === "error" && !/Failed to load resource/.test(message.text())) {
      pageProblems.push(`console: ${message.text()}`);
    }
  });
  page.on("pageerror", (error) => pageProblems.push(`page error: ${error.message}`));
  await page.goto(baseUrl);
  await page.evaluate(() => {
    window.__notReloaded = true;
  });
});

after(async () => {
  await browser?.close();
  if (server && server.exitCode === null) {
    const exited = new Promise((resolve) => server.once("exit", resolve));
    server.kill("SIGTERM");
    await Promise.race([exited, new Promise((resolve) => setTimeout(resolve, 15_000))]);
    if (server.exitCode === null) server.kill("SIGKILL");
  }
  if (databaseName) psql(adminUrl, `drop database if exists ${databaseName} with (force)`);
  if (emptyModelDir) rmSync(emptyModelDir, { recursive: true, force: true });
});

async function statusOf(filename) {
  return page.evaluate((name) => {
    for (const row of document.querySelectorAll("#doc-list tbody tr")) {
      if (row.querySelector("td.name")?.textContent === name) {
        return { status: row.dataset.status, text: row.querySelector("td.status")?.textContent ?? "" };
      }
    }
    return null;
  }, filename);
}

async function waitForStatus(filename, status) {
  await page.waitForFunction(
    ([name, wanted]) =>
      Array.from(document.querySelectorAll("#doc-list tbody tr")).some(
        (row) => row.querySelector("td.name")?.textContent === name && row.dataset.status === wanted,
      ),
    [filename, status],
    { timeout: PIPELINE_TIMEOUT },
  );
}

test("the header names the active model and marks the hashing fallback as not semantic", async () => {
  await page.waitForFunction(() => /hash:v1:384/.test(document.getElementById("model").textContent));
  const header = await page.textContent("#model");
  assert.match(header, /hashing fallback/);
  assert.match(header, /not semantic/);
  await page.waitForFunction(() => document.getElementById("live").textContent.includes("on"));
});

test("the header says which embedder this server uses and warns visibly that it is the fallback", async () => {
  await page.waitForFunction(() => /hash:v1:384/.test(document.getElementById("embedder").textContent));
  assert.match(await page.textContent("#embedder"), /^Embedder here: the hashing fallback, v1 \(hash:v1:384:c200o30, not semantic\)$/);
  await page.locator("#embedder-warning").waitFor({ state: "visible" });
  const warning = await page.textContent("#embedder-warning");
  assert.ok(warning.includes(`no embedding model in ${emptyModelDir}`), warning);
  assert.match(warning, /hashing embedder, which matches spellings, not meaning; run scripts\/get-model\.sh/);
  assert.equal(await page.getAttribute("#embedder-warning", "role"), "alert");
  // The same sentence the API gives (and the log printed at start-up).
  const info = await apiJson("/api/info");
  assert.equal(warning, `Warning: ${info.embedder.warning}`);
  assert.ok(serverLog.includes(info.embedder.warning), "the log says it too");
});

test("three uploaded files become two ready documents and one failure with its reason, live", async () => {
  const files = [...READY_FILES, BROKEN_FILE].map((f) => path.join(FIXTURES, f));
  await page.getByLabel(/Drop files here/).setInputFiles(files);
  for (const file of files) {
    const name = path.basename(file);
    await page.waitForFunction(
      (n) =>
        Array.from(document.querySelectorAll("#uploads li")).some(
          (li) => li.querySelector(".name").textContent === n && li.querySelector("progress").value === 100,
        ),
      name,
    );
  }
  for (const file of READY_FILES) await waitForStatus(path.basename(file), "ready");
  await waitForStatus(path.basename(BROKEN_FILE), "failed");
  const broken = await statusOf(path.basename(BROKEN_FILE));
  assert.match(broken.text, /malformed/i, "the failure says why");
  assert.equal(await page.evaluate(() => window.__notReloaded), true, "the page was never reloaded");
  assert.match(await page.textContent("#doc-counts"), /ready 2, failed 1/);
});

test("an unsupported file is rejected with the reason next to its name", async () => {
  // A GIF: PNG, JPEG and TIFF are read by OCR, other image types are refused.
  const gif = Buffer.from("R0lGODlhAQABAIAAAP///wAAACwAAAAAAQABAAACAkQBADs=", "base64");
  await page.getByLabel(/Drop files here/).setInputFiles({
    name: "picture.gif",
    mimeType: "image/gif",
    buffer: gif,
  });
  await page.waitForFunction(() =>
    Array.from(document.querySelectorAll("#uploads li")).some(
      (li) => li.querySelector(".name").textContent === "picture.gif" && /Rejected: /.test(li.textContent),
    ),
  );
});

test("searching a phrase from the Korean PDF puts that file and its page on top", async () => {
  await page.click("#nav-search");
  await page.getByLabel("Search for").fill("usecjkt1font");
  await page.getByLabel("Mode", { exact: true }).selectOption("hybrid");
  await page.getByRole("button", { name: "Search", exact: true }).click();
  await page.waitForFunction(() => document.querySelectorAll("#search-results li").length > 0);
  const top = await page.evaluate(() => {
    const item = document.querySelector("#search-results li");
    return {
      filename: item.querySelector(".filename").textContent,
      page: item.dataset.page,
      marked: Array.from(item.querySelectorAll("mark")).map((m) => m.textContent),
    };
  });
  assert.equal(top.filename, "cjk-ko-doc.pdf");
  assert.equal(top.page, "3", "pdftotext puts usecjkt1font on page 3");
  assert.ok(top.marked.includes("usecjkt1font"), `highlighted: ${top.marked}`);
});

test("results are grouped by document, so one long document does not fill the first page", async () => {
  await page.click("#nav-search");
  // Both ready files talk about PDF; the README does in many of its chunks.
  await page.getByLabel("Search for").fill("PDF files");
  await page.getByLabel("Mode", { exact: true }).selectOption("text");
  await page.getByRole("button", { name: "Search", exact: true }).click();
  await page.waitForFunction(() => /results? in \d+ documents? for/.test(document.getElementById("search-status").textContent));
  const groups = await page.evaluate(() =>
    Array.from(document.querySelectorAll("#search-results > li")).map((item) => ({
      filename: item.querySelector(".filename").textContent,
      more: item.querySelector(".more summary")?.textContent ?? null,
      nested: Array.from(item.querySelectorAll(".more-hits > li")).map((li) => li.dataset.documentId),
      id: item.dataset.documentId,
      marked: Array.from(item.querySelectorAll(":scope > .snippet mark")).map((m) => m.textContent.toLowerCase()),
    })),
  );
  const names = groups.map((g) => g.filename);
  assert.ok(names.includes("pdfjs-README.md") && names.includes("cjk-ko-doc.pdf"), `groups: ${names}`);
  assert.equal(new Set(names).size, names.length, `one entry per document: ${names}`);
  const readme = groups.find((g) => g.filename === "pdfjs-README.md");
  assert.match(readme.more, /^\d+ more in this document$/);
  assert.ok(readme.nested.length > 0 && readme.nested.every((id) => id === readme.id));
  assert.ok(readme.marked.every((m) => m === "pdf" || m === "files" || m === "file"), `marked: ${readme.marked}`);
  // No score of fusion internals is shown to the person.
  assert.doesNotMatch(await page.textContent("#search-results"), /score/);
  await page.locator("#search-results > li .more summary").first().click();
  await page.screenshot({ path: path.join(OUTPUT, "search-grouped.png"), fullPage: true });
});

test("a job that failed for the file's own reason offers advice, not a Retry that cannot help", async () => {
  await page.click("#nav-documents");
  await page.locator("#doc-list").getByRole("link", { name: path.basename(BROKEN_FILE) }).click();
  const dead = page.locator('#detail-jobs li[data-status="dead"]');
  await dead.first().waitFor({ timeout: PIPELINE_TIMEOUT });
  await dead.first().locator(".advice").waitFor();
  assert.match(await dead.first().locator(".advice").textContent(), /^Retrying cannot help: .*malformed/i);
  assert.equal(await dead.first().getByRole("button", { name: /^Retry/ }).count(), 0);
  assert.match(await page.textContent("#detail-error"), /malformed/i);
  assert.doesNotMatch(await page.textContent("#detail-error"), /pdf_malformed/, "no internal code");
});

test("a file name holding markup shows as text and runs nothing", async () => {
  await page.click("#nav-documents");
  await page.getByLabel(/Drop files here/).setInputFiles({
    name: EVIL_NAME,
    mimeType: "text/plain",
    buffer: Buffer.from("Plain words about harmless things, enough to make one chunk.\n"),
  });
  await page.waitForFunction(
    (name) => Array.from(document.querySelectorAll("#doc-list td.name")).some((td) => td.textContent === name),
    EVIL_NAME,
  );
  await waitForStatus(EVIL_NAME, "ready");
  await page.locator("#doc-list").getByRole("link", { name: EVIL_NAME }).click();
  await page.waitForFunction((name) => document.getElementById("detail-heading").textContent === name, EVIL_NAME);
  assert.equal(await page.evaluate(() => window.__xss), undefined, "no injected script ran");
  assert.equal(await page.locator("main img, main script").count(), 0, "no element came from the name");
});

test("the jobs view counts jobs per kind and status", async () => {
  await page.click("#nav-jobs");
  await page.waitForFunction(() => document.querySelector('#queue-stats tr[data-kind="extract"]'));
  const cells = await page.locator('#queue-stats tr[data-kind="extract"] td').allTextContents();
  const [ready, running, done, dead] = cells.map(Number);
  assert.ok(done >= 3, `extract done: ${cells}`);
  assert.equal(ready + running + dead >= 1, true, `the broken file's job is counted: ${cells}`);
  await page.waitForFunction(() => document.querySelectorAll("#dead-jobs li").length >= 1, null, {
    timeout: PIPELINE_TIMEOUT,
  });
  assert.match(await page.textContent("#dead-jobs"), /Error history/);
});

test("the schedules view lists nightly-reembed with its firings, and Disable then Enable change the database", async () => {
  await page.click("#nav-schedules");
  const item = page.locator('#schedule-list li[data-name="nightly-reembed"]');
  await item.waitFor();
  const schedule = await apiJson("/api/schedules/nightly-reembed");
  assert.ok(schedule.next_firing, "the API has a next firing");
  assert.equal(await item.locator(".next-firing time").getAttribute("datetime"), schedule.next_firing);
  assert.match(await item.textContent(), /Cron0 2 \* \* \*/);
  assert.match(await item.textContent(), /Time zoneUTC/);
  assert.match(await item.textContent(), /Job kindreembed/);
  assert.equal(await item.locator(".last-firing").textContent(), "never");
  // Every document is embedded under the active version: the next run would send nothing.
  assert.equal(await item.locator(".next-run-sends").getAttribute("data-chunks"), String(schedule.next_run_sends.chunks));
  assert.match(await item.locator(".next-run-sends").textContent(), /^nothing/);
  assert.equal(await item.locator(".state").textContent(), "enabled");

  await item.getByRole("button", { name: "Disable nightly-reembed" }).click();
  await page.locator('#schedule-list li[data-name="nightly-reembed"][data-enabled="false"]').waitFor();
  assert.equal(psqlValue("select enabled from schedules where name = 'nightly-reembed'"), "f");
  assert.equal((await apiJson("/api/schedules/nightly-reembed")).enabled, false);
  assert.equal(await item.locator(".next-firing").textContent(), "none while disabled");
  assert.equal(await page.evaluate(() => document.activeElement?.textContent), "Enable", "focus stays on the button");

  await item.getByRole("button", { name: "Enable nightly-reembed" }).click();
  await page.locator('#schedule-list li[data-name="nightly-reembed"][data-enabled="true"]').waitFor();
  assert.equal(psqlValue("select enabled from schedules where name = 'nightly-reembed'"), "t");
  assert.equal((await apiJson("/api/schedules/nightly-reembed")).enabled, true);
  assert.equal(await item.locator(".next-firing time").getAttribute("datetime"), schedule.next_firing);
});

test("a model switch shows its progress, search still finds documents, and Run now re-embeds until it is done", async () => {
  // An operator registers and activates a second version (other dimensions) through the API.
  const added = await apiJson("/api/models", {
    method: "POST",
    body: JSON.stringify({ provider: "hash", model: "v1", dims: 24, chunk_tokens: 200, chunk_overlap: 30 }),
  });
  const version = added.model.model_version;
  assert.equal(version, "hash:v1:24:c200o30");
  await apiJson(`/api/models/${encodeURIComponent(version)}/activate`, { method: "POST" });
  const { models } = await apiJson("/api/models");
  const total = models.find((m) => m.active).documents_total;
  assert.ok(total >= 3, `documents with chunks: ${total}`);

  // Changing views refreshes the header, which now shows the switch at its start.
  await page.click("#nav-search");
  await page.locator("#switch").waitFor({ state: "visible" });
  assert.equal(
    await page.textContent("#switch-label"),
    `Model switch: 0 of ${total} documents re-embedded under ${version}; ${total} still searched under hash:v1:384:c200o30`,
  );
  assert.equal(await page.evaluate(() => document.getElementById("switch-progress").value), 0);
  assert.equal(await page.evaluate(() => document.getElementById("switch-progress").max), total);
  await page.waitForFunction((v) => document.getElementById("model").dataset.version === v, version);
  await page.screenshot({ path: path.join(OUTPUT, "switch-1280.png") });

  // No document has vectors under the new version yet; vector search finds them under the old.
  await page.getByLabel("Search for").fill("usecjkt1font");
  await page.getByLabel("Mode", { exact: true }).selectOption("vector");
  await page.getByRole("button", { name: "Search", exact: true }).click();
  await page.waitForFunction(() => /results? in \d+ documents? for/.test(document.getElementById("search-status").textContent));
  assert.equal(await page.textContent("#search-results li .filename"), "cjk-ko-doc.pdf");
  assert.equal(await page.textContent("#search-results li .version"), " · under hash:v1:384:c200o30");

  // Run now enqueues the reembed job; the jobs view shows it.
  await page.click("#nav-schedules");
  const item = page.locator('#schedule-list li[data-name="nightly-reembed"]');
  await item.waitFor();
  await item.getByRole("button", { name: "Run now: nightly-reembed" }).click();
  await page.waitForFunction(() => document.getElementById("schedule-status").dataset.jobId);
  const jobId = await page.getAttribute("#schedule-status", "data-job-id");
  assert.match(await page.textContent("#schedule-status"), new RegExp(`job #${jobId} enqueued`));
  assert.equal(psqlValue(`select kind from jobs where id = ${Number(jobId)}`), "reembed");
  await page.click("#nav-jobs");
  const row = page.locator(`#recent-jobs tr[data-job-id="${jobId}"]`);
  await row.waitFor();
  assert.equal(await row.getAttribute("data-kind"), "reembed");

  // The embed jobs it enqueued run in the server's workers; the page follows live until the
  // switch is complete and the progress line goes away.
  await page.waitForFunction(() => document.getElementById("switch").dataset.state === "idle", null, {
    timeout: PIPELINE_TIMEOUT,
  });
  assert.equal(await page.isVisible("#switch"), false);
  const after = (await apiJson("/api/models")).models.find((m) => m.active);
  assert.equal(after.documents_complete, total);
  assert.equal(after.documents_searchable, total);
  await page.waitForFunction((id) => {
    const r = document.querySelector(`#recent-jobs tr[data-job-id="${id}"]`);
    return r && r.dataset.status === "done";
  }, jobId);
});

/** Searches `query` in `mode` from the search view; the top hit's file name, location label
 * and snippet. */
async function topHit(query, mode) {
  await page.click("#nav-search");
  await page.getByLabel("Search for").fill(query);
  await page.getByLabel("Mode", { exact: true }).selectOption(mode);
  await page.getByRole("button", { name: "Search", exact: true }).click();
  await page.waitForFunction(
    (q) =>
      Array.from(document.querySelectorAll("#search-results li .snippet, #search-results li")).some((n) =>
        n.textContent.includes(q),
      ),
    query,
    { timeout: PIPELINE_TIMEOUT },
  );
  return page.evaluate(() => {
    const item = document.querySelector("#search-results li");
    return {
      filename: item.querySelector(".filename")?.textContent ?? "",
      location: item.querySelector(".where .page")?.textContent ?? "",
      text: item.textContent,
    };
  });
}

test("a Word file, a slide deck and a Korean HWP dropped on the page become ready, and hits show their heading or slide", async () => {
  await page.setViewportSize({ width: 1280, height: 800 });
  await page.click("#nav-documents");
  const accept = await page.getAttribute("#file-input", "accept");
  for (const extension of [".docx", ".pptx", ".hwp", ".hwpx"]) {
    assert.ok(accept.split(",").includes(extension), `the picker accepts ${extension}: ${accept}`);
  }
  const files = ["office/ko-sample.docx", "office/ko-sample-notes.pptx", "office/noori-press-release-2018.hwp"];
  await page.getByLabel(/Drop files here/).setInputFiles(files.map((f) => path.join(FIXTURES, f)));
  for (const file of files) await waitForStatus(path.basename(file), "ready");

  const slide = await topHit("Remember to explain the data table", "text");
  assert.equal(slide.filename, "ko-sample-notes.pptx");
  assert.equal(slide.location, "slide 2", "a speaker note is found on its slide");

  const heading = await topHit("Final paragraph with mixed content", "text");
  assert.equal(heading.filename, "ko-sample.docx");
  assert.match(heading.location, / › /, `a heading path: ${heading.location}`);

  const korean = await topHit("한국형발사체", "text");
  assert.equal(korean.filename, "noori-press-release-2018.hwp");
  assert.ok(korean.text.includes("한국형발사체"), "the Korean word is shown whole");
  await page.screenshot({ path: path.join(OUTPUT, "search-korean-hwp.png"), fullPage: true });
});

test("a webhook registered on the page shows its dead delivery, and Retry delivers it", async () => {
  // A real receiver on loopback: 500 until told otherwise.
  let answer = 500;
  const received = [];
  const receiver = http.createServer((request, response) => {
    let body = "";
    request.on("data", (chunk) => (body += chunk));
    request.on("end", () => {
      received.push({ id: request.headers["webhook-id"], status: answer, body: JSON.parse(body) });
      response.writeHead(answer).end();
    });
  });
  await new Promise((resolve) => receiver.listen(0, "127.0.0.1", resolve));
  try {
    const url = `http://127.0.0.1:${receiver.address().port}/hook?tag=<img src=x onerror=window.__xss=3>`;
    await page.click("#nav-webhooks");
    await page.getByLabel("Receiver URL").fill(url);
    await page.getByLabel("document.deleted").check();
    await page.getByRole("button", { name: "Register" }).click();
    await page.waitForFunction(() => !document.getElementById("webhook-secret-box").hidden);
    assert.match(await page.textContent("#webhook-secret"), /^whsec_/);
    await page.waitForFunction((u) => Array.from(document.querySelectorAll("#webhook-list h3")).some((h) => h.textContent === u), url);
    assert.equal(await page.evaluate(() => window.__xss), undefined, "the URL shows as text");

    // Deleting a document is the event; the receiver refuses it.
    const { documents } = await apiJson("/api/documents?limit=500");
    const victim = documents.find((d) => d.filename === EVIL_NAME) ?? documents[0];
    const deleted = await fetch(`${baseUrl}/api/documents/${victim.id}`, { method: "DELETE" });
    assert.equal(deleted.status, 204);
    const deadline = Date.now() + PIPELINE_TIMEOUT;
    while (received.length === 0) {
      assert.ok(Date.now() < deadline, "the receiver got the first attempt");
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
    // As if it had failed for a day: its job stands at its last attempt, due now.
    psql(
      databaseUrl,
      "update jobs set attempts = max_attempts - 1, run_at = now() where kind = 'webhook.deliver' and status = 'ready'",
    );
    const dead = page.locator('#webhook-list tr[data-status="dead"]');
    await dead.first().waitFor({ timeout: PIPELINE_TIMEOUT });
    assert.match(await dead.first().textContent(), /500/);

    answer = 200;
    await dead.first().getByRole("button", { name: /^Retry/ }).click();
    await page.locator('#webhook-list tr[data-status="delivered"]').first().waitFor({ timeout: PIPELINE_TIMEOUT });
    const ok = received.filter((r) => r.status === 200);
    assert.equal(ok.length, 1);
    assert.equal(ok[0].body.type, "document.deleted");
    assert.equal(ok[0].body.data.id, victim.id);
    assert.ok(received.every((r) => r.id === received[0].id), "one webhook-id for every attempt");
  } finally {
    receiver.close();
  }
});

test("each view is usable at 360 px and 1280 px, and screenshots are saved", async () => {
  const views = ["documents", "search", "jobs", "schedules", "webhooks"];
  const brokenLink = await page.evaluate(() => {
    const row = document.querySelector('#doc-list tr[data-status="failed"] a');
    return row ? row.getAttribute("href") : null;
  });
  for (const width of [360, 1280]) {
    await page.setViewportSize({ width, height: 800 });
    for (const view of [...views, "detail"]) {
      await page.evaluate((hash) => {
        location.hash = hash;
      }, view === "detail" ? brokenLink ?? "#documents" : `#${view}`);
      await page.waitForFunction((id) => !document.getElementById(id).hidden, `view-${view}`);
      await page.waitForTimeout(300); // let the refetch paint; nothing is asserted on time
      const overflow = await page.evaluate(() => document.documentElement.scrollWidth - window.innerWidth);
      assert.ok(overflow <= 1, `${view} at ${width}px scrolls sideways by ${overflow}px`);
      await page.screenshot({ path: path.join(OUTPUT, `${view}-${width}.png`), fullPage: true });
    }
  }
  assert.deepEqual(pageProblems, [], "no script errors or CSP violations");
});
