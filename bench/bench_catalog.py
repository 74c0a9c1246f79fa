"""Agent Catalog search over 10,000 versions: ``CatalogStore.search`` on SQLite (and on
PostgreSQL when it answers).

    python bench/bench_catalog.py [--agents 2000] [--repeat 300] [--quick] [--no-postgres]
                                  [--no-http]

What is measured (``bench/README.md``, "Agent Catalog search", says how to read it): a fresh
catalog is filled through ``add_version`` with ``--agents`` agents of 5 versions each
(1.0.0, 1.1.0, 1.2.0, 2.0.0, 2.1.0-rc.1; 1.0.0 deprecated for a third of the agents, 5 %
of the latest versions unhealthy), each version with 2-4 skills out of 40, each skill 1-2
tags out of 30, input and output modes out of 6 (some a skill's own, most the card's
defaults). Then each query kind below runs ``--repeat`` times, the kinds taking turns call
by call, each call timed around ``await store.search(query)`` (the reader thread hop on
SQLite, a pooled connection on PostgreSQL: what the service pays). Printed per kind: rows
returned, p50 and p99 in ms. Target: p99 <= 20 ms for a skill or tag query on SQLite.

The same queries are then asked over HTTP (``GET /v0/agents?...`` with an admin key) of
``llamon catalog serve --no-probe`` on the filled SQLite file, in its own process, by a lean
keep-alive client (one request in flight, raw asyncio; no client library's own cost): what a
caller of the catalog waits, the service's routing, auth, JSON and the store included.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import random
import shutil
import socket
import sqlite3
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

from llamon_agent.catalog.access import hash_key, new_key
from llamon_agent.catalog.records import AgentVersion, CatalogKey, CatalogQuery, Health, Status
from llamon_agent.catalog.store import CatalogStore, open_catalog_store

TARGET_P99_MS = 20.0
SKILLS = [f"skill-{i:02d}" for i in range(40)]
TAGS = [f"tag-{i:02d}" for i in range(30)]
MODES = ["text/plain", "application/json", "image/png", "application/pdf", "text/csv", "audio/wav"]
WORDS = ["orders", "billing", "refund", "invoice", "shipping", "search", "translate", "report"]
NUMBERS = ["1.0.0", "1.1.0", "1.2.0", "2.0.0", "2.1.0-rc.1"]
ADMIN_DSN = os.environ.get("LLAMON_TEST_POSTGRES_DSN", "postgresql://postgres@127.0.0.1:5432/test")


def versions(agents: int, seed: int = 16) -> list[AgentVersion]:
    """``agents`` × 5 versions with skills, tags and modes spread (a fixed seed)."""
    rng = random.Random(seed)  # noqa: S311 - test data, not secrets
    made = []
    for index in range(agents):
        name = f"{rng.choice(WORDS)}-{index:05d}"
        inputs, outputs = rng.sample(MODES, 2), rng.sample(MODES, 2)
        skills = rng.sample(SKILLS, rng.randint(2, 3))
        for step, number in enumerate(NUMBERS):
            if step in (1, 3):  # a minor and a major: a skill more
                skills = [*skills, rng.choice([s for s in SKILLS if s not in skills])]
            if step == 3:
                skills = skills[1:]
            card: dict[str, Any] = {
                "name": name.title(),
                "description": f"{rng.choice(WORDS)} agent number {index}",
                "version": number,
                "defaultInputModes": inputs,
                "defaultOutputModes": outputs,
                "skills": [skill(rng, s) for s in skills],
            }
            status: Status = "deprecated" if step == 0 and index % 3 == 0 else "active"
            made.append(AgentVersion(name, number, status, card, "bench", float(index)))
    return made


def skill(rng: random.Random, skill_id: str) -> dict[str, Any]:
    described: dict[str, Any] = {
        "id": skill_id,
        "name": skill_id.replace("-", " "),
        "description": f"{rng.choice(WORDS)} with {skill_id}",
        "tags": rng.sample(TAGS, rng.randint(1, 2)),
    }
    if rng.random() < 0.2:
        described["inputModes"] = [rng.choice(MODES)]
    return described


def queries() -> dict[str, CatalogQuery]:
    return {
        "default first page (50)": CatalogQuery(),
        "skill=": CatalogQuery(skill="skill-07"),
        "tag=": CatalogQuery(tag="tag-12"),
        "skill= + input_mode=": CatalogQuery(skill="skill-21", input_mode="application/pdf"),
        "search= (text)": CatalogQuery(search="refund with"),
        "skill=, all versions": CatalogQuery(skill="skill-07", latest_only=False),
        "tag=, active+deprecated": CatalogQuery(tag="tag-12", statuses=("active", "deprecated")),
        "skill=, visible acme*": CatalogQuery(skill="skill-07", visible=("orders-*", "refund-*")),
    }


def http_queries() -> dict[str, dict[str, str]]:
    """``queries()`` as ``GET /v0/agents`` parameters (those the API has)."""
    return {
        "default first page (50)": {},
        "skill=": {"skill": "skill-07"},
        "tag=": {"tag": "tag-12"},
        "skill= + input_mode=": {"skill": "skill-21", "input_mode": "application/pdf"},
        "search= (text)": {"search": "refund with"},
        "skill=, all versions": {"skill": "skill-07", "versions": "all"},
    }


class KeepAlive:
    """One keep-alive HTTP/1.1 connection: ``get(target)`` -> (status, body)."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, key: str):
        self.reader, self.writer, self.key = reader, writer, key

    async def get(self, target: str) -> tuple[int, bytes]:
        auth = f"Authorization: Bearer {self.key}"
        self.writer.write(f"GET {target} HTTP/1.1\r\nHost: bench\r\n{auth}\r\n\r\n".encode())
        head = await self.reader.readuntil(b"\r\n\r\n")
        status = int(head.split(b" ", 2)[1])
        length = 0
        for line in head.split(b"\r\n"):
            if line.lower().startswith(b"content-length:"):
                length = int(line.split(b":", 1)[1])
        return status, await self.reader.readexactly(length)


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


