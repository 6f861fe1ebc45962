// A graphql-ws client subscribed on instance A receives the events of a run that is started and
// approved through instance B (two runsgate processes on one MongoDB database).
// Env: RUNSGATE_A, RUNSGATE_B (base URLs). Run by tests/subscriptions/test_graphql_ws.py.
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { test } from 'node:test';

import { createClient } from 'graphql-ws';
import WebSocket from 'ws';

import { AGENT, approve, startRefundRun, wsUrl } from './_runsgate.mjs';

const A = process.env.RUNSGATE_A;
const B = process.env.RUNSGATE_B;

const SUBSCRIPTION = `
  subscription Events($agentId: ID!, $filter: RunEventFilter) {
    suspendedRunEvents(agentId: $agentId, filter: $filter) {
      id type runId resourceId threadId at by data
    }
  }`;

const WAIT_MS = 30_000;
/** Liveness bound: how long to wait for an expected event before failing (not a speed check). */

/** Subscribe and collect events; `until(predicate)` resolves once a collected event matches. */
function collect(client, variables) {
  const events = [];
  const waiters = [];
  let failure = null;
  const notify = () => {
    for (const waiter of [...waiters]) {
      const found = events.find(waiter.predicate);
      if (found || failure) {
        waiters.splice(waiters.indexOf(waiter), 1);
        clearTimeout(waiter.timer);
        failure ? waiter.reject(failure) : waiter.resolve(found);
      }
    }
  };
  const dispose = client.subscribe(
    { query: SUBSCRIPTION, variables },
    {
      next: (result) => {
        if (result.errors) failure = new Error(`subscription errors: ${JSON.stringify(result.errors)}`);
        else events.push(result.data.suspendedRunEvents);
        notify();
      },
      error: (error) => {
        failure = error instanceof Error ? error : new Error(`subscription failed: ${JSON.stringify(error)}`);
        notify();
      },
      complete: () => {},
    },
  );
  const until = (predicate, ms = WAIT_MS) =>
    new Promise((resolve, reject) => {
      const waiter = { predicate, resolve, reject };
      waiter.timer = setTimeout(() => {
        waiters.splice(waiters.indexOf(waiter), 1);
        resolve(null);
      }, ms);
      waiters.push(waiter);
      notify();
    });
  return { events, until, dispose };
}

test('events of a run started and approved on instance B reach a subscriber on instance A, in order', async () => {
  const resourceId = `res-${randomUUID()}`;
  const client = createClient({ url: wsUrl(A), webSocketImpl: WebSocket, lazy: false, retryAttempts: 0 });
  const stream = collect(client, { agentId: AGENT, filter: { resourceId } });
  try {
    // The stream starts when the server has registered the subscription, which the protocol does
    // not acknowledge: start probe runs (same resource) on B until one of their events arrives.
    const probes = new Set();
    let ready = null;
    for (let attempt = 0; attempt < 20 && !ready; attempt += 1) {
      const probe = await startRefundRun(B, { resourceId, threadId: 'probe' });
      probes.add(probe.runId);
      ready = await stream.until((e) => probes.has(e.runId), 3_000);
    }
    assert.ok(ready, 'no event of the probe runs reached the subscriber on instance A');

    const started = await startRefundRun(B, { resourceId, threadId: 'real' });
    const runId = started.runId;
    const [call] = started.run.toolCalls;
    assert.equal(call.toolName, 'issue_refund');
    await stream.until((e) => e.runId === runId && e.type === 'suspended');
    const outcome = await approve(B, runId, call.toolCallId);
    assert.equal(outcome.__typename, 'RunOutcome');
    assert.equal(outcome.status, 'COMPLETED');

    const completed = await stream.until((e) => e.runId === runId && e.type === 'completed');
    assert.ok(completed, `no completed event for run ${runId}; received ${JSON.stringify(stream.events)}`);

    const ofRun = stream.events.filter((e) => e.runId === runId);
    assert.deepEqual(
      ofRun.map((e) => e.type),
      ['started', 'suspended', 'decision', 'resumed', 'completed'],
    );
    assert.ok(ofRun.every((e) => e.resourceId === resourceId && e.threadId === 'real'));
    const ids = ofRun.map((e) => e.id);
    assert.deepEqual([...ids].sort(), ids, 'event ids are in creation order');
    const decision = ofRun[2];
    assert.equal(decision.data.kind, 'approved');
    assert.equal(decision.data.toolCallId, call.toolCallId);
    assert.equal(decision.by, 'anonymous');
    assert.deepEqual(ofRun[1].data.toolCallIds, [call.toolCallId]);
    // only this resource's runs were streamed (the filter), and never twice
    assert.ok(stream.events.every((e) => e.resourceId === resourceId));
    assert.equal(new Set(stream.events.map((e) => e.id)).size, stream.events.length);
  } finally {
    stream.dispose();
    await client.dispose();
  }
});
