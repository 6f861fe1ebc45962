"""The federation schema: ``_entities`` representations checked, client mistakes logged quietly.

A malformed representation is the client's mistake, ``BAD_USER_INPUT`` naming
``representations[i]`` (Strawberry would mask it as a fault); errors of a response that are
client mistakes are one INFO line each, unexpected faults ERROR with their traceback
(``resolvers.schema.should_mask_error``).
"""

from __future__ import annotations

import logging
from typing import Any

import strawberry
from graphql import GraphQLError
from strawberry.federation.schema import FederationAny
from strawberry.types import ExecutionContext, Info

from storage import StoreUnavailableError

from .errors import QueryArgumentError
from .limits import check_value

logger = logging.getLogger("runsgate.graphql")

ENTITY_KEYS = {"SuspendedRun": "runId", "Agent": "id"}
"""Entity type -> its ``@key`` field (docs/api.md "Apollo Federation")."""


class FederationSchema(strawberry.federation.Schema):
    """``strawberry.federation.Schema`` whose ``_entities`` refuses malformed representations
    (the fast path's schema, ``resolvers.fastpath.schema.PreparedSchema``, extends it)."""

    def entities_resolver(self, info: Info, representations: list[FederationAny]) -> list[FederationAny]:
        """Check every representation, then resolve them (Strawberry's resolver).

        Raises:
            QueryArgumentError: A representation is not ``{"__typename": <entity>, <key>: <id>}``,
                or its key is over its limit in bytes (``resolvers.limits.INPUT_LIMITS``).
        """
        checked: list[Any] = []
        for index, representation in enumerate(representations):
            argument = f"representations[{index}]"
            type_name = representation.get("__typename") if isinstance(representation, dict) else None
            key = ENTITY_KEYS.get(type_name) if isinstance(type_name, str) else None
            if key is None:
                raise QueryArgumentError(
                    f"`{argument}` must be an object whose __typename is one of {sorted(ENTITY_KEYS)}",
                    argument=argument,
                )
            if set(representation) != {"__typename", key} or not isinstance(representation[key], str | int):  # type: ignore[call-overload,index]
                raise QueryArgumentError(
                    f"`{argument}` must hold exactly __typename and the key field {key!r} (a string)",
                    argument=argument,
                )
            value = str(representation[key])  # type: ignore[index]
            check_value(key, value, f"{argument}.{key}")
            checked.append({"__typename": type_name, key: value})
        return super().entities_resolver(info, checked)

    def process_errors(self, errors: list[GraphQLError], execution_context: ExecutionContext | None = None) -> None:
        """One line per error of a response: WARNING for a store outage (answered as
        ``STORE_UNAVAILABLE``, ``resolvers.errors.ErrorMasking``), else INFO (faults were logged
        with their traceback already)."""
        for error in errors:
            if isinstance(error.original_error, StoreUnavailableError):
                logger.warning("store unavailable in %s: %s", error.path, error.original_error)
            else:
                logger.info("GraphQL error at %s: %s", error.path or "request", error.message)


__all__ = ["ENTITY_KEYS", "FederationSchema"]
