// The inbox's handling of answers today's server cannot give on demand: Chromium with the
// page's POST /graphql answered by this script (the page, its files and its WebSocket are
// runsgate's own).
//   node inbox-answers.mjs BASE_URL OUTPUT_DIR
// The schema offered has issue 18's fields (editedArgs, expiresAt, approvals, expiresBefore,
// decideToolCalls) and SuspendedRun.conversation (one run's cut in its middle); the answers are `InvalidToolArguments` to an edit, a bulk result with one
// `ToolCallAlreadyDecided` (someone else was first), and `InvalidResumeData` from the server to
// data the form accepted. Prints JSON: {shown, sent, activity, axe, pageErrors}.
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { chromium } from 'playwright-core';

const require = createRequire(import.meta.url);
const AXE_SOURCE = readFileSync(require.resolve('axe-core/axe.min.js'), 'utf8');
const [baseUrl, outputDir] = process.argv.slice(2);

const FEATURES = {
  approveInput: { inputFields: [{ name: 'agentId' }, { name: 'editedArgs' }] },
  toolCall: { fields: [{ name: 'expiresAt' }, { name: 'approvalsRequired' }, { name: 'approvals' }] },
  run: { fields: [{ name: 'conversation' }] },
  runFilter: { inputFields: [{ name: 'expiresBefore' }] },
  mutation: { fields: [{ name: 'decideToolCalls' }] },
  invalidToolArguments: { name: 'InvalidToolArguments' },
};
const refund = (id, approvals) => ({
  toolCallId: `call-${id}`, toolName: 'issue_refund', args: { order_id: 1042, amount: 600 }, requiresApproval: true,
  suspendPayload: null, resumeSchema: null, questionId: `q-${id}`, approvalMetadata: null, decision: null,
  expiresAt: '2026-12-01T23:00:00Z', approvalsRequired: 2, approvals,
});
const city = {
  toolCallId: 'call-w', toolName: 'ask_city', args: null, requiresApproval: false, suspendPayload: { question: 'Which city?' },
  resumeSchema: { title: 'City', type: 'object', properties: { name: { title: 'Name', type: 'string' } }, required: ['name'] },
  questionId: 'q-w', approvalMetadata: null, decision: null, expiresAt: null, approvalsRequired: 1, approvals: [],
};
const message = (index, kind, text, extra = {}) => ({
  index, kind, text, textBytes: new TextEncoder().encode(text).length, truncated: false, toolName: null, toolCallId: null, ...extra,
});
// a conversation the server cut to fit: its prompt's end, and three messages of the middle, left out
const CUT_CONVERSATION = {
  totalMessages: 6, totalBytes: 9000, truncated: true, cut: { position: 1, messages: 3, bytes: 2048 },
  messages: [
    message(0, 'USER_PROMPT', 'Please refund order 1042, it arrived', { truncated: true, textBytes: 6900 }),
    message(4, 'TEXT', 'Checking the order.'),
    message(5, 'TOOL_CALL', '{"order_id":1042,"amount":600}', { toolName: 'issue_refund', toolCallId: 'call-1' }),
  ],
};
const run = (runId, toolCalls, conversation = null) => ({
  runId, agentId: 'refund-agent', threadId: null, resourceId: null, parentRunId: null,
  createdAt: '2026-11-30T22:00:00Z', suspendedAt: '2026-11-30T22:00:00Z', lastError: null, toolCalls, conversation,
});
const RUNS = {
  suspendedRuns: {
    totalCount: 3,
    pageInfo: { hasNextPage: false, hasPreviousPage: false, startCursor: 'c1', endCursor: 'c3' },
    nodes: [
      run('run-1', [refund(1, [{ decidedBy: 'key:alice', decidedAt: '2026-11-30T22:01:00Z' }])], CUT_CONVERSATION),
      run('run-2', [refund(2, [])]),
      run('run-3', [city]),
    ],
  },
};

function answer(body) {
  const q = body.query;
  const input = body.variables && body.variables.input;
  if (q.includes('query InboxFeatures')) return FEATURES;
  if (q.includes('query InboxAgents')) return { agents: [{ id: 'refund-agent', name: 'refund-agent', description: null }] };
  if (q.includes('query InboxRuns')) return body.variables.agentId === 'refund-agent' ? RUNS : { suspendedRuns: { ...RUNS.suspendedRuns, totalCount: 0, nodes: [] } };
  if (q.includes('mutation InboxApprove')) {
    return { approveToolCall: { __typename: 'InvalidToolArguments', code: 'INVALID_TOOL_ARGUMENTS', message: 'invalid arguments', toolArgumentProblems: [{ path: ['amount'], message: 'Input should be less than or equal to 500' }] } };
  }
  if (q.includes('mutation InboxDecideMany')) {
    return {
      decideToolCalls: {
        results: [
          { __typename: 'RunOutcome', runId: input.decisions[0].runId, status: 'SUSPENDED', error: null },
          { __typename: 'ToolCallAlreadyDecided', code: 'TOOL_CALL_ALREADY_DECIDED', message: 'already decided', decision: { kind: 'DECLINED', decidedAt: '2026-11-30T22:05:00Z', decidedBy: 'key:bob', reason: 'duplicate' } },
        ],
      },
    };
  }
  if (q.includes('mutation InboxResume')) {
    return { resumeRun: { __typename: 'InvalidResumeData', code: 'INVALID_RESUME_DATA', message: 'resume data does not match', problems: [{ path: ['name'], message: 'No forecast for this city' }] } };
  }
  throw new Error(`unexpected document: ${q}`);
}

