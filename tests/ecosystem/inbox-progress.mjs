// What the inbox shows after a decision, in Debian's Chromium (playwright-core):
//   node inbox-progress.mjs BASE_URL OUTPUT_DIR API_KEY
// against a server whose refund-agent streams its answer slowly (tests/ecosystem/_paced_agents.py).
// Signs in with API_KEY; the page's WebSockets pass through this script (playwright's
// routeWebSocket), which records what the server sends on each runUpdates subscription. Then:
// - approves a refund with the keyboard and records every state its progress card goes through
//   (a MutationObserver in the page) and the model's text it shows, up to the outcome;
// - declines another while this script ends its progress stream after the first TEXT update, as a
//   server shutting down does (SHUTTING_DOWN in a `next`, then `complete`), and records what the
//   card shows and the page's requests after it;
// - approves two in bulk and waits for both outcomes;
// - approves one refund of a run whose other refund its deadline declined, and records the card;
// and measures the text contrast of every element of the progress cards at rest, hovered,
// focused and both, and runs axe-core with the cards shown. Records rather than stops on what it
// does not find, so each check is the test's.
// Prints JSON: {runs, approve, cut, bulk, expiry, events, updates, requests, contrast, axe, dismissed, pageErrors,
// cspViolations, consoleErrors}.
import { join } from 'node:path';
import { api, axeViolations, contrastStates, failed, launchChromium } from './_browser.mjs';

