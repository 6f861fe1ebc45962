// The reviewer inbox in a real browser: Debian's Chromium driven by playwright-core.
//   node inbox.mjs BASE_URL OUTPUT_DIR [API_KEY]
// It opens the per-agent listing (`/inbox?view=agents`), which it was written for; the review
// queue's page (one listing across agents, in its own order) is inbox-review-queue.mjs's.
// Opens BASE_URL/inbox (signing in with API_KEY when given), starts runs through the GraphQL
// API and waits for them to appear live, then decides them with the keyboard: approves one,
// declines one with a reason, resumes the weather run through its generated form (an empty form
// first, for the field error), and sees a run decided elsewhere leave the listing. When the server's schema has them (issue 18), it also edits and
// approves a call and approves two in bulk. axe-core checks the page twice. Prints JSON on stdout:
// {runs, features, activity, requests, pageErrors, cspViolations, navigations, axe, resumeError, ...}
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { chromium } from 'playwright-core';
import { axeViolations, failed } from './_browser.mjs';

const [baseUrl, outputDir, apiKey] = process.argv.slice(2);
const executablePath = process.env.CHROMIUM_BIN || '/usr/bin/chromium';
const TIMEOUT = 60_000;

async function graphql(query, variables = {}) {
  const headers = { 'content-type': 'application/json' };
  if (apiKey) headers.authorization = `Bearer ${apiKey}`;
  const response = await fetch(`${baseUrl}/graphql`, { method: 'POST', headers, body: JSON.stringify({ query, variables }) });
  const body = await response.json();
  if (body.errors) throw new Error(JSON.stringify(body.errors));
  return body.data;
}

const START = `mutation Start($input: StartRunInput!) {
  startRun(input: $input) { __typename ... on RunOutcome { runId status } ... on UserError { code message } }
}`;

async function start(agentId, prompt, extra = {}) {
  const outcome = (await graphql(START, { input: { agentId, prompt, ...extra } })).startRun;
  if (outcome.__typename !== 'RunOutcome' || outcome.status !== 'SUSPENDED') throw new Error(`did not suspend: ${JSON.stringify(outcome)}`);
  return outcome.runId;
}

// the same feature check as the page (scripts/inbox/src/documents.js)
async function schemaFeatures() {
  const data = await graphql(`{
    approveInput: __type(name: "ApproveToolCallInput") { inputFields { name } }
    toolCall: __type(name: "SuspendedToolCall") { fields { name } }
    mutation: __type(name: "Mutation") { fields { name } }
    subscription: __type(name: "Subscription") { fields { name } }
  }`);
  return {
    editedArgs: data.approveInput.inputFields.some((f) => f.name === 'editedArgs'),
    argsSchema: data.toolCall.fields.some((f) => f.name === 'argsSchema'),
    bulk: data.mutation.fields.some((f) => f.name === 'decideToolCalls'),
    progress: data.approveInput.inputFields.some((f) => f.name === 'waitFor') && data.subscription.fields.some((f) => f.name === 'runUpdates'),
  };
}

