// The inbox as a reviewer's queue (issue 45 part 6), in Debian's Chromium (playwright-core):
//   node inbox-queue.mjs BASE_URL OUTPUT_DIR API_KEY
// It opens the per-agent listing (`/inbox?view=agents`), which it was written for; the review
// queue's page (one listing across agents, in its own order) is inbox-review-queue.mjs's.
// against a server with the json-echo test agent (tests/_json_agent.py) beside the demo agents.
// Signs in with API_KEY, shows the refund agent only, and records:
// - place: two refunds, both in view (a 2000 px tall window); the upper one approved with the
//   mouse: where the lower one's Approve button is before and after, what is under the pointer,
//   what has the focus, and what stands where the decided card was;
// - activity: that approval's line, an edit's line, and a bulk approval of three refunds (how many
//   entries the log gained, and the new one);
// - args: a json-echo `hold` of a note with newlines, a 30-item list and a large order id: the
//   Arguments panel's text, height and folds, then unfolded;
// - question: a json-echo `ask` whose payload has a `message`: the card's question and payload;
// - keys: the page's help on shortcuts; j, j, k from the page; `a` then Escape (nothing sent),
//   `a` then Enter (approved); `d`, a reason, Enter (declined with it);
// - kept: a run of two refunds whose first call is approved with Enter: where the focus is then;
// and axe-core's violations in each of those states.
// Each step records what it found or the error that stopped it, so each check is the test's.
// Prints JSON: {runs, place, activity, args, question, keys, kept, axe, sent, pageErrors, cspViolations, errors}.
import { join } from 'node:path';
import { api, axeViolations, failed, launchChromium } from './_browser.mjs';

