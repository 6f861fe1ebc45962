// Transport: GraphQL over HTTP (POST /graphql) and graphql-transport-ws (the same path), both
// carrying the tab's credential, if any, as runsgate expects it (server/view/authenticated.py):
// `Authorization: Bearer <token>` on HTTP, and in the `connection_init` payload on the socket.
// Answers are read keeping each JSON number as the server wrote it (exact.js), and requests are
// written with JSON.stringify, which writes such numbers back as they were.
import { createClient } from 'graphql-ws';
import { EXACT, parseJSON, reviver } from './exact.js';

const TOKEN_KEY = 'runsgate-inbox-token';

/** The API key or token of this tab (sessionStorage: gone when the tab closes), or ''. */
export function storedToken() {
  try {
    return window.sessionStorage.getItem(TOKEN_KEY) || '';
  } catch {
    return '';
  }
}

export function storeToken(token) {
  try {
    if (token) window.sessionStorage.setItem(TOKEN_KEY, token);
    else window.sessionStorage.removeItem(TOKEN_KEY);
  } catch {
    // storage disabled: the token lives as long as the page
  }
}

/** The server refused the credential (or asked for one): HTTP 401. */
export class AuthRequired extends Error {
  constructor(message, tokenGiven) {
    super(message);
    this.tokenGiven = tokenGiven;
  }
}

/** A request the server answered with errors (or not at all): `code` and `requiredScope` are the
 * first error's `extensions` (FORBIDDEN, and the scope the key lacks), when it has them. */
export class GraphQLRequestError extends Error {
  constructor(message, extensions = {}) {
    super(message);
    this.code = extensions.code || null;
    this.requiredScope = extensions.requiredScope || null;
  }
}

function endpoint() {
  return new URL('graphql', new URL('.', window.location.href)).href;
}

/** POST a document; resolves to `data`. Rejects with AuthRequired (401) or GraphQLRequestError. */
export async function request(token, query, variables = {}) {
  const headers = { 'content-type': 'application/json', accept: 'application/graphql-response+json, application/json' };
  if (token) headers.authorization = `Bearer ${token}`;
  let response;
  try {
    response = await fetch(endpoint(), { method: 'POST', headers, body: JSON.stringify({ query, variables }), credentials: 'omit' });
  } catch (error) {
    throw new GraphQLRequestError(`The server did not answer: ${error.message}`);
  }
  let body = null;
  try {
    body = parseJSON(await response.text());
  } catch {
    // not JSON: reported below
  }
  const firstError = body && body.errors && body.errors[0] && body.errors[0].message;
  if (response.status === 401) throw new AuthRequired(firstError || 'Authentication required', Boolean(token));
  if (!body || (body.errors && body.errors.length)) {
    throw new GraphQLRequestError(firstError || `The server answered ${response.status}`, (body && body.errors && body.errors[0] && body.errors[0].extensions) || {});
  }
  return body.data;
}

/** The close code runsgate ends a socket with when its credential is refused or expires. */
export const FORBIDDEN_CLOSE = 4403;

/** A graphql-ws client on /graphql; `onConnected` runs after each (re)connection, `onClosed`
 * with each close event. It reconnects after any close but FORBIDDEN_CLOSE. */
export function liveClient(token, { onConnected, onClosed }) {
  const url = endpoint().replace(/^http/, 'ws');
  return createClient({
    url,
    lazy: false,
    retryAttempts: Infinity,
    shouldRetry: (event) => !(event && event.code === FORBIDDEN_CLOSE),
    connectionParams: () => (token ? { Authorization: `Bearer ${token}` } : {}),
    jsonMessageReviver: EXACT ? reviver : undefined,
    on: { connected: () => onConnected && onConnected(), closed: (event) => onClosed && onClosed(event) },
  });
}

/** A graphql-ws client on /graphql for the progress streams of decided runs: it connects with the
 * first stream and closes after the last, and never reconnects (a stream cut short is reported to
 * its sink's `error`, and the page reads the run again instead). */
export function progressClient(token, { onClosed }) {
  const url = endpoint().replace(/^http/, 'ws');
  return createClient({
    url,
    lazy: true,
    retryAttempts: 0,
    connectionParams: () => (token ? { Authorization: `Bearer ${token}` } : {}),
    jsonMessageReviver: EXACT ? reviver : undefined,
    on: { closed: (event) => onClosed && onClosed(event) },
  });
}
