// The inbox as the reviewers' queue's page (issue 45 part 6), in Debian's Chromium (playwright-core):
//   node inbox-review-queue.mjs BASE_URL OUTPUT_DIR API_KEY OTHER_KEY
// against a server with the json-echo test agent beside the demo agents, and tool rules giving a
// refund a deadline of 600 s, one over $100 a deadline of 300 s. API_KEY signs the page in;
// OTHER_KEY is another reviewer's, who claims questions through the API. Records:
// - queue: a refund of order 1043 (due first), one of 1042 (claimed by the other reviewer) and a
//   weather run (no deadline), started in that order: the page's level-2 headings and its runs in
//   the order shown, and the 1042 card's claim;
// - claim: Claim on the 1043 card: what is sent and what the card then says; a screenshot;
// - filters: the runs listed with "Claimed by me", then "Unclaimed", then tool issue_refund, and
//   the reviewQueue filters sent;
// - release: Release on the 1043 card: what is sent and what the card then says;
// - live: the other reviewer claims the weather question, then a new refund starts: what the page
//   shows without a reload;
// - stream, reconnect: the page's WebSockets pass through this script (playwright's routeWebSocket), which
//   records the operations each carries: the subscriptions open on the page's live socket; the
//   other reviewer declines the 1042 refund with a reason (the activity line that names it); then
//   this script closes the live socket (1012), holds the page's new one unconnected while the
//   other reviewer starts a refund of order 2002, and lets it connect: the subscription the page
//   sends again, the id of the last queue message it had, the new refund's card and its activity
//   line, and the subscriptions open then;
// - bulk: a refund and a json-echo `hold` selected, then "Approve selected": the mutations sent;
// - whole: in a second tab whose queue answers say each question waited `60.0` seconds, what
//   the cards say they waited, and the tab's page errors;
// - agents: `/inbox?view=agents`, the per-agent listing: its level-2 headings;
// and axe-core's violations in each state. Each step records what it found or the error that
// stopped it. Prints JSON: {runs, queue, claim, filters, release, live, stream (both steps), bulk, whole, agents, axe, sent,
// pageErrors, cspViolations, errors}.
import { join } from 'node:path';
import { api, axeViolations, failed, launchChromium } from './_browser.mjs';

