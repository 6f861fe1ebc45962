"""runsgate's depth and alias limits (``server.http.limits.document_shape_rule``) refuse exactly what
Strawberry's ``QueryDepthLimiter`` and ``MaxAliasesLimiter`` refuse, with the same messages, on
documents small enough for Strawberry's limiters (which expand every spread) to check; and they
check any nesting without recursion."""

from __future__ import annotations

from graphql import GraphQLError, build_schema, parse, validate
from hypothesis import given, settings
from hypothesis import strategies as st
from strawberry.extensions import max_aliases, query_depth_limiter

from server.http.limits import document_shape_rule, document_shapes

SCHEMA = build_schema("type Query { a: A b: Int } type A { a: A b: Int c(x: Int): A }")


@st.composite
def selections(draw: st.DrawFn, fragments: int, level: int = 0) -> str:
    """A selection set's body on ``A``: fields, aliases, introspection, inline fragments, and
    spreads of the ``fragments`` defined before it."""
    parts = []
    for _ in range(draw(st.integers(1, 3))):
        kind = draw(st.sampled_from(["leaf", "field", "inline", "spread", "typename", "introspection"]))
        alias = draw(st.sampled_from(["", "", "x: ", "y: "]))
        if kind == "field" and level < 4:
            parts.append(f"{alias}a {{ {draw(selections(fragments, level + 1))} }}")
        elif kind == "inline" and level < 4:
            parts.append(f"... on A {{ {draw(selections(fragments, level + 1))} }}")
        elif kind == "spread" and fragments:
            parts.append(f"...F{draw(st.integers(0, fragments - 1))}")
        elif kind == "typename":
            parts.append(f"{alias}__typename")
        elif kind == "introspection" and level < 4:
            parts.append(f'{alias}__type(name: "A") {{ name fields {{ n: name }} }}')
        else:
            parts.append(f"{alias}b")
    return " ".join(parts)


@st.composite
def documents(draw: st.DrawFn) -> str:
    """Up to 5 fragments, each spreading only earlier ones (no cycle), and one or two operations."""
    count = draw(st.integers(0, 5))
    fragments = [f"fragment F{i} on A {{ {draw(selections(i))} }}" for i in range(count)]
    operations = [f"query Q{i} {{ a {{ {draw(selections(count))} }} }}" for i in range(draw(st.integers(1, 2)))]
    return "\n".join(operations + fragments)


def messages(errors: list[GraphQLError]) -> set[str]:
    return {error.message for error in errors}


@settings(max_examples=300, derandomize=True, deadline=None)
@given(documents(), st.integers(0, 6), st.integers(0, 6))
def test_the_limits_refuse_what_strawberrys_refuse(document: str, max_depth: int, aliases: int) -> None:
    ast = parse(document)
    theirs = validate(
        SCHEMA,
        ast,
        [query_depth_limiter.create_validator(max_depth, None, None), max_aliases.create_validator(aliases)],
    )
    ours = validate(SCHEMA, ast, [document_shape_rule(max_depth, aliases)])
    assert messages(ours) == messages(theirs)


def test_a_fragment_bomb_is_summarized_once_per_fragment() -> None:
    # 150 fragments, each spreading the one before twice: 2^149 aliases once inlined
    levels = 150
    fragments = ["fragment F0 on A { x: b }"] + [
        f"fragment F{i} on A {{ ...F{i - 1} ...F{i - 1} }}" for i in range(1, levels)
    ]
    document = parse(f"query {{ a {{ ...F{levels - 1} }} }}\n" + "\n".join(fragments))

    [(_, shape)] = document_shapes(document)

    assert shape.aliases == 2 ** (levels - 1)
    assert shape.height == 1


def test_any_nesting_is_checked_without_recursion() -> None:
    # a chain of 3,000 fragments, each a level deeper than the one it spreads (beyond Python's
    # recursion limit, and beyond graphql-core's own nesting limit, which the rule runs before)
    levels = 3000
    fragments = ["fragment F0 on A { b }"] + [f"fragment F{i} on A {{ a {{ ...F{i - 1} }} }}" for i in range(1, levels)]
    document = parse(f"query {{ a {{ ...F{levels - 1} }} }}\n" + "\n".join(fragments))

    [(_, shape)] = document_shapes(document)

    assert shape.height == levels
    errors = validate(SCHEMA, document, [document_shape_rule(10, 20)])
    assert "'anonymous' exceeds maximum operation depth of 10" in messages(errors)
