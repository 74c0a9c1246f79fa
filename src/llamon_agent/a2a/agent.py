"""The one small agent protocol the A2A executor runs, and adapters that meet it.

An agent is anything with ``async def invoke(ctx) -> AgentOutput``. It may also offer
``stream(ctx)``, an async iterator of chunks, used for ``message/stream``. What you can
hand to the server:

* an object with ``invoke`` (and optionally ``stream``) -- used as is;
* an ``async def agent(ctx: AgentContext)`` function -- ``FunctionAgent``;
* an ``async def agent(ctx)`` *generator* -- each ``yield`` is a streamed chunk;
* a compiled LangGraph graph (or ``GraphBuilder`` flow) -- ``GraphAgent``.

``AgentOutput`` is what ``invoke`` returns: text, a mapping (sent as a DataPart), a list of
a2a ``Part``s, ``None`` (completed, no artifact), a ``Completed`` result (completed + data:
"no results", "not eligible"), or a ``HITLInterrupt`` (input-required / auth-required).
Failures are raised, never returned: the executor turns them into the failed answer.
"""

from __future__ import annotations

import inspect
import sys
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, TypeAlias, runtime_checkable

from a2a.types import DataPart, FilePart, Message, Part, TextPart

from llamon_agent.core.flow_context import FlowContext
from llamon_agent.core.hitl import HITLInterrupt

__all__ = [
    "Agent",
    "AgentContext",
    "AgentOutput",
    "Chunk",
    "Completed",
    "Final",
    "FinalOutput",
    "FlowContext",
    "FunctionAgent",
    "GeneratorAgent",
    "StreamingAgent",
    "as_agent",
]

Chunk: TypeAlias = str | Mapping[str, Any] | Part
"""One streamed piece: text, a JSON object (DataPart), or any a2a ``Part``."""


@dataclass(frozen=True, slots=True)
class Completed:
    """A result that is not an error: completed + a data Part.

    Use it for "no results" or "not eligible": the task ends ``completed`` (so later turns
    and HITL can still follow) and carries ``data`` as a DataPart and ``text`` for display.
    """

    data: Mapping[str, Any]
    text: str | None = None


AgentOutput: TypeAlias = str | Mapping[str, Any] | Sequence[Part] | Completed | HITLInterrupt | None


@dataclass(frozen=True, slots=True)
class FinalOutput:
    """Yielded last by a ``stream``: the run's output, which is not streamed as a chunk.

    Text already streamed is not sent again; a mapping or parts become a ``result``
    artifact; a ``HITLInterrupt`` or ``Completed`` ends the task as it would from ``invoke``.
    """

    output: AgentOutput


Final = FinalOutput
"""The older name of ``FinalOutput``, kept for code written against it."""


EmitFn = Callable[[Chunk], Awaitable[None]]
ArtifactFn = Callable[[Any, str], Awaitable[None]]
ProgressFn = Callable[[str, Mapping[str, Any] | None], Awaitable[None]]
ReleaseFn = Callable[[], Awaitable[None]]


async def _no_progress(text: str, data: Mapping[str, Any] | None) -> None:
    return None


async def _no_release() -> None:
    return None


class AgentContext:
    """What a running agent sees: the caller's input, the task, and where to stream.

    ``text`` joins the message's text parts; ``data`` lists its data parts. On a resumed
    task (after input-required), ``resumed`` is True and ``interrupt_payload`` is what the
    agent asked for. ``emit(chunk)`` streams a chunk as an artifact update;
    ``add_artifact(value, name)`` adds an intermediate artifact that is kept even if the
    agent fails later; ``progress(text)`` tells the caller what the agent is doing (a
    ``working`` status update, no artifact); ``release_chunks()`` sends the chunks an agent
    with ``hold_chunks = True`` has held back so far.
    """

    def __init__(
        self,
        *,
        task_id: str,
        context_id: str,
        message: Message,
        emit: EmitFn,
        add_artifact: ArtifactFn,
        streaming: bool = False,
        resumed: bool = False,
        interrupt_payload: Mapping[str, Any] | None = None,
        history: Sequence[Message] = (),
        progress: ProgressFn = _no_progress,
        release_chunks: ReleaseFn = _no_release,
    ) -> None:
        self.task_id = task_id
        self.context_id = context_id
        self.message = message
        self.streaming = streaming
        self.resumed = resumed
        self.interrupt_payload = interrupt_payload
        self.history = tuple(history)
        self._emit = emit
        self._add_artifact = add_artifact
        self._progress = progress
        self._release_chunks = release_chunks

    @property
    def parts(self) -> list[Part]:
        """The parts of the caller's message."""
        return list(self.message.parts)

    @property
    def text(self) -> str:
        """The caller's text parts, joined with newlines."""
        return "\n".join(p.root.text for p in self.message.parts if isinstance(p.root, TextPart))

    @property
    def data(self) -> list[dict[str, Any]]:
        """The caller's data parts."""
        return [p.root.data for p in self.message.parts if isinstance(p.root, DataPart)]

    @property
    def files(self) -> list[FilePart]:
        """The caller's file parts."""
        return [p.root for p in self.message.parts if isinstance(p.root, FilePart)]

    async def emit(self, chunk: Chunk) -> None:
        """Stream ``chunk`` to the caller now (an artifact-update event)."""
        await self._emit(chunk)

    async def add_artifact(self, value: Any, name: str) -> None:
        """Add an intermediate artifact named ``name``; it survives a later failure."""
        await self._add_artifact(value, name)

    async def progress(self, text: str, data: Mapping[str, Any] | None = None) -> None:
        """Tell the caller what the agent is doing now: a ``working`` status update whose
        message is ``text`` (and ``data`` as a DataPart). It creates no artifact; the
        message joins the task's history when the next status arrives."""
        await self._progress(text, data)

    async def release_chunks(self) -> None:
        """Send the chunks held back so far (an agent with ``hold_chunks = True``).

        Call it when the agent's guardrail check has passed on the text so far; later
        chunks are held again until the next call or the successful end. Without
        ``hold_chunks`` chunks are never held and this does nothing.
        """
        await self._release_chunks()


