// The progress of runs after a decision: each decided run the page follows through `runUpdates`
// (docs/inbox.md "After a decision"), from "Recorded, continuing…" to its outcome.
import React, { useCallback, useEffect, useReducer, useRef, useState } from 'react';
import * as docs from './documents.js';
import { AuthRequired, FORBIDDEN_CLOSE, progressClient, request } from './api.js';
import { roundedNote } from './exact.js';

/** Progress streams open at once; more decided runs wait for one to end (a socket carries at most
 * RUNSGATE_MAX_WS_OPERATIONS, 20 by default, operations). */
export const MAX_STREAMS = 10;
/** Progress cards kept; the oldest finished ones go first. */
const MAX_CARDS = 30;

/** `value` as shown: a string as is, else indented JSON, each number as the server wrote it (exact.js). */
const json = (value) => (typeof value === 'string' ? value : JSON.stringify(value, null, 2));

/** A JSON value as shown, with a note when this browser may show some of its numbers rounded. */
function Json({ value, className }) {
  const note = roundedNote(value);
  return (
    <>
      <pre className={className}>{json(value)}</pre>
      {note && <p className="hint">{note}</p>}
    </>
  );
}
const keyOf = (agentId, runId) => `${agentId}\u0000${runId}`;
const domId = (...parts) => parts.join('-').replace(/[^A-Za-z0-9_-]/g, '_');

/** The outcome a RunUpdate or a re-read run reports, or null. */
function outcomeOf(update) {
  if (update.kind === 'COMPLETED') return { status: 'COMPLETED', output: update.output, truncated: update.truncated };
  if (update.kind === 'FAILED') return { status: 'FAILED', error: update.error };
  if (update.kind === 'SUSPENDED') {
    const calls = ((update.run && update.run.toolCalls) || []).filter((call) => !call.decision);
    return { status: 'SUSPENDED', calls };
  }
  return null;
}

/** What RUN_NOW's answer says of the run: its outcome, or that it still continues. */
export function outcomeFromRead(data) {
  const events = (data && data.runEvents) || [];
  const last = [...events].reverse().find((event) => ['resumed', 'suspended', 'completed', 'failed'].includes(event.type));
  if (last && last.type === 'completed') return { status: 'COMPLETED', output: last.data && last.data.output };
  if (last && last.type === 'failed') return { status: 'FAILED', error: last.data && last.data.error };
  const run = data && data.suspendedRun;
  if (!run) return { status: 'UNKNOWN' };
  if (run.status === 'RESUMING' || (last && last.type === 'resumed')) return { status: 'RESUMING' };
  if (run.status === 'FAILED') return { status: 'FAILED', error: run.lastError ? `${run.lastError.type}: ${run.lastError.message}` : null };
  const calls = run.toolCalls.filter((call) => !call.decision);
  // every call decided: its continuation is queued, not yet claimed
  return calls.length ? { status: 'SUSPENDED', calls } : { status: 'RESUMING' };
}

function apply(card, update) {
  const items = [...card.items];
  const last = items[items.length - 1];
  switch (update.kind) {
    case 'RESUMED':
      if (card.continuations > 0) items.push({ type: 'note', text: 'The run continued again: its new calls were approved by a rule.' });
      return { ...card, items, continuations: card.continuations + 1 };
    case 'TEXT':
      if (last && last.type === 'text') items[items.length - 1] = { ...last, text: last.text + (update.text || '') };
      else items.push({ type: 'text', text: update.text || '' });
      return { ...card, items, deltas: card.deltas + 1 };
    case 'TOOL_CALL_STARTED':
      items.push({ type: 'tool', toolCallId: update.toolCallId, toolName: update.toolName, args: update.args, ended: false });
      return { ...card, items };
    case 'TOOL_CALL_DECLINED':
      // its tool never ran: never shown as started
      items.push({ type: 'declined', toolCallId: update.toolCallId, toolName: update.toolName, reason: update.reason, decidedBy: update.decidedBy });
      return { ...card, items };
    case 'TOOL_CALL_ENDED': {
      const at = items.map((item) => item.type === 'tool' && item.toolCallId === update.toolCallId && !item.ended).lastIndexOf(true);
      const ended = { type: 'tool', toolCallId: update.toolCallId, toolName: update.toolName, ended: true, result: update.result, error: update.error };
      if (at >= 0) items[at] = { ...items[at], ...ended, args: items[at].args };
      else items.push(ended);
      return { ...card, items };
    }
    default: {
      const outcome = outcomeOf(update);
      return outcome ? { ...card, items, outcome } : card;
    }
  }
}

