"""Quality Lab case files: the typed case model and ``load_cases``.

A case says what to send an agent (``query`` or message ``parts``), how far to run it
(``mode``: ``execute`` runs it through, ``plan`` stops before any tool with side effects
runs), which tool it should select first (``expected_target``), what must hold afterwards
(``assertions``), which failures to inject (``faults``), what to run after a mutating case
(``cleanup``) and ``tags``.

Case files are JSON (``.json``) or YAML (``.yaml``/``.yml``, needs
``pip install 'llamon-agent[lab]'``). A file holds one case, a list of cases, or a mapping
with a ``cases:`` list. ``load_cases`` validates every case against the models below (the
shipped ``case.schema.json`` is generated from the same models, so both say the same) and
raises one ``CaseFileError`` listing every problem found, each naming the file, the case
(its ``name``, or ``#index`` when it has none) and the field path.

Reason names in ``assertions.allowed_failure_reasons`` must be in the reason catalog
(``llamon errors``; reasons you register with ``register_reason`` count), ``error_code``
one of the eight ``ErrorCode`` values and ``final_state`` an A2A task state; an unknown
value is an error that suggests the close matches.
"""

from __future__ import annotations

import difflib
import json
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Final, Literal

from a2a.types import TaskState
from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    PrivateAttr,
    TypeAdapter,
    ValidationError,
    model_validator,
)

from llamon_agent._extras import missing_extra
from llamon_agent.core.catalog import reason_catalog
from llamon_agent.core.codes import ErrorCode
from llamon_agent.core.faults import (
    DownstreamFailed,
    DownstreamStreamDrop,
    DownstreamUnavailable,
    Fault,
    McpConnectionDrop,
    ModelEmptyAnswer,
    ModelMalformedJson,
    ModelRateLimited,
    ModelServerError,
    TaskStoreFailsOnce,
    ToolRaises,
    ToolReturnsError,
    ToolSlow,
    ToolTimeout,
)
from llamon_agent.core.validation_errors import error_message, error_path

__all__ = [
    "CASE_FILE_ADAPTER",
    "CASE_FILE_SUFFIXES",
    "Assertions",
    "Case",
    "CaseFileError",
    "CaseProblem",
    "CleanupStep",
    "DataPart",
    "DownstreamFailed",
    "DownstreamStreamDrop",
    "DownstreamUnavailable",
    "Fault",
    "FilePart",
    "McpConnectionDrop",
    "ModelEmptyAnswer",
    "ModelMalformedJson",
    "ModelRateLimited",
    "ModelServerError",
    "Part",
    "TaskStoreFailsOnce",
    "TextPart",
    "ToolRaises",
    "ToolReturnsError",
    "ToolSlow",
    "ToolTimeout",
    "load_cases",
]

CASE_FILE_SUFFIXES: Final = (".json", ".yaml", ".yml")
"""The file names ``load_cases`` reads when given a directory."""

_Name = Annotated[str, Field(min_length=1)]


def _suggest(value: object, known: Iterable[str]) -> str:
    close = difflib.get_close_matches(str(value), list(known), n=3, cutoff=0.6)
    return f"; did you mean {' or '.join(repr(c) for c in close)}?" if close else ""


def _known_reason(value: str) -> str:
    names = [spec.reason for spec in reason_catalog()]
    if value not in names:
        raise ValueError(f"unknown reason {value!r}{_suggest(value, names)}")
    return value


def _known_error_code(value: object) -> object:
    codes = [code.value for code in ErrorCode]
    if isinstance(value, str) and value not in codes:
        raise ValueError(f"unknown errorCode {value!r}{_suggest(value, codes)}")
    return value


def _known_state(value: object) -> object:
    states = [state.value for state in TaskState]
    if isinstance(value, str) and value not in states:
        raise ValueError(f"unknown task state {value!r}{_suggest(value, states)}")
    return value


Reason = Annotated[str, AfterValidator(_known_reason)]
"""A reason name from the catalog."""


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, use_attribute_docstrings=True)


