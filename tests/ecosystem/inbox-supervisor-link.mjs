// More inbox faults a new user found (a supervisor's questions, a link to a later page), in
// Debian's Chromium (playwright-core):
//   node inbox-supervisor-link.mjs BASE_URL OUTPUT_DIR API_KEY
// against a server with authentication on and the demo agents. Records:
// - focus: `/inbox?agentId=support-supervisor&runId=R` with R a supervisor's run of two refunds
//   (one card, asked twice), its first question approved with Enter on Approve (`enter`), and on
//   another such run with `a` then Enter (`shortcut`): once the card shows the second question,
//   what has the focus (its tag, text, and whether it is in R's card);
// - decided: the activity lines after a supervisor's question is declined with `d` and a reason,
//   and after one is approved, in the queue view and on `?view=agents` (every agent listed);
// - link: 13 refunds waiting, `/inbox?agentId=refund-agent&runId=R` with R the newest (not on the
//   queue's first page of 10): whether R's card is in view and holds the focus, the notes above
//   the cards, and the cards shown.
// Each step records what it found or the error that stopped it. Prints JSON:
// {runs, focus, decided, link, pageErrors, cspViolations, errors}.
import { join } from 'node:path';
import { api, failed, launchChromium } from './_browser.mjs';

const [baseUrl, outputDir, apiKey] = process.argv.slice(2);
const TIMEOUT = 60_000;
const STEP = 15_000;
const { start } = api(baseUrl, apiKey);
const { context, close } = await launchChromium();
const out = { runs: {}, focus: {}, decided: {}, pageErrors: [], cspViolations: [], errors: {} };
const step = async (name, body) => {
  try {
    await body();
  } catch (error) {
    out.errors[name] = String(error.stack || error).slice(0, 2000);
  }
};
const TWO = 'Please refund orders 1042 and 1043';
const signIn = async (page, url) => {
  await page.goto(url, { waitUntil: 'load', timeout: TIMEOUT });
  await page.locator('#token, header').first().waitFor({ timeout: TIMEOUT });
  if (await page.locator('#token').count()) {
    await page.getByLabel('API key or token').fill(apiKey);
    await page.keyboard.press('Enter');
  }
  await page.locator('header').waitFor({ timeout: TIMEOUT });
};
const article = (page, runId) => page.locator(`article[aria-labelledby="run-${runId}"]`);
/** Whether `runId`'s card is in view, whether the focus is in it, and what has the focus. */
const target = (page, runId) =>
  page.evaluate((id) => {
    const el = document.querySelector(`article[aria-labelledby="run-${id}"]`);
    const box = el && el.getBoundingClientRect();
    const active = document.activeElement;
    return {
      shown: Boolean(el),
      inView: Boolean(box && box.top < window.innerHeight && box.bottom > 0),
      focused: Boolean(el && active && el.contains(active)),
      tag: active ? active.tagName : null,
      text: active ? (active.innerText || active.id || '').trim().slice(0, 60) : null,
    };
  }, runId);
const focusIn = (page, runId) =>
  page
    .waitForFunction((id) => {
      const el = document.querySelector(`article[aria-labelledby="run-${id}"]`);
      return el && el.contains(document.activeElement);
    }, runId, { timeout: STEP })
    .catch(() => {});
/** Wait until `runId`'s card asks about order 1043 with its Approve button enabled. */
const secondQuestion = (page, runId) =>
  page.waitForFunction((id) => {
    const el = document.querySelector(`article[aria-labelledby="run-${id}"]`);
    const card = el && el.querySelector('[data-card]');
    const button = card && card.querySelector('[data-first-action]');
    return Boolean(button && !button.disabled && /1043/.test(card.querySelector('dl').innerText));
  }, runId, { timeout: TIMEOUT });
/** Each activity line's text after its time. */
const lines = (page) =>
  page.locator('[role="log"] ol > li').evaluateAll((els) => els.map((el) => el.innerText.replace(el.querySelector('time').innerText, '').trim()));

