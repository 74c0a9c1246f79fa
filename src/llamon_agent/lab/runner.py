"""Running Quality Lab cases: ``Lab`` sends each case to a target and checks what happened.

A target is an agent in process (an ``async def fn(ctx)`` agent, a ``LoopAgent``, a flow:
anything ``llamon serve`` accepts) or the URL of an A2A agent, llamon or not::

    async with Lab(agent) as lab:                  # or Lab(url="http://127.0.0.1:8000")
        report = await lab.run(load_cases("cases/"), concurrency=4, repeat=2)
    report.ok                                      # every counted case passed

Each case is one A2A ``message/send`` (blocking), built from the case's ``query`` or
``parts``. An agent in process is served by the same A2A application ``llamon serve`` runs,
in memory (no socket), with fault injection allowed; a URL is called over HTTP. Either way
the case sees what a caller sees: the task's final state, its artifacts, and for a failure
the error data (``errorCode``, ``errorReason``, ``incidentId`` ...).

Where the steps come from (``CaseResult.event_source``): in process, the runner events of
the task (``events``); over A2A, the task's ``/tasks/{id}/events`` stream when the server
offers it (``event_stream``), else the ``tool_results`` artifact of a failed task
(``tool_results_artifact``), else nowhere (``none``: ``selected_target``, ``max_rounds`` and
the steps cannot be checked, and an assertion of them fails saying so).

Faults and the tool guard travel in the request's metadata (``core.faults``). An agent in
process always takes them; a URL only when its card declares fault injection
(``llamon serve --allow-fault-injection``), else a case with faults, and a ``plan`` case,
is ``refused`` without being sent. ``plan`` cases run with the ``plan`` guard (no tool with
side effects runs); ``execute`` cases without ``cleanup`` run with the ``no_cleanup`` guard:
a tool with side effects is not run and the case is ``refused`` with
``cleanup_not_configured``. After an ``execute`` case with ``cleanup``, each step calls the
named tool of ``cleanup_tools`` (by default the target's own tools, for a ``LoopAgent``); a
step that fails makes the case ``failed`` with ``cleanup_failed``.

A case passes when every assertion holds. A run that ends in an unmapped server error
(``INTERNAL_ERROR`` with an ``incidentId``) fails the case unless the case asserts
``uncaught_server_error: true``; so does a failure whose reason is not in
``allowed_failure_reasons`` when that list is given.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Mapping, Sequence
from contextlib import AsyncExitStack, asynccontextmanager, suppress
from dataclasses import dataclass, fields
from typing import Any, Final

import httpx
from a2a.client.errors import A2AClientHTTPError, A2AClientJSONRPCError
from a2a.client.middleware import ClientCallContext
from a2a.types import (
    AgentCard,
    DataPart,
    FilePart,
    FileWithUri,
    Message,
    MessageSendConfiguration,
    MessageSendParams,
    Part,
    Role,
    Task,
    TaskState,
    TextPart,
)

from llamon_agent.client.auth import Credential
from llamon_agent.client.card import fetch_card
from llamon_agent.client.errors import (
    RemoteAgentError,
    remote_error_from_exception,
    remote_error_from_http,
    remote_error_from_jsonrpc,
    remote_error_from_task,
)
from llamon_agent.client.sdk_spans import SdkJsonRpcTransport
from llamon_agent.core.classify import classify_exception
from llamon_agent.core.events import EventBus, RunnerEvent
from llamon_agent.core.faults import FAULTS_EXTENSION_URI, FAULTS_METADATA_KEY, FaultPlan
from llamon_agent.core.triage import TriageGuide, triage_guide
from llamon_agent.lab.assertions import check_assertions
from llamon_agent.lab.cases import Case
from llamon_agent.lab.results import CaseResult, CleanupResult, EventSource, LabReport, StepRecord
from llamon_agent.loop.dispatch import GUARD_REASONS

__all__ = ["DEFAULT_CASE_TIMEOUT", "IN_PROCESS_URL", "Lab", "run_cases"]

DEFAULT_CASE_TIMEOUT: Final = 120.0
"""Seconds a case may take before it is an ``error`` (``Lab(timeout=)``)."""

IN_PROCESS_URL: Final = "http://lab.invalid"
"""The base URL an in-process target answers on (in memory: nothing is listened on)."""

TOOL_RESULTS: Final = "tool_results"
"""The artifact a failed ``LoopAgent`` task carries its tool calls in."""

_END_TYPES: Final = frozenset(
    f"task.{state}"
    for state in ("completed", "failed", "canceled", "rejected", "input-required", "auth-required")
)
_STEP_TYPES: Final = frozenset({"step.started", "step.completed", "step.failed"})
_EVENT_WAIT: Final = 5.0


class _TaskEvents:
    """The runner events of the tasks this lab sent, by task id (an inline bus subscriber:
    O(1) per event, never blocking)."""

    def __init__(self) -> None:
        self.by_task: dict[str, list[RunnerEvent]] = {}
        self.ended: dict[str, asyncio.Event] = {}

    def __call__(self, event: RunnerEvent) -> None:
        if event.task_id is None:
            return
        self.by_task.setdefault(event.task_id, []).append(event)
        if event.type in _END_TYPES:
            self._ended(event.task_id).set()

    def _ended(self, task_id: str) -> asyncio.Event:
        found = self.ended.get(task_id)
        if found is None:
            found = self.ended[task_id] = asyncio.Event()
        return found

    async def take(self, task_id: str) -> list[RunnerEvent]:
        """The task's events once its turn ended (or after a short wait), forgotten here."""
        ended = self._ended(task_id)
        if not ended.is_set():  # in process the end is almost always in already
            with suppress(TimeoutError):
                async with asyncio.timeout(_EVENT_WAIT):
                    await ended.wait()
        self.ended.pop(task_id, None)
        return self.by_task.pop(task_id, [])