# -- what to send ----------------------------------------------------------------------


class TextPart(_Model):
    """A text part of the message sent to the agent."""

    kind: Literal["text"]
    text: str


class DataPart(_Model):
    """A structured (JSON object) part of the message sent to the agent."""

    kind: Literal["data"]
    data: dict[str, Any]


class FilePart(_Model):
    """A file part, by URI, of the message sent to the agent."""

    kind: Literal["file"]
    uri: _Name
    mime_type: str | None = None
    name: str | None = None


Part = Annotated[TextPart | DataPart | FilePart, Field(discriminator="kind")]
"""One message part, told apart by ``kind`` (``text``, ``data`` or ``file``)."""


# -- what must hold ----------------------------------------------------------------------


class Assertions(_Model):
    """What must hold after the case ran; a field left out is not checked."""

    selected_target: _Name | None = None
    """The tool the agent selected first."""
    allowed_failure_reasons: list[Reason] | None = None
    """If the case fails, its reason must be one of these (catalog reason names)."""
    uncaught_server_error: bool | None = None
    """``false``: the run must not end in an unmapped server error."""
    final_state: Annotated[TaskState | None, BeforeValidator(_known_state)] = None
    """The A2A task state the run ends in (``completed``, ``failed``, ``input-required`` ...)."""
    error_code: Annotated[ErrorCode | None, BeforeValidator(_known_error_code)] = None
    """The ``errorCode`` of the failure (one of the eight)."""
    artifact_contains: _Name | list[_Name] | None = None
    """Text (or each of several texts) some artifact must contain."""
    max_rounds: Annotated[int, Field(ge=1)] | None = None
    """The most tool-loop rounds the run may take."""
    max_duration_ms: Annotated[int, Field(ge=1)] | None = None
    """The longest the run may take, in milliseconds."""

    @property
    def count(self) -> int:
        """How many assertions are set."""
        return len(self.model_dump(exclude_none=True))


# -- faults: the models live with their seams (``core.faults``) ------------------------------


class CleanupStep(_Model):
    """One tool call that undoes what a mutating case changed."""

    tool: _Name
    arguments: dict[str, Any] = Field(default_factory=dict)


# -- the case ----------------------------------------------------------------------------


class Case(_Model):
    """One Quality Lab case."""

    name: _Name | None = None
    """Shown in results; a case without one is named by its file and position."""
    mode: Literal["execute", "plan"]
    """``execute`` runs the case through; ``plan`` stops before any tool with side effects."""
    query: _Name | None = None
    """The user's message as text (give ``query`` or ``parts``, not both)."""
    parts: Annotated[list[Part], Field(min_length=1)] | None = None
    """The user's message as parts."""
    expected_target: _Name | None = None
    """The tool the agent should select first."""
    assertions: Assertions = Field(default_factory=Assertions)
    faults: list[Fault] = Field(default_factory=list)
    cleanup: list[CleanupStep] = Field(default_factory=list)
    """Steps run after a mutating ``execute`` case."""
    tags: list[_Name] = Field(default_factory=list)

    _source: str = PrivateAttr(default="")
    _index: int = PrivateAttr(default=0)

    @model_validator(mode="after")
    def _one_message(self) -> Case:
        if (self.query is None) == (self.parts is None):
            raise ValueError(_ONE_MESSAGE)
        return self

    @property
    def source(self) -> str:
        """The file the case was loaded from (empty when built in code)."""
        return self._source

    @property
    def label(self) -> str:
        """``name``, or ``file#index`` for a case without one."""
        return self.name or f"{Path(self._source).name or '<case>'}#{self._index}"

    @property
    def has_cleanup(self) -> bool:
        """Whether cleanup steps are configured."""
        return bool(self.cleanup)

    @property
    def needs_cleanup_check(self) -> bool:
        """An ``execute`` case without cleanup: the runner refuses it if a tool it calls
        mutates (which is known only when the agent's tools are)."""
        return self.mode == "execute" and not self.cleanup


class _CasesDocument(_Model):
    cases: list[Case]


