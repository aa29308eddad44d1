// The web UI's logs view against a live cluster:
//   node console_logs.mjs URL TASK [SCREENSHOT.png]
// With TASK selected it shows TASK's lines (those /api/logs serves), as
// text; the level filter and the search narrow them (search matches
// marked); it keeps asking for the lines after the last one it has.
// Prints what it saw; exits 1 with the reason when a check fails.
import { check, finish, launch } from "./browser.mjs";

const [url, task, screenshot] = process.argv.slice(2);

// The shown lines in one go.
const shown = page => page.evaluate(() => [...document.querySelectorAll("#logs-lines .log[data-seq]")]
  .map(d => ({ seq: Number(d.dataset.seq), level: d.dataset.level,
               text: d.querySelector(".text").textContent,
               marks: d.querySelectorAll("mark").length })));

const browser = await launch();
try {
  const page = await browser.newPage({ viewport: { width: 1440, height: 1400 } });
  const errors = [];
  page.on("pageerror", e => errors.push(String(e)));
  const asked = [];
  page.on("request", r => { if (r.url().includes("/api/logs?")) asked.push(new URL(r.url())); });
  await page.goto(url);
  await page.waitForFunction(
    t => [...document.querySelectorAll("#logs-task option")].some(o => o.value === t),
    task, { timeout: 60000 });
  await page.selectOption("#logs-task", task);
  await page.waitForFunction(
    t => { const b = document.getElementById("logs-lines");
           return b.dataset.task === t && Number(b.dataset.shown) > 0; },
    task, { timeout: 60000 });
  const all = await shown(page);
  // What the console serves for TASK: the page shows those lines.
  const served = await page.evaluate(async t =>
    (await (await fetch(`/api/logs?task=${encodeURIComponent(t)}&after=0`)).json()), task);
  check(served.task === undefined || served.task === task, `/api/logs answers for ${served.task}`);
  const bySeq = new Map(served.lines.map(l => [l.seq, l]));
  const same = all.filter(l => bySeq.has(l.seq) && bySeq.get(l.seq).text === l.text
                               && bySeq.get(l.seq).level === l.level);
  check(all.length > 0 && same.length === all.filter(l => l.seq <= Math.max(...bySeq.keys())).length,
        `${all.length} lines of ${task} shown, as served (e.g. "${all[all.length - 1].text.slice(0, 70)}")`);
  const tags = await page.evaluate(() =>
    [...document.querySelectorAll("#logs-lines *")].map(e => e.tagName.toLowerCase())
      .filter(t => !["div", "span", "mark"].includes(t)));
  check(tags.length === 0, `the lines are text: no other elements (${tags.join(",")})`);
  const levels = {};
  for (const l of all) levels[l.level] = (levels[l.level] ?? 0) + 1;
  console.log("levels: " + JSON.stringify(levels));

  // The level filter.
  await page.selectOption("#logs-level", "warning");
  let r = await shown(page);
  const total = Number(await page.getAttribute("#logs-lines", "data-total"));
  check(r.every(l => l.level === "warning" || l.level === "error") && r.length <= total,
        `warning and error: ${r.length} of ${total} lines, all warning or error`);
  if (levels.info || levels.debug)
    check(r.length < total, "the level filter narrows them (info and debug lines hidden)");
  await page.selectOption("#logs-level", "error");
  r = await shown(page);
  check(r.every(l => l.level === "error"), `error: ${r.length} lines, all error`);
  await page.selectOption("#logs-level", "all");

  // The search: a word some lines have and others not, typed in capitals.
  const lines = await shown(page);
  const words = new Map();
  for (const l of lines)
    for (const w of new Set(l.text.toLowerCase().match(/[a-z_]{4,}/g) ?? []))
      words.set(w, (words.get(w) ?? 0) + 1);
  // The word in closest to half the lines: new lines that come meanwhile
  // (the tail is live) cannot make it match them all.
  const word = [...words].sort((a, b) => Math.abs(a[1] - lines.length / 2) - Math.abs(b[1] - lines.length / 2))
               .find(([, n]) => n < lines.length)?.[0]
               ?? [...words.keys()][0];
  check(word !== undefined, `searching for "${word}"`);
  await page.fill("#logs-search", word.toUpperCase());
  r = await shown(page);
  check(r.length > 0 && r.every(l => l.text.toLowerCase().includes(word) && l.marks > 0),
        `search "${word.toUpperCase()}": ${r.length} of ${lines.length} lines, each with it marked`);
  if (words.get(word) < lines.length) {
    const total = Number(await page.getAttribute("#logs-lines", "data-total"));
    check(r.length < total, `the search narrows them (${r.length} of ${total})`);
  }
  await page.fill("#logs-search", "");
  r = await shown(page);
  check(r.length >= lines.length, `search cleared: ${r.length} lines again`);

  // Live tail: later requests ask for the lines after the last one shown.
  const at = Number(await page.evaluate(() => document.body.dataset.updates));
  await page.waitForFunction(u => Number(document.body.dataset.updates) >= u, at + 3, { timeout: 45000 });
  const later = asked.filter(u => u.searchParams.get("task") === task && Number(u.searchParams.get("after")) > 0);
  check(later.length > 0, `it keeps polling with after=LAST (${later.length} requests, the last after=${later.at(-1)?.searchParams.get("after")})`);
  const bottom = await page.evaluate(() => {
    const b = document.getElementById("logs-lines");
    return b.scrollHeight <= b.clientHeight || b.scrollTop + b.clientHeight >= b.scrollHeight - 10;
  });
  check(bottom, "the view is scrolled to the newest line");
  await finish(page, errors, screenshot);
} finally {
  await browser.close();
}
