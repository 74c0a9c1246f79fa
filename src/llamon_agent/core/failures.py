"""The normalized failure record: stage, reason and evidence, safe to store anywhere.

A ``FailureRecord`` is what logs, runner events, Quality Lab results and learning
records keep of a failure. It is built from an exception (``from_exception``), from an
exception's ``to_dict()`` envelope (``from_envelope``), or from a reason
(``FailureRecord.of``) -- never by parsing message strings. Missing fields come from the
reason catalog (``core.catalog``). The message and evidence pass through the security
boundary (``core.scrub``) when the record is made, so ``to_dict()`` is always safe.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Final

from llamon_agent.core.catalog import DEFAULT_OPERATOR_ACTIONS, reason_spec
from llamon_agent.core.cause import cause_chain, cause_evidence
from llamon_agent.core.classify import classify_exception
from llamon_agent.core.codes import ErrorCode, Stage
from llamon_agent.core.error_data import BaseErrorData
from llamon_agent.core.messages import public_message
from llamon_agent.core.scrub import scrub_evidence, scrub_public_text, scrub_text

__all__ = ["FailureRecord"]

_ENVELOPE_FIELDS: Final = frozenset(
    {
        "stage",
        "reason",
        "message",
        "error_code",
        "retryable",
        "retriable",
        "operator_action",
        "tool",
        "plan_id",
        "step_id",
    }
)


_STAGES: Final = frozenset(stage.value for stage in Stage)


def _now() -> datetime:
    return datetime.now(UTC)


def _text_or_none(value: object, limit: int = 200) -> str | None:
    return None if value is None else scrub_text(str(value), max_length=limit)


@dataclass(frozen=True, slots=True)
class FailureRecord:
    """One failure: where (``stage``), what (``reason``), and compact proof (``evidence``).

    ``message`` and ``evidence`` are scrubbed on construction (the message also loses any
    upstream URL, ``host:port`` or IP address: records feed events); ``tool``, ``plan_id`` and
    ``step_id`` are identifiers of our own making, kept as given (scrubbed as text).
    """

    stage: str
    reason: str
    message: str
    error_code: ErrorCode = ErrorCode.INTERNAL_ERROR
    retryable: bool = False
    operator_action: str = ""
    tool: str | None = None
    plan_id: str | None = None
    step_id: str | None = None
    evidence: Mapping[str, object] = field(default_factory=dict)
    time: datetime = field(default_factory=_now)

    def __post_init__(self) -> None:
        set_ = object.__setattr__
        stage, reason = str(self.stage), str(self.reason)
        if stage not in _STAGES:
            stage = scrub_text(stage, max_length=64) or Stage.SERVICE.value
        if reason_spec(reason) is None:  # catalog reasons are our own words
            reason = scrub_text(reason, max_length=128) or "unknown"
        set_(self, "stage", stage)
        set_(self, "reason", reason)
        set_(self, "message", scrub_public_text(str(self.message)))
        set_(self, "error_code", ErrorCode(self.error_code))
        set_(self, "tool", _text_or_none(self.tool))
        set_(self, "plan_id", _text_or_none(self.plan_id))
        set_(self, "step_id", _text_or_none(self.step_id))
        set_(self, "evidence", scrub_evidence(self.evidence))
        if not self.operator_action:
            set_(self, "operator_action", DEFAULT_OPERATOR_ACTIONS[self.error_code])

    @classmethod
    def of(
        cls,
        reason: str,
        message: str = "",
        *,
        stage: Stage | str | None = None,
        error_code: ErrorCode | None = None,
        retryable: bool | None = None,
        operator_action: str | None = None,
        tool: str | None = None,
        plan_id: str | None = None,
        step_id: str | None = None,
        evidence: Mapping[str, object] | None = None,
    ) -> FailureRecord:
        """A record for ``reason``; what is not given comes from the reason catalog.

        A reason the catalog does not know gets stage ``service``, ``INTERNAL_ERROR``, not
        retryable, unless given.
        """
        spec = reason_spec(reason)
        code = error_code or (spec.error_code if spec else ErrorCode.INTERNAL_ERROR)
        return cls(
            stage=str(stage or (spec.stage if spec else Stage.SERVICE)),
            reason=reason,
            message=message or (spec.meaning if spec else ""),
            error_code=code,
            retryable=retryable if retryable is not None else bool(spec and spec.retryable),
            operator_action=operator_action or (spec.operator_action if spec else ""),
            tool=tool,
            plan_id=plan_id,
            step_id=step_id,
            evidence=evidence or {},
        )

    @classmethod
    def from_error_data(
        cls,
        data: BaseErrorData,
        *,
        stage: Stage | str | None = None,
        tool: str | None = None,
        step_id: str | None = None,
        evidence: Mapping[str, object] | None = None,
    ) -> FailureRecord:
        """A record for an error answer already built (ours, or one another agent sent).

        Code, reason, message and retryable come from ``data``; its ``incidentId``,
        ``retryAfterMs``, ``errorSource``, ``domainCode`` and ``cause`` (the failure's path
        across agents, the same hops the caller reads) become evidence. Cheaper than
        ``from_exception`` when the answer exists: nothing is classified twice.
        """
        details: dict[str, object] = {
            "incident_id": data.incident_id,
            "retry_after_ms": data.retry_after_ms,
            "error_source": data.error_source,
            "domain_code": data.domain_code,
            "cause": cause_evidence(data.cause),
        }
        merged = {key: value for key, value in details.items() if value is not None}
        merged.update(evidence or {})
        return cls.of(
            data.error_reason,
            data.error_message,
            stage=stage,
            error_code=data.error_code,
            retryable=data.retriable,
            tool=tool,
            step_id=step_id,
            evidence=merged,
        )

    @classmethod
    def from_exception(
        cls,
        exc: BaseException,
        *,
        stage: Stage | str | None = None,
        tool: str | None = None,
        plan_id: str | None = None,
        step_id: str | None = None,
        evidence: Mapping[str, object] | None = None,
    ) -> FailureRecord:
        """A record for any exception. Never raises.

        An exception with a ``to_dict()`` envelope (engine errors, every
        llamon exception) is read through it: its message is a designed message, kept
        (scrubbed); the mapping table supplies ``error_code`` and ``retryable`` where the
        envelope has none, and overrides the envelope's reason when a generic wrapper
        yielded to its cause or a called agent's failure is read one hop up. An unmapped
        exception without an envelope gets the generic message with an incident id (its
        text stays in the server log). Evidence keeps
        the exception type (and the deciding cause's), ``http_status``,
        ``retry_after_ms``, ``retried``, ``attempt_codes`` (each attempt's error code, in
        order) and, for an exception from a called agent, its ``cause`` chain (the hops
        ``data.cause`` would carry) when known.
        """
        found = classify_exception(exc)
        base: dict[str, Any] = {}
        to_dict = getattr(found.exception, "to_dict", None)
        if callable(to_dict):
            try:
                envelope = to_dict()
            except Exception:
                envelope = None
            if isinstance(envelope, Mapping):
                base.update(envelope)
        if found.cause is not None or found.hop_from is not None:
            # a generic wrapper yielded to its cause (the cause's row decides), or a called
            # agent's failure read one hop up (its own code stays in the cause chain)
            base.update(reason=found.reason, error_code=found.code, retryable=found.retriable)
        elif found.mapped or "reason" not in base:
            # the table knows this exception, or it has no envelope of its own
            base.setdefault("reason", found.reason)
            base.setdefault("error_code", found.code)
            base.setdefault("retryable", found.retriable)
        incident_id = None
        designed = base.get("message")
        if designed and found.expose_text and found.message is None:
            base["message"] = scrub_public_text(str(designed))
        else:
            message = public_message(found)
            base["message"], incident_id = message.text, message.incident_id
        merged_evidence: dict[str, object] = {"exception_type": type(found.exception).__name__}
        if found.cause is not None:
            merged_evidence["cause_type"] = type(found.cause).__name__
        if incident_id:
            merged_evidence["incident_id"] = incident_id
        if found.retry_after_ms is not None:
            merged_evidence["retry_after_ms"] = found.retry_after_ms
        if found.http_status is not None:
            merged_evidence["http_status"] = found.http_status
        if found.retried:
            merged_evidence["retried"] = found.retried
        if found.attempt_codes:
            merged_evidence["attempt_codes"] = [code.value for code in found.attempt_codes]
        chain = cause_evidence(cause_chain(exc, also=found.exception))
        if chain is not None:
            merged_evidence["cause"] = chain
        merged_evidence.update(evidence or {})
        context = {"stage": stage, "tool": tool, "plan_id": plan_id, "step_id": step_id}
        base.update({key: value for key, value in context.items() if value is not None})
        return cls.from_envelope(base, evidence=merged_evidence)

    @classmethod
    def from_envelope(
        cls, envelope: Mapping[str, object], *, evidence: Mapping[str, object] | None = None
    ) -> FailureRecord:
        """A record from a ``to_dict()`` envelope (``{"stage", "reason", "message", ...}``).

        Known keys fill the record's fields; every other key is evidence (scrubbed by the
        allow-list). Unknown or mistyped values never raise: they fall back to the catalog.
        """
        reason = str(envelope.get("reason") or "uncaught_server_error")
        spec = reason_spec(reason)
        code_value = envelope.get("error_code")
        try:
            code = ErrorCode(str(code_value)) if code_value is not None else None
        except ValueError:
            code = None
        retryable = envelope.get("retryable", envelope.get("retriable"))
        stage = envelope.get("stage")
        operator_action = envelope.get("operator_action")
        details = {k: v for k, v in envelope.items() if k not in _ENVELOPE_FIELDS}
        details.update(evidence or {})
        return cls.of(
            reason,
            str(envelope.get("message") or ""),
            stage=str(stage) if stage else None,
            error_code=code or (spec.error_code if spec else None),
            retryable=retryable if isinstance(retryable, bool) else None,
            operator_action=operator_action if isinstance(operator_action, str) else None,
            tool=_text_or_none(envelope.get("tool")),
            plan_id=_text_or_none(envelope.get("plan_id")),
            step_id=_text_or_none(envelope.get("step_id")),
            evidence=details,
        )

    def to_dict(self) -> dict[str, object]:
        """The JSON-ready record: every field above, plus ``error_code`` and ``time``."""
        return {
            "stage": self.stage,
            "reason": self.reason,
            "message": self.message,
            "error_code": self.error_code.value,
            "tool": self.tool,
            "plan_id": self.plan_id,
            "step_id": self.step_id,
            "retryable": self.retryable,
            "operator_action": self.operator_action,
            "evidence": dict(self.evidence),
            "time": self.time.isoformat(),
        }