CASE_FILE_ADAPTER: Final[TypeAdapter[Case | list[Case] | _CasesDocument]] = TypeAdapter(
    Case | list[Case] | _CasesDocument
)
"""A whole case file: one case, a list of cases, or ``{"cases": [...]}`` (the schema's
source; ``load_cases`` validates case by case to name each problem's case)."""


# -- loading -----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class CaseProblem:
    """One problem in a case file: ``file``, ``case`` (name or ``#index``, empty for the
    file as a whole), ``field`` (dotted path, empty for the case as a whole), ``message``."""

    file: str
    case: str
    field: str
    message: str

    def __str__(self) -> str:
        where = [self.file]
        if self.case:
            shown = self.case if self.case.startswith("#") else repr(self.case)
            where.append(f"case {shown}")
        if self.field:
            where.append(self.field)
        return f"{': '.join(where)}: {self.message}"

    def to_dict(self) -> dict[str, str]:
        """The problem as JSON-ready fields."""
        return {"file": self.file, "case": self.case, "field": self.field, "message": self.message}


class CaseFileError(ValueError):
    """Case files that do not load; ``problems`` holds every problem found, one per line
    of the message."""

    def __init__(self, problems: Sequence[CaseProblem]) -> None:
        self.problems = list(problems)
        super().__init__("\n".join(str(problem) for problem in self.problems))


_UNION_MEMBER: Final = re.compile(r"str|int|bool|.*[\[\-].*")
"""How pydantic names a union member in an error's location (field names are snake_case)."""


def _clean_loc(loc: Sequence[int | str]) -> list[int | str]:
    """Drop pydantic's union steps: the ``kind`` tag after a fault's or part's index, and
    member names such as ``str``, ``constrained-str`` or ``list[str]``."""
    kept: list[int | str] = []
    after_tagged_index = False
    for part in loc:
        if isinstance(part, str) and (after_tagged_index or _UNION_MEMBER.fullmatch(part)):
            after_tagged_index = False
            continue
        after_tagged_index = isinstance(part, int) and kept[-1:] in (["faults"], ["parts"])
        kept.append(part)
    return kept


_ONE_MESSAGE: Final = "give the message as either 'query' or 'parts' (exactly one)"


def _message(error: Any) -> str:
    kind = error["type"]
    context = error.get("ctx") or {}
    if kind == "extra_forbidden":
        return "unknown field"
    if kind == "union_tag_invalid":
        expected = [tag.strip(" '") for tag in str(context.get("expected_tags", "")).split(",")]
        tag = context.get("tag")
        return f"unknown kind {tag!r}{_suggest(tag, expected)}"
    if kind == "union_tag_not_found":
        return "'kind' is required"
    return error_message(error).removeprefix("Value error, ")


def _case_problems(exc: ValidationError, file: str, case: str) -> list[CaseProblem]:
    """One problem per distinct error; of a union's misses (``"a"`` or ``["a"]``), a wrong
    type is left out when the other member names something deeper."""
    found = [
        (error_path(_clean_loc(error["loc"])), error["type"], _message(error))
        for error in exc.errors()
    ]
    problems: list[CaseProblem] = []
    for field, kind, message in found:
        deeper = any(other.startswith(f"{field}[") for other, _, _ in found)
        problem = CaseProblem(file, case, field, message)
        if not (kind.endswith("_type") and deeper) and problem not in problems:
            problems.append(problem)
    return problems


def _read(path: Path) -> Any:
    text = path.read_text(encoding="utf-8")
    if path.suffix == ".json":
        return json.loads(text)
    try:
        import yaml
    except ImportError as exc:
        raise missing_extra("lab", "reading YAML case files", exc) from exc
    return yaml.safe_load(text)


def _syntax_problem(path: Path, exc: Exception) -> str:
    if isinstance(exc, json.JSONDecodeError):
        return f"not valid JSON (line {exc.lineno}, column {exc.colno}): {exc.msg}"
    mark = getattr(exc, "problem_mark", None)
    problem = getattr(exc, "problem", None) or "syntax error"
    if mark is not None:
        return f"not valid YAML (line {mark.line + 1}, column {mark.column + 1}): {problem}"
    return f"not valid YAML: {problem}"


