// Loads actorflow-console's web UI in Debian's headless Chromium after a
// task it watched went down, and checks that the task's row says so with
// its last-known values greyed and its reason wrapped, not run off:
//   node console_down.mjs URL DOWN_TASK UP_TASK [SCREENSHOT.png]
// It prints "ready" once DOWN_TASK is listed up: the caller kills it then.
// Prints what it saw; exits 1 with the reason when a check fails.
import { check, finish, launch } from "./browser.mjs";

const [url, downTask, upTask, screenshot] = process.argv.slice(2);

const browser = await launch();
try {
  const page = await browser.newPage({ viewport: { width: 1200, height: 900 } });
  const errors = [];
  page.on("pageerror", e => errors.push(String(e)));
  await page.goto(url);
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
  // Read in one go: the page rebuilds its tables on every update, and a
  // cell read between two of them would be one that was replaced.
  const seen = await page.evaluate(([down, up]) => {
    const row = document.querySelector(`#tasks tr[data-task="${down}"]`);
    const live = document.querySelector(`#tasks tr[data-task="${up}"] td:nth-child(7)`);
    const rss = row.querySelector("td:nth-child(7)");
    const why = row.querySelector("td:nth-child(9)");
    const box = why.getBoundingClientRect();
    const style = getComputedStyle(why);
    return {
      rss: rss.textContent, grey: getComputedStyle(rss).color,
      live: getComputedStyle(live).color, why: why.textContent,
      right: box.right, height: box.height,
      lineHeight: parseFloat(style.lineHeight) || parseFloat(style.fontSize) * 1.2,
    };
  }, [downTask, upTask]);
  // Its last-known values (RSS, CPU), greyed: not live.
  check(seen.rss !== "-" && Number(seen.rss) > 0,
        `${downTask} keeps its last RSS (${seen.rss} MB)`);
  check(seen.grey === "rgb(153, 153, 153)",
        `its last-known values are grey (${seen.grey})`);
  check(seen.live !== seen.grey, `${upTask}'s live values are not (${seen.live})`);
  // The reason wraps within the cell instead of running off the page.
  check(seen.why.length > 0, `the reason is shown (${seen.why.slice(0, 60)}...)`);
  const width = page.viewportSize().width;
  check(seen.right <= width,
        `the reason stays within the window (its cell ends at ${Math.round(seen.right)} of ${width} px)`);
  check(seen.why.length < 60 || seen.height > 1.5 * seen.lineHeight,
        `a long reason wraps (${Math.round(seen.height)} px high)`);
  await finish(page, errors, screenshot);
} finally {
  await browser.close();
}
