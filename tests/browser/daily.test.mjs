// The page as a daily tool (issue 26), one test per item, in a real chromium against a real
// `docket serve`: read what was extracted (a scan's OCR text, a Markdown hit opened at its
// passage), upload rows that finish, a deleted document shown gone, jobs named by their
// document, advice instead of a useless Retry, one extraction note, search in the address,
// names that cannot lie, a list that pages past 200, and one list of accepted types.

import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import path from "node:path";
import { start, waitForStatus, FIXTURES, OUTPUT, PIPELINE_TIMEOUT } from "./harness.mjs";

let app;
let page;

before(async () => {
  app = await start();
  page = app.page;
});

after(async () => {
  await app?.stop();
});

async function upload(files) {
  await page.click("#nav-documents");
  await page.getByLabel(/Drop files here/).setInputFiles(files);
}

async function search(q, mode = "text") {
  await page.click("#nav-search");
  await page.getByLabel("Search for").fill(q);
  await page.getByLabel("Mode", { exact: true }).selectOption(mode);
  await page.getByRole("button", { name: "Search", exact: true }).click();
  await page.waitForFunction(() => /for “/.test(document.getElementById("search-status").textContent) || /failed/.test(document.getElementById("search-status").textContent));
}

test("1. a scan's OCR text is readable in the document view, its page marked as read by OCR", async () => {
  await upload([path.join(FIXTURES, "pdf/c02-22.pdf")]);
  await waitForStatus(page, "c02-22.pdf", "ready");
  await page.locator("#doc-list").getByRole("link", { name: "c02-22.pdf" }).click();
  await page.getByRole("link", { name: "Read the extracted text" }).click();
  const section = page.locator('#read-text section[data-page="1"]');
  await section.waitFor();
  assert.match(await section.locator("h3").textContent(), /^page 1 read by OCR/);
  const text = await section.locator(".text").textContent();
  assert.ok(text.includes("garden") && text.includes("Watson"), text);
  assert.match(await page.textContent("#read-facts"), /OCR read 1 page/);
  assert.equal(await page.locator("#read-file").isVisible(), true, "the original is one click away");
  await page.screenshot({ path: path.join(OUTPUT, "reader-ocr.png"), fullPage: true });
});

test("1. Read the extracted text leads to the document's text before its details have loaded", async () => {
  await upload([{ name: "read-early.txt", mimeType: "text/plain", buffer: Buffer.from("Words to read early, before the details arrive.\n") }]);
  await waitForStatus(page, "read-early.txt", "ready");
  // Hold the document's details back: the link must not wait for them (a CI run clicked it
  // before they came, followed "#", and never reached the reader).
  const details = /\/api\/documents\/\d+$/;
  const hold = async (route) => {
    await new Promise((resolve) => setTimeout(resolve, 3000));
    // Once unrouted, Playwright may have let the request through already.
    await route.continue().catch(() => {});
  };
  await page.route(details, hold);
  try {
    await page.locator("#doc-list").getByRole("link", { name: "read-early.txt" }).click();
    await page.getByRole("link", { name: "Read the extracted text" }).click();
    await page.locator('#read-text section[data-page="1"]').waitFor({ timeout: 2500 });
    assert.match(await page.locator("#read-text").textContent(), /Words to read early/);
  } finally {
    await page.unroute(details, hold);
  }
});

test("1. a Markdown hit opens the view scrolled to its passage, marked", async () => {
  await upload([path.join(FIXTURES, "text/pdfjs-README.md")]);
  await waitForStatus(page, "pdfjs-README.md", "ready");
  await search("gulp server");
  const hit = page.locator("#search-results > li").first();
  assert.equal(await hit.locator(".filename").textContent(), "pdfjs-README.md");
  const chunk = await hit.getAttribute("data-chunk");
  await hit.locator("a.read").first().click();
  await page.waitForFunction(() => location.hash.startsWith("#read/"));
  const passage = page.locator("#passage");
  await passage.waitFor();
  assert.match((await passage.textContent()).toLowerCase(), /gulp server/);
  assert.ok(await passage.evaluate((node) => {
    const box = node.getBoundingClientRect();
    return box.top < window.innerHeight && box.bottom > 0;
  }), "the passage is on screen");
  assert.equal(new URLSearchParams((await page.evaluate(() => location.hash)).split("?")[1]).get("at"), chunk);
  await page.screenshot({ path: path.join(OUTPUT, "reader-passage.png") });
});

