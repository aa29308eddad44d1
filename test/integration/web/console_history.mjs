// The web UI's charts hold the console's history from before the page
// opened (/api/history), then go on live:
//   node console_history.mjs URL [SCREENSHOT.png] [WITHIN_S]
// Give it a console whose cluster has run steps for 5 s or more. Within
// WITHIN_S (default 30) s of the page's load a chart must have 3 points or
// more, from 3 s or more before the load (live samples cannot be older
// than the page: such points come from the history; the time allowed is
// only a bound for a loaded machine); the RSS and CPU charts have
// points; live samples follow; no chart holds more than 600 points per
// series.
// Prints what it saw; exits 1 with the reason when a check fails.
import { check, finish, launch } from "./browser.mjs";

const [url, screenshot, within = "30"] = process.argv.slice(2);
const charts = ["steps", "bytes", "mailbox", "loss", "examples", "rss", "cpu"];
const read = page => page.evaluate(names => Object.fromEntries(names.map(c => {
  const d = document.getElementById("chart-" + c).dataset;
  return [c, { points: Number(d.points ?? 0), series: Number(d.series ?? 0),
               from: Number(d.from || 0), to: Number(d.to || 0) }];
})), charts);

const browser = await launch();
try {
  const page = await browser.newPage({ viewport: { width: 1440, height: 1400 } });
  const errors = [];
  page.on("pageerror", e => errors.push(String(e)));
  // When the console answered (a busy console explains a late chart).
  const answered = {};
  page.on("response", r => {
    const path = new URL(r.url()).pathname;
    if (path === "/api/history" || path === "/events") answered[path] ??= Date.now() / 1000;
  });
  await page.goto(url);  // resolves on the load event
  const loaded = Date.now() / 1000;
  let seeded;
  try {
    await page.waitForFunction(
      ([names, before]) => names.some(c => {
        const d = document.getElementById("chart-" + c).dataset;
        return Number(d.points) >= 3 && Number(d.from) < before;
      }),
      [charts, loaded - 3], { timeout: Number(within) * 1000 });
    seeded = await read(page);
  } catch (e) {
    seeded = await read(page);
    const at = Object.entries(answered).map(([p, t]) => `${p} ${(t - loaded).toFixed(2)} s`).join(", ");
    check(false, `within ${within} s of the load no chart has 3 points from before it ` +
          `(the console answered, after the load: ${at || "not yet"}): ${JSON.stringify(seeded)}`);
  }
  const early = Object.entries(seeded).filter(([, v]) => v.points >= 3 && v.from < loaded - 3);
  check(early.length > 0, `within ${within} s of the load, charts with history: ` +
        early.map(([c, v]) => `${c} ${v.points} points from ${Math.round(loaded - v.from)} s before`).join(", "));
  const count = Number(await page.evaluate(() => document.body.dataset.seeded));
  check(count >= 3, `${count} points of /api/history seeded`);
  check(seeded.steps.points >= 3 && seeded.steps.from < loaded - 3,
        `steps/s per master seeded (${seeded.steps.points} points)`);
  // The two new charts, live too.
  await page.waitForFunction(() => Number(document.body.dataset.updates) >= 3, null, { timeout: 60000 });
  for (const c of ["rss", "cpu"]) {
    await page.waitForFunction(
      id => Number(document.getElementById(id).dataset.points) >= 3
            && document.querySelector("#" + id + " canvas") !== null,
      "chart-" + c, { timeout: 45000 });
    const v = (await read(page))[c];
    check(true, `chart ${c} drawn: ${v.series} tasks, ${v.points} points`);
  }
  // Live samples after the seeded ones.
  const before = await read(page);
  const at = Number(await page.evaluate(() => document.body.dataset.updates));
  await page.waitForFunction(u => Number(document.body.dataset.updates) >= u, at + 3, { timeout: 45000 });
  const after = await read(page);
  check(after.steps.to > before.steps.to && after.steps.to > loaded,
        `live samples follow (newest point ${Math.round(after.steps.to - loaded)} s after the load)`);
  const bounded = Object.entries(after).every(([, v]) => v.series === 0 || v.points / v.series <= 600);
  check(bounded, "at most 600 points per series: " +
        Object.entries(after).map(([c, v]) => `${c} ${v.points}/${v.series}`).join(", "));
  await finish(page, errors, screenshot);
} finally {
  await browser.close();
}
