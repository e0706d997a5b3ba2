// What a browser test file needs to run docket's page for real: a fresh database on the tests'
// PostgreSQL server, `docket serve` (the debug binary) on a port the OS picks with the hashing
// fallback embedder, and Debian's chromium. `start()` gives all of it and `stop()` ends it all;
// a console error or a CSP violation is recorded in `problems`, which a test asserts empty.

import { spawn, execFileSync } from "node:child_process";
import { mkdirSync, mkdtempSync, rmSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { chromium } from "playwright-core";

export const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../..");
export const OUTPUT = path.join(ROOT, "test-output/browser");
export const FIXTURES = path.join(ROOT, "fixtures");
// Generous: a debug build extracts PDFs and runs OCR in child processes on a loaded machine.
export const PIPELINE_TIMEOUT = 180_000;

const BINARY = path.join(ROOT, "target/debug/docket");

function serverUrl() {
  const url = process.env.DATABASE_URL || execFileSync(path.join(ROOT, "scripts/db.sh"), { encoding: "utf8" }).trim();
  return new URL(url);
}

function psql(url, sql) {
  execFileSync("psql", ["-X", "-q", "-v", "ON_ERROR_STOP=1", url, "-c", sql], { stdio: ["ignore", "ignore", "pipe"] });
}

function startServer(env) {
  return new Promise((resolve, reject) => {
    const server = spawn(BINARY, ["serve", "--bind", "127.0.0.1:0"], { cwd: ROOT, env, stdio: ["ignore", "ignore", "pipe"] });
    let log = "";
    const timer = setTimeout(() => reject(new Error(`docket serve did not start:\n${log}`)), 60_000);
    server.stderr.setEncoding("utf8");
    server.stderr.on("data", (text) => {
      log += text;
      const match = /listening on (http:\/\/127\.0\.0\.1:\d+)/.exec(log.replace(/\x1b\[[0-9;]*m/g, ""));
      if (match) {
        clearTimeout(timer);
        resolve({ server, baseUrl: match[1] });
      }
    });
    server.on("exit", (code) => {
      clearTimeout(timer);
      reject(new Error(`docket serve exited with ${code}:\n${log}`));
    });
  });
}

/**
 * Starts everything; the answer's `page` is at the page, 1280 × 900. `env` adds settings of
 * `docket serve` (`DOCKET_NO_WORKERS: "true"` leaves the jobs to a `docket worker` the test
 * starts with `startWorker()`, when it wants them run).
 */
export async function start({ bypassCSP = false, env: extra = {} } = {}) {
  mkdirSync(OUTPUT, { recursive: true });
  const url = serverUrl();
  const databaseName = `docket_browser_${process.pid}_${Date.now()}`;
  const admin = new URL(url);
  admin.pathname = "/postgres";
  psql(admin.toString(), `create database ${databaseName}`);
  const own = new URL(url);
  own.pathname = `/${databaseName}`;
  const modelDir = mkdtempSync(path.join(os.tmpdir(), "docket-no-model-"));
  const env = {
    ...process.env,
    DATABASE_URL: own.toString(),
    DOCKET_MODEL_DIR: modelDir,
    DOCKET_API_TOKEN: "",
    DOCKET_POLL_MS: "500",
    RUST_LOG: "info,sqlx=warn",
    NO_COLOR: "1",
  };
  delete env.DOCKET_EMBEDDER;
  Object.assign(env, extra);
  const { server, baseUrl } = await startServer(env);
  const workers = [];
  const browser = await chromium.launch({
    executablePath: "/usr/bin/chromium",
    args: ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update", "--no-first-run"],
  });
  // bypassCSP only for the accessibility checker, which is injected as a script of its own.
  const context = await browser.newContext({ viewport: { width: 1280, height: 900 }, bypassCSP });
  const page = await context.newPage();
  const problems = [];
  page.on("console", (message) => {
    if (message.type() === "error" && !/Failed to load resource/.test(message.text())) problems.push(`console: ${message.text()}`);
  });
  page.on("pageerror", (error) => problems.push(`page error: ${error.message}`));
  await page.goto(baseUrl);

  /** JSON from docket's API, outside the page (what an operator's script would do). */
  async function apiJson(pathAndQuery, options = {}) {
    const response = await fetch(`${baseUrl}${pathAndQuery}`, options);
    if (!response.ok) throw new Error(`${pathAndQuery}: ${response.status} ${await response.text()}`);
    return response.status === 204 ? null : response.json();
  }

  /** Uploads `files` ({ name, text }) in one request, as a script would. */
  async function uploadTexts(files) {
    const form = new FormData();
    for (const { name, text } of files) form.append("file", new Blob([text], { type: "text/plain" }), name);
    return apiJson("/api/documents", { method: "POST", body: form });
  }

  /** Starts a `docket worker` on the same database and settings (its own process). */
  function startWorker() {
    const own = { ...env };
    delete own.DOCKET_NO_WORKERS;
    const worker = spawn(BINARY, ["worker"], { cwd: ROOT, env: own, stdio: ["ignore", "ignore", "ignore"] });
    workers.push(worker);
    return worker;
  }

  async function end(child) {
    if (child.exitCode !== null) return;
    const exited = new Promise((resolve) => child.once("exit", resolve));
    child.kill("SIGTERM");
    await Promise.race([exited, new Promise((resolve) => setTimeout(resolve, 15_000))]);
    if (child.exitCode === null) child.kill("SIGKILL");
  }

  async function stop() {
    await browser.close();
    for (const worker of workers) await end(worker);
    await end(server);
    psql(admin.toString(), `drop database if exists ${databaseName} with (force)`);
    rmSync(modelDir, { recursive: true, force: true });
  }

  return { page, baseUrl, databaseUrl: own.toString(), apiJson, uploadTexts, startWorker, problems, stop };
}

/** Waits until the documents list shows `name` with `status`. */
export async function waitForStatus(page, name, status) {
  await page.waitForFunction(
    ([n, wanted]) =>
      Array.from(document.querySelectorAll("#doc-list tbody tr")).some(
        (row) => row.querySelector("td.name")?.textContent === n && row.dataset.status === wanted,
      ),
    [name, status],
    { timeout: PIPELINE_TIMEOUT },
  );
}
