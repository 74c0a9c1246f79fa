"""Probe routes for orchestrators and load balancers; open even when auth is on.

* ``GET /healthz`` (liveness): ``200 {"status": "ok"}`` while the process answers HTTP.
* ``GET /readyz`` (readiness): ``200 {"status": "ready"}`` when the task store answers a
  lookup within ``READY_TIMEOUT`` seconds; otherwise ``503 {"status": "unavailable",
  "reason": "task_store_unreachable"}``. The body never names the store, its address or
  the error; the error goes to the ``llamon_agent.a2a`` log (scrubbed) at WARNING.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Final

from a2a.server.tasks import TaskStore
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

__all__ = ["HEALTH_PATH", "READY_PATH", "READY_TIMEOUT", "health_routes"]

logger = logging.getLogger("llamon_agent.a2a")

HEALTH_PATH: Final = "/healthz"
READY_PATH: Final = "/readyz"
READY_TIMEOUT: Final = 2.0
"""Seconds the task store has to answer a readiness lookup."""

_PROBE_TASK_ID: Final = "llamon-readiness-probe"
_NO_STORE: Final = {"Cache-Control": "no-store"}


def health_routes(task_store: TaskStore) -> list[Route]:
    """``/healthz`` and ``/readyz`` for an app whose tasks live in ``task_store``."""

    async def healthz(_: Request) -> JSONResponse:
        return JSONResponse({"status": "ok"}, headers=_NO_STORE)

    async def readyz(_: Request) -> JSONResponse:
        try:
            await asyncio.wait_for(task_store.get(_PROBE_TASK_ID), READY_TIMEOUT)
        except Exception as exc:
            logger.warning("readiness: the task store did not answer (%s)", type(exc).__name__)
            body = {"status": "unavailable", "reason": "task_store_unreachable"}
            return JSONResponse(body, status_code=503, headers=_NO_STORE)
        return JSONResponse({"status": "ready"}, headers=_NO_STORE)

    return [
        Route(HEALTH_PATH, healthz, methods=["GET"]),
        Route(READY_PATH, readyz, methods=["GET"]),
    ]