const [baseUrl, outputDir, apiKey] = process.argv.slice(2);
const TIMEOUT = 60_000;
const { graphql, start } = api(baseUrl, apiKey);
const { context, close } = await launchChromium();
const out = { runs: {}, contrast: [], axe: [], pageErrors: [], cspViolations: [], consoleErrors: [], updates: {}, requests: [] };
try {
  const page = context.pages()[0] ?? (await context.newPage());
  page.setDefaultTimeout(TIMEOUT);
  page.on('pageerror', (error) => out.pageErrors.push(String(error)));
  page.on('console', (message) => {
    if (message.type() !== 'error') return;
    if (/Content Security Policy/i.test(message.text())) out.cspViolations.push(message.text());
    else out.consoleErrors.push(message.text());
  });
  page.on('request', (req) => {
    const body = req.postData();
    const name = body && /"query":"(?:query|mutation|subscription) (\w+)/.exec(body);
    if (name) out.requests.push({ at: Date.now(), operation: name[1], body });
  });

  // every socket of the page goes through here: the server's runUpdates messages are recorded by
  // run, and `cut` (a run id) ends that run's stream after its first TEXT update
  let cut = null;
  await page.routeWebSocket(/\/graphql$/, (ws) => {
    const server = ws.connectToServer();
    const runOf = new Map(); // subscription id -> run id, for runUpdates
    const dropped = new Set();
    ws.onMessage((message) => {
      try {
        const parsed = JSON.parse(message);
        if (parsed.type === 'subscribe' && /runUpdates/.test(parsed.payload.query)) runOf.set(parsed.id, parsed.payload.variables.runId);
      } catch {
        // not JSON: passed on as is
      }
      server.send(message);
    });
    server.onMessage((message) => {
      let parsed = null;
      try {
        parsed = JSON.parse(message);
      } catch {
        // not JSON
      }
      const runId = parsed && runOf.get(parsed.id);
      if (!runId) {
        ws.send(message);
        return;
      }
      if (dropped.has(parsed.id)) return;
      const update = parsed.payload && parsed.payload.data && parsed.payload.data.runUpdates;
      (out.updates[runId] = out.updates[runId] || []).push({ at: Date.now(), type: parsed.type, kind: update ? update.kind : null, text: update ? update.text : null });
      ws.send(message);
      if (runId === cut && update && update.kind === 'TEXT') {
        dropped.add(parsed.id);
        ws.send(JSON.stringify({ id: parsed.id, type: 'next', payload: { errors: [{ message: 'the server is shutting down', extensions: { code: 'SHUTTING_DOWN' } }] } }));
        ws.send(JSON.stringify({ id: parsed.id, type: 'complete' }));
      }
    });
  });

  const article = (runId) => page.locator(`article[aria-labelledby="run-${runId}"]`);
  const card = (runId) => page.locator(`[data-progress="${runId}"]`);
  // every state a card goes through, each once, in order: as shown (innerText), and its streamed text
  const watch = (runId) =>
    page.evaluate((id) => {
      window.__shown = window.__shown || {};
      const shown = (window.__shown[id] = []);
      const record = () => {
        const el = document.querySelector(`[data-progress="${id}"]`);
        if (!el) return;
        const state = { card: el.innerText, text: [...el.querySelectorAll('li.text')].map((li) => li.textContent).join('') };
        const last = shown[shown.length - 1];
        if (!last || last.card !== state.card) shown.push(state);
      };
      new MutationObserver(record).observe(document.body, { subtree: true, childList: true, characterData: true, attributes: true });
    }, runId);
  const shownStates = (runId) => page.evaluate((id) => window.__shown[id], runId);
  const rest = async () => {
    await page.mouse.move(1, 1);
    await page.evaluate(() => document.activeElement && document.activeElement.blur());
  };
  // the contrast of every element with text of its own in the cards, in the four states
  const measure = async (where) => {
    const elements = page.locator('section.progress *');
    for (let i = 0; i < (await elements.count()); i += 1) {
      const el = elements.nth(i);
      const own = await el.evaluate((node) => [...node.childNodes].some((child) => child.nodeType === 3 && child.textContent.trim()));
      if (!own || !(await el.isVisible())) continue;
      await el.scrollIntoViewIfNeeded();
      const label = (await el.innerText()).trim().slice(0, 60);
      const tag = await el.evaluate((node) => `${node.tagName.toLowerCase()}${node.className ? `.${node.className}` : ''}`);
      const states = await contrastStates(el, rest);
      out.contrast.push({ where, tag, label, states });
    }
  };
  const axe = async (label) => out.axe.push({ label, violations: await axeViolations(page) });

  await page.goto(`${baseUrl}/inbox`, { waitUntil: 'load', timeout: TIMEOUT });
  await page.getByLabel('API key or token').focus();
  await page.keyboard.type(apiKey);
  await page.keyboard.press('Enter');
  await page.getByText('Live: new runs and decisions appear as they happen').waitFor();

  // 1. an approval: "Recorded, continuing…", the deltas as they stream, then the outcome
  out.runs.approve = await start('refund-agent', 'Please refund order 1042');
  await article(out.runs.approve).waitFor();
  await watch(out.runs.approve);
  await article(out.runs.approve).getByRole('button', { name: 'Approve', exact: true }).focus();
  const approvedAt = Date.now();
  await page.keyboard.press('Enter');
  await card(out.runs.approve).getByText('Completed.').waitFor();
  const approveCard = card(out.runs.approve);
  out.approve = {
    shown: await shownStates(out.runs.approve),
    final: await approveCard.innerText(),
    live: await approveCard.locator('[aria-live]').evaluateAll((els) => els.map((e) => e.getAttribute('aria-live'))),
    sent: out.requests.filter((r) => r.at >= approvedAt && r.operation === 'InboxApprove').map((r) => JSON.parse(r.body).variables.input),
    activity: await page.locator('[role="log"] li').allInnerTexts(),
  };
  await page.screenshot({ path: join(outputDir, 'inbox-progress.png'), fullPage: true });

  // 2. a decline whose stream ends early: a visible message, the run read again, then its outcome
  out.runs.cut = await start('refund-agent', 'Please refund order 1043');
  await article(out.runs.cut).waitFor();
  await watch(out.runs.cut);
  cut = out.runs.cut;
  const cutAt = Date.now();
  await article(out.runs.cut).getByLabel('Reason for declining (the model reads it)').focus();
  await page.keyboard.type('Refunded by phone');
  await page.keyboard.press('Enter');
  await card(out.runs.cut).getByText('Live progress stopped (SHUTTING_DOWN').waitFor();
  await card(out.runs.cut).getByText('Completed.').waitFor();
  out.cut = {
    shown: await shownStates(out.runs.cut),
    final: await card(out.runs.cut).innerText(),
    reads: out.requests.filter((r) => r.at >= cutAt && r.operation === 'InboxRunNow').map((r) => JSON.parse(r.body).variables),
  };
  await measure('after an approval and a stream cut short');
  await axe('with a completed run and a stream cut short');
  await page.screenshot({ path: join(outputDir, 'inbox-progress-cut.png'), fullPage: true });

  // 3. two approvals in bulk: a card for each, each to its outcome
  cut = null;
  out.runs.bulk = [await start('refund-agent', 'Please refund order 1042'), await start('refund-agent', 'Please refund order 1042')];
  for (const runId of out.runs.bulk) {
    await article(runId).waitFor();
    await article(runId).getByRole('checkbox', { name: /bulk decision/ }).check();
  }
  await page.getByRole('button', { name: 'Approve selected' }).first().click();
  for (const runId of out.runs.bulk) await card(runId).getByText('Completed.').waitFor();
  out.bulk = { finals: await Promise.all(out.runs.bulk.map((runId) => card(runId).innerText())) };

  // 4. a refund declined by its deadline (over $500: 1 s) while another waited: approving the other
  // shows both calls in the continuation's card
  out.runs.expiry = await start('refund-agent', 'Please refund orders 1042 and 1045');
  await article(out.runs.expiry).locator('ul.decided').getByText(/declined by expiry/).waitFor();
  await watch(out.runs.expiry);
  await article(out.runs.expiry).getByRole('button', { name: 'Approve', exact: true }).focus();
  await page.keyboard.press('Enter');
  await card(out.runs.expiry).getByText('Completed.').waitFor();
  out.expiry = { final: await card(out.runs.expiry).innerText() };
  const eventsOf = async (runId) =>
    (await graphql('query E($a: ID!, $r: ID!) { runEvents(agentId: $a, runId: $r) { type by data } }', { a: 'refund-agent', r: runId })).runEvents;
  out.events = { cut: await eventsOf(out.runs.cut), expiry: await eventsOf(out.runs.expiry) };
  await axe('with five cards');

  // a finished card can be dismissed
  await card(out.runs.approve).getByRole('button', { name: 'Dismiss' }).focus();
  await page.keyboard.press('Enter');
  await card(out.runs.approve).waitFor({ state: 'detached' });
  out.dismissed = (await card(out.runs.approve).count()) === 0;
  process.stdout.write(JSON.stringify(out) + '\n');
} catch (error) {
  await failed(error, out, context, join(outputDir, 'inbox-progress-failure.png'));
} finally {
  await close();
}