@runtime_checkable
class Agent(Protocol):
    """The protocol every served agent meets."""

    async def invoke(self, ctx: AgentContext) -> AgentOutput:
        """Do the work; return the result, or raise to fail."""
        ...


@runtime_checkable
class StreamingAgent(Agent, Protocol):
    """An agent that can also stream chunks for ``message/stream``.

    Two optional attributes change how its stream is served (read once, when the server
    is built; any agent may set them, a function agent through its adapter):

    * ``stream_fallback`` (default ``True``): when ``stream`` raises before the agent
      published anything (no chunk, artifact or progress), ``invoke`` runs once instead.
      ``invoke`` then repeats whatever side effects ``stream`` had; set it ``False`` for
      an agent whose work must not run twice.
    * ``hold_chunks`` (default ``False``): chunks are held back, not sent, until the
      agent calls ``ctx.release_chunks()`` or ends successfully; a failure (such as a
      ``GuardrailBlockedError``) drops what is still held, so a blocked text is never
      shown.
    """

    def stream(self, ctx: AgentContext) -> AsyncIterator[Chunk | FinalOutput]:
        """Yield chunks (then optionally ``FinalOutput(output)``); raising after the agent
        published anything fails the task with no fallback to ``invoke``."""
        ...


class FunctionAgent:
    """Adapts ``async def fn(ctx: AgentContext) -> AgentOutput``.

    ``hold_chunks``: see ``StreamingAgent`` (chunks the function ``ctx.emit``s).
    """

    def __init__(
        self,
        fn: Callable[[AgentContext], Awaitable[AgentOutput]],
        *,
        hold_chunks: bool = False,
    ) -> None:
        self.fn = fn
        self.name = getattr(fn, "__name__", "agent")
        self.hold_chunks = hold_chunks

    async def invoke(self, ctx: AgentContext) -> AgentOutput:
        """Call the function."""
        return await self.fn(ctx)


class GeneratorAgent:
    """Adapts ``async def fn(ctx)`` that ``yield``s chunks: a streaming agent.

    ``invoke`` (the non-streaming path, and the fallback when streaming fails before
    anything was published) collects the chunks: text chunks are joined, other chunks
    become parts. ``stream_fallback`` and ``hold_chunks``: see ``StreamingAgent``.
    """

    def __init__(
        self,
        fn: Callable[[AgentContext], AsyncIterator[Chunk | FinalOutput]],
        *,
        stream_fallback: bool = True,
        hold_chunks: bool = False,
    ) -> None:
        self.fn = fn
        self.name = getattr(fn, "__name__", "agent")
        self.stream_fallback = stream_fallback
        self.hold_chunks = hold_chunks

    def stream(self, ctx: AgentContext) -> AsyncIterator[Chunk | FinalOutput]:
        """The generator itself."""
        return self.fn(ctx)

    async def invoke(self, ctx: AgentContext) -> AgentOutput:
        """Run the generator to the end and return what it produced."""
        texts: list[str] = []
        parts: list[Part] = []
        async for chunk in self.fn(ctx):
            if isinstance(chunk, FinalOutput):
                return chunk.output
            if isinstance(chunk, str):
                texts.append(chunk)
            elif isinstance(chunk, Part):
                parts.append(chunk)
            else:
                parts.append(Part(root=DataPart(data=dict(chunk))))
        if not parts:
            return "".join(texts)
        if texts:
            parts.insert(0, Part(root=TextPart(text="".join(texts))))
        return parts


def as_agent(obj: object) -> Agent:
    """The ``Agent`` for ``obj`` (see the module docstring); ``TypeError`` if none fits."""
    if "langgraph" in sys.modules:  # a graph or flow exists only if LangGraph is loaded
        from llamon_agent.a2a.graph import GraphAgent, is_compiled_graph

        if is_compiled_graph(obj):  # before Agent: a graph has a (sync) invoke of its own
            return GraphAgent(obj)
    if isinstance(obj, Agent) and inspect.iscoroutinefunction(obj.invoke):
        return obj
    if inspect.isasyncgenfunction(obj):
        return GeneratorAgent(obj)
    if inspect.iscoroutinefunction(obj) or inspect.iscoroutinefunction(
        getattr(obj, "__call__", None)  # noqa: B004
    ):
        return FunctionAgent(obj)  # type: ignore[arg-type]
    raise TypeError(
        f"cannot serve {type(obj).__name__!r}: expected an object with 'async def invoke(ctx)', "
        "an 'async def fn(ctx)' function or generator, or a compiled LangGraph graph"
    )
