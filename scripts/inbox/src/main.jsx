// runsgate's reviewer inbox: the suspended runs the caller may see (the reviewers' queue where the
// server has it, review.jsx), and the decisions on them, through runsgate's public GraphQL API only
// (documents.js). docs/inbox.md describes it.
import React, { useCallback, useEffect, useMemo, useRef, useState } from 'react';
import { createRoot } from 'react-dom/client';
import Form, { getDefaultRegistry } from '@rjsf/core';
import * as docs from './documents.js';
import { EXACT, formValue, isRaw, parseJSON, roundedNote, typedNumber, unsafeNumbers, unsendable } from './exact.js';
import { cfworkerValidator, schemaProblems } from './validator.js';
import { AuthRequired, GraphQLRequestError, request, storedToken, storeToken } from './api.js';
import { useAgentEvents, useQueueEvents } from './live.js';
import { Progress, useProgress } from './progress.jsx';
import { LINKED, Settled, Shortcuts, actionOffset, flushFocus, forgetLinkInAddress, nextCardKey, placeRuns, requestFocus, runHeight, showLinked, useShortcuts } from './queue.jsx';
import { JsonValue, argsSummary, callSummary, editSummary, questionOf } from './values.jsx';
import { AGENTS_VIEW, ClaimButton, ClaimStatus, queueConnection, queueFilter, reviewAction, waited } from './review.jsx';

/** Runs per page: `?pageSize=N` (1 to 100; the server's page-size cap still applies), else 10. */
const PAGE_SIZE = (() => {
  const asked = Number.parseInt(new URLSearchParams(window.location.search).get('pageSize') || '', 10);
  return asked >= 1 && asked <= 100 ? asked : 10;
})();
const SOON_SECONDS = 3600;
/** How long after a decision the focus still follows the decided run to its next question (ms). */
const FOLLOW_MS = 60_000;
// the server's cap on a decline's reason (UTF-8 bytes, the page's data-max-reason-bytes): the
// reason fields take no more characters than that (a character of several bytes may still pass it)
const MAX_REASON = (() => {
  const root = document.getElementById('inbox');
  const n = Number(root && root.dataset.maxReasonBytes);
  return Number.isInteger(n) && n > 0 ? n : undefined;
})();
const EMPTY_FILTERS = {
  agentId: '',
  threadId: '',
  resourceId: '',
  fromDate: '',
  toDate: '',
  expiringSoon: false,
  // the review queue's only
  toolNames: '',
  expiresBefore: '',
  claimedByMe: false,
  unclaimed: false,
  escalated: false,
};

/** `value` as indented JSON, each number as the server wrote it (exact.js). */
const json = (value) => JSON.stringify(value, null, 2);
/** Whether a run's calls are decided on it: a supervisor's sub-run (`parentRunId`) is decided only
 * through its supervisor's run (the API answers DECIDE_THROUGH_SUPERVISOR), so the page offers no
 * action on it. */
const decidedHere = (run) => !run.parentRunId;
/** The calls of `run` that Approve and Decline (one by one or in bulk) apply to. */
const approvalsWaiting = (run) => (decidedHere(run) ? run.toolCalls.filter((call) => !call.decision && call.requiresApproval) : []);
const domId = (...parts) => parts.join('-').replace(/[^A-Za-z0-9_-]/g, '_');
const when = (iso) => (iso ? new Date(iso).toISOString().replace('T', ' ').replace(/\.\d+Z$/, ' UTC') : '');

/** What the page does after a decision refused because another decided first: it reads the runs again. */
const SHOWN_NOW = "The run is shown as it is now, with the call's new question if it asks one.";

/** One sentence for a `DecisionResult`. */
export function describe(result, what) {
  if (!result) return `${what}: no answer`;
  switch (result.__typename) {
    case 'RunOutcome':
      if (result.status === 'RESUMING') return `${what}: recorded, continuing… (its progress is shown under "Progress after decisions").`;
      return `${what}: recorded; the run is now ${result.status}${result.error ? ` (${result.error})` : ''}.`;
    case 'ToolCallAlreadyDecided': {
      const d = result.decision;
      return `${what}: not recorded, the call was already ${d.kind.toLowerCase()} by ${d.decidedBy || 'someone'} at ${when(d.decidedAt)}. ${SHOWN_NOW}`;
    }
    case 'QuestionNotPending':
      return `${what}: not recorded: the question it answered is no longer pending, someone else decided it first. ${SHOWN_NOW}`;
    case 'InvalidResumeData':
      return `${what}: not recorded, the data does not fit the form (${result.problems.length} problem${result.problems.length === 1 ? '' : 's'}, shown next to the fields).`;
    case 'InvalidToolArguments':
      return `${what}: not recorded, the edited arguments are invalid: ${result.toolArgumentProblems.map((p) => `${p.path.join('.') || '(root)'}: ${p.message}`).join('; ')}`;
    default:
      return `${what}: not recorded, ${result.code}: ${result.message}`;
  }
}

/** `[{path, message}]` (InvalidResumeData's problems) -> an rjsf ErrorSchema. */
export function problemsToErrorSchema(problems) {
  const schema = {};
  for (const { path, message } of problems) {
    let node = schema;
    for (const part of path) node = node[part] = node[part] || {};
    (node.__errors = node.__errors || []).push(message);
  }
  return schema;
}

function filterVariables(filters, features) {
  const filter = {};
  if (filters.threadId) filter.threadId = filters.threadId;
  if (filters.resourceId) filter.resourceId = filters.resourceId;
  if (filters.fromDate) filter.fromDate = new Date(filters.fromDate).toISOString();
  if (filters.toDate) filter.toDate = new Date(filters.toDate).toISOString();
  if (filters.expiringSoon && features.expiresBefore) filter.expiresBefore = new Date(Date.now() + SOON_SECONDS * 1000).toISOString();
  return Object.keys(filter).length ? filter : null;
}

function JsonBlock({ label, value }) {
  if (value === null || value === undefined) return null;
  const note = roundedNote(value);
  return (
    <>
      <dt>{label}</dt>
      <dd>
        <JsonValue value={value} />
        {note && <p className="hint">{note}</p>}
      </dd>
    </>
  );
}

/** A JSON text field: checked for JSON syntax as typed, and against `schema` (the tool's `argsSchema`)
 * when there is one; nothing is submitted while it is invalid. Its numbers are sent as typed
 * (exact.js); a browser that cannot do so refuses one it may round. */
function JsonEditor({ id, label, initial, submitText, onSubmit, busy, serverProblem, schema }) {
  const [text, setText] = useState(initial);
  const [problem, setProblem] = useState(() => {
    try {
      return unsendable(JSON.parse(initial));
    } catch {
      return '';
    }
  });
  const check = (value) => {
    try {
      const parsed = parseJSON(value);
      if (parsed === null || typeof parsed !== 'object' || Array.isArray(parsed) || isRaw(parsed)) return [null, 'Must be a JSON object.'];
      const rounded = unsendable(parsed);
      if (rounded) return [null, rounded];
      const problems = schema ? schemaProblems(schema, parsed) : [];
      if (problems.length) {
        return [null, `Does not match the tool's schema: ${problems.map((p) => `${p.path.join('.') || '(root)'}: ${p.message}`).join('; ')}`];
      }
      return [parsed, ''];
    } catch (error) {
      return [null, `Not valid JSON: ${error.message}`];
    }
  };
  const shown = problem || serverProblem || '';
  return (
    <form
      className="json-editor"
      noValidate
      onSubmit={(event) => {
        event.preventDefault();
        const [value, error] = check(text);
        setProblem(error);
        if (!error) onSubmit(value);
      }}
    >
      <label htmlFor={id}>{label}</label>
      <textarea
        id={id}
        rows={Math.min(12, text.split('\n').length + 1)}
        value={text}
        spellCheck={false}
        aria-invalid={shown ? 'true' : 'false'}
        aria-describedby={`${id}-problem`}
        onChange={(event) => {
          setText(event.target.value);
          setProblem(check(event.target.value)[1]);
        }}
      />
      <p id={`${id}-problem`} className="field-error">
        {shown}
      </p>
      <button type="submit" disabled={busy}>
        {submitText}
      </button>
    </form>
  );
}