@dataclass(slots=True)
class _Answer:
    """What one send got back."""

    task: Task | None = None
    reply: Message | None = None
    error: RemoteAgentError | None = None


class Lab:
    """Runs cases against one target (see the module docstring).

    ``target``: an agent object, run in process; or ``url``: an A2A agent's base URL
    (``auth``: the credential to call it with, as for ``AgentClient``). ``card``: the card
    to serve an in-process agent with (default: one made from the agent).
    ``cleanup_tools``: what ``cleanup`` steps call, by tool name (default: a ``LoopAgent``
    target's tools). ``timeout``: seconds per case. ``guide``: the triage guide whose rows
    results carry (default: the package's, plus ``LLAMON_TRIAGE_GUIDE``).

    Use it as an async context manager (an in-process target is started on enter and
    stopped on exit).
    """

    def __init__(
        self,
        target: object | None = None,
        *,
        url: str | None = None,
        auth: Credential | None = None,
        card: AgentCard | None = None,
        cleanup_tools: Any | None = None,
        timeout: float = DEFAULT_CASE_TIMEOUT,
        guide: TriageGuide | None = None,
        name: str | None = None,
    ) -> None:
        if (target is None) == (url is None):
            raise ValueError("give the agent to run (target) or its URL (url), exactly one")
        if not timeout > 0:
            raise ValueError(f"timeout must be positive, got {timeout!r}")
        self.target = target
        self.url = url.rstrip("/") if url else IN_PROCESS_URL
        self.auth = auth
        self.timeout = timeout
        self.name = name or (url or _target_name(target))
        self.cleanup_tools = (
            cleanup_tools if cleanup_tools is not None else getattr(target, "tools", None)
        )
        self._card = card
        self._guide = guide
        self._stack: AsyncExitStack | None = None
        self._http: httpx.AsyncClient | None = None
        self._transport: SdkJsonRpcTransport | None = None
        self._events: _TaskEvents | None = None
        self._takes_faults = target is not None
        self._has_event_stream = True
        self._abandoned: set[asyncio.Future[_Answer]] = set()

    @property
    def in_process(self) -> bool:
        """The target runs in this process."""
        return self.target is not None

    async def __aenter__(self) -> Lab:
        stack = AsyncExitStack()
        try:
            if self.target is not None:
                self._http = await stack.enter_async_context(self._in_process_client())
            else:
                self._http = await stack.enter_async_context(
                    httpx.AsyncClient(timeout=self.timeout)
                )
                self._card = await fetch_card(self._http, self.url, ttl=0)
                self._takes_faults = _declares_faults(self._card)
            self._transport = SdkJsonRpcTransport(self._http, self._card, url=self.url)
        except BaseException:
            await stack.aclose()
            raise
        self._stack = stack
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        stack, self._stack = self._stack, None
        self._transport = None
        if stack is not None:
            await stack.aclose()  # an in-process agent's server ends what still runs
        if self._abandoned:  # requests of cases that timed out: given a moment, then left
            await asyncio.wait(set(self._abandoned), timeout=_EVENT_WAIT)

    @asynccontextmanager
    async def _in_process_client(self) -> AsyncIterator[httpx.AsyncClient]:
        from llamon_agent.a2a.serve import default_card
        from llamon_agent.a2a.server import create_app

        bus = EventBus()
        self._events = _TaskEvents()
        bus.subscribe_inline(self._events, name="lab")
        card = self._card or default_card(self.target, IN_PROCESS_URL + "/")
        app = create_app(self.target, card, events=bus, gc_freeze=False, allow_fault_injection=True)
        self._card = card
        server_log = logging.getLogger("llamon_agent.a2a")
        server_log.addFilter(_not_exposed)  # in memory: nothing to warn about
        try:
            lifespan = app.router.lifespan_context(app)
            await lifespan.__aenter__()
        finally:
            server_log.removeFilter(_not_exposed)
        try:
            transport = httpx.ASGITransport(app=app)
            async with httpx.AsyncClient(
                transport=transport, base_url=IN_PROCESS_URL, timeout=self.timeout
            ) as http:
                yield http
        finally:
            await lifespan.__aexit__(None, None, None)

    # -- running --------------------------------------------------------------------

    async def run(
        self,
        cases: Iterable[Case],
        *,
        concurrency: int = 1,
        repeat: int = 1,
        shadow: Iterable[Case] = (),
        on_result: Callable[[CaseResult], Awaitable[None] | None] | None = None,
    ) -> LabReport:
        """Run every case ``repeat`` times, at most ``concurrency`` at once, then the
        ``shadow`` cases (learned cases not yet promoted: reported, not counted).

        ``on_result`` is called with each result as it is made (progress). The report
        lists the results in the order of the cases, each case's repetitions together.
        """
        if concurrency < 1 or repeat < 1:
            raise ValueError("concurrency and repeat must be at least 1")
        jobs = [(case, n, False) for case in cases for n in range(repeat)]
        jobs += [(case, n, True) for case in shadow for n in range(repeat)]
        started = time.time()
        clock = time.perf_counter()
        gate = asyncio.Semaphore(concurrency)

        async def one(case: Case, number: int, is_shadow: bool) -> CaseResult:
            async with gate:
                result = await self.run_case(case, repeat=number, shadow=is_shadow)
            if on_result is not None:
                done = on_result(result)
                if done is not None:
                    await done
            return result

        results = await asyncio.gather(*(one(*job) for job in jobs))
        return LabReport(
            results=list(results),
            target=self.name,
            started_at=started,
            duration_ms=round((time.perf_counter() - clock) * 1000, 3),
        )

    async def run_case(self, case: Case, *, repeat: int = 0, shadow: bool = False) -> CaseResult:
        """Run one case and check its assertions; never raises for what the case finds."""
        if self._transport is None or self._http is None:
            raise RuntimeError("use the Lab as 'async with Lab(...) as lab:' before running")
        result = CaseResult(
            case=case.label,
            source=case.source,
            tags=tuple(case.tags),
            mode=case.mode,
            repeat=repeat,
            shadow=shadow,
            faults=[fault.model_dump(mode="json") for fault in case.faults],
        )
        plan = FaultPlan(case.faults, guard=_guard(case))
        if (plan.faults or case.mode == "plan") and not self._takes_faults:
            return _refused(
                result,
                "the agent does not accept fault injection (its card does not declare "
                f"{FAULTS_EXTENSION_URI}); serve it with --allow-fault-injection, on "
                "127.0.0.1, to run cases with faults or in plan mode",
            )
        clock = time.perf_counter()
        sending = asyncio.ensure_future(self._send(self._transport, case, plan))
        done, _ = await asyncio.wait({sending}, timeout=self.timeout)
        if not done:  # never waited for: an agent may not let go of its request at once
            sending.cancel()
            self._abandoned.add(sending)
            sending.add_done_callback(self._abandoned.discard)
            result.outcome = "error"
            result.message = f"no answer within {self.timeout:g} s"
            return result
        answer = sending.result()
        result.duration_ms = round((time.perf_counter() - clock) * 1000, 3)
        _read_answer(result, answer)
        await self._read_steps(result, answer)
        if result.failure_reason is not None and result.error_code is not None:
            result.triage = self._triage(result.failure_reason, result.error_code)
        check_assertions(case, result)
        if any(step.reason == "cleanup_not_configured" for step in result.steps):
            result.outcome = "refused"
            result.lab_reason = "cleanup_not_configured"
            result.message = (
                f"tool {result.stopped_before or '?'} has side effects and the case has no "
                "cleanup: it was not run (add 'cleanup' steps, or make the case mode: plan)"
            )
            return result
        if case.mode == "execute" and case.cleanup:
            await self._clean_up(case, result)
        return result

    async def _send(self, transport: SdkJsonRpcTransport, case: Case, plan: FaultPlan) -> _Answer:
        metadata = {FAULTS_METADATA_KEY: plan.to_metadata()} if plan else None
        message = Message(
            role=Role.user, parts=_parts(case), message_id=uuid.uuid4().hex, kind="message"
        )
        params = MessageSendParams(
            message=message,
            configuration=MessageSendConfiguration(blocking=True),
            metadata=metadata,
        )
        agent = self._card.name if self._card is not None else None
        try:
            answer = await transport.send_message(params, context=await self._call_context())
        except A2AClientJSONRPCError as exc:
            return _Answer(error=remote_error_from_jsonrpc(exc, agent=agent))
        except A2AClientHTTPError as exc:
            return _Answer(error=remote_error_from_http(exc, agent=agent))
        except Exception as exc:
            return _Answer(error=remote_error_from_exception(exc, agent=agent))
        if isinstance(answer, Task):
            return _Answer(task=answer)
        return _Answer(reply=answer)

    async def _headers(self) -> dict[str, str]:
        if self.auth is None or self._card is None:
            return {}
        return dict(await self.auth.headers(self._card))

    async def _call_context(self) -> ClientCallContext:
        kwargs: dict[str, Any] = {"timeout": self.timeout}
        headers = await self._headers()
        if headers:
            kwargs["headers"] = headers
        return ClientCallContext(state={"http_kwargs": kwargs})

    async def _read_steps(self, result: CaseResult, answer: _Answer) -> None:
        task_id = result.task_id
        events: list[dict[str, Any]] | None = None
        source: EventSource = "none"
        if task_id is not None and self._events is not None:
            events = [_event_dict(event) for event in await self._events.take(task_id)]
            source = "events"
        elif task_id is not None and self._http is not None and self._has_event_stream:
            events = await self._event_stream(self._http, task_id)
            source = "event_stream" if events is not None else "none"
        if events is not None:
            result.events = events
            _steps_from_events(result, events)
        elif answer.task is not None and _tool_results(answer.task) is not None:
            source = "tool_results_artifact"
            _steps_from_artifact(result, _tool_results(answer.task) or [])
        result.event_source = source

    async def _event_stream(
        self, http: httpx.AsyncClient, task_id: str
    ) -> list[dict[str, Any]] | None:
        """The task's events from ``/tasks/{id}/events``; ``None`` when not offered."""
        headers = await self._headers()
        found: list[dict[str, Any]] = []
        try:
            async with http.stream(
                "GET", f"{self.url}/tasks/{task_id}/events", headers=headers
            ) as response:
                if response.status_code != 200 or not response.headers.get(
                    "content-type", ""
                ).startswith("text/event-stream"):
                    if response.status_code in (404, 405):
                        self._has_event_stream = response.status_code != 405
                    return None
                async for line in response.aiter_lines():
                    if not line.startswith("data:"):
                        continue
                    try:
                        data = json.loads(line[5:].strip())
                    except ValueError:
                        continue
                    if isinstance(data, dict):
                        found.append(data)
                        if data.get("type") in _END_TYPES:
                            break
        except httpx.HTTPError:
            return None
        return found

    def _triage(self, reason: str, error_code: str) -> dict[str, Any] | None:
        if self._guide is None:
            self._guide = triage_guide()
        found = self._guide.row_for(reason, error_code)
        if found is None:
            return None
        row, own = found
        return {**row.to_dict(), "ownRow": own}

    async def _clean_up(self, case: Case, result: CaseResult) -> None:
        async with _cleanup_tools(self.cleanup_tools) as tools:
            for step in case.cleanup:
                result.cleanup.append(await _clean_up_step(tools, step.tool, step.arguments))
        failed = [item for item in result.cleanup if not item.ok]
        if failed:
            result.outcome = "failed"
            result.lab_reason = "cleanup_failed"
            names = ", ".join(f"{item.tool} ({item.reason})" for item in failed)
            result.message = f"cleanup failed: {names}; the agent's state may not be restored"