const [baseUrl, outputDir, apiKey, otherKey] = process.argv.slice(2);
const TIMEOUT = 60_000;
const STEP = 15_000;
const { start } = api(baseUrl, apiKey);
const other = api(baseUrl, otherKey);
const { context, close } = await launchChromium();
const out = { runs: {}, axe: [], sent: [], queries: [], pageErrors: [], cspViolations: [], errors: {} };
const step = async (name, body) => {
  try {
    await body();
  } catch (error) {
    out.errors[name] = String(error.stack || error).slice(0, 2000);
  }
};
const ITEMS = `query { reviewQueue(first: 50) { nodes { agentId runId toolCallId questionId } } }`;
/** The other reviewer claims the question of `runId` through the API. */
const claimAs = async (client, runId) => {
  const { reviewQueue } = await client.graphql(ITEMS);
  const item = reviewQueue.nodes.find((node) => node.runId === runId);
  const { agentId, toolCallId, questionId } = item;
  const data = await client.graphql(
    'mutation C($input: ReviewClaimInput!) { claimReview(input: $input) { __typename } }',
    { input: { agentId, runId, toolCallId, questionId } },
  );
  if (data.claimReview.__typename !== 'ReviewClaimed') throw new Error(JSON.stringify(data));
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
    const operation = body && /"query":"(mutation|query) (\w+)/.exec(body);
    if (!operation) return;
    const { variables } = JSON.parse(body);
    if (operation[1] === 'mutation') out.sent.push({ operation: operation[2], input: variables.input });
    else if (/reviewQueue\(/.test(JSON.parse(body).query)) out.queries.push({ operation: operation[2], variables });
  });
  // every socket of the page goes through here: what it carries is recorded, and while `hold` is
  // set a new socket waits for it before it connects to the server
  const sockets = [];
  let hold = null;
  let opened = () => {};
  const operation = (query) => (/\b(reviewQueueEvents|suspendedRunEvents|runUpdates)\(/.exec(query) || [])[1] || 'other';
  await page.routeWebSocket(/\/graphql$/, (ws) => {
    const socket = { ws, server: null, waiting: [], active: new Map(), subscribes: [], lastQueueId: null };
    sockets.push(socket);
    ws.onMessage((message) => {
      const parsed = JSON.parse(message);
      if (parsed.type === 'subscribe') {
        socket.active.set(parsed.id, operation(parsed.payload.query));
        socket.subscribes.push({ id: parsed.id, operation: operation(parsed.payload.query), variables: parsed.payload.variables || {} });
      } else if (parsed.type === 'complete') socket.active.delete(parsed.id);
      if (socket.server) socket.server.send(message);
      else socket.waiting.push(message);
    });
    const connect = () => {
      socket.server = ws.connectToServer();
      socket.server.onMessage((message) => {
        const parsed = JSON.parse(message);
        const event = parsed.type === 'next' && parsed.payload.data && parsed.payload.data.reviewQueueEvents;
        if (event) socket.lastQueueId = event.id;
        if (parsed.type === 'complete' || parsed.type === 'error') socket.active.delete(parsed.id);
        ws.send(message);
      });
      for (const message of socket.waiting.splice(0)) socket.server.send(message);
    };
    if (hold) hold.then(connect);
    else connect();
    opened(socket);
  });
  /** The operations open on the page's sockets, sorted. */
  const openOperations = () => sockets.filter((s) => !s.closed).flatMap((s) => [...s.active.values()]).sort();
  const shot = async (name) => page.screenshot({ path: join(outputDir, name) });
  const axe = async (label) => out.axe.push({ label, violations: await axeViolations(page) });
  const article = (runId) => page.locator(`article[aria-labelledby="run-${runId}"]`);
  const shown = () => page.locator('article.run').evaluateAll((els) => els.map((el) => el.getAttribute('aria-labelledby').slice(4)));
  const claimText = async (runId) => (await article(runId).locator('.review-claim').allInnerTexts()).join(' | ');
  const apply = () => page.getByRole('button', { name: 'Apply filters' }).click();

  // the runs, before the page opens: 1043 is due first (over $100), then 1042, then the weather run
  out.runs.r1043 = await start('refund-agent', 'Please refund order 1043');
  out.runs.r1042 = await start('refund-agent', 'Please refund order 1042');
  out.runs.weather = await start('weather-agent', "What's the weather like?");
  await claimAs(other, out.runs.r1042);

  page.setDefaultTimeout(TIMEOUT);
  await page.setViewportSize({ width: 1280, height: 1400 });
  await page.goto(`${baseUrl}/inbox`, { waitUntil: 'load', timeout: TIMEOUT });
  await page.getByLabel('API key or token').fill(apiKey);
  await page.keyboard.press('Enter');
  await page.getByText('Live: new runs and decisions appear as they happen').waitFor();
  page.setDefaultTimeout(STEP);

  await step('queue', async () => {
    for (const runId of [out.runs.r1043, out.runs.r1042, out.runs.weather]) await article(runId).waitFor({ timeout: TIMEOUT });
    out.queue = {
      headings: await page.getByRole('heading', { level: 2 }).allInnerTexts(),
      order: await shown(),
      claimOther: await claimText(out.runs.r1042),
      claimButtons: await article(out.runs.r1042).getByRole('button', { name: /^(Claim|Release)/ }).count(),
      approveOther: await article(out.runs.r1042).getByRole('button', { name: 'Approve', exact: true }).count(),
    };
    await axe('the queue');
  });

  await step('claim', async () => {
    const sentBefore = out.sent.length;
    await article(out.runs.r1043).getByRole('button', { name: /^Claim/ }).click();
    await article(out.runs.r1043).getByRole('button', { name: /^Release/ }).waitFor({ timeout: TIMEOUT });
    out.claim = { sent: out.sent.slice(sentBefore), text: await claimText(out.runs.r1043) };
    await article(out.runs.r1043).evaluate((el) => el.scrollIntoView({ block: 'start' }));
    await shot('inbox-review-queue-claims.png');
    await axe('a question claimed');
  });

  await step('filters', async () => {
    out.filters = {};
    await page.getByLabel('Claimed by me').check();
    await apply();
    // the listing is drawn anew for new filters: empty until the queue answers
    await article(out.runs.weather).waitFor({ state: 'detached', timeout: TIMEOUT });
    await article(out.runs.r1043).waitFor({ timeout: TIMEOUT });
    out.filters.claimedByMe = await shown();
    await page.getByLabel('Claimed by me').uncheck();
    await page.getByLabel('Unclaimed').check();
    await apply();
    await article(out.runs.weather).waitFor({ timeout: TIMEOUT });
    await article(out.runs.r1043).waitFor({ state: 'detached', timeout: TIMEOUT });
    out.filters.unclaimed = await shown();
    await page.getByLabel('Unclaimed').uncheck();
    await page.getByLabel('Tools').fill('issue_refund');
    await apply();
    await article(out.runs.weather).waitFor({ state: 'detached', timeout: TIMEOUT });
    await article(out.runs.r1043).waitFor({ timeout: TIMEOUT });
    out.filters.tools = await shown();
    out.filters.sent = out.queries.map((q) => q.variables.filter);
    await axe('the queue filtered');
    await page.getByRole('button', { name: 'Clear' }).click();
    await article(out.runs.weather).waitFor({ timeout: TIMEOUT });
  });

  await step('release', async () => {
    const sentBefore = out.sent.length;
    await article(out.runs.r1043).getByRole('button', { name: /^Release/ }).click();
    await article(out.runs.r1043).getByRole('button', { name: /^Claim/ }).waitFor({ timeout: TIMEOUT });
    out.release = { sent: out.sent.slice(sentBefore), text: await claimText(out.runs.r1043) };
  });

  await step('live', async () => {
    await claimAs(other, out.runs.weather);
    await article(out.runs.weather).locator('.review-claim', { hasText: 'key:reviewer-b' }).waitFor({ timeout: TIMEOUT });
    out.live = { claim: await claimText(out.runs.weather) };
    out.runs.late = await start('refund-agent', 'Please refund order 2001');
    await article(out.runs.late).waitFor({ timeout: TIMEOUT });
    out.live.order = await shown();
  });

  await step('stream', async () => {
    out.stream = { openBefore: openOperations() };
    // another reviewer's decision: the activity line names the call and the change
    const { reviewQueue } = await other.graphql(ITEMS);
    const item = reviewQueue.nodes.find((node) => node.runId === out.runs.r1042);
    const declined = await other.graphql('mutation D($input: DeclineToolCallInput!) { declineToolCall(input: $input) { __typename } }', {
      input: { agentId: item.agentId, runId: item.runId, toolCallId: item.toolCallId, questionId: item.questionId, reason: 'Refunded by phone' },
    });
    if (declined.declineToolCall.__typename !== 'RunOutcome') throw new Error(JSON.stringify(declined));
    await article(out.runs.r1042).waitFor({ state: 'detached', timeout: TIMEOUT });
    const decision = page.locator('[role="log"] li', { hasText: `run ${out.runs.r1042} by key:reviewer-b` }).first();
    await decision.waitFor({ timeout: TIMEOUT });
    out.stream.decisionLine = await decision.innerText();
  });

  await step('reconnect', async () => {
    // the live socket closes; the page's next one waits while the other reviewer starts a refund
    const live = sockets.find((s) => !s.closed && [...s.active.values()].some((op) => op !== 'runUpdates'));
    out.stream.lastQueueId = live.lastQueueId;
    let release;
    hold = new Promise((resolve) => {
      release = resolve;
    });
    const next = new Promise((resolve) => {
      opened = resolve;
    });
    live.closed = true;
    await live.ws.close({ code: 1012, reason: 'the test restarts the server' });
    const reopened = await next;
    out.runs.missed = await other.start('refund-agent', 'Please refund order 2002');
    hold = null;
    release();
    await article(out.runs.missed).waitFor({ timeout: TIMEOUT });
    const entered = page.locator('[role="log"] li', { hasText: out.runs.missed }).first();
    await entered.waitFor({ timeout: TIMEOUT });
    out.stream.enteredLine = await entered.innerText();
    out.stream.resubscribed = reopened.subscribes.map(({ operation: op, variables }) => ({ operation: op, afterEventId: variables.afterEventId ?? null }));
    out.stream.openAfter = openOperations();
  });

  await step('bulk', async () => {
    out.runs.hold = await start('json-echo', '{"hold": {"note": "bulk"}}');
    await article(out.runs.hold).waitFor({ timeout: TIMEOUT });
    for (const runId of [out.runs.late, out.runs.hold]) await article(runId).getByRole('checkbox', { name: /bulk decision/ }).check();
    const sentBefore = out.sent.length;
    await page.getByRole('button', { name: 'Approve selected' }).click();
    for (const runId of [out.runs.late, out.runs.hold]) await article(runId).waitFor({ state: 'detached', timeout: TIMEOUT });
    out.bulk = { sent: out.sent.slice(sentBefore), order: await shown() };
    await axe('after a bulk decision across agents');
  });

  await step('whole', async () => {
    // in a tab of its own, whose queue answers say each question waited `60.0` seconds, as the
    // server writes a whole number of seconds: the page keeps such a number as the text it is
    const tab = await context.newPage();
    out.whole = { pageErrors: [] };
    tab.on('pageerror', (error) => out.whole.pageErrors.push(String(error)));
    await tab.route(/\/graphql$/, async (route) => {
      if (!/InboxQueue/.test(route.request().postData() || '')) return route.continue();
      const response = await route.fetch();
      const body = (await response.text()).replace(/"waitedSeconds":[-+.eE0-9]+/g, '"waitedSeconds":60.0');
      return route.fulfill({ response, body });
    });
    await tab.goto(`${baseUrl}/inbox`, { waitUntil: 'load', timeout: TIMEOUT });
    await tab.getByLabel('API key or token').fill(apiKey);
    await tab.keyboard.press('Enter');
    await tab.locator('article.run').first().waitFor({ timeout: TIMEOUT });
    out.whole.waited = await tab.locator('article.run dt:text-is("Waiting for") + dd').allInnerTexts();
    await tab.close();
  });

  await step('agents', async () => {
    await page.goto(`${baseUrl}/inbox?view=agents`, { waitUntil: 'load', timeout: TIMEOUT });
    await page.getByText('Live: new runs and decisions appear as they happen').waitFor({ timeout: TIMEOUT });
    await article(out.runs.r1043).waitFor({ timeout: TIMEOUT });
    out.agents = { headings: await page.getByRole('heading', { level: 2 }).allInnerTexts() };
  });
  process.stdout.write(JSON.stringify(out) + '\n');
} catch (error) {
  await failed(error, out, context, join(outputDir, 'inbox-review-queue-failure.png'));
} finally {
  await close();
}