/** What a shortcut (`a`, `d`) asks before it decides: Enter decides, Escape cancels. */
function Confirm({ call, base, kind, busy, onDone, act }) {
  const [reason, setReason] = useState('');
  const first = useRef(null);
  useEffect(() => {
    if (first.current) first.current.focus();
  }, []);
  const approve = kind === 'approve';
  return (
    <div className="confirm" role="alertdialog" aria-labelledby={`${base}-confirm-h`}>
      <form
        onKeyDown={(event) => {
          if (event.key === 'Escape') {
            event.preventDefault();
            onDone(true);
          }
        }}
        onSubmit={(event) => {
          event.preventDefault();
          onDone(false);
          act(kind, call, approve ? {} : { reason: reason || null });
        }}
      >
        <p id={`${base}-confirm-h`}>
          {approve ? 'Approve' : 'Decline'} {callSummary(call)}?
        </p>
        {!approve && (
          <>
            <label htmlFor={`${base}-confirm-reason`}>Reason (the model reads it)</label>
            <input id={`${base}-confirm-reason`} ref={first} type="text" maxLength={MAX_REASON} value={reason} onChange={(event) => setReason(event.target.value)} />
          </>
        )}
        <button type="submit" ref={approve ? first : undefined} className={approve ? 'approve' : 'decline'} disabled={busy}>
          {approve ? 'Approve now' : 'Decline now'}
        </button>
        <button type="button" onClick={() => onDone(true)}>
          Cancel
        </button>
      </form>
    </div>
  );
}

function ApprovalActions({ call, base, features, act, busy, selected, onSelect }) {
  const [editing, setEditing] = useState(false);
  const [reason, setReason] = useState('');
  const [argsProblem, setArgsProblem] = useState('');
  const [confirming, setConfirming] = useState(null);
  const root = useRef(null);
  const approveButton = useRef(null);
  useEffect(() => {
    const card = root.current && root.current.closest('[data-card]');
    if (!card) return undefined;
    const ask = (event) => setConfirming(event.detail);
    card.addEventListener('inbox-ask', ask);
    return () => card.removeEventListener('inbox-ask', ask);
  }, []);
  return (
    <div className="actions" ref={root}>
      {features.bulk && (
        <p className="select">
          <input type="checkbox" id={`${base}-select`} checked={selected} onChange={(event) => onSelect(event.target.checked)} />
          <label htmlFor={`${base}-select`}>Select {call.toolName} for a bulk decision</label>
        </p>
      )}
      <div className="buttons">
        <button type="button" className="approve" data-first-action="" ref={approveButton} disabled={busy} onClick={() => act('approve', call)}>
          Approve
        </button>
        {call.queued && <ClaimButton call={call} act={act} busy={busy} />}
        {features.editedArgs && (
          <button type="button" aria-expanded={editing} aria-controls={`${base}-edit`} onClick={() => setEditing(!editing)}>
            Edit arguments
          </button>
        )}
      </div>
      {confirming && (
        <Confirm
          call={call}
          base={base}
          kind={confirming}
          busy={busy}
          act={act}
          onDone={(cancelled) => {
            setConfirming(null);
            if (cancelled && approveButton.current) approveButton.current.focus();
          }}
        />
      )}
      {features.editedArgs && editing && (
        <div id={`${base}-edit`}>
          <JsonEditor
            id={`${base}-args`}
            label="Edited arguments (JSON)"
            initial={json(call.args ?? {})}
            submitText="Approve with edited arguments"
            busy={busy}
            serverProblem={argsProblem}
            schema={call.argsSchema || null}
            onSubmit={async (editedArgs) => {
              const result = await act('approve', call, { editedArgs });
              setArgsProblem(result && result.__typename === 'InvalidToolArguments' ? describe(result, 'Approval') : '');
            }}
          />
        </div>
      )}
      <form
        className="decline"
        onSubmit={(event) => {
          event.preventDefault();
          act('decline', call, { reason: reason || null });
        }}
      >
        <label htmlFor={`${base}-reason`}>Reason for declining (the model reads it)</label>
        <input id={`${base}-reason`} type="text" maxLength={MAX_REASON} value={reason} onChange={(event) => setReason(event.target.value)} />
        <button type="submit" className="decline" disabled={busy}>
          Decline
        </button>
      </form>
    </div>
  );
}

const { StringField: RjsfStringField, NumberField: RjsfNumberField } = getDefaultRegistry().fields;

/** rjsf's StringField, telling `onTyped` (from ExactNumberField, through NumberField) the text typed. */
function TypedStringField(props) {
  const { onTyped, onChange } = props;
  const change = useCallback(
    (value, ...rest) => {
      if (onTyped) onTyped(value);
      onChange(value, ...rest);
    },
    [onTyped, onChange],
  );
  return <RjsfStringField {...props} onChange={change} />;
}

/** rjsf's NumberField, keeping a typed integer that a double cannot hold as a BigInt (exact.js
 * `typedNumber`), shown as its digits. */
function ExactNumberField(props) {
  const { formData, onChange } = props;
  const typed = useRef(undefined);
  const onTyped = useCallback((text) => {
    typed.current = text;
  }, []);
  const change = useCallback((value, ...rest) => onChange(typedNumber(typed.current, value), ...rest), [onChange]);
  return <RjsfNumberField {...props} formData={typeof formData === 'bigint' ? String(formData) : formData} onChange={change} onTyped={onTyped} />;
}

const RESUME_FIELDS = { StringField: TypedStringField, NumberField: ExactNumberField };

/** rjsf's `customValidate` in a browser that cannot send large integers exactly: each one (a
 * double it may have rounded) is an error under its field, so nothing is sent. */
function roundedProblems(formData, errors) {
  for (const { path, value } of unsafeNumbers(formData)) {
    let node = errors;
    for (const part of path) node = node && node[part];
    if (node && typeof node.addError === 'function') {
      node.addError(`${value} is beyond ±9007199254740991, which this browser cannot send exactly (it lacks JSON.parse source text access)`);
    }
  }
  return errors;
}