def _entries(data: Any) -> list[Any] | None:
    """The case entries of a file's content, or ``None`` if it has none of the shapes."""
    if isinstance(data, list):
        return data
    if isinstance(data, dict):
        if set(data) == {"cases"} and isinstance(data["cases"], list):
            return list(data["cases"])
        return [data]
    return None


def _load_file(path: Path, display: str) -> tuple[list[Case], list[CaseProblem]]:
    try:
        data = _read(path)
    except ImportError:  # YAML without the lab extra: the caller says what to install
        raise
    except (OSError, UnicodeDecodeError) as exc:
        return [], [CaseProblem(display, "", "", f"cannot be read ({type(exc).__name__})")]
    except Exception as exc:  # a JSON or YAML syntax error
        return [], [CaseProblem(display, "", "", _syntax_problem(path, exc))]
    entries = _entries(data)
    if entries is None:
        message = "expected a case, a list of cases or a mapping with a 'cases' list"
        return [], [CaseProblem(display, "", "", message)]
    if not entries:
        return [], [CaseProblem(display, "", "", "holds no case")]
    cases: list[Case] = []
    problems: list[CaseProblem] = []
    for index, entry in enumerate(entries):
        name = entry.get("name") if isinstance(entry, dict) else None
        label = name if isinstance(name, str) and name else f"#{index}"
        try:
            case = Case.model_validate(entry)
        except ValidationError as exc:
            problems.extend(_case_problems(exc, display, label))
            # the case-wide rule runs only once every field is valid: say it now too
            given = [
                key
                for key in ("query", "parts")
                if isinstance(entry, dict) and entry.get(key) is not None
            ]
            one = CaseProblem(display, label, "", _ONE_MESSAGE)
            if isinstance(entry, dict) and len(given) != 1 and one not in problems:
                problems.append(one)
            continue
        case._source = display
        case._index = index
        cases.append(case)
    return cases, problems


def _files(target: Path) -> list[Path]:
    if target.is_dir():
        return sorted(
            path
            for path in target.rglob("*")
            if path.is_file() and path.suffix in CASE_FILE_SUFFIXES
        )
    return [target]


def load_cases(*paths: str | Path) -> list[Case]:
    """Every case in ``paths`` (files, or directories searched for ``.json``/``.yaml``/
    ``.yml`` files), in the order given, a directory's files sorted; a file named twice
    is read once.

    Raises ``CaseFileError`` listing every problem: a missing path, a file that does not
    parse or has none of the shapes, each invalid field of each case, a name used twice.
    Raises ``ImportError`` naming the ``lab`` extra for a YAML file without PyYAML.
    """
    cases: list[Case] = []
    problems: list[CaseProblem] = []
    read: set[Path] = set()
    for raw in paths:
        target = Path(raw)
        if not target.exists():
            problems.append(CaseProblem(str(raw), "", "", "no such file or directory"))
            continue
        files = _files(target)
        if target.is_dir() and not files:
            problems.append(CaseProblem(str(raw), "", "", "holds no .json, .yaml or .yml file"))
        for path in files:
            if path.resolve() in read:  # named twice (a file and its directory)
                continue
            read.add(path.resolve())
            if path.suffix not in CASE_FILE_SUFFIXES:
                message = "not a case file: use .json, .yaml or .yml"
                problems.append(CaseProblem(str(path), "", "", message))
                continue
            found, wrong = _load_file(path, str(path))
            cases.extend(found)
            problems.extend(wrong)
    seen: dict[str, str] = {}
    for case in cases:
        if case.name is None:
            continue
        if case.name in seen:
            message = f"name already used in {seen[case.name]}"
            problems.append(CaseProblem(case.source, case.name, "name", message))
        else:
            seen[case.name] = case.source
    if problems:
        raise CaseFileError(problems)
    return cases
