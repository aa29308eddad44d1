// The web UI's actors view against a live cluster with more than 25 actors:
//   node console_actors.mjs URL [SCREENSHOT.png]
// Every actor is listed (more than 25 rows, all reachable page by page),
// sorting by a column orders the rows (again: the other way), the filter
// narrows them, and clicking a row shows that actor's detail (every field)
// and its charts (messages/s, mailbox, busy %) with points, and keeps it
// selected across updates.
// Prints what it saw; exits 1 with the reason when a check fails.
import { check, finish, launch } from "./browser.mjs";

const [url, screenshot] = process.argv.slice(2);

// The visible rows in one go (the page rebuilds them on every update).
const rows = page => page.evaluate(() => [...document.querySelectorAll("#actors tbody tr")].map(tr => {
  const td = [...tr.children].map(c => c.textContent);
  const num = s => s === "-" ? -Infinity : Number(s);
  return { key: tr.dataset.task + "|" + tr.dataset.id, task: td[0], kind: td[1],
           name: tr.children[2].title, mailbox: num(td[3]), max: num(td[4]),
           msgs: num(td[5]), busy: num(td[6]), selected: tr.classList.contains("selected") };
}));
const ordered = (values, cmp) => values.every((v, i) => i === 0 || values[i - 1] === v || cmp(values[i - 1], v) <= 0);
const updatesNow = page => page.evaluate(() => Number(document.body.dataset.updates));
const nextUpdates = async (page, n) => {
  const at = await updatesNow(page);
  await page.waitForFunction(u => Number(document.body.dataset.updates) >= u, at + n, { timeout: 45000 });
};