async def measure_http(home: str, key: str, repeat: int) -> list[tuple[str, int, float, float]]:
    """Time each query kind over HTTP against ``llamon catalog serve`` on ``home``."""
    port = free_port()
    llamon = shutil.which("llamon") or str(Path(sys.executable).with_name("llamon"))
    server = await asyncio.create_subprocess_exec(
        llamon,
        *("catalog", "serve", "--home", home, "--port", str(port), "--no-probe"),
        *("--log-level", "warning"),
        stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.DEVNULL,
    )
    try:
        for _ in range(200):
            try:
                reader, writer = await asyncio.open_connection("127.0.0.1", port)
                break
            except OSError:
                await asyncio.sleep(0.05)
        else:
            raise RuntimeError("llamon catalog serve did not start")
        client = KeepAlive(reader, writer, key)
        kinds = {kind: "/v0/agents?" + urlencode(params) for kind, params in http_queries().items()}
        timings: dict[str, list[float]] = {kind: [] for kind in kinds}
        counts: dict[str, int] = {}
        for kind, target in kinds.items():
            status, body = await client.get(target)
            if status != 200:
                raise RuntimeError(f"{kind}: HTTP {status}: {body[:200]!r}")
            counts[kind] = len(json.loads(body)["agents"])
        for _ in range(repeat):
            for kind, target in kinds.items():
                started = time.perf_counter()
                await client.get(target)
                timings[kind].append((time.perf_counter() - started) * 1000)
        writer.close()
        return [(kind, counts[kind], *percentiles(timings[kind])) for kind in kinds]
    finally:
        server.terminate()
        await asyncio.wait_for(server.wait(), timeout=10)


async def fill(store: CatalogStore, made: list[AgentVersion], chunk: int) -> float:
    """Publish ``made`` (``chunk`` at a time, concurrently) and mark 5 % of the agents'
    latest versions unhealthy; returns the seconds it took."""
    started = time.perf_counter()
    for first in range(0, len(made), chunk):
        await asyncio.gather(*(store.add_version(v) for v in made[first : first + chunk]))
    for index, version in enumerate(made):
        if version.version == "1.2.0" and index % 20 == 2:
            await store.record_health(version.name, version.version, Health(state="unhealthy"))
    return time.perf_counter() - started


Answers = dict[str, list[tuple[str, str]]]


async def measure(
    store: CatalogStore, repeat: int, answers: Answers
) -> list[tuple[str, int, float, float]]:
    """Time each query kind ``repeat`` times (kinds taking turns); ``answers`` gets each
    kind's rows, to compare the engines."""
    kinds = queries()
    timings: dict[str, list[float]] = {kind: [] for kind in kinds}
    counts: dict[str, int] = {}
    for kind, query in kinds.items():  # warm-up (statement caches, pages)
        rows = (await store.search(query)).rows
        answers[kind] = [(row.name, row.version) for row in rows]
        counts[kind] = len(rows)
    for _ in range(repeat):
        for kind, query in kinds.items():
            started = time.perf_counter()
            await store.search(query)
            timings[kind].append((time.perf_counter() - started) * 1000)
    return [(kind, counts[kind], *percentiles(timings[kind])) for kind in kinds]


def percentiles(values: list[float]) -> tuple[float, float]:
    cuts = statistics.quantiles(values, n=100, method="inclusive")
    return statistics.median(values), cuts[98]


