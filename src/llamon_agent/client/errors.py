"""What a failed call to another agent raises: ``RemoteAgentError`` and one subclass per code.

Every way a call can fail ends in the same family, so a caller branches on the type (or
on ``code``) alone::

    RemoteAgentError                      (a LlamonApplicationError: carries its own answer)
     ├── RemoteInvalidInputError          INVALID_INPUT
     ├── RemoteAuthRequiredError          AUTH_REQUIRED
     ├── RemoteNotFoundError              NOT_FOUND
     ├── RemoteUnavailableError           UPSTREAM_UNAVAILABLE
     ├── RemoteTimeoutError               UPSTREAM_TIMEOUT      (also a TimeoutError)
     ├── RemoteRateLimitedError           RATE_LIMITED
     ├── RemoteGuardrailBlockedError      GUARDRAIL_BLOCKED
     └── RemoteInternalError              INTERNAL_ERROR

A llamon server says what went wrong itself (``ApplicationErrorData`` in a failed task's
DataPart, ``ProtocolErrorData`` in a JSON-RPC error's ``data``): its ``errorCode``,
``errorReason``, ``retriable`` and ``retryAfterMs`` are taken as sent, and ``data`` keeps
every field, unknown ones included. A server that sends no such data is classified by the
one table (``llamon_agent.core.classify``) from the HTTP status, the JSON-RPC code or the
task state, and ``data`` is None.

Raised inside a llamon agent, these errors answer that agent's caller with the called
agent's failure read one hop up (``core.classify.one_hop_up``: ``UPSTREAM_*``,
``RATE_LIMITED`` with its ``retryAfterMs``, ``NOT_FOUND`` and ``GUARDRAIL_BLOCKED`` pass;
``INVALID_INPUT``, ``AUTH_REQUIRED`` and ``INTERNAL_ERROR`` answer
``UPSTREAM_UNAVAILABLE``); ``code`` keeps what the called agent said, and so does
``data.cause``. No message names the called agent's address.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, ClassVar, Final

from pydantic import BaseModel, ConfigDict, ValidationError

from llamon_agent.core.codes import ErrorCode
from llamon_agent.core.error_data import ApplicationErrorData, ProtocolErrorData
from llamon_agent.core.scrub import scrub_public_text
from llamon_agent.exceptions import LlamonApplicationError

if TYPE_CHECKING:
    from a2a.types import JSONRPCError, Task

__all__ = [
    "RemoteAgentError",
    "RemoteApplicationErrorData",
    "RemoteAuthRequiredError",
    "RemoteGuardrailBlockedError",
    "RemoteInternalError",
    "RemoteInvalidInputError",
    "RemoteNotFoundError",
    "RemoteProtocolErrorData",
    "RemoteRateLimitedError",
    "RemoteTimeoutError",
    "RemoteUnavailableError",
    "remote_error_from_exception",
    "remote_error_from_http",
    "remote_error_from_jsonrpc",
    "remote_error_from_task",
    "remote_error_from_transport",
]


class RemoteApplicationErrorData(ApplicationErrorData):
    """A called agent's ``ApplicationErrorData`` as received: unknown fields are kept
    (``model_extra``, and as attributes, e.g. ``data.cause``)."""

    model_config = ConfigDict(extra="allow")


class RemoteProtocolErrorData(ProtocolErrorData):
    """A called agent's ``ProtocolErrorData`` as received: unknown fields are kept."""

    model_config = ConfigDict(extra="allow")


RemoteErrorData = RemoteApplicationErrorData | RemoteProtocolErrorData


