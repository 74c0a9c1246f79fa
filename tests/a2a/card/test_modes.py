"""Card modes written as short names (``"text"``, ``"data"``, ``"file"``) are refused.

A part's media type is matched against the card's modes, so such a card would refuse
every message with -32005. The server refuses to start with it and ``llamon card lint``
flags it, both saying which MIME type to write instead.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from typing import Any

import pytest
from starlette.applications import Starlette
from starlette.responses import JSONResponse
from starlette.routing import Route
from typer.testing import CliRunner

from llamon_agent.a2a.agent import AgentContext
from llamon_agent.a2a.card import mode_problems
from llamon_agent.a2a.card.cli import EXIT_ERRORS, card_app
from llamon_agent.a2a.server import create_app
from tests._support.a2a_server import make_card, running_server

runner = CliRunner()
TEXT_ADVICE = "'text' is a short name, not a MIME type: write 'text/plain'"
DATA_ADVICE = "'data' is a short name, not a MIME type: write 'application/json'"
FILE_ADVICE = "'file' is a short name, not a MIME type: write the file types you accept"


async def echo(ctx: AgentContext) -> str:
    return f"echo {ctx.text}"


def sample_style_card() -> dict[str, Any]:
    """A card with the short mode names of a2a-sdk's samples, as JSON."""
    card = make_card().model_dump(mode="json", by_alias=True, exclude_none=True)
    card["defaultInputModes"] = ["text", "data"]
    card["defaultOutputModes"] = ["text/plain"]
    card["skills"][0]["inputModes"] = ["file"]
    return card


def test_create_app_refuses_short_mode_names_saying_what_to_write() -> None:
    card = make_card().model_copy(update={"default_input_modes": ["text", "data"]})
    with pytest.raises(ValueError, match="modes must be MIME types") as caught:
        create_app(echo, card)
    message = str(caught.value)
    assert "defaultInputModes[0]: " + TEXT_ADVICE in message
    assert "defaultInputModes[1]: " + DATA_ADVICE in message


def test_mode_problems_covers_skills_and_accepts_mime_types() -> None:
    card = make_card().model_copy(deep=True)
    assert mode_problems(card) == []
    card.skills[0].input_modes = ["file", "image/*"]
    [problem] = mode_problems(card)
    assert (problem.rule, problem.severity, problem.path) == (
        "mode_not_mime",
        "error",
        "skills[0].inputModes[0]",
    )
    assert problem.message.startswith(FILE_ADVICE)


@pytest.fixture
async def sample_card_url() -> AsyncIterator[str]:
    """A plain Starlette server publishing the sample-style card at the well-known path."""

    async def card(_: object) -> JSONResponse:
        return JSONResponse(sample_style_card())

    app = Starlette(routes=[Route("/.well-known/agent-card.json", card)])
    async with running_server(app) as url:
        yield url


async def test_card_lint_on_a_served_card_says_what_to_write(sample_card_url: str) -> None:
    # The CLI fetches with a blocking client: run it off the loop that serves the card.
    result = await asyncio.to_thread(runner.invoke, card_app, ["lint", "--json", sample_card_url])
    assert result.exit_code == EXIT_ERRORS, result.output
    findings = {
        finding["path"]: finding["message"]
        for finding in json.loads(result.output)["findings"]
        if finding["rule"] == "mode_not_mime"
    }
    assert findings["defaultInputModes[0]"] == TEXT_ADVICE
    assert findings["defaultInputModes[1]"] == DATA_ADVICE
    assert findings["skills[0].inputModes[0]"].startswith(FILE_ADVICE)
