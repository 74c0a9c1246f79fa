"""``CustomAgentExecutor``: runs an agent and turns every outcome into the right A2A answer.

What the caller receives::

    agent returns output          -> completed (+ artifact "response" / "result")
    agent returns Completed       -> completed + data part ("no results", "not eligible")
    agent returns HITLInterrupt   -> input-required / auth-required; the next message resumes
    agent raises ServerError      -> protocol-level JSON-RPC error (task, if any, ends failed)
    agent raises GuardrailBlocked -> failed + GUARDRAIL_BLOCKED, the task's artifacts dropped
                                     (a stream ends with the final failed status-update)
    agent raises anything else    -> failed + TextPart + DataPart(ApplicationErrorData);
                                     artifacts made before the failure are kept, a flow's
                                     completed-node outputs are added first. So does a
                                     BaseException (KeyboardInterrupt, SystemExit, a
                                     CancelledError nobody asked for): INTERNAL_ERROR with
                                     an incident id; it never stops the process
    every artifact                -> its last chunk is marked lastChunk: a streamed one
                                     ends with its complete parts (append=false,
                                     lastChunk=true) on completion, and on failure for
                                     what was sent
    stream fails after publishing -> what was sent kept, one failed status, no second answer
    stream fails before any chunk,
    artifact or progress          -> one fallback to invoke() (unless stream_fallback=False)
    agent with hold_chunks        -> chunks held until ctx.release_chunks() or success; a
                                     failure drops them unsent
    ctx.emit(...), return "text"  -> the text is the streamed artifact's last chunk
    ctx.progress(text)            -> a working status-update with that message, no artifact
    tasks/cancel                  -> the agent is cancelled, the task ends canceled
    the agent ends as tasks/cancel
    arrives                       -> one of them wins (``RunClaim.decide``): the loser
                                     publishes nothing, neither status nor artifact

Invariant: every task this executor starts ends completed, failed, canceled,
input-required or auth-required. If the event queue itself refuses the final event, or
is closed (nobody reads it any more), the terminal state is written to the task store
directly (a guarded store retries it while the store is down).
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from a2a.server.agent_execution import AgentExecutor, RequestContext
from a2a.server.events import EventQueue
from a2a.server.tasks import TaskStore, TaskUpdater
from a2a.types import (
    DataPart,
    InvalidParamsError,
    Message,
    MessageSendParams,
    Part,
    Role,
    Task,
    TaskState,
    TaskStatus,
)
from a2a.utils.errors import ServerError
from opentelemetry.trace import Span

from llamon_agent.a2a.agent import (
    Agent,
    AgentContext,
    AgentOutput,
    Chunk,
    Completed,
    FinalOutput,
    FlowContext,
    as_agent,
)
from llamon_agent.a2a.parts import (
    application_error_to_parts,
    chunk_to_part,
    completed_parts,
    interrupt_parts,
    output_to_parts,
    progress_parts,
    text_part,
)
from llamon_agent.a2a.protocol import (
    RequestLimits,
    check_send_params,
    protocol_error,
    with_protocol_data,
)
from llamon_agent.a2a.states import PAUSED_STATES
from llamon_agent.a2a.stores.failures import FailureStore, StoredFailure
from llamon_agent.a2a.stores.guard import GuardedTaskStore
from llamon_agent.a2a.stores.workers import WORKER_METADATA_KEY, worker_id
from llamon_agent.a2a.task_locks import RunClaim, TaskClaims
from llamon_agent.core.classify import classify_exception
from llamon_agent.core.codes import ErrorCode, Stage, json_rpc_to_error_code
from llamon_agent.core.error_data import ApplicationErrorData, make_application_error_data
from llamon_agent.core.errors import error_data_for_exception
from llamon_agent.core.events import EventBus, RunnerEvent, event_scope, failure_metadata
from llamon_agent.core.failures import FailureRecord
from llamon_agent.core.faults import FAULTS_METADATA_KEY, FaultPlan, active_faults, fault_scope
from llamon_agent.core.hitl import HITLInterrupt
from llamon_agent.core.logs import LOG_FIELDS, failure_log_fields
from llamon_agent.core.telemetry import (
    TASK_STATE,
    invoke_agent_span,
    mark_failed,
    reason_stage,
    record_failure_latency,
    record_stream_duration,
    record_task_end,
    trace_id_of,
)
from llamon_agent.exceptions import GuardrailBlockedError, LlamonApplicationError

__all__ = [
    "CustomAgentExecutor",
    "RaisedProtocolErrors",
    "task_end_log_fields",
    "task_end_message",
]

logger = logging.getLogger("llamon_agent.a2a")
failure_logger = logging.getLogger("llamon_agent.failures")
"""One INFO line per failed task: its ``FailureRecord`` (scrubbed when it was built).

A failed task is an answer, not a server fault, so it is logged at INFO and the record is
built only when that level is enabled. An unmapped exception is also logged at ERROR with
its incident id and traceback (``llamon_agent.errors``).

