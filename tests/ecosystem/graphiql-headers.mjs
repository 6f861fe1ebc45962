// GraphiQL with a credential, in a real browser: where does the bearer token end up?
//   node graphiql-headers.mjs URL TOKEN QUERY
// Opens URL (runsgate's /graphql, authentication on), writes {"Authorization": "Bearer TOKEN"} in
// GraphiQL's headers editor, types QUERY and runs it, then reads every key of the origin's
// localStorage and sessionStorage, reloads the page in the same browser profile (as a person
// coming back later) and reads the headers editor again. Prints JSON on stdout:
// {result, localStorage: {key: value}, sessionStorage: {key: value}, headersAfterReload, pageErrors}
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { chromium } from 'playwright-core';

const [url, token, query] = process.argv.slice(2);
const executablePath = process.env.CHROMIUM_BIN || '/usr/bin/chromium';
const userDataDir = mkdtempSync(join(tmpdir(), 'runsgate-chromium-'));
const context = await chromium.launchPersistentContext(userDataDir, {
  executablePath,
  headless: true,
  viewport: { width: 1400, height: 900 },
  args: ['--headless', '--no-sandbox', '--disable-gpu', '--no-first-run', '--disable-background-networking'],
});
const pageErrors = [];

async function headersEditor(page) {
  // the editor tools (variables, headers) are shown; the Headers tab selects the headers editor
  await page.getByRole('button', { name: 'Headers' }).click();
  const editor = page.locator('.graphiql-editor-tool .graphiql-editor:not(.hidden) .CodeMirror');
  await editor.waitFor({ state: 'visible', timeout: 60_000 });
  return editor;
}

async function storage(page, name) {
  return page.evaluate((kind) => {
    const store = window[kind];
    const all = {};
    for (let i = 0; i < store.length; i += 1) all[store.key(i)] = store.getItem(store.key(i));
    return all;
  }, name);
}

try {
  const page = context.pages()[0] ?? (await context.newPage());
  page.on('pageerror', (error) => pageErrors.push(String(error)));
  await page.goto(url, { waitUntil: 'load', timeout: 60_000 });
  const queryEditor = page.locator('.graphiql-query-editor .CodeMirror');
  await queryEditor.waitFor({ state: 'visible', timeout: 60_000 });

  const headers = await headersEditor(page);
  await headers.click();
  await page.keyboard.press('Control+A');
  await page.keyboard.press('Delete');
  await page.keyboard.insertText(JSON.stringify({ Authorization: `Bearer ${token}` }));

  await queryEditor.click();
  await page.keyboard.press('Control+A');
  await page.keyboard.press('Delete');
  await page.keyboard.insertText(query);
  await page.locator('.graphiql-execute-button').click();
  await page.waitForFunction(
    () => {
      const cm = document.querySelector('.graphiql-response .CodeMirror');
      return cm && cm.CodeMirror && cm.CodeMirror.getValue().includes('"data"');
    },
    null,
    { timeout: 60_000 },
  );
  const result = JSON.parse(
    await page.locator('.graphiql-response .CodeMirror').evaluate((el) => el.CodeMirror.getValue()),
  );
  await page.waitForTimeout(1000); // GraphiQL writes its storage after a debounce
  const local = await storage(page, 'localStorage');
  const session = await storage(page, 'sessionStorage');

  // a person coming back later, in the same browser profile
  await page.close();
  const again = await context.newPage();
  again.on('pageerror', (error) => pageErrors.push(String(error)));
  await again.goto(url, { waitUntil: 'load', timeout: 60_000 });
  await again.locator('.graphiql-query-editor .CodeMirror').waitFor({ state: 'visible', timeout: 60_000 });
  const headersAfterReload = await (await headersEditor(again)).evaluate((el) => el.CodeMirror.getValue());
  const localAfterReload = await storage(again, 'localStorage');

  process.stdout.write(
    JSON.stringify({
      result,
      localStorage: local,
      sessionStorage: session,
      localStorageAfterReload: localAfterReload,
      headersAfterReload,
      pageErrors,
    }) + '\n',
  );
} finally {
  await context.close();
  rmSync(userDataDir, { recursive: true, force: true });
}
