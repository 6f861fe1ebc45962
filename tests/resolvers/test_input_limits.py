"""Every string a client sends has a limit in bytes, from one table (``resolvers.documents.limits``).

The schema is read as clients see it: every argument and input field whose type is ``String`` or
``ID`` (or a list of them) must be named in the table, and so must every ``JSON`` one; the table
is what SECURITY.md documents. The refusals themselves are shown over HTTP and WebSocket against
a real server (``tests/security/test_third_pass.py``).
"""

from __future__ import annotations

from pathlib import Path

from graphql import GraphQLInputObjectType, GraphQLObjectType, GraphQLScalarType, get_named_type

from resolvers.documents import limits
from resolvers.schema import schema

ROOT = Path(__file__).resolve().parents[2]


def _client_inputs() -> dict[str, str]:
    """Argument or input field name -> its scalar type's name, for every ``String``, ``ID`` and
    ``JSON`` input of the served schema (introspection and federation's own types left out)."""
    found: dict[str, str] = {}
    for type_ in schema._schema.type_map.values():
        if type_.name.startswith("__"):
            continue
        if isinstance(type_, GraphQLObjectType):
            inputs = [(name, arg.type) for field in type_.fields.values() for name, arg in field.args.items()]
        elif isinstance(type_, GraphQLInputObjectType):
            inputs = [(name, field.type) for name, field in type_.fields.items()]
        else:
            continue
        for name, input_type in inputs:
            named = get_named_type(input_type)
            if isinstance(named, GraphQLScalarType) and named.name in {"String", "ID", "JSON"}:
                found[name] = named.name
    return found


def test_every_string_and_json_input_of_the_schema_has_a_limit_in_the_table() -> None:
    inputs = _client_inputs()
    table = limits.INPUT_LIMITS

    missing = sorted(name for name in inputs if name not in table)

    assert not missing, f"inputs without a limit in resolvers.documents.limits.INPUT_LIMITS: {missing}"


def test_security_md_lists_every_limit_of_the_table() -> None:
    table = limits.INPUT_LIMITS
    security = (ROOT / "SECURITY.md").read_text()

    assert table
    for name in table:
        assert f"`{name}`" in security, name
