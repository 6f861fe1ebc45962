// A signed link's page in a real browser (issue 45 part 5):
//   node link-page.mjs URL SCREENSHOT
// Opens URL (runsgate's /links/{token}), reads the page's heading, text and button, runs axe-core
// on it, saves a screenshot, then clicks the button and reads the page it leads to. Prints JSON:
// {title, text, button, violations, after: {status, title, text}, pageErrors}
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { chromium } from 'playwright-core';
import { AXE_SOURCE } from './_browser.mjs';

const [url, screenshot] = process.argv.slice(2);
const userDataDir = mkdtempSync(join(tmpdir(), 'runsgate-chromium-'));
const context = await chromium.launchPersistentContext(userDataDir, {
  executablePath: process.env.CHROMIUM_BIN || '/usr/bin/chromium',
  headless: true,
  viewport: { width: 900, height: 800 },
  bypassCSP: true, // for axe-core only: the page's own policy allows no script
  args: ['--headless', '--no-sandbox', '--disable-gpu', '--no-first-run', '--disable-background-networking'],
});
const pageErrors = [];
try {
  const page = context.pages()[0] ?? (await context.newPage());
  page.on('pageerror', (error) => pageErrors.push(String(error)));
  await page.goto(url, { waitUntil: 'load' });
  const title = await page.locator('h1').innerText();
  const text = await page.locator('main').innerText();
  const button = await page.locator('button').innerText();
  await page.addScriptTag({ content: AXE_SOURCE });
  let violations = null;
  try {
    violations = await page.evaluate(async () => (await window.axe.run(document)).violations.map((v) => v.id));
  } catch (error) {
    violations = `axe could not run: ${error}`;
  }
  await page.screenshot({ path: screenshot, fullPage: true });
  const [response] = await Promise.all([page.waitForNavigation(), page.locator('button').click()]);
  const after = {
    status: response ? response.status() : null,
    title: await page.locator('h1').innerText(),
    text: await page.locator('main').innerText(),
  };
  process.stdout.write(JSON.stringify({ title, text, button, violations, after, pageErrors }));
} finally {
  await context.close();
  rmSync(userDataDir, { recursive: true, force: true });
}
