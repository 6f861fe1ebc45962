"""The GraphQL layer: Strawberry types, queries and mutations over ``runtime``/``storage``."""

from .context import Context
from .schema import build_schema, schema

__all__ = ["Context", "build_schema", "schema"]
