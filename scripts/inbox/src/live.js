// The page's live updates (docs/inbox.md "Live updates"), on one WebSocket to /graphql: the
// reviewers' queue's own stream (`reviewQueueEvents`, with the listing's filter, resumed after a
// reconnection with `afterEventId`) where the server has it, else one `suspendedRunEvents` stream
// per agent shown. Each message reads the listing again and may add a line to the activity log;
// `own` holds the calls decided or claimed in this page, and the questions decided, whose messages
// are not logged again.
import { useEffect, useRef, useState } from 'react';
import * as docs from './documents.js';
import { AuthRequired, FORBIDDEN_CLOSE, liveClient, request } from './api.js';
import { callSummary, editSummary } from './values.jsx';

const shortId = (id) => (id.length > 12 ? `${id.slice(0, 10)}…` : id);

/** A `decision` event's data for a person: `issue_refund (call …) approved, edited amount`. */
export function decisionText(data) {
  const id = data.toolCallId ? ` (call ${shortId(data.toolCallId)})` : '';
  const edited = data.editedArgs ? `, arguments edited (${editSummary(data.originalArgs, data.editedArgs) || 'unchanged'})` : '';
  const reason = data.reason ? `, reason ${JSON.stringify(data.reason)}` : '';
  return `${data.toolName || 'a call'}${id} ${String(data.kind || 'decided').toLowerCase()}${edited}${reason}`;
}

/** Whether a decision on `runId`'s call `toolCallId` asking `questionId` was made in this page
 * (`own`): on that call, or on the question it showed, which a supervisor's decision forwarded
 * to its sub-run answers there too (one question, two places: the same questionId). */
export function ownEvent(own, runId, toolCallId, questionId) {
  return own.current.has(`${runId}\u0000${toolCallId}`) || Boolean(questionId && own.current.has(`question\u0000${questionId}`));
}

/** The close handler both streams share: the live status, and a refused credential. */
function closed(token, setLive, onAuth) {
  return (event) => {
    setLive('reconnecting');
    if (event && event.code === FORBIDDEN_CLOSE) onAuth(new AuthRequired('the live connection was refused (an expired or revoked token?)', Boolean(token)));
  };
}

/** One socket, one `suspendedRunEvents` subscription per agent of `agents` (RUNSGATE_MAX_WS_OPERATIONS
 * bounds them: filter by agent when there are more agents than that); nothing while `agents` is
 * empty. `bump(agentIds)` reads those agents' listings again: all of them after each
 * (re)connection, for what happened meanwhile. */
export function useAgentEvents({ agents, token, log, own, sawEvent, bump, setLive, onAuth }) {
  useEffect(() => {
    if (agents.length === 0) return undefined;
    const client = liveClient(token, {
      onConnected: () => {
        setLive('live');
        bump(agents.map((a) => a.id)); // what happened while not connected
      },
      onClosed: closed(token, setLive, onAuth),
    });
    const stops = agents.map((agent) =>
      client.subscribe(
        { query: docs.RUN_EVENTS, variables: { agentId: agent.id } },
        {
          next: ({ data }) => {
            const event = data && data.suspendedRunEvents;
            if (!event) return;
            if (event.type === 'suspended') log(`New suspended run ${event.runId} (${agent.name || agent.id}).`);
            else if (event.type === 'decision') {
              const d = event.data || {};
              if (!ownEvent(own, event.runId, d.toolCallId, d.questionId)) log(`Decision on run ${event.runId} by ${event.by || 'someone'}: ${decisionText(d)}.`);
            } else if (event.type === 'reviewClaimed' || event.type === 'reviewReleased') {
              const d = event.data || {};
              claimLine(own, log, event.type, event.runId, d.toolCallId, d.toolName, event.by);
            } else if (event.type === 'completed' || event.type === 'failed') log(`Run ${event.runId} ${event.type}.`);
            sawEvent(agent.id, event);
            bump([agent.id]);
          },
          error: (error) => log(`Live updates for ${agent.id} stopped: ${(error && error.message) || (error && error.reason) || 'closed'}`, 'problem'),
          complete: () => {},
        },
      ),
    );
    return () => {
      stops.forEach((stop) => stop());
      client.dispose();
    };
  }, [agents, token, log, own, sawEvent, bump, setLive, onAuth]);
}

/** A review claim taken or released, unless this page's own (logged by its action: its message only once). */
function claimLine(own, log, cause, runId, toolCallId, toolName, by) {
  const mine = `review\u0000${runId}\u0000${toolCallId}`;
  if (own.current.has(mine)) own.current.delete(mine);
  else log(`${toolName || 'A call'} on run ${runId}: ${cause === 'reviewClaimed' ? 'being reviewed by' : 'released by'} ${by || 'someone'}.`);
}

/** The activity line of one `reviewQueueEvents` message, if it has one: a question entered, a
 * decision by someone else (`decided`: its event's data, read from the run's events), an approval
 * of several, a review claim, an expiry, an escalation. `agentName(id)` names an agent. */
