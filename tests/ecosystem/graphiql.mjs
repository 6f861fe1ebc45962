// GraphiQL in a real browser: Debian's Chromium driven by playwright-core (no browser download).
//   node graphiql.mjs URL SCREENSHOT_FILE QUERY
// Opens URL (runsgate's /graphql), types QUERY in GraphiQL's editor, runs it, waits for the
// result pane, saves a screenshot and prints JSON on stdout:
// {result: <the result pane's JSON, parsed>, requests: [every URL the page asked for], pageErrors: [...]}
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { chromium } from 'playwright-core';

const [url, screenshot, query] = process.argv.slice(2);
const executablePath = process.env.CHROMIUM_BIN || '/usr/bin/chromium';
const userDataDir = mkdtempSync(join(tmpdir(), 'runsgate-chromium-'));
const context = await chromium.launchPersistentContext(userDataDir, {
  executablePath,
  headless: true,
  viewport: { width: 1400, height: 900 },
  args: [
    '--headless',
    '--no-sandbox',
    '--disable-gpu',
    '--disable-quic',
    '--no-first-run',
    '--disable-background-networking',
    '--disable-component-update',
    '--disable-sync',
  ],
});
const requests = [];
const pageErrors = [];
try {
  const page = context.pages()[0] ?? (await context.newPage());
  page.on('request', (request) => requests.push(request.url()));
  page.on('pageerror', (error) => pageErrors.push(String(error)));
  await page.goto(url, { waitUntil: 'load', timeout: 60_000 });

  // the query editor (CodeMirror) is there once React and GraphiQL have loaded
  const editor = page.locator('.graphiql-query-editor .CodeMirror');
  await editor.waitFor({ state: 'visible', timeout: 60_000 });
  await editor.click();
  await page.keyboard.press('Control+A');
  await page.keyboard.press('Delete');
  // typed as text input (the editor would otherwise add a closing bracket per opening one)
  await page.keyboard.insertText(query);
  await page.locator('.graphiql-execute-button').click();

  // the result pane fills with the response
  const resultPane = page.locator('.graphiql-response .CodeMirror');
  await page.waitForFunction(
    () => {
      const cm = document.querySelector('.graphiql-response .CodeMirror');
      return cm && cm.CodeMirror && cm.CodeMirror.getValue().includes('"data"');
    },
    null,
    { timeout: 60_000 },
  );
  const text = await resultPane.evaluate((el) => el.CodeMirror.getValue());
  const visible = await resultPane.innerText();
  await page.screenshot({ path: screenshot, fullPage: false });
  process.stdout.write(JSON.stringify({ result: JSON.parse(text), visible, requests, pageErrors }) + '\n');
} finally {
  await context.close();
  rmSync(userDataDir, { recursive: true, force: true });
}
