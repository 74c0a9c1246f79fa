"""Several calls at once: all_or_nothing, best_effort and Saga, with calls that wait for an
``asyncio.Event`` (no sleeps), so every interleaving below is exact."""

from __future__ import annotations

import ast
import asyncio
import inspect
import logging
import re
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest

from llamon_agent.client import (
    Call,
    Outcome,
    Saga,
    SagaFailedError,
    StepContext,
    all_or_nothing,
    best_effort,
    saga_step,
)
from llamon_agent.core.classify import classify_exception
from llamon_agent.core.codes import ErrorCode
from llamon_agent.exceptions import (
    ComponentInvokeError,
    LlamonApplicationError,
    RegistryTimeoutError,
)


class Gate:
    """A call that waits until released, then returns ``value`` or raises ``error``; it
    records whether it saw ``CancelledError``."""

    def __init__(self, value: object = None) -> None:
        self.value = value
        self.error: BaseException | None = None
        self.started = asyncio.Event()
        self.released = asyncio.Event()
        self.cancelled = False
        self.finished = False

    def release(self, error: BaseException | None = None) -> None:
        self.error = error
        self.released.set()

    async def __call__(self) -> object:
        self.started.set()
        try:
            await self.released.wait()
        except asyncio.CancelledError:
            self.cancelled = True
            raise
        self.finished = True
        if self.error is not None:
            raise self.error
        return self.value


async def _all_started(*gates: Gate) -> None:
    for gate in gates:
        await gate.started.wait()


def _network_failure() -> ComponentInvokeError:
    """A generic wrapper whose cause decides its classification (network_error)."""
    try:
        raise ComponentInvokeError("lookup failed") from ConnectionRefusedError("refused")
    except ComponentInvokeError as exc:
        return exc


# all_or_nothing


async def test_all_or_nothing_returns_results_in_call_order() -> None:
    gates = [Gate("a"), Gate("b"), Gate("c")]
    running = asyncio.create_task(all_or_nothing(gates))
    await _all_started(*gates)
    for gate in reversed(gates):  # finish in the reverse order
        gate.release()
        await asyncio.sleep(0)
    assert await running == ["a", "b", "c"]


async def test_all_or_nothing_accepts_awaitables_and_callables() -> None:
    async def answer(value: str) -> str:
        return value

    calls: list[Call[str]] = [answer("x"), lambda: answer("y")]
    assert await all_or_nothing(calls) == ["x", "y"]
    assert await all_or_nothing([]) == []


async def test_the_first_failure_wins_and_the_others_are_cancelled() -> None:
    slow, failing, later = Gate("slow"), Gate(), Gate()
    running = asyncio.create_task(all_or_nothing([slow, failing, later]))
    await _all_started(slow, failing, later)
    error = _network_failure()
    before = classify_exception(error)
    failing.release(error)
    with pytest.raises(ComponentInvokeError) as raised:
        await running
    assert raised.value is error
    assert slow.cancelled
    assert later.cancelled
    assert not slow.finished
    assert not later.finished
    after = classify_exception(raised.value)
    assert (
        after.as_tuple()
        == before.as_tuple()
        == (
            ErrorCode.UPSTREAM_UNAVAILABLE,
            "network_error",
            True,
        )
    )
    assert isinstance(raised.value.__cause__, ConnectionRefusedError)


async def test_a_failure_leaves_the_caller_uncancelled() -> None:
    async def fails() -> object:
        raise ValueError("no")

    current = asyncio.current_task()
    assert current is not None
    calls: list[Call[object]] = [Gate(), fails]
    with pytest.raises(ValueError, match="no"):
        await all_or_nothing(calls)
    assert current.cancelling() == 0


async def test_two_failures_at_once_raise_the_first() -> None:
    first, second = Gate(), Gate()
    running = asyncio.create_task(all_or_nothing([second, first]))
    await _all_started(first, second)
    timeout = RegistryTimeoutError("registry slow")
    first.release(timeout)
    second.release(ValueError("too late"))
    with pytest.raises(RegistryTimeoutError) as raised:
        await running
    assert raised.value is timeout
    assert classify_exception(raised.value).code is ErrorCode.UPSTREAM_TIMEOUT


async def test_coroutines_that_never_started_are_closed() -> None:
    async def fails() -> str:
        raise ValueError("at once")

    async def never() -> str:  # pragma: no cover - cancelled before it starts
        return "never"

    unstarted = never()
    with pytest.raises(ValueError, match="at once"):
        await all_or_nothing([fails(), unstarted])
    assert inspect.getcoroutinestate(unstarted) == inspect.CORO_CLOSED


async def test_a_call_cancelled_on_its_own_fails_all_or_nothing() -> None:
    slow = Gate()
    own = asyncio.CancelledError("the remote task was cancelled")

    async def cancelled_remotely() -> object:
        await slow.started.wait()
        raise own

    calls: list[Call[object]] = [slow, cancelled_remotely]
    with pytest.raises(asyncio.CancelledError) as raised:
        await all_or_nothing(calls)
    assert raised.value is own
    assert slow.cancelled
    current = asyncio.current_task()
    assert current is not None
    assert current.cancelling() == 0  # this caller was never cancelled


