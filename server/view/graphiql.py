"""The GraphiQL page of ``/graphql``, offline: Strawberry's page loading runsgate's own copies of
its files (``server/static/graphiql``, keeping their ``integrity`` hashes), opening with an example
query, and keeping no credential beyond the tab (SECURITY.md). Why: docs/api.md "GraphiQL"."""

from __future__ import annotations

from pathlib import Path

GRAPHIQL_CDN = "https://unpkg.com/"
GRAPHIQL_ASSETS_DIR = Path(__file__).resolve().parents[1] / "static" / "graphiql"
"""The files the GraphiQL page loads, laid out as their unpkg.com paths (``package@version/file``)."""
GRAPHIQL_ASSETS_PATH = "/static/graphiql"
"""URL path the app serves ``GRAPHIQL_ASSETS_DIR`` under."""
GRAPHIQL_EXAMPLE_QUERY = """# runsgate: agent runs waiting for a human decision.
# Run this query with Ctrl-Enter (or the play button): the refund agent's
# suspended runs, newest first, with the tool calls that wait for approval.
# Then decide one with the approveToolCall or declineToolCall mutation,
# naming the call's toolCallId and the questionId you were shown.
{
  suspendedRuns(agentId: "refund-agent", first: 10) {
    totalCount
    nodes {
      runId
      createdAt
      toolCalls { toolCallId questionId toolName args requiresApproval }
    }
  }
}
"""
"""The query GraphiQL opens with, in place of Strawberry's welcome text."""


_GRAPHIQL_STORAGE = """const runsgateStorage = (() => {
        // localStorage, except that no header is ever written: every "headers" field of a JSON
        // value is stored as null, and the headers editor's own key is not stored at all
        const drop = (value) =>
          Array.isArray(value)
            ? value.map(drop)
            : value !== null && typeof value === "object"
              ? Object.fromEntries(Object.entries(value).map(([k, v]) => [k, k === "headers" ? null : drop(v)]))
              : value;
        return {
          getItem: (key) => localStorage.getItem(key),
          setItem: (key, value) => {
            if (key === "graphiql:headers") return;
            let kept = value;
            try {
              kept = JSON.stringify(drop(JSON.parse(value)));
            } catch (e) {}
            localStorage.setItem(key, kept);
          },
          removeItem: (key) => localStorage.removeItem(key),
          clear: () => localStorage.clear(),
          key: (index) => localStorage.key(index),
          get length() {
            return localStorage.length;
          },
        };
      })();

"""
"""A ``Storage`` for GraphiQL that never writes a header (``GRAPHIQL_CREDENTIAL_EDITS``)."""


GRAPHIQL_CREDENTIAL_EDITS = (
    # GraphiQL writes the headers editor (where a person puts `Authorization: Bearer ...`) to
    # localStorage, on the origin every page of runsgate shares, and reads it back in every tab
    # and after a restart; with false it keeps them in the page only (also out of its saved tabs)
    ("shouldPersistHeaders: true,", "shouldPersistHeaders: false,\n          storage: runsgateStorage,"),
    # GraphiQL's history (`graphiql:queries`, `graphiql:favorites`) saves each query with its
    # headers whatever shouldPersistHeaders says: its storage keeps every `headers` field null
    ("const root = ReactDOM.createRoot(", _GRAPHIQL_STORAGE + "      const root = ReactDOM.createRoot("),
    # Strawberry's page fills the headers editor from a `headers` URL parameter: a link could
    # carry a credential, or make the page send someone else's
    ("React.useState(parameters.headers)", "React.useState(undefined)"),
)
"""Edits of Strawberry's GraphiQL page so that no credential outlives the tab (SECURITY.md)."""


def offline_graphiql_html(html: str, root_path: str = "") -> str:
    """Strawberry's GraphiQL page with its CDN URLs pointing at runsgate's own copies, titled
    "runsgate GraphiQL", opening with ``GRAPHIQL_EXAMPLE_QUERY`` (the page's ``EXAMPLE_QUERY``
    constant), and keeping headers in the page only (``GRAPHIQL_CREDENTIAL_EDITS``).

    Raises:
        RuntimeError: Strawberry's page no longer has the code an edit of
            ``GRAPHIQL_CREDENTIAL_EDITS`` changes (an upgrade: the page would keep credentials).
    """
    for old, new in GRAPHIQL_CREDENTIAL_EDITS:
        if old not in html:
            raise RuntimeError(f"Strawberry's GraphiQL page has no {old!r}: check that it keeps no credential")
        html = html.replace(old, new)
    html = html.replace("<title>Strawberry GraphiQL</title>", "<title>runsgate GraphiQL</title>", 1)
    start = html.find("const EXAMPLE_QUERY = `")
    end = html.find("`;", start)
    if start >= 0 and end >= 0:
        html = f"{html[:start]}const EXAMPLE_QUERY = `{GRAPHIQL_EXAMPLE_QUERY}`{html[end + 1 :]}"
    return html.replace(GRAPHIQL_CDN, f"{root_path}{GRAPHIQL_ASSETS_PATH}/")