class RemoteAgentError(LlamonApplicationError):
    """A call to another agent failed. Catch this to catch every failure of a call.

    ``code`` / ``reason`` / ``retriable`` / ``retry_after_ms`` decide what to do next;
    ``http_status`` and ``jsonrpc_code`` say what the wire said (None when it did not
    apply); ``task_id`` / ``context_id`` name the remote task when one existed; ``agent`` is
    the called agent's card name; ``data`` is the parsed error data of a llamon server
    (None for a server that sent none); ``raw_data`` is that data as received.
    """

    default_code: ClassVar[ErrorCode] = ErrorCode.INTERNAL_ERROR

    def __init__(
        self,
        message: str = "",
        *,
        code: ErrorCode | str | None = None,
        reason: str = "remote_agent_error",
        retriable: bool = False,
        retry_after_ms: int | None = None,
        http_status: int | None = None,
        jsonrpc_code: int | None = None,
        task_id: str | None = None,
        context_id: str | None = None,
        agent: str | None = None,
        data: RemoteErrorData | None = None,
        raw_data: Mapping[str, Any] | None = None,
    ) -> None:
        extras: dict[str, object] = {}
        if retry_after_ms is not None:
            extras["retry_after_ms"] = retry_after_ms
        super().__init__(
            self.default_code if code is None else ErrorCode(code),
            reason,
            message=message,
            retriable=retriable,
            **extras,
        )
        self.retry_after_ms = retry_after_ms
        self.http_status = http_status
        self.jsonrpc_code = jsonrpc_code
        self.task_id = task_id
        self.context_id = context_id
        self.agent = agent
        self.data = data
        self.raw_data: dict[str, Any] | None = None if raw_data is None else dict(raw_data)

    @property
    def cause_hops(self) -> list[dict[str, object]]:
        """Where the failure happened, nearest first: a hop for the called agent itself
        (``agent``, ``taskId``, ``errorCode``, ``errorReason``, ``errorSource``; None values
        left out), then the hops of the remote error data's ``cause`` list, as sent."""
        own: dict[str, object | None] = {
            "agent": self.agent,
            "taskId": self.task_id,
            "errorCode": self.code.value,
            "errorReason": self.reason,
            "errorSource": None if self.data is None else self.data.error_source,
        }
        hops: list[dict[str, object]] = [{k: v for k, v in own.items() if v is not None}]
        remote = None if self.data is None else getattr(self.data, "cause", None)
        if isinstance(remote, list | tuple):
            for hop in remote:
                if isinstance(hop, BaseModel):
                    hops.append(hop.model_dump(mode="json", by_alias=True, exclude_none=True))
                elif isinstance(hop, Mapping):
                    hops.append({str(k): v for k, v in hop.items() if v is not None})
        return hops


class RemoteInvalidInputError(RemoteAgentError):
    """``INVALID_INPUT``: the called agent refused the request as sent. Fix it; no retry."""

    default_code = ErrorCode.INVALID_INPUT


class RemoteAuthRequiredError(RemoteAgentError):
    """``AUTH_REQUIRED``: credentials missing, refused or expired (HTTP 401/403)."""

    default_code = ErrorCode.AUTH_REQUIRED


class RemoteNotFoundError(RemoteAgentError):
    """``NOT_FOUND``: the task or resource does not exist (expired, never existed, 404)."""

    default_code = ErrorCode.NOT_FOUND


class RemoteUnavailableError(RemoteAgentError):
    """``UPSTREAM_UNAVAILABLE``: the agent or something behind it is down (5xx, refused
    or reset connection, a JSON-RPC server error). Often retriable."""

    default_code = ErrorCode.UPSTREAM_UNAVAILABLE


class RemoteTimeoutError(RemoteAgentError, TimeoutError):
    """``UPSTREAM_TIMEOUT``: no answer in time. Also a ``TimeoutError``."""

    default_code = ErrorCode.UPSTREAM_TIMEOUT


class RemoteRateLimitedError(RemoteAgentError):
    """``RATE_LIMITED``: wait ``retry_after_ms`` (when given), then retry."""

    default_code = ErrorCode.RATE_LIMITED


