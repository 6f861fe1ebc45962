// Numbers JavaScript cannot hold (integers beyond 2^53) through every path of the inbox, in Debian's
// Chromium (playwright-core):
// It opens the per-agent listing (`/inbox?view=agents`), which it was written for; the review
// queue's page (one listing across agents, in its own order) is inbox-review-queue.mjs's.
//   node inbox-numbers.mjs BASE_URL OUTPUT_DIR API_KEY
// against a server with the json-echo test agent (tests/_json_agent.py) beside the demo agents.
// Signs in with API_KEY, then, each run started through the API:
// - edit: a refund of order 1790000000000000001; records its Arguments panel and the conversation's
//   tool call, then "Edit arguments", the editor's text, changes only the amount, approves, and
//   records the request sent and the progress card to its outcome;
// - approve: a refund of order 1790000000000000003, approved as is;
// - bulk: refunds of orders 1790000000000000005 and ...007, approved with "Approve selected";
// - form: a json-echo call whose resumeSchema has an integer with a large default (account) and one
//   without (amount): records the form's fields, types the amount, and resumes;
// - json: a json-echo call without a schema, resumed through the JSON editor;
// then, in a tab whose browser lacks JSON.parse source text access (JSON.rawJSON removed before the
// page runs), what the page says of a large order id, what its editor and resume form do with large
// numbers, and a plain approval.
// Records rather than stops on what it does not find, so each check is the test's.
// Prints JSON: {runs, edit, approve, bulk, form, json, legacy, sent, pageErrors, cspViolations, consoleErrors}.
import { join } from 'node:path';
import { api, failed, launchChromium } from './_browser.mjs';