def report(engine: str, built: float, rows: list[tuple[str, int, float, float]]) -> bool:
    print(f"\n{engine}" + (f": built in {built:.1f} s" if built else ""))
    print("| query | rows | p50 | p99 |\n|---|---|---|---|")
    met = True
    for kind, count, p50, p99 in rows:
        print(f"| {kind} | {count} | {p50:.2f} ms | {p99:.2f} ms |")
        if engine != "PostgreSQL" and kind in ("skill=", "tag=") and p99 > TARGET_P99_MS:
            met = False
    return met


@asynccontextmanager
async def postgres_url() -> AsyncIterator[str | None]:
    """A DSN that sees only a fresh schema of its own, or ``None`` when PostgreSQL does not
    answer (the role and schema are dropped afterwards)."""
    from sqlalchemy.engine import make_url
    from sqlalchemy.ext.asyncio import create_async_engine

    url = make_url(ADMIN_DSN).set(drivername="postgresql+asyncpg")
    engine = create_async_engine(url, isolation_level="AUTOCOMMIT", connect_args={"timeout": 5})
    try:
        admin = await engine.connect()
    except (OSError, TimeoutError, Exception) as exc:
        print(f"\nPostgreSQL: skipped ({type(exc).__name__})")
        await engine.dispose()
        yield None
        return
    name = f"llamon_bench_{uuid.uuid4().hex[:12]}"
    try:
        await admin.exec_driver_sql(f"CREATE ROLE {name} LOGIN")
        await admin.exec_driver_sql(f"CREATE SCHEMA {name} AUTHORIZATION {name}")
        await admin.exec_driver_sql(f"ALTER ROLE {name} SET search_path = {name}")
        yield make_url(ADMIN_DSN).set(username=name).render_as_string(hide_password=False)
    finally:
        await admin.exec_driver_sql(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity"  # noqa: S608 - our name
            f" WHERE usename = '{name}'"
        )
        await admin.exec_driver_sql(f"DROP SCHEMA IF EXISTS {name} CASCADE")
        await admin.exec_driver_sql(f"DROP ROLE IF EXISTS {name}")
        await admin.close()
        await engine.dispose()


async def analyze(url: str) -> None:
    """``ANALYZE`` the catalog tables: what autovacuum does within a minute of a bulk load
    (on a freshly filled table the planner still assumes one row per filter)."""
    from sqlalchemy import text
    from sqlalchemy.ext.asyncio import create_async_engine

    from llamon_agent.a2a.stores.open import normalize_postgres_dsn

    engine = create_async_engine(normalize_postgres_dsn(url))
    try:
        async with engine.begin() as connection:
            for table in ("agents", "versions", "terms"):
                await connection.execute(text(f"ANALYZE llamon_catalog_{table}"))
    finally:
        await engine.dispose()


async def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--agents", type=int, default=2000)
    parser.add_argument("--repeat", type=int, default=300)
    parser.add_argument("--quick", action="store_true", help="400 agents, 30 calls per query")
    parser.add_argument("--no-postgres", action="store_true")
    parser.add_argument("--no-http", action="store_true", help="leave out the HTTP arm")
    args = parser.parse_args()
    if args.quick:
        args.agents, args.repeat = 400, 30
    made = versions(args.agents)
    print(
        f"{len(made)} versions of {args.agents} agents, {args.repeat} calls per query;"
        f" Python {platform.python_version()}, SQLite {sqlite3.sqlite_version},"
        f" load {os.getloadavg()[0]:.1f}"
    )
    sqlite_answers: Answers = {}
    pg_answers: Answers = {}
    with tempfile.TemporaryDirectory() as home:
        store = await open_catalog_store(home=Path(home))
        key = new_key()
        try:
            built = await fill(store, made, chunk=200)
            met = report("SQLite", built, await measure(store, args.repeat, sqlite_answers))
            await store.add_key(CatalogKey(hash_key(key), "admin", "bench"))
        finally:
            await store.close()
        if not args.no_http:
            rows = await measure_http(home, key, args.repeat)
            met = report("HTTP, llamon catalog serve on SQLite", 0.0, rows) and met
    if not args.no_postgres:
        async with postgres_url() as url:
            if url is not None:
                store = await open_catalog_store(url)
                try:
                    built = await fill(store, made, chunk=20)
                    await analyze(url)
                    report("PostgreSQL", built, await measure(store, args.repeat, pg_answers))
                finally:
                    await store.close()
    if pg_answers:
        same = pg_answers == sqlite_answers
        print(f"\nSQLite and PostgreSQL answers: {'the same' if same else 'DIFFERENT'}")
        if not same:
            return 1
    print(
        f"\ntarget: skill/tag p99 <= {TARGET_P99_MS:.0f} ms on SQLite: {'met' if met else 'MISSED'}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