@asynccontextmanager
async def _cleanup_tools(source: Any) -> AsyncIterator[dict[str, Any]]:
    """The tools cleanup steps may call, by name: from a registry or view (``get``), a
    mapping, tools, or an ``MCPToolLoader`` (one session for the case's steps)."""
    if source is None:
        yield {}
    elif hasattr(source, "session") and callable(source.session):
        async with source.session() as tools:
            yield {tool.name: tool for tool in tools}
    elif isinstance(source, Mapping):
        yield dict(source)
    elif hasattr(source, "names") and hasattr(source, "get"):
        yield {name: source.get(name) for name in source.names}
    else:
        yield {tool.name: tool for tool in source}


async def _clean_up_step(
    tools: Mapping[str, Any], name: str, arguments: Mapping[str, Any]
) -> CleanupResult:
    """Run one cleanup step; its result (a tool missing, raising or failing is not ok)."""
    tool = tools.get(name)
    if tool is None:
        return CleanupResult(name, False, "unknown_tool")
    try:
        value = await tool.call(dict(arguments))
    except Exception as exc:  # an escalation: classified, never its text
        return CleanupResult(name, False, classify_exception(exc).reason)
    if getattr(value, "is_error", False):
        return CleanupResult(name, False, str(getattr(value, "error_code", None) or "tool_error"))
    return CleanupResult(name, True)