class RemoteGuardrailBlockedError(RemoteAgentError):
    """``GUARDRAIL_BLOCKED``: a guardrail of the called agent blocked; its artifacts are
    withheld. ``data.guardrail.violation_category`` says why."""

    default_code = ErrorCode.GUARDRAIL_BLOCKED


class RemoteInternalError(RemoteAgentError):
    """``INTERNAL_ERROR``: the called agent failed in a way it did not classify."""

    default_code = ErrorCode.INTERNAL_ERROR


_BY_CODE: Final[Mapping[ErrorCode, type[RemoteAgentError]]] = {
    cls.default_code: cls
    for cls in (
        RemoteInvalidInputError,
        RemoteAuthRequiredError,
        RemoteNotFoundError,
        RemoteUnavailableError,
        RemoteTimeoutError,
        RemoteRateLimitedError,
        RemoteGuardrailBlockedError,
        RemoteInternalError,
    )
}

_UNNAMED: Final = "the called agent"


def _named(agent: str | None) -> str:
    return f"agent {agent!r}" if agent else _UNNAMED


def _build(
    code: ErrorCode,
    message: str,
    *,
    reason: str,
    retriable: bool,
    **fields: Any,
) -> RemoteAgentError:
    cls = _BY_CODE.get(code, RemoteInternalError)
    return cls(scrub_public_text(message), code=code, reason=reason, retriable=retriable, **fields)


def _parse(
    raw: object, model: type[RemoteApplicationErrorData] | type[RemoteProtocolErrorData]
) -> RemoteErrorData | None:
    """The error data in this SDK's shape, or None (not a mapping, no known errorCode, or
    a value outside the conventions)."""
    if not isinstance(raw, Mapping) or raw.get("errorCode") not in ErrorCode.__members__:
        return None
    try:
        return model.model_validate(dict(raw))
    except ValidationError:
        return None


def _from_data(
    data: RemoteErrorData,
    raw: Mapping[str, Any],
    *,
    agent: str | None,
    **fields: Any,
) -> RemoteAgentError:
    message = data.error_message or f"{_named(agent)} failed: {data.error_code.value}"
    return _build(
        data.error_code,
        message,
        reason=data.error_reason,
        retriable=data.retriable,
        retry_after_ms=data.retry_after_ms,
        agent=agent,
        data=data,
        raw_data=raw,
        **fields,
    )


def _status_text(task: Task) -> str:
    from a2a.types import TextPart

    message = task.status.message
    if message is None:
        return ""
    return " ".join(p.root.text for p in message.parts if isinstance(p.root, TextPart)).strip()


def _status_data(task: Task) -> dict[str, Any] | None:
    from a2a.types import DataPart

    message = task.status.message
    if message is None:
        return None
    for part in message.parts:
        if isinstance(part.root, DataPart) and "errorCode" in part.root.data:
            return part.root.data
    return None


_TASK_STATE_RULES: Final = {
    "failed": (ErrorCode.INTERNAL_ERROR, "remote_task_failed", False),
    "rejected": (ErrorCode.INVALID_INPUT, "remote_task_rejected", False),
}
"""A task that ended badly without error data: classified by its state."""


def remote_error_from_task(task: Task, *, agent: str | None = None) -> RemoteAgentError:
    """The error for a task that ended ``failed`` (or ``rejected``).

    A llamon server's ``ApplicationErrorData`` DataPart decides; without it the state does
    (``failed`` -> ``INTERNAL_ERROR`` ``remote_task_failed``, ``rejected`` ->
    ``INVALID_INPUT`` ``remote_task_rejected``), and the status text is the message.
    """
    ids = {"task_id": task.id, "context_id": task.context_id}
    raw = _status_data(task)
    data = _parse(raw, RemoteApplicationErrorData)
    if data is not None and raw is not None:
        return _from_data(data, raw, agent=agent, **ids)
    state = task.status.state.value
    code, reason, retriable = _TASK_STATE_RULES.get(
        state, (ErrorCode.INTERNAL_ERROR, "remote_task_failed", False)
    )
    text = _status_text(task) or f"{_named(agent)} ended the task {state}"
    return _build(code, text, reason=reason, retriable=retriable, agent=agent, raw_data=raw, **ids)