function ResumeForm({ call, base, act, busy }) {
  const [formData, setFormData] = useState(undefined);
  const [extraErrors, setExtraErrors] = useState(undefined);
  // rjsf takes plain values: a large integer of the schema (a default, an enum) as a BigInt
  const schema = useMemo(() => formValue(call.resumeSchema), [call.resumeSchema]);
  const submit = async (resumeData) => {
    const result = await act('resume', call, { resumeData });
    setExtraErrors(result && result.__typename === 'InvalidResumeData' ? problemsToErrorSchema(result.problems) : undefined);
  };
  if (!call.resumeSchema) {
    return <JsonEditor id={`${base}-data`} label="Resume data (JSON)" initial="{}" submitText="Resume run" busy={busy} onSubmit={submit} />;
  }
  return (
    <div className="resume">
      <Form
        schema={schema}
        validator={cfworkerValidator}
        fields={RESUME_FIELDS}
        customValidate={EXACT ? undefined : roundedProblems}
        idPrefix={`${base}-data`}
        formData={formData}
        onChange={(event) => setFormData(event.formData)}
        extraErrors={extraErrors}
        showErrorList={false}
        noHtml5Validate
        focusOnFirstError
        onError={() => {}} // shown next to the fields; rjsf would also log them to the console
        disabled={busy}
        uiSchema={{ 'ui:submitButtonOptions': { submitText: 'Resume run' } }}
        onSubmit={(event) => submit(event.formData)}
      />
    </div>
  );
}

const SPEAKERS = {
  SYSTEM_PROMPT: 'System',
  USER_PROMPT: 'User',
  TEXT: 'Assistant',
  THINKING: 'Assistant, thinking',
  TOOL_CALL: 'Tool call',
  TOOL_RESULT: 'Tool result',
  RETRY: 'Retry feedback',
};
const size = (bytes) => (bytes < 1024 ? `${bytes} bytes` : `${(bytes / 1024).toFixed(1)} KiB`);

/** One message of a conversation: who speaks, the tool it names, its text (arguments as JSON for a
 * tool call), and where its text was cut; `waiting` is the note on a pending call's tool call, or ''. */
function Message({ message, waiting }) {
  const tool = message.toolName ? ` ${message.toolName}` : '';
  const code = message.kind === 'TOOL_CALL' || message.kind === 'TOOL_RESULT';
  return (
    <li className={`message ${message.kind.toLowerCase().replace('_', '-')}`}>
      <p className="speaker">
        {SPEAKERS[message.kind] || message.kind}
        {tool && <code>{tool}</code>}
        {waiting && <span className="waiting"> ({waiting})</span>}
      </p>
      {code ? <pre>{message.text}</pre> : <p className="text">{message.text}</p>}
      {message.truncated && <p className="cut-text">[… cut here: {size(message.textBytes)} in all]</p>}
    </li>
  );
}

/** The conversation that led to the run's pending calls (`SuspendedRun.conversation`), with the
 * place where messages were left out to fit its limit. */
function Conversation({ run, conversation }) {
  const id = domId('conversation', run.runId);
  const waiting = new Set(run.toolCalls.filter((call) => !call.decision).map((call) => call.toolCallId));
  const note = decidedHere(run) ? 'waiting for a decision, below' : "waiting, decided on the supervisor's run";
  const { cut } = conversation;
  const encoder = new TextEncoder();
  const shownBytes = conversation.messages.reduce((sum, message) => sum + encoder.encode(message.text).length, 0);
  const items = [];
  conversation.messages.forEach((message, i) => {
    if (cut && i === cut.position) {
      items.push(
        <li key="cut" className="cut">
          [… {cut.messages} message{cut.messages === 1 ? '' : 's'} ({size(cut.bytes)}) left out here …]
        </li>,
      );
    }
    items.push(<Message key={message.index} message={message} waiting={message.kind === 'TOOL_CALL' && waiting.has(message.toolCallId) ? note : ''} />);
  });
  return (
    <details className="conversation" open data-conversation="">
      <summary id={`${id}-h`}>
        Conversation: {conversation.totalMessages} message{conversation.totalMessages === 1 ? '' : 's'}
        {conversation.truncated ? `, ${size(shownBytes)} of ${size(conversation.totalBytes)} shown` : ''}
      </summary>
      <ol aria-labelledby={`${id}-h`} tabIndex={0}>
        {items}
      </ol>
    </details>
  );
}

function Approvals({ call }) {
  return (
    <>
      <dt>Approvals</dt>
      <dd>
        {call.approvals.length} of {call.approvalsRequired}
        {call.approvals.length > 0 && (
          <ul>
            {call.approvals.map((a) => (
              <li key={`${a.decidedBy}-${a.decidedAt}`}>
                {a.decidedBy || 'anonymous'} at <time dateTime={a.decidedAt}>{when(a.decidedAt)}</time>
              </li>
            ))}
          </ul>
        )}
      </dd>
    </>
  );
}

/** Where the result line of an action on `call` is kept: its question's, so that the call's next
 * question (a supervisor's call asking again) starts without it. */
const noteKey = (run, call) => `${run.runId}\u0000${call.questionId || call.toolCallId}`;

function ToolCall({ run, call, features, act, busy, selected, onSelect, message, mayDecide }) {
  const base = domId('call', run.runId, call.toolCallId || call.questionId);
  // none on a sub-run (its calls are decided on the supervisor's run), nor for a read-only key
  let actions = null;
  if (mayDecide && decidedHere(run)) {
    actions = call.requiresApproval ? (
      <ApprovalActions call={call} base={base} features={features} act={act} busy={busy} selected={selected} onSelect={onSelect} />
    ) : (
      <ResumeForm call={call} base={base} act={act} busy={busy} />
    );
  }
  const question = call.requiresApproval ? null : questionOf(call);
  return (
    <div className="call" role="group" aria-labelledby={`${base}-h`} data-card={actions ? call.questionId : undefined}>
      <h4 id={`${base}-h`}>
        {call.toolName || 'tool call'} <span className="kind">{call.requiresApproval ? 'waits for approval' : 'waits for data'}</span>
      </h4>
      <dl>
        <JsonBlock label="Arguments" value={call.args} />
        {question ? (
          <>
            <dt>Question</dt>
            <dd className="question">{question}</dd>
            {question !== call.suspendPayload && (
              <>
                <dt>Suspend payload</dt>
                <dd>
                  <details className="payload">
                    <summary>The payload, as JSON</summary>
                    <JsonValue value={call.suspendPayload} />
                  </details>
                </dd>
              </>
            )}
          </>
        ) : (
          <JsonBlock label="Suspend payload" value={call.suspendPayload} />
        )}
        <JsonBlock label="For the reviewer" value={call.approvalMetadata} />
        {features.expiresAt && (
          <>
            <dt>Deadline</dt>
            <dd>{call.expiresAt ? <time dateTime={call.expiresAt}>{when(call.expiresAt)}</time> : 'none'}</dd>
          </>
        )}
        {features.approvals && call.requiresApproval && (call.approvalsRequired > 1 || call.approvals.length > 0) && <Approvals call={call} />}
        {call.queued && (
          <>
            <dt>Waiting for</dt>
            <dd>
              {waited(call.waitedSeconds)}
              {call.escalated ? ', escalated' : ''}
            </dd>
          </>
        )}
      </dl>
      {call.queued && <ClaimStatus call={call} />}
      {actions}
      {call.queued && actions && !call.requiresApproval && (
        <p className="claim-row">
          <ClaimButton call={call} act={act} busy={busy} />
        </p>
      )}
      {actions && (
        <p className="result" role="status">
          {message}
        </p>
      )}
    </div>
  );
}

