"""Every exception llamon-agent defines, and what each becomes on the wire.

Raise these from agent code, tools and flow nodes; the A2A executor turns them into a
``failed`` task whose DataPart carries the ``errorCode`` below (the mapping itself lives
in one table, ``llamon_agent.core.classify``; ``llamon errors`` prints it)::

    Exception
     └── LlamonError                      base; INTERNAL_ERROR unless a subclass says otherwise
          ├── LlamonApplicationError      carries its own errorCode / errorReason / extras
          ├── ComponentError
          │    ├── ComponentInvokeError   UPSTREAM_UNAVAILABLE   retriable
          │    └── ComponentLoadError     UPSTREAM_UNAVAILABLE   retriable
          ├── ConfigValidationError       INVALID_INPUT
          │    └── MissingFieldError      INVALID_INPUT
          ├── MissingAPIKeyError          AUTH_REQUIRED
          ├── RegistryError
          │    ├── RegistryUnauthorizedError   AUTH_REQUIRED
          │    ├── RegistryNotFoundError       NOT_FOUND
          │    ├── RegistryTimeoutError        UPSTREAM_TIMEOUT   retriable  (also a TimeoutError)
          │    └── RegistryUnavailableError    UPSTREAM_UNAVAILABLE retriable
          ├── GuardrailBlockedError       GUARDRAIL_BLOCKED      (artifacts withheld)
          ├── FlowError
          │    ├── MaxIterationError      INTERNAL_ERROR
          │    ├── MergeStrategyError     INTERNAL_ERROR
          │    └── RoutingError           INTERNAL_ERROR
          └── A2AProtocolError            INTERNAL_ERROR

The ``errorReason`` of each is the snake_case of the raised type's name
(``ComponentInvokeError`` -> ``component_invoke_error``), so your own subclass
``BankLookupError(ComponentInvokeError)`` reports ``bank_lookup_error`` and keeps the code.

Your own exception class can declare its mapping in its class statement::

    class QuotaExceeded(LlamonError, code=ErrorCode.RATE_LIMITED, retriable=True): ...

Keyword arguments given to any of these (``ComponentInvokeError("lookup failed",
tool="check_account")``) become evidence in the failure record, scrubbed by the
security boundary; the message text of these exceptions reaches clients after scrubbing.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

from llamon_agent.core.codes import ErrorCode, ErrorRule, snake_case

__all__ = [
    "A2AProtocolError",
    "ComponentError",
    "ComponentInvokeError",
    "ComponentLoadError",
    "ConfigValidationError",
    "FlowError",
    "GuardrailBlockedError",
    "LlamonApplicationError",
    "LlamonError",
    "MaxIterationError",
    "MergeStrategyError",
    "MissingAPIKeyError",
    "MissingFieldError",
    "RegistryError",
    "RegistryNotFoundError",
    "RegistryTimeoutError",
    "RegistryUnauthorizedError",
    "RegistryUnavailableError",
    "RoutingError",
]


class LlamonError(Exception):
    """Base of every llamon-agent exception: ``INTERNAL_ERROR``, not retriable, unless mapped.

    Subclasses may declare their own mapping with class keywords ``code``, ``reason`` and
    ``retriable``, or, when it depends on the instance, return it from ``carried``;
    ``details`` keyword arguments become scrubbed evidence.
    """

    __llamon_error__: ClassVar[ErrorRule | None] = None

    def __init_subclass__(
        cls,
        *,
        code: ErrorCode | None = None,
        reason: str | None = None,
        retriable: bool | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init_subclass__(**kwargs)
        if code is not None:
            cls.__llamon_error__ = ErrorRule(code, reason, bool(retriable))
        elif reason is not None or retriable is not None:
            raise TypeError(f"{cls.__name__}: 'reason'/'retriable' need 'code' as well")

    def __init__(self, message: str = "", /, **details: object) -> None:
        super().__init__(message)
        self.message = message
        self.details: dict[str, object] = dict(details)

    @property
    def carried(self) -> ErrorRule | None:
        """The ``(code, reason, retriable)`` this exception carries itself, or None.

        None (the default) leaves the answer to the classification table, by type. An
        exception whose answer depends on the instance returns it here
        (``LlamonApplicationError``: the code and reason it was raised with); the table
        reads it before any row, and ``to_dict`` reports it.
        """
        return None

    def to_dict(self) -> dict[str, object]:
        """The failure envelope: ``reason``, ``message`` and detail keys, all scrubbed.

        The reason is the one this exception carries or its class declares (with
        ``error_code`` and ``retryable`` then), else the snake_case of its type name;
        ``stage`` and the rest are filled in by ``FailureRecord.from_exception``, which
        knows the mapping table.
        """
        from llamon_agent.core.scrub import scrub_evidence, scrub_text  # a leaf: scrub lazily

        envelope: dict[str, object] = {
            "reason": snake_case(type(self).__name__),
            "message": scrub_text(self.message),
        }
        envelope.update(scrub_evidence(self.details))
        own = self.carried or type(self).__llamon_error__
        if own is not None:
            envelope.update(
                reason=envelope["reason"] if own.reason is None else own.reason,
                error_code=own.code.value,
                retryable=own.retriable,
            )
        return envelope


class LlamonApplicationError(LlamonError):
    """An application-level failure with an explicit ``errorCode`` and ``errorReason``.

    Bypasses the mapping table: the client receives ``code``, ``reason``, ``message``,
    ``retriable`` and the extras as given (usually raised by ``raise_application_error``).
    ``extras`` are ApplicationErrorData's optional fields by wire or Python name; an unknown
    key raises ``TypeError`` here, at the raise site.
    """

    def __init__(
        self,
        code: ErrorCode | str,
        reason: str,
        *,
        message: str = "",
        retriable: bool = False,
        **extras: object,
    ) -> None:
        from llamon_agent.core.error_data import normalize_extras  # a leaf: check lazily

        super().__init__(message)
        self.code = ErrorCode(code)
        self.reason = reason
        self.retriable = retriable
        self.extras: Mapping[str, object] = normalize_extras(extras)

    @property
    def carried(self) -> ErrorRule:
        """This error's own ``code``, ``reason`` and ``retriable``."""
        return ErrorRule(self.code, self.reason, self.retriable)


