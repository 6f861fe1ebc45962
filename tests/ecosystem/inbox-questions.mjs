// A reviewer deciding a question someone else decided first, in Debian's Chromium (playwright-core):
//   node inbox-questions.mjs BASE_URL OUTPUT_DIR KEY_X KEY_Y
// It opens the per-agent listing (`/inbox?view=agents`), which it was written for; the review
// queue's page (one listing across agents, in its own order) is inbox-review-queue.mjs's.
// against a server with the json-echo test agent (tests/_json_agent.py) beside the demo agents.
// The page signs in as Y. For each action of the page, a run is started whose call asks two
// questions in turn (the supervisor's refunds of orders 1042 and 1043; json-echo's ask_twice), Y's
// page shows its first question, and its listing is then held as it was (this script answers the
// page's InboxRuns queries with the last one it saw) until Y acts, as a page read just before
// someone else's decision is. X decides the first question through the API, and Y acts on the card
// it still shows: Approve, Decline with a reason, Edit arguments then approve, the bulk bar's
// "Approve selected", and "Resume run". Records what Y's page sent, the activity line of its
// answer, and the card shown once the page read the run again (null: the run left the page).
// Prints JSON: {runs, questions, paths: {NAME: {sent, message, after}}, pageErrors, cspViolations}.
import { join } from 'node:path';
import { api, failed, launchChromium } from './_browser.mjs';

