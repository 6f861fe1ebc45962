"""``weather-agent``: a tool that suspends for data (docs/writing-agents.md "Demo agents";
the example of Mastra's reference page).

``What's the weather like?``: the agent calls ``ask_city``, which ``suspend()``-s with the
question and ``resumeSchema`` = ``City``; resumed with ``{"name": "San Francisco"}`` it returns
the (fake, deterministic) forecast and the agent reports it. A prompt naming a known city
gets its forecast straight away.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel
from pydantic_ai import Agent, RunContext
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart
from pydantic_ai.models.function import AgentInfo
from pydantic_ai.tools import DeferredToolRequests

from ..running.suspension import suspend
from ._script import latest_prompt, latest_returns, scripted_model

CITY_QUESTION = "Which city do you want the weather for?"

_CONDITIONS = ["sunny", "partly cloudy", "foggy", "light rain", "windy"]
KNOWN_CITIES = ["San Francisco", "Paris", "Hong Kong", "London", "Tokyo"]


class City(BaseModel):
    """The city to report the weather for."""

    name: str


def forecast(city: str) -> dict[str, Any]:
    """A fake forecast, the same for the same city name."""
    seed = sum(city.encode())
    return {"city": city, "temperatureC": 8 + seed % 20, "conditions": _CONDITIONS[seed % len(_CONDITIONS)]}


async def _weather_script(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    for ret in latest_returns(messages):
        if ret.tool_name in {"ask_city", "get_forecast"} and isinstance(ret.content, dict):
            f = ret.content
            return ModelResponse(
                parts=[TextPart(f"The weather in {f['city']}: {f['conditions']}, {f['temperatureC']}°C.")]
            )
    prompt = latest_prompt(messages).lower()
    named = [city for city in KNOWN_CITIES if city.lower() in prompt]
    if named:
        return ModelResponse(parts=[ToolCallPart("get_forecast", {"city": named[0]})])
    return ModelResponse(parts=[ToolCallPart("ask_city", {})])


weather_agent = Agent(
    scripted_model(_weather_script, model_name="runsgate-demo-weather"),
    name="weather-agent",
    deps_type=type(None),
    description="Reports the weather; asks which city when the prompt does not say.",
    instructions=(
        "You report the weather. If the user named a city, call get_forecast; otherwise call ask_city "
        "to ask them. Then describe the forecast."
    ),
    output_type=[str, DeferredToolRequests],
)


@weather_agent.tool
async def ask_city(ctx: RunContext[None]) -> dict[str, Any]:
    """Ask the user which city they want the weather for, then return that city's forecast."""
    city = suspend(ctx, {"question": CITY_QUESTION}, resume_schema=City)
    return forecast(city.name)


@weather_agent.tool_plain
async def get_forecast(city: str) -> dict[str, Any]:
    """The forecast for ``city``: temperature (°C) and conditions."""
    return forecast(city)
