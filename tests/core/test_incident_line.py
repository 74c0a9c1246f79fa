"""The incident line of an unmapped exception: the same traceback text as
``traceback.format_exception``, scrubbed once, however often the same place fails."""

from __future__ import annotations

import logging
import sys
import traceback
from collections.abc import Callable, Iterator

import pytest

from llamon_agent.core.logs import install_log_scrubbing
from llamon_agent.core.messages import _exception_line, _formatted_traceback, incident_id_for
from llamon_agent.core.scrub import scrub_log_text

SECRET_TEXT = "connect to postgresql://app:s3cr3t-pw@db.internal:5432/orders failed"


def _inner() -> None:
    raise RuntimeError(SECRET_TEXT)


def _outer() -> None:
    _inner()


def _caught(make: Callable[[], object]) -> BaseException:
    try:
        make()
    except BaseException as exc:  # every kind is formatted
        return exc
    raise AssertionError("nothing was raised")


def _plain() -> object:
    _outer()
    return None


def _with_context() -> object:
    try:
        _outer()
    except RuntimeError:
        raise ValueError("while handling")  # noqa: B904 - the context is shown
    return None


def _with_cause() -> object:
    try:
        _outer()
    except RuntimeError as exc:
        raise KeyError("wrapped") from exc
    return None


def _context_suppressed() -> object:
    try:
        _outer()
    except RuntimeError:
        raise LookupError("clean") from None
    return None


def _group() -> object:
    first, second = _caught(_plain), _caught(_with_cause)
    assert isinstance(first, Exception)
    assert isinstance(second, Exception)
    raise ExceptionGroup("many", [first, second])


def _with_notes() -> object:
    exc = RuntimeError("noted")
    exc.add_note("a note with token=abcdef0123456789abcdef0123456789")
    raise exc


def _syntax() -> object:
    return compile("def broken(:\n    pass\n", "<bench>", "exec")


def _recursion(depth: int = 0) -> object:
    return _recursion(depth + 1)


class _BadStr(Exception):
    def __str__(self) -> str:
        raise TypeError("no text")


def _bad_str() -> object:
    raise _BadStr()


def _multi_line() -> object:
    values: dict[str, int] = {}
    return (
        values["first"]
        + values["second"]
    )  # fmt: skip


CASES: dict[str, Callable[[], object]] = {
    "plain": _plain,
    "context": _with_context,
    "cause": _with_cause,
    "context suppressed": _context_suppressed,
    "group": _group,
    "notes": _with_notes,
    "syntax error": _syntax,
    "recursion": _recursion,
    "str fails": _bad_str,
    "multi-line expression": _multi_line,
}


@pytest.mark.parametrize("case", list(CASES))
def test_the_traceback_text_is_format_exceptions(case: str) -> None:
    for _ in range(3):  # the first time formats, the others remember
        exc = _caught(CASES[case])
        assert _formatted_traceback(exc) == "".join(traceback.format_exception(exc))


def test_an_exception_without_a_traceback() -> None:
    exc = RuntimeError(SECRET_TEXT)
    assert _formatted_traceback(exc) == "".join(traceback.format_exception(exc))


def test_the_traceback_limit_is_honoured(monkeypatch: pytest.MonkeyPatch) -> None:
    exc = _caught(_plain)
    full = _formatted_traceback(exc)
    monkeypatch.setattr(sys, "tracebacklimit", 1, raising=False)
    assert _formatted_traceback(exc) == "".join(traceback.format_exception(exc))
    assert _formatted_traceback(exc) != full


class _Capture(logging.Handler):
    def __init__(self) -> None:
        super().__init__()
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(self.format(record))


@pytest.fixture
def captured() -> Iterator[_Capture]:
    logger = logging.getLogger("llamon_agent.errors")
    handler = _Capture()
    previous = logger.level
    logger.addHandler(handler)
    logger.setLevel(logging.ERROR)
    try:
        yield handler
    finally:
        logger.removeHandler(handler)
        logger.setLevel(previous)


@pytest.mark.parametrize("case", ["plain", "cause", "notes"])
def test_the_incident_line_is_the_scrubbed_line(captured: _Capture, case: str) -> None:
    install_log_scrubbing()
    for _ in range(2):
        exc = _caught(CASES[case])
        incident = incident_id_for(exc)
        trace = "".join(traceback.format_exception(exc))
        line = f"incident {incident}: unmapped {type(exc).__name__}\n" + scrub_log_text(
            trace, max_length=20_000
        )
        assert captured.lines[-1] == scrub_log_text(line, max_length=20_000)
        assert captured.lines[-1] == line
        assert "s3cr3t-pw" not in line
        assert "db.internal" not in line  # no backend address in a log line either
        assert "5432" not in line
        assert "abcdef0123456789abcdef0123456789" not in line


def test_the_incident_is_logged_once(captured: _Capture) -> None:
    exc = _caught(_plain)
    assert incident_id_for(exc) == incident_id_for(exc)
    assert len(captured.lines) == 1


def test_no_line_when_errors_are_not_logged(captured: _Capture) -> None:
    logging.getLogger("llamon_agent.errors").setLevel(logging.CRITICAL)
    exc = _caught(_plain)
    incident = incident_id_for(exc)
    assert incident == incident_id_for(exc)
    assert len(incident) == 12
    assert captured.lines == []


def _deep(depth: int) -> object:
    if depth:
        return _deep(depth - 1)
    raise RuntimeError(SECRET_TEXT + " " + "x" * 30_000)


def test_a_long_line_is_cut_as_before(captured: _Capture) -> None:
    install_log_scrubbing()
    exc = _caught(lambda: _deep(3))
    incident = incident_id_for(exc)
    trace = "".join(traceback.format_exception(exc))
    line = f"incident {incident}: unmapped RuntimeError\n" + scrub_log_text(
        trace, max_length=20_000
    )
    assert captured.lines[-1] == scrub_log_text(line, max_length=20_000)
    assert captured.lines[-1].endswith("…[truncated]")


class _NoModule(Exception):
    pass


_NoModule.__module__ = None  # type: ignore[assignment]


class _MainError(Exception):
    pass


class _OwnError(Exception):
    pass


_MainError.__module__ = "__main__"


def _noted_none() -> BaseException:
    exc = RuntimeError("notes set to None")
    exc.__notes__ = None  # type: ignore[assignment]
    return exc


LINES: dict[str, Callable[[], BaseException]] = {
    "text": lambda: RuntimeError(SECRET_TEXT),
    "no text": lambda: RuntimeError(),
    "empty text": lambda: ValueError(""),
    "key error": lambda: KeyError("key"),
    "several lines": lambda: RuntimeError("first\nsecond"),
    "several arguments": lambda: OSError(2, "No such file"),
    "str fails": _BadStr,
    "a module's own type": lambda: _OwnError("own"),
    "__main__ module": lambda: _MainError("main"),
    "module not a string": lambda: _NoModule("odd"),
    "notes": lambda: _caught(_with_notes),
    "notes None": _noted_none,
    "syntax error": lambda: _caught(_syntax),
}


@pytest.mark.parametrize("case", list(LINES))
def test_the_exception_line_is_format_exception_onlys(case: str) -> None:
    exc = LINES[case]()
    expected = "".join(traceback.format_exception_only(exc))
    assert _exception_line(exc) == expected
    assert _formatted_traceback(exc) == "".join(traceback.format_exception(exc))
