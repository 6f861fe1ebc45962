// graphql-transport-ws close codes, checked with a raw WebSocket (the `ws` package).
// Env: RUNSGATE_URL (base URL of a server whose connection_init timeout is short).
// Run by tests/subscriptions/test_graphql_ws.py.
import assert from 'node:assert/strict';
import { test } from 'node:test';

import WebSocket from 'ws';

import { AGENT, wsUrl } from './_runsgate.mjs';

const URL = wsUrl(process.env.RUNSGATE_URL);
const SUBSCRIBE = {
  query: `subscription { suspendedRunEvents(agentId: "${AGENT}") { id type runId } }`,
};

/** Open a graphql-transport-ws socket; resolves once open, with helpers to talk and wait. */
async function open() {
  const socket = new WebSocket(URL, 'graphql-transport-ws');
  const messages = [];
  const closed = new Promise((resolve) => socket.on('close', (code, reason) => resolve({ code, reason: `${reason}` })));
  socket.on('message', (data) => messages.push(JSON.parse(`${data}`)));
  await new Promise((resolve, reject) => {
    socket.once('open', resolve);
    socket.once('error', reject);
  });
  assert.equal(socket.protocol, 'graphql-transport-ws');
  const send = (message) => socket.send(JSON.stringify(message));
  const acked = async () => {
    while (!messages.some((m) => m.type === 'connection_ack')) {
      const outcome = await Promise.race([closed, new Promise((r) => setTimeout(() => r(null), 20))]);
      if (outcome) throw new Error(`closed before connection_ack: ${JSON.stringify(outcome)}`);
    }
  };
  return { socket, send, closed, acked, messages };
}

test('no connection_init in time: 4408', async () => {
  const ws = await open();
  const { code, reason } = await ws.closed;
  assert.equal(code, 4408);
  assert.match(reason, /initialisation timeout/i);
});

test('a second connection_init: 4429', async () => {
  const ws = await open();
  ws.send({ type: 'connection_init' });
  await ws.acked();
  ws.send({ type: 'connection_init' });
  const { code } = await ws.closed;
  assert.equal(code, 4429);
});

test('subscribe before connection_ack: 4401', async () => {
  const ws = await open();
  ws.send({ id: '1', type: 'subscribe', payload: SUBSCRIBE });
  const { code } = await ws.closed;
  assert.equal(code, 4401);
  assert.ok(!ws.messages.some((m) => m.type === 'next'));
});

test('an operation id already in use: 4409', async () => {
  const ws = await open();
  ws.send({ type: 'connection_init' });
  await ws.acked();
  ws.send({ id: 'same', type: 'subscribe', payload: SUBSCRIBE });
  ws.send({ id: 'same', type: 'subscribe', payload: SUBSCRIBE });
  const { code, reason } = await ws.closed;
  assert.equal(code, 4409);
  assert.match(reason, /same/);
});
