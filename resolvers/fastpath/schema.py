"""The fast path's schema: ``FederationSchema`` running prepared operations directly, and the
rule of its fallback to Strawberry's pipeline (``PreparedSchema.execute``)."""

from __future__ import annotations

import logging
from collections.abc import Iterable
from typing import Any

from strawberry.types import ExecutionResult
from strawberry.types.graphql import OperationType

from ..federation import FederationSchema
from .prepared import ExecutionBegan, PreparedOperations, execute_prepared, fault_result, well_formed

logger = logging.getLogger("runsgate.graphql")


class PreparedSchema(FederationSchema):
    """``FederationSchema`` whose ``execute`` runs a prepared query or mutation operation directly
    when given ``prepared_operations`` (``resolvers.fastpath.prepared``)."""

    prepared_operations: PreparedOperations | None = None
    """Set by ``resolvers.fastpath.install``; None: every request takes Strawberry's standard path."""

    async def execute(
        self,
        query: str | None,
        variable_values: dict[str, Any] | None = None,
        context_value: Any | None = None,
        root_value: Any | None = None,
        operation_name: str | None = None,
        allowed_operation_types: Iterable[OperationType] | None = None,
        operation_extensions: dict[str, Any] | None = None,
    ) -> ExecutionResult:
        """Strawberry's ``Schema.execute``; a prepared operation skips parsing, validation and the
        extension hooks (``resolvers.fastpath.prepared.execute_prepared``), with the same result;
        one over the cost limit for these variables goes through Strawberry's pipeline, which
        refuses it.

        The fallback's rule: an operation with effects (a mutation) runs at most once. A fault of
        the fast path before the operation's execution began (any exception but ``ExecutionBegan``:
        no resolver was called) is logged and the request runs through Strawberry's pipeline.
        Once execution began (``ExecutionBegan``, from ``execute_prepared``'s call of a root plan
        or of graphql-core's ``execute`` on), a query still runs again that way, but a mutation
        never: its fault is logged with its traceback and answered as the standard path answers
        a resolver's unexpected exception (``fault_result``: masked, ``data`` null)."""
        prepared = self.prepared_operations
        entry = (
            prepared.get(query, operation_name)
            if prepared is not None
            and isinstance(query, str)
            and well_formed(operation_name, variable_values, operation_extensions)
            else None
        )
        if entry is not None and (allowed_operation_types is None or entry.operation_type in allowed_operation_types):
            assert prepared is not None
            try:
                result = await execute_prepared(
                    self,
                    prepared,
                    entry,
                    variable_values=variable_values,
                    context_value=context_value,
                    root_value=root_value,
                    operation_extensions=operation_extensions,
                )
            except Exception as fault:
                if isinstance(fault, ExecutionBegan) and entry.operation_type is not OperationType.QUERY:
                    # its traceback is logged by the error masking, as a resolver's fault is
                    logger.error("%s after its execution began; not run again", fault)
                    return fault_result(self, prepared, entry, fault)
                logger.exception("prepared operation failed; running it again through Strawberry's pipeline")
            else:
                if result is not None:
                    return result
        return await super().execute(
            query,
            variable_values=variable_values,
            context_value=context_value,
            root_value=root_value,
            operation_name=operation_name,
            allowed_operation_types=allowed_operation_types,
            operation_extensions=operation_extensions,
        )


__all__ = ["PreparedSchema"]