export function queueLine(message, agentName, decided) {
  const { cause, change, runId, toolName, by } = message;
  const call = `${toolName} (call ${shortId(message.toolCallId)})`;
  const where = `on run ${runId}`;
  if (cause === 'suspended' && change === 'ENTERED') {
    const args = message.item && message.item.toolCall ? message.item.toolCall.args : null;
    return `New question ${where} (${agentName(message.agentId)}): ${callSummary({ toolName, toolCallId: message.toolCallId, args })}.`;
  }
  if (cause === 'decision') return `Decision ${where} by ${by || 'someone'}: ${decided ? decisionText(decided) : `${call} decided`}.`;
  // CHANGED in a queue that was told of the question, ENTERED in one that was not (a subscription
  // started after it was asked): either way another approval is needed
  if (cause === 'approval' && change !== 'LEFT') return `${call} ${where}: approved by ${by || 'someone'}, more approvals needed.`;
  if (cause === 'expired' && change === 'LEFT') return `${call} ${where}: its deadline passed.`;
  if (cause === 'escalated' && change !== 'LEFT') return `${call} ${where}: escalated.`;
  return null;
}

/** The reviewers' queue kept current through `reviewQueueEvents` while `enabled`: one socket for the
 * page's credential, one subscription with the listing's `filter` (JSON of a `ReviewQueueFilter`,
 * or 'null'), sent again after a reconnection with the id of the last message received as
 * `afterEventId` (graphql-ws sends a subscription's payload again on each connection: its
 * `afterEventId` reads the last id then). Each message calls `bump()` and may log a line. A
 * stream the server ends (`SUBSCRIPTION_OVERFLOW`, `SHUTTING_DOWN`, ...) is logged and
 * subscribed again, after its last message, at the next connection. Besides, one
 * `suspendedRunEvents` subscription of each run in `waiting` (useProgress), whose continuation's
 * end the queue does not tell: its events go to `sawEvent`. */
export function useQueueEvents({ enabled, filter, token, agentName, log, own, waiting, sawEvent, bump, setLive, onAuth }) {
  const [client, setClient] = useState(null);
  const connected = useRef(() => {});
  const names = useRef(agentName);
  names.current = agentName;

  useEffect(() => {
    if (!enabled) return undefined;
    const made = liveClient(token, {
      onConnected: () => {
        setLive('live');
        connected.current();
      },
      onClosed: closed(token, setLive, onAuth),
    });
    setClient(made);
    return () => {
      setClient(null);
      made.dispose();
    };
  }, [enabled, token, setLive, onAuth]);

  useEffect(() => {
    if (!client) return undefined;
    const last = { id: null, ended: false, stop: null };
    const variables = { filter: JSON.parse(filter) };
    Object.defineProperty(variables, 'afterEventId', { enumerable: true, get: () => last.id });
    const payload = { query: docs.REVIEW_QUEUE_EVENTS, variables };
    const end = (why) => {
      if (last.ended) return;
      last.ended = true;
      setLive('stopped'); // the header says so too, until the stream is subscribed again
      log(`Live updates of the queue stopped (${why}); they resume after the last one received at the next connection.`, 'problem');
    };
    const subscribe = () => {
      last.ended = false;
      setLive((now) => (now === 'stopped' ? 'live' : now));
      last.stop = client.subscribe(payload, {
        next: (result) => {
          if (result.errors && result.errors.length) {
            const error = result.errors[0];
            const code = error.extensions && error.extensions.code;
            end(code ? `${code}: ${error.message}` : error.message);
            return;
          }
          const message = result.data && result.data.reviewQueueEvents;
          if (!message) return;
          last.id = message.id;
          bump();
          if (message.cause === 'reviewClaimed' || message.cause === 'reviewReleased') {
            claimLine(own, log, message.cause, message.runId, message.toolCallId, message.toolName, message.by);
          } else if (message.cause === 'decision' || message.cause === 'approval') {
            if (ownEvent(own, message.runId, message.toolCallId, message.questionId)) return;
            if (message.cause === 'approval') {
              const line = queueLine(message, names.current);
              if (line) log(line); // never an empty line
            } else {
              // the decision's kind, edit and reason are in its run event, not in the message
              request(token, docs.RUN_NOW, { agentId: message.agentId, runId: message.runId })
                .then((data) => {
                  const event = ((data && data.runEvents) || []).find((e) => e.id === message.eventId);
                  log(queueLine(message, names.current, event ? event.data : null));
                })
                .catch(() => log(queueLine(message, names.current)));
            }
          } else {
            const line = queueLine(message, names.current);
            if (line) log(line);
          }
        },
        error: (error) => end((error && error.message) || (error && error.reason) || 'closed'),
        complete: () => end('the stream ended'),
      });
    };
    connected.current = () => {
      if (last.id === null) bump(); // nothing to resume after: what happened before the stream started
      if (last.ended) subscribe();
    };
    subscribe();
    return () => {
      connected.current = () => {};
      last.ended = true; // its `complete` is not an ending to report
      last.stop();
    };
  }, [client, filter, token, log, own, bump, setLive]);

  useEffect(() => {
    if (!client || waiting.length === 0) return undefined;
    const stops = waiting.map(({ agentId, runId, after }) =>
      client.subscribe(
        { query: docs.RUN_OUTCOME_EVENTS, variables: { agentId, runId, afterEventId: after } },
        {
          next: ({ data }) => {
            const event = data && data.suspendedRunEvents;
            if (event) sawEvent(agentId, event);
          },
          error: () => {},
          complete: () => {},
        },
      ),
    );
    return () => stops.forEach((stop) => stop());
  }, [client, waiting, sawEvent]);
}
