"""Learning regression cases from real failures: find them, compact them, propose a case.

A *candidate* is a failure that later succeeded for the same input (after a retry, a fix,
a new version). ``find_candidates`` reads two sources:

* the stores of a served agent (``Stores`` from ``open_stores``: task store, failure
  store and kept task events): a task that ended ``failed``, followed later (by its
  status time) by a task with the same input that ended ``completed``. The input is the
  first user message of the task: its text parts (whitespace normalised) and its data
  parts; two inputs are the same when both are equal;
* Quality Lab reports (``LabReport.to_dict()``): a result of a case that ``failed``,
  followed later by a result of the same case that ``passed`` (reports in the order of
  their ``started_at``, results in their order). The input is the case's ``query`` or
  ``parts``, read from the case file the report names (``source``).

The successful run gives the expected target (the first tool it selected: its first
``step.started`` event) and its rounds; the failure gives the reason observed.

``propose(candidate)`` turns a candidate into a ``Proposal``: the input passes the
security boundary (``core.scrub.scrub_public_text``) and, when scrubbing leaves it as it
was, becomes the case's ``query``/``parts``; when scrubbing would change anything (the
input carried a credential, an e-mail address, a card number, a phone number, a URL ...)
or a part cannot be checked (a file), the proposal is ``refused`` with reason
``scrub_failed``: it keeps the reason and the ids of the two runs only, never the input.

The proposed case (``learned_case``): ``name`` ``learned-<12 hex of the input's
SHA-256>`` (the same input always gets the same name, so learning twice proposes once),
``mode`` ``plan`` (what the selected tool changes is not known from a run's events;
``read_only_tools`` names tools without side effects, whose cases run in ``execute``),
``expected_target``, assertions ``selected_target``, ``final_state: completed``,
``uncaught_server_error: false``, ``allowed_failure_reasons: [<the reason it failed
with>]`` when the catalog knows that reason, ``max_rounds`` (the successful run's rounds
+ 1), tags ``[learned]``.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Final, Literal, TypeAlias

from a2a.types import DataPart as A2ADataPart
from a2a.types import Role, Task, TaskState
from a2a.types import TextPart as A2ATextPart

from llamon_agent.a2a.stores.failures import FailureQuery
from llamon_agent.a2a.stores.failures_tasks import error_data_of, recent_tasks
from llamon_agent.a2a.stores.open import Stores
from llamon_agent.core.catalog import reason_spec
from llamon_agent.core.events import RunnerEvent
from llamon_agent.core.scrub import scrub_public_text
from llamon_agent.lab.cases import (
    Assertions,
    Case,
    CaseFileError,
    DataPart,
    Part,
    TextPart,
    load_cases,
)

__all__ = [
    "LEARNED_PREFIX",
    "LEARNED_TAG",
    "SCRUB_FAILED",
    "STORE_SCAN_LIMIT",
    "Candidate",
    "CandidateSource",
    "LearnInput",
    "Proposal",
    "ProposalStatus",
    "find_candidates",
    "find_report_candidates",
    "find_store_candidates",
    "first_target",
    "input_key",
    "learned_case",
    "now_iso",
    "propose",
    "rounds_of",
]

LEARNED_PREFIX: Final = "learned-"
"""The name of every learned case starts with it."""
LEARNED_TAG: Final = "learned"
"""The tag every learned case carries."""
SCRUB_FAILED: Final = "scrub_failed"
"""The reason of a candidate whose input cannot pass the security boundary unchanged."""
STORE_SCAN_LIMIT: Final = 1000
"""How many of the newest tasks ``find_store_candidates`` reads by default."""

CandidateSource: TypeAlias = Literal["store", "report"]
ProposalStatus: TypeAlias = Literal["shadow", "accepted", "rejected", "refused"]

_SPACES: Final = re.compile(r"\s+")


@dataclass(frozen=True, slots=True)
class LearnInput:
    """What a run was sent: its text parts and data parts (``files``: how many file parts).

    Held in memory only, while learning: it is never printed (``repr`` hides it) nor
    stored unless it passes the security boundary unchanged.
    """

    texts: tuple[str, ...] = field(default=(), repr=False)
    data: tuple[Mapping[str, Any], ...] = field(default=(), repr=False)
    files: int = 0

    @property
    def empty(self) -> bool:
        """Nothing to send (no text, no data, no file)."""
        return not any(text.strip() for text in self.texts) and not self.data and not self.files


def input_key(value: LearnInput) -> str:
    """The identity of an input: its text parts joined with whitespace normalised, and its
    data parts as canonical JSON. Two runs had the same input when their keys are equal."""
    text = _SPACES.sub(" ", " ".join(value.texts)).strip()
    data = [json.dumps(item, sort_keys=True, ensure_ascii=False) for item in value.data]
    return json.dumps([text, data, value.files], ensure_ascii=False)


@dataclass(frozen=True, slots=True)
class Candidate:
    """A failure that later succeeded for the same input.

    ``source`` says where it was found; ``failed`` and ``succeeded`` name the two runs
    (task ids for the store; ``<case>#<result index>@<the report's start>`` for a report:
    ``find-dune#0@2026-11-30T21:57:00+00:00``); ``failure_reason``
    is the reason the failure was recorded with (``None``: unknown, or an assertion that
    did not hold); ``target`` the first tool the successful run selected (``None``: it
    selected none, or its events were not kept); ``rounds`` the successful run's loop
    rounds (``None``: unknown). ``input`` is what both runs were sent.
    """

    source: CandidateSource
    failed: str
    succeeded: str
    input: LearnInput = field(repr=False)
    failure_reason: str | None = None
    target: str | None = None
    rounds: int | None = None


@dataclass(slots=True)
class Proposal:
    """A learned case waiting for the promotion gate (``ProposalStore`` keeps them).

    ``id`` is the case's name (``learned-<hash>``), or ``refused-<hash of the two runs'
    ids>`` for a refused candidate, which has no case. ``status``: ``shadow`` (run and
    reported, not counted), ``accepted`` (written into a case file, ``accepted_into``),
    ``rejected`` (by a person: ``rejection_reason`` holds what they said; the input is
    never proposed again) or ``refused`` (``reason`` ``scrub_failed``: its input did not
    pass the security boundary). ``streak`` counts consecutive passes in shadow mode,
    ``runs`` every shadow run. ``source`` names the candidate's two runs and the reason
    it failed with. Times are ISO 8601, UTC.
    """

    id: str
    status: ProposalStatus
    case: dict[str, Any] | None = None
    reason: str | None = None
    rejection_reason: str | None = None
    streak: int = 0
    runs: int = 0
    created: str = ""
    updated: str = ""
    source: dict[str, Any] = field(default_factory=dict)
    accepted_into: str | None = None

    def to_dict(self) -> dict[str, Any]:
        """The proposal as the store's JSON keeps it."""
        return {
            "id": self.id,
            "status": self.status,
            "case": self.case,
            "reason": self.reason,
            "rejection_reason": self.rejection_reason,
            "streak": self.streak,
            "runs": self.runs,
            "created": self.created,
            "updated": self.updated,
            "source": dict(self.source),
            "accepted_into": self.accepted_into,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Proposal:
        """A proposal from ``to_dict``'s shape; ``ValueError`` naming what is wrong."""
        status = data.get("status")
        if status not in ("shadow", "accepted", "rejected", "refused"):
            raise ValueError(f"proposal {data.get('id')!r}: unknown status {status!r}")
        ident = data.get("id")
        if not isinstance(ident, str) or not ident:
            raise ValueError("a proposal without an id")
        case = data.get("case")
        return cls(
            id=ident,
            status=status,
            case=dict(case) if isinstance(case, Mapping) else None,
            reason=_optional_str(data.get("reason")),
            rejection_reason=_optional_str(data.get("rejection_reason")),
            streak=int(data.get("streak") or 0),
            runs=int(data.get("runs") or 0),
            created=str(data.get("created") or ""),
            updated=str(data.get("updated") or ""),
            source=dict(data.get("source") or {}),
            accepted_into=_optional_str(data.get("accepted_into")),
        )

    def to_case(self) -> Case:
        """The proposed case (``ValueError`` for a refused proposal, which has none)."""
        if self.case is None:
            raise ValueError(f"proposal {self.id!r} has no case ({self.reason or self.status})")
        return Case.model_validate(self.case)


def _optional_str(value: object) -> str | None:
    return value if isinstance(value, str) else None


def now_iso() -> str:
    """The current time as ISO 8601, UTC (what proposals record)."""
    return datetime.now(UTC).isoformat(timespec="seconds")


# -- compacting through the security boundary ---------------------------------------------


def _unchanged(text: str) -> bool:
    """``text`` passes the client-facing scrubber as it is (length kept: nothing cut)."""
    return scrub_public_text(text, max_length=max(2000, len(text))) == text


def _strings(value: object) -> Iterable[str]:
    """Every string (keys included) inside a JSON value."""
    if isinstance(value, str):
        yield value
    elif isinstance(value, Mapping):
        for key, item in value.items():
            yield str(key)
            yield from _strings(item)
    elif isinstance(value, list | tuple):
        for item in value:
            yield from _strings(item)


def _safe(value: LearnInput) -> bool:
    """Whether every text and every data part pass the security boundary unchanged (each
    string alone, and each data part as JSON text, so ``"password": "x"`` is caught)."""
    if value.files:
        return False  # a file's content cannot be checked here
    if not all(_unchanged(text) for text in value.texts):
        return False
    for item in value.data:
        try:
            rendered = json.dumps(item, ensure_ascii=False)
        except (TypeError, ValueError):
            return False
        if not _unchanged(rendered) or not all(_unchanged(text) for text in _strings(item)):
            return False
    return True


def _short_hash(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:12]


def _message(value: LearnInput) -> tuple[str | None, list[Part] | None]:
    """The case's ``query`` (one text part, no data) or ``parts``."""
    texts = [text for text in value.texts if text.strip()]
    if len(texts) == 1 and not value.data:
        return texts[0], None
    parts: list[Part] = [TextPart(kind="text", text=text) for text in texts]
    parts.extend(DataPart(kind="data", data=dict(item)) for item in value.data)
    return None, parts


def learned_case(candidate: Candidate, *, read_only_tools: Iterable[str] = ()) -> Case:
    """The regression case for ``candidate`` (see the module docstring). The input is
    used as it is: call it only on an input that passed the boundary (``propose`` does)."""
    query, parts = _message(candidate.input)
    target = candidate.target
    allowed = (
        [candidate.failure_reason]
        if candidate.failure_reason and reason_spec(candidate.failure_reason) is not None
        else None
    )
    assertions = Assertions(
        selected_target=target,
        final_state=TaskState.completed,
        uncaught_server_error=False,
        allowed_failure_reasons=allowed,
        max_rounds=candidate.rounds + 1 if candidate.rounds else None,
    )
    mode: Literal["execute", "plan"] = (
        "execute" if target is not None and target in set(read_only_tools) else "plan"
    )
    return Case(
        name=LEARNED_PREFIX + _short_hash(input_key(candidate.input)),
        mode=mode,
        query=query,
        parts=parts,
        expected_target=target,
        assertions=assertions,
        tags=[LEARNED_TAG],
    )


def _source(candidate: Candidate) -> dict[str, Any]:
    return {
        "kind": candidate.source,
        "failed": candidate.failed,
        "succeeded": candidate.succeeded,
        "failure_reason": candidate.failure_reason,
    }


def propose(candidate: Candidate, *, read_only_tools: Iterable[str] = ()) -> Proposal:
    """``candidate`` as a proposal: ``shadow`` with its case, or ``refused`` with reason
    ``scrub_failed`` (no case, no input: only the ids of its two runs) when its input
    does not pass the security boundary unchanged."""
    moment = now_iso()
    if not _safe(candidate.input):
        runs = f"{candidate.source}:{candidate.failed}:{candidate.succeeded}"
        return Proposal(
            id=f"refused-{_short_hash(runs)}",
            status="refused",
            reason=SCRUB_FAILED,
            created=moment,
            updated=moment,
            source=_source(candidate),
        )
    case = learned_case(candidate, read_only_tools=read_only_tools)
    assert case.name is not None  # noqa: S101 - learned_case names it
    return Proposal(
        id=case.name,
        status="shadow",
        case=case.model_dump(mode="json", exclude_none=True),
        created=moment,
        updated=moment,
        source=_source(candidate),
    )


# -- the store of a served agent ------------------------------------------------------------


def _task_input(task: Task) -> LearnInput | None:
    """The first user message of ``task`` (its history), or ``None``."""
    for message in task.history or []:
        if message.role != Role.user:
            continue
        texts: list[str] = []
        data: list[Mapping[str, Any]] = []
        files = 0
        for part in message.parts:
            root = part.root
            if isinstance(root, A2ATextPart):
                texts.append(root.text)
            elif isinstance(root, A2ADataPart):
                data.append(dict(root.data))
            else:
                files += 1
        return LearnInput(tuple(texts), tuple(data), files)
    return None


def first_target(events: Sequence[RunnerEvent]) -> str | None:
    """The tool the run selected first: the tool of its first ``step.started`` event."""
    for event in events:
        if event.type == "step.started" and event.tool:
            return event.tool
    return None


def rounds_of(events: Sequence[RunnerEvent]) -> int | None:
    """The loop rounds of a run: ``rounds`` of its ``run.completed`` event, else the
    highest round any event names (``None`` when no event names one)."""
    for event in reversed(events):
        rounds = event.trace_metadata.get("rounds")
        if event.type == "run.completed" and isinstance(rounds, int) and rounds > 0:
            return rounds
    highest = max((event.round for event in events), default=0)
    return highest or None


def _pairs(tasks: Sequence[Task]) -> list[tuple[Task, Task, LearnInput]]:
    """Per input: its last failure that a later completed task of the same input
    followed, with the first such completed task."""
    by_input: dict[str, list[tuple[Task, LearnInput]]] = {}
    for task in tasks:
        found = _task_input(task)
        if found is None or found.empty:
            continue
        by_input.setdefault(input_key(found), []).append((task, found))
    pairs: list[tuple[Task, Task, LearnInput]] = []
    for runs in by_input.values():
        runs.sort(key=lambda run: run[0].status.timestamp or "")
        failed: Task | None = None
        for task, found in runs:
            state = task.status.state
            if state == TaskState.failed:
                failed = task
            elif state == TaskState.completed and failed is not None:
                pairs.append((failed, task, found))
                break
    return pairs


async def _failure_reason(stores: Stores, task: Task) -> str | None:
    """The reason of the failure record the store kept for ``task``, else the
    ``errorReason`` its caller received."""
    if stores.failures is not None:
        page = await stores.failures.query(FailureQuery(task_id=task.id, limit=1))
        if page.rows:
            return page.rows[0].reason
    return _optional_str((error_data_of(task) or {}).get("errorReason"))


async def find_store_candidates(
    stores: Stores, *, limit: int = STORE_SCAN_LIMIT
) -> list[Candidate]:
    """The candidates among the newest ``limit`` tasks of ``stores``: per input, the last
    failed task that a later completed task with the same input followed (one candidate
    per input). ``ValueError`` for a memory store (its tasks live in the serving process)."""
    tasks = await recent_tasks(stores, limit=limit)
    candidates: list[Candidate] = []
    for failed, succeeded, found in _pairs(tasks):
        reason = await _failure_reason(stores, failed)
        events = await stores.events.for_task(succeeded.id) if stores.events else []
        candidates.append(
            Candidate(
                source="store",
                failed=failed.id,
                succeeded=succeeded.id,
                input=found,
                failure_reason=reason,
                target=first_target(events),
                rounds=rounds_of(events),
            )
        )
    return candidates


# -- Quality Lab reports ----------------------------------------------------------------------


def _case_input(case: Case) -> LearnInput:
    if case.query is not None:
        return LearnInput((case.query,))
    texts: list[str] = []
    data: list[Mapping[str, Any]] = []
    files = 0
    for part in case.parts or []:
        if isinstance(part, TextPart):
            texts.append(part.text)
        elif isinstance(part, DataPart):
            data.append(dict(part.data))
        else:
            files += 1
    return LearnInput(tuple(texts), tuple(data), files)


def _cases_of(source: str, base: Path | None, cache: dict[str, list[Case]]) -> list[Case]:
    """The cases of the file a report names (as given, else next to the report)."""
    if source in cache:
        return cache[source]
    found: list[Case] = []
    for path in (Path(source), *((base / source,) if base is not None else ())):
        if path.is_file():
            try:
                found = load_cases(path)
            except (CaseFileError, ImportError):
                found = []
            break
    cache[source] = found
    return found


def _result_input(
    result: Mapping[str, Any], base: Path | None, cache: dict[str, list[Case]]
) -> LearnInput | None:
    """The input of a report's result: its own ``query``/``parts`` when it carries them,
    else the case's, from the case file the result names."""
    if result.get("query") or result.get("parts"):
        try:
            entry = {"mode": "plan", "query": result.get("query"), "parts": result.get("parts")}
            return _case_input(Case.model_validate(entry))
        except ValueError:
            return None
    name = result.get("case")
    source = result.get("source")
    if not isinstance(source, str) or not source:
        return None
    for case in _cases_of(source, base, cache):
        if case.label == name:
            return _case_input(case)
    return None


def _result_target(result: Mapping[str, Any]) -> str | None:
    target = result.get("selected_target")
    if isinstance(target, str) and target:
        return target
    for step in result.get("steps") or []:
        if isinstance(step, Mapping) and isinstance(step.get("tool"), str):
            return str(step["tool"])
    return None


def _started(value: object) -> str:
    """A report's ``started_at`` as ISO 8601, UTC (``?`` when it has none)."""
    if not isinstance(value, int | float) or isinstance(value, bool):
        return "?"
    return datetime.fromtimestamp(value, UTC).isoformat(timespec="seconds")


def find_report_candidates(
    reports: Sequence[Mapping[str, Any]], *, base_dirs: Sequence[Path | None] = ()
) -> list[Candidate]:
    """The candidates in Quality Lab reports (``LabReport.to_dict()``): per case, its last
    failed result that a later passed result followed. ``base_dirs[i]`` is where report
    ``i`` lies: a case file it names by a relative path is looked for there too. A case
    whose file cannot be read is left out (its input is not known)."""
    ordered = sorted(range(len(reports)), key=lambda i: float(reports[i].get("started_at") or 0.0))
    runs: dict[str, list[tuple[str, Mapping[str, Any], Path | None]]] = {}
    for index in ordered:
        base = base_dirs[index] if index < len(base_dirs) else None
        started = _started(reports[index].get("started_at"))
        for position, result in enumerate(reports[index].get("results") or []):
            if not isinstance(result, Mapping) or not isinstance(result.get("case"), str):
                continue
            label = f"{result['case']}#{position}@{started}"
            runs.setdefault(str(result["case"]), []).append((label, result, base))
    cache: dict[str, list[Case]] = {}
    candidates: list[Candidate] = []
    for results in runs.values():
        failed: tuple[str, Mapping[str, Any], Path | None] | None = None
        for label, result, base in results:
            outcome = result.get("outcome")
            if outcome == "failed":
                failed = (label, result, base)
            elif outcome == "passed" and failed is not None:
                found = _result_input(result, base, cache)
                if found is None or found.empty:
                    break
                rounds = result.get("rounds")
                candidates.append(
                    Candidate(
                        source="report",
                        failed=failed[0],
                        succeeded=label,
                        input=found,
                        failure_reason=_optional_str(failed[1].get("failure_reason")),
                        target=_result_target(result),
                        rounds=rounds if isinstance(rounds, int) and rounds > 0 else None,
                    )
                )
                break
    return candidates


async def find_candidates(
    stores: Stores | None = None,
    reports: Sequence[Mapping[str, Any]] = (),
    *,
    base_dirs: Sequence[Path | None] = (),
    limit: int = STORE_SCAN_LIMIT,
) -> list[Candidate]:
    """The candidates of ``stores`` (when given; see ``find_store_candidates``) then of
    ``reports`` (``find_report_candidates``)."""
    found = await find_store_candidates(stores, limit=limit) if stores is not None else []
    return [*found, *find_report_candidates(reports, base_dirs=base_dirs)]
