// Loads actorflow-console's web UI in Debian's headless Chromium after a
// task it watched went down, and checks that the task's row says so with
// its last-known values greyed and its reason wrapped, not run off:
//   node console_down.mjs URL DOWN_TASK UP_TASK [SCREENSHOT.png]
// It prints "ready" once DOWN_TASK is listed up: the caller kills it then.
// Prints what it saw; exits 1 with the reason when a check fails.
import { check, launch } from "./browser.mjs";

const [url, downTask, upTask, screenshot] = process.argv.slice(2);

const browser = await launch();
try {
  const page = await browser.newPage({ viewport: { width: 1200, height: 900 } });
  const errors = [];
  page.on("pageerror", e => errors.push(String(e)));
  await page.goto(url);
  const row = page.locator(`#tasks tr[data-task="${downTask}"]`);
  await page.waitForFunction(
    t => document.querySelector(`#tasks tr[data-task="${t}"]`)?.dataset.state === "up",
    downTask, { timeout: 20000 });
  check(true, `${downTask} is listed up`);
  // The test kills it now.
  console.log("ready");
  await page.waitForFunction(
    t => document.querySelector(`#tasks tr[data-task="${t}"]`)?.dataset.state === "down",
    downTask, { timeout: 20000 });
  check(true, `${downTask} is listed down`);
  // Its last-known values (RSS, CPU), greyed: not live.
  const rss = await row.locator("td:nth-child(7)").textContent();
  check(rss !== "-" && Number(rss) > 0, `${downTask} keeps its last RSS (${rss} MB)`);
  const grey = await row.locator("td:nth-child(7)").evaluate(
    td => getComputedStyle(td).color);
  check(grey === "rgb(153, 153, 153)", `its last-known values are grey (${grey})`);
  const live = await page.locator(`#tasks tr[data-task="${upTask}"] td:nth-child(7)`)
                         .evaluate(td => getComputedStyle(td).color);
  check(live !== grey, `${upTask}'s live values are not (${live})`);
  // The reason wraps within the cell instead of running off the page.
  const why = row.locator("td:nth-child(9)");
  const text = await why.textContent();
  check(text.length > 0, `the reason is shown (${text.slice(0, 60)}...)`);
  const box = await why.boundingBox();
  const lineHeight = await why.evaluate(td => parseFloat(getComputedStyle(td).lineHeight)
                                              || parseFloat(getComputedStyle(td).fontSize) * 1.2);
  const width = page.viewportSize().width;
  check(box.x + box.width <= width,
        `the reason stays within the window (its cell ends at ${Math.round(box.x + box.width)} of ${width} px)`);
  check(text.length < 60 || box.height > 1.5 * lineHeight,
        `a long reason wraps (${Math.round(box.height)} px high)`);
  check(errors.length === 0, "no script errors " + errors.join("; "));
  if (screenshot) {
    await page.screenshot({ path: screenshot, fullPage: true });
    console.log("screenshot: " + screenshot);
  }
} finally {
  await browser.close();
}
