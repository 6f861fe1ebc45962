// How the inbox shows JSON values to a reviewer (docs/inbox.md "Arguments"): as JSON, exact (each
// number as the server wrote it, exact.js), with a string's line breaks shown as line breaks, and
// long values (lists and objects of many entries, long strings) folded under a <details>; and the
// one-line summaries of a call (its arguments, the fields an edit changed) that the activity log
// and a decided card's place show.
import React, { useLayoutEffect, useRef, useState } from 'react';
import { isRaw } from './exact.js';

/** Entries beyond which a list or object below the top is folded. */
const FOLD_ENTRIES = 8;
/** Characters or lines beyond which a string is folded. */
const FOLD_CHARS = 240;
const FOLD_LINES = 4;

const pad = (depth) => '  '.repeat(depth);
const isObject = (value) => value !== null && typeof value === 'object' && !isRaw(value);

/** A string as JSON text, each line break shown as one (every other escape as JSON writes it). */
export const stringText = (text) => `"${text.split('\n').map((part) => JSON.stringify(part).slice(1, -1)).join('\n')}"`;

/** A value that is no list or object, as JSON text; a kept number as the server wrote it. */
function scalarText(value) {
  if (isRaw(value)) return value.rawJSON;
  if (typeof value === 'string') return stringText(value);
  if (typeof value === 'bigint') return String(value);
  return JSON.stringify(value) ?? 'null';
}

const plural = (n, word) => `${n} ${word}${n === 1 ? '' : 's'}`;

/** A long value: one line saying what it holds (`closed`), which opens into its first line
 * (`opened`) and the others (`body`). */
function Fold({ closed, opened, body }) {
  const [open, setOpen] = useState(false);
  return (
    <details className="fold" onToggle={(event) => setOpen(event.currentTarget.open)}>
      <summary>{open ? opened : closed}</summary>
      {open && body}
    </details>
  );
}

/** The lines of `value` at `depth`, after `prefix` (a key) and before `suffix` (a comma). */
function lines(value, depth, prefix, suffix, key) {
  const line = (text, k = key) => (
    <div className="line" key={k}>
      {pad(depth)}
      {text}
    </div>
  );
  if (!isObject(value)) {
    const text = scalarText(value);
    if (typeof value === 'string' && (value.length > FOLD_CHARS || value.split('\n').length > FOLD_LINES)) {
      const head = value.split('\n')[0].slice(0, 60);
      return [
        <Fold
          key={key}
          closed={`${pad(depth)}${prefix}${stringText(head)}… (${plural(value.length, 'character')}, ${plural(value.split('\n').length, 'line')})${suffix}`}
          opened={`${pad(depth)}${prefix}${text}${suffix}`}
          body={null}
        />,
      ];
    }
    return [line(`${prefix}${text}${suffix}`)];
  }
  const list = Array.isArray(value);
  const entries = list ? value.map((item, i) => [i, item]) : Object.entries(value);
  const [open, close] = list ? ['[', ']'] : ['{', '}'];
  if (entries.length === 0) return [line(`${prefix}${open}${close}${suffix}`)];
  const inner = entries.flatMap(([k, item], i) =>
    lines(item, depth + 1, list ? '' : `${JSON.stringify(k)}: `, i < entries.length - 1 ? ',' : '', `${key}.${k}`),
  );
  const closing = line(`${close}${suffix}`, `${key}/`);
  if (depth > 0 && entries.length > FOLD_ENTRIES) {
    const what = list ? plural(entries.length, 'item') : plural(entries.length, 'key');
    return [
      <Fold
        key={key}
        closed={`${pad(depth)}${prefix}${open}… ${what}${close}${suffix}`}
        opened={`${pad(depth)}${prefix}${open}`}
        body={[...inner, closing]}
      />,
    ];
  }
  return [line(`${prefix}${open}`, `${key}(`), ...inner, closing];
}

/** `value` as readable, exact JSON in a box of bounded height (it scrolls, and then takes the focus). */
export function JsonValue({ value }) {
  const outer = useRef(null);
  const inner = useRef(null);
  const [scrolls, setScrolls] = useState(false);
  useLayoutEffect(() => {
    const check = () => outer.current && setScrolls(outer.current.scrollHeight > outer.current.clientHeight);
    check();
    const observer = new ResizeObserver(check);
    observer.observe(inner.current);
    return () => observer.disconnect();
  }, []);
  return (
    <div className="value" ref={outer} tabIndex={scrolls ? 0 : undefined}>
      <div ref={inner}>{lines(value, 0, '', '', 'v')}</div>
    </div>
  );
}

/** A short text for a value in a one-line summary. */
function short(value) {
  if (isRaw(value)) return value.rawJSON;
  if (typeof value === 'string') {
    const flat = value.replace(/\s+/g, ' ');
    return JSON.stringify(flat.length > 24 ? `${flat.slice(0, 23)}…` : flat);
  }
  if (Array.isArray(value)) return `[${plural(value.length, 'item')}]`;
  if (isObject(value)) return `{${plural(Object.keys(value).length, 'key')}}`;
  return scalarText(value);
}

/** A call's arguments in one line: `order_id 1042, amount 49.9` (at most about 100 characters). */
export function argsSummary(args) {
  if (!isObject(args) || Array.isArray(args)) return args === null || args === undefined ? 'no arguments' : short(args);
  const text = Object.entries(args)
    .map(([key, value]) => `${key} ${short(value)}`)
    .join(', ');
  return text.length > 100 ? `${text.slice(0, 99)}…` : text || 'no arguments';
}

/** A call named for a person: its tool, a short id and its arguments. */
export function callSummary(call) {
  const id = call.toolCallId ? ` ${call.toolCallId.length > 12 ? `${call.toolCallId.slice(0, 10)}…` : call.toolCallId}` : '';
  return `${call.toolName || 'tool call'} (call${id}: ${argsSummary(call.args)})`;
}

/** What an edit changed: `edited amount: 49.9 → 25; added note: "…"`, or '' when nothing. */
export function editSummary(before, after) {
  const was = isObject(before) && !Array.isArray(before) ? before : {};
  const keys = [...new Set([...Object.keys(was), ...Object.keys(after)])];
  const text = (value) => JSON.stringify(value);
  const changes = keys.flatMap((key) => {
    if (!(key in after)) return [`removed ${key}`];
    if (!(key in was)) return [`added ${key}: ${short(after[key])}`];
    return text(was[key]) === text(after[key]) ? [] : [`edited ${key}: ${short(was[key])} → ${short(after[key])}`];
  });
  return changes.join('; ');
}

/** The question a data request asks, for a person: the payload when it is text, else its
 * `question` or `message` field, else the description of its `resumeSchema`; null when none. */
export function questionOf(call) {
  const payload = call.suspendPayload;
  if (typeof payload === 'string' && payload.trim()) return payload;
  if (isObject(payload) && !Array.isArray(payload)) {
    for (const key of ['question', 'message']) if (typeof payload[key] === 'string' && payload[key].trim()) return payload[key];
  }
  const schema = call.resumeSchema;
  if (isObject(schema) && typeof schema.description === 'string' && schema.description.trim()) return schema.description;
  return null;
}