function Run({ run, features, act, busy, selection, setSelected, messages, mayDecide }) {
  const heading = domId('run', run.runId);
  const pending = run.toolCalls.filter((call) => !call.decision);
  const decided = run.toolCalls.filter((call) => call.decision);
  return (
    <article className="run" aria-labelledby={heading}>
      <h3 id={heading}>
        Run <code>{run.runId}</code>
      </h3>
      <dl className="meta">
        <dt>Agent</dt>
        <dd>{run.agentId}</dd>
        {run.threadId && (
          <>
            <dt>Thread</dt>
            <dd>{run.threadId}</dd>
          </>
        )}
        {run.resourceId && (
          <>
            <dt>Resource</dt>
            <dd>{run.resourceId}</dd>
          </>
        )}
        <dt>Created</dt>
        <dd>
          <time dateTime={run.createdAt}>{when(run.createdAt)}</time>
        </dd>
        {run.lastError && (
          <>
            <dt>Last error</dt>
            <dd>
              {run.lastError.type}: {run.lastError.message}
            </dd>
          </>
        )}
      </dl>
      {run.conversation && <Conversation run={run} conversation={run.conversation} />}
      {!decidedHere(run) && (
        <p className="sub-run">
          A sub-run of the supervisor&apos;s run{' '}
          <a href={`#${domId('run', run.parentRunId)}`}>
            <code>{run.parentRunId}</code>
          </a>
          : its calls are decided there, on the supervisor&apos;s call that stands for them.
        </p>
      )}
      {pending.map((call) => {
        const key = `${run.runId}\u0000${call.toolCallId}`;
        return (
          <ToolCall
            key={call.questionId}
            run={run}
            call={call}
            features={features}
            act={(kind, c, extra) => act(kind, run, c, extra)}
            busy={busy}
            selected={selection.has(key)}
            onSelect={(on) => setSelected(key, on)}
            message={messages[noteKey(run, call)] || ''}
            mayDecide={mayDecide}
          />
        );
      })}
      {decided.length > 0 && (
        <ul className="decided" aria-label="Calls already decided in this run">
          {decided.map((call) => (
            <li key={call.questionId}>
              {callSummary(call)}: {call.decision.kind.toLowerCase()} by {call.decision.decidedBy || 'someone'} at{' '}
              <time dateTime={call.decision.decidedAt}>{when(call.decision.decidedAt)}</time>
              {call.decision.reason ? ` (${call.decision.reason})` : ''}
            </li>
          ))}
        </ul>
      )}
    </article>
  );
}

function BulkBar({ agent, count, busy, decide }) {
  const [reason, setReason] = useState('');
  const id = domId('bulk', agent.id);
  return (
    <form
      className="bulk"
      aria-labelledby={`${id}-h`}
      onSubmit={(event) => {
        event.preventDefault();
        decide(event.nativeEvent.submitter && event.nativeEvent.submitter.value === 'DECLINED' ? 'DECLINED' : 'APPROVED', reason || null);
      }}
    >
      <h3 id={`${id}-h`}>
        Bulk decision on {agent.bulkName || agent.name || agent.id}: {count} selected
      </h3>
      <label htmlFor={`${id}-reason`}>Reason for declining the selected calls</label>
      <input id={`${id}-reason`} type="text" maxLength={MAX_REASON} value={reason} onChange={(event) => setReason(event.target.value)} />
      <button type="submit" name="kind" value="APPROVED" className="approve" disabled={busy || count === 0}>
        Approve selected
      </button>
      <button type="submit" name="kind" value="DECLINED" className="decline" disabled={busy || count === 0}>
        Decline selected
      </button>
    </form>
  );
}

/** "1 of 2 approvals given; waits for another approver" when `result` records an approval of
 * `call` that is one of several it needs (the call still waits, in the other reviewers' queues),
 * else null. */
function partialApproval(call, result) {
  const given = call.approvals ? call.approvals.length + 1 : 1;
  if (!(call.approvalsRequired > given) || result.__typename !== 'RunOutcome' || result.status !== 'SUSPENDED') return null;
  return `${given} of ${call.approvalsRequired} approvals given; waits for another approver`;
}

/** What an approval's (or other decision's) `result` says, after `what`: as `describe`, or that it
 * was one approval of several. */
function approvalText(result, what, call, approving) {
  const partial = approving && partialApproval(call, result);
  return partial ? `${what}: ${partial}.` : describe(result, what);
}

/** What the result of a recorded decision says in the decided card's place. */
function settledText(verb, call, runId, result, change) {
  const partial = verb.startsWith('Approved') && partialApproval(call, result);
  if (partial) return `${verb}: ${callSummary(call)} on run ${runId}: ${partial}.`;
  const status = result.status === 'RESUMING' ? 'recorded, continuing (its progress is under "Progress after decisions")' : `recorded; the run is now ${result.status}`;
  return `${verb}: ${callSummary(call)} on run ${runId}${change ? ` (${change})` : ''}: ${status}.`;
}

/** One listing: an agent's suspended runs (`agent`), or with `queue` the reviewers' queue across
 * agents (`agent` then names the listing), its items grouped into runs (review.jsx). */
/** One listing of run cards: an agent's suspended runs, or the reviewers' queue (`queue`). A key
 * that may not decide (`mayDecide` false) reads the cards without their decision controls. */
