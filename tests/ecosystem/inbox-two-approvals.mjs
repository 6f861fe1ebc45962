// Two reviewers' tabs on the queue page while a refund needs two approvals (issue 45 part 6), in
// Debian's Chromium (playwright-core):
//   node inbox-two-approvals.mjs BASE_URL OUTPUT_DIR ALICE_KEY BOB_KEY
// against a server whose tool rules ask two approvals of each refund. Two refunds wait; alice's
// tab and bob's tab open the queue (each its own key), then alice approves the first card. Records:
// - approval (bob's tab): the activity line of alice's "1 of 2" approval, and every activity line's
//   text after its time (none may be empty);
// - settled (alice's tab): the first card's place after her approval (its text and height, or null
//   when no place was kept), the card's height before, and the next card's Approve button's place
//   in the page before the click and at each frame after it (its distinct places, rounded), the
//   approval's answer held 2 s, as on a slow network, so that the queue is read again first.
// Each step records what it found or the error that stopped it. Prints JSON: {runs, approval,
// settled, pageErrors, cspViolations, errors}.
import { join } from 'node:path';
import { api, failed, launchChromium } from './_browser.mjs';

const [baseUrl, outputDir, aliceKey, bobKey] = process.argv.slice(2);
const TIMEOUT = 60_000;
const STEP = 15_000;
const { start } = api(baseUrl, aliceKey);
const { context, close } = await launchChromium();
const out = { runs: {}, pageErrors: [], cspViolations: [], errors: {} };
const step = async (name, body) => {
  try {
    await body();
  } catch (error) {
    out.errors[name] = String(error.stack || error).slice(0, 2000);
  }
};
/** A tab signed in with `key`, its queue live. */
const open = async (page, key) => {
  page.on('pageerror', (error) => out.pageErrors.push(String(error)));
  page.on('console', (message) => {
    if (message.type() === 'error' && /Content Security Policy/i.test(message.text())) out.cspViolations.push(message.text());
  });
  await page.setViewportSize({ width: 1280, height: 1400 });
  await page.goto(`${baseUrl}/inbox`, { waitUntil: 'load', timeout: TIMEOUT });
  await page.getByLabel('API key or token').fill(key);
  await page.keyboard.press('Enter');
  await page.getByText('Live: new runs and decisions appear as they happen').waitFor({ timeout: TIMEOUT });
  page.setDefaultTimeout(STEP);
};
const article = (page, runId) => page.locator(`article[aria-labelledby="run-${runId}"]`);
const shown = (page) => page.locator('article.run').evaluateAll((els) => els.map((el) => el.getAttribute('aria-labelledby').slice(4)));
/** Each activity line's text after its time. */
const lines = (page) =>
  page.locator('[role="log"] ol > li').evaluateAll((els) => els.map((el) => el.innerText.replace(el.querySelector('time').innerText, '').trim()));
const approveButton = (page, runId) => article(page, runId).getByRole('button', { name: 'Approve', exact: true });
try {
  out.runs.first = await start('refund-agent', 'Please refund order 1042');
  out.runs.second = await start('refund-agent', 'Please refund order 1043');
  const alice = context.pages()[0] ?? (await context.newPage());
  const bob = await context.newPage();
  await open(alice, aliceKey);
  await open(bob, bobKey);
  for (const page of [alice, bob]) for (const runId of [out.runs.first, out.runs.second]) await article(page, runId).waitFor({ timeout: TIMEOUT });
  const [first, next] = await shown(alice);

  await step('settled', async () => {
    // the next card's Approve button's place in the page, at each frame from before the click on
    const button = approveButton(alice, next);
    await approveButton(alice, first).scrollIntoViewIfNeeded();
    await button.evaluate((el) => {
      const place = () => el.getBoundingClientRect().top + window.scrollY;
      window.nextPlaces = [place()];
      const watch = () => {
        if (!el.isConnected) return;
        window.nextPlaces.push(place());
        requestAnimationFrame(watch);
      };
      requestAnimationFrame(watch);
    });
    const height = (await article(alice, first).boundingBox()).height;
    // the answer to the approval comes late, after the queue message of it and the queue read
    // again without the question (the server drops it from her own queue)
    await alice.route(/\/graphql$/, async (route) => {
      if (!(route.request().postData() || '').includes('approveToolCall')) return route.continue();
      const response = await route.fetch();
      await new Promise((resolve) => setTimeout(resolve, 2000));
      return route.fulfill({ response });
    });
    await approveButton(alice, first).click();
    await alice.locator('[role="log"] li', { hasText: 'Approval of issue_refund' }).first().waitFor({ timeout: TIMEOUT });
    await article(alice, first).waitFor({ state: 'detached', timeout: TIMEOUT });
    await alice.waitForTimeout(1000);
    const slot = alice.locator(`[data-settled="${first}"]`);
    const kept = (await slot.count()) > 0;
    const places = await button.evaluate(() => window.nextPlaces);
    out.settled = {
      height,
      nextBefore: places[0],
      nextPlaces: [...new Set(places.map(Math.round))],
      slot: kept ? { text: await slot.innerText(), height: (await slot.boundingBox()).height } : null,
    };
    await alice.screenshot({ path: join(outputDir, 'inbox-two-approvals-settled.png') });
  });

  await step('approval', async () => {
    const line = bob.locator('[role="log"] li', { hasText: `on run ${first}: approved by` }).first();
    try {
      await line.waitFor({ timeout: STEP });
      out.approval = { line: await line.innerText() };
    } catch {
      out.approval = { line: null };
    }
    out.approval.lines = await lines(bob);
  });
  process.stdout.write(JSON.stringify(out) + '\n');
} catch (error) {
  await failed(error, out, context, join(outputDir, 'inbox-two-approvals-failure.png'));
} finally {
  await close();
}
