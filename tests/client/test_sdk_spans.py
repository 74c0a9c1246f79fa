"""a2a-sdk's per-call spans on a class of a2a-sdk's own shape, and on ``AgentClient``'s
transport: started only while a tracer provider is set; a failure is recorded by its
reason, never its text."""

from __future__ import annotations

import pytest
from a2a.utils.telemetry import trace_class
from opentelemetry import trace
from opentelemetry.trace import StatusCode

from llamon_agent.a2a.agent import AgentContext
from llamon_agent.a2a.server import create_app
from llamon_agent.client import AgentClient, RetryPolicy
from llamon_agent.client.sdk_spans import spans_only_when_traced
from llamon_agent.exceptions import LlamonError
from tests._support.a2a_server import make_card, running_server
from tests._support.otel import StartedSpans, span_exporter, span_texts, spans_named


@trace_class()
class Traced:
    """A class traced as a2a-sdk traces its own."""

    async def fetch(self, value: int) -> int:
        return value + 1

    def name(self) -> str:
        return "traced"

    def kept(self) -> str:
        return "base"


@spans_only_when_traced
class Checked(Traced):
    """The shape llamon uses: a checked class of a2a-sdk's, subclassed."""


class Own(Checked):
    def kept(self) -> str:
        return f"own, then {super().kept()}"


async def _called(own: Own) -> tuple[int, str, str]:
    return await own.fetch(1), own.name(), own.kept()


async def test_a_checked_class_starts_the_span_only_while_a_provider_is_set(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    exporter = span_exporter()
    started = StartedSpans(monkeypatch)
    assert await _called(Own()) == (2, "traced", "own, then base")
    traced_names = [name for name in started.names if ".Traced." in name]
    assert traced_names == [f"{__name__}.Traced.{m}" for m in ("fetch", "name", "kept")]
    assert {s.name for s in exporter.get_finished_spans()} >= set(traced_names)

    started.names.clear()
    monkeypatch.setattr(trace, "_TRACER_PROVIDER", None)
    assert await _called(Own()) == (2, "traced", "own, then base")
    assert started.names == []


def test_only_inherited_traced_methods_are_replaced() -> None:
    @spans_only_when_traced
    class Defines(Traced):
        def kept(self) -> str:
            return "its own"

    assert Defines.__dict__["kept"].__qualname__.endswith("Defines.kept")  # left as it is
    assert Checked.fetch is not Traced.fetch
    assert Checked.fetch.__wrapped__ is Traced.fetch.__wrapped__  # type: ignore[attr-defined]
    assert Checked.name.__name__ == "name"

    @spans_only_when_traced
    class Again(Own):
        """A subclass of a checked class: nothing left to check."""

    assert "fetch" not in Again.__dict__


ONCE = RetryPolicy(max_attempts=1, base_delay=0.0, max_delay=0.0)


async def echo(ctx: AgentContext) -> str:
    return f"echo {ctx.text}"


async def test_a_called_agent_that_went_away_is_a_reason_in_the_span_not_its_address() -> None:
    """``AgentClient`` with a provider set: a send to an agent whose server stopped (the
    connection refused) is, in a2a-sdk's transport span, the failure's reason (status
    ERROR, ``error.type``), never the error's text or traceback, which name the agent's
    address; sends before and after (to an agent that answers) are traced as successes."""
    exporter = span_exporter()
    server = running_server(create_app(echo, make_card()))
    url = await server.__aenter__()
    stopped = False
    try:
        async with AgentClient(url, retry=ONCE) as client:
            first = await client.send("one")
            await server.__aexit__(None, None, None)
            stopped = True
            with pytest.raises(LlamonError) as raised:
                await client.send("two")
    finally:
        if not stopped:
            await server.__aexit__(None, None, None)
    assert first.text == "echo one"
    assert raised.value.to_dict()["retryable"] is True
    async with (
        running_server(create_app(echo, make_card())) as again,
        AgentClient(again, retry=ONCE) as client,
    ):
        answered = await client.send("three")
    assert answered.text == "echo three"
    port = url.rstrip("/").rsplit(":", 1)[1]
    texts = list(span_texts(exporter))
    for location in ("127.0.0.1", f":{port}", "Connect call failed", "connection attempts"):
        assert not [text for text in texts if location in text], location
    name = "a2a.client.transports.jsonrpc.JsonRpcTransport.send_message"
    before, failed, after = spans_named(exporter, name)
    assert failed.status.status_code == StatusCode.ERROR
    assert (failed.attributes or {}).get("error.type") == failed.status.description
    assert failed.status.description == raised.value.to_dict()["reason"]
    assert failed.events == ()  # no exception event: its text and traceback stay out
    assert before.status.status_code == after.status.status_code == StatusCode.OK
