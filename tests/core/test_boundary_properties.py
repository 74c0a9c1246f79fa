"""The security boundary, property-tested: 9,800 generated cases per run (200 more over a real
server in tests/e2e/a2a/test_boundary_e2e.py make 10,000).

Every secret kind (``secret_samples``), plain or percent-, base64- or JSON-escaped, carried
by every way an exception carries text (its message, args, ``__cause__``/``__context__``,
notes, ExceptionGroups, a ServerError's data, httpx request URLs and headers, pydantic
validation input), must not come back out of any surface: error data and failure records,
JSON-RPC errors, the executor's events (send and stream), and log lines of every logger at
every level. ``tests/e2e/a2a/test_boundary_e2e.py`` runs 200 of the same cases over a
real server. Deterministic: hypothesis is derandomized, no example database.
"""

from __future__ import annotations

import asyncio
import json
import logging

from a2a.utils.errors import ServerError
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from llamon_agent.a2a.protocol import protocol_error_for_exception, with_protocol_data
from llamon_agent.core.error_data import application_error_to_parts
from llamon_agent.core.errors import error_data_for_exception
from llamon_agent.core.failures import FailureRecord
from llamon_agent.core.logs import install_log_scrubbing
from llamon_agent.core.settings import set_debug_errors
from llamon_agent.testing import stub_executor_run
from tests._support.boundary_cases import Case, build, cases, reveals


def _settings(examples: int) -> settings:
    return settings(
        max_examples=examples,
        deadline=None,
        derandomize=True,
        database=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
    )


def _dump(value: object) -> str:
    return json.dumps(value, ensure_ascii=False, default=str)


def _assert_hidden(case: Case, emit: object) -> None:
    """``emit(text)`` shows nothing of the secret; a piece that ``emit`` also shows for a
    neutral value of the same length is fixed text of ours, and the example is skipped."""
    run = emit  # a callable str -> str
    assert callable(run)
    output = run(case.text)
    value = case.sample.value
    if not reveals(value, output):
        return
    neutral = Case(
        sample=type(case.sample)(
            case.sample.kind, "N" * len(value), case.sample.text.replace(value, "N" * len(value))
        ),
        encoding=case.encoding,
        carrier=case.carrier,
    )
    assume(not reveals(value, run(neutral.text)))
    raise AssertionError(f"{case!r} leaked into: {output}")


def _boundary_outputs(carrier: str, text: str) -> str:
    exc = build(carrier, text)
    data = error_data_for_exception(exc)
    parts = [part.model_dump(mode="json") for part in application_error_to_parts(data)]
    outputs: list[object] = [data.to_wire(), FailureRecord.from_exception(exc).to_dict(), parts]
    if isinstance(exc, ServerError):
        for error in (with_protocol_data(exc), protocol_error_for_exception(exc)):
            assert error.error is not None
            outputs.append(error.error.model_dump(mode="json"))
    else:
        wrapped = protocol_error_for_exception(exc if isinstance(exc, Exception) else Exception())
        assert wrapped.error is not None
        outputs.append(wrapped.error.model_dump(mode="json"))
    return _dump(outputs)


@_settings(3900)
@given(case=cases(), debug=st.booleans())
def test_error_data_records_and_jsonrpc_errors_hide_every_secret(case: Case, debug: bool) -> None:
    set_debug_errors(debug)
    try:
        _assert_hidden(case, lambda text: _boundary_outputs(case.carrier, text))
    finally:
        set_debug_errors(None)


class _Lines(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.setFormatter(logging.Formatter("%(levelname)s %(name)s %(message)s"))
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(self.format(record))


_LOGGERS = (
    "sse_starlette.sse",
    "starlette",
    "uvicorn.error",
    "httpx",
    "httpcore.connection",
    "asyncpg.pool",
    "sqlalchemy.engine.Engine",
    "aiosqlite",
    "a2a.server.apps.jsonrpc.jsonrpc_app",
    "llamon_agent.a2a",
    "some_other_library",
)
_LEVELS = (logging.DEBUG, logging.INFO, logging.WARNING, logging.ERROR, logging.CRITICAL)


def _logged(name: str, level: int, carrier: str, text: str) -> str:
    logger = logging.getLogger(name)
    handler = _Lines()
    previous, propagate = logger.level, logger.propagate
    logger.addHandler(handler)
    logger.setLevel(logging.DEBUG)
    logger.propagate = False
    try:
        exc = build(carrier, text)
        logger.log(level, "request failed: %s (%r)", text, {"body": text})
        logger.log(level, f"chunk: {text}")
        logger.log(level, "while handling", exc_info=exc)
    finally:
        logger.removeHandler(handler)
        logger.setLevel(previous)
        logger.propagate = propagate
    return "\n".join(handler.lines)


@_settings(3900)
@given(case=cases(), name=st.sampled_from(_LOGGERS), level=st.sampled_from(_LEVELS))
def test_log_lines_of_every_logger_at_every_level_hide_every_secret(
    case: Case, name: str, level: int
) -> None:
    install_log_scrubbing()
    _assert_hidden(case, lambda text: _logged(name, level, case.carrier, text))


def _executor_events(carrier: str, text: str, streaming: bool) -> str:
    async def run() -> str:
        events = await stub_executor_run(
            agent_dispatch_raises=build(carrier, text), streaming=streaming
        )
        return _dump([event.model_dump(mode="json") for event in events])

    failures = logging.getLogger("llamon_agent.failures")
    handler = _Lines()
    failures.addHandler(handler)
    try:
        events = asyncio.run(run())
    finally:
        failures.removeHandler(handler)
    return events + "\n" + "\n".join(handler.lines)


@_settings(2000)
@given(case=cases(), streaming=st.booleans())
def test_executor_events_and_failure_lines_hide_every_secret(case: Case, streaming: bool) -> None:
    _assert_hidden(case, lambda text: _executor_events(case.carrier, text, streaming))