async def test_cancelling_all_or_nothing_cancels_every_call() -> None:
    gates = [Gate(), Gate()]
    running = asyncio.create_task(all_or_nothing(gates))
    await _all_started(*gates)
    running.cancel()
    with pytest.raises(asyncio.CancelledError):
        await running
    assert all(gate.cancelled for gate in gates)


# best_effort


async def test_best_effort_keeps_every_success_and_every_typed_failure_in_order() -> None:
    ok, network, limited, plain = Gate("fine"), Gate(), Gate(), Gate()
    running = asyncio.create_task(best_effort([ok, network, limited, plain]))
    await _all_started(ok, network, limited, plain)
    plain.release(ValueError("a bug"))
    limited.release(
        LlamonApplicationError(
            "RATE_LIMITED", "quota_exhausted", retriable=True, retry_after_ms=1500
        )
    )
    network.release(_network_failure())
    ok.release()
    outcomes = await running
    assert [outcome.ok for outcome in outcomes] == [True, False, False, False]
    assert outcomes[0] == Outcome(ok=True, value="fine")
    assert outcomes[0].unwrap() == "fine"
    typed = [(o.error_code, o.reason, o.retriable, o.retry_after_ms) for o in outcomes[1:]]
    assert typed == [
        (ErrorCode.UPSTREAM_UNAVAILABLE, "network_error", True, None),
        (ErrorCode.RATE_LIMITED, "quota_exhausted", True, 1500),
        (ErrorCode.INTERNAL_ERROR, "value_error", False, None),
    ]
    assert isinstance(outcomes[3].error, ValueError)
    assert outcomes[3].value is None
    with pytest.raises(ValueError, match="a bug"):
        outcomes[3].unwrap()


async def test_best_effort_never_cancels_the_others_for_a_failure() -> None:
    failing, slow = Gate(), Gate("late")
    running = asyncio.create_task(best_effort([failing, slow]))
    await _all_started(failing, slow)
    failing.release(ValueError("no"))
    await asyncio.sleep(0)
    slow.release()
    outcomes = await running
    assert not slow.cancelled
    assert [o.ok for o in outcomes] == [False, True]
    assert outcomes[1].value == "late"


async def test_a_call_cancelled_on_its_own_is_a_failure_in_best_effort() -> None:
    async def cancelled_remotely() -> str:
        raise asyncio.CancelledError

    outcomes = await best_effort([cancelled_remotely])
    assert not outcomes[0].ok
    assert isinstance(outcomes[0].error, asyncio.CancelledError)


async def test_cancelling_best_effort_propagates() -> None:
    gates = [Gate(), Gate()]
    running = asyncio.create_task(best_effort(gates))
    await _all_started(*gates)
    running.cancel()
    with pytest.raises(asyncio.CancelledError):
        await running
    assert all(gate.cancelled for gate in gates)


# Saga


class Ledger:
    """Steps and compensations that log what they did, in order."""

    def __init__(self) -> None:
        self.log: list[str] = []
        self.keys: dict[str, str] = {}

    def action(self, name: str, error: BaseException | None = None) -> Callable[..., Any]:
        async def act(ctx: StepContext) -> str:
            self.keys[name] = ctx.idempotency_key
            self.log.append(f"do {name}")
            if error is not None:
                raise error
            return f"{name}-done"

        act.__name__ = name
        return act

    def undo(self, name: str, error: BaseException | None = None) -> Callable[..., Any]:
        async def compensate(ctx: StepContext, result: object) -> None:
            self.log.append(f"undo {name} {result}")
            if error is not None:
                raise error

        return compensate


async def test_a_saga_runs_its_steps_in_order_and_returns_their_results() -> None:
    seen: list[tuple[Any, ...]] = []

    async def second(ctx: StepContext) -> int:
        seen.append(ctx.results)
        return 2

    async def first(ctx: StepContext) -> int:
        seen.append(ctx.results)
        return 1

    saga = Saga(saga_step(first), saga_step(second))
    assert await saga.run() == [1, 2]
    assert seen == [(), (1,)]


async def test_a_failing_step_compensates_the_completed_steps_in_reverse() -> None:
    ledger = Ledger()
    error = _network_failure()
    saga = Saga(
        saga_step(ledger.action("reserve"), ledger.undo("reserve")),
        saga_step(ledger.action("notify")),  # nothing to undo
        saga_step(ledger.action("charge"), ledger.undo("charge")),
        saga_step(ledger.action("ship", error), ledger.undo("ship")),
        saga_step(ledger.action("never"), ledger.undo("never")),
    )
    with pytest.raises(SagaFailedError) as raised:
        await saga.run()
    assert ledger.log == [
        "do reserve",
        "do notify",
        "do charge",
        "do ship",
        "undo charge charge-done",
        "undo reserve reserve-done",
    ]
    failed = raised.value
    assert failed.failed_step == "ship"
    assert failed.error is error
    assert failed.__cause__ is error
    assert failed.compensation_failures == []
    assert classify_exception(failed).as_tuple() == classify_exception(error).as_tuple()
    assert classify_exception(failed).as_tuple() == (
        ErrorCode.UPSTREAM_UNAVAILABLE,
        "network_error",
        True,
    )