function reducer(cards, action) {
  const at = cards.findIndex((card) => card.key === action.key);
  if (action.type === 'follow') {
    const card = { key: action.key, agentId: action.agentId, runId: action.runId, what: action.what, items: [], deltas: 0, updates: 0, continuations: 0, outcome: null, ended: null, reread: null };
    const rest = cards.filter((c) => c.key !== action.key);
    const kept = [card, ...rest];
    while (kept.length > MAX_CARDS) {
      const old = kept.map((c) => Boolean(c.outcome || c.ended)).lastIndexOf(true);
      if (old <= 0) break;
      kept.splice(old, 1);
    }
    return kept;
  }
  if (action.type === 'dismiss') return cards.filter((card) => card.key !== action.key);
  if (at < 0) return cards;
  const card = cards[at];
  let next = card;
  if (action.type === 'update') next = { ...apply(card, action.update), updates: card.updates + 1 };
  else if (action.type === 'ended') next = card.outcome ? card : { ...card, ended: action.reason, rereading: action.rereading };
  else if (action.type === 'reread') next = { ...card, reread: action.outcome, outcome: ['RESUMING', 'UNKNOWN', 'UNREADABLE'].includes(action.outcome.status) ? card.outcome : action.outcome };
  if (next === card) return cards;
  const copy = [...cards];
  copy[at] = next;
  return copy;
}

function OutcomeText({ outcome }) {
  if (outcome.status === 'COMPLETED') {
    return (
      <>
        <p className="outcome ok">Completed. Output:</p>
        <Json className="output" value={outcome.output === undefined || outcome.output === null ? '(none)' : outcome.output} />
        {outcome.truncated && <p className="hint">The output is too large to stream: read it in the run&apos;s events.</p>}
      </>
    );
  }
  if (outcome.status === 'FAILED') return <p className="outcome problem">Failed: {outcome.error || 'no error given'}. The run is kept for a retry.</p>;
  const names = outcome.calls.map((call) => call.toolName).join(', ');
  return (
    <p className="outcome waiting">
      Suspended again: {outcome.calls.length} call{outcome.calls.length === 1 ? '' : 's'} waiting{names ? ` (${names})` : ''}, listed above.
    </p>
  );
}

/** What reading the run again found, after its stream ended early. */
function rereadText(card) {
  const found = card.reread;
  if (!found) return card.rereading ? 'Reading the run again…' : '';
  if (found.status === 'RESUMING') return 'Read again: the run is still continuing; its outcome appears here when it ends.';
  if (found.status === 'UNKNOWN') return 'Read again: the run is not found.';
  if (found.status === 'UNREADABLE') return `The run could not be read again: ${found.message}`;
  return 'Read again:';
}

function state(card) {
  if (card.outcome) return { COMPLETED: 'Completed', FAILED: 'Failed', SUSPENDED: 'Suspended again' }[card.outcome.status];
  if (card.ended) return 'Live progress stopped';
  if (card.updates === 0) return 'Recorded, continuing…';
  return 'Continuing…';
}

