"""The public error API in one import: codes, payload models, the mapping, helpers.

Most agent code needs only ``ErrorCode`` and ``raise_application_error``::

    raise_application_error(
        ErrorCode.RATE_LIMITED, "classifier_quota_exceeded",
        message="분류 서비스 일일 할당량 초과", retriable=True, retryAfterMs=60_000,
    )

Where things live: the codes in ``core.codes``, the exception table in
``core.classify``, the payload models and factories in ``core.error_data``, the message
policy in ``core.messages``. This module re-exports them and adds the raise helpers and
``error_data_for_exception``, the one function the A2A executor calls to turn any
exception into the DataPart a client receives. ``application_error_to_parts`` builds a2a
parts, so it lives in ``llamon_agent.a2a.parts``; importing it from here loads the A2A
layer on first use (importing this module does not).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, NoReturn, NotRequired, TypedDict

from pydantic import ValidationError

from llamon_agent.core.cause import MAX_CAUSE_DEPTH, CarriesCause, CauseHop, cause_hops_of
from llamon_agent.core.classify import (
    Classification,
    classify_exception,
    python_exc_to_error_code,
    register_exception,
)
from llamon_agent.core.codes import JSON_RPC_CODE_TO_ERROR_CODE, ErrorCode, json_rpc_to_error_code
from llamon_agent.core.error_data import (
    ApplicationErrorData,
    BaseErrorData,
    ErrorFlow,
    ErrorNode,
    GuardrailInfo,
    ProtocolErrorData,
    build_guardrail_application_error,
    build_guardrail_extras,
    make_application_error_data,
    make_protocol_error_data,
    normalize_extras,
)
from llamon_agent.core.messages import public_message
from llamon_agent.core.validation_errors import format_validation_error
from llamon_agent.exceptions import GuardrailBlockedError, LlamonApplicationError

if TYPE_CHECKING:
    from llamon_agent.a2a.parts import application_error_to_parts

__all__ = [
    "JSON_RPC_CODE_TO_ERROR_CODE",
    "MAX_CAUSE_DEPTH",
    "ApplicationErrorData",
    "BaseErrorData",
    "CarriesCause",
    "CauseHop",
    "Classification",
    "DomainErrorRaiser",
    "DomainErrorSpec",
    "ErrorCode",
    "ErrorFlow",
    "ErrorNode",
    "GuardrailInfo",
    "LlamonApplicationError",
    "ProtocolErrorData",
    "application_error_to_parts",
    "build_guardrail_application_error",
    "build_guardrail_extras",
    "classify_exception",
    "error_data_for_exception",
    "json_rpc_to_error_code",
    "make_application_error_data",
    "make_domain_error_raiser",
    "make_protocol_error_data",
    "python_exc_to_error_code",
    "raise_application_error",
    "register_exception",
]


def raise_application_error(
    code: ErrorCode | str,
    reason: str,
    *,
    message: str,
    retriable: bool = False,
    **extras: object,
) -> NoReturn:
    """Raise ``LlamonApplicationError``: the client gets exactly this code, reason and extras.

    ``extras`` are ApplicationErrorData's optional fields by wire name (``retryAfterMs``,
    ``errorSource``, ``domain``, ``domainCode``, ``node``, ``flow``, ``retried``) or by
    Python name. An unknown key raises ``TypeError`` here; an unknown ``code`` raises
    ``ValueError``. Badly formatted values (an ``errorSource`` without ``system:``) do not
    raise: the answer falls back to ``INTERNAL_ERROR`` / ``error_data_build_failed``.
    """
    raise LlamonApplicationError(code, reason, message=message, retriable=retriable, **extras)


class DomainErrorSpec(TypedDict):
    """One catalog entry: which ``ErrorCode`` and ``errorReason`` a domain code becomes."""

    sdk_code: ErrorCode
    reason: str
    title: str
    retriable: NotRequired[bool]


class DomainErrorRaiser:
    """Raises ``LlamonApplicationError`` by catalog key; made by ``make_domain_error_raiser``."""

    def __init__(self, catalog: Mapping[str, DomainErrorSpec], *, domain: str) -> None:
        try:
            ApplicationErrorData(
                error_code=ErrorCode.INTERNAL_ERROR, error_reason="domain_check", domain=domain
            )
        except ValidationError:
            raise ValueError(f"domain must be kebab-case ASCII, got {domain!r}") from None
        checked: dict[str, DomainErrorSpec] = {}
        for key, spec in catalog.items():
            try:
                code = ErrorCode(spec["sdk_code"])
                reason, title = spec["reason"], spec["title"]
                ApplicationErrorData(
                    error_code=code,
                    error_reason=reason,
                    error_message=title,
                    domain=domain,
                    domain_code=key,
                )
            except ValidationError as exc:
                problems = format_validation_error(exc)
                raise ValueError(f"domain catalog entry {key!r} is invalid: {problems}") from None
            except (KeyError, ValueError, TypeError) as exc:
                raise ValueError(f"domain catalog entry {key!r} is invalid: {exc!r}") from None
            checked[key] = DomainErrorSpec(
                sdk_code=code,
                reason=reason,
                title=title,
                retriable=bool(spec.get("retriable", False)),
            )
        self.domain = domain
        self.catalog: Mapping[str, DomainErrorSpec] = checked

    def error(
        self, key: str, message: str | None = None, **extras: object
    ) -> LlamonApplicationError:
        """The exception for catalog ``key`` without raising it (message defaults to the title)."""
        spec = self.catalog.get(key)
        if spec is None:
            known = ", ".join(sorted(self.catalog)) or "(empty catalog)"
            raise LookupError(
                f"unknown domain code {key!r} for domain {self.domain!r}; known: {known}"
            )
        return LlamonApplicationError(
            spec["sdk_code"],
            spec["reason"],
            message=spec["title"] if message is None else message,
            retriable=spec.get("retriable", False),
            domain=self.domain,
            domainCode=key,
            **extras,
        )

    def __call__(self, key: str, message: str | None = None, **extras: object) -> NoReturn:
        """Raise the error for catalog ``key``; an unknown key raises ``LookupError``."""
        raise self.error(key, message, **extras)


def make_domain_error_raiser(
    catalog: Mapping[str, DomainErrorSpec], *, domain: str
) -> DomainErrorRaiser:
    """A raiser for a domain's numbered codes: ``raise_doc("DOC_005")`` gives the client
    ``errorCode``, ``errorReason``, ``domainCode="DOC_005"`` and ``domain``.

    The catalog is checked here, once: a bad entry raises ``ValueError`` naming its key.
    """
    return DomainErrorRaiser(catalog, domain=domain)


def error_data_for_exception(
    exc: BaseException,
    *,
    classification: Classification | None = None,
    **extras: Any,
) -> ApplicationErrorData:
    """The ApplicationErrorData a client receives for ``exc``. Never raises.

    ``LlamonApplicationError`` keeps its code, reason and extras; ``GuardrailBlockedError``
    gets ``data.guardrail``; anything else goes through the mapping table and the message
    policy (unmapped text withheld behind an incident id). ``retried`` is the number of
    retries the server already made for the failing call (see ``mark_retried``).
    An exception that came from a called agent (``CarriesCause``: it, or one it was raised
    ``from``, has ``cause_hops``) gives ``data.cause``, the failure's path across agents;
    its malformed hops are dropped, never failing the answer (see ``core.cause``).
    ``extras`` (``node``, ``flow``, ``retried`` ...) are added on top, the exception's own
    extras winning.
    """
    found = classification or classify_exception(exc)
    message = public_message(found)
    fields: dict[str, object] = {}
    try:
        fields.update(normalize_extras(extras))
    except TypeError:
        fields.update(extras)  # let the factory log it and fall back
    if found.retry_after_ms is not None:
        fields["retry_after_ms"] = found.retry_after_ms
    if found.retried and "retried" not in fields:
        fields["retried"] = found.retried
    if message.incident_id is not None:
        fields["incident_id"] = message.incident_id
    hops = cause_hops_of(exc, also=found.exception)
    if hops is not None:
        fields["cause"] = hops  # checked (and cut to MAX_CAUSE_DEPTH) by the model
    source = found.exception
    if isinstance(source, LlamonApplicationError):
        fields.update(source.extras)
    if isinstance(source, GuardrailBlockedError):
        return build_guardrail_application_error(
            source.violation_category,
            message.text,
            reason=found.reason,
            locator=source.locator,
            policy_id=source.policy_id,
            severity=source.severity,
            **{k: v for k, v in fields.items() if k not in ("error_source", "guardrail")},
        )
    return make_application_error_data(
        found.code, found.reason, message.text, retriable=found.retriable, **fields
    )


def __getattr__(name: str) -> Any:
    """``application_error_to_parts`` from the A2A layer, loaded on first use (through
    ``core.error_data``, the one place in ``core`` that reaches up for it)."""
    if name == "application_error_to_parts":
        from llamon_agent.core import error_data

        return error_data.application_error_to_parts
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
