// Inbox faults a new user found (issue 45 part 6), in Debian's Chromium (playwright-core):
//   node inbox-first-use.mjs BASE_URL OUTPUT_DIR API_KEY READ_KEY
// against a server with authentication on and the demo agents. API_KEY may decide; READ_KEY has
// `runs:read` only. Records:
// - link: `/inbox?agentId=weather-agent&runId=R` (an email's and a webhook's link) and
//   `?view=agents&agentId=...&runId=...`, with R the last of three weather runs behind two
//   refunds: whether R's card is in view and holds the focus; then a link to a run decided since:
//   the page's note;
// - waits: `?view=agents&pageSize=1&agentId=refund-agent&runId=R` with R on the second page, then R
//   declined through the API: before, R's card (the first shown? in view, holding the focus?) and
//   the notes above the cards; after, the page's note and whether R's card is gone;
// - scroll: at 1280x900 and at 390x700, a refund approved with the mouse with the next card below
//   the fold: `scrollY` before and at each frame for 1.5 s after the click, the decided card's
//   place (in view or not) and what has the focus;
// - readonly: READ_KEY at /inbox: the page's text, its links, and whether it says "Live";
// - readonlyAgents: READ_KEY at /inbox?view=agents: the page's text, its run cards, the buttons,
//   forms and fields in them, and the bulk buttons;
// - partial: a refund of $640 (two approvals) approved on its card, another in bulk: the activity
//   lines (the bulk entry's item);
// and axe-core's violations after the link to a decided run, each decision and on the read-only
// key's page. Each step records what it found or the error that stopped it. Prints JSON:
// {runs, link, waits, scroll, readonly, readonlyAgents, partial, axe, pageErrors, cspViolations, errors}.
import { join } from 'node:path';
import { api, axeViolations, failed, launchChromium } from './_browser.mjs';

const [baseUrl, outputDir, apiKey, readKey] = process.argv.slice(2);
const TIMEOUT = 60_000;
const STEP = 15_000;
const { start } = api(baseUrl, apiKey);
const { context, close } = await launchChromium();
const out = { runs: {}, link: {}, scroll: {}, axe: [], pageErrors: [], cspViolations: [], errors: {} };
const axe = async (page, label) => out.axe.push({ label, violations: await axeViolations(page) });
const step = async (name, body) => {
  try {
    await body();
  } catch (error) {
    out.errors[name] = String(error.stack || error).slice(0, 2000);
  }
};
const watch = (page) => {
  page.on('pageerror', (error) => out.pageErrors.push(String(error)));
  page.on('console', (message) => {
    if (message.type() === 'error' && /Content Security Policy/i.test(message.text())) out.cspViolations.push(message.text());
  });
};
const signIn = async (page, url, key) => {
  await page.goto(url, { waitUntil: 'load', timeout: TIMEOUT });
  // the tab keeps its token (sessionStorage): the form is asked only once
  await page.locator('#token, header').first().waitFor({ timeout: TIMEOUT });
  if (await page.locator('#token').count()) {
    await page.getByLabel('API key or token').fill(key);
    await page.keyboard.press('Enter');
  }
};
const article = (page, runId) => page.locator(`article[aria-labelledby="run-${runId}"]`);
/** Whether `runId`'s card is (at least partly) in view, and whether the focus is in it. */
const target = (page, runId) =>
  article(page, runId).evaluate((el) => {
    const box = el.getBoundingClientRect();
    const active = document.activeElement;
    return { inView: box.top < window.innerHeight && box.bottom > 0, top: box.top, focused: Boolean(active && el.contains(active)), focus: active ? `${active.tagName}:${(active.innerText || active.id || '').trim().slice(0, 60)}` : null };
  });

