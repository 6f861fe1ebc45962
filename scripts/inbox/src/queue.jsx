// The inbox as a reviewer's queue (docs/inbox.md "Working through the queue"): a decided card's
// place keeps its height and shows the result, so nothing moves under the pointer; the focus goes
// to the next card's first action; keyboard shortcuts move between cards and decide, after a
// confirmation. A card is any element with `data-card` (its questionId); its first action is the
// element with `data-first-action`, else its first field.
import React, { useEffect, useLayoutEffect, useRef, useState } from 'react';

const CARD = '[data-card]';

/** The run an address names (`?agentId=...&runId=...`: an email's or a webhook's inbox link), or null. */
export const LINKED = (() => {
  const params = new URLSearchParams(window.location.search);
  return params.get('runId') ? { agentId: params.get('agentId') || '', runId: params.get('runId') } : null;
})();

/** Take the link's `agentId` and `runId` out of the address (its history entry replaced), so that
 * loading it again lists what the page lists now: after Clear, or a link to an unknown agent. */
export function forgetLinkInAddress() {
  const params = new URLSearchParams(window.location.search);
  params.delete('agentId');
  params.delete('runId');
  const search = params.toString();
  window.history.replaceState(window.history.state, '', `${window.location.pathname}${search ? `?${search}` : ''}${window.location.hash}`);
}

/** Bring the run card holding element id `id` into view (its top) and focus its first action;
 * false when the page has no such card. */
export function showLinked(id) {
  const el = document.getElementById(id);
  const run = el && el.closest('article');
  if (!run) return false;
  run.scrollIntoView({ block: 'start' });
  const action = firstAction(run);
  if (action) action.focus({ preventScroll: true });
  return true;
}
const FIELD = 'input:not([type="checkbox"]), textarea, select, button';

/** The cards of the page, in reading order. */
const allCards = () => [...document.querySelectorAll(CARD)];
const cardSelector = (key) => `[data-card="${CSS.escape(key)}"]`;

/** The element a card's keyboard user starts from: its Approve button, or its first field. */
export const firstAction = (card) => card && (card.querySelector('[data-first-action]') || card.querySelector(FIELD));

/** Focus `el` without scrolling, unless it is out of view (then just into view). */
function focusAction(el) {
  el.focus({ preventScroll: true });
  const box = el.getBoundingClientRect();
  if (box.top < 0 || box.bottom > window.innerHeight) el.scrollIntoView({ block: 'nearest' });
}

/** The key of the card after the one keyed `key` (before it when it is the last), or null. */
export function nextCardKey(key, skip = new Set()) {
  const cards = allCards();
  const at = cards.findIndex((card) => card.dataset.card === key);
  const others = (list) => list.find((card) => card.dataset.card !== key && !skip.has(card.dataset.card));
  const next = others(cards.slice(at + 1)) || others(cards.slice(0, Math.max(at, 0)).reverse());
  return next ? next.dataset.card : null;
}

let wanted = null; // { key, from, follow }: the card whose first action gets the focus once it can
let given = null; // { el, from }: the last focus given, and the card it was asked from

/** Ask for the focus on card `key`'s first action once it is enabled, if the reviewer's focus is
 * then still on the card keyed `from`, a decided card's place, or nowhere; with `follow`, also
 * when it is still where the page put it after the decision on `from` (the decided call's next
 * question, asked after the focus went to the next card). The page does not scroll to it: what
 * the reviewer looks at stays still (Tab, or `j`, then brings it into view). */
export function requestFocus(key, from = null, follow = false) {
  wanted = key ? { key, from, follow } : null;
  flushFocus();
}

/** Give the focus asked for, if it can be given now (called after each render of a listing). */
export function flushFocus() {
  if (!wanted) return;
  const card = document.querySelector(cardSelector(wanted.key));
  if (!card) {
    wanted = null;
    return;
  }
  const action = firstAction(card);
  if (!action || action.disabled) return;
  const active = document.activeElement;
  const free =
    !active ||
    active === document.body ||
    active.disabled ||
    active.closest('[data-settled]') ||
    (wanted.from && active.closest(cardSelector(wanted.from))) ||
    (wanted.follow && given && given.from === wanted.from && active === given.el);
  if (free) {
    action.focus({ preventScroll: true });
    given = { el: action, from: wanted.from };
  }
  wanted = null;
}

/** The height of the element with id `id`'s closest run (the card a decision replaces), or 0. */
export function runHeight(id) {
  const el = document.getElementById(id);
  const run = el && el.closest('article');
  return run ? run.getBoundingClientRect().height : 0;
}

/** How far (px) below the top of the run holding element id `id` the focused element is (the
 * button just pressed), at most `height` less 4rem; 0 when the focus is elsewhere. The decided
 * card's place shows its result there, where the reviewer looked. */
