// A person's retry (issue 26, item 5), in a real chromium against a real `docket serve` with
// no workers of its own, so that nothing runs until the test starts a `docket worker`: a
// document whose job was stopped is retried from the page, the job starts a fresh run (attempt
// 1 of its own budget again), and the page follows the document from the retry to "ready"; a writer's
// "Process again" on a failed document does the same.

import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import path from "node:path";
import { start, OUTPUT, PIPELINE_TIMEOUT } from "./harness.mjs";

let app;
let page;
let stopped;
let failedAgain;

before(async () => {
  app = await start({ env: { DOCKET_NO_WORKERS: "true" } });
  page = app.page;
  // Both stopped before any worker exists, so no extraction can win the race to the cancel.
  stopped = await stoppedDocument("stopped.txt");
  failedAgain = await stoppedDocument("again.txt");
});

after(async () => {
  await app?.stop();
});

/** Uploads one text file and stops its extraction as an operator would: a failed document. */
async function stoppedDocument(name) {
  const { results } = await app.uploadTexts([{ name, text: `The words of ${name}, for the retry to find.\n` }]);
  const id = results[0].document.id;
  const { jobs } = await app.apiJson(`/api/documents/${id}`);
  await app.apiJson(`/api/jobs/${jobs[0].id}/cancel`, { method: "POST" });
  const doc = await app.apiJson(`/api/documents/${id}`);
  assert.equal(doc.status, "failed");
  assert.equal(doc.error.permanent, false);
  return { id, job: jobs[0].id };
}

test("5. Retry on a stopped job starts a fresh run, and the page follows the document to ready", async () => {
  const { id, job } = stopped;
  await page.evaluate((h) => {
    location.hash = h;
  }, `#document/${id}`);
  const item = page.locator(`#detail-jobs li[data-job-id="${job}"]`);
  await item.getByRole("button", { name: `Retry extract job ${job}` }).click();
  // At once, before any worker runs: the document left "failed" with the retry.
  const line = page.locator("#detail-retry");
  await line.filter({ hasText: /^Trying again: uploaded…$/ }).waitFor();
  assert.equal(await page.locator("#detail-error").isVisible(), false, "the old reason is gone");
  await page.locator(`#detail-jobs li[data-job-id="${job}"][data-status="ready"]`).waitFor();
  const budget = /^attempts 0 of (\d+)$/.exec(await item.locator(".attempts").textContent());
  assert.ok(budget, "a fresh run: no attempt used yet");
  assert.match(await item.textContent(), /retried by a person once/);
  await page.screenshot({ path: path.join(OUTPUT, "retry-waiting-1280.png"), fullPage: true });

  app.startWorker();
  await line.filter({ hasText: /^Tried again: ready, searchable\.$/ }).waitFor({ timeout: PIPELINE_TIMEOUT });
  assert.equal(await item.locator(".attempts").textContent(), `attempts 1 of ${budget[1]}`);
  await page.setViewportSize({ width: 390, height: 850 });
  await page.screenshot({ path: path.join(OUTPUT, "retry-ready-390.png"), fullPage: true });
  await page.setViewportSize({ width: 1280, height: 900 });
});

test("5. Process again on a failed document follows it to ready, from the keyboard", async () => {
  const { id } = failedAgain;
  await page.evaluate((h) => {
    location.hash = h;
  }, `#document/${id}`);
  const again = page.getByRole("button", { name: "Process again from the original file" });
  await again.focus();
  await page.keyboard.press("Enter");
  await page.locator("#detail-retry").filter({ hasText: /^Tried again: ready, searchable\.$/ }).waitFor({ timeout: PIPELINE_TIMEOUT });
  assert.equal(await page.evaluate(() => document.activeElement.id), "detail-retry", "the result has the focus");
  assert.equal(await again.isVisible(), false, "nothing left to retry");
  await page.screenshot({ path: path.join(OUTPUT, "retry-again-1280.png"), fullPage: true });
  assert.deepEqual(app.problems, [], "no script errors or CSP violations");
});