async def run_cases(
    target: object | None,
    cases: Iterable[Case],
    *,
    url: str | None = None,
    concurrency: int = 1,
    repeat: int = 1,
    **options: Any,
) -> LabReport:
    """``Lab(target, url=url, **options)`` run over ``cases`` (see ``Lab.run``)."""
    async with Lab(target, url=url, **options) as lab:
        return await lab.run(cases, concurrency=concurrency, repeat=repeat)


def _not_exposed(record: logging.LogRecord) -> bool:
    """Leave out the server's startup warning that fault injection is on: the lab's
    in-process agent listens on no socket, so no request but the lab's can reach it."""
    return not str(record.msg).startswith("fault injection is allowed")


# -- reading an answer -------------------------------------------------------------------


def _target_name(target: object) -> str:
    name = getattr(target, "name", None) or getattr(target, "__name__", None)
    return str(name or type(target).__name__)


def _declares_faults(card: AgentCard) -> bool:
    extensions = card.capabilities.extensions or [] if card.capabilities else []
    return any(extension.uri == FAULTS_EXTENSION_URI for extension in extensions)


def _guard(case: Case) -> Any:
    if case.mode == "plan":
        return "plan"
    return None if case.cleanup else "no_cleanup"


def _refused(result: CaseResult, message: str) -> CaseResult:
    result.outcome = "refused"
    result.message = message
    return result