function Card({ card, onDismiss }) {
  const id = domId('progress', card.agentId, card.runId);
  const streaming = !card.outcome && !card.ended;
  return (
    <div className="progress-run" role="group" aria-labelledby={`${id}-h`} data-progress={card.runId}>
      <h3 id={`${id}-h`}>
        Run <code>{card.runId}</code> <span className="count">({card.agentId})</span>
      </h3>
      <p className="hint">{card.what}</p>
      {/* a polite live region: each step is read out once the reviewer is idle; the streamed text
          is marked busy until the run's outcome, so it is read out whole */}
      <div className="steps" aria-live="polite" aria-relevant="additions text">
        <p className="state">{state(card)}</p>
        {card.items.length > 0 && (
          <ol>
            {card.items.map((item, i) => {
              if (item.type === 'text') {
                return (
                  <li key={i} className="text" aria-busy={streaming && i === card.items.length - 1 ? 'true' : 'false'}>
                    {item.text}
                  </li>
                );
              }
              if (item.type === 'declined') {
                return (
                  <li key={i} className="tool declined">
                    Tool call <code>{item.toolName}</code> {item.decidedBy === 'expiry' ? 'declined on expiry' : `declined by ${item.decidedBy || 'someone'}`}
                    {item.reason ? (
                      <>
                        <p className="label">Reason</p>
                        <p>{item.reason}</p>
                      </>
                    ) : (
                      <p className="hint">No reason given.</p>
                    )}
                  </li>
                );
              }
              if (item.type === 'note') {
                return (
                  <li key={i} className="hint">
                    {item.text}
                  </li>
                );
              }
              return (
                <li key={i} className="tool">
                  Tool call <code>{item.toolName}</code> {item.ended ? (item.error ? 'ended with an error' : 'ended') : 'started'}
                  {item.args !== undefined && item.args !== null && (
                    <>
                      <p className="label">Arguments</p>
                      <Json value={item.args} />
                    </>
                  )}
                  {item.ended && item.error && (
                    <>
                      <p className="label">What the model was told</p>
                      <p className="problem">{item.error}</p>
                    </>
                  )}
                  {item.ended && !item.error && item.result !== undefined && item.result !== null && (
                    <>
                      <p className="label">Result</p>
                      <Json value={item.result} />
                    </>
                  )}
                </li>
              );
            })}
          </ol>
        )}
        {card.ended && (
          <p className="problem">
            Live progress stopped ({card.ended}).{' '}
            {rereadText(card)}
          </p>
        )}
        {card.outcome && <OutcomeText outcome={card.outcome} />}
      </div>
      {!streaming && (
        <button type="button" onClick={() => onDismiss(card.key)}>
          Dismiss
        </button>
      )}
    </div>
  );
}

/** The page's progress cards and the streams behind them. `follow(agentId, runId, what)` starts
 * following a decided run; `sawEvent(agentId, event)` reads a run again whose stream ended before
 * its outcome, when the agent's live events report it suspended, completed or failed. `waiting`
 * lists those runs read again and still continuing, `[{key, agentId, runId, after}]` (`after`: the
 * id of the last event read), for a page that does not follow each agent's events to watch them. */
