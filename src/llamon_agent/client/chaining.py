"""``chain(a, b, c, input=...)``: each agent's answer is the next agent's question.

Before anything is sent, every card is read and each agent's output modes (the chosen
skill's ``output_modes``, else the card's ``default_output_modes``) are checked against the
next agent's input modes (the skill's ``input_modes``, else the card's defaults): two
neighbours with no mode in common raise ``CardMismatchError`` naming both agents and both
lists of modes, and no agent is called.

Then the agents are called in order. The parts of every artifact of one step's result
are the next step's message. A part goes *by value* (as it came), or *by reference* when
it is larger than ``by_reference_above`` bytes (default ``DEFAULT_BY_REFERENCE_ABOVE``,
256 KiB) and a ``shelf`` is given: its bytes go on the caller's ``ArtifactShelf`` and the
next agent gets a ``FilePart`` whose URI points there, with the part's media type
(``text/plain`` for text, ``application/json`` for data, a file's own type). The entries
are removed as soon as the step that reads them has answered, and in any case when the
chain ends. Without a shelf every part goes by value.

What the caller gets: a ``ChainResult`` (every step's ``RemoteResult``; ``last`` is the
answer). A step that does not complete (it asks for input, or was canceled) ends the
chain there: ``complete`` is False and ``last`` is that step's result. A step that fails
raises ``ChainFailedError``: a ``RemoteAgentError`` of the failing step's own class
(``except RemoteRateLimitedError`` still catches it) with the same code, reason, data and
cause hops, plus ``step`` (1-based), ``steps``, ``results`` (the steps that completed
before) and ``error`` (the step's own exception, also ``__cause__``). A local failure
before a step's request (a part that does not fit the card, no room on the shelf) is
raised as it is, with a note naming the step.
"""

from __future__ import annotations

import base64
import itertools
import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Final, Literal

from a2a.types import (
    AgentCard,
    Artifact,
    DataPart,
    FilePart,
    FileWithBytes,
    FileWithUri,
    Message,
    Part,
    TaskState,
    TextPart,
)

from llamon_agent.client.agent_client import AgentClient, CardMismatchError
from llamon_agent.client.errors import RemoteAgentError
from llamon_agent.client.result import RemoteResult
from llamon_agent.client.shelf import ArtifactShelf
from llamon_agent.exceptions import LlamonError

__all__ = [
    "DEFAULT_BY_REFERENCE_ABOVE",
    "ChainFailedError",
    "ChainResult",
    "ChainStep",
    "chain",
    "check_chain",
]

DEFAULT_BY_REFERENCE_ABOVE: Final = 256 * 1024
"""A part larger than this many bytes (256 KiB) goes by reference when a shelf is given:
a few such parts still fit the 1 MiB request bodies many proxies allow by default, far
below a llamon server's own 10 MiB limit."""

Input = Message | str | Sequence[Part] | RemoteResult
"""The first agent's question: a message, a text, parts, or an earlier agent's answer."""


@dataclass(frozen=True, slots=True)
class ChainStep:
    """One agent of a chain with the skill to call (None: the card's defaults)."""

    agent: AgentClient
    skill: str | None = None


@dataclass(frozen=True, slots=True)
class ChainResult:
    """Every step's result, in order. ``last`` is the answer of the chain; ``complete`` is
    True when every step ran and completed (False when one asked for input or was
    canceled: it is ``last``, and the steps after it were not called)."""

    results: tuple[RemoteResult, ...]
    steps: int

    @property
    def last(self) -> RemoteResult:
        """The last step's result (the chain's answer when ``complete``)."""
        return self.results[-1]

    @property
    def complete(self) -> bool:
        """Whether every step ran and completed."""
        return len(self.results) == self.steps and self.last.state is TaskState.completed


