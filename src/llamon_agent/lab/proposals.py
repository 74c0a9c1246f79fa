"""The proposal store and the promotion gate of learned cases.

A ``ProposalStore`` is one JSON file (default ``$LLAMON_HOME/lab/proposals.json``),
written atomically (a temporary file in the same directory, then a rename), holding
every ``Proposal`` (``lab.learn``) ever made, whatever became of it, so the same input is
never proposed twice. What the caller sees:

* ``add(proposals)``: stores the ones whose ``id`` is new; returns ``(new, known)``.
* ``shadow_cases()``: the cases of the proposals in ``shadow`` mode (the runner runs and
  reports them without counting them). ``record(case_name, passed)`` after each shadow
  run: a pass adds one to the proposal's ``streak``, a fail resets it to 0; ``runs``
  counts both.
* ``accept(id, into=PATH, k=3)``: the gate. Until the proposal has passed ``k`` times in
  a row it raises ``PromotionRefused`` with reason ``insufficient_repeated_success``
  ("passed 1 time in a row; needs 3"); a rejected proposal raises it with
  ``promotion_rejected``, a refused one with ``scrub_failed``. Once it passed, the case is
  appended to the case file ``into`` (JSON, or YAML with the ``lab`` extra; created if
  missing; a YAML file keeps its comments) and the file is checked to still load with
  ``load_cases`` before it replaces the old one; the proposal becomes ``accepted``.
* ``reject(id, reason)``: the proposal becomes ``rejected`` (reason
  ``promotion_rejected``, the person's words, scrubbed, in ``rejection_reason``) and is
  kept, so its input is never proposed again.
* A problem that is not the gate's (an unknown id, a case file that does not load, a
  proposals file that is not the store's JSON) raises ``ProposalError`` naming it.

Exceptions::

    Exception
    ├── PromotionRefused   the gate said no: ``reason``, ``proposal_id``
    └── ValueError
        └── ProposalError  the request or a file is wrong
"""

from __future__ import annotations

import contextlib
import json
import os
import tempfile
import threading
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any, Final

from llamon_agent.core.catalog import reason_spec
from llamon_agent.core.scrub import scrub_public_text
from llamon_agent.core.settings import llamon_home
from llamon_agent.lab.cases import CASE_FILE_SUFFIXES, Case, CaseFileError, load_cases
from llamon_agent.lab.learn import Proposal, now_iso

try:  # POSIX: one writer at a time across processes
    import fcntl
except ImportError:  # pragma: no cover - Windows: the in-process lock only
    fcntl = None  # type: ignore[assignment]

__all__ = [
    "DEFAULT_MIN_STREAK",
    "INSUFFICIENT_REPEATED_SUCCESS",
    "PROMOTION_REJECTED",
    "PROPOSALS_FILENAME",
    "PromotionRefused",
    "ProposalError",
    "ProposalStore",
    "append_case",
    "default_proposals_path",
]

PROPOSALS_FILENAME: Final = "proposals.json"
DEFAULT_MIN_STREAK: Final = 3
"""Passes in a row a proposal needs before ``accept`` takes it."""
INSUFFICIENT_REPEATED_SUCCESS: Final = "insufficient_repeated_success"
PROMOTION_REJECTED: Final = "promotion_rejected"
_SCRUB_FAILED: Final = "scrub_failed"
_VERSION: Final = 1
_REASON_LIMIT: Final = 500

_lock: Final = threading.Lock()


def default_proposals_path(home: Path | None = None) -> Path:
    """``<home>/lab/proposals.json``; ``home`` defaults to ``llamon_home()``."""
    return (home if home is not None else llamon_home()) / "lab" / PROPOSALS_FILENAME