try {
  const page = context.pages()[0] ?? (await context.newPage());
  watch(page);
  page.setDefaultTimeout(STEP);
  await page.setViewportSize({ width: 1280, height: 900 });
  out.runs.refunds = [];
  for (const order of [1042, 1043]) out.runs.refunds.push(await start('refund-agent', `Please refund order ${order}`));
  out.runs.weather = [];
  for (let i = 0; i < 3; i += 1) out.runs.weather.push(await start('weather-agent', "What's the weather like?"));
  const linked = out.runs.weather[2];

  await step('link', async () => {
    for (const [name, query] of [
      ['queue', `agentId=weather-agent&runId=${linked}`],
      ['agents', `view=agents&agentId=weather-agent&runId=${linked}`],
    ]) {
      await signIn(page, `${baseUrl}/inbox?${query}`, apiKey);
      await article(page, linked).waitFor({ timeout: TIMEOUT });
      // what the page does once its listing is read (the focus follows the card's buttons)
      await page.waitForFunction((id) => {
        const el = document.querySelector(`article[aria-labelledby="run-${id}"]`);
        return el && el.contains(document.activeElement);
      }, linked, { timeout: STEP }).catch(() => {});
      out.link[name] = await target(page, linked);
      out.link[name].cards = await page.locator('article.run').count();
    }
    // a run decided since the link was sent
    const gone = out.runs.weather[0];
    await article(page, gone).getByRole('button', { name: /Resume run/ }).waitFor();
    await page.goto(`${baseUrl}/inbox?agentId=weather-agent&runId=${out.runs.refunds[0]}`, { waitUntil: 'load', timeout: TIMEOUT });
    const answered = await api(baseUrl, apiKey).graphql(
      'query Q($r: ID!) { suspendedRun(agentId: "refund-agent", runId: $r) { toolCalls { toolCallId questionId } } }',
      { r: out.runs.refunds[0] },
    );
    const call = answered.suspendedRun.toolCalls[0];
    await api(baseUrl, apiKey).graphql('mutation D($input: DeclineToolCallInput!) { declineToolCall(input: $input) { __typename } }', {
      input: { agentId: 'refund-agent', runId: out.runs.refunds[0], toolCallId: call.toolCallId, questionId: call.questionId, reason: 'test' },
    });
    await page.reload({ waitUntil: 'load', timeout: TIMEOUT });
    const note = page.getByText(/no longer waits/);
    await note.first().waitFor({ timeout: STEP });
    out.link.gone = await note.first().innerText();
    await axe(page, 'a link to a run that no longer waits');
  });

  // waits: a link to a run on another page (`pageSize=1`), shown first; decided elsewhere meanwhile: the note says so
  await step('waits', async () => {
    const older = await start('refund-agent', 'Please refund order 1042');
    const newer = await start('refund-agent', 'Please refund order 1043');
    out.runs.waits = { older, newer };
    await signIn(page, `${baseUrl}/inbox?view=agents&pageSize=1&agentId=refund-agent&runId=${older}`, apiKey);
    const note = page.locator('.link-note').first();
    await article(page, older).waitFor({ timeout: TIMEOUT });
    await page.waitForFunction((id) => {
      const el = document.querySelector(`article[aria-labelledby="run-${id}"]`);
      return el && el.contains(document.activeElement);
    }, older, { timeout: STEP }).catch(() => {});
    out.waits = {
      before: {
        ...(await target(page, older)),
        first: await page.locator('article.run').first().getAttribute('aria-labelledby'),
        notes: await page.locator('.link-note').allInnerTexts(),
      },
    };
    for (const runId of [older, newer]) {
      const read = await api(baseUrl, apiKey).graphql(
        'query Q($r: ID!) { suspendedRun(agentId: "refund-agent", runId: $r) { toolCalls { toolCallId questionId } } }',
        { r: runId },
      );
      const call = read.suspendedRun.toolCalls[0];
      await api(baseUrl, apiKey).graphql('mutation D($input: DeclineToolCallInput!) { declineToolCall(input: $input) { __typename } }', {
        input: { agentId: 'refund-agent', runId, toolCallId: call.toolCallId, questionId: call.questionId, reason: 'test' },
      });
    }
    await page.getByText(/which the link names, no longer waits/).first().waitFor({ timeout: STEP }).catch(() => {});
    out.waits.after = await note.innerText();
    out.waits.gone = (await article(page, older).count()) === 0;
  });

  for (const [name, size] of [
    ['wide', { width: 1280, height: 900 }],
    ['small', { width: 390, height: 700 }],
  ]) {
    await step(`scroll-${name}`, async () => {
      await page.setViewportSize(size);
      const runs = [];
      for (const order of [1042, 1043, 1042]) runs.push(await start('refund-agent', `Please refund order ${order}`));
      await page.goto(`${baseUrl}/inbox`, { waitUntil: 'load', timeout: TIMEOUT });
      await page.getByLabel('Agent', { exact: true }).selectOption('refund-agent');
      await page.getByRole('button', { name: 'Apply filters' }).click();
      for (const runId of runs) await article(page, runId).waitFor({ timeout: TIMEOUT });
      const [decided, next] = runs;
      const approve = article(page, decided).getByRole('button', { name: 'Approve', exact: true });
      // the decided card's Approve button near the bottom of the view; the next card's below it
      await approve.evaluate((el) => {
        const box = el.getBoundingClientRect();
        window.scrollBy(0, box.bottom - window.innerHeight + 60);
      });
      await page.waitForTimeout(300);
      const nextApprove = article(page, next).getByRole('button', { name: 'Approve', exact: true });
      const box = await approve.boundingBox();
      const record = { viewport: size, nextTop: (await nextApprove.boundingBox()).y };
      await page.evaluate(() => {
        window.__scrolls = [];
        const start = performance.now();
        const frame = () => {
          window.__scrolls.push(Math.round(window.scrollY));
          if (performance.now() - start < 1500) requestAnimationFrame(frame);
        };
        window.__scrolls.push(Math.round(window.scrollY));
        requestAnimationFrame(frame);
      });
      await page.mouse.click(box.x + box.width / 2, box.y + box.height / 2);
      const slot = page.locator(`[data-settled="${decided}"]`);
      await slot.waitFor({ timeout: TIMEOUT });
      await page.waitForTimeout(1600);
      record.scrolls = await page.evaluate(() => window.__scrolls);
      record.slot = await slot.evaluate((el) => {
        const b = el.getBoundingClientRect();
        const line = el.querySelector('p').getBoundingClientRect();
        return { inView: b.top < window.innerHeight && b.bottom > 0, text: el.innerText, top: b.top, bottom: b.bottom, lineInView: line.top >= 0 && line.bottom <= window.innerHeight };
      });
      record.focus = await page.evaluate(() => {
        const active = document.activeElement;
        const run = active && active.closest('article');
        return { text: active ? (active.innerText || '').trim() : null, run: run ? run.getAttribute('aria-labelledby').slice(4) : null };
      });
      record.next = next;
      out.scroll[name] = record;
      await axe(page, `a decision at ${size.width}x${size.height}`);
      await page.screenshot({ path: join(outputDir, `inbox-first-use-scroll-${name}.png`) });
    });
  }
  await page.setViewportSize({ width: 1280, height: 900 });

  await step('partial', async () => {
    out.runs.big = [await start('refund-agent', 'Please refund order 1045'), await start('refund-agent', 'Please refund order 1045')];
    await page.goto(`${baseUrl}/inbox`, { waitUntil: 'load', timeout: TIMEOUT });
    for (const runId of out.runs.big) await article(page, runId).waitFor({ timeout: TIMEOUT });
    const [one, bulk] = out.runs.big;
    await article(page, one).getByRole('button', { name: 'Approve', exact: true }).click();
    const line = page.locator('[role="log"] > ol > li', { hasText: `Approval of issue_refund on run ${one}` }).first();
    await line.waitFor({ timeout: TIMEOUT });
    out.partial = { single: await line.innerText() };
    await article(page, bulk).getByRole('checkbox', { name: /bulk decision/ }).check();
    await page.getByRole('button', { name: 'Approve selected' }).click();
    const entry = page.locator('[role="log"] > ol > li', { hasText: 'Bulk approval of 1 call' }).first();
    await entry.waitFor({ timeout: TIMEOUT });
    out.partial.bulk = await entry.innerText();
  });

  await step('readonly', async () => {
    const tab = await context.newPage();
    watch(tab);
    await signIn(tab, `${baseUrl}/inbox`, readKey);
    await tab.locator('main').first().waitFor({ timeout: TIMEOUT });
    // what the page settles on once it has read what it can
    await tab.waitForTimeout(4000);
    out.readonly = {
      text: await tab.locator('body').innerText(),
      links: await tab.getByRole('link').evaluateAll((els) => els.map((el) => ({ text: el.innerText, href: el.getAttribute('href') }))),
    };
    await tab.screenshot({ path: join(outputDir, 'inbox-first-use-readonly.png') });
    await axe(tab, 'a read-only key');
    await tab.close();
  });

  await step('readonly-agents', async () => {
    const tab = await context.newPage();
    watch(tab);
    await signIn(tab, `${baseUrl}/inbox?view=agents`, readKey);
    await tab.locator('article.run').first().waitFor({ timeout: TIMEOUT });
    // what the page settles on once it has read what it can
    await tab.waitForTimeout(3000);
    const cards = tab.locator('article.run');
    out.readonlyAgents = {
      text: await tab.locator('body').innerText(),
      runs: await cards.count(),
      buttons: await cards.locator('button').evaluateAll((els) => els.map((el) => ({ text: el.innerText.trim(), disabled: el.disabled }))),
      forms: await cards.locator('form').count(),
      fields: await cards.locator('input, textarea, select').count(),
      bulk: await tab.getByRole('button', { name: /selected/ }).count(),
    };
    await tab.screenshot({ path: join(outputDir, 'inbox-first-use-readonly-agents.png') });
    await axe(tab, 'a read-only key on the agents view');
    await tab.close();
  });
  process.stdout.write(JSON.stringify(out) + '\n');
} catch (error) {
  await failed(error, out, context, join(outputDir, 'inbox-first-use-failure.png'));
} finally {
  await close();
}