Every end of a run (completed, failed, canceled, input-required, auth-required) is also
one INFO line on ``llamon_agent.a2a`` (``task_end_log_fields``): task id, state,
errorCode, reason, stage, incident id and duration.
"""


class RaisedProtocolErrors:
    """The executor -> request handler side channel: the ``ServerError`` an agent raised.

    An agent that raises ``ServerError`` ends its task ``failed`` (``tasks/get`` shows
    it), but the caller of the request that ran it must receive that JSON-RPC error. The
    executor runs in a background task and cannot raise it to the caller: it puts the
    error here under the task's id (``with_protocol_data`` applied), and the request
    handler takes it -- once -- when the request reads the task's failed end, and raises
    it as the request's answer (``message/send``) or last event (``message/stream``).

    A request that does not wait for the end (a non-blocking ``message/send``) never takes
    its error, so at most ``limit`` errors are kept: the oldest untaken one goes first.
    """

    def __init__(self, limit: int = 1024) -> None:
        self._errors: dict[str, ServerError] = {}
        self._limit = limit

    def put(self, task_id: str, error: ServerError) -> None:
        """Keep ``error`` as the answer to the request running ``task_id``."""
        self._errors.pop(task_id, None)
        self._errors[task_id] = error
        while len(self._errors) > self._limit:
            del self._errors[next(iter(self._errors))]

    def __len__(self) -> int:
        """How many errors wait to be taken."""
        return len(self._errors)

    def pop(self, task_id: str | None) -> ServerError | None:
        """The error kept for ``task_id`` (taken: a second call returns ``None``)."""
        return self._errors.pop(task_id, None) if task_id else None


@dataclass
class _Run:
    """One execution of the agent for one task.

    ``chunks`` counts the chunks sent; ``sent`` holds their parts (for the closing
    lastChunk event); ``held`` holds the chunks not yet released (``None``: the agent
    does not hold); ``published`` turns true at the agent's first chunk, artifact or
    progress, after which a failed stream never falls back to ``invoke``.

    ``claim`` is shared by everyone who may end the run (the run itself, a cancel): its
    ``lock`` serialises what they publish, its ``decide`` picks the one end. ``ending`` is
    true while this publisher publishes the end it won.
    """

    updater: TaskUpdater
    task: Task
    streaming: bool
    claim: RunClaim
    failure_data: ApplicationErrorData | None = None
    """The error data the run's failure is answered with, once decided."""
    chunks: int = 0
    stream_artifact_id: str | None = None
    sent: list[Part] | None = None
    held: list[Part] | None = None
    published: bool = False
    ending: bool = False
    started: float | None = field(default_factory=time.monotonic)
    """``time.monotonic()`` when the run began (``None``: unknown, e.g. a cancel's)."""
    failure: FailureRecord | None = None
    """The failure this run ends with, once decided."""

    @property
    def task_id(self) -> str:
        return self.task.id

    @property
    def lock(self) -> asyncio.Lock:
        return self.claim.lock

    def other_publisher(self) -> _Run:
        """Another publisher of this run's end (shutdown): the same task, queue and claim,
        its own ``ending``, so it ends the run only if the run's end is still open."""
        return _Run(
            updater=self.updater,
            task=self.task,
            streaming=False,
            claim=self.claim,
            started=self.started,
        )

    @property
    def terminal(self) -> bool:
        """Whether this publisher must publish nothing more: the run's end was decided,
        and not by this publisher (which is still publishing it)."""
        return self.claim.ended and not self.ending


