// The web UI's topology against a live cluster:
//   node console_topology.mjs URL A=B,C=D,... [SCREENSHOT.png]
// A=B,...: the pairs of tasks that talk (full task names). The drawing
// has one edge per pair (as the document's "topology" has), each once,
// up and labelled with its MB/s when bytes flow; its table lists the
// same pairs; the bytes/s chart names links by task when the channel
// links carry "peer_task".
// Prints what it saw; exits 1 with the reason when a check fails.
import { check, finish, launch } from "./browser.mjs";

const [url, pairList, screenshot] = process.argv.slice(2);
const key = (a, b) => a < b ? a + " = " + b : b + " = " + a;
const wanted = new Set(pairList.split(",").map(p => key(...p.split("="))));

const browser = await launch();
try {
  const page = await browser.newPage({ viewport: { width: 1440, height: 1400 } });
  const errors = [];
  page.on("pageerror", e => errors.push(String(e)));
  await page.goto(url);
  await page.waitForFunction(() => Number(document.body.dataset.updates) >= 3, null, { timeout: 60000 });
  const doc = await page.evaluate(async () => (await fetch("/api/cluster")).json());
  check(Array.isArray(doc.topology), `the document has a topology (${doc.topology?.length} pairs)`);
  const drawn = await page.evaluate(() => ({
    edges: [...document.querySelectorAll("#topology svg g.edge")].map(g => ({
      a: g.dataset.a, b: g.dataset.b, state: g.dataset.state,
      label: g.querySelector("text")?.textContent ?? "",
      width: Number(g.querySelector("path").getAttribute("stroke-width")) })),
    nodes: [...document.querySelectorAll("#topology svg g.node")].map(g => g.dataset.task),
    rows: [...document.querySelectorAll("#topology-table tbody tr")].map(tr => [tr.dataset.a, tr.dataset.b]),
  }));
  const keys = drawn.edges.map(e => key(e.a, e.b));
  check(new Set(keys).size === keys.length, `each pair drawn once (${keys.length} edges)`);
  check(keys.length === wanted.size && keys.every(k => wanted.has(k)),
        `one edge per talking pair: ${keys.join("; ")}`);
  check(keys.length === doc.topology.length, `as many as the document's pairs (${doc.topology.length})`);
  check(drawn.rows.length === keys.length && drawn.rows.every(([a, b]) => wanted.has(key(a, b))),
        `the table lists the same ${drawn.rows.length} pairs`);
  for (const t of new Set([...wanted].flatMap(k => k.split(" = "))))
    check(drawn.nodes.includes(t), `${t} is a node`);
  for (const e of drawn.edges) {
    check(e.state === "up", `${e.a} = ${e.b} is up (${e.state})`);
    const flows = doc.topology.find(x => key(x.a, x.b) === key(e.a, e.b));
    if ((flows.bytes_per_s_ab ?? 0) + (flows.bytes_per_s_ba ?? 0) > 0)
      check(/MB\/s/.test(e.label), `labelled "${e.label}", ${e.width} px wide`);
  }
  // Links named by task in the bytes/s chart.
  const named = doc.tasks.some(t => (t.node?.channel ?? []).some(l => l.peer_task));
  if (named) {
    await page.waitForFunction(() => Number(document.getElementById("chart-bytes").dataset.series) > 0,
                               null, { timeout: 45000 });
    const labels = await page.evaluate(() =>
      [...document.querySelectorAll("#chart-bytes .u-legend .u-series .u-label")].map(l => l.textContent).slice(1));
    check(labels.length > 0 && labels.every(l => /^\S+\/\d+ → \S+\/\d+$/.test(l)),
          `the bytes/s chart names links by task: ${labels.join(", ")}`);
  } else {
    console.log("note: no channel link has peer_task");
  }
  await finish(page, errors, screenshot);
} finally {
  await browser.close();
}