async def test_a_fully_undone_saga_keeps_the_steps_retry_after() -> None:
    ledger = Ledger()
    limited = LlamonApplicationError(
        "RATE_LIMITED", "quota_exhausted", retriable=True, retry_after_ms=1500
    )
    saga = Saga(
        saga_step(ledger.action("reserve"), ledger.undo("reserve")),
        saga_step(ledger.action("pay", limited)),
    )
    with pytest.raises(SagaFailedError) as raised:
        await saga.run()
    found = classify_exception(raised.value)
    assert (found.code, found.reason, found.retriable, found.retry_after_ms) == (
        ErrorCode.RATE_LIMITED,
        "quota_exhausted",
        True,
        1500,
    )


async def test_a_failing_compensation_is_recorded_and_named_in_the_error(
    caplog: pytest.LogCaptureFixture,
) -> None:
    ledger = Ledger()
    step_error = LlamonApplicationError("NOT_FOUND", "account_not_found", retriable=True)
    saga = Saga(
        saga_step(ledger.action("reserve"), ledger.undo("reserve")),
        saga_step(ledger.action("charge"), ledger.undo("charge", RegistryTimeoutError("slow"))),
        saga_step(ledger.action("ship", step_error)),
    )
    with (
        caplog.at_level(logging.WARNING, logger="llamon_agent.client"),
        pytest.raises(SagaFailedError) as raised,
    ):
        await saga.run()
    assert ledger.log[-2:] == ["undo charge charge-done", "undo reserve reserve-done"]
    failed = raised.value
    assert [(f.step, f.index) for f in failed.compensation_failures] == [("charge", 1)]
    assert isinstance(failed.compensation_failures[0].error, RegistryTimeoutError)
    assert failed.compensation_failures[0].classification.code is ErrorCode.UPSTREAM_TIMEOUT
    assert "'ship'" in str(failed)
    assert "'charge'" in str(failed)
    assert "NOT_FOUND" in str(failed)
    assert "UPSTREAM_TIMEOUT" in str(failed)
    # the caller gets the failing step's code and reason; a half-undone saga is not retriable
    assert failed.original.as_tuple() == (ErrorCode.NOT_FOUND, "account_not_found", True)
    assert classify_exception(failed).as_tuple() == (
        ErrorCode.NOT_FOUND,
        "account_not_found",
        False,
    )
    envelope = failed.to_dict()
    assert envelope["step_id"] == "ship"
    assert envelope["compensation_failed_names"] == ["charge"]
    assert any("charge" in record.getMessage() for record in caplog.records)


async def test_idempotency_keys_are_stable_per_run_and_step_and_distinct_otherwise() -> None:
    attempts: list[str] = []

    async def flaky(ctx: StepContext) -> str:
        for _ in range(2):  # a step retried inside one run keeps its key
            attempts.append(ctx.idempotency_key)
        return ctx.idempotency_key

    async def other(ctx: StepContext) -> str:
        return ctx.idempotency_key

    saga = Saga(saga_step(flaky), saga_step(other))
    first = await saga.run(run_id="order-42")
    again = await saga.run(run_id="order-42")
    fresh = await saga.run()
    assert attempts[0] == attempts[1]
    assert first == again
    assert len(set(first)) == 2
    assert not set(fresh) & set(first)
    for key in first:
        assert str(uuid.UUID(key)) == key
    context = StepContext("order-42", 0, "flaky")
    assert context.idempotency_key == first[0]
    assert context.compensation_key not in first


# the document


_DOC = (Path(__file__).parents[2] / "docs" / "client-multi.md").read_text(encoding="utf-8")
_BLOCKS: list[str] = re.findall(r"```python\n(.*?)```", _DOC, flags=re.DOTALL)


async def test_every_python_block_of_the_document_runs() -> None:
    assert len(_BLOCKS) >= 3
    namespace: dict[str, Any] = {}
    for block in _BLOCKS:
        code = compile(block, "client-multi.md", "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT)
        result: Awaitable[None] | None = eval(code, namespace)  # noqa: S307 -- our own docs
        if result is not None:
            await result


async def test_an_outcome_keeps_the_called_agents_own_code() -> None:
    from llamon_agent.client import RemoteAuthRequiredError

    refused = RemoteAuthRequiredError(
        "agent 'b' refused the credential", reason="auth_failed", http_status=401, agent="b"
    )

    async def call() -> str:
        raise refused

    (outcome,) = await best_effort([call])
    assert (outcome.error_code, outcome.reason, outcome.error) == (
        ErrorCode.AUTH_REQUIRED,
        "auth_failed",
        refused,
    )
    # re-raised from an agent, the same failure answers one hop up
    assert classify_exception(refused).code is ErrorCode.UPSTREAM_UNAVAILABLE