class ChainFailedError(RemoteAgentError):
    """A step of a chain failed: the step's own ``RemoteAgentError``, with where it failed.

    An instance is also of the failing step's class (a ``RATE_LIMITED`` step raises a
    ``ChainFailedError`` that is a ``RemoteRateLimitedError``), with the same ``code``,
    ``reason``, ``retriable``, ``retry_after_ms``, ``agent``, ``task_id``, ``data`` and
    ``cause_hops``: raised inside a llamon agent it answers with the step's errorCode. The
    message starts with ``chain step <step> of <steps>``; the failure record's evidence
    keeps ``chain_step_index`` and ``chain_step_count``. ``results`` are the completed
    steps' results, ``error`` the step's exception (also ``__cause__``).
    """

    step: int
    steps: int
    results: tuple[RemoteResult, ...]
    error: RemoteAgentError

    def __new__(cls, error: RemoteAgentError, **_: Any) -> ChainFailedError:
        own = _with_code_class(type(error)) if cls is ChainFailedError else cls
        instance: ChainFailedError = super(ChainFailedError, own).__new__(own)
        return instance

    def __init__(
        self,
        error: RemoteAgentError,
        *,
        step: int,
        steps: int,
        results: Sequence[RemoteResult] = (),
    ) -> None:
        named = f" (agent {error.agent!r})" if error.agent else ""
        message = f"chain step {step} of {steps}{named} failed: {error.message}"
        super().__init__(message, code=error.code, reason=error.reason)
        for name, value in vars(error).items():  # every field the step's error carries
            if name not in ("message", "details", "__notes__"):
                setattr(self, name, value)
        self.details = {**error.details, "chain_step_index": step, "chain_step_count": steps}
        self.step = step
        self.steps = steps
        self.results = tuple(results)
        self.error = error

    @property
    def cause_hops(self) -> list[dict[str, object]]:
        """The failing step's own ``cause_hops``."""
        return self.error.cause_hops


_CODE_CLASSES: dict[type[RemoteAgentError], type[ChainFailedError]] = {}


def _with_code_class(kind: type[RemoteAgentError]) -> type[ChainFailedError]:
    """``ChainFailedError`` that is also ``kind`` (one class per kind, made once)."""
    if issubclass(kind, ChainFailedError):
        return kind
    found = _CODE_CLASSES.get(kind)
    if found is None:
        found = _CODE_CLASSES[kind] = type(
            kind.__name__,
            (ChainFailedError, kind),
            {"__module__": __name__, "__qualname__": f"ChainFailedError[{kind.__name__}]"},
        )
    return found


def _as_step(step: AgentClient | ChainStep) -> ChainStep:
    return step if isinstance(step, ChainStep) else ChainStep(step)


def _modes(
    card: AgentCard, skill: str | None, kind: Literal["input", "output"]
) -> tuple[list[str], str]:
    """The modes a step takes in or gives out, and where they were read."""
    defaults = card.default_input_modes if kind == "input" else card.default_output_modes
    if skill is None:
        return list(defaults), f"default {kind} modes"
    found = next((s for s in card.skills if s.id == skill), None)
    if found is None:
        known = ", ".join(s.id for s in card.skills) or "none"
        raise CardMismatchError(f"agent {card.name!r} has no skill {skill!r} (skills: {known})")
    own = found.input_modes if kind == "input" else found.output_modes
    if own:
        return list(own), f"skill {skill!r} {kind} modes"
    return list(defaults), f"default {kind} modes"


def _overlap(given: str, taken: str) -> bool:
    """Whether an output mode and an input mode can meet (``*/*`` and ``text/*`` match)."""
    if given == taken or "*" in (given, taken) or "*/*" in (given, taken):
        return True
    g_kind, t_kind = given.split("/", 1)[0], taken.split("/", 1)[0]
    return g_kind == t_kind and (given.endswith("/*") or taken.endswith("/*"))


def check_chain(cards: Sequence[AgentCard], skills: Sequence[str | None]) -> None:
    """Raise ``CardMismatchError`` when an agent's output modes and the next agent's input
    modes have nothing in common (or a named skill does not exist), naming both agents and
    both lists of modes."""
    pairs = list(zip(cards, skills, strict=True))
    for (card, skill), (following, its_skill) in itertools.pairwise(pairs):
        given, given_where = _modes(card, skill, "output")
        taken, taken_where = _modes(following, its_skill, "input")
        if not any(_overlap(g, t) for g in given for t in taken):
            raise CardMismatchError(
                f"agent {card.name!r} cannot feed agent {following.name!r}: "
                f"{card.name!r} {given_where}: {', '.join(given) or 'none'}; "
                f"{following.name!r} {taken_where}: {', '.join(taken) or 'none'}; "
                "no mode in common, nothing was sent"
            )


