// The web UI's alerts after a task it watched went down:
//   node console_alerts.mjs URL DOWN_TASK [SCREENSHOT.png]
// It prints "ready" once DOWN_TASK is listed up (and no task_down alert
// names it): the caller kills DOWN_TASK then. The alerts section must then
// show an active task_down alert for it, red, with the time it fired, and
// the status line "unhealthy"; edges of the topology to it are not drawn up.
// Prints what it saw; exits 1 with the reason when a check fails.
import { check, finish, launch } from "./browser.mjs";

const [url, downTask, screenshot] = process.argv.slice(2);
const alertSel = `#alerts .alert.active[data-rule="task_down"][data-task="${downTask}"]`;

const browser = await launch();
try {
  const page = await browser.newPage({ viewport: { width: 1440, height: 1000 } });
  const errors = [];
  page.on("pageerror", e => errors.push(String(e)));
  await page.goto(url);
  await page.waitForFunction(
    t => document.querySelector(`#tasks tr[data-task="${t}"]`)?.dataset.state === "up",
    downTask, { timeout: 60000 });
  const shownBefore = await page.evaluate(() => !document.getElementById("alerts").hidden);
  check(shownBefore, "the alerts section is shown");
  check(await page.locator(alertSel).count() === 0, `no task_down alert for ${downTask} while it is up`);
  // The test kills it now.
  console.log("ready");
  // Polled in the page: the banner is redrawn every update, which a
  // locator's wait for a stable element can miss on a loaded machine.
  await page.waitForFunction(sel => document.querySelector(sel) !== null, alertSel,
                             { timeout: 60000, polling: 200 });
  const seen = await page.evaluate(([sel, t]) => {
    const a = document.querySelector(sel);
    const box = a.getBoundingClientRect();
    return { text: a.textContent, background: getComputedStyle(a).backgroundColor,
             top: box.top + scrollY,
             status: document.getElementById("status").textContent,
             active: Number(document.getElementById("alerts").dataset.active),
             edges: [...document.querySelectorAll("#topology svg g.edge")]
               .filter(g => g.dataset.a === t || g.dataset.b === t).map(g => g.dataset.state) };
  }, [alertSel, downTask]);
  check(true, `an active task_down alert for ${downTask}: "${seen.text}"`);
  check(/since \d\d:\d\d:\d\d/.test(seen.text), "it says since when");
  const [r, g, b] = seen.background.match(/\d+/g).map(Number);
  check(r > g + 20 && r > b + 20, `it is red (${seen.background})`);
  check(seen.top < 400, `it is near the top of the page (${Math.round(seen.top)} px)`);
  check(seen.active >= 1, `${seen.active} active alerts`);
  check(seen.status.includes("unhealthy"), `the status line says unhealthy (${seen.status})`);
  check(seen.edges.every(s => s !== "up"), `its topology edges are not up (${seen.edges.join(", ") || "none"})`);
  await finish(page, errors, screenshot);
} finally {
  await browser.close();
}