export function actionOffset(id, height) {
  const el = document.getElementById(id);
  const run = el && el.closest('article');
  const active = document.activeElement;
  if (!run || !active || !run.contains(active)) return 0;
  const offset = active.getBoundingClientRect().top - run.getBoundingClientRect().top;
  return Math.max(0, Math.min(offset, height - 64));
}

/** `previous` run ids kept in place (those still listed, and the decided ones in `slots`), with
 * the newly listed ones of `listed` each put before its successor in `listed`. */
export function placeRuns(previous, listed, slots) {
  const now = new Set(listed);
  const order = previous.filter((id) => now.has(id) || slots.has(id));
  for (let i = listed.length - 1; i >= 0; i -= 1) {
    const id = listed[i];
    if (order.includes(id)) continue;
    const after = listed.slice(i + 1).find((other) => order.includes(other));
    order.splice(after ? order.indexOf(after) : order.length, 0, id);
  }
  return order;
}

/** A decided card's place: as tall as the card was while it is in view, one line once it has
 * left the view (the browser's scroll anchoring keeps what is in view still). */
export function Settled({ slot, onCompact }) {
  const ref = useRef(null);
  const line = useRef(null);
  // the result line where the pressed button was, lifted as much as it must to end in view
  const [lift, setLift] = useState(0);
  useLayoutEffect(() => {
    if (!slot.offset || !line.current) return;
    const over = line.current.getBoundingClientRect().bottom - window.innerHeight;
    if (over > 0) setLift(Math.min(slot.offset, over + 8));
  }, [slot.offset]);
  useEffect(() => {
    if (slot.compact || typeof IntersectionObserver !== 'function') return undefined;
    const observer = new IntersectionObserver((entries) => {
      if (entries.every((entry) => !entry.isIntersecting)) onCompact(slot.runId);
    });
    observer.observe(ref.current);
    return () => observer.disconnect();
  }, [slot.compact, slot.runId, onCompact]);
  const style = slot.compact ? undefined : { minHeight: `${slot.height}px` };
  return (
    <div className={`run settled ${slot.ok ? 'ok' : 'problem'}${slot.compact ? ' compact' : ''}`} data-settled={slot.runId} ref={ref} style={style}>
      <p ref={line} style={slot.compact || !slot.offset ? undefined : { marginTop: `${slot.offset - lift}px` }}>
        {slot.text}
      </p>
    </div>
  );
}

const EDITING = 'input, textarea, select, [contenteditable="true"], [role="alertdialog"]';

/** Keyboard shortcuts on the page: j and k move between cards, a and d ask to approve or decline
 * the card with the focus (a `inbox-ask` event on the card, with `detail` 'approve' or 'decline').
 * Keys typed in a field, or with a modifier, are the field's. */
export function useShortcuts() {
  useEffect(() => {
    const onKey = (event) => {
      if (event.defaultPrevented || event.altKey || event.ctrlKey || event.metaKey) return;
      const target = event.target instanceof Element ? event.target : null;
      if (target && target.closest(EDITING)) return;
      const cards = allCards();
      if (!cards.length || !['j', 'k', 'a', 'd'].includes(event.key)) return;
      const current = target && target.closest(CARD);
      const at = current ? cards.indexOf(current) : -1;
      event.preventDefault();
      if (event.key === 'j' || event.key === 'k') {
        const step = event.key === 'j' ? 1 : -1;
        const next = at < 0 ? cards[step > 0 ? 0 : cards.length - 1] : cards[Math.min(Math.max(at + step, 0), cards.length - 1)];
        const action = firstAction(next);
        if (action) focusAction(action);
        return;
      }
      const card = current || cards[0];
      card.dispatchEvent(new CustomEvent('inbox-ask', { detail: event.key === 'a' ? 'approve' : 'decline' }));
    };
    document.addEventListener('keydown', onKey);
    return () => document.removeEventListener('keydown', onKey);
  }, []);
}

/** What the shortcuts are, on the page. */
export function Shortcuts() {
  return (
    <details className="shortcuts">
      <summary>Keyboard shortcuts</summary>
      <dl>
        <dt>
          <kbd>j</kbd> / <kbd>k</kbd>
        </dt>
        <dd>next / previous card (its Approve button, or its first field)</dd>
        <dt>
          <kbd>a</kbd>
        </dt>
        <dd>approve the card with the focus, after a confirmation (Enter: approve, Escape: cancel)</dd>
        <dt>
          <kbd>d</kbd>
        </dt>
        <dd>decline it: type the reason the model reads, then Enter (Escape: cancel)</dd>
        <dt>Tab, Enter, Space</dt>
        <dd>as everywhere: every action is a button or a field</dd>
      </dl>
      <p className="hint">Keys typed in a field are the field&apos;s. After a decision the focus moves to the next card.</p>
    </details>
  );
}