const browser = await launch();
try {
  const page = await browser.newPage({ viewport: { width: 1440, height: 1400 } });
  const errors = [];
  page.on("pageerror", e => errors.push(String(e)));
  await page.goto(url);
  await page.waitForFunction(() => Number(document.body.dataset.updates) >= 2, null, { timeout: 60000 });

  // All of them, 50 a page.
  const total = Number(await page.getAttribute("#actors", "data-total"));
  const first = await rows(page);
  check(total > 25 && first.length === Math.min(50, total),
        `the actors table lists ${first.length} of ${total} actors on its first page`);
  check(first.length > 25, `more than 25 rows (${first.length})`);

  // Sorted by task (then id), a stable order, 10 a page: every actor is
  // on one of the pages.
  await page.click('#actors th[data-sort="task"]');
  await page.selectOption("#actors-page-size", "10");
  const seen = new Set();
  let pages = 0, range = "";
  for (;;) {
    const shown = await rows(page);
    check(shown.length <= 10, `page ${pages + 1} has ${shown.length} rows`);
    shown.forEach(r => seen.add(r.key));
    range = await page.textContent("#actors-range");
    ++pages;
    if (await page.isDisabled("#actors-next") || pages > 100) break;
    await page.click("#actors-next");
  }
  const totalNow = Number(await page.getAttribute("#actors", "data-total"));
  check(pages === Math.ceil(totalNow / 10) && seen.size === totalNow,
        `${pages} pages of 10 hold all ${seen.size} of ${totalNow} actors (last: "${range}")`);
  await page.click("#actors-prev");
  check((await page.textContent("#actors-range")).startsWith(`rows ${(pages - 2) * 10 + 1}–`),
        `prev goes back a page (${await page.textContent("#actors-range")})`);
  await page.selectOption("#actors-page-size", "50");

  // Sorting: msgs/s biggest first, again smallest first; names A to Z.
  await page.click('#actors th[data-sort="msgs"]');
  let r = await rows(page);
  check(ordered(r.map(x => x.msgs), (a, b) => b - a) && r[0].msgs > 0,
        `by msgs/s, biggest first (${r.slice(0, 4).map(x => x.msgs).join(", ")}, …)`);
  check(await page.getAttribute('#actors th[data-sort="msgs"]', "aria-sort") === "descending"
        && (await page.textContent('#actors th[data-sort="msgs"]')).includes("▼"),
        "the sorted column is marked (▼)");
  await page.click('#actors th[data-sort="msgs"]');
  r = await rows(page);
  check(ordered(r.map(x => x.msgs), (a, b) => a - b),
        `clicked again, smallest first (${r.slice(0, 4).map(x => x.msgs).join(", ")}, …)`);
  await page.click('#actors th[data-sort="busy"]');
  r = await rows(page);
  check(ordered(r.map(x => x.busy), (a, b) => b - a), `by busy %, biggest first (${r[0].busy}, …)`);
  await page.click('#actors th[data-sort="name"]');
  r = await rows(page);
  const byName = (a, b) => a.localeCompare(b, undefined, { numeric: true });
  check(ordered(r.map(x => x.name), byName), `by name, A to Z (${r[0].name}, …)`);

  // The filter: a kind, case-insensitive.
  await page.fill("#actors-filter", "VARIABLE");
  r = await rows(page);
  const matched = Number(await page.getAttribute("#actors", "data-rows"));
  check(r.length > 0 && r.length < total && matched === r.length
        && r.every(x => [x.task, x.kind, x.name].some(f => f.toLowerCase().includes("variable"))),
        `filter "VARIABLE" narrows to ${r.length} rows (${await page.textContent("#actors-range")})`);
  // A task.
  await page.fill("#actors-filter", "ps/0");
  r = await rows(page);
  check(r.length > 0 && r.length < total && r.every(x => x.task === "ps/0"),
        `filter "ps/0" leaves ps/0's ${r.length} actors`);
  await page.fill("#actors-filter", "");

  // The busiest actor's detail and charts.
  await page.click('#actors th[data-sort="msgs"]');
  r = await rows(page);
  const chosen = r[0];
  await page.click(`#actors tbody tr[data-task="${chosen.key.split("|")[0]}"][data-id="${chosen.key.split("|")[1]}"] td:nth-child(3)`);
  const detail = await page.evaluate(() => {
    const box = document.getElementById("actor-detail");
    return { actor: box.dataset.actor,
             fields: Object.fromEntries([...box.querySelectorAll("dd[data-field]")]
               .map(d => [d.dataset.field, d.textContent])) };
  });
  check(detail.actor === chosen.key, `clicking ${chosen.key} (${chosen.kind} ${chosen.name}) selects it`);
  const wanted = ["id", "kind", "name", "container", "task", "since", "messages", "busy_us",
                  "busy_max_us", "mailbox", "mailbox_max", "detail"];
  const missing = wanted.filter(f => !(f in detail.fields));
  check(missing.length === 0, `the detail pane shows ${Object.keys(detail.fields).join(", ")}`);
  check(detail.fields.id === chosen.key.split("|")[1] && detail.fields.kind === chosen.kind
        && detail.fields.name === chosen.name,
        `its id ${detail.fields.id}, kind ${detail.fields.kind}, name ${detail.fields.name}`);
  for (const c of ["msgs", "mailbox", "busy"]) {
    await page.waitForFunction(
      id => Number(document.getElementById(id)?.dataset.points) >= 3
            && document.querySelector("#" + id + " canvas") !== null,
      "chart-actor-" + c, { timeout: 45000 });
    const points = await page.getAttribute("#chart-actor-" + c, "data-points");
    check(true, `its ${c} chart is drawn with ${points} points`);
  }
  const source = await page.getAttribute("#actor-detail", "data-source");
  console.log(`note: its charts' data came from ${source === "console" ? "/api/actor_history" : "the page's live documents"}`);
  // Still selected two updates later, though the rows were rebuilt.
  await nextUpdates(page, 2);
  const still = await page.evaluate(() => ({
    actor: document.getElementById("actor-detail").dataset.actor,
    selected: [...document.querySelectorAll("#actors tbody tr.selected")]
      .map(tr => tr.dataset.task + "|" + tr.dataset.id),
    messages: document.querySelector('#actor-detail dd[data-field="messages"]').textContent,
  }));
  check(still.actor === chosen.key && still.selected.length === 1 && still.selected[0] === chosen.key,
        `still selected after two updates (messages ${detail.fields.messages} → ${still.messages})`);
  check(Number(still.messages) >= Number(detail.fields.messages), "its fields follow the updates");
  await finish(page, errors, screenshot);
} finally {
  await browser.close();
}
