"""What a Quality Lab run found: one ``CaseResult`` per case run, and the ``LabReport``.

A case's ``outcome`` is one of:

==============  ==========================================================================
``passed``      every assertion held (and cleanup, when configured, succeeded)
``failed``      an assertion did not hold, or cleanup failed (``lab_reason``
                ``cleanup_failed``)
``refused``     the case was not run through: an execute case without cleanup reached a
                tool with side effects (``lab_reason`` ``cleanup_not_configured``), or the
                target cannot take the case's faults
``error``       the case could not be run at all (the target is unreachable, the agent
                could not be loaded); ``message`` says why
==============  ==========================================================================

A learned case still in shadow mode is run and reported with ``shadow=True`` but does
not count toward the run's result. Everything here already passed the security boundary:
the runner builds it from the A2A answer and the runner events, which are scrubbed.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any, Final, Literal, TypeAlias

__all__ = [
    "EVENT_SOURCES",
    "OUTCOMES",
    "AssertionResult",
    "CaseResult",
    "CleanupResult",
    "EventSource",
    "LabReport",
    "Outcome",
    "StepRecord",
]

Outcome: TypeAlias = Literal["passed", "failed", "refused", "error"]
OUTCOMES: Final[tuple[Outcome, ...]] = ("passed", "failed", "refused", "error")

EventSource: TypeAlias = Literal["events", "event_stream", "tool_results_artifact", "none"]
"""Where the steps came from: the runner events in process (``events``), the server's
``/tasks/{id}/events`` stream (``event_stream``), the ``tool_results`` artifact of a failed
task (``tool_results_artifact``), or nowhere (``none``: step assertions cannot be checked)."""
EVENT_SOURCES: Final[tuple[EventSource, ...]] = (
    "events",
    "event_stream",
    "tool_results_artifact",
    "none",
)


@dataclass(frozen=True, slots=True)
class StepRecord:
    """One tool call of the run: its ``round``, ``tool``, ``ok`` and, when it failed, the
    failure ``reason``."""

    round: int
    tool: str
    ok: bool
    reason: str | None = None


@dataclass(frozen=True, slots=True)
class AssertionResult:
    """One assertion of the case: ``name`` (the field in the case file), what was
    ``expected``, what was found (``actual``), whether it ``passed``, and ``message``
    (a sentence saying what did not hold; empty when it passed)."""

    name: str
    expected: Any
    actual: Any
    passed: bool
    message: str = ""


@dataclass(frozen=True, slots=True)
class CleanupResult:
    """One cleanup step: the ``tool`` run, whether it ``ok``, and the failure ``reason``."""

    tool: str
    ok: bool
    reason: str | None = None


@dataclass(slots=True)
class CaseResult:
    """One run of one case. See the module docstring for ``outcome``.

    ``failure`` is the A2A failure the run ended with (``errorCode``, ``errorReason``,
    ``message``, ``stage``, ``retriable``, ``incidentId`` ... as the server sent them),
    ``None`` when it did not fail. ``events`` are the runner events seen (JSON-ready
    dicts), ``event_source`` where ``steps`` came from. ``faults_fired`` counts each
    injected fault that took effect (``"kind:target"`` -> times). ``stopped_before`` names
    the tool a plan-mode case stopped before. ``repeat`` is the repetition's number (from
    0) under ``--repeat``. ``triage`` is the triage guide's row for the failure's reason.
    """

    case: str
    source: str = ""
    tags: Sequence[str] = ()
    mode: str = "execute"
    outcome: Outcome = "passed"
    lab_reason: str | None = None
    message: str = ""
    task_id: str | None = None
    final_state: str | None = None
    error_code: str | None = None
    failure_reason: str | None = None
    incident_id: str | None = None
    failure: Mapping[str, Any] | None = None
    selected_target: str | None = None
    steps: list[StepRecord] = field(default_factory=list)
    rounds: int | None = None
    duration_ms: float = 0.0
    artifact_texts: list[str] = field(default_factory=list)
    assertions: list[AssertionResult] = field(default_factory=list)
    faults: list[dict[str, Any]] = field(default_factory=list)
    faults_fired: dict[str, int] = field(default_factory=dict)
    events: list[dict[str, Any]] = field(default_factory=list)
    event_source: EventSource = "none"
    stopped_before: str | None = None
    cleanup: list[CleanupResult] = field(default_factory=list)
    repeat: int = 0
    shadow: bool = False
    triage: Mapping[str, Any] | None = None

    @property
    def passed(self) -> bool:
        """The case passed (a shadow case's result does not count: see ``counts``)."""
        return self.outcome == "passed"

    @property
    def failed_assertions(self) -> list[AssertionResult]:
        """The assertions that did not hold."""
        return [item for item in self.assertions if not item.passed]

    @property
    def reason_shown(self) -> str:
        """The reason a report shows for this result: the lab's own reason
        (``cleanup_failed`` ...), else the run's failure reason, else the assertions that
        did not hold (``assertion: final_state, error_code``), else ``""``."""
        if self.lab_reason or self.failure_reason:
            return self.lab_reason or self.failure_reason or ""
        failed = self.failed_assertions
        if failed:
            return "assertion: " + ", ".join(item.name for item in failed)
        return ""

    def to_dict(self) -> dict[str, Any]:
        """The result as JSON-ready data (every field, and ``passed``)."""
        data = asdict(self)
        data["tags"] = list(self.tags)
        data["passed"] = self.passed
        return data


@dataclass(slots=True)
class LabReport:
    """The results of one ``llamon lab run`` (or ``Lab.run``): every case run, in the
    order the cases were given (repetitions next to each other), and what it ran against.

    ``target`` names the target (``module:attr`` or the URL), ``started_at`` is seconds
    since the epoch, ``duration_ms`` the whole run.
    """

    results: list[CaseResult] = field(default_factory=list)
    target: str = ""
    started_at: float = 0.0
    duration_ms: float = 0.0

    @property
    def counted(self) -> list[CaseResult]:
        """The results that count (shadow cases left out)."""
        return [result for result in self.results if not result.shadow]

    @property
    def ok(self) -> bool:
        """Every counted result passed (an empty run is ok)."""
        return all(result.passed for result in self.counted)

    def counts(self) -> dict[str, int]:
        """Counted results by outcome, every outcome present (zero when none)."""
        found = Counter(result.outcome for result in self.counted)
        return {outcome: found.get(outcome, 0) for outcome in OUTCOMES}

    def by_reason(self) -> dict[tuple[str, str], int]:
        """Counted results by ``(outcome, reason_shown)``, most frequent first."""
        found = Counter((result.outcome, result.reason_shown) for result in self.counted)
        return dict(found.most_common())

    def to_dict(self) -> dict[str, Any]:
        """The report as JSON-ready data: ``target``, ``started_at``, ``duration_ms``,
        ``ok``, ``counts``, ``results`` (each ``CaseResult.to_dict``)."""
        return {
            "target": self.target,
            "started_at": self.started_at,
            "duration_ms": self.duration_ms,
            "ok": self.ok,
            "counts": self.counts(),
            "results": [result.to_dict() for result in self.results],
        }
