"""Message policy: which text of an exception may leave the process.

* A mapped exception (any row of the table) -> its text, scrubbed. Empty text gives a
  plain sentence naming the type. Rows marked "text withheld" (provider SDK errors, whose
  text echoes API keys and prompts) give the code's plain sentence instead.
* A row with a message of the SDK's own (a recursion limit, a called agent's JSON-RPC
  error) -> that message.
* An unmapped exception (the INTERNAL_ERROR fallback) -> a generic message with an
  incident id. The same id is logged at ERROR on ``llamon_agent.errors`` with the
  traceback, so an operator can find the cause. The exception's own text reaches
  clients only while ``LLAMON_DEBUG_ERRORS`` is on (and is scrubbed even then).

Whatever text is shown, no upstream location leaves the process: URLs, ``host:port``
pairs and IP addresses are removed (``core.scrub.scrub_public_text``). The text with
them (secrets still scrubbed) is logged once per exception at INFO on
``llamon_agent.errors``, so an operator can see which upstream failed.

The rule is deliberate: ``str(exc)`` never becomes ``errorMessage`` as such, because raw
exception text is where secrets leak (connection strings, tokens in URLs, SQL values).
"""

from __future__ import annotations

import contextlib
import logging
import secrets
import traceback
from dataclasses import dataclass

from llamon_agent.core.classify import Classification
from llamon_agent.core.codes import DEFAULT_MESSAGES
from llamon_agent.core.scrub import scrub_text, strip_locations
from llamon_agent.core.settings import debug_errors_enabled

__all__ = ["PublicMessage", "incident_id_for", "public_message", "public_text", "safe_str"]

logger = logging.getLogger("llamon_agent.errors")

_INCIDENT_ATTR = "__llamon_incident_id__"
_WITHHELD_ATTR = "__llamon_locations_logged__"


@dataclass(frozen=True, slots=True)
class PublicMessage:
    """Text that may be shown to a client, and the incident id when one was logged."""

    text: str
    incident_id: str | None = None


def incident_id_for(exc: BaseException) -> str:
    """The incident id of ``exc``: made and logged (with traceback) once per exception."""
    existing = getattr(exc, _INCIDENT_ATTR, None)
    if isinstance(existing, str):
        return existing
    incident = secrets.token_hex(6)
    with contextlib.suppress(AttributeError, TypeError):  # exceptions with __slots__
        setattr(exc, _INCIDENT_ATTR, incident)
    try:
        trace = "".join(traceback.format_exception(exc))
    except Exception:
        trace = type(exc).__name__
    # The traceback is scrubbed too: log lines are outside the security boundary's reach.
    logger.error(
        "incident %s: unmapped %s\n%s",
        incident,
        type(exc).__name__,
        scrub_text(trace, max_length=20_000),
    )
    return incident


def safe_str(exc: BaseException) -> str:
    """``str(exc)``, or "" when the exception's ``__str__`` itself fails."""
    try:
        return str(exc)
    except Exception:
        return ""


def public_text(raw: str, exc: BaseException | None = None) -> str:
    """``raw`` as a client may read it: scrubbed, and without any upstream location.

    When locations were removed, the scrubbed text with them is logged at INFO on
    ``llamon_agent.errors`` (once per ``exc`` when one is given).
    """
    scrubbed = scrub_text(raw)
    public = strip_locations(scrubbed)
    if public != scrubbed:
        _log_withheld(raw, exc)
    return public


def _log_withheld(raw: str, exc: BaseException | None) -> None:
    if exc is not None:
        if getattr(exc, _WITHHELD_ATTR, False) is True:
            return
        with contextlib.suppress(AttributeError, TypeError):
            setattr(exc, _WITHHELD_ATTR, True)
    if logger.isEnabledFor(logging.INFO):
        name = type(exc).__name__ if exc is not None else "message"
        logger.info(
            "upstream location withheld from a client message (%s): %s", name, scrub_text(raw)
        )


def public_message(classification: Classification) -> PublicMessage:
    """The client-safe message for a classified exception (see the module docstring)."""
    exc = classification.exception
    if classification.message is not None:
        return PublicMessage(classification.message)
    if classification.mapped and not classification.expose_text:
        return PublicMessage(DEFAULT_MESSAGES[classification.code])
    raw = safe_str(exc)
    if classification.mapped:
        return PublicMessage(public_text(raw, exc) if raw else f"{type(exc).__name__} was raised.")
    incident = incident_id_for(exc)
    text = f"Internal error (incident {incident})."
    if debug_errors_enabled() and raw:
        text = f"{text} {type(exc).__name__}: {public_text(raw, exc)}"
    return PublicMessage(text, incident)