class CustomAgentExecutor(AgentExecutor):
    """Runs ``agent`` (anything ``as_agent`` accepts) under the A2A task life cycle.

    ``limits`` are the protocol-level checks made before a task exists; override
    ``_validate_request`` to add your own. ``task_store`` lets the executor write a
    terminal state directly when the event queue fails. ``failure_store`` keeps the
    failure of every task that ends failed (``StoredFailure``, with ``agent_name``); its
    writes never hold up or change an answer. ``events``: the bus the task's runner
    events go to (``task.submitted`` ... ``task.failed``), and, through ``event_scope``,
    those of the loop, flow or MCP tools the agent runs.

    ``allow_fault_injection`` (default off): a request whose params metadata carries a
    fault plan under ``FAULTS_METADATA_KEY`` runs inside ``fault_scope(plan)``
    (``core.faults``): its agent's tools, model, MCP and agent calls and its task store
    saves fail as the plan says. Off, the key is ignored. ``fault_plan(metadata)`` is the
    one reader of that key (the request handler asks it before a task exists; ``execute``
    asks it when no plan is active yet, so the executor run on its own applies it too).
    """

    def __init__(
        self,
        agent: Agent | object,
        *,
        limits: RequestLimits | None = None,
        task_store: TaskStore | None = None,
        worker: str | None = None,
        failure_store: FailureStore | None = None,
        agent_name: str | None = None,
        events: EventBus | None = None,
        allow_fault_injection: bool = False,
    ) -> None:
        self.agent = as_agent(agent)
        self.allow_fault_injection = allow_fault_injection
        self.failure_store = failure_store
        self.agent_name = agent_name
        self.events = events
        self.limits = limits or RequestLimits()
        self.task_store = task_store
        self.worker_id = worker or worker_id()
        self.stream_fallback = bool(getattr(self.agent, "stream_fallback", True))
        self.hold_chunks = bool(getattr(self.agent, "hold_chunks", False))
        self._runs: dict[str, _Run] = {}
        self.claims = TaskClaims()
        """The run claim of each task (``task_locks``); the request handler takes them."""
        self.protocol_errors = RaisedProtocolErrors()
        """What the agent raised as a JSON-RPC error, for the request handler to answer."""

    # -- protocol level -------------------------------------------------------------

    def _validate_request(self, params: MessageSendParams) -> None:
        """Refuse a request before a task exists by raising ``ServerError``.

        The built-in checks (``check_send_params``) cover empty messages, input modes,
        size, parts and metadata keys. Override to add yours; build the error with
        ``protocol_error(...)`` so the caller gets ``ProtocolErrorData``, and call
        ``super()._validate_request(params)``.
        """
        problem = check_send_params(params, self.limits)
        if problem is not None:
            raise problem

    def fault_plan(self, metadata: Mapping[str, Any] | None) -> FaultPlan | None:
        """The fault plan of a request's params ``metadata``; ``None`` when fault injection
        is not allowed or the metadata carries none. A plan that does not parse raises
        ``ServerError`` -32602, ``INVALID_INPUT`` / ``invalid_fault_plan``, with the
        problem (``FaultPlan.from_metadata``'s message)."""
        if not self.allow_fault_injection or not metadata or FAULTS_METADATA_KEY not in metadata:
            return None
        try:
            return FaultPlan.from_metadata(metadata[FAULTS_METADATA_KEY])
        except ValueError as exc:
            raise protocol_error(
                InvalidParamsError, ErrorCode.INVALID_INPUT, "invalid_fault_plan", str(exc)
            ) from None

    def pop_protocol_error(self, task_id: str | None) -> ServerError | None:
        """The protocol error the agent raised for ``task_id`` (taken once); the same as
        ``protocol_errors.pop(task_id)``."""
        return self.protocol_errors.pop(task_id)

    # -- execution ------------------------------------------------------------------

    async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
        """Run the agent for one message; never raises for agent failures.

        With fault injection allowed and no plan active yet, the request's plan (its params
        metadata, ``fault_plan``) is active while the agent runs; a malformed one raises
        ``ServerError`` (``invalid_fault_plan``) before anything runs."""
        if self.allow_fault_injection and active_faults() is None:
            plan = self.fault_plan(context.metadata)
            if plan is not None:
                with fault_scope(plan):
                    await self._execute_observed(context, event_queue)
                return
        await self._execute_observed(context, event_queue)

    async def _execute_observed(self, context: RequestContext, event_queue: EventQueue) -> None:
        if self.events is None:
            await self._execute(context, event_queue)
            return
        with event_scope(self.events, task_id=context.task_id, context_id=context.context_id):
            await self._execute(context, event_queue)

    def _task_event(
        self,
        type_: str,
        run: _Run | Task,
        stage: str = Stage.A2A_SERVE,
        metadata: Mapping[str, object] | None = None,
        node: str | None = None,
    ) -> None:
        """Publish one ``task.*`` event of ``run`` (the caller checked ``events.active``)."""
        bus = self.events
        if bus is None:
            return
        task = run.task if isinstance(run, _Run) else run
        bus.publish(
            RunnerEvent(type_, stage, "", 0, None, None, metadata, task.id, task.context_id, node)
        )

    def _end_event(
        self, task: Task, state: TaskState, data: ApplicationErrorData | None, chunks: int | None
    ) -> None:
        """The ``task.<state>`` event of a run's end; a failure's reason and code with it."""
        metadata: dict[str, object] = {}
        stage: str = Stage.A2A_SERVE
        node = None
        if data is not None:
            record = FailureRecord.from_error_data(data)
            metadata = failure_metadata(record)
            stage = record.stage
            if data.node is not None:
                node = data.node.id
                stage = Stage.FLOW_NODE
        if chunks is not None:  # a stream: how many chunks it sent
            metadata["chunk_count"] = chunks
        self._task_event(f"task.{state.value}", task, stage, metadata, node)

    async def _execute(self, context: RequestContext, event_queue: EventQueue) -> None:
        message = context.message
        if message is None:  # pragma: no cover - a2a always passes the message on send
            raise with_protocol_data(ServerError(error=InvalidParamsError()))
        task = context.current_task
        claim = self.claims.running(str(context.task_id)) if context.task_id else None
        if claim is not None and claim.ended:  # cancelled before it started: nothing to run
            return
        resumed = task is not None and task.status.state in PAUSED_STATES
        interrupt_payload = _interrupt_payload(task) if resumed and task else None
        if task is None:
            task = Task(
                id=str(context.task_id),
                context_id=str(context.context_id),
                status=TaskStatus(state=TaskState.submitted, timestamp=_now()),
                history=[message],
                metadata={WORKER_METADATA_KEY: self.worker_id},
            )
            await event_queue.enqueue_event(task)
            if self.events is not None and self.events.active:
                self._task_event("task.submitted", task)
        run = _Run(
            updater=TaskUpdater(event_queue, task.id, task.context_id),
            task=task,
            streaming=_is_streaming(context),
            claim=claim or RunClaim(task_id=task.id, context_id=task.context_id),
            held=[] if self.hold_chunks else None,
        )
        self._runs[task.id] = run
        ctx = AgentContext(
            task_id=task.id,
            context_id=task.context_id,
            message=message,
            emit=lambda chunk: self._emit(run, chunk),
            add_artifact=lambda value, name: self._add_artifact(run, value, name),
            streaming=run.streaming,
            resumed=resumed,
            interrupt_payload=interrupt_payload,
            history=task.history or (),
            progress=lambda text, data: self._progress(run, text, data),
            release_chunks=lambda: self._release(run),
        )
        name = self.agent_name or _default_name(self.agent)
        scope = invoke_agent_span(  # entered here, left in the finally below
            name,
            task_id=task.id,
            context_id=task.context_id,
            headers=_headers(context),
            metadata=message.metadata,
        )
        span = scope.__enter__()
        if self.events is not None and self.events.active:
            working: dict[str, object] = {"resumed": resumed}
            trace_id = trace_id_of(span)
            if trace_id is not None:  # the console and ``llamon task`` show it
                working["trace_id"] = trace_id
            self._task_event("task.working", run, metadata=working)
        try:
            if run.streaming or not _blocking(context):
                # someone watches this task while it runs: tell them it is working. A
                # blocking message/send shows only its final answer, so it goes
                # submitted -> final without the extra event (~65 us a request).
                await run.updater.start_work()
            output = await self._dispatch(ctx, run)
            await self._finish(run, output)
        except ServerError as exc:
            await self._protocol_failure(run, exc)
        except asyncio.CancelledError as exc:
            if not _being_cancelled():  # the agent raised it itself: a failure like any
                await self._enqueue_failed_response(run, exc, ctx)
                return
            await self._end(run, TaskState.canceled, None)
            raise
        except Exception as exc:
            await self._enqueue_failed_response(run, exc, ctx)
        except BaseException as exc:  # KeyboardInterrupt, SystemExit, custom: never the process
            await self._enqueue_failed_response(run, exc, ctx)
        finally:
            if self._runs.get(task.id) is run:  # a next run of the task may have begun
                del self._runs[task.id]
            try:
                self._observe_end(run, span, name)
            finally:
                scope.__exit__(None, None, None)

    def _observe_end(self, run: _Run, span: Span, name: str) -> None:
        """The run's end on its span and in the metrics (``core.telemetry``): the final
        state, and a failure's reason, errorCode and stage."""
        state = run.claim.ended_by
        ended = state.value if state is not None else "unknown"
        data = run.failure_data if state == TaskState.failed else None
        if span.is_recording():
            span.set_attribute(TASK_STATE, ended)
            if data is not None:
                stage = Stage.FLOW_NODE if data.node is not None else None
                mark_failed(
                    span,
                    reason=data.error_reason,
                    error_code=data.error_code.value,
                    stage=stage or reason_stage(data.error_reason),
                )
        code = data.error_code.value if data is not None else None
        record_task_end(name, ended, code)
        seconds = time.monotonic() - run.started if run.started is not None else None
        if run.streaming and seconds is not None:
            record_stream_duration(name, ended, seconds)
        if code is not None and seconds is not None:
            record_failure_latency(name, code, seconds)

    async def _dispatch(self, ctx: AgentContext, run: _Run) -> AgentOutput | _Streamed:
        stream = getattr(self.agent, "stream", None)
        if not (run.streaming and callable(stream)):
            return await self.agent.invoke(ctx)
        try:
            async for chunk in stream(ctx):
                if isinstance(chunk, FinalOutput):
                    return _Streamed(chunk.output)
                await self._emit(run, chunk)
            return None
        except Exception as exc:
            deliberate = isinstance(exc, LlamonApplicationError | GuardrailBlockedError)
            if run.published or deliberate or isinstance(exc, ServerError):
                raise  # something was published: no fallback, no second answer
            if not self.stream_fallback:
                raise
            logger.info(
                "task %s: stream failed before publishing anything (%s); falling back to invoke",
                run.task_id,
                type(exc).__name__,
            )
            return await self.agent.invoke(ctx)

    async def _emit(self, run: _Run, chunk: Chunk) -> None:
        part = chunk_to_part(chunk)
        run.published = True
        if run.held is not None:
            run.held.append(part)
            return
        await self._send_chunks(run, [part])

    async def _send_chunks(self, run: _Run, parts: list[Part]) -> None:
        """One artifact-update of the streamed ``response`` artifact (never its last)."""
        async with run.lock:
            if run.terminal:
                return
            first = run.stream_artifact_id is None
            if first:
                run.stream_artifact_id = str(uuid.uuid4())
            await run.updater.add_artifact(
                parts,
                artifact_id=run.stream_artifact_id,
                name="response",
                append=not first,
                last_chunk=False,
            )
            if run.sent is None:
                run.sent = []
            run.sent.extend(parts)
            run.chunks += 1

    async def _release(self, run: _Run) -> None:
        """Send the held chunks as one artifact-update; keep holding later ones."""
        if run.held:
            parts, run.held = run.held, []
            await self._send_chunks(run, parts)

    async def _close_stream(self, run: _Run) -> None:
        """Mark the streamed artifact complete: its whole parts, append=false, lastChunk.

        a2a-sdk (server and client) replaces the artifact with these parts, so the stored
        task and every client hold each chunk once; ADK reads an update with lastChunk as
        the finished artifact; a late resubscriber gets the whole artifact.
        """
        if run.sent is None:  # nothing streamed (the send path): no lock, no event
            return
        async with run.lock:
            if run.terminal or run.stream_artifact_id is None or run.sent is None:
                return
            parts, run.sent = run.sent, None
            await run.updater.add_artifact(
                parts,
                artifact_id=run.stream_artifact_id,
                name="response",
                append=False,
                last_chunk=True,
            )

    async def _add_artifact(self, run: _Run, value: Any, name: str) -> None:
        run.published = True
        async with run.lock:
            if run.terminal:  # the run was ended (cancelled): nothing more is published
                return
            await run.updater.add_artifact(output_to_parts(value), name=name, last_chunk=True)

    async def _claim_terminal(self, run: _Run, state: TaskState) -> bool:
        """Whether ``run`` may publish its end as ``state``: it won the decision now, or
        it is already publishing the end it won. The one terminal-state guard: the
        answer, a failure, the guardrail, a cancel and shutdown all end a run through it."""
        if run.ending:
            return True
        async with run.lock:
            if not run.claim.decide(state):
                return False
            run.ending = True
            return True

    async def _progress(self, run: _Run, text: str, data: Mapping[str, Any] | None) -> None:
        """A ``working`` status update with ``text`` (+ ``data``) as its message."""
        run.published = True
        parts = progress_parts(text, data)
        async with run.lock:
            if run.terminal:
                return
            await run.updater.update_status(TaskState.working, message=_agent_message(run, parts))

    async def _finish(self, run: _Run, result: AgentOutput | _Streamed) -> None:
        streamed = isinstance(result, _Streamed)  # FinalOutput(output) of a stream
        output = result.output if isinstance(result, _Streamed) else result
        if isinstance(output, HITLInterrupt):
            auth = output.kind == "auth-required"
            state = TaskState.auth_required if auth else TaskState.input_required
        else:
            state = TaskState.completed
        if not await self._claim_terminal(run, state):
            return  # cancelled first: none of the answer is published
        await self._release(run)
        if run.chunks and isinstance(output, str) and not streamed:
            # emitted chunks, then returned text: the text is the stream's last chunk
            await self._send_chunks(run, [text_part(output)])
            output = None
        await self._close_stream(run)
        if isinstance(output, HITLInterrupt):
            await self._end(run, state, interrupt_parts(output))
            return
        if isinstance(output, Completed):
            await run.updater.add_artifact(completed_parts(output), name="result", last_chunk=True)
            text = [text_part(output.text)] if output.text else None
            await self._end(run, TaskState.completed, text)
            return
        if output is not None and not (isinstance(output, str) and run.chunks):
            name = "result" if isinstance(output, Mapping) else "response"
            await run.updater.add_artifact(output_to_parts(output), name=name, last_chunk=True)
        await self._end(run, TaskState.completed, None)

    # -- failures -------------------------------------------------------------------

    async def _flow_context(self, ctx: AgentContext, exc: BaseException) -> FlowContext | None:
        hook = getattr(self.agent, "failure_context", None)
        if not callable(hook):
            return None
        try:
            result = await hook(ctx, exc)
        except Exception:
            logger.warning("task %s: reading the flow context failed", ctx.task_id, exc_info=True)
            return None
        return result if isinstance(result, FlowContext) else None

    async def _enqueue_failed_response(
        self, run: _Run, exc: BaseException, ctx: AgentContext
    ) -> None:
        """The failed answer: flow context, kept artifacts, then failed + text + data."""
        if not await self._claim_terminal(run, TaskState.failed):
            return  # cancelled first: the failure is not published
        found = classify_exception(exc)
        guardrail = isinstance(found.exception, GuardrailBlockedError)
        if run.held is not None:
            run.held.clear()  # never released, so never shown
        if not guardrail:
            await self._close_stream(run)
        extras: dict[str, object] = {}
        flow = None if guardrail else await self._flow_context(ctx, exc)
        if flow is not None:
            if flow.node_id:
                extras["node"] = {"id": flow.node_id, "kind": flow.node_kind or "node"}
            extras["flow"] = {"completedNodes": list(flow.completed_nodes)}
            for node, value in flow.outputs.items():
                try:
                    await self._add_artifact(run, value, node)
                except Exception:
                    logger.warning("task %s: artifact of node %s not kept", run.task_id, node)
        data = error_data_for_exception(exc, classification=found, **extras)
        run.failure = self._log_failure(run, exc, data, flow)
        parts = application_error_to_parts(data)
        run.failure_data = data
        await self._end(run, TaskState.failed, parts, drop_artifacts=guardrail)

    def _log_failure(
        self, run: _Run, exc: BaseException, data: ApplicationErrorData, flow: FlowContext | None
    ) -> FailureRecord | None:
        """The run's ``FailureRecord``, logged on ``llamon_agent.failures``; built only when
        that line or the task-end line is enabled, or a failure store keeps it."""
        logged = failure_logger.isEnabledFor(logging.INFO)
        if not (logged or self.failure_store or logger.isEnabledFor(logging.INFO)):
            return None
        evidence: dict[str, object] = {}
        details = getattr(exc, "details", None)  # a LlamonError's keyword details
        if isinstance(details, Mapping):
            evidence.update(details)
        evidence.update(
            exception_type=type(exc).__name__, task_id=run.task_id, chunk_count=run.chunks
        )
        record = FailureRecord.from_error_data(
            data,
            stage=Stage.FLOW_NODE if flow and flow.node_id else None,
            step_id=flow.node_id if flow else None,
            evidence=evidence,
        )
        if not logged:
            return record
        failure_logger.info(
            "task %s failed: %s %s",
            run.task_id,
            data.error_code.value,
            json.dumps(record.to_dict(), ensure_ascii=False),
            extra={LOG_FIELDS: failure_log_fields(run.task_id, record)},
        )
        return record

    async def _protocol_failure(self, run: _Run, exc: ServerError) -> None:
        """The agent raised ServerError: a JSON-RPC error for the caller, a failed task."""
        if not await self._claim_terminal(run, TaskState.failed):
            return  # cancelled first: the caller gets the canceled task
        data = self._record_protocol_error(run.task_id, exc)
        run.failure = FailureRecord.from_error_data(data)
        if run.held is not None:
            run.held.clear()
        await self._close_stream(run)
        run.failure_data = data
        await self._end(run, TaskState.failed, application_error_to_parts(data))

    def _record_protocol_error(self, task_id: str, exc: ServerError) -> ApplicationErrorData:
        """Keep ``exc`` (with ProtocolErrorData) for the handler; the task's failure data."""
        error = with_protocol_data(exc)
        self.protocol_errors.put(task_id, error)
        inner = error.error
        wire = inner.data if inner is not None and isinstance(inner.data, dict) else {}
        code = json_rpc_to_error_code(inner.code if inner is not None else -32603)
        reason = str(wire.get("errorReason", "protocol_error"))
        message = (inner.message if inner is not None else None) or ""
        return make_application_error_data(code, reason, message)

    async def fail_unexpected(
        self, context: RequestContext, event_queue: EventQueue, exc: BaseException
    ) -> bool:
        """End the task ``failed`` at once because ``execute`` itself raised.

        Agent failures never get here (``execute`` answers them); this is for a bug in the
        executor or a subclass. The caller gets the usual failed task (INTERNAL_ERROR with
        an incident id for an unmapped exception; a ``ServerError`` still reaches the
        caller as its JSON-RPC error) instead of waiting for a2a-sdk to notice the raise.
        Returns ``False`` when there is nothing to end: no task id, or a closed queue.
        """
        task_id, context_id = context.task_id, context.context_id
        if task_id is None or context_id is None or event_queue.is_closed():
            return False
        claim = self.claims.running(task_id)
        decided = claim is None or claim.decide(TaskState.failed)
        if claim is not None and not decided and claim.ended_by == TaskState.canceled:
            return True  # a cancel won: its canceled status is the task's end
        if isinstance(exc, ServerError):
            data = self._record_protocol_error(task_id, exc)
        else:
            data = error_data_for_exception(exc)
        updater = TaskUpdater(event_queue, task_id, context_id)
        await updater.failed(updater.new_agent_message(application_error_to_parts(data)))
        self._task_ended(
            task_id, context_id, TaskState.failed, FailureRecord.from_error_data(data), None
        )
        if self.events is not None and self.events.active:
            status = TaskStatus(state=TaskState.failed, timestamp=_now())
            task = Task(id=task_id, context_id=context_id, status=status)
            self._end_event(task, TaskState.failed, data, None)
        return True

    async def _end(
        self,
        run: _Run,
        state: TaskState,
        parts: list[Part] | None,
        *,
        drop_artifacts: bool = False,
    ) -> None:
        """End ``run`` as ``state`` (with ``parts`` as the status message) if it may:
        ``_claim_terminal``, then ``_publish_terminal``."""
        if not await self._claim_terminal(run, state):
            return
        message = _agent_message(run, parts) if parts else None
        status = TaskStatus(state=state, message=message, timestamp=_now())
        await self._publish_terminal(run, status, drop_artifacts=drop_artifacts)

    async def _publish_terminal(
        self,
        run: _Run,
        status: TaskStatus,
        *,
        drop_artifacts: bool = False,
        to_store: bool = False,
    ) -> None:
        """Publish ``status`` as the run's last event; the caller claimed the end
        (``_claim_terminal``), and nothing of the run is published after it.

        On the run's event queue, the final status-update; with ``drop_artifacts`` the
        task itself, its artifacts withheld, instead (a2a-sdk stores it as it is: the
        guardrail's end). Written to the task store directly instead when ``to_store``
        (shutdown: the event consumers stop with the server), when the queue is closed
        (nobody reads it any more) or when it refuses the event.
        """
        run.ending = False  # published below; nothing after it
        self._task_ended(run.task_id, run.task.context_id, status.state, run.failure, run.started)
        if self.events is not None and self.events.active:
            chunks = run.chunks if run.streaming else None
            self._end_event(run.task, status.state, run.failure_data, chunks)
        queue = run.updater.event_queue
        if not to_store and not queue.is_closed():
            try:
                if drop_artifacts:
                    await queue.enqueue_event(_without_artifacts(run.task, status))
                else:
                    await run.updater.update_status(
                        status.state, message=status.message, final=True, timestamp=status.timestamp
                    )
                return
            except Exception:
                logger.exception("task %s: the event queue refused the final event", run.task_id)
        await self._persist_terminal(run, status)

    async def _persist_terminal(self, run: _Run, status: TaskStatus) -> None:
        """Write ``status`` to the store; a guarded store retries it while it is down."""
        store = self.task_store
        if store is None:
            return
        try:
            if isinstance(store, GuardedTaskStore):
                await store.end_task(run.task_id, status, fallback=run.task)
                return
            stored = await store.get(run.task_id)
            task = stored or run.task
            await store.save(task.model_copy(update={"status": status}))
        except Exception:
            logger.exception("task %s: could not write its terminal state", run.task_id)

    def abandon(self, task_id: str) -> None:
        """Nobody reads ``task_id``'s events any more: its run publishes nothing else.

        The request handler calls this when a task's reader stopped (a task-store write
        failed) before it cancels the agent and records the task's end itself, so the
        cancellation publishes no ``canceled`` status that nobody would read.
        """
        run = self._runs.get(task_id)
        if run is not None:
            run.claim.decide(TaskState.failed)  # no await: no _end can interleave with this
            run.ending = False

    def _task_ended(
        self,
        task_id: str,
        context_id: str,
        state: TaskState,
        failure: FailureRecord | None,
        started: float | None,
    ) -> None:
        """The task-end log line, and a failed task's failure handed to the failure store.

        Never raises: neither may change the answer being published."""
        try:
            if logger.isEnabledFor(logging.INFO):
                duration = None if started is None else (time.monotonic() - started) * 1000
                fields = task_end_log_fields(task_id, state.value, failure, duration)
                logger.info(task_end_message(fields), extra={LOG_FIELDS: fields})
            if state == TaskState.failed and failure is not None and self.failure_store:
                self.failure_store.record(
                    StoredFailure.of(
                        failure,
                        task_id=task_id,
                        context_id=context_id,
                        agent=self.agent_name,
                        node=failure.step_id if failure.stage == Stage.FLOW_NODE else None,
                    )
                )
        except Exception:
            logger.warning("task %s: its end was not logged or stored", task_id, exc_info=True)

    # -- shutdown -------------------------------------------------------------------

    async def shutdown(self) -> list[str]:
        """End every running task ``failed`` / ``worker_shutdown`` (retriable), in the store.

        Called when the server stops, so a graceful stop leaves no task ``working``. The
        state is written to the task store directly: the event consumers stop with the
        server. Terminal states a guarded store is still retrying get one last bounded
        try; the next start ends what is left (``reconcile_orphaned_tasks``). Returns the
        ids ended.
        """
        ended: list[str] = []
        data = make_application_error_data(
            ErrorCode.UPSTREAM_UNAVAILABLE,
            "worker_shutdown",
            "The server stopped before this task finished; send it again.",
            retriable=True,
        )
        for run in list(self._runs.values()):
            stopper = run.other_publisher()  # the run itself may be publishing its own end
            if not await self._claim_terminal(stopper, TaskState.failed):
                continue
            stopper.failure = FailureRecord.from_error_data(data)
            stopper.failure_data = data
            run.failure_data = data  # for the run's own span and metrics
            status = TaskStatus(
                state=TaskState.failed,
                message=_agent_message(run, application_error_to_parts(data)),
                timestamp=_now(),
            )
            await self._publish_terminal(stopper, status, to_store=True)
            ended.append(run.task_id)
        if isinstance(self.task_store, GuardedTaskStore):
            await self.task_store.drain()  # last try at ends the store refused; retries stop
        return sorted(ended)

    # -- cancellation ---------------------------------------------------------------

    async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
        """End the task ``canceled`` unless its run ended first; then the agent is cancelled.

        A running task's end is decided once, shared with the run (``RunClaim``): if the
        agent's own end (an answer, a failure, a new question) won, nothing is published
        here; if the cancel won, the run publishes nothing more. The ``canceled`` status
        goes to the run's own event queue (``event_queue`` when nothing runs).
        """
        task_id = str(context.task_id)
        claim = self.claims.running(task_id)
        running = self._runs.get(task_id)
        if running is not None and (
            running.claim.done.is_set() or (claim is not None and running.claim is not claim)
        ):
            running = None  # a run whose end is stored; it is only returning
        task = running.task if running is not None else context.current_task
        if task is None:  # pragma: no cover - a2a checks the task exists first
            return
        if running is not None:
            claim = running.claim
        queue = event_queue
        if running is not None:
            queue = running.updater.event_queue
        elif claim is not None and claim.queue is not None:
            queue = claim.queue
        canceler = _Run(
            updater=TaskUpdater(queue, task.id, task.context_id),
            task=task,
            streaming=False,
            claim=claim or RunClaim(task_id=task.id, context_id=task.context_id),
            started=running.started if running is not None else None,
        )
        await self._end(canceler, TaskState.canceled, None)