test("2. upload rows follow their document to ready and failed: reason, and can be cleared", async () => {
  await upload([
    { name: "row-ready.txt", mimeType: "text/plain", buffer: Buffer.from("A row that should end ready, with words enough.\n") },
    { name: "invalid.pdf", mimeType: "application/pdf", buffer: readFileSync(path.join(FIXTURES, "malformed/invalid.pdf")) },
  ]);
  const row = (name) => page.locator("#uploads li", { has: page.locator(".name", { hasText: name }) });
  await row("row-ready.txt").locator(".outcome", { hasText: /^Ready/ }).waitFor({ timeout: PIPELINE_TIMEOUT });
  await row("invalid.pdf").locator(".outcome", { hasText: /^Failed: .*malformed/i }).waitFor({ timeout: PIPELINE_TIMEOUT });
  await page.getByRole("button", { name: "Clear finished uploads" }).click();
  assert.equal(await page.locator("#uploads li").count(), 0);
});

test("3. a deleted document, and Back to it, show it gone with no actions", async () => {
  await page.click("#nav-documents");
  await page.locator("#doc-list").getByRole("link", { name: "row-ready.txt" }).click();
  await page.getByRole("button", { name: "Delete this document" }).click();
  await page.getByRole("button", { name: "Yes, delete" }).click();
  await page.locator("#detail-gone").waitFor();
  assert.match(await page.textContent("#detail-gone"), /“row-ready.txt” was deleted/);
  const gone = async () => {
    await page.locator("#detail-gone").waitFor();
    assert.equal(await page.locator("#delete-button").isVisible(), false);
    assert.equal(await page.locator("#detail-file").isVisible(), false);
  };
  await gone();
  await page.click("#nav-documents");
  await page.goBack();
  await page.waitForFunction(() => document.getElementById("detail-heading").textContent === "Document gone");
  await gone();
  await page.evaluate(() => {
    location.hash = "#document/99999";
  });
  await page.waitForFunction(() => /Document 99999 does not exist/.test(document.getElementById("detail-gone").textContent));
  await gone();
});

test("4. jobs name their document and link to it", async () => {
  await page.click("#nav-jobs");
  const link = page.locator("#recent-jobs a.job-document", { hasText: "invalid.pdf" }).first();
  await link.waitFor({ timeout: PIPELINE_TIMEOUT });
  await page.locator("#dead-jobs a.job-document", { hasText: "invalid.pdf" }).first().waitFor();
  await link.click();
  await page.waitForFunction(() => document.getElementById("detail-heading").textContent === "invalid.pdf");
});

test("5. a permanent failure shows advice instead of Retry, and no internal code", async () => {
  const dead = page.locator('#detail-jobs li[data-status="dead"]').first();
  await dead.locator(".advice").waitFor({ timeout: PIPELINE_TIMEOUT });
  assert.equal(await dead.getByRole("button", { name: /^Retry/ }).count(), 0);
  assert.doesNotMatch(await page.textContent("#detail-error"), /\(pdf_/);
});

test("6. the extraction note is the server's one description, and neither it nor OCR progress is drawn as an error", async () => {
  await page.click("#nav-documents");
  await page.locator("#doc-list").getByRole("link", { name: "c02-22.pdf" }).click();
  const note = page.locator("#detail-facts dd.note");
  await note.waitFor();
  const doc = await app.apiJson(`/api/documents/${await page.evaluate(() => location.hash.split("/")[1])}`);
  assert.equal(doc.extraction.method, "ocr");
  assert.equal(await note.textContent(), doc.extraction.summary, "shown as the server gives it");
  assert.match(await note.textContent(), /^OCR on 1 of 1 page \(tesseract [^)]+\): page 1: no text layer\.$/);
  const red = "rgb(164, 0, 0)";
  assert.notEqual(await note.evaluate((node) => getComputedStyle(node).color), red, "not the failure red");
  // OCR progress in the list (a long scan's "OCR 3 of 10 pages") is news, not a failure.
  const progress = await page.evaluate(() => {
    const cell = document.createElement("td");
    cell.className = "status status-extracting";
    const span = document.createElement("span");
    span.className = "progress";
    cell.append(span);
    document.querySelector("#doc-list tbody").append(cell);
    const colour = getComputedStyle(span).color;
    cell.remove();
    return colour;
  });
  assert.notEqual(progress, red, "OCR progress is not drawn in the failure red");
});

