"""Message policy: which text of an exception may leave the process.

* A mapped exception (any row of the table) -> its text, scrubbed. Empty text gives a
  plain sentence naming the type. Rows marked "text withheld" (provider SDK errors, whose
  text echoes API keys and prompts) give the code's plain sentence instead.
* An unmapped exception (the INTERNAL_ERROR fallback) -> a generic message with an
  incident id. The same id is logged at ERROR on ``llamon_agent.errors`` with the
  traceback, so an operator can find the cause. The exception's own text reaches
  clients only while ``LLAMON_DEBUG_ERRORS`` is on (and is scrubbed even then).

This departs on purpose from seed 000 ("str(exc) goes into errorMessage"): raw
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
from llamon_agent.core.scrub import scrub_text
from llamon_agent.core.settings import debug_errors_enabled

__all__ = ["PublicMessage", "incident_id_for", "public_message", "safe_str"]

logger = logging.getLogger("llamon_agent.errors")

_INCIDENT_ATTR = "__llamon_incident_id__"


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


def public_message(classification: Classification) -> PublicMessage:
    """The client-safe message for a classified exception (see the module docstring)."""
    exc = classification.exception
    raw = safe_str(exc)
    if classification.mapped and not classification.expose_text:
        return PublicMessage(DEFAULT_MESSAGES[classification.code])
    if classification.mapped:
        return PublicMessage(scrub_text(raw) if raw else f"{type(exc).__name__} was raised.")
    incident = incident_id_for(exc)
    text = f"Internal error (incident {incident})."
    if debug_errors_enabled() and raw:
        text = f"{text} {type(exc).__name__}: {scrub_text(raw)}"
    return PublicMessage(text, incident)
