// Inbox faults a new user found on the memory store (issue 45 part 6, "The inbox as a queue"), in
// Debian's Chromium (playwright-core):
//   node inbox-refusals.mjs BASE_URL OUTPUT_DIR API_KEY
// against a server with authentication on and the demo agents. Records:
// - unknown-queue: `/inbox?agentId=nope&runId=x` (an agent no server registers), with a refund
//   waiting: the page's state after the listing had time to load (see `state`);
// - unknown-agents: the same with `view=agents`;
// - known-clear: `/inbox?agentId=refund-agent&runId=<the refund>`, then Clear, then the address
//   left loaded again: the page's state at each;
// - long-reason: the length of the Decline reason field after 5,000 characters are typed, then a
//   Decline with 3,000 two-byte characters (6,000 bytes): the text under the call, the activity;
// - next-question: a supervisor's refund of two orders, its decline refused, then its first
//   question approved through the API: the result lines under the call, before and after;
// and axe-core's violations in each state. Each step records what it found or the error that
// stopped it. Prints JSON: {runs, unknown-queue, unknown-agents, known-clear, long-reason, next-question, axe, pageErrors,
// cspViolations, errors}.
import { api, axeViolations, launchChromium } from './_browser.mjs';

const [baseUrl, , apiKey] = process.argv.slice(2);
const TIMEOUT = 60_000;
const STEP = 15_000;
const { graphql, start } = api(baseUrl, apiKey);
const { context, close } = await launchChromium();
const out = { runs: {}, axe: [], pageErrors: [], cspViolations: [], errors: {} };
const axe = async (page, label) => out.axe.push({ label, violations: await axeViolations(page) });
const step = async (name, body) => {
  try {
    await body();
  } catch (error) {
    out.errors[name] = String(error.stack || error).slice(0, 2000);
  }
};
const signIn = async (page, url) => {
  await page.goto(url, { waitUntil: 'load', timeout: TIMEOUT });
  await page.locator('#token, header').first().waitFor({ timeout: TIMEOUT });
  if (await page.locator('#token').count()) {
    await page.getByLabel('API key or token').fill(apiKey);
    await page.keyboard.press('Enter');
    await page.locator('header').waitFor({ timeout: TIMEOUT });
  }
};
const article = (page, runId) => page.locator(`article[aria-labelledby="run-${runId}"]`);
/** What the page shows: header status, listing headings, lines before the first card, cards, filter, address. */
const state = (page) =>
  page.evaluate(() => {
    const queue = document.querySelector('.queue');
    const first = document.querySelector('article.run');
    const before = [...document.querySelectorAll('.queue p')].filter((p) => !first || p.compareDocumentPosition(first) & Node.DOCUMENT_POSITION_FOLLOWING);
    const select = document.getElementById('filter-agentId');
    return {
      live: (document.querySelector('header .live') || {}).innerText || null,
      headings: [...document.querySelectorAll('.queue h2')].map((h) => h.innerText),
      linesBeforeCards: before.map((p) => p.innerText),
      cards: [...document.querySelectorAll('article.run')].map((a) => a.getAttribute('aria-labelledby').slice(4)),
      queueText: queue ? queue.innerText.slice(0, 2000) : null,
      agentFilter: select ? select.options[select.selectedIndex].text : null,
      search: window.location.search,
      activity: [...document.querySelectorAll('.activity li')].map((li) => li.innerText),
    };
  });