def remote_error_from_jsonrpc(
    error: JSONRPCError | BaseException,
    *,
    agent: str | None = None,
    http_status: int | None = None,
    task_id: str | None = None,
    context_id: str | None = None,
) -> RemoteAgentError:
    """The error for a JSON-RPC error answer (a2a-sdk's ``JSONRPCError`` or the
    ``A2AClientJSONRPCError`` that carries it).

    A llamon server's ``ProtocolErrorData`` in ``error.data`` decides; without it the one
    table classifies the JSON-RPC code (task not found -> ``NOT_FOUND``, a server error ->
    ``UPSTREAM_UNAVAILABLE`` retriable, a refused request -> ``UPSTREAM_UNAVAILABLE``).
    """
    from a2a.client.errors import A2AClientJSONRPCError
    from a2a.types import JSONRPCErrorResponse

    if isinstance(error, A2AClientJSONRPCError):
        wrapped: BaseException = error
        rpc: Any = error.error
    elif isinstance(error, BaseException):
        wrapped, rpc = error, getattr(error, "error", None)
    else:
        rpc = error
        wrapped = A2AClientJSONRPCError(JSONRPCErrorResponse(error=error, id=None))
    code = getattr(rpc, "code", None)
    jsonrpc_code = code if isinstance(code, int) and not isinstance(code, bool) else None
    fields: dict[str, Any] = {
        "http_status": http_status,
        "jsonrpc_code": jsonrpc_code,
        "task_id": task_id,
        "context_id": context_id,
    }
    raw = getattr(rpc, "data", None)
    data = _parse(raw, RemoteProtocolErrorData)
    if data is not None and isinstance(raw, Mapping):
        return _from_data(data, raw, agent=agent, **fields)
    return _classified(wrapped, agent=agent, **fields)


def _classified(exc: BaseException, *, agent: str | None, **fields: Any) -> RemoteAgentError:
    from llamon_agent.core.classify import classify_received

    found = classify_received(exc)  # what the called agent said, not our answer one hop up
    if fields.get("http_status") is None and found.http_status is not None:
        fields["http_status"] = found.http_status
    wire = []
    if fields.get("http_status") is not None:
        wire.append(f"HTTP {fields['http_status']}")
    if fields.get("jsonrpc_code") is not None:
        wire.append(f"JSON-RPC error {fields['jsonrpc_code']}")
    said = f" ({', '.join(wire)})" if wire else ""
    message = f"{_named(agent)} failed{said}: {found.code.value} {found.reason}"
    return _build(
        found.code,
        message,
        reason=found.reason,
        retriable=found.retriable,
        retry_after_ms=found.retry_after_ms,
        agent=agent,
        **fields,
    )


def _error_body(response: Any) -> Mapping[str, Any] | None:
    """The JSON-RPC ``error`` object of an error response's body, when it has one."""
    try:
        body = response.json()
    except Exception:
        return None
    error = body.get("error") if isinstance(body, Mapping) else None
    return error if isinstance(error, Mapping) else None


