// What a reviewer sees in the inbox, measured in Debian's Chromium (playwright-core):
//   node inbox-review.mjs BASE_URL OUTPUT_DIR API_KEY
// It opens the per-agent listing (`/inbox?view=agents`), which it was written for; the review
// queue's page (one listing across agents, in its own order) is inbox-review-queue.mjs's.
// Signs in with API_KEY (measuring the sign-in form's button first), starts through the API a
// supervisor's refund (its sub-run is listed under refund-agent) and a weather run (a call that asks
// for data), and records each agent's bulk bar; then starts a plain refund and records, for every
// button on the page, the contrast of its text with its background at rest, hovered, focused, and
// both; how the supervisor's sub-run is shown; each run's conversation (one of them cut to fit the
// page's limit); and axe-core's violations, before a call is selected and with the cut conversation.
// It records rather than stops on what it does not find, so each check is the test's.
// Prints JSON: {runs, signIn, bulkBars, buttons, subRun, conversations, axe, pageErrors, cspViolations}.
import { join } from 'node:path';
import { api, axeViolations, contrastStates, failed, launchChromium } from './_browser.mjs';

const [baseUrl, outputDir, apiKey] = process.argv.slice(2);
const TIMEOUT = 60_000;
const { graphql, start } = api(baseUrl, apiKey);
const { context, close } = await launchChromium();
const out = { runs: {}, buttons: [], pageErrors: [], cspViolations: [], axe: [] };
try {
  const page = context.pages()[0] ?? (await context.newPage());
  page.setDefaultTimeout(TIMEOUT);
  page.on('pageerror', (error) => out.pageErrors.push(String(error)));
  page.on('console', (message) => {
    if (message.type() === 'error' && /Content Security Policy/i.test(message.text())) out.cspViolations.push(message.text());
  });
  const rest = async () => {
    await page.mouse.move(1, 1);
    await page.evaluate(() => document.activeElement && document.activeElement.blur());
  };
  // every button's contrast in the four states; `where` names the page's state
  const measure = async (where) => {
    const buttons = page.locator('button');
    for (let i = 0; i < (await buttons.count()); i += 1) {
      const button = buttons.nth(i);
      if (!(await button.isVisible())) continue;
      await button.scrollIntoViewIfNeeded();
      const label = (await button.innerText()).trim();
      const disabled = await button.isDisabled();
      const states = await contrastStates(button, rest);
      out.buttons.push({ where, label, disabled, states });
    }
  };
  const axe = async (label) => out.axe.push({ label, violations: await axeViolations(page) });
  const section = (agentId) => page.locator(`section[aria-labelledby="agent-${agentId}"]`);
  const article = (runId) => page.locator(`article[aria-labelledby="run-${runId}"]`);

  // the sign-in form
  await page.goto(`${baseUrl}/inbox?view=agents`, { waitUntil: 'load', timeout: TIMEOUT });
  await page.getByLabel('API key or token').waitFor();
  await measure('sign-in');
  await page.getByLabel('API key or token').focus();
  await page.keyboard.type(apiKey);
  await page.keyboard.press('Enter');
  await page.getByText('Live: new runs and decisions appear as they happen').waitFor();

  // a supervisor's refund (and its sub-run under refund-agent), and a call that asks for data
  out.runs.supervisor = await start('support-supervisor', 'Please refund order 1043');
  out.runs.weather = await start('weather-agent', "What's the weather like?");
  const inner = await graphql('{ suspendedRuns(agentId: "refund-agent") { nodes { runId parentRunId } } }');
  out.runs.subRun = (inner.suspendedRuns.nodes.find((n) => n.parentRunId === out.runs.supervisor) || {}).runId || null;
  for (const runId of [out.runs.supervisor, out.runs.weather, out.runs.subRun]) if (runId) await article(runId).waitFor();
  const bulkBars = async () => {
    const bars = {};
    for (const agentId of ['refund-agent', 'weather-agent', 'support-supervisor']) {
      bars[agentId] = await section(agentId).getByRole('button', { name: /selected$/ }).count();
    }
    return bars;
  };
  out.bulkBars = { withoutRefund: await bulkBars() };
  await page.screenshot({ path: join(outputDir, 'inbox-review-sub-run.png'), fullPage: true });

  // how the sub-run is shown: its controls, its links, and where they lead
  if (out.runs.subRun) {
    const sub = article(out.runs.subRun);
    out.subRun = {
      buttons: await sub.getByRole('button').count(),
      controls: await sub.locator('input, textarea, select').count(),
      text: await sub.innerText(),
      links: await sub.locator('a[href]').evaluateAll((links) => links.map((a) => ({ text: a.textContent, href: a.getAttribute('href') }))),
      insideSupervisor: await article(out.runs.supervisor).locator(`[data-run-id="${out.runs.subRun}"]`).count(),
    };
    const link = sub.locator(`a[href="#run-${out.runs.supervisor}"]`);
    if (await link.count()) {
      await link.first().focus();
      await page.keyboard.press('Enter');
      out.subRun.followed = {
        hash: await page.evaluate(() => window.location.hash),
        target: await page.evaluate((id) => {
          const el = document.getElementById(id);
          return el ? { tag: el.tagName, text: el.textContent, agent: el.closest('section') && el.closest('section').getAttribute('aria-labelledby') } : null;
        }, `run-${out.runs.supervisor}`),
      };
    }
  }

  // a plain refund: every kind of button is on the page (the editor open, the bulk buttons off, then on)
  out.runs.refund = await start('refund-agent', 'Please refund order 1042');
  const refund = article(out.runs.refund);
  await refund.waitFor();
  out.bulkBars.withRefund = await bulkBars();
  const edit = refund.getByRole('button', { name: 'Edit arguments' });
  if (await edit.count()) await edit.click();
  await measure('listing');
  await axe('listing with a supervisor, its sub-run, a data request and a refund, nothing selected');
  const box = refund.getByRole('checkbox', { name: /bulk decision/ });
  if (await box.count()) {
    await box.check();
    await measure('one call selected');
  }
  await page.screenshot({ path: join(outputDir, 'inbox-review.png'), fullPage: true });

  // a refund asked for in a message longer than the page shows (20 KB): its conversation is cut
  out.runs.long = await start('refund-agent', `Please refund order 1042, ${'the grinder arrived broken and '.repeat(640)}thanks.`);
  await article(out.runs.long).waitFor();
  await page.screenshot({ path: join(outputDir, 'inbox-review-conversations.png'), fullPage: true });
  await axe('with a conversation cut to fit');

  // each run's conversation, as shown
  out.conversations = {};
  for (const [key, runId] of Object.entries(out.runs)) {
    if (!runId) continue;
    const shown = article(runId).locator('[data-conversation]');
    out.conversations[key] = (await shown.count()) ? await shown.first().innerText() : null;
  }
  process.stdout.write(JSON.stringify(out) + '\n');
} catch (error) {
  await failed(error, out, context, join(outputDir, 'inbox-review-failure.png'));
} finally {
  await close();
}
