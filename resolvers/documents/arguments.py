"""The arguments of one request as the cost walk reads them (``resolvers.documents.cost``): literals,
and variables with their definitions' defaults; and the refusal of an argument outside its range
(``weights.ArgumentRange``), before the request runs.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from graphql import GraphQLError, value_from_ast_untyped
from graphql.language import FieldNode, ListValueNode, ObjectValueNode, OperationDefinitionNode, ValueNode, VariableNode

from ..argument_errors import QueryArgumentError
from .weights import ArgumentRange


class Arguments:
    """The arguments of one request: literals, and variables with their definitions' defaults.
    ``varied`` becomes True when an argument read names a variable."""

    def __init__(self, operation: OperationDefinitionNode, variables: Mapping[str, Any] | None) -> None:
        self.variables: dict[str, Any] = {}
        for definition in operation.variable_definitions or ():
            if definition.default_value is not None:
                self.variables[definition.variable.name.value] = value_from_ast_untyped(definition.default_value)
        self.variables.update(variables or {})
        self.varied = False

    def argument(self, field: FieldNode, name: str) -> Any:
        """The value of ``field``'s argument ``name`` (None when not given)."""
        node = self.argument_node(field, name)
        return None if node is None else value_from_ast_untyped(node, self.variables)

    def argument_node(self, field: FieldNode, name: str) -> ValueNode | None:
        """The value node of ``field``'s argument ``name`` (None when not given)."""
        for argument in field.arguments or ():
            if argument.name.value == name:
                if names_a_variable(argument.value):
                    self.varied = True
                return argument.value
        return None


def names_a_variable(value: ValueNode) -> bool:
    """Whether ``value`` is a variable or holds one (in a list or an input object)."""
    stack = [value]
    while stack:
        node = stack.pop()
        if isinstance(node, VariableNode):
            return True
        if isinstance(node, ListValueNode):
            stack.extend(node.values)
        elif isinstance(node, ObjectValueNode):
            stack.extend(item.value for item in node.fields)
    return False


def out_of_range(values: Arguments, field: FieldNode, ranges: tuple[ArgumentRange, ...]) -> GraphQLError | None:
    """The refusal of the first of ``field``'s arguments outside its range, located at its value."""
    for bound in ranges:
        node = values.argument_node(field, bound.name)
        value = None if node is None else value_from_ast_untyped(node, values.variables)
        if isinstance(value, int) and not isinstance(value, bool) and not bound.least <= value <= bound.most:
            message = f"`{bound.name}` must be between {bound.least} and {bound.most}"
            return QueryArgumentError(message, argument=bound.name, nodes=[node] if node is not None else None)
    return None


__all__ = ["Arguments", "names_a_variable", "out_of_range"]