@dataclass(frozen=True, slots=True)
class _Streamed:
    """The ``FinalOutput(output)`` a stream ended with: its text was streamed already."""

    output: AgentOutput


def _without_artifacts(task: Task, status: TaskStatus) -> Task:
    """``task`` ended with ``status``, its artifacts withheld (the guardrail's end)."""
    return Task(
        id=task.id,
        context_id=task.context_id,
        status=status,
        artifacts=None,
        history=task.history,
        metadata=task.metadata,
    )


def _agent_message(run: _Run, parts: list[Part]) -> Message:
    return Message(
        role=Role.agent,
        parts=parts,
        message_id=str(uuid.uuid4()),
        task_id=run.task_id,
        context_id=run.task.context_id,
    )


def task_end_log_fields(
    task_id: str, state: str, failure: FailureRecord | None, duration_ms: float | None
) -> dict[str, object]:
    """The structured fields of the task-end line: ``event`` (``task_end``), ``taskId``,
    ``state``, ``errorCode``, ``reason``, ``stage``, ``incidentId`` (``None`` unless failed)
    and ``durationMs`` (``None`` when unknown)."""
    incident = failure.evidence.get("incident_id") if failure is not None else None
    return {
        "event": "task_end",
        "taskId": task_id,
        "state": state,
        "errorCode": failure.error_code.value if failure is not None else None,
        "reason": failure.reason if failure is not None else None,
        "stage": failure.stage if failure is not None else None,
        "incidentId": incident if isinstance(incident, str) else None,
        "durationMs": None if duration_ms is None else round(duration_ms, 1),
    }