def _payload(part: Part) -> tuple[bytes, str] | None:
    """A part's bytes and media type, or None for a file that is already a reference."""
    root = part.root
    if isinstance(root, TextPart):
        return root.text.encode(), "text/plain"
    if isinstance(root, DataPart):
        body = json.dumps(root.data, ensure_ascii=False, separators=(",", ":"))
        return body.encode(), "application/json"
    if isinstance(root.file, FileWithBytes):
        return base64.b64decode(root.file.bytes), root.file.mime_type or "application/octet-stream"
    return None


def _answer_parts(result: RemoteResult) -> list[tuple[Part, str | None]]:
    """Each part of the answer, with its artifact's name (a plain message reply: its text
    and data)."""
    artifacts: Sequence[Artifact] = result.artifacts
    if artifacts:
        return [(part, artifact.name) for artifact in artifacts for part in artifact.parts]
    parts = [Part(root=TextPart(text=result.text))] if result.text else []
    parts += [Part(root=DataPart(data=data)) for data in result.data]
    return [(part, None) for part in parts]


class _Handover:
    """Turns one answer into the next question; holds the shelf entries it made."""

    def __init__(self, shelf: ArtifactShelf | None, above: int) -> None:
        self.shelf = shelf
        self.above = above
        self.held: list[str] = []

    def parts(self, result: RemoteResult) -> list[Part]:
        return [self._part(part, name) for part, name in _answer_parts(result)]

    def _part(self, part: Part, name: str | None) -> Part:
        if self.shelf is None:
            return part
        found = _payload(part)
        if found is None or len(found[0]) <= self.above:
            return part
        body, media_type = found
        url = self.shelf.put(body, media_type)
        self.held.append(url)
        if isinstance(part.root, FilePart) and part.root.file.name:
            name = part.root.file.name
        return Part(root=FilePart(file=FileWithUri(uri=url, mime_type=media_type, name=name)))

    def release(self) -> None:
        if self.shelf is not None:
            for url in self.held:
                self.shelf.remove(url)
        self.held.clear()


async def chain(
    *steps: AgentClient | ChainStep,
    input: Input,
    shelf: ArtifactShelf | None = None,
    by_reference_above: int = DEFAULT_BY_REFERENCE_ABOVE,
) -> ChainResult:
    """Call ``steps`` in order, each with the previous step's answer; every step's result.

    ``input`` is the first agent's question (a text, a message, parts, or an earlier
    ``RemoteResult``, whose artifacts are handed over like a step's). A step is an
    ``AgentClient`` or a ``ChainStep(agent, skill=...)``. Raises ``CardMismatchError``
    before any call when two neighbours' modes do not fit, ``ChainFailedError`` (the
    failing step's own ``RemoteAgentError`` class) when a step fails. See the module's
    docstring for by-value and by-reference hand-over.
    """
    if not steps:
        raise ValueError("chain() needs at least one agent")
    plan = [_as_step(step) for step in steps]
    total = len(plan)
    cards: list[AgentCard] = []
    for index, step in enumerate(plan, 1):
        try:
            cards.append(await step.agent.card())
        except RemoteAgentError as exc:
            raise ChainFailedError(exc, step=index, steps=total) from exc
    check_chain(cards, [step.skill for step in plan])

    results: list[RemoteResult] = []
    question: Input = input
    for index, step in enumerate(plan, 1):
        handover = _Handover(shelf, by_reference_above)
        try:
            sent = handover.parts(question) if isinstance(question, RemoteResult) else question
            results.append(await step.agent.send(sent, skill=step.skill))
        except RemoteAgentError as exc:
            raise ChainFailedError(exc, step=index, steps=total, results=results) from exc
        except LlamonError as exc:
            exc.add_note(f"chain step {index} of {total} ({cards[index - 1].name!r})")
            raise
        finally:
            handover.release()
        question = results[-1]
        if question.state is not TaskState.completed:
            break
    return ChainResult(tuple(results), total)