function AgentListing({ agent, queue = false, agentName, features, filters, token, refresh, log, onAuth, follow, ownDecision, linked = null, mayDecide = true }) {
  // the queue pages forward only (`first`, `after`): `back` holds the cursors of the pages before
  const [page, setPage] = useState(queue ? { first: PAGE_SIZE, after: null, back: [] } : { first: PAGE_SIZE });
  const [connection, setConnection] = useState(null);
  const [error, setError] = useState('');
  const [busy, setBusy] = useState(false);
  const [selection, setSelection] = useState(() => new Map());
  const [messages, setMessages] = useState({});
  // runs decided here, shown in their card's place (queue.jsx): runId -> {runId, questionId, height, text, ok, compact}
  const [slots, setSlots] = useState(() => new Map());
  // runs whose decision is on its way, as their card showed them: runId -> run. A read of the
  // listing may answer first without the run (a live message of the decision, or an approval of
  // several, which the server drops from the approver's own queue): the card keeps its place
  // until the answer settles it or the page reads the runs again.
  const deciding = useRef(new Map());
  const order = useRef([]);
  const query = useMemo(() => (queue ? docs.reviewQueueQuery(features) : docs.suspendedRunsQuery(features)), [queue, features]);
  const [reload, setReload] = useState(0);

  // one read at a time: what asks for another meanwhile (a live message, a decision) gets one
  // more once it is answered; a read for other filters, another page or credential replaces it
  const reading = useRef(null);
  useEffect(() => {
    const key = JSON.stringify([agent.id, queue, query, filters, page, token]);
    if (reading.current && reading.current.key === key) {
      reading.current.again = true;
      return;
    }
    const mine = { key, again: false };
    reading.current = mine;
    const current = () => reading.current === mine;
    const variables = queue
      ? { filter: queueFilter(filters), first: page.first, after: page.after }
      : { agentId: agent.id, filter: filterVariables(filters, features), ...page };
    request(token, query, variables)
      .then((data) => {
        if (!current()) return;
        const found = queue ? queueConnection(data.reviewQueue) : data.suspendedRuns;
        setConnection(found);
        setError('');
        // a selection stands for the question its card showed: it is dropped once that question is gone
        const open = new Set(found.nodes.flatMap((run) => run.toolCalls.filter((c) => !c.decision).map((c) => `${run.runId}\u0000${c.toolCallId}\u0000${c.questionId}`)));
        setSelection((before) => new Map([...before].filter(([key, item]) => open.has(`${key}\u0000${item.questionId}`))));
      })
      .catch((e) => {
        if (!current()) return;
        if (e instanceof AuthRequired) onAuth(e);
        else setError(e.message);
      })
      .finally(() => {
        if (!current()) return;
        reading.current = null;
        if (mine.again) setReload((n) => n + 1);
      });
  }, [agent.id, queue, query, filters, features, page, token, refresh, reload, onAuth]);

  useEffect(() => flushFocus()); // the focus a decision asked for, once its card's buttons are enabled again

  // the run the page's address names (an inbox link): shown and focused once the listing is read;
  // else read on its own and shown first, or a line saying why not (it no longer waits, or is not
  // for this key to decide), read again with the listing while it waits
  const [linkNote, setLinkNote] = useState('');
  // the linked run as read on its own (`suspendedRun`) while the listing's page lacks it: its card
  // is shown first, and focused once
  const [pinned, setPinned] = useState(null);
  const pinFocus = useRef(false);
  const slotsNow = useRef(slots);
  slotsNow.current = slots;
  const linkDone = useRef(false);
  const linkWaits = useRef(false);
  useEffect(() => {
    if (!linked || !connection || (linkDone.current && !linkWaits.current)) return;
    const first = !linkDone.current;
    linkDone.current = true;
    if (first && showLinked(domId('run', linked.runId))) return;
    if (!first && connection.nodes.some((run) => run.runId === linked.runId)) {
      linkWaits.current = false; // in the listing now: its card says the rest
      setLinkNote('');
      setPinned(null);
      return;
    }
    const named = `Run ${linked.runId}${linked.agentId ? ` (${agentName(linked.agentId)})` : ''}`;
    if (!linked.agentId) {
      setLinkNote(`${named}, which the link names, is not in this listing: it no longer waits for a decision, or not on this page.`);
      return;
    }
    request(token, docs.suspendedRunQuery(features), { agentId: linked.agentId, runId: linked.runId })
      .then((data) => {
        const run = data.suspendedRun;
        const waits = Boolean(run && run.toolCalls.some((c) => !c.decision));
        linkWaits.current = waits;
        if (waits && mayDecide && decidedHere(run)) {
          setLinkNote('');
          setPinned({ ...run, agentId: run.agentId || linked.agentId });
          if (first) pinFocus.current = true;
          return;
        }
        setPinned(null);
        // decided in this page: its card's place says so
        if (!waits && slotsNow.current.has(linked.runId)) return setLinkNote('');
        setLinkNote(
          waits
            ? `${named}, which the link names, still waits, but not for a decision you may make here (${decidedHere(run) ? 'this key may not decide' : "a sub-run's call is decided on its supervisor's run"}).`
            : `${named}, which the link names, no longer waits for a decision: it was decided, it ended, or no run of this agent has that id.`,
        );
      })
      .catch((e) => setLinkNote(`${named}, which the link names, could not be read: ${e.message}`));
  }, [linked, connection, token, agentName, features, mayDecide]);
  useEffect(() => {
    if (!pinned || !pinFocus.current) return;
    pinFocus.current = false;
    showLinked(domId('run', pinned.runId));
  }, [pinned]);

  // runs whose last waiting question was decided here: runId -> {questionId, at}. When the run
  // asks its next question (a supervisor's call showing its sub-run's next one, under the same
  // toolCallId), the focus goes to it, as to a run's other call still waiting
  const following = useRef(new Map());
  useEffect(() => {
    if (!connection) return;
    for (const run of pinned ? [pinned, ...connection.nodes] : connection.nodes) {
      const decided = following.current.get(run.runId);
      const asked = decided && run.toolCalls.find((c) => !c.decision && c.questionId !== decided.questionId);
      if (!asked) continue;
      following.current.delete(run.runId);
      if (Date.now() - decided.at < FOLLOW_MS) requestFocus(asked.questionId, decided.questionId, true);
    }
  }, [connection, pinned]);

  const settle = useCallback((entries) => setSlots((before) => new Map([...before, ...entries.map((slot) => [slot.runId, slot])])), []);
  const compact = useCallback(
    (runId) => setSlots((before) => (before.has(runId) ? new Map(before).set(runId, { ...before.get(runId), compact: true }) : before)),
    [],
  );

  const act = useCallback(
    async (kind, run, call, extra = {}) => {
      const key = noteKey(run, call);
      if (kind === 'claim' || kind === 'release') {
        ownDecision(run.runId, call.toolCallId, 'review');
        setBusy(true);
        try {
          const { ok, text } = await reviewAction(request, token, kind, run, call);
          log(text, ok ? 'ok' : 'problem');
          setMessages((m) => ({ ...m, [key]: text }));
        } catch (e) {
          if (e instanceof AuthRequired) onAuth(e);
          else log(`Review claim on run ${run.runId}: failed, ${e.message}`, 'problem');
        } finally {
          setBusy(false);
          setReload((n) => n + 1);
        }
        return null;
      }
      // the question the card shows: refused (QuestionNotPending) if someone else decided it since
      // (the run's own agent: a listing across agents, as the review queue's, needs no other change here)
      const ids = { agentId: run.agentId || agent.id, runId: run.runId, toolCallId: call.toolCallId, ...(features.questionIds ? { questionId: call.questionId } : {}) };
      let document;
      let input;
      let what;
      let verb;
      let change = '';
      if (kind === 'approve') {
        document = docs.approveMutation(features);
        input = extra.editedArgs ? { ...ids, editedArgs: extra.editedArgs } : ids;
        what = `${extra.editedArgs ? 'Approval with edited arguments' : 'Approval'} of ${call.toolName} on run ${run.runId}`;
        verb = extra.editedArgs ? 'Approved with edited arguments' : 'Approved';
        if (extra.editedArgs) change = editSummary(call.args, extra.editedArgs) || 'no argument changed';
      } else if (kind === 'decline') {
        document = docs.declineMutation(features);
        input = { ...ids, reason: extra.reason };
        what = `Decline of ${call.toolName} on run ${run.runId}`;
        verb = 'Declined';
        change = extra.reason ? `reason: ${JSON.stringify(extra.reason)}` : 'no reason given';
      } else {
        document = docs.resumeMutation(features);
        input = { ...ids, questionId: call.questionId, resumeData: extra.resumeData };
        what = `Resume of ${call.toolName} on run ${run.runId}`;
        verb = 'Answered';
        change = `answer: ${argsSummary(extra.resumeData)}`;
      }
      if (features.progress) input.waitFor = 'RECORDED'; // answer once recorded; the progress follows
      // the card's place and the next card, as they are before the page changes
      const height = runHeight(domId('run', run.runId));
      const offset = actionOffset(domId('run', run.runId), height);
      const last = run.toolCalls.filter((c) => !c.decision).length === 1;
      const next = nextCardKey(call.questionId);
      ownDecision(run.runId, call.toolCallId, '', call.questionId);
      deciding.current.set(run.runId, run);
      setBusy(true);
      let result = null;
      try {
        const data = await request(token, document, { input });
        result = Object.values(data)[0];
        const recorded = result.__typename === 'RunOutcome';
        const said = approvalText(result, what, call, kind === 'approve');
        const text = `${said} Call: ${callSummary(call)}${change ? `; ${change}` : ''}.`;
        log(text, recorded ? 'ok' : 'problem');
        if (recorded && last && height) {
          settle([{ runId: run.runId, questionId: call.questionId, height, offset, ok: true, text: settledText(verb, call, run.runId, result, change) }]);
          requestFocus(next, call.questionId);
        } else {
          setMessages((m) => ({ ...m, [key]: said }));
          // the run stays with its other calls: the focus goes to the first still waiting (the
          // pressed button goes with the question it answered), else to the next card
          const waiting = recorded && run.toolCalls.find((c) => !c.decision && c.toolCallId !== call.toolCallId);
          if (recorded) requestFocus(waiting ? waiting.questionId : next, call.questionId);
        }
        // the call may ask its next question (a supervisor's, its sub-run's next): the focus follows
        if (recorded && last) following.current.set(run.runId, { questionId: call.questionId, at: Date.now() });
        if (features.progress && recorded && result.status === 'RESUMING') follow(ids.agentId, run.runId, what);
      } catch (e) {
        if (e instanceof AuthRequired) onAuth(e);
        else {
          // a refused request (a reason over the server's cap, ...): the card stays, with the result under the call
          const said = `${what}: failed, ${e.message}${/[.!?]$/.test(e.message) ? '' : '.'}`;
          log(`${said} Call: ${callSummary(call)}.`, 'problem');
          setMessages((m) => ({ ...m, [key]: said }));
        }
      } finally {
        deciding.current.delete(run.runId);
        setBusy(false);
        if (!result || result.__typename !== 'InvalidResumeData') setReload((n) => n + 1);
      }
      return result;
    },
    [agent.id, features, token, log, onAuth, follow, settle, ownDecision],
  );

  const listed = connection ? connection.nodes : [];
  // the linked run read on its own, first, while the listing's page lacks it
  const runs = pinned && !listed.some((run) => run.runId === pinned.runId) ? [pinned, ...listed] : listed;
  // one decideToolCalls per agent of the selection (its input names one agent), each with one
  // entry in the activity log
  const decide = async (kind, reason) => {
    const selected = [...selection.values()];
    const heights = new Map(selected.map((item) => [item.runId, runHeight(domId('run', item.runId))]));
    const next = nextCardKey(null, new Set(selected.map((item) => item.questionId)));
    selected.forEach((item) => ownDecision(item.runId, item.toolCallId, '', item.questionId));
    for (const item of selected) {
      const run = runs.find((r) => r.runId === item.runId);
      if (run) deciding.current.set(item.runId, run);
    }
    const groups = new Map();
    for (const item of selected) groups.set(item.agentId, [...(groups.get(item.agentId) || []), item]);
    const name = kind === 'APPROVED' ? 'approval' : 'decline';
    const change = kind === 'DECLINED' ? (reason ? `reason: ${JSON.stringify(reason)}` : 'no reason given') : '';
    const verb = kind === 'APPROVED' ? 'Approved in bulk' : 'Declined in bulk';
    setBusy(true);
    try {
      for (const [agentId, items] of groups) {
        const decisions = items.map(({ runId, toolCallId, questionId }) => ({
          runId,
          toolCallId,
          ...(features.bulkQuestionIds ? { questionId } : {}),
          kind,
          reason: kind === 'DECLINED' ? reason : null,
        }));
        const input = { agentId, decisions, ...(features.progress ? { waitFor: 'RECORDED' } : {}) };
        const data = await request(token, docs.decideManyMutation(features), { input });
        const results = data.decideToolCalls.results;
        const recorded = results.filter((result) => result.__typename === 'RunOutcome').length;
        const refused = results.length - recorded;
        // one entry for the agent's bulk action, naming each call and its result
        log(
          `Bulk ${name} of ${items.length} call${items.length === 1 ? '' : 's'} on ${agentName(agentId)}: ${recorded} recorded${refused ? `, ${refused} not recorded` : ''}${change ? ` (${change})` : ''}.`,
          refused ? 'problem' : 'ok',
          results.map((result, i) => approvalText(result, `${callSummary(items[i].call)} on run ${items[i].runId}`, items[i].call, kind === 'APPROVED')),
        );
        settle(
          results.flatMap((result, i) => {
            const item = items[i];
            const run = runs.find((r) => r.runId === item.runId);
            const alone = run && run.toolCalls.filter((c) => !c.decision).length === 1;
            const height = heights.get(item.runId);
            if (result.__typename !== 'RunOutcome' || !alone || !height) return [];
            return [{ runId: item.runId, questionId: item.questionId, height, ok: true, text: settledText(verb, item.call, item.runId, result, change) }];
          }),
        );
        results.forEach((result, i) => {
          const what = `Bulk ${name} of ${items[i].toolName} on run ${items[i].runId}`;
          if (features.progress && result.__typename === 'RunOutcome' && result.status === 'RESUMING') follow(agentId, items[i].runId, what);
        });
      }
      setSelection(new Map());
      requestFocus(next);
    } catch (e) {
      if (e instanceof AuthRequired) onAuth(e);
      else log(`Bulk decision failed: ${e.message}`, 'problem');
    } finally {
      selected.forEach((item) => deciding.current.delete(item.runId));
      setBusy(false);
      setReload((n) => n + 1);
    }
  };

  const heading = queue ? 'review-queue' : domId('agent', agent.id);
  const setSelected = (key, on) =>
    setSelection((before) => {
      const next = new Map(before);
      if (on) {
        const [runId, toolCallId] = key.split('\u0000');
        const run = runs.find((r) => r.runId === runId);
        const call = run && run.toolCalls.find((c) => c.toolCallId === toolCallId);
        next.set(key, { runId, agentId: (run && run.agentId) || agent.id, toolCallId, questionId: call ? call.questionId : null, toolName: call ? call.toolName : 'call', call: call || { toolName: 'call', toolCallId } });
      } else next.delete(key);
      return next;
    });
  // each run in its place: a decided one keeps its card's place until it asks a new question
  const byId = new Map(runs.map((run) => [run.runId, run]));
  const shown = (id) => {
    const slot = slots.get(id);
    const run = byId.get(id) || deciding.current.get(id);
    if (slot && !(run && run.toolCalls.some((c) => !c.decision && c.questionId !== slot.questionId))) return { slot };
    return run ? { run } : null;
  };
  const kept = new Set([...slots.keys(), ...deciding.current.keys()]);
  order.current = placeRuns(order.current, runs.map((run) => run.runId), kept);
  const items = order.current.map((id) => [id, shown(id)]).filter(([, item]) => item);
  const turnPage = (next) => {
    setSlots(new Map());
    order.current = [];
    setPage(next);
  };
  return (
    <section className="agent" aria-labelledby={heading}>
      <h2 id={heading}>
        {agent.name || agent.id} <span className="count">{connection ? `${connection.totalCount} waiting` : 'loading…'}</span>
      </h2>
      {agent.description && <p className="description">{agent.description}</p>}
      {linkNote && (
        <p className="link-note" role="status">
          {linkNote}
        </p>
      )}
      {error && (
        <p className="problem" role="alert">
          {error}
        </p>
      )}
      {mayDecide && features.bulk && (runs.some((run) => approvalsWaiting(run).length > 0) || slots.size > 0) && (
        <BulkBar agent={agent} count={selection.size} busy={busy} decide={decide} />
      )}
      {items.map(([id, { run, slot }]) =>
        slot ? (
          <Settled key={id} slot={slot} onCompact={compact} />
        ) : (
          <Run key={id} run={run} features={features} act={act} busy={busy} selection={selection} setSelected={setSelected} messages={messages} mayDecide={mayDecide} />
        ),
      )}
      {connection && runs.length === 0 && [...slots.values()].every((slot) => slot.compact) && <p>{queue ? 'Nothing waits for you.' : 'No suspended runs.'}</p>}
      {queue && connection && (connection.pageInfo.hasNextPage || page.back.length > 0) && (
        <nav className="pager" aria-label="Pages of the review queue">
          <button type="button" disabled={page.back.length === 0} onClick={() => turnPage({ first: PAGE_SIZE, after: page.back[page.back.length - 1], back: page.back.slice(0, -1) })}>
            Earlier in the queue
          </button>
          <button type="button" disabled={!connection.pageInfo.hasNextPage} onClick={() => turnPage({ first: PAGE_SIZE, after: connection.pageInfo.endCursor, back: [...page.back, page.after] })}>
            Later in the queue
          </button>
        </nav>
      )}
      {!queue && connection && (connection.pageInfo.hasNextPage || connection.pageInfo.hasPreviousPage) && (
        <nav className="pager" aria-label={`Pages of ${agent.name || agent.id}`}>
          <button type="button" disabled={!connection.pageInfo.hasPreviousPage} onClick={() => turnPage({ last: PAGE_SIZE, before: connection.pageInfo.startCursor })}>
            Newer runs
          </button>
          <button type="button" disabled={!connection.pageInfo.hasNextPage} onClick={() => turnPage({ first: PAGE_SIZE, after: connection.pageInfo.endCursor })}>
            Older runs
          </button>
        </nav>
      )}
    </section>
  );
}