try {
  const page = context.pages()[0] ?? (await context.newPage());
  page.on('pageerror', (error) => out.pageErrors.push(String(error)));
  page.on('console', (message) => {
    if (message.type() === 'error' && /Content Security Policy/i.test(message.text())) out.cspViolations.push(message.text());
  });
  page.setDefaultTimeout(STEP);
  await page.setViewportSize({ width: 1280, height: 900 });
  out.runs.refund = await start('refund-agent', 'Please refund order 1043');

  for (const [name, query] of [
    ['unknown-queue', 'agentId=nope&runId=x'],
    ['unknown-agents', 'view=agents&agentId=nope&runId=x'],
  ]) {
    await step(name, async () => {
      await signIn(page, `${baseUrl}/inbox?${query}`);
      // the listing had time to load and the live updates to connect (they do in well under 5 s)
      await article(page, out.runs.refund).waitFor({ timeout: 5_000 }).catch(() => {});
      await page.waitForTimeout(3_000);
      out[name] = await state(page);
      await axe(page, name);
      if (name === 'unknown-queue') {
        await page.getByRole('button', { name: 'Clear' }).click();
        await page.waitForTimeout(1_000);
        out[name].afterClear = await state(page);
      }
    });
  }

  await step('known-clear', async () => {
    // a link naming a known agent and its run, then Clear, then a reload of the address left
    await signIn(page, `${baseUrl}/inbox?agentId=refund-agent&runId=${out.runs.refund}`);
    await article(page, out.runs.refund).waitFor({ timeout: TIMEOUT });
    const record = { linked: await state(page) };
    await page.getByRole('button', { name: 'Clear' }).click();
    await page.waitForTimeout(1_000);
    record.afterClear = await state(page);
    await signIn(page, page.url());
    await article(page, out.runs.refund).waitFor({ timeout: TIMEOUT });
    record.afterReload = await state(page);
    out['known-clear'] = record;
  });

  await step('long-reason', async () => {
    const record = {};
    await signIn(page, `${baseUrl}/inbox`);
    const card = article(page, out.runs.refund);
    await card.waitFor({ timeout: TIMEOUT });
    const field = card.getByLabel('Reason for declining (the model reads it)');
    await field.fill('a'.repeat(5000));
    record.typedLength = await field.evaluate((el) => el.value.length);
    record.maxLength = await field.evaluate((el) => el.maxLength);
    await field.fill('é'.repeat(3000));
    await card.getByRole('button', { name: 'Decline', exact: true }).click();
    await page.getByText(/Decline of issue_refund .*failed/).first().waitFor({ timeout: STEP });
    await page.waitForTimeout(1_000);
    record.cardListed = (await card.count()) === 1;
    record.underCall = record.cardListed ? await card.locator('p.result').allInnerTexts() : [];
    record.cardText = record.cardListed ? await card.innerText() : null;
    record.activity = (await state(page)).activity;
    await axe(page, 'a refused decline');
    out['long-reason'] = record;
  });

  await step('next-question', async () => {
    // a supervisor's call asks about order 1042, then 1043: a refused decline of the first, then
    // the first approved by someone else, and the card showing the call's next question
    const record = {};
    const runId = await start('support-supervisor', 'Please refund orders 1042 and 1043');
    await signIn(page, `${baseUrl}/inbox`);
    const card = article(page, runId);
    await card.waitFor({ timeout: TIMEOUT });
    await card.getByLabel('Reason for declining (the model reads it)').fill('é'.repeat(3000));
    await card.getByRole('button', { name: 'Decline', exact: true }).click();
    await page.getByText(/Decline of .*failed/).first().waitFor({ timeout: STEP });
    record.underRefused = await card.locator('p.result').allInnerTexts();
    const { suspendedRun } = await graphql(
      'query R($a: ID!, $r: ID!) { suspendedRun(agentId: $a, runId: $r) { toolCalls { toolCallId questionId args } } }',
      { a: 'support-supervisor', r: runId },
    );
    const [asked] = suspendedRun.toolCalls;
    await graphql(
      'mutation A($input: ApproveToolCallInput!) { approveToolCall(input: $input) { __typename } }',
      { input: { agentId: 'support-supervisor', runId, toolCallId: asked.toolCallId, questionId: asked.questionId } },
    );
    await card.getByText('1043').first().waitFor({ timeout: TIMEOUT });
    await page.waitForTimeout(1_000);
    record.cardText = await card.innerText();
    record.underNext = await card.locator('p.result').allInnerTexts();
    out['next-question'] = record;
  });
} finally {
  await close();
}
console.log(JSON.stringify(out));