def task_end_message(fields: Mapping[str, object]) -> str:
    """``task <id> <state> in <ms> ms`` and, for a failure, ``errorCode=... reason=...
    stage=... incidentId=...`` (the fields that are set)."""
    duration = fields.get("durationMs")
    text = f"task {fields['taskId']} {fields['state']}"
    if duration is not None:
        text += f" in {duration} ms"
    extras = [
        f"{key}={fields[key]}"
        for key in ("errorCode", "reason", "stage", "incidentId")
        if fields.get(key) is not None
    ]
    return " ".join([text, *extras])


def _now() -> str:
    return datetime.now(UTC).isoformat()


def _being_cancelled() -> bool:
    """Whether the current task has been asked to stop (``Task.cancel()``), as opposed to
    code raising ``CancelledError`` by itself."""
    task = asyncio.current_task()
    return task is not None and task.cancelling() > 0


def _blocking(context: RequestContext) -> bool:
    configuration = context.configuration
    return configuration is None or configuration.blocking is not False


def _default_name(agent: object) -> str:
    """An agent's name for its spans and metrics when none was given: its ``name``, else
    its class."""
    return str(getattr(agent, "name", None) or type(agent).__name__)


def _headers(context: RequestContext) -> Mapping[str, str] | None:
    """The request's HTTP headers (a2a-sdk keeps them in the call context's state)."""
    call = context.call_context
    headers = call.state.get("headers") if call is not None else None
    return headers if isinstance(headers, Mapping) else None


def _is_streaming(context: RequestContext) -> bool:
    call = context.call_context
    return bool(call is not None and call.state.get("method") == "message/stream")


def _interrupt_payload(task: Task) -> dict[str, Any] | None:
    """The payload of the pause being answered: the DataPart of the last agent message.

    a2a-sdk moves the paused status message into the history when the answer arrives.
    """
    candidates = [task.status.message, *reversed(task.history or [])]
    for message in candidates:
        if message is None or message.role != Role.agent:
            continue
        for part in message.parts:
            if isinstance(part.root, DataPart):
                return dict(part.root.data)
        return None
    return None