export function useProgress(token, onAuth) {
  const [cards, dispatch] = useReducer(reducer, []);
  const streams = useRef({ client: null, active: new Map(), queue: [], waiting: new Set() });
  const [waiting, setWaiting] = useState([]);
  const unwait = useCallback((key) => setWaiting((before) => (before.some((w) => w.key === key) ? before.filter((w) => w.key !== key) : before)), []);

  const reread = useCallback(
    (agentId, runId) => {
      const key = keyOf(agentId, runId);
      request(token, docs.RUN_NOW, { agentId, runId })
        .then((data) => {
          const outcome = outcomeFromRead(data);
          if (outcome.status !== 'RESUMING') {
            streams.current.waiting.delete(key);
            unwait(key);
          } else if (streams.current.waiting.has(key)) {
            const events = data.runEvents || [];
            const after = events.length ? events[events.length - 1].id : null;
            setWaiting((before) => [...before.filter((w) => w.key !== key), { key, agentId, runId, after }]);
          }
          dispatch({ type: 'reread', key, outcome });
        })
        .catch((e) => {
          if (e instanceof AuthRequired) onAuth(e);
          else dispatch({ type: 'reread', key, outcome: { status: 'UNREADABLE', message: e.message } });
        });
    },
    [token, onAuth, unwait],
  );

  const start = useCallback(
    function start() {
      const s = streams.current;
      while (s.active.size < MAX_STREAMS && s.queue.length) {
        const { agentId, runId } = s.queue.shift();
        const key = keyOf(agentId, runId);
        if (s.active.has(key)) continue;
        if (!s.client) {
          s.client = progressClient(token, {
            onClosed: (event) => {
              if (event && event.code === FORBIDDEN_CLOSE) onAuth(new AuthRequired('the live connection was refused (an expired or revoked token?)', Boolean(token)));
            },
          });
        }
        let outcome = false;
        let over = false;
        const end = (reason) => {
          if (over) return;
          over = true;
          if (s.active.get(key) === stop) s.active.delete(key);
          if (!outcome) {
            dispatch({ type: 'ended', key, reason, rereading: true });
            s.waiting.add(key);
            reread(agentId, runId);
          }
          start();
        };
        const stop = s.client.subscribe(
          { query: docs.RUN_UPDATES, variables: { agentId, runId } },
          {
            next: (result) => {
              if (result.errors && result.errors.length) {
                const error = result.errors[0];
                const code = error.extensions && error.extensions.code;
                end(code ? `${code}: ${error.message}` : error.message);
                return;
              }
              const update = result.data && result.data.runUpdates;
              if (!update) return;
              if (outcomeOf(update)) outcome = true;
              dispatch({ type: 'update', key, update });
            },
            error: (error) => {
              const reason = error && error.code ? `the connection closed, ${error.code}${error.reason ? `: ${error.reason}` : ''}` : (error && error.message) || 'the connection closed';
              end(reason);
            },
            complete: () => end('the stream ended before the outcome'),
          },
        );
        s.active.set(key, stop);
      }
    },
    [token, onAuth, reread],
  );

  const follow = useCallback(
    (agentId, runId, what) => {
      const key = keyOf(agentId, runId);
      const s = streams.current;
      if (s.active.has(key) || s.queue.some((job) => keyOf(job.agentId, job.runId) === key)) return;
      s.waiting.delete(key);
      unwait(key);
      dispatch({ type: 'follow', key, agentId, runId, what });
      s.queue.push({ agentId, runId });
      start();
    },
    [start, unwait],
  );

  const sawEvent = useCallback(
    (agentId, event) => {
      const key = keyOf(agentId, event.runId);
      if (['suspended', 'completed', 'failed'].includes(event.type) && streams.current.waiting.has(key)) reread(agentId, event.runId);
    },
    [reread],
  );

  const dismiss = useCallback((key) => dispatch({ type: 'dismiss', key }), []);

  // a new credential: a new socket (the streams of the old one end with it)
  useEffect(() => {
    const s = streams.current;
    return () => {
      s.active.forEach((stop, key) => {
        stop();
        dispatch({ type: 'ended', key, reason: 'signed out', rereading: false });
      });
      s.active.clear();
      s.queue = [];
      s.waiting.clear();
      setWaiting([]);
      if (s.client) s.client.dispose();
      s.client = null;
    };
  }, [token]);

  return { cards, follow, sawEvent, dismiss, waiting };
}

/** The section of progress cards, newest first; nothing while no decided run is followed. */
export function Progress({ cards, onDismiss }) {
  if (cards.length === 0) return null;
  return (
    <section className="progress" aria-labelledby="progress-h">
      <h2 id="progress-h">Progress after decisions</h2>
      {cards.map((card) => (
        <Card key={card.key} card={card} onDismiss={onDismiss} />
      ))}
    </section>
  );
}
