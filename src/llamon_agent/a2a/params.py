"""What a JSON-RPC request must satisfy beyond a2a-sdk's models, and naming what is wrong.

Every refusal here is a JSON-RPC error with ``ProtocolErrorData`` (``INVALID_INPUT``) whose
message names the offending field path (``params.message.parts[0].kind``) and never its
value. -32602 (invalid params) when the path is under ``params``, -32600 (invalid
request) otherwise (``id``, ``method``).

* ``find_lone_surrogate(document)``: a string anywhere in the request (a member name or
  a value) holding a lone UTF-16 surrogate escape such as ``"\\ud800"``. Such text cannot
  be encoded as UTF-8, so no store, log or reply could hold it (``a2a.body`` calls it only
  for a body with a ``\\ud800``-``\\udfff`` escape).
* ``check_params(params)``: ``historyLength`` below 0; a message part without ``kind``
  (a2a-sdk would otherwise read it as text); an empty task id.
* ``validation_refusal(errors)``: a2a-sdk's pydantic validation errors as one message
  naming the field paths (union branches the part's own ``kind`` rules out are dropped).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Final

from a2a.types import (
    DeleteTaskPushNotificationConfigParams,
    GetTaskPushNotificationConfigParams,
    InvalidParamsError,
    InvalidRequestError,
    ListTaskPushNotificationConfigParams,
    MessageSendParams,
    TaskIdParams,
    TaskPushNotificationConfig,
    TaskQueryParams,
)
from a2a.utils.errors import ServerError

from llamon_agent.a2a.protocol import protocol_error
from llamon_agent.core.codes import ErrorCode

__all__ = [
    "check_params",
    "field_refusal",
    "find_lone_surrogate",
    "usable_id",
    "validation_refusal",
]

_MAX_PATHS: Final = 3


def field_refusal(path: str, reason: str, problem: str) -> ServerError:
    """-32602 (under ``params``) or -32600 naming ``path``: ``"{path} {problem}"``."""
    error_type = InvalidParamsError if _in_params(path) else InvalidRequestError
    kind = "parameters" if error_type is InvalidParamsError else "request"
    message = f"Invalid {kind}: {path} {problem}."
    return protocol_error(error_type, ErrorCode.INVALID_INPUT, reason, message)


def _in_params(path: str) -> bool:
    return path == "params" or path.startswith(("params.", "params["))


# --------------------------------------------------------------------------- surrogates


def _has_surrogate(text: str) -> bool:
    if text.isascii():
        return False
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False


def _join(path: str, key: str | int) -> str:
    if isinstance(key, int):
        return f"{path}[{key}]"
    return f"{path}.{key}" if path else key


def _find_surrogate(value: Any, path: str) -> tuple[str, bool] | None:
    """The path of the first string holding a lone surrogate, and whether it is a key."""
    if isinstance(value, str):
        return (path, False) if _has_surrogate(value) else None
    if isinstance(value, dict):
        for key, item in value.items():
            if _has_surrogate(key):
                return (path or "$", True)
            found = _find_surrogate(item, _join(path, key))
            if found is not None:
                return found
    elif isinstance(value, list):
        for index, item in enumerate(value):
            found = _find_surrogate(item, _join(path, index))
            if found is not None:
                return found
    return None


def find_lone_surrogate(document: object) -> ServerError | None:
    """``invalid_unicode`` naming the first string of a parsed request that holds a lone
    surrogate (a value, or a member name: then the object holding it), else None."""
    found = _find_surrogate(document, "")
    if found is None:
        return None
    path, is_key = found
    problem = (
        "has a member name that is not valid Unicode (a lone UTF-16 surrogate escape)"
        if is_key
        else "is not valid Unicode: it holds a lone UTF-16 surrogate escape"
    )
    return field_refusal(path, "invalid_unicode", problem)


_INT64: Final = range(-(2**63), 2**63)


def usable_id(document: object) -> str | int | None:
    """The request's id if a reply can carry it: a str (valid Unicode) or a 64-bit int."""
    request_id = document.get("id") if isinstance(document, dict) else None
    if isinstance(request_id, bool) or not isinstance(request_id, str | int):
        return None
    if isinstance(request_id, str) and _has_surrogate(request_id):
        return None
    if isinstance(request_id, int) and request_id not in _INT64:
        return None
    return request_id


# --------------------------------------------------------------------------- params checks


