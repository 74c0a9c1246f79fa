"""The error payloads clients receive, and the factories that build them without raising.

Two places on the wire carry an error payload (the two layers):

* ``ProtocolErrorData`` -- in the JSON-RPC ``error.data`` of a request refused before a
  task exists (bad input, unsupported mode, payload too large, unauthenticated).
* ``ApplicationErrorData`` -- in the DataPart of a ``failed`` task's status message, next
  to a TextPart for display; it may carry the failed flow ``node``, the ``flow``'s
  completed nodes and, for guardrail blocks, a ``guardrail`` sub-object.

Both may carry ``cause``: the path of a failure across agents (``CauseHop`` each, the
nearest called agent first, at most ``MAX_CAUSE_DEPTH``). Reading a ``cause`` never fails
the payload: a malformed hop value is left out, a hop with nothing valid is dropped.

Both serialize with camelCase wire names (``errorCode``, ``retryAfterMs`` ...) and enforce
the value conventions when built. The ``make_*`` factories never raise: invalid values
give ``INTERNAL_ERROR`` / ``error_data_build_failed`` and the original intent is logged,
so a typo in an ``errorSource`` can never turn a failure answer into a crash.
``errorMessage`` always passes through the scrubber, which also removes upstream
locations (URLs, ``host:port``, IP addresses): a client never reads where an upstream is.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Annotated, Any, Final, Literal, TypeVar

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    StrictBool,
    StrictInt,
    ValidationError,
)
from pydantic.alias_generators import to_camel

from llamon_agent.core.codes import ErrorCode
from llamon_agent.core.scrub import scrub_public_text, scrub_text
from llamon_agent.core.validation_errors import format_validation_error

if TYPE_CHECKING:
    from llamon_agent.a2a.parts import application_error_to_parts

__all__ = [
    "APPLICATION_EXTRA_FIELDS",
    "ERROR_SOURCE_SYSTEMS",
    "MAX_CAUSE_DEPTH",
    "PROTOCOL_EXTRA_FIELDS",
    "ApplicationErrorData",
    "BaseErrorData",
    "CauseHop",
    "ErrorFlow",
    "ErrorNode",
    "GuardrailInfo",
    "ProtocolErrorData",
    "application_error_to_parts",
    "build_guardrail_application_error",
    "build_guardrail_extras",
    "make_application_error_data",
    "make_protocol_error_data",
    "normalize_cause",
    "normalize_extras",
]

logger = logging.getLogger("llamon_agent.errors")

ERROR_SOURCE_SYSTEMS: Final = frozenset(
    {"mcp", "rag", "llm", "db", "http", "validator", "guardrail", "internal"}
)
"""The systems an ``errorSource`` may name: ``"{system}:{locator}"``."""

_ASCII_PRINTABLE = re.compile(r"[\x20-\x7e]+")
_ERROR_SOURCE = re.compile(r"([a-z]+):([\x21-\x7e]+)")
_KEBAB = re.compile(r"[a-z0-9]+(?:-[a-z0-9]+)*")
_CATALOG_KEY = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.\-]{0,63}")
_CATEGORY = re.compile(r"[a-z0-9]+(?:[-_][a-z0-9]+)*")


def _reason(value: str) -> str:
    if not value or not _ASCII_PRINTABLE.fullmatch(value) or len(value) > 128:
        raise ValueError("errorReason must be 1-128 printable ASCII characters")
    return value


def _source(value: str) -> str:
    """An ``errorSource``, scrubbed like an ``errorMessage`` (a host, address or
    credential in the locator is replaced), then checked against the convention."""
    value = scrub_public_text(value)
    match = _ERROR_SOURCE.fullmatch(value)
    if match is None or match.group(1) not in ERROR_SOURCE_SYSTEMS:
        systems = ", ".join(sorted(ERROR_SOURCE_SYSTEMS))
        raise ValueError(f"errorSource must be '{{system}}:{{locator}}' with system in {systems}")
    return value


def _domain(value: str) -> str:
    if not _KEBAB.fullmatch(value):
        raise ValueError("domain must be kebab-case ASCII, e.g. 'subject-management'")
    return value


def _catalog_key(value: str) -> str:
    if not _CATALOG_KEY.fullmatch(value):
        raise ValueError("domainCode must be an ASCII catalog key such as 'DOC_005'")
    return value


def _category(value: str) -> str:
    if not _CATEGORY.fullmatch(value):
        raise ValueError("violationCategory must be lower-case ASCII words joined by - or _")
    return value


def _scrubbed(value: str) -> str:
    return scrub_public_text(value)


Reason = Annotated[str, AfterValidator(_reason)]
ErrorSource = Annotated[str, AfterValidator(_source)]
Domain = Annotated[str, AfterValidator(_domain)]
DomainCode = Annotated[str, AfterValidator(_catalog_key)]
ScrubbedText = Annotated[str, AfterValidator(_scrubbed)]
NonNegativeInt = Annotated[StrictInt, Field(ge=0)]


class _WireModel(BaseModel):
    """camelCase on the wire, snake_case in Python; unknown wire keys are ignored on read."""

    model_config = ConfigDict(
        alias_generator=to_camel,
        populate_by_name=True,
        serialize_by_alias=True,
        extra="ignore",
        frozen=True,
    )

    def to_wire(self) -> dict[str, Any]:
        """The JSON-ready dict a client receives (camelCase keys, unset optionals omitted)."""
        return self.model_dump(mode="json", by_alias=True, exclude_none=True)


class ErrorNode(_WireModel):
    """The flow node that failed: ``{"id": "rag_search", "kind": "business"}``."""

    id: Annotated[str, Field(min_length=1, max_length=200)]
    kind: Annotated[str, Field(min_length=1, max_length=64)]


class ErrorFlow(_WireModel):
    """What the flow finished before the failure: ``{"completedNodes": [...]}`` in order."""

    completed_nodes: list[str] = Field(default_factory=list)


class GuardrailInfo(_WireModel):
    """``data.guardrail``: why a guardrail blocked. Show ``violationCategory`` to users."""

    violation_category: Annotated[str, AfterValidator(_category)]
    policy_id: DomainCode | None = None
    severity: Annotated[str, AfterValidator(_category)] | None = None


MAX_CAUSE_DEPTH: Final = 8
"""At most this many hops in a ``cause``: the nearest ones are kept, and the last kept hop
says ``truncated: true`` when hops beyond it were cut (here or by an agent further down)."""

_MAX_RAW_HOPS: Final = 64
"""Raw hops looked at when reading a ``cause``; any beyond them count as cut."""
_AGENT_NAME_LIMIT: Final = 128
_TASK_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.:\-]{0,127}")
_CONTROL = re.compile(r"[\x00-\x1f\x7f]+")
_HOP_SOURCE_LIMIT: Final = 200


def _agent_name(value: str) -> str:
    text = scrub_public_text(_CONTROL.sub(" ", value).strip(), max_length=_AGENT_NAME_LIMIT)
    if not text:
        raise ValueError("agent must be a non-empty name")
    return text


def _task_id(value: str) -> str:
    if not _TASK_ID.fullmatch(value) or scrub_public_text(value) != value:
        raise ValueError("taskId must be 1-128 letters, digits, '_', '.', ':' or '-'")
    return value


def _hop_reason(value: str) -> str:
    return _reason(scrub_public_text(value))


def _hop_source(value: str) -> str:
    text = _source(value)
    if len(text) > _HOP_SOURCE_LIMIT:
        raise ValueError(f"errorSource of a hop must be at most {_HOP_SOURCE_LIMIT} characters")
    return text


class CauseHop(_WireModel):
    """One agent on a failure's path: ``{"agent", "taskId", "errorCode", "errorReason",
    "errorSource"}``, every key optional (a called agent may not say them all).

    ``agent`` is the called agent's card name and ``taskId`` the id of its failed task.
    Every string is scrubbed like an ``errorMessage`` (credentials, URLs, ``host:port``,
    IP addresses and host names removed) and bounded; ``errorReason`` and ``errorSource``
    follow the value conventions. Unknown keys are dropped: no message, no URL, no
    payload of the called agent ever travels in a hop. ``truncated`` is set on the last
    hop of a ``cause`` that was cut at ``MAX_CAUSE_DEPTH``.
    """

    agent: Annotated[str, AfterValidator(_agent_name)] | None = None
    task_id: Annotated[str, AfterValidator(_task_id)] | None = None
    error_code: ErrorCode | None = None
    error_reason: Annotated[str, AfterValidator(_hop_reason)] | None = None
    error_source: Annotated[str, AfterValidator(_hop_source)] | None = None
    truncated: Literal[True] | None = None


def _cause_hop(raw: object) -> CauseHop | None:
    """``raw`` as a hop with its malformed values left out; None if nothing valid is left."""
    if isinstance(raw, CauseHop):
        return raw if raw.model_dump(exclude_none=True, exclude={"truncated"}) else None
    if not isinstance(raw, Mapping):
        return None
    fields: dict[object, object] = dict(raw)
    for _ in range(2):  # the second pass has every failing value removed
        try:
            hop = CauseHop.model_validate(fields)
        except ValidationError as exc:
            bad = {error["loc"][0] for error in exc.errors() if error["loc"]}
            fields = {key: value for key, value in fields.items() if key not in bad}
            continue
        return hop if hop.model_dump(exclude_none=True, exclude={"truncated"}) else None
    return None


def normalize_cause(value: object) -> list[CauseHop] | None:
    """A ``cause`` as the valid hops of ``value``, nearest first; None when none is left.

    ``value`` is a list (or tuple) of hop mappings by wire or Python names, or of
    ``CauseHop``; anything else is no cause. Malformed values are left out of their hop,
    a hop with no valid value (or not a mapping) is dropped, and hops beyond
    ``MAX_CAUSE_DEPTH`` are cut: the last kept hop then says ``truncated: true``. Never
    raises.
    """
    if not isinstance(value, Sequence) or isinstance(value, str | bytes | bytearray):
        return None
    hops: list[CauseHop] = []
    truncated = len(value) > _MAX_RAW_HOPS
    dropped = 0
    for raw in value[:_MAX_RAW_HOPS]:
        hop = _cause_hop(raw)
        if hop is None:
            dropped += 1
            continue
        if len(hops) == MAX_CAUSE_DEPTH:
            truncated = True
            break
        truncated = truncated or hop.truncated is True
        hops.append(hop.model_copy(update={"truncated": None}) if hop.truncated else hop)
    if dropped:
        logger.info("cause: %d malformed hop(s) dropped", dropped)
    if not hops:
        return None
    if truncated:
        hops[-1] = hops[-1].model_copy(update={"truncated": True})
    return hops


Cause = Annotated[list[CauseHop] | None, BeforeValidator(normalize_cause)]


class BaseErrorData(_WireModel):
    """Fields common to protocol- and application-level error data."""

    error_code: ErrorCode
    error_reason: Reason
    error_message: ScrubbedText = ""
    retriable: StrictBool = False
    retried: NonNegativeInt = 0
    retry_after_ms: NonNegativeInt | None = None
    error_source: ErrorSource | None = None
    domain: Domain | None = None
    domain_code: DomainCode | None = None
    incident_id: Annotated[str, Field(pattern=r"^[a-f0-9]{12}$")] | None = None
    cause: Cause = None


class ProtocolErrorData(BaseErrorData):
    """``error.data`` of a JSON-RPC error: the request was refused before a task existed."""


class ApplicationErrorData(BaseErrorData):
    """The DataPart of a failed task: what failed, where, and whether to retry."""

    node: ErrorNode | None = None
    flow: ErrorFlow | None = None
    guardrail: GuardrailInfo | None = None


def _extra_fields(model: type[BaseErrorData]) -> frozenset[str]:
    required = {"error_code", "error_reason", "error_message", "retriable"}
    return frozenset(name for name in model.model_fields if name not in required)


PROTOCOL_EXTRA_FIELDS: Final = _extra_fields(ProtocolErrorData)
"""Optional fields an extra may set on protocol error data (snake_case names)."""
APPLICATION_EXTRA_FIELDS: Final = _extra_fields(ApplicationErrorData)
"""Optional fields an extra may set on application error data (snake_case names)."""

_WIRE_TO_FIELD: Final = {
    to_camel(name): name for name in APPLICATION_EXTRA_FIELDS | PROTOCOL_EXTRA_FIELDS
}


def normalize_extras(
    extras: Mapping[str, object], *, allowed: frozenset[str] = APPLICATION_EXTRA_FIELDS
) -> dict[str, object]:
    """Map extras given by wire name (``retryAfterMs``) or Python name to field names.

    Raises ``TypeError`` naming the key for an unknown extra or one given twice, so a
    typo fails where it is written instead of being dropped.
    """
    normalized: dict[str, object] = {}
    for key, value in extras.items():
        name = _WIRE_TO_FIELD.get(key, key)
        if name not in allowed:
            options = ", ".join(sorted(to_camel(field) for field in allowed))
            raise TypeError(f"unknown error-data extra {key!r}; allowed: {options}")
        if name in normalized:
            raise TypeError(f"error-data extra {key!r} given twice (camelCase and snake_case)")
        normalized[name] = value
    return normalized


_FALLBACK_MESSAGE: Final = "The error details could not be built; the server log has the cause."
_FALLBACK_REASON: Final = "error_data_build_failed"

ModelT = TypeVar("ModelT", bound=BaseErrorData)


def _build(
    model: type[ModelT],
    code: ErrorCode | str,
    reason: str,
    message: str,
    retriable: bool,
    extras: Mapping[str, object],
) -> ModelT:
    allowed = APPLICATION_EXTRA_FIELDS if model is ApplicationErrorData else PROTOCOL_EXTRA_FIELDS
    try:
        fields = normalize_extras(extras, allowed=allowed)
        return model.model_validate(
            {
                "error_code": code,
                "error_reason": reason,
                "error_message": message,
                "retriable": retriable,
                **fields,
            }
        )
    except (ValidationError, TypeError) as exc:
        problems = format_validation_error(exc) if isinstance(exc, ValidationError) else str(exc)
        logger.warning(
            "error data fallback to INTERNAL_ERROR/%s: intended code=%s reason=%s extras=%s: %s",
            _FALLBACK_REASON,
            scrub_text(str(code), max_length=40),
            scrub_text(str(reason), max_length=128),
            sorted(scrub_text(str(key), max_length=64) for key in extras),
            scrub_text(problems, max_length=1000),
        )
        return model(
            error_code=ErrorCode.INTERNAL_ERROR,
            error_reason=_FALLBACK_REASON,
            error_message=_FALLBACK_MESSAGE,
            retriable=False,
        )


def make_protocol_error_data(
    code: ErrorCode | str,
    reason: str,
    message: str = "",
    *,
    retriable: bool = False,
    **extras: object,
) -> ProtocolErrorData:
    """Build ``error.data`` for a JSON-RPC error. Never raises (see module docstring)."""
    return _build(ProtocolErrorData, code, reason, message, retriable, extras)


def make_application_error_data(
    code: ErrorCode | str,
    reason: str,
    message: str = "",
    *,
    retriable: bool = False,
    **extras: object,
) -> ApplicationErrorData:
    """Build the DataPart payload of a failed task. Never raises (see module docstring).

    ``extras`` are the optional fields by wire or Python name: ``retryAfterMs``,
    ``errorSource``, ``domain``, ``domainCode``, ``retried``, ``incidentId``, ``node``,
    ``flow``, ``guardrail``, ``cause``.
    """
    return _build(ApplicationErrorData, code, reason, message, retriable, extras)


def build_guardrail_extras(
    violation_category: str,
    *,
    locator: str = "policy",
    policy_id: str | None = None,
    severity: str | None = None,
) -> dict[str, object]:
    """Extras for a guardrail block: ``errorSource="guardrail:<locator>"`` and ``guardrail``."""
    guardrail: dict[str, object] = {"violationCategory": violation_category}
    if policy_id is not None:
        guardrail["policyId"] = policy_id
    if severity is not None:
        guardrail["severity"] = severity
    return {"errorSource": f"guardrail:{locator}", "guardrail": guardrail}


def build_guardrail_application_error(
    violation_category: str,
    message: str = "",
    *,
    reason: str = "guardrail_blocked",
    locator: str = "policy",
    policy_id: str | None = None,
    severity: str | None = None,
    **extras: object,
) -> ApplicationErrorData:
    """``GUARDRAIL_BLOCKED`` error data (never retriable). Never raises."""
    fields = build_guardrail_extras(
        violation_category, locator=locator, policy_id=policy_id, severity=severity
    )
    fields.update(extras)
    return make_application_error_data(
        ErrorCode.GUARDRAIL_BLOCKED, reason, message, retriable=False, **fields
    )


def __getattr__(name: str) -> Any:
    """``application_error_to_parts`` moved to ``llamon_agent.a2a.parts`` (it builds a2a
    parts); it is still importable from here and loads the A2A layer on first use.

    The layer contract allows this one upward import because it runs only here, on first
    use of the old name (see ``tests/test_layers.py``)."""
    if name == "application_error_to_parts":
        from llamon_agent.a2a import parts

        return parts.application_error_to_parts
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