/** A checkbox of the filters. */
function Check({ name, label, draft, setDraft }) {
  return (
    <p className="check">
      <input type="checkbox" id={`filter-${name}`} checked={draft[name]} onChange={(event) => setDraft({ ...draft, [name]: event.target.checked })} />
      <label htmlFor={`filter-${name}`}>{label}</label>
    </p>
  );
}

/** The listing's filters: `SuspendedRunFilter`'s, or with `queue` the `ReviewQueueFilter`'s. */
function Filters({ agents, features, queue, filters, onApply }) {
  const [draft, setDraft] = useState(filters);
  const field = (name) => ({ id: `filter-${name}`, value: draft[name], onChange: (event) => setDraft({ ...draft, [name]: event.target.value }) });
  const check = { draft, setDraft };
  return (
    <form
      className="filters"
      aria-labelledby="filters-h"
      onSubmit={(event) => {
        event.preventDefault();
        onApply(draft);
      }}
    >
      <h2 id="filters-h">Filters</h2>
      <div className="fields">
        <p>
          <label htmlFor="filter-agentId">Agent</label>
          <select {...field('agentId')}>
            <option value="">All agents</option>
            {agents.map((agent) => (
              <option key={agent.id} value={agent.id}>
                {agent.name || agent.id}
              </option>
            ))}
          </select>
        </p>
        <p>
          <label htmlFor="filter-threadId">Thread</label>
          <input type="text" {...field('threadId')} />
        </p>
        <p>
          <label htmlFor="filter-resourceId">Resource</label>
          <input type="text" {...field('resourceId')} />
        </p>
        {queue ? (
          <>
            <p>
              <label htmlFor="filter-toolNames">Tools</label>
              <input type="text" {...field('toolNames')} aria-describedby="filter-toolNames-hint" />
              <span id="filter-toolNames-hint" className="hint">
                names, comma-separated
              </span>
            </p>
            <p>
              <label htmlFor="filter-expiresBefore">Expires before</label>
              <input type="datetime-local" {...field('expiresBefore')} />
            </p>
            <Check name="expiringSoon" label="Expiring within the hour" {...check} />
            <Check name="claimedByMe" label="Claimed by me" {...check} />
            <Check name="unclaimed" label="Unclaimed" {...check} />
            <Check name="escalated" label="Escalated" {...check} />
          </>
        ) : (
          <>
            <p>
              <label htmlFor="filter-fromDate">Created from</label>
              <input type="datetime-local" {...field('fromDate')} />
            </p>
            <p>
              <label htmlFor="filter-toDate">Created until</label>
              <input type="datetime-local" {...field('toDate')} />
            </p>
            {features.expiresBefore && <Check name="expiringSoon" label="Expiring within the hour" {...check} />}
          </>
        )}
      </div>
      <button type="submit">Apply filters</button>
      <button
        type="button"
        onClick={() => {
          setDraft(EMPTY_FILTERS);
          onApply(EMPTY_FILTERS);
          forgetLinkInAddress();
        }}
      >
        Clear
      </button>
    </form>
  );
}