const userDataDir = mkdtempSync(join(tmpdir(), 'runsgate-chromium-'));
const context = await chromium.launchPersistentContext(userDataDir, {
  executablePath,
  headless: true,
  viewport: { width: 1280, height: 1000 },
  args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking', '--disable-component-update', '--disable-sync'],
});
const out = { runs: {}, requests: [], pageErrors: [], cspViolations: [], consoleErrors: [], navigations: 0, axe: [], screenshots: [] };
try {
  const page = context.pages()[0] ?? (await context.newPage());
  page.setDefaultTimeout(TIMEOUT);
  page.on('request', (request) => out.requests.push(request.url()));
  out.approvalsSent = 0; // POSTs of approveToolCall
  page.on('request', (request) => {
    if (request.method() === 'POST' && (request.postData() || '').includes('approveToolCall')) out.approvalsSent += 1;
  });
  page.on('pageerror', (error) => out.pageErrors.push(String(error)));
  page.on('console', (message) => {
    if (message.type() !== 'error') return;
    const text = message.text();
    if (/Content Security Policy/i.test(text)) out.cspViolations.push(text);
    else out.consoleErrors.push(text);
  });
  page.on('framenavigated', (frame) => {
    if (frame === page.mainFrame()) out.navigations += 1;
  });
  const shot = async (name) => {
    const path = join(outputDir, `${process.env.SCREENSHOT_PREFIX || ''}${name}`);
    await page.screenshot({ path, fullPage: true });
    out.screenshots.push(path);
  };
  const axe = async (label) => out.axe.push({ label, violations: await axeViolations(page) });
  const activity = (text) => page.locator('[role="log"] li', { hasText: text }).first().waitFor();
  const run = (runId) => page.locator(`article[aria-labelledby="run-${runId}"]`);
  // keyboard only: focus moves with Tab, buttons are pressed with Enter or Space
  const tabTo = async (locator) => {
    for (let i = 0; i < 200; i += 1) {
      if (await locator.evaluate((el) => el === document.activeElement)) return;
      await page.keyboard.press('Tab');
    }
    throw new Error(`Tab never reached ${locator}`);
  };

  await page.goto(`${baseUrl}/inbox?view=agents`, { waitUntil: 'load', timeout: TIMEOUT });
  if (apiKey) {
    // the page asks once for a key, and keeps it for the tab only
    await page.getByLabel('API key or token').waitFor();
    await shot('inbox-sign-in.png');
    await page.getByLabel('API key or token').focus();
    await page.keyboard.type(apiKey);
    await page.keyboard.press('Enter');
    out.sessionStorage = await page.evaluate(() => ({ ...window.sessionStorage }));
    out.localStorage = await page.evaluate(() => ({ ...window.localStorage }));
  }
  await page.getByText('Live: new runs and decisions appear as they happen').waitFor();
  await page.getByRole('heading', { name: /refund/i, level: 2 }).first().waitFor();
  out.features = await schemaFeatures();

  // runs started through the API appear without a reload
  const navigationsBefore = out.navigations;
  out.runs.approve = await start('refund-agent', 'Please refund order 1042', { threadId: 't-inbox', resourceId: 'customer-7' });
  out.runs.decline = await start('refund-agent', 'Please refund order 1043');
  out.runs.weather = await start('weather-agent', "What's the weather like?");
  for (const runId of Object.values(out.runs)) await run(runId).waitFor();
  await activity(`New suspended run ${out.runs.weather}`);
  out.reloaded = out.navigations !== navigationsBefore;
  out.visibleAfterStart = await page.locator('article h3 code').allInnerTexts();
  out.featuresShown = {
    editButtons: await page.getByRole('button', { name: 'Edit arguments' }).count(),
    bulkForms: await page.getByRole('button', { name: 'Approve selected' }).count(),
  };
  await shot('inbox-runs.png');
  await axe('runs listed');

  // approve: Tab to the button, press Enter
  await tabTo(run(out.runs.approve).getByRole('button', { name: 'Approve', exact: true }));
  await page.keyboard.press('Enter');
  await activity(`Approval of issue_refund on run ${out.runs.approve}: recorded`);

  // decline with a reason: type it, Tab to Decline, press Enter
  await tabTo(run(out.runs.decline).getByLabel(/Reason for declining/));
  await page.keyboard.type('Order 1043 was already refunded by phone');
  await page.keyboard.press('Tab');
  await page.keyboard.press('Enter');
  await activity(`Decline of issue_refund on run ${out.runs.decline}: recorded`);

  // resume through the generated form: empty first (the field's error), then a city
  const weather = run(out.runs.weather);
  await tabTo(weather.getByRole('button', { name: 'Resume run' }));
  await page.keyboard.press('Enter');
  const fieldError = weather.locator('.error-detail').first();
  await fieldError.waitFor();
  out.resumeError = {
    text: await fieldError.innerText(),
    focused: await page.evaluate(() => (document.activeElement ? document.activeElement.id : null)),
    inputId: await weather.getByLabel(/Name/).getAttribute('id'),
  };
  await shot('inbox-resume-field-error.png');
  await axe('resume form with a field error');
  await weather.getByLabel(/Name/).focus();
  await page.keyboard.type('Paris');
  await page.keyboard.press('Enter');
  await activity(`Resume of ask_city on run ${out.runs.weather}: recorded`);

  // a decision made elsewhere (through the API) reaches the page: the run leaves the listing
  out.runs.elsewhere = await start('refund-agent', 'Please refund order 1042');
  await run(out.runs.elsewhere).waitFor();
  const waiting = await graphql(
    'query One($runId: ID!) { suspendedRun(agentId: "refund-agent", runId: $runId) { toolCalls { toolCallId } } }',
    { runId: out.runs.elsewhere },
  );
  const elsewhere = await graphql(
    'mutation Decline($input: DeclineToolCallInput!) { declineToolCall(input: $input) { __typename } }',
    { input: { agentId: 'refund-agent', runId: out.runs.elsewhere, toolCallId: waiting.suspendedRun.toolCalls[0].toolCallId, reason: 'decided elsewhere' } },
  );
  out.elsewhere = elsewhere.declineToolCall.__typename;
  await activity(`Decision on run ${out.runs.elsewhere} by`);
  await run(out.runs.elsewhere).waitFor({ state: 'detached' });

  // issue 18, once the schema has it: edit then approve, and a bulk approval
  if (out.features.editedArgs) {
    out.runs.edited = await start('refund-agent', 'Please refund order 1042');
    const edited = run(out.runs.edited);
    await edited.waitFor();
    await tabTo(edited.getByRole('button', { name: 'Edit arguments' }));
    await page.keyboard.press('Enter');
    const editor = edited.getByLabel('Edited arguments (JSON)');
    if (out.features.argsSchema) {
      // an edit the tool's argsSchema refuses (no order_id, an amount that is no number): its
      // problems are shown under the editor and nothing is sent
      await editor.focus();
      await page.keyboard.press('Control+A');
      await page.keyboard.insertText('{"amount": "abc"}');
      const sentBefore = out.approvalsSent;
      await tabTo(edited.getByRole('button', { name: 'Approve with edited arguments' }));
      await page.keyboard.press('Enter');
      const problem = edited.locator('.field-error', { hasText: "tool's schema" });
      await problem.waitFor();
      out.schemaProblem = await problem.textContent();
      out.schemaProblemInvalid = await editor.getAttribute('aria-invalid');
      await shot('inbox-edit-schema-problem.png');
      await page.waitForTimeout(500); // a request the page would send has left by now
      out.approvalsSentWhileInvalid = out.approvalsSent - sentBefore;
    }
    await editor.focus();
    await page.keyboard.press('Control+A');
    await page.keyboard.insertText('{"order_id": 1042, "amount": 10.5}');
    await shot('inbox-edit-arguments.png');
    await tabTo(edited.getByRole('button', { name: 'Approve with edited arguments' }));
    await page.keyboard.press('Enter');
    await activity(`Approval with edited arguments of issue_refund on run ${out.runs.edited}: recorded`);
  }
  if (out.features.bulk) {
    out.runs.bulk = [await start('refund-agent', 'Please refund order 1042'), await start('refund-agent', 'Please refund order 1043')];
    for (const runId of out.runs.bulk) {
      const box = run(runId).getByRole('checkbox', { name: /bulk decision/ });
      await tabTo(box);
      await page.keyboard.press('Space');
    }
    await shot('inbox-bulk-selected.png');
    await tabTo(page.getByRole('button', { name: 'Approve selected' }).first());
    await page.keyboard.press('Enter');
    // one activity entry for the bulk action, naming each call
    await activity('Bulk approval of 2 calls on refund-agent: 2 recorded.');
    for (const runId of out.runs.bulk) await activity(new RegExp(`^issue_refund \\(call [^)]+\\) on run ${runId}: recorded`));
  }

  await page.getByText('No suspended runs.').first().waitFor();
  await shot('inbox-decided.png');
  await axe('after the decisions');
  out.activity = await page.locator('[role="log"] li').allInnerTexts();
  out.progressCards = await page.locator('[data-progress]').evaluateAll((cards) => cards.map((card) => card.dataset.progress));

  // filters and cursor paging: three runs of one thread, two per page, newest first
  out.runs.paged = [];
  for (let i = 0; i < 3; i += 1) out.runs.paged.push(await start('refund-agent', 'Please refund order 1042', { threadId: 't-paged' }));
  await start('refund-agent', 'Please refund order 1043', { threadId: 't-other' }).then((runId) => (out.runs.otherThread = runId));
  await page.goto(`${baseUrl}/inbox?view=agents&pageSize=2`, { waitUntil: 'load' }); // the tab keeps its key: no second prompt
  await page.getByText('Live: new runs and decisions appear as they happen').waitFor();
  await page.getByLabel('Agent', { exact: true }).selectOption('refund-agent');
  await page.getByLabel('Thread', { exact: true }).focus();
  await page.keyboard.type('t-paged');
  await page.keyboard.press('Enter');
  const shownRuns = () => page.locator('article h3 code').allInnerTexts();
  const waitShown = async (expected) => {
    await page.waitForFunction(
      (ids) => JSON.stringify([...document.querySelectorAll('article h3 code')].map((e) => e.textContent)) === JSON.stringify(ids),
      expected,
    );
    return shownRuns();
  };
  out.paging = { first: await waitShown([out.runs.paged[2], out.runs.paged[1]]) };
  out.paging.headings = await page.getByRole('heading', { level: 2 }).allInnerTexts();
  await shot('inbox-filtered-paged.png');
  await tabTo(page.getByRole('button', { name: 'Older runs' }));
  await page.keyboard.press('Enter');
  out.paging.second = await waitShown([out.runs.paged[0]]);
  await tabTo(page.getByRole('button', { name: 'Newer runs' }));
  await page.keyboard.press('Enter');
  out.paging.back = await waitShown([out.runs.paged[2], out.runs.paged[1]]);
  process.stdout.write(JSON.stringify(out) + '\n');
} catch (error) {
  await failed(error, out, context, join(outputDir, 'inbox-failure.png'));
} finally {
  await context.close();
  rmSync(userDataDir, { recursive: true, force: true });
}