const [baseUrl, outputDir, apiKey] = process.argv.slice(2);
const TIMEOUT = 60_000;
const STEP = 15_000; // what a step waits for that the page may not show (it then records the error)
const { start } = api(baseUrl, apiKey);
const { context, close } = await launchChromium();
const out = { runs: {}, axe: [], sent: [], pageErrors: [], cspViolations: [], errors: {} };
const step = async (name, body) => {
  try {
    await body();
  } catch (error) {
    out.errors[name] = String(error.stack || error).slice(0, 2000);
  }
};
try {
  const page = context.pages()[0] ?? (await context.newPage());
  page.setDefaultTimeout(STEP);
  page.on('pageerror', (error) => out.pageErrors.push(String(error)));
  page.on('console', (message) => {
    if (message.type() === 'error' && /Content Security Policy/i.test(message.text())) out.cspViolations.push(message.text());
  });
  page.on('request', (req) => {
    const body = req.postData();
    const operation = body && /"query":"mutation (\w+)/.exec(body);
    if (operation) out.sent.push({ operation: operation[1], input: JSON.parse(body).variables.input });
  });
  // what is in view, with `locator` scrolled into it (docs/inbox.md shows these)
  const shot = async (name, locator = null) => {
    if (locator) await locator.evaluate((el) => el.scrollIntoView({ block: 'start' }));
    await page.screenshot({ path: join(outputDir, name) });
  };
  const axe = async (label) => out.axe.push({ label, violations: await axeViolations(page) });
  const article = (runId) => page.locator(`article[aria-labelledby="run-${runId}"]`);
  const approve = (runId) => article(runId).getByRole('button', { name: 'Approve', exact: true });
  const entries = () => page.locator('[role="log"] > ol > li');
  const activity = (text) => page.locator('[role="log"] li', { hasText: text }).first();
  const focused = () =>
    page.evaluate(() => {
      const el = document.activeElement;
      const run = el && el.closest('article');
      return { tag: el ? el.tagName : null, text: el ? (el.innerText || el.getAttribute('aria-label') || el.id || '').trim() : null, run: run ? run.getAttribute('aria-labelledby') : null };
    });
  const panel = (runId, label) =>
    article(runId).evaluate((el, name) => {
      const dt = [...el.querySelectorAll('dt')].find((d) => d.textContent === name);
      if (!dt) return null;
      const dd = dt.nextElementSibling;
      return { text: dd.innerText, height: dd.getBoundingClientRect().height, folds: dd.querySelectorAll('details').length, open: dd.querySelectorAll('details[open]').length };
    }, label);

  page.setDefaultTimeout(TIMEOUT);
  await page.goto(`${baseUrl}/inbox?view=agents`, { waitUntil: 'load', timeout: TIMEOUT });
  await page.getByLabel('API key or token').fill(apiKey);
  await page.keyboard.press('Enter');
  await page.getByText('Live: new runs and decisions appear as they happen').waitFor();
  await page.getByLabel('Agent', { exact: true }).selectOption('refund-agent');
  await page.getByRole('button', { name: 'Apply filters' }).click();
  page.setDefaultTimeout(STEP);

  // place: decide the upper of two refunds with the mouse
  await page.setViewportSize({ width: 1280, height: 2000 });
  out.runs.lower = await start('refund-agent', 'Please refund order 1042');
  out.runs.upper = await start('refund-agent', 'Please refund order 1043');
  await step('place', async () => {
    await approve(out.runs.lower).waitFor({ timeout: TIMEOUT });
    await approve(out.runs.upper).waitFor({ timeout: TIMEOUT });
    const card = await article(out.runs.upper).boundingBox();
    const target = await approve(out.runs.upper).boundingBox();
    const x = target.x + target.width / 2;
    const y = target.y + target.height / 2;
    out.place = { card, pointer: { x, y }, before: await approve(out.runs.lower).boundingBox() };
    await page.mouse.click(x, y);
    await activity(`Approval of issue_refund on run ${out.runs.upper}: recorded`).waitFor({ timeout: TIMEOUT });
    await article(out.runs.upper).waitFor({ state: 'detached', timeout: TIMEOUT });
    const slot = page.locator(`[data-settled="${out.runs.upper}"]`);
    await slot.waitFor();
    out.place.after = await approve(out.runs.lower).boundingBox();
    out.place.slot = { box: await slot.boundingBox(), text: await slot.innerText() };
    out.place.underPointer = await page.evaluate(({ x: px, y: py }) => {
      const el = document.elementFromPoint(px, py);
      const settled = el && el.closest('[data-settled]');
      return { tag: el ? el.tagName : null, settled: settled ? settled.dataset.settled : null, button: Boolean(el && el.closest('button')) };
    }, { x, y });
    out.place.focused = await focused();
    await shot('inbox-queue-decided-in-place.png');
    await axe('a decision shown in place');
  });
  await page.setViewportSize({ width: 1280, height: 1000 });

  // activity: the approval's line names the call; an edit's names the change; a bulk action adds one entry
  await step('activity', async () => {
    out.activity = { approval: await activity(`Approval of issue_refund on run ${out.runs.upper}: recorded`).innerText() };
    out.runs.edited = await start('refund-agent', 'Please refund order 1042');
    await article(out.runs.edited).getByRole('button', { name: 'Edit arguments' }).click({ timeout: TIMEOUT });
    const editor = article(out.runs.edited).getByLabel('Edited arguments (JSON)');
    await editor.fill((await editor.inputValue()).replace(/"amount": [0-9.e+-]+/, '"amount": 25'));
    await article(out.runs.edited).getByRole('button', { name: 'Approve with edited arguments' }).click();
    out.activity.edit = await activity(`Approval with edited arguments of issue_refund on run ${out.runs.edited}: recorded`).innerText({ timeout: TIMEOUT });
    out.runs.bulk = [];
    for (const order of [2001, 2002, 2003]) out.runs.bulk.push(await start('refund-agent', `Please refund order ${order}`));
    for (const runId of out.runs.bulk) await article(runId).getByRole('checkbox', { name: /bulk decision/ }).check({ timeout: TIMEOUT });
    // every live event of the runs started has been logged before the count is taken
    for (const runId of out.runs.bulk) await activity(`New suspended run ${runId}`).waitFor({ timeout: TIMEOUT });
    const before = await entries().count();
    await page.getByRole('button', { name: 'Approve selected' }).click();
    for (const runId of out.runs.bulk) await article(runId).waitFor({ state: 'detached', timeout: TIMEOUT });
    for (const runId of out.runs.bulk) await page.locator(`[data-progress="${runId}"]`).getByText('Completed.').waitFor({ timeout: TIMEOUT });
    out.activity.bulkAdded = (await entries().count()) - before;
    out.activity.bulk = (await entries().allInnerTexts()).slice(0, Math.max(out.activity.bulkAdded, 0));
    await shot('inbox-queue-activity.png', page.locator('.filters'));
  });

  // args: a long value
  const note = 'Dear team,\nplease refund the grinder.\nThanks';
  const lines = Array.from({ length: 30 }, (_, i) => ({ sku: `SKU-${100 + i}`, qty: i + 1 }));
  await page.getByLabel('Agent', { exact: true }).selectOption('json-echo');
  await page.getByRole('button', { name: 'Apply filters' }).click();
  out.runs.args = await start('json-echo', `{"hold": {"note": ${JSON.stringify(note)}, "order": 1790000000000000001, "lines": ${JSON.stringify(lines)}}}`);
  await step('args', async () => {
    await article(out.runs.args).waitFor({ timeout: TIMEOUT });
    out.args = { folded: await panel(out.runs.args, 'Arguments'), card: (await article(out.runs.args).boundingBox()).height };
    // unfold, and read once the list is shown: a re-render of the listing may land between the
    // click and the read (then the panel is read again, and unfolded again if it closed)
    const deadline = Date.now() + STEP;
    do {
      const shown = await panel(out.runs.args, 'Arguments');
      if (shown && shown.open === 0) await article(out.runs.args).locator('dd details summary').first().click();
      out.args.unfolded = await panel(out.runs.args, 'Arguments');
      if (out.args.unfolded?.text.includes('SKU-129')) break;
      await page.waitForTimeout(100);
    } while (Date.now() < deadline);
    await shot('inbox-queue-arguments.png', article(out.runs.args).locator('.call'));
    await axe('arguments folded and unfolded');
  });

  // question: a data request whose payload has a message
  const payload = { message: 'Which account should the refund go to?\nGive its IBAN.', order: 1790000000000000003 };
  const schema = { type: 'object', description: 'The account to pay', properties: { iban: { type: 'string', title: 'IBAN' } }, required: ['iban'] };
  out.runs.question = await start('json-echo', `{"ask": {"payload": {"message": ${JSON.stringify(payload.message)}, "order": 1790000000000000003}, "schema": ${JSON.stringify(schema)}}}`);
  await step('question', async () => {
    await article(out.runs.question).waitFor({ timeout: TIMEOUT });
    out.question = { question: await panel(out.runs.question, 'Question'), payload: await panel(out.runs.question, 'Suspend payload') };
    const summary = article(out.runs.question).locator('details.payload summary');
    await summary.click();
    out.question.payloadOpen = await panel(out.runs.question, 'Suspend payload');
    await shot('inbox-queue-question.png', article(out.runs.question));
    await axe('a data request with its question');
  });

  // keys: back to the refund agent, three refunds waiting
  await page.getByLabel('Agent', { exact: true }).selectOption('refund-agent');
  await page.getByRole('button', { name: 'Apply filters' }).click();
  out.runs.keys = [];
  for (const order of [3001, 3002, 3003]) out.runs.keys.push(await start('refund-agent', `Please refund order ${order}`));
  const [third, second, first] = out.runs.keys; // newest first on the page
  out.keys = {};
  await step('keys', async () => {
    for (const runId of out.runs.keys) await article(runId).waitFor({ timeout: TIMEOUT });
    const help = page.locator('.shortcuts');
    out.keys.help = (await help.count()) ? await help.first().textContent() : null;
    await page.evaluate(() => document.activeElement && document.activeElement.blur());
    await page.keyboard.press('j');
    out.keys.j1 = await focused();
    await page.keyboard.press('j');
    out.keys.j2 = await focused();
    await page.keyboard.press('k');
    out.keys.k = await focused();
    const sentBefore = out.sent.length;
    await page.keyboard.press('a');
    const dialog = page.getByRole('alertdialog');
    await dialog.waitFor();
    out.keys.confirm = { text: await dialog.innerText(), focused: await focused() };
    await shot('inbox-queue-confirm.png', article(first).locator('.call'));
    await axe('a shortcut asking for confirmation');
    await page.keyboard.press('Escape');
    await dialog.waitFor({ state: 'detached' });
    out.keys.escaped = { sent: out.sent.length - sentBefore, focused: await focused() };
    await page.keyboard.press('a');
    await dialog.waitFor();
    await page.keyboard.press('Enter');
    await article(first).waitFor({ state: 'detached', timeout: TIMEOUT });
    out.keys.approved = { sent: out.sent.slice(sentBefore), focused: await focused() };
    await page.keyboard.press('d');
    await dialog.waitFor();
    out.keys.declineFocused = await focused();
    await page.keyboard.type('Refunded by phone');
    await page.keyboard.press('Enter');
    await article(second).waitFor({ state: 'detached', timeout: TIMEOUT });
    out.keys.declined = { sent: out.sent.slice(sentBefore + out.keys.approved.sent.length), focused: await focused() };
    out.keys.runs = { first, second, third };
    await axe('after decisions by keyboard');
  });
  // kept: a run of two refunds; its first call approved from the keyboard: the run's card stays,
  // and the focus goes to the run's other call (the pressed button is gone with its question)
  out.runs.kept = await start('refund-agent', 'Please refund orders 1042 and 1043');
  await step('kept', async () => {
    const buttons = article(out.runs.kept).getByRole('button', { name: 'Approve', exact: true });
    await buttons.nth(1).waitFor({ timeout: TIMEOUT });
    await buttons.first().focus();
    await page.keyboard.press('Enter');
    await activity(`Approval of issue_refund on run ${out.runs.kept}: recorded`).waitFor({ timeout: TIMEOUT });
    await page.waitForFunction((id) => document.querySelectorAll(`article[aria-labelledby="run-${id}"] [data-first-action]`).length === 1, out.runs.kept, { timeout: TIMEOUT });
    // the focus is given once the card's buttons are enabled again (`flushFocus`)
    await page.waitForFunction(() => document.activeElement && document.activeElement !== document.body, null, { timeout: 5000 }).catch(() => {});
    out.kept = { focused: await focused(), approveButtons: await buttons.count() };
  });
  process.stdout.write(JSON.stringify(out) + '\n');
} catch (error) {
  await failed(error, out, context, join(outputDir, 'inbox-queue-failure.png'));
} finally {
  await close();
}