class PromotionRefused(Exception):
    """The promotion gate refused: ``reason`` (``insufficient_repeated_success``,
    ``promotion_rejected`` or ``scrub_failed``) and ``proposal_id``; the message says why
    in words ("passed 1 time in a row; needs 3")."""

    def __init__(self, proposal_id: str, reason: str, message: str) -> None:
        super().__init__(message)
        self.proposal_id = proposal_id
        self.reason = reason

    @property
    def operator_action(self) -> str:
        """What the catalog says to do about ``reason``."""
        spec = reason_spec(self.reason)
        return spec.operator_action if spec is not None else ""

    def to_dict(self) -> dict[str, object]:
        """The envelope ``FailureRecord.from_exception`` reads: stage ``learn``, reason,
        message."""
        return {"stage": "learn", "reason": self.reason, "message": str(self)}


class ProposalError(ValueError):
    """A request the store cannot serve, or a file it cannot use; the message names it."""


def _times(count: int) -> str:
    return f"{count} time{'' if count == 1 else 's'}"


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[None]:
    """One read-modify-write at a time: this process's lock, and (POSIX) a lock file
    next to ``path`` for other processes."""
    with _lock:
        if fcntl is None:  # pragma: no cover
            yield
            return
        path.parent.mkdir(parents=True, exist_ok=True)
        with open(path.with_name(path.name + ".lock"), "a") as handle:
            fcntl.flock(handle, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(handle, fcntl.LOCK_UN)


def _write_atomic(path: Path, text: str) -> None:
    """Write ``text`` to a temporary file next to ``path``, then rename it over ``path``."""
    path.parent.mkdir(parents=True, exist_ok=True)
    handle, temporary = tempfile.mkstemp(
        prefix=f".{path.name}.", suffix=".tmp" + path.suffix, dir=path.parent
    )
    try:
        with os.fdopen(handle, "w", encoding="utf-8") as stream:
            stream.write(text)
            stream.flush()
            os.fsync(stream.fileno())
        os.replace(temporary, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temporary)
        raise


class ProposalStore:
    """The proposals in the JSON file at ``path`` (see the module docstring)."""

    def __init__(self, path: str | Path | None = None) -> None:
        self.path = Path(path) if path is not None else default_proposals_path()

    # -- reading and writing ------------------------------------------------------------

    def load(self) -> list[Proposal]:
        """Every proposal, oldest first (none when the file does not exist yet).
        ``ProposalError`` naming the file when it is not the store's JSON."""
        try:
            text = self.path.read_text(encoding="utf-8")
        except FileNotFoundError:
            return []
        except OSError as exc:
            raise ProposalError(f"{self.path}: cannot be read ({type(exc).__name__})") from exc
        try:
            document = json.loads(text)
            entries = document["proposals"]
            if not isinstance(entries, list):
                raise TypeError("'proposals' is not a list")
            return [Proposal.from_dict(entry) for entry in entries]
        except json.JSONDecodeError as exc:
            raise ProposalError(
                f"{self.path}: not valid JSON (line {exc.lineno}, column {exc.colno})"
            ) from exc
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise ProposalError(f"{self.path}: not a proposals file ({exc})") from exc

    def _save(self, proposals: list[Proposal]) -> None:
        document = {"version": _VERSION, "proposals": [p.to_dict() for p in proposals]}
        _write_atomic(self.path, json.dumps(document, indent=2, ensure_ascii=False) + "\n")

    def get(self, proposal_id: str) -> Proposal | None:
        """The proposal ``proposal_id``, or ``None``."""
        return next((p for p in self.load() if p.id == proposal_id), None)

    def add(self, proposals: Iterable[Proposal]) -> tuple[list[Proposal], list[Proposal]]:
        """Store the proposals whose id is new; ``(new, known)`` (``known``: as stored)."""
        with _locked(self.path):
            stored = self.load()
            by_id = {p.id: p for p in stored}
            new: list[Proposal] = []
            known: list[Proposal] = []
            for proposal in proposals:
                if proposal.id in by_id:
                    if by_id[proposal.id] not in known:
                        known.append(by_id[proposal.id])
                    continue
                by_id[proposal.id] = proposal
                stored.append(proposal)
                new.append(proposal)
            if new:
                self._save(stored)
        return new, known

    # -- the runner's side ----------------------------------------------------------------

    def shadow_cases(self) -> list[Case]:
        """The cases of the proposals in ``shadow`` mode, oldest first."""
        return [p.to_case() for p in self.load() if p.status == "shadow"]

    def record(self, case_name: str, passed: bool) -> Proposal | None:
        """Count one shadow run of ``case_name``: a pass adds one to its streak, a fail
        resets it. Returns the updated proposal (``None``: no proposal in shadow mode has
        that case)."""
        with _locked(self.path):
            stored = self.load()
            for proposal in stored:
                if proposal.status == "shadow" and proposal.id == case_name:
                    proposal.runs += 1
                    proposal.streak = proposal.streak + 1 if passed else 0
                    proposal.updated = now_iso()
                    self._save(stored)
                    return proposal
        return None

    # -- the gate -------------------------------------------------------------------------

    def _find(self, stored: list[Proposal], proposal_id: str) -> Proposal:
        for proposal in stored:
            if proposal.id == proposal_id:
                return proposal
        raise ProposalError(f"no proposal {proposal_id!r} in {self.path}")

    def accept(
        self, proposal_id: str, *, into: str | Path, k: int = DEFAULT_MIN_STREAK
    ) -> Proposal:
        """Append the proposal's case to the case file ``into`` and mark it ``accepted``,
        once it passed ``k`` times in a row. ``PromotionRefused`` before that (and for a
        rejected or refused proposal); ``ProposalError`` for an unknown id, one already
        accepted, ``k`` < 1 or a case file that cannot take the case."""
        if k < 1:
            raise ProposalError(f"the streak needed must be at least 1, got {k}")
        target = Path(into)
        with _locked(self.path):
            stored = self.load()
            proposal = self._find(stored, proposal_id)
            if proposal.status == "accepted":
                raise ProposalError(
                    f"proposal {proposal_id!r} is already accepted"
                    f" (into {proposal.accepted_into or 'a case file'})"
                )
            if proposal.status == "rejected":
                raise PromotionRefused(
                    proposal_id,
                    PROMOTION_REJECTED,
                    f"it was rejected ({proposal.rejection_reason or 'no reason given'});"
                    " a rejected proposal is kept so its input is not proposed again",
                )
            if proposal.status == "refused":
                raise PromotionRefused(
                    proposal_id,
                    proposal.reason or _SCRUB_FAILED,
                    "its input did not pass the security boundary; it has no case",
                )
            if proposal.streak < k:
                raise PromotionRefused(
                    proposal_id,
                    INSUFFICIENT_REPEATED_SUCCESS,
                    f"passed {_times(proposal.streak)} in a row; needs {k}",
                )
            append_case(target, proposal.to_case())
            proposal.status = "accepted"
            proposal.accepted_into = str(target)
            proposal.updated = now_iso()
            self._save(stored)
            return proposal

    def reject(self, proposal_id: str, reason: str) -> Proposal:
        """Mark the proposal ``rejected`` with ``reason`` (scrubbed; reason
        ``promotion_rejected``), kept so its input is never proposed again.
        ``ProposalError`` for an unknown id, an empty reason, or a proposal that is not in
        shadow mode."""
        words = reason.strip()
        if not words:
            raise ProposalError("say why it is rejected: the reason must not be empty")
        with _locked(self.path):
            stored = self.load()
            proposal = self._find(stored, proposal_id)
            if proposal.status != "shadow":
                raise ProposalError(
                    f"proposal {proposal_id!r} is {proposal.status}; only a proposal in"
                    " shadow mode can be rejected"
                )
            proposal.status = "rejected"
            proposal.reason = PROMOTION_REJECTED
            proposal.rejection_reason = scrub_public_text(words, max_length=_REASON_LIMIT)
            proposal.updated = now_iso()
            self._save(stored)
            return proposal


# -- writing a case into a case file ------------------------------------------------------


def _yaml() -> Any:
    try:
        import yaml
    except ImportError as exc:
        from llamon_agent._extras import missing_extra

        raise missing_extra("lab", "writing YAML case files", exc) from exc
    return yaml


def _dump(path: Path, data: Any) -> str:
    if path.suffix == ".json":
        return json.dumps(data, indent=2, ensure_ascii=False) + "\n"
    text: str = _yaml().safe_dump(data, sort_keys=False, allow_unicode=True)
    return text


def _yaml_appended(text: str, data: Any, entry: dict[str, Any]) -> str | None:
    """``text`` with ``entry`` added as the last item of its list (the whole file, or its
    ``cases:`` list), comments kept; ``None`` when the layout is not one this handles."""
    block: str = _yaml().safe_dump([entry], sort_keys=False, allow_unicode=True)
    body = text if text.endswith("\n") else text + "\n"
    if isinstance(data, list):
        return body + block
    lines = body.splitlines()
    starts = [i for i, line in enumerate(lines) if line.rstrip() == "cases:"]
    if len(starts) != 1:
        return None
    for line in lines[starts[0] + 1 :]:
        stripped = line.lstrip(" ")
        if stripped.startswith("- "):
            indent = " " * (len(line) - len(stripped))
            return body + "".join(f"{indent}{row}\n" for row in block.splitlines())
    return None


def _read_raw(path: Path) -> tuple[str, Any]:
    text = path.read_text(encoding="utf-8")
    data = json.loads(text) if path.suffix == ".json" else _yaml().safe_load(text)
    return text, data


def _with_entry(data: Any, entry: dict[str, Any]) -> Any:
    if isinstance(data, list):
        return [*data, entry]
    if isinstance(data, dict) and set(data) == {"cases"}:
        return {"cases": [*data["cases"], entry]}
    return [data, entry]


def _loads_as(path: Path, text: str, names: list[str | None]) -> bool:
    """Whether ``text`` written as a file like ``path`` loads, holding cases ``names``."""
    handle, temporary = tempfile.mkstemp(prefix=".check.", suffix=path.suffix, dir=path.parent)
    try:
        with os.fdopen(handle, "w", encoding="utf-8") as stream:
            stream.write(text)
        try:
            return [case.name for case in load_cases(temporary)] == names
        except CaseFileError:
            return False
    finally:
        with contextlib.suppress(OSError):
            os.unlink(temporary)


def append_case(into: str | Path, case: Case) -> None:
    """Append ``case`` to the case file ``into`` (created with this case alone when
    missing). The file must load with ``load_cases`` before, and the new content must load
    (with the case last) before it replaces the file. ``ProposalError`` naming the file
    otherwise (a suffix that is not a case file's, a file that does not load, a case of
    the same name already in it); ``ImportError`` naming the ``lab`` extra for YAML
    without PyYAML."""
    path = Path(into)
    if path.suffix not in CASE_FILE_SUFFIXES:
        raise ProposalError(f"{path}: not a case file name: use .json, .yaml or .yml")
    entry = case.model_dump(mode="json", exclude_none=True)
    candidates: list[str] = []
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        names: list[str | None] = [case.name]
        candidates.append(_dump(path, [entry]))
    else:
        try:
            existing = load_cases(path)
        except CaseFileError as exc:
            message = f"{path} does not load, so no case is added to it:\n{exc}"
            raise ProposalError(message) from exc
        if any(other.name == case.name for other in existing):
            raise ProposalError(f"{path} already holds a case named {case.name!r}")
        names = [*(other.name for other in existing), case.name]
        text, data = _read_raw(path)
        if path.suffix != ".json":
            appended = _yaml_appended(text, data, entry)
            if appended is not None:
                candidates.append(appended)
        candidates.append(_dump(path, _with_entry(data, entry)))
    for content in candidates:
        if _loads_as(path, content, names):
            _write_atomic(path, content)
            return
    raise ProposalError(f"{path}: the case could not be added so that the file still loads")
