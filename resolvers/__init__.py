"""The GraphQL layer: Strawberry types, queries and mutations over ``runtime``/``storage``."""

from .context import Context, RequestLimits, begin_operation
from .schema import build_schema, schema

__all__ = ["Context", "RequestLimits", "begin_operation", "build_schema", "schema"]
