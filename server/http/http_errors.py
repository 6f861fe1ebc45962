"""The one shape of a request refused before GraphQL runs it (HTTP status 4xx): a GraphQL response
with only ``errors``, each with an ``extensions.code``, as a field error has; never a text body.

``{"errors": [{"message": "Unable to parse request body as JSON", "extensions": {"code": "BAD_REQUEST"}}]}``

Used by the view's refusals of a request's shape (``server.view.graphql_view``: JSON, content type,
method, parameters), the routes' (404, 405: ``routing_refusal``), the body limit (413,
``server.http.limits``), the loopback host check (``server.http.hosts``) and authentication (401,
``server.view.authenticated``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse

CODES = {400: "BAD_REQUEST", 401: "UNAUTHENTICATED", 404: "NOT_FOUND", 405: "METHOD_NOT_ALLOWED", 413: "BAD_REQUEST"}
"""``extensions.code`` of each refusal's status; another 4xx is ``BAD_REQUEST``."""


def refusal_body(message: str, status: int = 400) -> dict[str, Any]:
    """The response body of a refusal with ``status``: ``{"errors": [{"message", "extensions": {"code"}}]}``."""
    return {"errors": [{"message": message, "extensions": {"code": CODES.get(status, "BAD_REQUEST")}}]}


def refusal(message: str, status: int = 400, *, headers: Mapping[str, str] | None = None) -> JSONResponse:
    """A refusal as an ``application/json`` response (``refusal_body``), with ``headers``."""
    return JSONResponse(refusal_body(message, status), status_code=status, headers=headers)


async def routing_refusal(request: Request, exc: Exception) -> JSONResponse:
    """Starlette's exception handler for its own ``HTTPException`` (a path no route serves: 404; a
    method its route does not take: 405 with ``Allow``), answered as a refusal."""
    assert isinstance(exc, HTTPException)
    message = exc.detail
    allowed = (exc.headers or {}).get("Allow")
    if exc.status_code == 405 and allowed:
        message = f"{exc.detail}: {request.method} {request.url.path} takes only {allowed}"
    elif exc.status_code == 404:
        message = f"{exc.detail}: no route serves {request.url.path}"
    return refusal(message, exc.status_code, headers=exc.headers)


__all__ = ["CODES", "refusal", "refusal_body", "routing_refusal"]