def _parts(case: Case) -> list[Part]:
    if case.query is not None:
        return [Part(root=TextPart(text=case.query))]
    parts: list[Part] = []
    for part in case.parts or ():
        if part.kind == "text":
            parts.append(Part(root=TextPart(text=part.text)))
        elif part.kind == "data":
            parts.append(Part(root=DataPart(data=dict(part.data))))
        else:
            file = FileWithUri(uri=part.uri, mime_type=part.mime_type, name=part.name)
            parts.append(Part(root=FilePart(file=file)))
    return parts


def _texts(parts: Sequence[Part]) -> list[str]:
    found: list[str] = []
    for part in parts:
        root = part.root
        if isinstance(root, TextPart):
            found.append(root.text)
        elif isinstance(root, DataPart):
            found.append(json.dumps(root.data, ensure_ascii=False, sort_keys=True))
    return found


def _read_answer(result: CaseResult, answer: _Answer) -> None:
    """Final state, artifacts and the failure of ``answer`` into ``result``."""
    error = answer.error
    if answer.reply is not None:
        result.final_state = TaskState.completed.value
        result.artifact_texts = _texts(answer.reply.parts)
        return
    task = answer.task
    if task is not None:
        result.task_id = task.id
        result.final_state = task.status.state.value
        for artifact in task.artifacts or ():
            result.artifact_texts.extend(_texts(artifact.parts))
        if task.status.message is not None and task.status.state is TaskState.completed:
            result.artifact_texts.extend(_texts(task.status.message.parts))
        if task.status.state in (TaskState.failed, TaskState.rejected):
            error = remote_error_from_task(task)
    if error is None:
        return
    result.error_code = error.code.value
    result.failure_reason = error.reason
    record: dict[str, Any] = dict(error.raw_data or {})
    record.setdefault("errorCode", error.code.value)
    record.setdefault("errorReason", error.reason)
    record.setdefault("message", str(error.message) if hasattr(error, "message") else "")
    record.setdefault("retriable", error.retriable)
    if error.http_status is not None:
        record.setdefault("httpStatus", error.http_status)
    if error.jsonrpc_code is not None:
        record.setdefault("jsonrpcCode", error.jsonrpc_code)
    incident = record.get("incidentId")
    result.incident_id = incident if isinstance(incident, str) else None
    result.failure = record