const [baseUrl, outputDir, apiKey] = process.argv.slice(2);
const TIMEOUT = 60_000;
const { start } = api(baseUrl, apiKey);
const { context, close } = await launchChromium();
const out = { runs: {}, sent: [], pageErrors: [], cspViolations: [], consoleErrors: [] };
try {
  const page = context.pages()[0] ?? (await context.newPage());
  page.setDefaultTimeout(TIMEOUT);
  page.on('pageerror', (error) => out.pageErrors.push(String(error)));
  page.on('console', (message) => {
    if (message.type() !== 'error') return;
    if (/Content Security Policy/i.test(message.text())) out.cspViolations.push(message.text());
    else out.consoleErrors.push(message.text());
  });
  // every decision a tab sends, as the bytes it sent
  const record = (tab, name) =>
    tab.on('request', (req) => {
      const body = req.postData();
      const operation = body && /"query":"mutation (\w+)/.exec(body);
      if (operation) out.sent.push({ tab: name, operation: operation[1], body });
    });
  record(page, 'exact');

  const article = (runId) => page.locator(`article[aria-labelledby="run-${runId}"]`);
  const card = (runId) => page.locator(`[data-progress="${runId}"]`);
  // the text of a run's `dt` LABEL's `dd` (its first call's), as shown
  const panel = (runId, label) =>
    article(runId).evaluate((el, name) => {
      const dt = [...el.querySelectorAll('dt')].find((d) => d.textContent === name);
      return dt ? dt.nextElementSibling.innerText : null;
    }, label);
  const conversationCall = (runId) => article(runId).locator('li.message.tool-call pre').last().innerText();
  const outcome = async (runId) => {
    await card(runId).getByText('Completed.').waitFor();
    return card(runId).innerText();
  };

  await page.goto(`${baseUrl}/inbox?view=agents`, { waitUntil: 'load', timeout: TIMEOUT });
  await page.getByLabel('API key or token').focus();
  await page.keyboard.type(apiKey);
  await page.keyboard.press('Enter');
  await page.getByText('Live: new runs and decisions appear as they happen').waitFor();

  // edit: change only the amount
  out.runs.edit = await start('refund-agent', 'Please refund order 1790000000000000001');
  await article(out.runs.edit).waitFor();
  out.edit = { arguments: await panel(out.runs.edit, 'Arguments'), conversation: await conversationCall(out.runs.edit) };
  await article(out.runs.edit).getByRole('button', { name: 'Edit arguments' }).click();
  const editor = article(out.runs.edit).getByLabel('Edited arguments (JSON)');
  out.edit.editor = await editor.inputValue();
  await editor.fill(out.edit.editor.replace(/"amount": [0-9.e+-]+/, '"amount": 25'));
  out.edit.edited = await editor.inputValue();
  await article(out.runs.edit).getByRole('button', { name: 'Approve with edited arguments' }).click();
  out.edit.card = await outcome(out.runs.edit);
  await page.screenshot({ path: join(outputDir, 'inbox-numbers-edit.png'), fullPage: true });

  // approve as shown
  out.runs.approve = await start('refund-agent', 'Please refund order 1790000000000000003');
  await article(out.runs.approve).waitFor();
  out.approve = { arguments: await panel(out.runs.approve, 'Arguments') };
  await article(out.runs.approve).getByRole('button', { name: 'Approve', exact: true }).click();
  out.approve.card = await outcome(out.runs.approve);

  // bulk
  out.runs.bulk = [
    await start('refund-agent', 'Please refund order 1790000000000000005'),
    await start('refund-agent', 'Please refund order 1790000000000000007'),
  ];
  out.bulk = { arguments: [], cards: [] };
  for (const runId of out.runs.bulk) {
    await article(runId).waitFor();
    out.bulk.arguments.push(await panel(runId, 'Arguments'));
    await article(runId).getByRole('checkbox', { name: /bulk decision/ }).check();
  }
  await page.locator('section[aria-labelledby="agent-refund-agent"]').getByRole('button', { name: 'Approve selected' }).click();
  for (const runId of out.runs.bulk) out.bulk.cards.push(await outcome(runId));

  // the resume form: a large default, and a large number typed in
  // (the prompt is JSON text, read by Python: every number as written)
  const schema = '{"type": "object", "properties": {"account": {"type": "integer", "default": 1790000000000000011}, "amount": {"type": "integer"}}, "required": ["account", "amount"]}';
  const payload = '{"account": 1790000000000000009, "scale": 1e16, "rate": 0.1}';
  out.runs.form = await start('json-echo', `{"ask": {"payload": ${payload}, "schema": ${schema}}}`);
  await article(out.runs.form).waitFor();
  out.form = { payload: await panel(out.runs.form, 'Suspend payload') };
  const field = (name) => article(out.runs.form).locator(`input[id$="data_${name}"]`);
  out.form.account = await field('account').inputValue();
  await field('amount').fill('1790000000000000013');
  out.form.amount = await field('amount').inputValue();
  await article(out.runs.form).getByRole('button', { name: 'Resume run' }).click();
  out.form.card = await outcome(out.runs.form);
  await page.screenshot({ path: join(outputDir, 'inbox-numbers-form.png'), fullPage: true });

  // the JSON editor of a call without a schema
  out.runs.json = await start('json-echo', '{"ask": {"payload": "an account number, please"}}');
  await article(out.runs.json).waitFor();
  await article(out.runs.json).getByLabel('Resume data (JSON)').fill('{"account": 1790000000000000015, "ratio": 1.0}');
  await article(out.runs.json).getByRole('button', { name: 'Resume run' }).click();
  out.json = { card: await outcome(out.runs.json) };

  // a browser without JSON.parse source text access
  const legacy = await context.newPage();
  legacy.setDefaultTimeout(TIMEOUT);
  legacy.on('pageerror', (error) => out.pageErrors.push(String(error)));
  record(legacy, 'legacy');
  await legacy.addInitScript(() => {
    delete JSON.rawJSON;
    delete JSON.isRawJSON;
  });
  await legacy.goto(`${baseUrl}/inbox?view=agents`, { waitUntil: 'load', timeout: TIMEOUT });
  await legacy.getByLabel('API key or token').fill(apiKey);
  await legacy.keyboard.press('Enter');
  await legacy.getByText('Live: new runs and decisions appear as they happen').waitFor();
  out.legacy = { rawJSON: await legacy.evaluate(() => typeof JSON.rawJSON) };
  const there = (runId) => legacy.locator(`article[aria-labelledby="run-${runId}"]`);
  out.runs.legacy = await start('refund-agent', 'Please refund order 1790000000000000021');
  await there(out.runs.legacy).waitFor();
  out.legacy.arguments = await there(out.runs.legacy).evaluate((el) => {
    const dt = [...el.querySelectorAll('dt')].find((d) => d.textContent === 'Arguments');
    return dt.nextElementSibling.innerText;
  });
  await there(out.runs.legacy).getByRole('button', { name: 'Edit arguments' }).click();
  const legacyEditor = there(out.runs.legacy).getByLabel('Edited arguments (JSON)');
  await legacyEditor.fill((await legacyEditor.inputValue()).replace(/"amount": [0-9.e+-]+/, '"amount": 25'));
  await there(out.runs.legacy).getByRole('button', { name: 'Approve with edited arguments' }).click();
  out.legacy.editorProblem = await there(out.runs.legacy).locator('.json-editor .field-error').innerText();
  await there(out.runs.legacy).getByRole('button', { name: 'Approve', exact: true }).click();
  await legacy.locator(`[data-progress="${out.runs.legacy}"]`).getByText('Completed.').waitFor();
  out.legacy.card = await legacy.locator(`[data-progress="${out.runs.legacy}"]`).innerText();
  out.runs.legacyForm = await start('json-echo', `{"ask": {"payload": ${payload}, "schema": ${schema}}}`);
  await there(out.runs.legacyForm).waitFor();
  await there(out.runs.legacyForm).locator('input[id$="data_amount"]').fill('1790000000000000013');
  await there(out.runs.legacyForm).getByRole('button', { name: 'Resume run' }).click();
  await there(out.runs.legacyForm).locator('.error-detail').first().waitFor();
  out.legacy.formErrors = await there(out.runs.legacyForm).locator('.error-detail').allInnerTexts();
  await legacy.screenshot({ path: join(outputDir, 'inbox-numbers-legacy.png'), fullPage: true });
  process.stdout.write(JSON.stringify(out) + '\n');
} catch (error) {
  await failed(error, out, context, join(outputDir, 'inbox-numbers-failure.png'));
} finally {
  await close();
}
