"""Loading agents from ``RUNSGATE_AGENTS=package.module:attribute`` (docs/writing-agents.md "Registering agents")."""

from __future__ import annotations

import pytest

from runtime import AgentNotFoundError, AgentRegistry, load_registry
from runtime.demo import AGENTS

from . import agents

HERE = "tests.runtime.agents"


def test_the_demo_registry_loads_by_import_path() -> None:
    registry = load_registry("runtime.demo:AGENTS")

    assert registry.ids() == ["refund-agent", "support-supervisor", "weather-agent"]
    assert registry["refund-agent"] is AGENTS["refund-agent"]
    description = registry.description("refund-agent")
    assert description is not None
    assert "approval" in description


def test_an_iterable_of_agents_is_keyed_by_name() -> None:
    registry = load_registry(f"{HERE}:LISTED")

    assert registry.ids() == ["alpha", "beta"]
    assert registry.description("alpha") is None
    assert registry.description("beta") == "Second."
    assert registry.name("beta") == "beta"


@pytest.mark.parametrize(
    ("path", "complaint"),
    [
        ("runtime.demo", "must look like 'package.module:attribute'"),
        (":AGENTS", "must look like"),
        ("runtime.demo:", "must look like"),
        ("runtime.no_such_module:AGENTS", "cannot import 'runtime.no_such_module'"),
        ("runtime.demo:MISSING", "has no attribute 'MISSING'"),
        (f"{HERE}:UNNAMED", "has no name"),
        (f"{HERE}:DUPLICATES", "two agents are named 'delta'"),
        (f"{HERE}:NOT_AGENTS", "is not a pydantic-ai Agent"),
        (f"{HERE}:NOT_A_COLLECTION", "not a mapping of id -> Agent"),
        ("runtime.demo:CITY_QUESTION", "not a mapping of id -> Agent"),
    ],
)
def test_a_bad_registry_path_is_a_clear_error_naming_it(path: str, complaint: str) -> None:
    with pytest.raises(ValueError, match="agent registry path") as caught:
        load_registry(path)

    assert repr(path) in str(caught.value)
    assert complaint in str(caught.value)


def test_the_registry_is_an_immutable_copy() -> None:
    source = dict(agents.TEST_AGENTS)
    registry = AgentRegistry(source)
    source.clear()

    assert registry.ids() == [
        "bulky-agent",
        "dispatcher",
        "flaky-agent",
        "gated-agent",
        "guess-agent",
        "mixed-agent",
        "payment-agent",
        "release-agent",
        "slow-agent",
        "survey-agent",
        "trip-agent",
    ]
    assert not hasattr(registry, "__setitem__")


def test_an_unknown_id_is_agent_not_found() -> None:
    registry = AgentRegistry(AGENTS)

    with pytest.raises(AgentNotFoundError):
        registry.get_agent("nobody")
    with pytest.raises(AgentNotFoundError):
        registry.description("nobody")
    with pytest.raises(KeyError):
        registry["nobody"]