_EVENT_FIELDS: Final = tuple(field.name for field in fields(RunnerEvent))


def _event_dict(event: RunnerEvent) -> dict[str, Any]:
    """The event as a dict, as ``/tasks/{id}/events`` sends it (its fields already passed
    the security boundary; the reports write it as JSON)."""
    data = {name: getattr(event, name) for name in _EVENT_FIELDS}
    data["trace_metadata"] = dict(event.trace_metadata)
    data["extra"] = dict(event.extra)
    return data


def _steps_from_events(result: CaseResult, events: Sequence[Mapping[str, Any]]) -> None:
    """Steps, selected target, rounds and fired faults from the task's runner events. A
    call that started and never ended (it escalated and ended the run) is a failed step
    with the run's failure reason, as the ``tool_results`` artifact records it."""
    rounds = 0
    fired: dict[str, int] = {}
    open_calls: dict[object, tuple[int, str]] = {}
    for event in events:
        kind = event.get("type")
        meta = event.get("trace_metadata") or {}
        number = event.get("round") or 0
        number = number if isinstance(number, int) else 0
        rounds = max(rounds, number)
        if kind == "lab.fault_injected" and isinstance(meta, Mapping):
            target = meta.get("target")
            key = f"{meta.get('fault')}:{target}" if target else str(meta.get("fault"))
            fired[key] = fired.get(key, 0) + 1
        if kind not in _STEP_TYPES:
            continue
        tool = str(event.get("tool") or "")
        if kind == "step.started":
            if result.selected_target is None:
                result.selected_target = tool
            open_calls[event.get("step_id") or len(open_calls)] = (number, tool)
            continue
        open_calls.pop(event.get("step_id"), None)
        reason = meta.get("failure_reason") if isinstance(meta, Mapping) else None
        result.steps.append(
            StepRecord(number, tool, kind == "step.completed", _str_or_none(reason))
        )
        if reason in GUARD_REASONS and result.stopped_before is None:
            result.stopped_before = tool
    for number, tool in open_calls.values():
        result.steps.append(StepRecord(number, tool, False, result.failure_reason))
    result.rounds = rounds or None
    result.faults_fired = fired


def _tool_results(task: Task) -> list[Mapping[str, Any]] | None:
    for artifact in task.artifacts or ():
        if artifact.name != TOOL_RESULTS:
            continue
        found: list[Mapping[str, Any]] = []
        for part in artifact.parts:
            root = part.root
            if isinstance(root, DataPart):
                items = root.data.get("items", root.data) if isinstance(root.data, dict) else []
                if isinstance(items, list):
                    found.extend(item for item in items if isinstance(item, Mapping))
                elif isinstance(items, Mapping):
                    found.append(items)
        return found
    return None


def _steps_from_artifact(result: CaseResult, items: Sequence[Mapping[str, Any]]) -> None:
    rounds = 0
    for item in items:
        tool = str(item.get("tool") or "")
        number = item.get("round")
        number = number if isinstance(number, int) else 0
        rounds = max(rounds, number)
        ok = item.get("ok") is True
        reason = None if ok else _str_or_none(item.get("error_code"))
        if result.selected_target is None:
            result.selected_target = tool
        result.steps.append(StepRecord(number, tool, ok, reason))
        if reason in GUARD_REASONS and result.stopped_before is None:
            result.stopped_before = tool
    result.rounds = rounds or None


def _str_or_none(value: object) -> str | None:
    return value if isinstance(value, str) and value else None
