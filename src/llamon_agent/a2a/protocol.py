"""Protocol-level answers: JSON-RPC errors whose ``error.data`` is ``ProtocolErrorData``.

A request the agent cannot take is refused before a task exists, with a JSON-RPC error
the caller can branch on exactly like an application failure (``error.data.errorCode``).
``protocol_error`` builds one; ``with_protocol_data`` completes any a2a-sdk error (task
not found, not cancelable ...) with the same payload and a scrubbed message;
``as_protocol_errors`` is the one translator at the request handler's boundary (whatever a
request raises leaves as such an error);
``check_message`` holds the built-in checks; ``push_not_supported``,
``streaming_not_supported`` and ``extended_card_not_configured`` are the answers for what
a card does not declare.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from fnmatch import fnmatchcase
from typing import Any, Final

from a2a.types import (
    AuthenticatedExtendedCardNotConfiguredError,
    ContentTypeNotSupportedError,
    DataPart,
    FilePart,
    FileWithBytes,
    InternalError,
    InvalidParamsError,
    InvalidRequestError,
    JSONParseError,
    JSONRPCError,
    Message,
    MessageSendParams,
    PushNotificationNotSupportedError,
    TaskState,
    TextPart,
    UnsupportedOperationError,
)
from a2a.utils.errors import ServerError
from pydantic import ValidationError

from llamon_agent.core.classify import classify_exception
from llamon_agent.core.codes import ErrorCode, json_rpc_to_error_code, snake_case
from llamon_agent.core.error_data import ProtocolErrorData, make_protocol_error_data
from llamon_agent.core.messages import public_message
from llamon_agent.core.scrub import scrub_public_text

__all__ = [
    "DEFAULT_MAX_BODY_BYTES",
    "DEFAULT_MAX_DEPTH",
    "DEFAULT_MAX_METADATA_KEYS",
    "DEFAULT_MAX_PARTS",
    "DEFAULT_MAX_PAYLOAD_BYTES",
    "MAX_DEPTH_CEILING",
    "RequestLimits",
    "as_protocol_errors",
    "check_message",
    "check_send_params",
    "extended_card_not_configured",
    "part_media_type",
    "protocol_error",
    "protocol_error_for_exception",
    "push_not_supported",
    "streaming_not_supported",
    "with_protocol_data",
]

DEFAULT_MAX_PAYLOAD_BYTES: Final = 1_000_000
DEFAULT_MAX_BODY_BYTES: Final = 10 * 1024 * 1024
DEFAULT_MAX_DEPTH: Final = 32
DEFAULT_MAX_PARTS: Final = 100
DEFAULT_MAX_METADATA_KEYS: Final = 100
MAX_DEPTH_CEILING: Final = 256
"""The deepest ``max_depth`` allowed: Python's JSON parser itself stops a few hundred
levels further down, and every level up to the limit must still be answerable."""


@dataclass(frozen=True, slots=True)
class RequestLimits:
    """What a served agent accepts; a request over any limit is refused naming the limit.

    ``input_modes``: media types (wildcards like ``image/*`` allowed) a message part may
    have; ``None`` accepts any. ``max_payload_bytes``: the largest message, counting
    every field a request carries into the task (text, data as JSON, file bytes or URI,
    file names and media types, message, part and params metadata as JSON, ids,
    extensions, the push config). ``max_body_bytes``: the largest HTTP body, counted as
    it is read (chunked bodies too). ``max_depth``: how deep the JSON body may nest (the
    request object is level 1; at most ``MAX_DEPTH_CEILING``). ``max_parts``: parts in
    one message. ``max_metadata_keys``: member names in all of one request's metadata
    (params, message and parts, at every level).
    """

    input_modes: Sequence[str] | None = None
    max_payload_bytes: int = DEFAULT_MAX_PAYLOAD_BYTES
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES
    max_depth: int = DEFAULT_MAX_DEPTH
    max_parts: int = DEFAULT_MAX_PARTS
    max_metadata_keys: int = DEFAULT_MAX_METADATA_KEYS

    def __post_init__(self) -> None:
        for name in (
            "max_payload_bytes",
            "max_body_bytes",
            "max_depth",
            "max_parts",
            "max_metadata_keys",
        ):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"RequestLimits.{name} must be a positive integer")
        if self.max_depth > MAX_DEPTH_CEILING:
            raise ValueError(f"RequestLimits.max_depth must be at most {MAX_DEPTH_CEILING}")


def protocol_error(
    error_type: type[JSONRPCError]
    | type[InvalidParamsError]
    | type[InvalidRequestError]
    | type[JSONParseError]
    | type[ContentTypeNotSupportedError]
    | type[PushNotificationNotSupportedError]
    | type[AuthenticatedExtendedCardNotConfiguredError]
    | type[UnsupportedOperationError]
    | type[InternalError],
    code: ErrorCode,
    reason: str,
    message: str,
    *,
    retriable: bool = False,
    **extras: object,
) -> ServerError:
    """A ``ServerError`` carrying a JSON-RPC error of ``error_type`` with ProtocolErrorData."""
    data = make_protocol_error_data(code, reason, message, retriable=retriable, **extras)
    error = error_type(message=data.error_message, data=data.to_wire())  # type: ignore[call-arg]
    return ServerError(error=error)


_INTERNAL_MESSAGE: Final = "Internal error"
_TASK_STATE_REPR: Final = re.compile(r"\bTaskState\.([A-Za-z_]+)")


def _wire_states(message: str) -> str:
    """``TaskState.input_required`` (an enum's repr in a2a-sdk's text) as ``input-required``."""

    def wire(match: re.Match[str]) -> str:
        member = TaskState.__members__.get(match.group(1))
        return member.value if member is not None else match.group(0)

    return _TASK_STATE_REPR.sub(wire, message)


def push_not_supported() -> ServerError:
    """-32003 ``PushNotificationNotSupportedError``: the card does not declare push.

    The one answer of all four ``tasks/pushNotificationConfig/*`` methods on such an agent.
    """
    return protocol_error(
        PushNotificationNotSupportedError,
        ErrorCode.INVALID_INPUT,
        "push_notification_not_supported",
        "This agent does not support push notifications (its card does not declare the "
        "pushNotifications capability).",
    )


def streaming_not_supported() -> ServerError:
    """-32004 ``UnsupportedOperationError``: ``message/stream`` on a card without streaming."""
    return protocol_error(
        UnsupportedOperationError,
        ErrorCode.INVALID_INPUT,
        "unsupported_operation",
        "This agent does not stream (its card does not declare the streaming capability); "
        "use message/send.",
    )


def extended_card_not_configured() -> ServerError:
    """-32007 ``AuthenticatedExtendedCardNotConfiguredError``: the card declares none."""
    return protocol_error(
        AuthenticatedExtendedCardNotConfiguredError,
        ErrorCode.NOT_FOUND,
        "authenticated_extended_card_not_configured",
        "This agent has no authenticated extended card (its card does not declare "
        "supportsAuthenticatedExtendedCard).",
    )


def with_protocol_data(error: ServerError) -> ServerError:
    """The same error with ``ProtocolErrorData`` in ``data`` and a scrubbed message.

    This is the security boundary of every JSON-RPC error: whoever built the error, its
    message and every string of its data leave scrubbed and without upstream locations
    (``scrub_public_text``), and its data holds only ``ProtocolErrorData``'s fields (data
    that is not such a payload is rebuilt from the JSON-RPC code). An ``InternalError``'s
    own message is replaced by a generic one unless its data already carries an
    ``errorCode`` (ours always do): it is usually ``str(exc)`` of something unexpected.
    Task states in a2a-sdk's messages read as on the wire (``completed``, not
    ``TaskState.completed``).
    """
    inner = error.error or InternalError()
    payload = _known_payload(inner.data)
    if payload is not None:
        message = scrub_public_text(inner.message or "")
        if message == inner.message and payload == inner.data:
            return error
        return ServerError(error=inner.model_copy(update={"message": message, "data": payload}))
    code = json_rpc_to_error_code(inner.code)
    name = type(inner).__name__
    reason = snake_case(name.removesuffix("Error")) if name != "JSONRPCError" else "jsonrpc_error"
    internal = isinstance(inner, InternalError)
    message = (
        _INTERNAL_MESSAGE if internal else scrub_public_text(_wire_states(inner.message or ""))
    )
    payload = make_protocol_error_data(code, reason, message).to_wire()
    return ServerError(error=inner.model_copy(update={"message": message, "data": payload}))


def _known_payload(data: object) -> dict[str, object] | None:
    """``data`` as scrubbed ``ProtocolErrorData`` when it is one (has a valid errorCode)."""
    if not isinstance(data, dict) or "errorCode" not in data:
        return None
    try:
        wire = ProtocolErrorData.model_validate(data).to_wire()
    except (ValidationError, TypeError, ValueError):
        return None
    return {key: _scrubbed_wire(value) for key, value in wire.items()}


def _scrubbed_wire(value: object) -> object:
    if isinstance(value, str):
        return scrub_public_text(value)
    if isinstance(value, list):
        return [_scrubbed_wire(item) for item in value]
    if isinstance(value, dict):
        return {key: _scrubbed_wire(item) for key, item in value.items()}
    return value


def protocol_error_for_exception(exc: Exception) -> ServerError:
    """The JSON-RPC error for any exception a request raised outside the agent.

    A ``ServerError`` gets ``with_protocol_data``. Anything else (a task store that failed,
    a bug) becomes an ``InternalError`` (-32603) whose ProtocolErrorData is classified by
    the one table like every failure: a locked SQLite file is ``UPSTREAM_UNAVAILABLE`` /
    ``database_unavailable``, retriable. Its text is shown only where the table allows;
    an unmapped exception gets an incident id (traceback in the server log).
    """
    if isinstance(exc, ServerError):
        return with_protocol_data(exc)
    found = classify_exception(exc)
    message = public_message(found)
    extras: dict[str, object] = {}
    if message.incident_id is not None:
        extras["incident_id"] = message.incident_id
    if found.retry_after_ms is not None:
        extras["retry_after_ms"] = found.retry_after_ms
    return protocol_error(
        InternalError, found.code, found.reason, message.text, retriable=found.retriable, **extras
    )


@contextmanager
def as_protocol_errors() -> Iterator[None]:
    """Translate whatever the block raises into the JSON-RPC error the caller receives.

    The one boundary of the request handler: every method runs its body in
    ``with as_protocol_errors():`` (a stream's generator body too, so a stream that
    fails ends with that error as its last event). An ``Exception`` leaves as
    ``protocol_error_for_exception(exc)``: a ``ServerError`` completed with
    ``ProtocolErrorData`` and a scrubbed message, anything else a classified -32603. The
    original is chained (``raise ... from exc``), so the server log shows what happened
    while the caller sees only the translated error. A ``BaseException`` (cancellation,
    a client that left a stream) passes through untouched.
    """
    try:
        yield
    except Exception as exc:
        error = protocol_error_for_exception(exc)
        if error is exc:  # already the answer (complete and scrubbed)
            raise
        raise error from exc


def part_media_type(part: TextPart | DataPart | FilePart) -> str:
    """The media type a part stands for: text/plain, application/json, or the file's."""
    if isinstance(part, TextPart):
        return "text/plain"
    if isinstance(part, DataPart):
        return "application/json"
    return part.file.mime_type or "application/octet-stream"


def _usable(part: TextPart | DataPart | FilePart) -> bool:
    if isinstance(part, TextPart):
        return bool(part.text.strip())
    if isinstance(part, DataPart):
        return True
    return True


def _text_size(text: str | None) -> int:
    if not text:
        return 0
    return len(text) if text.isascii() else len(text.encode("utf-8", "surrogatepass"))


def _json_size(value: object) -> int:
    """Bytes of ``value`` as compact JSON (0 for None or an empty mapping)."""
    if not value:
        return 0
    return len(json.dumps(value, ensure_ascii=False, separators=(",", ":"), default=str).encode())


def _message_size(message: Message) -> int:
    """Every field of the message in bytes: content, file names and media types, metadata
    as JSON, ids, extensions. Cheap: strings are measured, only metadata/data dumped."""
    size = (
        _json_size(message.metadata)
        + _text_size(message.message_id)
        + _text_size(message.context_id)
        + _text_size(message.task_id)
    )
    if message.reference_task_ids:
        size += sum(_text_size(ref) for ref in message.reference_task_ids)
    if message.extensions:
        size += sum(_text_size(uri) for uri in message.extensions)
    for part in message.parts:
        root = part.root
        size += _json_size(root.metadata)
        if isinstance(root, TextPart):
            size += _text_size(root.text)
        elif isinstance(root, DataPart):
            size += _json_size(root.data) or 2
        else:
            file = root.file
            content = file.bytes if isinstance(file, FileWithBytes) else file.uri
            size += _text_size(content) + _text_size(file.name) + _text_size(file.mime_type)
    return size


def _params_size(params: MessageSendParams) -> int:
    """The message's size plus what ``params`` adds: its metadata and configuration."""
    size = _message_size(params.message) + _json_size(params.metadata)
    configuration = params.configuration
    if configuration is not None:
        if configuration.accepted_output_modes:
            size += sum(_text_size(mode) for mode in configuration.accepted_output_modes)
        push = configuration.push_notification_config
        if push is not None:
            size += _json_size(push.model_dump(mode="json", exclude_none=True))
    return size


def _count_keys(value: object, budget: int) -> int:
    """Member names in ``value`` at every level, counting no further than ``budget``."""
    count = 0
    stack = [value]
    while stack and count <= budget:
        item = stack.pop()
        if isinstance(item, Mapping):
            count += len(item)
            stack.extend(item.values())
        elif isinstance(item, list | tuple):
            stack.extend(item)
    return count


def _metadata_refusal(
    message: Message, limits: RequestLimits, params_metadata: Mapping[str, Any] | None
) -> ServerError | None:
    """``too_many_metadata_keys`` naming the metadata that passes the limit, else None."""
    limit = limits.max_metadata_keys
    total = 0
    if params_metadata:
        total += _count_keys(params_metadata, limit)
        if total > limit:
            return _too_many_keys("params.metadata", limit)
    if message.metadata:
        total += _count_keys(message.metadata, limit - total)
        if total > limit:
            return _too_many_keys("params.message.metadata", limit)
    for index, part in enumerate(message.parts):
        metadata = part.root.metadata
        if metadata:
            total += _count_keys(metadata, limit - total)
            if total > limit:
                return _too_many_keys(f"params.message.parts[{index}].metadata", limit)
    return None


def _too_many_keys(path: str, limit: int) -> ServerError:
    return protocol_error(
        InvalidParamsError,
        ErrorCode.INVALID_INPUT,
        "too_many_metadata_keys",
        f"Invalid parameters: {path} takes the request over {limit} metadata keys "
        f"(names at every level of params, message and part metadata); this agent "
        f"accepts at most {limit}.",
    )


def check_send_params(params: MessageSendParams, limits: RequestLimits) -> ServerError | None:
    """``check_message`` for a whole ``message/send``/``message/stream`` request: the
    payload also counts ``params.metadata`` and the configuration (output modes, push
    config), and metadata keys count ``params.metadata`` too."""
    return _check(params.message, limits, _params_size(params), params.metadata)


def check_message(message: Message, limits: RequestLimits) -> ServerError | None:
    """The built-in request checks; the first failing one as a protocol error, else None.

    * ``payload_too_large`` (-32602, INVALID_INPUT): the message is over
      ``limits.max_payload_bytes``, counting every field (``RequestLimits``);
    * ``too_many_parts`` (-32602): more than ``limits.max_parts`` parts;
    * ``too_many_metadata_keys`` (-32602): more than ``limits.max_metadata_keys`` member
      names in all metadata (message and parts, at every level);
    * ``no_usable_part`` (-32602, INVALID_INPUT): no parts, or only blank text;
    * ``unsupported_input_mode`` (-32005, INVALID_INPUT): a part's media type is not in
      ``limits.input_modes``.
    """
    return _check(message, limits, _message_size(message), None)


def _check(
    message: Message,
    limits: RequestLimits,
    size: int,
    params_metadata: Mapping[str, Any] | None,
) -> ServerError | None:
    if size > limits.max_payload_bytes:
        return protocol_error(
            InvalidParamsError,
            ErrorCode.INVALID_INPUT,
            "payload_too_large",
            f"The message is {size} bytes (every field counts: content, file names, "
            f"metadata, ids); this agent accepts at most {limits.max_payload_bytes} bytes.",
        )
    if len(message.parts) > limits.max_parts:
        return protocol_error(
            InvalidParamsError,
            ErrorCode.INVALID_INPUT,
            "too_many_parts",
            f"Invalid parameters: params.message.parts has more than {limits.max_parts} "
            f"parts; this agent accepts at most {limits.max_parts} parts in a message.",
        )
    metadata_problem = _metadata_refusal(message, limits, params_metadata)
    if metadata_problem is not None:
        return metadata_problem
    parts = [part.root for part in message.parts]
    if not any(_usable(part) for part in parts):
        return protocol_error(
            InvalidParamsError,
            ErrorCode.INVALID_INPUT,
            "no_usable_part",
            "The message has no usable part: send non-empty text, data or a file.",
        )
    if limits.input_modes is not None:
        accepted = list(limits.input_modes)
        for part in parts:
            media_type = part_media_type(part)
            if not any(fnmatchcase(media_type, pattern) for pattern in accepted):
                return protocol_error(
                    ContentTypeNotSupportedError,
                    ErrorCode.INVALID_INPUT,
                    "unsupported_input_mode",
                    f"This agent does not accept {media_type!r} parts; accepted: "
                    f"{', '.join(accepted)}.",
                )
    return None
