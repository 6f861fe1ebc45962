"""A document's fragments in dependency order, found without recursion: what lets a check of a
document summarize each fragment once and reuse it at every spread (``server.http.limits``,
``resolvers.documents.cost``), so that checking takes time linear in the document's size, fragment bombs
included. A spread closing a cycle, or naming no fragment, is left out (graphql-core's rules
refuse such documents)."""

from __future__ import annotations

from collections.abc import Iterator

from graphql.language import (
    DocumentNode,
    FieldNode,
    FragmentDefinitionNode,
    FragmentSpreadNode,
    InlineFragmentNode,
    SelectionSetNode,
)


def fragment_definitions(document: DocumentNode) -> dict[str, FragmentDefinitionNode]:
    """The document's fragments by name (the first of a repeated name, as graphql-core reads them)."""
    found: dict[str, FragmentDefinitionNode] = {}
    for definition in document.definitions:
        if isinstance(definition, FragmentDefinitionNode):
            found.setdefault(definition.name.value, definition)
    return found


def spread_names(selection_set: SelectionSetNode) -> Iterator[str]:
    """The names of the fragments spread anywhere in ``selection_set`` (not inside them), in
    document order, each as often as it is spread; iterative, so any nesting is fine."""
    stack = [iter(selection_set.selections)]
    while stack:
        for selection in stack[-1]:
            if isinstance(selection, FragmentSpreadNode):
                yield selection.name.value
            elif isinstance(selection, FieldNode | InlineFragmentNode) and selection.selection_set is not None:
                stack.append(iter(selection.selection_set.selections))
                break
        else:
            stack.pop()


def dependency_order(fragments: dict[str, FragmentDefinitionNode]) -> list[str]:
    """Every name of ``fragments``, each after the fragments it spreads (a depth-first walk with
    its own stack). A spread back to a fragment still being walked (a cycle) is not followed, so
    that fragment's summary is made without it."""
    spreads = {name: list(spread_names(fragment.selection_set)) for name, fragment in fragments.items()}
    order: list[str] = []
    seen: set[str] = set()
    for root in fragments:
        if root in seen:
            continue
        seen.add(root)
        path = [(root, iter(spreads[root]))]
        while path:
            name, pending = path[-1]
            for spread in pending:
                if spread in spreads and spread not in seen:
                    seen.add(spread)
                    path.append((spread, iter(spreads[spread])))
                    break
            else:
                path.pop()
                order.append(name)
    return order


__all__ = ["dependency_order", "fragment_definitions", "spread_names"]
