// JSON numbers as the server wrote them (docs/inbox.md "Numbers"). JavaScript reads every JSON
// number into a double, which rounds integers beyond 2^53 (1790000000000000001 becomes
// 1790000000000000000). With TC39's "JSON.parse source text access" (the reviver's
// `context.source` and `JSON.rawJSON`: Chromium 114, Firefox 135, Safari 18.4 and later), every
// number whose text JavaScript would write otherwise is kept as that text (a raw JSON value), so
// the page shows it and sends it back unchanged. The resume form keeps a large integer as a
// BigInt instead (its form library needs plain values), written as its digits. Without that
// support, numbers are doubles, and the page says where one may be rounded and refuses to send one.

/** Whether this browser can keep JSON numbers exactly (feature-detected once). */
export const EXACT = (() => {
  try {
    if (typeof JSON.rawJSON !== 'function' || typeof JSON.isRawJSON !== 'function') return false;
    let source = null;
    JSON.parse('[1.0]', (key, value, context) => {
      if (key === '0') source = context && context.source;
      return value;
    });
    return source === '1.0' && JSON.stringify([JSON.rawJSON('1.0')]) === '[1.0]';
  } catch {
    return false;
  }
})();

if (EXACT && typeof BigInt.prototype.toJSON !== 'function') {
  // as MDN's BigInt page shows: JSON.stringify writes a BigInt as its digits (the resume form's
  // large integers; rjsf stringifies its form data to validate it)
  Object.defineProperty(BigInt.prototype, 'toJSON', {
    value() {
      return JSON.rawJSON(this.toString());
    },
    configurable: true,
    writable: true,
  });
}

/** The largest integer every double holds exactly (2^53 - 1). */
const SAFE = Number.MAX_SAFE_INTEGER;
const INTEGER = /^-?\d+$/;

/** A JSON.parse reviver keeping each number JavaScript would write otherwise as its source text. */
export function reviver(key, value, context) {
  if (EXACT && typeof value === 'number' && context && typeof context.source === 'string' && JSON.stringify(value) !== context.source) {
    return JSON.rawJSON(context.source);
  }
  return value;
}

/** `text` parsed, each number kept as the server wrote it (when EXACT). Throws SyntaxError. */
export function parseJSON(text) {
  return EXACT ? JSON.parse(text, reviver) : JSON.parse(text);
}

/** Whether `value` is a number kept as its text. */
export const isRaw = (value) => EXACT && JSON.isRawJSON(value);

function mapLeaves(value, leaf) {
  if (isRaw(value) || typeof value !== 'object' || value === null) return leaf(value);
  if (Array.isArray(value)) return value.map((item) => mapLeaves(item, leaf));
  return Object.fromEntries(Object.entries(value).map(([key, item]) => [key, mapLeaves(item, leaf)]));
}

/** `value` with every kept number and BigInt as the nearest double: for checks in the browser
 * (a JSON Schema's bounds), never for what is sent. */
export function plain(value) {
  return mapLeaves(value, (leaf) => {
    if (isRaw(leaf)) return Number(leaf.rawJSON);
    if (typeof leaf === 'bigint') return Number(leaf);
    return leaf;
  });
}

/** `value` for the resume form (rjsf): a kept integer as a BigInt, any other kept number as its
 * double (the value the server's JSON reads from its text). */
export function formValue(value) {
  return mapLeaves(value, (leaf) => {
    if (!isRaw(leaf)) return leaf;
    return INTEGER.test(leaf.rawJSON) ? BigInt(leaf.rawJSON) : Number(leaf.rawJSON);
  });
}

/** What a number field holds for `text` typed in it, rjsf having read it as `value`: the integer as
 * a BigInt when a double cannot hold it (and the browser can send it), else `value`. */
export function typedNumber(text, value) {
  if (!EXACT || typeof text !== 'string' || !INTEGER.test(text.trim())) return value;
  const digits = text.trim();
  return Number.isSafeInteger(Number(digits)) ? value : BigInt(digits);
}

/** `[{path, value}]`: each number of `value` that may be a rounded integer (a double beyond
 * 2^53 - 1 with no fraction). Empty when the browser keeps numbers exactly. */
export function unsafeNumbers(value, path = []) {
  if (EXACT) return [];
  if (typeof value === 'number') return Number.isInteger(value) && Math.abs(value) > SAFE ? [{ path, value }] : [];
  if (typeof value !== 'object' || value === null) return [];
  return Object.entries(value).flatMap(([key, item]) => unsafeNumbers(item, [...path, Array.isArray(value) ? Number(key) : key]));
}

/** The note for a value shown with numbers that may be rounded, or ''. */
export function roundedNote(value) {
  return unsafeNumbers(value).length
    ? 'This browser cannot read numbers beyond ±9007199254740991 exactly (it lacks JSON.parse source text access): such numbers here may be shown rounded. The server keeps them exact.'
    : '';
}

/** Why `value` cannot be sent from this browser, or '' (a number it may have rounded). */
export function unsendable(value) {
  const found = unsafeNumbers(value);
  if (!found.length) return '';
  const where = found.map(({ path, value: n }) => `${path.join('.') || '(root)'}: ${n}`).join('; ');
  return `This browser cannot send numbers beyond ±9007199254740991 exactly (${where}): use a browser with JSON.parse source text access, or the API.`;
}
