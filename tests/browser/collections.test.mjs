// Collections on the page (issue 22): the picker decides where uploads go and what the list
// and search cover; once a reader's token of one collection is in use, nothing of another
// collection is visible anywhere on the page. A real `docket serve`, Debian's chromium.

import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import path from "node:path";
import { start, waitForStatus, OUTPUT, ROOT } from "./harness.mjs";

let app;
let page;

before(async () => {
  app = await start();
  page = app.page;
});

after(async () => {
  await app?.stop();
});

/** Uploads `text` as `name` into `collection` through the API, as a script would. */
async function uploadInto(collection, name, text) {
  const form = new FormData();
  form.append("file", new Blob([text], { type: "text/plain" }), name);
  return app.apiJson(`/api/documents?collection=${collection}`, { method: "POST", body: form });
}

/** `docket tokens create …` on this test's database; the secret is the last line. */
function createToken(args) {
  const out = execFileSync(path.join(ROOT, "target/debug/docket"), ["tokens", "create", ...args], {
    env: { ...process.env, DATABASE_URL: app.databaseUrl },
    encoding: "utf8",
  });
  return out.trim().split("\n").pop();
}

async function listedNames() {
  return page.$$eval("#doc-list tbody td.name", (cells) => cells.map((c) => c.textContent));
}

test("the picker chooses where uploads go and what the list shows", async () => {
  for (const name of ["team-a", "team-b"]) {
    await app.apiJson("/api/collections", {
      method: "POST",
      headers: { "Content-Type": "application/json" },
      body: JSON.stringify({ name }),
    });
  }
  await uploadInto("team-a", "alpha-notes.txt", "Notes about the garden plan and the ledger.");
  await uploadInto("team-b", "bravo-merger.txt", "The Hanbit merger closes the escrow account in March.");
  await page.reload();
  await page.waitForFunction(() => document.getElementById("collection-picker").dataset.loaded === "true");
  const options = await page.$$eval("#collection-picker option", (o) => o.map((x) => x.textContent));
  assert.deepEqual(options, ["All collections", "default", "team-a", "team-b"]);
  await waitForStatus(page, "bravo-merger.txt", "ready");
  await waitForStatus(page, "alpha-notes.txt", "ready");

  await page.getByLabel("Collection", { exact: true }).selectOption("team-a");
  await page.waitForFunction(() => {
    const names = Array.from(document.querySelectorAll("#doc-list tbody td.name")).map((c) => c.textContent);
    return names.length === 1 && names[0] === "alpha-notes.txt";
  });
  // A file chosen now goes into team-a.
  await page.getByLabel(/Drop files here/).setInputFiles({
    name: "picked.txt",
    mimeType: "text/plain",
    buffer: Buffer.from("Uploaded from the page into the picked collection."),
  });
  await waitForStatus(page, "picked.txt", "ready");
  const inA = await app.apiJson("/api/documents?collection=team-a");
  assert.deepEqual(inA.documents.map((d) => d.filename).sort(), ["alpha-notes.txt", "picked.txt"]);

  // Usage per collection, and creating one from the page.
  await page.locator("#collections summary").click();
  // Opening the table reads the counts afresh: team-a now holds both documents.
  await page.waitForFunction(() => /team-a2\d/.test(document.getElementById("collection-usage").textContent));
  await page.getByLabel("New collection").fill("team-c");
  await page.getByRole("button", { name: "Create collection" }).click();
  await page.waitForFunction(() => /team-c created/.test(document.getElementById("collection-status").textContent));
  await page.screenshot({ path: path.join(OUTPUT, "collections-picker.png"), fullPage: true });
  assert.deepEqual(app.problems, []);
});

// Last in this file: once a token exists, every request needs one.
test("a reader's page shows only its collection, in the list, the picker, search and counts", async () => {
  const secret = createToken(["--name", "reader-a", "--role", "reader", "--collection", "team-a"]);
  assert.match(secret, /^dkt_/);
  await page.evaluate(() => localStorage.clear());
  await page.reload();
  // The server now asks for a token; the page asks the person.
  await page.getByLabel("Access token").fill(secret);
  await page.getByRole("button", { name: "Use token" }).click();
  await page.waitForFunction(() => document.getElementById("collection-picker").dataset.loaded === "true");
  const options = await page.$$eval("#collection-picker option", (o) => o.map((x) => x.textContent));
  assert.deepEqual(options, ["All collections", "team-a"]);
  await page.waitForFunction(() => document.querySelectorAll("#doc-list tbody td.name").length === 2);
  assert.deepEqual((await listedNames()).sort(), ["alpha-notes.txt", "picked.txt"]);

  await page.click("#nav-search");
  await page.getByLabel("Search for").fill("Hanbit merger escrow");
  await page.getByLabel("Mode", { exact: true }).selectOption("text");
  await page.getByRole("button", { name: "Search", exact: true }).click();
  await page.waitForFunction(() => /for “/.test(document.getElementById("search-status").textContent));
  const body = await page.textContent("body");
  // The status line repeats the query; nothing else may name B or its document.
  for (const leak of ["bravo-merger", "escrow account", "team-b"]) assert.ok(!body.includes(leak), `${leak} visible`);
  assert.ok(!(await page.textContent("#search-results")).includes("Hanbit"));
  assert.equal(await page.locator("#search-results > li").count(), 0);
  await page.screenshot({ path: path.join(OUTPUT, "collections-reader.png"), fullPage: true });
});