const userDataDir = mkdtempSync(join(tmpdir(), 'runsgate-chromium-'));
const context = await chromium.launchPersistentContext(userDataDir, {
  executablePath: process.env.CHROMIUM_BIN || '/usr/bin/chromium',
  headless: true,
  viewport: { width: 1280, height: 1000 },
  args: ['--headless', '--no-sandbox', '--disable-gpu', '--no-first-run', '--disable-background-networking', '--disable-component-update', '--disable-sync'],
});
const out = { sent: [], pageErrors: [], shown: {} };
try {
  const page = context.pages()[0] ?? (await context.newPage());
  page.setDefaultTimeout(60_000);
  page.on('pageerror', (error) => out.pageErrors.push(String(error)));
  await page.route('**/graphql', async (route) => {
    if (route.request().method() !== 'POST') return route.continue();
    const body = JSON.parse(route.request().postData());
    if (body.query.startsWith('mutation')) out.sent.push({ operation: /mutation (\w+)/.exec(body.query)[1], variables: body.variables });
    return route.fulfill({ contentType: 'application/json', body: JSON.stringify({ data: answer(body) }) });
  });
  await page.goto(`${baseUrl}/inbox`, { waitUntil: 'load' });
  const run1 = page.locator('article[aria-labelledby="run-run-1"]');
  await run1.waitFor();
  out.shown.deadline = await run1.locator('dt:text-is("Deadline") + dd').innerText();
  out.shown.approvals = await run1.locator('dt:text-is("Approvals") + dd').innerText();
  out.shown.expiringFilter = await page.getByLabel('Expiring within the hour').count();
  out.shown.conversation = await run1.locator('[data-conversation]').innerText();
  out.shown.conversations = await page.locator('[data-conversation]').count();

  // edit then approve: a syntax error is caught in the page, the server's problems are shown
  await run1.getByRole('button', { name: 'Edit arguments' }).focus();
  await page.keyboard.press('Enter');
  const editor = run1.getByLabel('Edited arguments (JSON)');
  await editor.focus();
  await page.keyboard.press('Control+A');
  await page.keyboard.insertText('{"order_id": 1042, "amount": ');
  out.shown.syntaxProblem = await run1.locator('.json-editor .field-error').innerText();
  await page.keyboard.press('Control+A');
  await page.keyboard.insertText('{"order_id": 1042, "amount": 700}');
  await run1.getByRole('button', { name: 'Approve with edited arguments' }).focus();
  await page.keyboard.press('Enter');
  await run1.getByText('Input should be less than or equal to 500').first().waitFor();
  out.shown.argumentsProblem = await run1.locator('.json-editor .field-error').innerText();

  // bulk: select both refunds with the keyboard, approve them; one was decided by someone else
  for (const runId of ['run-1', 'run-2']) {
    await page.locator(`article[aria-labelledby="run-${runId}"]`).getByRole('checkbox', { name: /bulk decision/ }).focus();
    await page.keyboard.press('Space');
  }
  out.shown.bulkHeading = await page.getByRole('heading', { name: /Bulk decision/ }).innerText();
  await page.screenshot({ path: join(outputDir, 'inbox-answers.png'), fullPage: true });
  await page.evaluate(AXE_SOURCE);
  out.axe = await page.evaluate(async () => (await window.axe.run(document, { resultTypes: ['violations'] })).violations.map((v) => ({ id: v.id, impact: v.impact, nodes: v.nodes.map((n) => n.target.join(' ')) })));
  await page.getByRole('button', { name: 'Approve selected' }).focus();
  await page.keyboard.press('Enter');
  // one entry for the bulk action, an item of it per call
  await page.locator('[role="log"] li', { hasText: /^issue_refund \(call call-2: [^)]+\) on run run-2: / }).waitFor();

  // resume: data the form accepts, refused by the server: the problem is shown under its field
  const run3 = page.locator('article[aria-labelledby="run-run-3"]');
  await run3.getByLabel(/Name/).focus();
  await page.keyboard.type('Atlantis');
  await page.keyboard.press('Enter');
  await run3.getByText('No forecast for this city').waitFor();
  out.shown.resumeProblem = await run3.locator('.error-detail').innerText();
  out.shown.resumeProblemField = await run3.locator('.error-detail').evaluate((el) => el.closest('.form-group').querySelector('input').id);
  out.activity = await page.locator('[role="log"] li').allInnerTexts();
  process.stdout.write(JSON.stringify(out) + '\n');
} catch (error) {
  process.stderr.write(`${error.stack || error}\n${JSON.stringify(out)}\n`);
  process.exitCode = 1;
} finally {
  await context.close();
  rmSync(userDataDir, { recursive: true, force: true });
}
