// The inbox when its credential expires: Debian's Chromium driven by playwright-core.
//   node inbox-expiry.mjs BASE_URL TOKEN
// Signs in to BASE_URL/inbox with TOKEN (a JWT about to expire), waits for the live connection,
// then for the server to close it (4403 when the token's `exp` passes) and the page to ask for a
// key again. Prints JSON: {live, message, sessionStorage, pageErrors}.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { chromium } from 'playwright-core';

const [baseUrl, token] = process.argv.slice(2);
const userDataDir = mkdtempSync(join(tmpdir(), 'runsgate-chromium-'));
const context = await chromium.launchPersistentContext(userDataDir, {
  executablePath: process.env.CHROMIUM_BIN || '/usr/bin/chromium',
  headless: true,
  args: ['--headless', '--no-sandbox', '--disable-gpu', '--no-first-run', '--disable-background-networking', '--disable-component-update', '--disable-sync'],
});
const pageErrors = [];
try {
  const page = context.pages()[0] ?? (await context.newPage());
  page.setDefaultTimeout(60_000);
  page.on('pageerror', (error) => pageErrors.push(String(error)));
  await page.goto(`${baseUrl}/inbox`, { waitUntil: 'load' });
  await page.getByLabel('API key or token').fill(token);
  await page.keyboard.press('Enter');
  await page.getByText('Live: new runs and decisions appear as they happen').waitFor();
  const live = true;
  await page.getByLabel('API key or token').waitFor(); // asked again once the socket is closed
  const message = await page.locator('[role="alert"]').first().innerText();
  const sessionStorage = await page.evaluate(() => ({ ...window.sessionStorage }));
  process.stdout.write(JSON.stringify({ live, message, sessionStorage, pageErrors }) + '\n');
} finally {
  await context.close();
  rmSync(userDataDir, { recursive: true, force: true });
}