const NO_AGENTS = [];

/** What names the queue's listing (AgentListing's `agent` with `queue`). */
const QUEUE_LISTING = {
  id: 'review-queue',
  name: 'Review queue',
  bulkName: 'the queue',
  description: 'The questions you may decide, across agents: the earliest deadline first, then the oldest; those without a deadline after them.',
};

function TokenForm({ message, onSubmit }) {
  const [value, setValue] = useState('');
  return (
    <main className="token">
      <h1>runsgate inbox</h1>
      <form
        aria-labelledby="token-h"
        onSubmit={(event) => {
          event.preventDefault();
          if (value.trim()) onSubmit(value.trim());
        }}
      >
        <h2 id="token-h">Sign in</h2>
        <p role="alert" className="problem">
          {message}
        </p>
        <label htmlFor="token">API key or token</label>
        <input id="token" type="password" autoComplete="off" value={value} onChange={(event) => setValue(event.target.value)} />
        <button type="submit">Open the inbox</button>
        <p className="hint">It is kept for this tab only (sessionStorage) and sent with every request to this server.</p>
      </form>
    </main>
  );
}

function App() {
  const [token, setToken] = useState(storedToken);
  const [phase, setPhase] = useState('loading');
  const [message, setMessage] = useState('');
  const [features, setFeatures] = useState(null);
  const [agents, setAgents] = useState([]);
  // an inbox link lists its run's agent
  const [filters, setFilters] = useState(() => (LINKED && LINKED.agentId ? { ...EMPTY_FILTERS, agentId: LINKED.agentId } : EMPTY_FILTERS));
  // the scope a key lacks to decide (a read-only key: it has no review queue either), or ''
  const [readOnly, setReadOnly] = useState('');
  // the queue view of a read-only key says it has no queue instead of a listing
  const noQueue = AGENTS_VIEW ? '' : readOnly;
  const [activity, setActivity] = useState([]);
  const [live, setLive] = useState('connecting');
  const [refresh, setRefresh] = useState({});
  // what the page says of an inbox link naming an agent the server does not have, or ''
  const [unknownLink, setUnknownLink] = useState('');
  const counter = useRef(0);

  const log = useCallback((text, kind = 'info', items = null) => {
    counter.current += 1;
    const entry = { id: counter.current, text, kind, items, at: new Date().toISOString() };
    setActivity((before) => [entry, ...before].slice(0, 50));
  }, []);

  const onAuth = useCallback((error) => {
    storeToken('');
    setMessage(error.tokenGiven ? `The server refused this key or token: ${error.message}` : 'This server needs an API key or token.');
    setPhase('token');
  }, []);
  const progress = useProgress(token, onAuth);
  useShortcuts();
  // the calls decided in this page, and the questions they showed: their live `decision` events
  // are not logged again, nor those of a supervisor's decision forwarded to its sub-run (the same
  // questionId, on the sub-run's call: live.js `ownEvent`)
  const own = useRef(new Set());
  const ownDecision = useCallback((runId, toolCallId, what = '', questionId = null) => {
    own.current.add(`${what ? `${what}\u0000` : ''}${runId}\u0000${toolCallId}`);
    if (questionId) own.current.add(`question\u0000${questionId}`);
  }, []);
  const { sawEvent } = progress;

  useEffect(() => {
    let current = true;
    (async () => {
      try {
        let found = null;
        try {
          found = await request(token, docs.FEATURES);
        } catch (e) {
          if (e instanceof AuthRequired) throw e; // introspection off: no optional feature
        }
        const list = await request(token, docs.AGENTS);
        const known = docs.features(found);
        let lacking = '';
        if (known.reviewQueue) {
          // a key that may not decide has no queue: the queue view says so instead of a listing,
          // the agents view shows the runs without decision controls
          try {
            await request(token, docs.reviewQueueQuery(known), { filter: null, first: 1, after: null });
          } catch (e) {
            if (!(e instanceof GraphQLRequestError) || e.code !== 'FORBIDDEN') throw e;
            lacking = e.requiredScope || 'runs:decide';
          }
        }
        if (!current) return;
        if (LINKED && LINKED.agentId && !list.agents.some((a) => a.id === LINKED.agentId)) {
          // a link to an agent the server does not have: every agent is listed, and the address
          // no longer names the link (a reload or a Clear keeps the listing)
          setFilters((before) => (before.agentId === LINKED.agentId ? { ...before, agentId: '' } : before));
          setUnknownLink(
            `Run ${LINKED.runId}, which the link names, is not shown: no agent is registered with id '${LINKED.agentId}' (known agents: ${
              list.agents.map((a) => a.id).join(', ') || 'none'
            }). Every agent's runs are listed below.`,
          );
          forgetLinkInAddress();
        }
        setReadOnly(lacking);
        setFeatures(known);
        setAgents(list.agents);
        setPhase('ready');
      } catch (e) {
        if (!current) return;
        if (e instanceof AuthRequired) onAuth(e);
        else {
          setMessage(e.message);
          setPhase('error');
        }
      }
    })();
    return () => {
      current = false;
    };
  }, [token, onAuth]);

  // the reviewers' queue where the server has it (`?view=agents`: one listing per agent), kept
  // current by its own stream where the server has that (live.js), else by each agent's events
  const queueView = Boolean(features && features.reviewQueue && !AGENTS_VIEW);
  const queueStream = queueView && features.queueEvents && !noQueue;
  const watched = useMemo(() => (filters.agentId ? agents.filter((a) => a.id === filters.agentId) : agents), [agents, filters.agentId]);
  const bump = useCallback((ids = [QUEUE_LISTING.id]) => setRefresh((before) => ({ ...before, ...Object.fromEntries(ids.map((id) => [id, (before[id] || 0) + 1])) })), []);
  const queueFilterJson = useMemo(() => JSON.stringify(queueFilter(filters)), [filters]);
  useAgentEvents({ agents: phase === 'ready' && !queueStream && !noQueue ? watched : NO_AGENTS, token, log, own, sawEvent, bump, setLive, onAuth });
  useQueueEvents({
    enabled: phase === 'ready' && queueStream,
    filter: queueFilterJson,
    token,
    agentName: (id) => {
      const found = agents.find((a) => a.id === id);
      return (found && found.name) || id;
    },
    log,
    own,
    waiting: progress.waiting,
    sawEvent,
    bump,
    setLive,
    onAuth,
  });
  const agentName = (id) => {
    const found = agents.find((a) => a.id === id);
    return (found && found.name) || id;
  };
  if (phase === 'token') {
    return (
      <TokenForm
        message={message}
        onSubmit={(value) => {
          storeToken(value);
          setMessage('');
          setPhase('loading');
          setToken(value);
        }}
      />
    );
  }
  if (phase !== 'ready') {
    return (
      <main>
        <h1>runsgate inbox</h1>
        <p role="status">{phase === 'error' ? `The inbox could not load: ${message}` : 'Loading…'}</p>
      </main>
    );
  }
  return (
    <>
      <header>
        <h1>runsgate inbox</h1>
        <p className={`live ${noQueue ? 'off' : live}`} role="status">
          {noQueue
            ? 'No live updates: this key has no review queue.'
            : live === 'live'
              ? 'Live: new runs and decisions appear as they happen'
              : live === 'stopped'
                ? 'Live updates stopped (see Activity); they resume at the next connection.'
                : 'Connecting for live updates…'}
        </p>
        {token && (
          <button
            type="button"
            onClick={() => {
              storeToken('');
              setToken('');
              setMessage('Signed out.');
              setPhase('token');
            }}
          >
            Forget my token
          </button>
        )}
      </header>
      <main className="queue-page">
        {!noQueue && <Filters agents={agents} features={features} queue={queueView} filters={filters} onApply={setFilters} />}
        {/* beside the queue (inbox.css): what it shows grows without moving the cards */}
        <div className="side">
          <Shortcuts />
          <section className="activity" aria-labelledby="activity-h">
            <h2 id="activity-h">Activity</h2>
            {/* focusable: it scrolls once it is long */}
            <div className="log" role="log" aria-live="polite" aria-labelledby="activity-h" tabIndex={0}>
              {activity.length === 0 && <p>Nothing yet.</p>}
              <ol>
                {activity.map((entry) => (
                  <li key={entry.id} className={entry.kind}>
                    <time dateTime={entry.at}>{when(entry.at)}</time> {entry.text}
                    {entry.items && (
                      <ul>
                        {entry.items.map((item, i) => (
                          <li key={i}>{item}</li>
                        ))}
                      </ul>
                    )}
                  </li>
                ))}
              </ol>
            </div>
          </section>
          <Progress cards={progress.cards} onDismiss={progress.dismiss} />
        </div>
        <div className="queue">
          {unknownLink && (
            <p className="link-note" role="status">
              {unknownLink}
            </p>
          )}
          {queueView && noQueue && (
            <section className="agent" aria-labelledby="no-queue">
              <h2 id="no-queue">No review queue for this key</h2>
              <p>
                This key may not decide (it lacks the scope <code>{noQueue}</code>), so it has no queue of questions to decide. It may still read the
                suspended runs: <a href="?view=agents">see them per agent</a>.
              </p>
            </section>
          )}
          {queueView && !noQueue && (
            <AgentListing
              key={JSON.stringify(filters)}
              agent={QUEUE_LISTING}
              queue
              agentName={agentName}
              features={features}
              filters={filters}
              token={token}
              refresh={Object.values(refresh).reduce((sum, n) => sum + n, 0)}
              log={log}
              onAuth={onAuth}
              follow={progress.follow}
              ownDecision={ownDecision}
              linked={unknownLink ? null : LINKED}
            />
          )}
          {!queueView && readOnly && (
            <p className="link-note" role="status">
              This key may read the suspended runs but may not decide (it lacks the scope <code>{readOnly}</code>): their cards show no Approve,
              Decline or resume controls.
            </p>
          )}
          {!queueView && watched.map((agent) => (
            <AgentListing
              key={`${agent.id}\u0000${JSON.stringify(filters)}`}
              agent={agent}
              agentName={agentName}
              features={features}
              filters={filters}
              token={token}
              refresh={refresh[agent.id] || 0}
              log={log}
              onAuth={onAuth}
              follow={progress.follow}
              ownDecision={ownDecision}
              linked={LINKED && !unknownLink && (!LINKED.agentId || LINKED.agentId === agent.id) ? LINKED : null}
              mayDecide={!readOnly}
            />
          ))}
        </div>
      </main>
    </>
  );
}

createRoot(document.getElementById('inbox')).render(<App />);