try {
  const page = context.pages()[0] ?? (await context.newPage());
  page.on('pageerror', (error) => out.pageErrors.push(String(error)));
  page.on('console', (message) => {
    if (message.type() === 'error' && /Content Security Policy/i.test(message.text())) out.cspViolations.push(message.text());
  });
  page.setDefaultTimeout(STEP);
  await page.setViewportSize({ width: 1280, height: 900 });

  for (const [name, keys] of [
    ['enter', ['Enter']],
    ['shortcut', ['a', 'Enter']],
  ]) {
    await step(`focus-${name}`, async () => {
      const runId = await start('support-supervisor', TWO);
      out.runs[`focus-${name}`] = runId;
      await signIn(page, `${baseUrl}/inbox?agentId=support-supervisor&runId=${runId}`);
      await article(page, runId).waitFor({ timeout: TIMEOUT });
      await focusIn(page, runId);
      out.focus[name] = { before: await target(page, runId) };
      for (const key of keys) {
        if (key === 'Enter' && keys.length > 1) await page.getByRole('button', { name: 'Approve now' }).waitFor();
        await page.keyboard.press(key);
      }
      await secondQuestion(page, runId);
      await focusIn(page, runId);
      out.focus[name].after = await target(page, runId);
    });
  }

  for (const view of ['queue', 'agents']) {
    await step(`decided-${view}`, async () => {
      const declined = await start('support-supervisor', TWO);
      const approved = await start('support-supervisor', TWO);
      out.runs[`decided-${view}`] = { declined, approved };
      await signIn(page, `${baseUrl}/inbox${view === 'agents' ? '?view=agents' : ''}`);
      await page.getByText('Live: new runs and decisions appear as they happen').waitFor({ timeout: TIMEOUT });
      for (const runId of [declined, approved]) await article(page, runId).waitFor({ timeout: TIMEOUT });
      const record = {};
      for (const [kind, runId] of [
        ['declined', declined],
        ['approved', approved],
      ]) {
        const before = (await lines(page)).length;
        await article(page, runId).getByRole('button', { name: 'Approve', exact: true }).focus();
        if (kind === 'declined') {
          await page.keyboard.press('d');
          await page.getByLabel('Reason (the model reads it)').fill('no thanks');
        } else {
          await page.keyboard.press('a');
          await page.getByRole('button', { name: 'Approve now' }).waitFor();
        }
        await page.keyboard.press('Enter');
        await page.locator('[role="log"] li', { hasText: `on run ${runId}: recorded` }).first().waitFor({ timeout: TIMEOUT });
        await secondQuestion(page, runId).catch(() => {});
        await page.waitForTimeout(2500); // the live messages of the decision and its forwarded one
        const all = await lines(page);
        record[kind] = all.slice(0, all.length - before);
      }
      out.decided[view] = record;
    });
  }
  await step('link', async () => {
    out.runs.link = [];
    for (let i = 0; i < 13; i += 1) out.runs.link.push(await start('refund-agent', `Please refund order ${i % 2 ? 1043 : 1042}`));
    const newest = out.runs.link[12];
    await signIn(page, `${baseUrl}/inbox?agentId=refund-agent&runId=${newest}`);
    await article(page, out.runs.link[0]).waitFor({ timeout: TIMEOUT });
    await article(page, newest).waitFor({ timeout: STEP }).catch(() => {});
    await focusIn(page, newest);
    out.link = await target(page, newest);
    out.link.notes = await page.locator('.link-note').allInnerTexts();
    out.link.cards = await page.locator('article.run').evaluateAll((els) => els.map((el) => el.getAttribute('aria-labelledby').slice(4)));
    await page.screenshot({ path: join(outputDir, 'inbox-supervisor-link.png') });
  });

  process.stdout.write(JSON.stringify(out) + '\n');
} catch (error) {
  await failed(error, out, context, join(outputDir, 'inbox-supervisor-link-failure.png'));
} finally {
  await close();
}