class ComponentError(LlamonError):
    """A component (tool, retriever, model, client) failed. ``INTERNAL_ERROR``, not retriable."""


class ComponentInvokeError(ComponentError):
    """Calling a component failed (MCP, RAG, DB, LLM down). ``UPSTREAM_UNAVAILABLE``, retriable."""


class ComponentLoadError(ComponentError):
    """A component could not be loaded or connected. ``UPSTREAM_UNAVAILABLE``, retriable."""


class ConfigValidationError(LlamonError):
    """Input or configuration failed validation. ``INVALID_INPUT``, not retriable."""


class MissingFieldError(ConfigValidationError):
    """A required field is missing. ``INVALID_INPUT``, not retriable.

    Pass ``field_name="..."`` to put the field's name in the failure evidence.
    """


class MissingAPIKeyError(LlamonError):
    """An API key or credential is not configured. ``AUTH_REQUIRED``, not retriable."""


class RegistryError(LlamonError):
    """A registry (of agents, tools or components) failed. ``INTERNAL_ERROR``, not retriable.

    ``error_reason`` and ``http_status`` are what the registry itself answered, when it
    answered (the Agent Catalog's ``errorReason``, e.g. ``agent_not_found``); both are also
    kept in the failure evidence (``registry_reason``, ``http_status``).
    """

    def __init__(
        self,
        message: str = "",
        /,
        *,
        error_reason: str | None = None,
        http_status: int | None = None,
        **details: object,
    ) -> None:
        if error_reason is not None:
            details.setdefault("registry_reason", error_reason)
        if http_status is not None:
            details.setdefault("http_status", http_status)
        super().__init__(message, **details)
        self.error_reason = error_reason
        self.http_status = http_status


class RegistryUnauthorizedError(RegistryError):
    """The registry refused our credentials. ``AUTH_REQUIRED``, not retriable."""


class RegistryNotFoundError(RegistryError):
    """The registry has no such entry. ``NOT_FOUND``, not retriable."""


class RegistryTimeoutError(RegistryError, TimeoutError):
    """The registry did not answer in time. ``UPSTREAM_TIMEOUT``, retriable.

    Also a ``TimeoutError``, so ``except TimeoutError`` catches it.
    """


class RegistryUnavailableError(RegistryError):
    """The registry could not be reached or answered with a server error.
    ``UPSTREAM_UNAVAILABLE``, retriable."""


class GuardrailBlockedError(LlamonError):
    """A guardrail blocked the request or the answer. ``GUARDRAIL_BLOCKED``, not retriable.

    The task ends ``failed`` with none of its artifacts delivered; ``data.guardrail``
    carries ``violationCategory`` (show it to users) and optionally ``policyId`` and
    ``severity``.
    """

    def __init__(
        self,
        message: str = "",
        /,
        *,
        violation_category: str = "policy-violation",
        policy_id: str | None = None,
        severity: str | None = None,
        locator: str = "policy",
        **details: object,
    ) -> None:
        super().__init__(message, **details)
        self.violation_category = violation_category
        self.policy_id = policy_id
        self.severity = severity
        self.locator = locator

    def to_dict(self) -> dict[str, object]:
        """The envelope plus ``violation_category``."""
        from llamon_agent.core.scrub import scrub_text  # a leaf: scrub lazily

        envelope = super().to_dict()
        envelope["violation_category"] = scrub_text(self.violation_category, max_length=64)
        return envelope


class FlowError(LlamonError):
    """A flow (graph) could not proceed. ``INTERNAL_ERROR``, not retriable."""


class MaxIterationError(FlowError):
    """A flow loop exceeded its iteration limit. ``INTERNAL_ERROR``, not retriable."""


class MergeStrategyError(FlowError):
    """Parallel branch results could not be merged. ``INTERNAL_ERROR``, not retriable."""


class RoutingError(FlowError):
    """No route matched the flow state. ``INTERNAL_ERROR``, not retriable."""


class A2AProtocolError(LlamonError):
    """Another agent answered outside the A2A protocol. ``INTERNAL_ERROR``, not retriable."""
