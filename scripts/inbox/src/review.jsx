// The inbox as the reviewers' queue's page (docs/inbox.md "The review queue"): the queue's filters,
// its items grouped into runs as `suspendedRuns` lists them, and review claims (who is looking, and
// since when). A review claim is advice, not a lock: Approve stays on a card someone else claimed.
import React from 'react';
import * as docs from './documents.js';
import { plain } from './exact.js';
import { callSummary } from './values.jsx';

const SOON_SECONDS = 3600;

/** `?view=agents`: one listing per agent even where the server has the queue. */
export const AGENTS_VIEW = new URLSearchParams(window.location.search).get('view') === 'agents';

/** The page's filters as a `ReviewQueueFilter`, or null for none. Tools are typed comma-separated. */
export function queueFilter(filters) {
  const filter = {};
  if (filters.agentId) filter.agentIds = [filters.agentId];
  const tools = (filters.toolNames || '')
    .split(',')
    .map((name) => name.trim())
    .filter(Boolean);
  if (tools.length) filter.toolNames = tools;
  if (filters.threadId) filter.threadId = filters.threadId;
  if (filters.resourceId) filter.resourceId = filters.resourceId;
  if (filters.claimedByMe) filter.claimedByMe = true;
  if (filters.unclaimed) filter.unclaimed = true;
  if (filters.escalated) filter.escalated = true;
  const before = [filters.expiresBefore ? new Date(filters.expiresBefore).getTime() : null, filters.expiringSoon ? Date.now() + SOON_SECONDS * 1000 : null];
  const earliest = Math.min(...before.filter((t) => t !== null && !Number.isNaN(t)));
  if (Number.isFinite(earliest)) filter.expiresBefore = new Date(earliest).toISOString();
  return Object.keys(filter).length ? filter : null;
}

/** A `reviewQueue` connection as the listing reads a `suspendedRuns` one: its items grouped into
 * runs in the queue's order (a run's questions follow one another), each run holding its decided
 * calls and the calls the queue lists, each carrying its `reviewClaim`, `escalated` and
 * `waitedSeconds` (`queued`: listed by the queue). */
export function queueConnection(queue) {
  const runs = new Map();
  for (const item of queue.nodes) {
    let run = runs.get(item.runId);
    if (!run) {
      run = { ...item.run, agentId: item.agentId, toolCalls: item.run.toolCalls.filter((call) => call.decision) };
      runs.set(item.runId, run);
    }
    const calls = item.run.toolCalls.filter((call) => !call.decision && call.toolCallId === item.toolCallId);
    const call = calls.find((c) => c.questionId === item.questionId) || calls[0];
    // a whole number of seconds (`60.0`) is read as its JSON text (exact.js): a double here, to compare
    if (call) run.toolCalls.push({ ...call, reviewClaim: item.reviewClaim, escalated: item.escalated, waitedSeconds: plain(item.waitedSeconds), queued: true });
  }
  return { totalCount: queue.totalCount, pageInfo: queue.pageInfo, nodes: [...runs.values()] };
}

const clock = (iso) => `${new Date(iso).toISOString().slice(11, 16)} UTC`;

/** How long a question has waited, for a person: `40 s`, `12 min`, `3 h 5 min`. */
export function waited(seconds) {
  if (seconds < 60) return `${Math.round(seconds)} s`;
  const minutes = Math.floor(seconds / 60);
  return minutes < 60 ? `${minutes} min` : `${Math.floor(minutes / 60)} h ${minutes % 60} min`;
}

/** "Being reviewed by bob since 09:12 UTC" (or "by you"), for a call the queue lists with a claim. */
export function ClaimStatus({ call }) {
  const claim = call.reviewClaim;
  if (!claim) return null;
  return (
    <p className="review-claim">
      Being reviewed by {claim.byMe ? 'you' : claim.by} since <time dateTime={claim.since}>{clock(claim.since)}</time>
      {claim.byMe && (
        <>
          {' '}
          (until <time dateTime={claim.until}>{clock(claim.until)}</time>)
        </>
      )}
    </p>
  );
}

/** Claim (nobody's looking), Release (the caller's claim), or nothing (another's claim: Approve
 * stays, the status says who). */
export function ClaimButton({ call, act, busy }) {
  const claim = call.reviewClaim;
  if (claim && !claim.byMe) return null;
  const kind = claim ? 'release' : 'claim';
  return (
    <button type="button" className="claim" disabled={busy} onClick={() => act(kind, call)}>
      {claim ? 'Release' : 'Claim'}
    </button>
  );
}

/** Send `claimReview` or `releaseReview` naming the card's question; resolves to a sentence for
 * the activity log and the card, and whether it was recorded. */
export async function reviewAction(request, token, kind, run, call) {
  const input = { agentId: run.agentId, runId: run.runId, toolCallId: call.toolCallId, questionId: call.questionId };
  const data = await request(token, kind === 'claim' ? docs.CLAIM_REVIEW : docs.RELEASE_REVIEW, { input });
  const result = Object.values(data)[0];
  const what = `${kind === 'claim' ? 'Review claim' : 'Release'} of ${callSummary(call)} on run ${run.runId}`;
  if (result.__typename === 'ReviewClaimed') {
    const claim = result.reviewClaim;
    return { ok: true, text: claim ? `${what}: being reviewed by you until ${clock(claim.until)}.` : `${what}: released.` };
  }
  if (result.__typename === 'ReviewAlreadyClaimed') {
    return { ok: false, text: `${what}: not recorded, already being reviewed by ${result.held.by} since ${clock(result.held.since)}.` };
  }
  return { ok: false, text: `${what}: not recorded, ${result.code}: ${result.message}` };
}