def remote_error_from_http(
    error: BaseException | int,
    *,
    agent: str | None = None,
    headers: Mapping[str, str] | None = None,
    task_id: str | None = None,
    context_id: str | None = None,
) -> RemoteAgentError:
    """The error for an HTTP error status (a2a-sdk's ``A2AClientHTTPError``, httpx's
    ``HTTPStatusError``, or a bare status code with its ``headers``).

    When the body is a JSON-RPC error carrying a llamon server's ``ProtocolErrorData`` it
    decides; otherwise the one table classifies the status (429 -> ``RATE_LIMITED`` with
    ``Retry-After``, 401/403 -> ``AUTH_REQUIRED``, 404 -> ``NOT_FOUND``, 5xx ->
    ``UPSTREAM_UNAVAILABLE`` retriable). A network failure a2a-sdk reports as HTTP 503 is a
    transport error (see ``remote_error_from_transport``).
    """
    import httpx
    from a2a.client.errors import A2AClientHTTPError

    from llamon_agent.core.retry_after import read_retry_after_ms

    response: Any
    if isinstance(error, int):
        status = error
        exc: BaseException = A2AClientHTTPError(status, "")
        response = None
    else:
        exc = error
        status_error = error if isinstance(error, httpx.HTTPStatusError) else error.__cause__
        response = getattr(status_error, "response", None)
        if isinstance(status_error, httpx.RequestError):
            return remote_error_from_transport(error, agent=agent)
        found_status = getattr(error, "status_code", None) or getattr(response, "status_code", 0)
        status = found_status if isinstance(found_status, int) else 0
    ids = {"task_id": task_id, "context_id": context_id}
    body = None if response is None else _error_body(response)
    if body is not None:
        raw = body.get("data")
        data = _parse(raw, RemoteProtocolErrorData)
        if data is not None and isinstance(raw, Mapping):
            code = body.get("code")
            return _from_data(
                data,
                raw,
                agent=agent,
                http_status=status,
                jsonrpc_code=code if isinstance(code, int) else None,
                **ids,
            )
    found = _classified(exc, agent=agent, http_status=status, jsonrpc_code=None, **ids)
    if found.retry_after_ms is None and found.code is ErrorCode.RATE_LIMITED:
        source = headers if headers is not None else getattr(response, "headers", None)
        after = read_retry_after_ms(source)
        if after is not None:
            found = _rebuild(found, retry_after_ms=after)
    return found


def _rebuild(error: RemoteAgentError, **changes: Any) -> RemoteAgentError:
    fields: dict[str, Any] = {
        "code": error.code,
        "reason": error.reason,
        "retriable": error.retriable,
        "retry_after_ms": error.retry_after_ms,
        "http_status": error.http_status,
        "jsonrpc_code": error.jsonrpc_code,
        "task_id": error.task_id,
        "context_id": error.context_id,
        "agent": error.agent,
        "data": error.data,
        "raw_data": error.raw_data,
    }
    fields.update(changes)
    return type(error)(error.message, **fields)


def remote_error_from_transport(
    error: BaseException, *, agent: str | None = None
) -> RemoteAgentError:
    """The error for a call that got no answer: connection refused or reset ->
    ``UPSTREAM_UNAVAILABLE`` ``network_error`` retriable; a timeout -> ``UPSTREAM_TIMEOUT``
    ``timeout`` retriable (httpx's errors, or a2a-sdk's wrappers of them)."""
    return _classified(error, agent=agent, http_status=None, jsonrpc_code=None)


def remote_error_from_exception(
    error: BaseException, *, agent: str | None = None
) -> RemoteAgentError:
    """Any error a2a-sdk's client (or httpx under it) raised during a call, as this family:
    dispatches to the JSON-RPC, HTTP or transport factory; anything else is classified by
    the one table."""
    import httpx
    from a2a.client.errors import (
        A2AClientHTTPError,
        A2AClientJSONRPCError,
        A2AClientTimeoutError,
    )

    if isinstance(error, RemoteAgentError):
        return error
    if isinstance(error, A2AClientJSONRPCError):
        return remote_error_from_jsonrpc(error, agent=agent)
    if isinstance(error, A2AClientHTTPError | httpx.HTTPStatusError):
        return remote_error_from_http(error, agent=agent)
    if isinstance(error, A2AClientTimeoutError | httpx.TransportError | OSError | TimeoutError):
        return remote_error_from_transport(error, agent=agent)
    return _classified(error, agent=agent, http_status=None, jsonrpc_code=None)
