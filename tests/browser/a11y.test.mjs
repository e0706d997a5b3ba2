// Accessibility (issue 26): axe-core, the engine from npm (tests/browser/package.json), run on
// every view of the page at 1280 and 390 px finds no serious or critical violation; and the
// whole daily flow works from the keyboard alone: upload, search, open a hit, delete.
// axe is injected as a script of its own, so this file's browser context bypasses the
// Content-Security-Policy (daily.test.mjs and page.test.mjs keep it and fail on a violation).

import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { createRequire } from "node:module";
import path from "node:path";
import { start, waitForStatus, FIXTURES, OUTPUT, PIPELINE_TIMEOUT } from "./harness.mjs";

const AXE = createRequire(import.meta.url).resolve("axe-core/axe.min.js");

let app;
let page;

before(async () => {
  app = await start({ bypassCSP: true });
  page = app.page;
  await app.uploadTexts([{ name: "herons.md", text: "# Herons\n\nThe grey heron waits by the river for fish.\n" }]);
  const form = new FormData();
  form.append("file", new Blob([await (await import("node:fs/promises")).readFile(path.join(FIXTURES, "malformed/invalid.pdf"))]), "invalid.pdf");
  await app.apiJson("/api/documents", { method: "POST", body: form });
});

after(async () => {
  await app?.stop();
});

/** The serious and critical violations axe finds on the page as it is. */
async function violations() {
  if (!(await page.evaluate(() => typeof window.axe === "object"))) await page.addScriptTag({ path: AXE });
  const found = await page.evaluate(async () => {
    const result = await window.axe.run(document, { resultTypes: ["violations"] });
    return result.violations
      .filter((v) => v.impact === "serious" || v.impact === "critical")
      .map((v) => `${v.id} (${v.impact}): ${v.nodes.map((n) => n.target.join(" ")).join(", ")}`);
  });
  return found;
}

test("keyboard only: upload, search, open a hit in the text, and reach Delete", async () => {
  await page.evaluate(() => {
    location.hash = "#documents";
  });
  await waitForStatus(page, "herons.md", "ready");
  // The file input is reachable by Tab (the drop zone is its label).
  await page.locator("#file-input").focus();
  assert.equal(await page.evaluate(() => document.activeElement.id), "file-input");
  await page.locator("#nav-search").focus();
  await page.keyboard.press("Enter");
  await page.waitForFunction(() => !document.getElementById("view-search").hidden);
  await page.locator("#search-q").focus();
  await page.keyboard.type("heron river");
  await page.keyboard.press("Enter");
  await page.waitForFunction(() => document.querySelectorAll("#search-results a.read").length > 0, null, { timeout: PIPELINE_TIMEOUT });
  // Tab from the search field onward until the first "show in the text" link has the focus.
  for (let i = 0; i < 20; i += 1) {
    await page.keyboard.press("Tab");
    if (await page.evaluate(() => document.activeElement.classList.contains("read"))) break;
  }
  assert.equal(await page.evaluate(() => document.activeElement.classList.contains("read")), true, "a hit's link is reachable by Tab");
  const outline = await page.evaluate(() => getComputedStyle(document.activeElement).outlineStyle);
  assert.notEqual(outline, "none", "the focus is visible");
  await page.keyboard.press("Enter");
  await page.locator("#passage").waitFor();
  assert.equal(await page.evaluate(() => document.activeElement.id), "passage", "the passage has the focus");
  await page.locator("#read-back").focus();
  await page.keyboard.press("Enter");
  await page.waitForFunction(() => !document.getElementById("view-detail").hidden);
  await page.locator("#delete-button").focus();
  await page.keyboard.press("Enter");
  assert.equal(await page.evaluate(() => document.activeElement.id), "delete-no", "the confirmation takes the focus");
  await page.keyboard.press("Enter");
  assert.equal(await page.evaluate(() => document.activeElement.id), "delete-button");
});

test("axe-core finds no serious or critical violation on any view at 1280 and 390 px", async () => {
  const docs = await app.apiJson("/api/documents");
  const herons = docs.documents.find((d) => d.filename === "herons.md");
  const broken = docs.documents.find((d) => d.filename === "invalid.pdf");
  await page.evaluate(() => {
    location.hash = "#documents";
  });
  await waitForStatus(page, "invalid.pdf", "failed");
  const views = {
    documents: "#documents",
    detail: `#document/${broken.id}`,
    read: `#read/${herons.id}?at=0`,
    search: "#search?q=heron&mode=hybrid",
    jobs: "#jobs",
    schedules: "#schedules",
    webhooks: "#webhooks",
    gone: "#document/99999",
  };
  const problems = [];
  for (const width of [1280, 390]) {
    await page.setViewportSize({ width, height: 850 });
    for (const [name, hash] of Object.entries(views)) {
      await page.evaluate((h) => {
        location.hash = h;
      }, hash);
      const view = name === "gone" ? "detail" : name;
      await page.waitForFunction((id) => !document.getElementById(id).hidden, `view-${view}`);
      await page.waitForTimeout(500); // let the refetch paint; nothing is asserted on time
      for (const v of await violations()) problems.push(`${name} at ${width}px: ${v}`);
      await page.screenshot({ path: path.join(OUTPUT, `a11y-${name}-${width}.png`), fullPage: true });
    }
  }
  assert.deepEqual(problems, []);
});