def check_params(params: object) -> ServerError | None:
    """The first problem a2a-sdk's models let through in a method's ``params``, or None.

    ``historyLength`` must be 0 or more (``params.historyLength`` of ``tasks/get``,
    ``params.configuration.historyLength`` of ``message/send``/``message/stream``); every
    message part must say its ``kind`` (``text``, ``file`` or ``data``); a task id must
    not be empty (``params.id`` of the task and push config methods, ``params.taskId`` of
    ``tasks/pushNotificationConfig/set``, ``params.message.taskId``).
    """
    if isinstance(params, _TASK_ID_PARAMS) and params.id == "":
        return _empty("params.id")
    if isinstance(params, TaskPushNotificationConfig) and params.task_id == "":
        return _empty("params.taskId")
    if isinstance(params, TaskQueryParams):
        if params.history_length is not None and params.history_length < 0:
            return _negative("params.historyLength")
    elif isinstance(params, MessageSendParams):
        if params.message.task_id == "":
            return _empty("params.message.taskId")
        configuration = params.configuration
        if (
            configuration is not None
            and configuration.history_length is not None
            and configuration.history_length < 0
        ):
            return _negative("params.configuration.historyLength")
        for index, part in enumerate(params.message.parts):
            if "kind" not in part.root.model_fields_set:
                return field_refusal(
                    f"params.message.parts[{index}].kind",
                    "part_kind_missing",
                    "is missing: say 'text', 'file' or 'data'",
                )
    return None


_TASK_ID_PARAMS: Final = (
    TaskQueryParams,
    TaskIdParams,
    GetTaskPushNotificationConfigParams,
    ListTaskPushNotificationConfigParams,
    DeleteTaskPushNotificationConfigParams,
)


def _empty(path: str) -> ServerError:
    return field_refusal(path, "empty_task_id", "must not be empty: give the id of a task")


def _negative(path: str) -> ServerError:
    return field_refusal(path, "invalid_history_length", "must be 0 or more")


# --------------------------------------------------------------------------- validation errors


_SCALAR_BRANCHES: Final = frozenset({"str", "int", "float", "bool", "dict", "list", "none"})


def _is_branch(item: object) -> bool:
    """A union branch tag in a pydantic ``loc``: a model name (``TextPart``) or a scalar
    type (``str``/``int`` of ``id: str | int``)."""
    return isinstance(item, str) and (item[:1].isupper() or item in _SCALAR_BRANCHES)


def _ruled_out(errors: Sequence[Mapping[str, Any]]) -> set[tuple[object, ...]]:
    """Union branches whose ``kind`` literal does not match what the caller sent."""
    out: set[tuple[object, ...]] = set()
    for error in errors:
        loc = tuple(error.get("loc", ()))
        is_kind = len(loc) >= 2 and loc[-1] == "kind" and _is_branch(loc[-2])
        if is_kind and error.get("type") == "literal_error":
            out.add(loc[:-1])
    return out


def _path(loc: Sequence[object]) -> str:
    path = ""
    for item in loc:
        if _is_branch(item):
            continue
        path = _join(path, item if isinstance(item, int) else str(item))
    return path or "$"


def _under(loc: tuple[object, ...], prefixes: set[tuple[object, ...]]) -> bool:
    return any(loc[: len(prefix)] == prefix for prefix in prefixes)


def _describe(errors: Sequence[Mapping[str, Any]]) -> list[tuple[str, str]]:
    ruled_out = _ruled_out(errors)
    kept = [e for e in errors if not _under(tuple(e.get("loc", ())), ruled_out)]
    problems: dict[str, list[str]] = {}
    for error in kept:
        said = problems.setdefault(_path(error.get("loc", ())), [])
        message = str(error.get("msg", "is not valid"))
        if message not in said:
            said.append(message)
    if problems:
        return [(path, ", or ".join(said)) for path, said in problems.items()]
    # Every branch ruled out: the kind itself is wrong; name the kinds it may be.
    expected: dict[str, list[str]] = {}
    for error in errors:
        loc = tuple(error.get("loc", ()))
        if loc[:-1] in ruled_out and loc[-1] == "kind":
            allowed = str((error.get("ctx") or {}).get("expected", ""))
            expected.setdefault(_path(loc), []).append(allowed)
    return [(path, "Input should be " + " or ".join(kinds)) for path, kinds in expected.items()]


def validation_refusal(errors: Sequence[Mapping[str, Any]]) -> ServerError:
    """One -32602/-32600 refusal for pydantic's ``errors`` (``ValidationError.errors()``).

    The message lists up to three field paths with pydantic's description of each (which
    says what was expected, never what was sent); -32602 when every path is under
    ``params``.
    """
    described = _describe(errors) or [("$", "is not valid")]
    shown = described[:_MAX_PATHS]
    in_params = all(_in_params(path) for path, _ in described)
    error_type = InvalidParamsError if in_params else InvalidRequestError
    kind = "parameters" if in_params else "request"
    details = "; ".join(f"{path}: {problem}" for path, problem in shown)
    more = f" (and {len(described) - _MAX_PATHS} more)" if len(described) > _MAX_PATHS else ""
    reason = "invalid_params" if in_params else "invalid_request"
    return protocol_error(
        error_type, ErrorCode.INVALID_INPUT, reason, f"Invalid {kind}: {details}{more}."
    )
