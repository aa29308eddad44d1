// What the browser tests share: Debian's headless Chromium launched as
// they want it, and check(), which prints what a test saw and fails it
// (exit status 1, the reason on stderr) when a check does not hold.
import { chromium } from "playwright-core";

export function check(ok, what) {
  if (!ok) {
    console.error("FAILED: " + what);
    process.exitCode = 1;
    throw new Error(what);
  }
  console.log("ok: " + what);
}

export function launch() {
  return chromium.launch({
    executablePath: "/usr/bin/chromium",
    args: ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
           "--disable-background-networking", "--disable-component-update",
           "--disable-sync"],
  });
}

// The end of a page's checks: no script errors, and the screenshot when
// one was asked for. The screenshot is for a person to look at, not a
// check: on a loaded host Chromium once took longer than 30 s to paint
// the whole page, which says nothing about the page.
export async function finish(page, errors, screenshot) {
  check(errors.length === 0, "no script errors " + errors.join("; "));
  if (screenshot) {
    try {
      await page.screenshot({ path: screenshot, fullPage: true,
                              timeout: 60000 });
      console.log("screenshot: " + screenshot);
    } catch (e) {
      console.log("screenshot not taken: " + e.message.split("\n")[0]);
    }
  }
}
