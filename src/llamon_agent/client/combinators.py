"""Several agent calls at once, where a partial failure is a typed value, never a surprise.

Each ``call`` is an awaitable (``client.send("hi")``) or an async callable taking no
argument (``lambda: client.send("hi")``); nothing here depends on how a call reaches its
agent. Every failure is typed by the one classification table: an ``Outcome`` reads it as
received (``classify_received``: a called agent's own ``errorCode``), a ``Saga`` as your
agent answers it (``classify_exception``: a called agent's failure one hop up).

- ``all_or_nothing(calls)``: every result in order, or the first failure (raised as it
  is) with the other calls cancelled and awaited.
- ``best_effort(calls)``: one ``Outcome`` per call, in order; a failing call never raises.
- ``Saga`` / ``saga_step(action, compensation)``: steps in order; on a failure the
  completed steps are compensated in reverse and ``SagaFailedError`` is raised with the
  failing step's ``errorCode``. Each step gets an idempotency key: use it as the
  ``messageId`` so a retried step does not run twice.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import uuid
from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Final, Generic, TypeVar

from llamon_agent.core.classify import Classification, classify_exception, classify_received
from llamon_agent.core.codes import ErrorCode
from llamon_agent.exceptions import LlamonApplicationError

__all__ = [
    "Call",
    "CompensationFailure",
    "Outcome",
    "Saga",
    "SagaFailedError",
    "SagaStep",
    "StepContext",
    "all_or_nothing",
    "best_effort",
    "saga_step",
]

logger = logging.getLogger("llamon_agent.client")

T = TypeVar("T")

Call = Awaitable[T] | Callable[[], Awaitable[T]]
"""One agent call: an awaitable, or an async callable taking no argument."""


async def _await(call: Call[T]) -> T:
    """Run one call (an awaitable is awaited, a callable is called then awaited)."""
    if inspect.isawaitable(call):
        return await call
    return await call()


def _caller_cancelling() -> bool:
    """Whether the running task is being cancelled (by its caller), rather than a call
    having ended in a ``CancelledError`` of its own (its remote task was cancelled)."""
    current = asyncio.current_task()
    return current is not None and current.cancelling() > 0


class _CallFailed(Exception):
    """Stops a task group for a call that ended in a ``CancelledError`` of its own."""


def _close_unstarted(calls: Sequence[Call[Any]]) -> None:
    """Close coroutine objects that will never run, so none is reported "never awaited"."""
    for call in calls:
        if inspect.iscoroutine(call):
            call.close()


async def all_or_nothing(calls: Iterable[Call[T]]) -> list[T]:
    """Run every call concurrently; their results, in the order of ``calls``.

    The first call to fail decides: the other calls are cancelled and awaited (nothing is
    left running), then that failure is raised as it is -- same type, same classification,
    so a llamon agent that lets it propagate answers with its ``errorCode``. Failures of
    other calls that end while they are being cancelled are dropped (only the first
    counts). A call that ends in ``CancelledError`` of its own (its remote task was
    cancelled) is a failure like any other. Cancelling the caller cancels every call and
    raises ``CancelledError``.
    """
    pending = list(calls)
    first: list[BaseException] = []

    async def run(call: Call[T]) -> T:
        try:
            return await _await(call)
        except Exception as exc:
            if not first:
                first.append(exc)
            raise
        except asyncio.CancelledError as exc:
            if _caller_cancelling():
                raise
            if not first:
                first.append(exc)  # the call was cancelled on its own: a failure
            raise _CallFailed from exc  # a cancelled child would not stop the group

    caller = asyncio.current_task()
    cancelling = caller.cancelling() if caller is not None else 0
    try:
        async with asyncio.TaskGroup() as group:
            tasks = [group.create_task(run(call)) for call in pending]
    except BaseExceptionGroup:
        if not first:  # pragma: no cover - a failed group always recorded its first failure
            raise
        # Python 3.11's TaskGroup leaves the cancel request it made on its parent
        # pending when a child fails; withdraw it, or the caller would look cancelled.
        while caller is not None and caller.cancelling() > cancelling:
            caller.uncancel()
    finally:
        _close_unstarted(pending)
    if first:
        raise first[0]  # outside the handler: no group in its context, its cause untouched
    return [task.result() for task in tasks]


@dataclass(frozen=True, slots=True)
class Outcome(Generic[T]):
    """What one call of ``best_effort`` ended with: its ``value``, or its typed failure.

    ``ok`` is True for a success (``value`` is the result; the error fields are None).
    For a failure, ``error`` is the exception and ``error_code``, ``reason``,
    ``retriable`` and ``retry_after_ms`` are its classification as received (a called
    agent's ``AUTH_REQUIRED`` stays ``AUTH_REQUIRED``: yours to refresh); ``value`` is
    None. Re-raised from your agent, the error answers one hop up.
    """

    ok: bool
    value: T | None = None
    error: BaseException | None = None
    error_code: ErrorCode | None = None
    reason: str | None = None
    retriable: bool | None = None
    retry_after_ms: int | None = None

    @classmethod
    def success(cls, value: T) -> Outcome[T]:
        """A call that returned ``value``."""
        return cls(ok=True, value=value)

    @classmethod
    def failure(cls, error: BaseException) -> Outcome[T]:
        """A call that raised ``error``, typed by the classification table as received."""
        found = classify_received(error)
        return cls(
            ok=False,
            error=error,
            error_code=found.code,
            reason=found.reason,
            retriable=found.retriable,
            retry_after_ms=found.retry_after_ms,
        )

    def unwrap(self) -> T:
        """The value of a success; a failure raises its ``error``."""
        if self.error is not None:
            raise self.error
        return self.value  # type: ignore[return-value]


async def best_effort(calls: Iterable[Call[T]]) -> list[Outcome[T]]:
    """Run every call concurrently; one ``Outcome`` per call, in the order of ``calls``.

    Never raises for a call's failure: every success and every typed failure is returned.
    A call that ends in ``CancelledError`` of its own (its remote task was cancelled) is
    a failure like any other. Cancelling the caller cancels every call and raises
    ``CancelledError``.
    """

    async def run(call: Call[T]) -> Outcome[T]:
        try:
            return Outcome.success(await _await(call))
        except Exception as exc:
            return Outcome.failure(exc)
        except asyncio.CancelledError as exc:
            if _caller_cancelling():
                raise
            return Outcome.failure(exc)

    pending = list(calls)
    try:
        async with asyncio.TaskGroup() as group:
            tasks = [group.create_task(run(call)) for call in pending]
    finally:
        _close_unstarted(pending)
    return [task.result() for task in tasks]


_KEY_NAMESPACE: Final = uuid.UUID("6f1c2a7e-3b0d-5c8e-9a41-2d7e5b9c0f13")
"""The namespace of idempotency keys (a UUID5 of run id, step index and step name)."""


@dataclass(frozen=True, slots=True)
class StepContext:
    """What a saga step's action and compensation are given.

    ``idempotency_key`` is stable for this run and step (the same on every attempt of
    the step, distinct from every other step and run): use it as the ``messageId`` of
    the step's agent call, so a retried step does not run twice on a server that
    de-duplicates by ``messageId``. ``compensation_key`` is the same for the step's
    compensation. ``results`` are the results of the steps completed before this one.
    """

    run_id: str
    index: int
    name: str
    results: tuple[Any, ...] = ()

    @property
    def idempotency_key(self) -> str:
        """This step's key in this run (a UUID string): its action's ``messageId``."""
        return str(uuid.uuid5(_KEY_NAMESPACE, f"{self.run_id}\x00{self.index}\x00{self.name}"))

    @property
    def compensation_key(self) -> str:
        """This step's compensation key in this run (a UUID string, distinct from the
        action's): the compensation's ``messageId``."""
        return str(uuid.uuid5(_KEY_NAMESPACE, f"{self.idempotency_key}\x00compensate"))


Action = Callable[[StepContext], Awaitable[Any]]
Compensation = Callable[[StepContext, Any], Awaitable[object]]


@dataclass(frozen=True, slots=True)
class SagaStep:
    """One step: ``action(ctx)`` does it, ``compensation(ctx, result)`` undoes it (given
    the action's result); None when the step needs no undoing."""

    action: Action
    compensation: Compensation | None
    name: str


def saga_step(
    action: Action, compensation: Compensation | None = None, *, name: str | None = None
) -> SagaStep:
    """A saga step. ``name`` (default: the action's ``__name__``) appears in the saga's
    error and in its idempotency keys."""
    return SagaStep(action, compensation, name or str(getattr(action, "__name__", "step")))


@dataclass(frozen=True, slots=True)
class CompensationFailure:
    """A compensation that failed: the step it belongs to, its error and classification."""

    step: str
    index: int
    error: BaseException
    classification: Classification


class SagaFailedError(LlamonApplicationError):
    """A saga step failed; its completed steps were compensated (in reverse order).

    The caller gets the failing step's ``errorCode`` and ``errorReason`` (``original``
    is its classification, unchanged), and the message names the step and every failed
    compensation with their codes and reasons (never their texts). ``retriable`` (and
    ``retryAfterMs``) are the step's own only when every compensation succeeded: a failed
    compensation (in ``compensation_failures``, each one also logged at WARNING) leaves
    effects in place that a new run would repeat, so the saga is then not retriable.
    ``failed_step`` names the step; ``error`` is its exception (also ``__cause__``). The
    failure record's evidence keeps ``step_id`` and ``compensation_failed_names``.
    """

    def __init__(
        self,
        failed_step: str,
        error: BaseException,
        original: Classification,
        compensation_failures: Sequence[CompensationFailure] = (),
        *,
        run_id: str = "",
    ) -> None:
        failures = list(compensation_failures)
        message = f"saga step {failed_step!r} failed ({original.code.value}, {original.reason})"
        if failures:
            undone = "; ".join(
                f"{f.step!r} ({f.classification.code.value}, {f.classification.reason})"
                for f in failures
            )
            message += f"; compensation failed for {undone}"
        retriable = original.retriable and not failures
        after = original.retry_after_ms if retriable else None
        extras: dict[str, object] = {} if after is None else {"retry_after_ms": after}
        super().__init__(
            original.code, original.reason, message=message, retriable=retriable, **extras
        )
        self.details = {
            "step_id": failed_step,
            "compensation_failed_names": [failure.step for failure in failures],
        }
        self.failed_step = failed_step
        self.error = error
        self.original = original
        self.compensation_failures: list[CompensationFailure] = failures
        self.run_id = run_id


class Saga:
    """Steps that run in order, each undone by its compensation if a later one fails.

    ``await saga.run()`` returns every step's result in order. When a step raises, the
    steps completed before it are compensated in reverse order (every compensation is
    tried, whatever the others do) and ``SagaFailedError`` is raised from the step's
    error. Cancelling ``run`` cancels the running step and compensates nothing.
    """

    def __init__(self, *steps: SagaStep) -> None:
        self.steps: tuple[SagaStep, ...] = steps

    async def run(self, *, run_id: str | None = None) -> list[Any]:
        """Run the steps; their results. ``run_id`` (default: a new UUID) seeds the
        idempotency keys: pass the same one to repeat a run with the same keys."""
        run = run_id or str(uuid.uuid4())
        done: list[tuple[StepContext, Any]] = []
        for index, step in enumerate(self.steps):
            ctx = StepContext(run, index, step.name, tuple(result for _, result in done))
            try:
                result = await step.action(ctx)
            except Exception as exc:
                original = classify_exception(exc)
                failures = await self._compensate(done)
                raise SagaFailedError(step.name, exc, original, failures, run_id=run) from exc
            done.append((ctx, result))
        return [result for _, result in done]

    async def _compensate(self, done: list[tuple[StepContext, Any]]) -> list[CompensationFailure]:
        failures: list[CompensationFailure] = []
        for ctx, result in reversed(done):
            compensation = self.steps[ctx.index].compensation
            if compensation is None:
                continue
            try:
                await compensation(ctx, result)
            except Exception as exc:
                found = classify_exception(exc)
                logger.warning(
                    "saga compensation of step %r failed: %s (%s)",
                    ctx.name,
                    found.code.value,
                    found.reason,
                )
                failures.append(CompensationFailure(ctx.name, ctx.index, exc, found))
        return failures
