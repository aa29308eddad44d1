// Loads actorflow-console's web UI in Debian's headless Chromium, as a
// person would, and checks what it renders against a live cluster:
//   node console_page.mjs URL TASK,TASK,... MASTER [SCREENSHOT.png]
// Prints what it saw; exits 1 with the reason when a check fails.
import { check, finish, launch } from "./browser.mjs";

const [url, taskList, master, screenshot] = process.argv.slice(2);
const tasks = taskList.split(",");

const browser = await launch();
try {
  // One context (one cookie jar) for the console's page and the attacker's.
  const context = await browser.newContext({ viewport: { width: 1440, height: 1400 } });
  const page = await context.newPage();
  const errors = [];
  page.on("pageerror", e => errors.push(String(e)));
  // The console needs its token: the printed URL carries it, sets a cookie
  // and leaves it out of the address bar; without it, 401.
  const bare = new URL(url);
  if (bare.searchParams.has("token")) {
    bare.searchParams.delete("token");
    const refused = await page.goto(bare.toString());
    check(refused.status() === 401, `without its token the console answers ${refused.status()}`);
  }
  await page.goto(url);
  check(!page.url().includes("token="), `the token is not left in the address bar (${page.url()})`);
  // Live updates: three server-sent events at least.
  await page.waitForFunction(() => Number(document.body.dataset.updates) >= 3,
                             null, { timeout: 20000 });
  const first = Number(await page.evaluate(() => document.body.dataset.updates));
  // Every task is listed, up.
  for (const task of tasks) {
    const state = await page.locator(`#tasks tr[data-task="${task}"] td:nth-child(3)`)
                            .textContent({ timeout: 15000 });
    check(state === "up", `${task} is listed up (${state})`);
  }
  // Plots with points: steps/s of the masters, the training loss.
  for (const chart of ["steps", "loss", "mailbox"]) {
    await page.waitForFunction(
      c => Number(document.getElementById("chart-" + c).dataset.points) >= 3,
      chart, { timeout: 15000 });
    const points = await page.evaluate(
      c => document.getElementById("chart-" + c).dataset.points, chart);
    const canvas = await page.locator(`#chart-${chart} canvas`).count();
    check(canvas === 1 && points >= 3, `chart ${chart} drawn with ${points} points`);
  }
  const actorRows = await page.locator("#actors tbody tr").count();
  check(actorRows > 0, `actors table lists ${actorRows} actors`);
  const stepRows = await page.locator("#steps tbody tr").count();
  check(stepRows >= 1, `steps table lists ${stepRows} masters`);
  // The step timeline of the chosen master.
  await page.selectOption("#trace-task", master);
  await page.click("#trace-button");
  await page.waitForFunction(
    () => Number(document.getElementById("timeline").dataset.spans) > 0,
    null, { timeout: 30000 });
  const spans = await page.evaluate(() => document.getElementById("timeline").dataset.spans);
  const status = await page.textContent("#trace-status");
  check(spans > 0 && status.includes(master), `timeline of ${master}: ${spans} spans (${status})`);
  const href = await page.getAttribute("#trace-download", "href");
  const download = await page.evaluate(async h => (await fetch(h)).json(), href);
  check(Array.isArray(download.traceEvents) && download.traceEvents.length > 0,
        `the Chrome trace downloads (${download.traceEvents.length} events)`);
  // Still live.
  await page.waitForFunction(n => Number(document.body.dataset.updates) > n + 1,
                             first, { timeout: 15000 });
  check(true, "updates keep arriving");
  // A page of another site posting a form to the console (cross-site
  // request forgery): the browser sends the user's cookie along only to the
  // console's own pages (SameSite=Strict), and the console refuses the
  // foreign Origin.
  const attacker = await context.newPage();
  await attacker.setContent(`<form method="POST"
      action="${new URL("/api/trace?task=" + encodeURIComponent(master), url)}">
    <input name="x" value="1"></form>`);
  const [forged] = await Promise.all([
    attacker.waitForNavigation(),
    attacker.evaluate(() => document.forms[0].submit()),
  ]);
  check(forged.status() === 403, `a cross-site form POST is refused (${forged.status()})`);
  await attacker.close();
  await finish(page, errors, screenshot);
} finally {
  await browser.close();
}