const [baseUrl, outputDir, keyX, keyY] = process.argv.slice(2);
const TIMEOUT = 60_000;
const SUPERVISOR = 'support-supervisor';
const x = api(baseUrl, keyX);
const y = api(baseUrl, keyY);
const { context, close } = await launchChromium();
const out = { runs: {}, questions: {}, paths: {}, sent: [], pageErrors: [], cspViolations: [] };
try {
  const page = context.pages()[0] ?? (await context.newPage());
  page.setDefaultTimeout(TIMEOUT);
  page.on('pageerror', (error) => out.pageErrors.push(String(error)));
  page.on('console', (message) => {
    if (message.type() === 'error' && /Content Security Policy/i.test(message.text())) out.cspViolations.push(message.text());
  });

  // while `holding`, each agent's listing is answered with the last one the page got before
  let holding = false;
  const held = new Map();
  await page.route(/\/graphql$/, async (route) => {
    const body = route.request().postData() || '';
    const operation = (/"query":"(?:query|mutation) (\w+)/.exec(body) || [])[1];
    if (operation === 'InboxRuns') {
      const { agentId } = JSON.parse(body).variables;
      if (holding && held.has(agentId)) return route.fulfill({ status: 200, contentType: 'application/json', body: held.get(agentId) });
      const response = await route.fetch();
      const text = await response.text();
      if (!holding) held.set(agentId, text);
      return route.fulfill({ response, body: text });
    }
    if (/^Inbox(Approve|Decline|Resume|DecideMany)$/.test(operation || '')) {
      out.sent.push({ operation, input: JSON.parse(body).variables.input });
      holding = false; // the page reads the runs as they are after its decision
    }
    return route.continue();
  });

  const article = (runId) => page.locator(`article[aria-labelledby="run-${runId}"]`);
  const calls = async (agentId, runId) =>
    (await y.graphql('query R($a: ID!, $r: ID!) { suspendedRun(agentId: $a, runId: $r) { toolCalls { toolCallId questionId args decision { kind } } } }', { a: agentId, r: runId })).suspendedRun.toolCalls;
  // the run as Y's page shows it, held; then X decides its first question through the API
  const decidedElsewhere = async (name, agentId, prompt, decide) => {
    const runId = await x.start(agentId, prompt);
    out.runs[name] = runId;
    await article(runId).waitFor();
    holding = true;
    const [first] = await calls(agentId, runId);
    await decide(runId, first);
    const [second] = await calls(agentId, runId);
    out.questions[name] = { toolCallId: first.toolCallId, first: first.questionId, second: second.questionId };
    // Y's page heard of it (and read its listing again: still the one it had)
    await page.locator('[role="log"] li', { hasText: `Decision on run ${runId} by key:reviewer-x` }).first().waitFor();
    return runId;
  };
  const approveFirst = (runId, call) =>
    x.graphql('mutation A($input: ApproveToolCallInput!) { approveToolCall(input: $input) { __typename } }', { input: { agentId: SUPERVISOR, runId, toolCallId: call.toolCallId } });
  // Y's answer, then the card once the page read the run again (shows `next`), or null once gone
  const outcome = async (name, what, next) => {
    const runId = out.runs[name];
    // a bulk action's entry has an item per call, which names it: `issue_refund (call …) on run …`
    const text = what instanceof RegExp ? new RegExp(`${what.source} on run ${runId}: `) : `${what} on run ${runId}:`;
    const line = page.locator('[role="log"] li', { hasText: text }).first();
    await line.waitFor();
    await page.waitForFunction(
      ([id, text]) => {
        const el = document.querySelector(`article[aria-labelledby="run-${id}"]`);
        return !el || el.innerText.includes(text);
      },
      [runId, next],
    );
    const shown = await article(runId).count();
    out.paths[name] = {
      sent: out.sent.filter((s) => JSON.stringify(s.input).includes(runId)).map((s) => s.input),
      message: (await line.innerText()).replace(/^\S+ \S+ UTC /, ''),
      after: shown ? await article(runId).innerText() : null,
    };
  };

  await page.goto(`${baseUrl}/inbox?view=agents`, { waitUntil: 'load', timeout: TIMEOUT });
  await page.getByLabel('API key or token').fill(keyY);
  await page.keyboard.press('Enter');
  await page.getByText('Live: new runs and decisions appear as they happen').waitFor();
  const TWO = 'Please refund orders 1042 and 1043';
  const NEXT = '"order_id": 1043';

  let runId = await decidedElsewhere('approve', SUPERVISOR, TWO, approveFirst);
  await article(runId).getByRole('button', { name: 'Approve', exact: true }).click();
  await outcome('approve', 'Approval of issue_refund', NEXT);

  runId = await decidedElsewhere('decline', SUPERVISOR, TWO, approveFirst);
  await article(runId).getByLabel('Reason for declining (the model reads it)').fill('Not this one');
  await article(runId).getByRole('button', { name: 'Decline', exact: true }).click();
  await outcome('decline', 'Decline of issue_refund', NEXT);

  runId = await decidedElsewhere('edit', SUPERVISOR, TWO, approveFirst);
  await article(runId).getByRole('button', { name: 'Edit arguments' }).click();
  const editor = article(runId).getByLabel('Edited arguments (JSON)');
  await editor.fill((await editor.inputValue()).replace(/"amount": [0-9.e+-]+/, '"amount": 25'));
  await article(runId).getByRole('button', { name: 'Approve with edited arguments' }).click();
  await outcome('edit', 'Approval with edited arguments of issue_refund', NEXT);

  runId = await decidedElsewhere('bulk', SUPERVISOR, TWO, approveFirst);
  await article(runId).getByRole('checkbox', { name: /bulk decision/ }).check();
  await page.locator(`section[aria-labelledby="agent-${SUPERVISOR}"]`).getByRole('button', { name: 'Approve selected' }).click();
  await outcome('bulk', /^issue_refund \(call [^)]+\)/, NEXT);

  // a tool that asks twice (json-echo's ask_twice: "first question", then ten x's)
  runId = await decidedElsewhere('resume', 'json-echo', '{"big_later": 10}', (id, call) =>
    x.graphql('mutation R($input: ResumeRunInput!) { resumeRun(input: $input) { __typename } }', {
      input: { agentId: 'json-echo', runId: id, toolCallId: call.toolCallId, questionId: call.questionId, resumeData: 'from X' },
    }),
  );
  await article(runId).getByLabel('Resume data (JSON)').fill('{"from": "Y"}');
  await article(runId).getByRole('button', { name: 'Resume run' }).click();
  // (a payload that is text is the question the card asks)
  await outcome('resume', 'Resume of ask_twice', 'Question\nxxxxxxxxxx');
  await page.screenshot({ path: join(outputDir, 'inbox-questions.png'), fullPage: true });
  process.stdout.write(JSON.stringify(out) + '\n');
} catch (error) {
  await failed(error, out, context, join(outputDir, 'inbox-questions-failure.png'));
} finally {
  await close();
}