test("7. search lives in the address: it survives a reload, re-runs on a mode change, clears, and refuses a too-long query", async () => {
  await search("gulp server", "text");
  await page.waitForFunction(() => location.hash.startsWith("#search?"));
  const hash = await page.evaluate(() => location.hash);
  assert.equal(new URLSearchParams(hash.split("?")[1]).get("q"), "gulp server");
  await page.reload();
  await page.waitForFunction(() => document.querySelectorAll("#search-results > li").length > 0);
  assert.equal(await page.inputValue("#search-q"), "gulp server");
  await page.getByLabel("Mode", { exact: true }).selectOption("hybrid");
  await page.waitForFunction(() => /, hybrid/.test(document.getElementById("search-status").textContent));
  assert.match(await page.evaluate(() => location.hash), /mode=hybrid/);
  await page.getByLabel("Search for").fill("");
  await page.getByRole("button", { name: "Search", exact: true }).click();
  await page.waitForFunction(() => document.querySelectorAll("#search-results > li").length === 0);
  assert.match(await page.textContent("#search-hint"), /"exact phrase".*-word/);
  await page.getByLabel("Search for").fill("word ".repeat(250));
  await page.getByRole("button", { name: "Search", exact: true }).click();
  await page.waitForFunction(() => /Search failed: the query is 1249 characters long; the limit is 1000/.test(document.getElementById("search-status").textContent));
});

test("7. a quoted phrase and an excluded word are honoured in keyword search", async () => {
  await search('"gulp server"', "text");
  const phrase = await page.locator("#search-results > li").count();
  assert.ok(phrase > 0);
  await search('"gulp server" -gulp', "text");
  assert.match(await page.textContent("#search-status"), /^No results/);
});

test("8. a name with a right-to-left override shows the control instead of a fake extension; quotes show as quotes", async () => {
  const spoof = "invoice\u202Egpj.txt";
  await upload([
    { name: spoof, mimeType: "text/plain", buffer: Buffer.from("Words of a harmless text file.\n") },
    { name: 'the "quoted" name.txt', mimeType: "text/plain", buffer: Buffer.from("Other words, quoted.\n") },
  ]);
  const link = page.locator("#doc-list td.name a", { hasText: "invoice" });
  await link.waitFor();
  assert.equal(await link.textContent(), "invoice[RLO]gpj.txt");
  assert.equal(await link.locator("bdi").count(), 1);
  await page.locator("#doc-list td.name a", { hasText: 'the "quoted" name.txt' }).waitFor();
});

test("9. the list filters by name, step and type, sorts, and pages past 200 documents", async () => {
  for (let batch = 0; batch < 3; batch += 1) {
    const files = Array.from({ length: 70 }, (_, i) => {
      const n = batch * 70 + i;
      return { name: `bulk-${String(n).padStart(3, "0")}.txt`, text: `bulk note ${n}` };
    });
    await app.uploadTexts(files);
  }
  await page.click("#nav-documents");
  await page.waitForFunction(() => / of 2\d\d$/.test(document.getElementById("page-where").textContent)).catch(async (err) => {
    throw new Error(`${err.message}; the pager says ${await page.textContent("#page-where")}`);
  });
  await page.getByLabel("Sort").selectOption("name");
  await page.getByLabel("Name contains").fill("bulk-");
  await page.waitForFunction(() => document.getElementById("page-where").textContent === "1–50 of 210");
  for (const shown of ["51–100", "101–150", "151–200", "201–210"]) {
    // From the keyboard, as a person paging through would (the focus stays on the button).
    await page.getByRole("button", { name: "Next page" }).focus();
    await page.keyboard.press("Enter");
    await page.waitForFunction((text) => document.getElementById("page-where").textContent === `${text} of 210`, shown).catch(async (err) => {
      throw new Error(`${err.message}; wanted ${shown}, the pager says ${await page.textContent("#page-where")}`);
    });
  }
  assert.equal(await page.locator("#doc-list td.name").first().textContent(), "bulk-200.txt");
  await page.getByLabel("Name contains").fill("");
  await page.getByLabel("Step").selectOption("failed");
  await page.waitForFunction(() => Array.from(document.querySelectorAll("#doc-list td.name")).map((td) => td.textContent).join() === "invalid.pdf");
  await page.getByLabel("Step").selectOption("");
  await page.getByLabel("Type").selectOption({ label: "Markdown" });
  await page.waitForFunction(() => Array.from(document.querySelectorAll("#doc-list td.name")).map((td) => td.textContent).join() === "pdfjs-README.md");
  await page.getByLabel("Type").selectOption("");
  await page.getByLabel("Sort").selectOption("newest");
  await page.screenshot({ path: path.join(OUTPUT, "documents-filters.png"), fullPage: true });
});

test("10. the picker and the drop zone take their list of types from the server", async () => {
  const info = await app.apiJson("/api/info");
  const accept = (await page.getAttribute("#file-input", "accept")).split(",");
  for (const format of info.formats) {
    for (const extension of format.extensions) assert.ok(accept.includes(extension), extension);
    assert.ok((await page.textContent("#drop-zone")).includes(format.name), format.name);
  }
  assert.ok(accept.includes(".docx"), "a Word file is accepted by its extension, not refused as application/zip");
  assert.deepEqual(app.problems, [], "no script errors or CSP violations");
});
