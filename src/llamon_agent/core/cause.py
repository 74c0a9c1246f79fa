"""Where a failure happened across agents: the ``data.cause`` chain.

When agent A calls B, B calls C, and C fails, the exception B raises from C's answer
carries C's hop, and the one A raises from B's answer carries B's hop followed by the
hops B reported. Any exception with a ``cause_hops`` property (``CarriesCause``: the
client's ``RemoteAgentError`` family, or your own) is read here, once, by
``error_data_for_exception`` (which puts the chain in ``data.cause``) and by
``FailureRecord.from_exception`` (which keeps it under ``evidence["cause"]``).

What a caller sees: a list of ``CauseHop`` (``agent``, ``taskId``, ``errorCode``,
``errorReason``, ``errorSource``), the nearest called agent first, at most
``MAX_CAUSE_DEPTH`` hops (the last kept one says ``truncated: true`` when more were cut),
every string scrubbed like an ``errorMessage``. A hop value that breaks a rule is left
out, a hop with nothing valid is dropped; reading a chain never raises.
"""

from __future__ import annotations

import abc
import logging
import sys
from collections.abc import Iterator, Mapping, Sequence
from typing import Final, Protocol, TypeGuard, runtime_checkable

from llamon_agent.core.error_data import MAX_CAUSE_DEPTH, CauseHop, normalize_cause

__all__ = [
    "MAX_CAUSE_DEPTH",
    "CarriesCause",
    "CauseHop",
    "cause_chain",
    "cause_evidence",
    "cause_hops_of",
    "normalize_cause",
]

logger = logging.getLogger("llamon_agent.errors")

_MAX_CHAIN: Final = 16
"""``__cause__`` links followed when looking for an exception that carries a cause."""


@runtime_checkable
class CarriesCause(Protocol):
    """An exception that came from a called agent and knows that agent's failure path.

    ``cause_hops`` lists hop mappings with the wire keys ``agent``, ``taskId``,
    ``errorCode``, ``errorReason``, ``errorSource`` (any of them may be absent): the
    called agent's own hop first, then the hops it reported in its own ``data.cause``.
    """

    @property
    def cause_hops(self) -> Sequence[Mapping[str, object]]:
        """The called agent's hop, then the hops of its own ``data.cause``."""
        ...


def _carries_cause(candidate: BaseException) -> TypeGuard[CarriesCause]:
    """``isinstance(candidate, CarriesCause)``. On Python 3.11 that check lists the
    protocol's members anew at every call; its two steps are taken here directly: the
    attribute is there (the property runs, as in the check), else the class derives from
    the protocol or was registered (``ABCMeta``'s cached answer)."""
    if sys.version_info >= (3, 12):
        return isinstance(candidate, CarriesCause)
    return hasattr(candidate, "cause_hops") or abc.ABCMeta.__instancecheck__(
        CarriesCause, candidate
    )


def _candidates(exc: BaseException, also: BaseException | None) -> Iterator[BaseException]:
    """``exc`` and its explicit ``__cause__`` chain, then ``also``'s (no repeats)."""
    seen: set[int] = set()
    for start in (exc, also):
        current = start
        for _ in range(_MAX_CHAIN):
            if current is None or id(current) in seen:
                break
            seen.add(id(current))
            yield current
            current = current.__cause__


def cause_hops_of(
    exc: BaseException, *, also: BaseException | None = None
) -> Sequence[object] | None:
    """The raw ``cause_hops`` of the first exception that carries them, or None.

    Looks at ``exc``, then each exception it was raised ``from`` (``__cause__``, never the
    implicit ``__context__``), then ``also`` and its chain (the exception a classification
    matched inside an exception group). A ``cause_hops`` that raises or is not a list is
    skipped (logged); the hops are returned as given, to be checked by
    ``normalize_cause``.
    """
    for candidate in _candidates(exc, also):
        try:  # on Python 3.11 the isinstance check itself runs the property
            if not _carries_cause(candidate):
                continue
            hops = candidate.cause_hops
        except Exception:
            logger.warning(
                "cause: reading cause_hops of %s failed", type(candidate).__name__, exc_info=True
            )
            continue
        if isinstance(hops, Sequence) and not isinstance(hops, str | bytes | bytearray):
            return hops
        logger.warning("cause: cause_hops of %s is not a list", type(candidate).__name__)
    return None


def cause_chain(exc: BaseException, *, also: BaseException | None = None) -> list[CauseHop] | None:
    """The checked ``data.cause`` for ``exc`` (see ``cause_hops_of``); None when it has none."""
    return normalize_cause(cause_hops_of(exc, also=also))


def cause_evidence(hops: Sequence[CauseHop] | None) -> list[dict[str, object]] | None:
    """The chain as a failure record keeps it: the same wire dicts as ``data.cause``."""
    if not hops:
        return None
    return [hop.to_wire() for hop in hops]
