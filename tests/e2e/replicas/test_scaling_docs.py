"""docs/scaling.md: the replica command, as written, serves on PostgreSQL and beats in Redis.

The block's values that name the reader's machines are swapped for the test's own: the
database URL (a throwaway schema), the Redis URL (the shared test Redis), the agent (the demo
agent), the worker id (unique, so no other test's replica shares its key), the address
(127.0.0.1, a free port). Every option and variable the block names is kept.
"""

from __future__ import annotations

import re
import shlex
import uuid
from pathlib import Path

import httpx
import pytest
from redis.asyncio import Redis

from tests._support.redis_server import SHARED_REDIS_URL
from tests._support.serve import llamon_serve, send_text
from tests._support.stores import postgres_schema

DOC = (Path(__file__).parents[3] / "docs" / "scaling.md").read_text(encoding="utf-8")
[BLOCK] = re.findall(r"```bash\n(.*?)```", DOC, flags=re.DOTALL)[:1]


def _exports(block: str) -> dict[str, str]:
    return dict(re.findall(r"^export (\w+)=(\S+)$", block, flags=re.MULTILINE))


def _serve_options(block: str) -> list[str]:
    """The ``llamon serve`` options of ``block``, with the reader's machines swapped out."""
    [command] = [line for line in block.replace("\\\n", " ").splitlines() if "llamon serve" in line]
    tokens = shlex.split(command)
    assert tokens[:2] == ["llamon", "serve"]
    swapped = {"--redis-url": SHARED_REDIS_URL, "--host": "127.0.0.1"}
    options: list[str] = []
    rest = iter(tokens[2:])
    for token in rest:
        if token == "mymodule:agent":
            continue
        if token in ("--card", "--port"):  # the demo agent's card; llamon_serve picks a port
            next(rest)
        elif token in swapped:
            options += [token, swapped[token]]
            next(rest)
        else:
            options.append(token)
    return options


def test_the_block_names_the_database_the_worker_id_postgres_and_redis() -> None:
    assert set(_exports(BLOCK)) == {"LLAMON_DATABASE_URL", "LLAMON_WORKER_ID"}
    assert _serve_options(BLOCK) == [
        "--store",
        "postgres",
        "--redis-url",
        SHARED_REDIS_URL,
        "--host",
        "127.0.0.1",
    ]


async def test_the_documented_replica_serves_stamps_its_tasks_and_beats_in_redis(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    worker = f"docs-replica-{uuid.uuid4().hex[:8]}"
    redis = Redis.from_url(SHARED_REDIS_URL, decode_responses=True)
    try:
        async with postgres_schema() as dsn:
            monkeypatch.setenv("LLAMON_DATABASE_URL", dsn)
            async with (
                llamon_serve(tmp_path, *_serve_options(BLOCK), worker_id=worker) as (_, url),
                httpx.AsyncClient(timeout=30) as http,
            ):
                first = await send_text(http, url, "hello")
                assert first["status"]["state"] == "completed"
                assert first["metadata"]["llamon.worker"] == worker
                assert await redis.sismember("llamon:workers", worker)
                assert await redis.exists(f"llamon:worker:{worker}") == 1
                second = await send_text(http, url, "hello again")
                assert second["status"]["state"] == "completed"
            assert not await redis.sismember("llamon:workers", worker)  # left on SIGTERM
    finally:
        await redis.aclose()
