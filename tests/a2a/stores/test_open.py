"""Opening each store kind, round trips, SQLite settings, DSNs, bad input, reconciliation.

SQLite runs on real files under ``tmp_path``; PostgreSQL on the real server, each test in
a schema of its own (the ``postgres_dsn`` fixture).
"""

from __future__ import annotations

import asyncio
import re
import socket
import sqlite3
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
from a2a.types import (
    Artifact,
    DataPart,
    Message,
    Part,
    PushNotificationConfig,
    Role,
    Task,
    TaskState,
    TaskStatus,
    TextPart,
)
from cryptography.fernet import Fernet

from llamon_agent.a2a.stores import (
    SQLITE_BUSY_TIMEOUT_MS,
    WORKER_METADATA_KEY,
    MemoryLimits,
    Stores,
    llamon_home,
    normalize_postgres_dsn,
    open_stores,
    reconcile_orphaned_tasks,
    worker_id,
)
from llamon_agent.a2a.stores.postgres import PostgresTaskStore
from llamon_agent.a2a.stores.sqlite import SQLitePushConfigStore, SQLiteTaskStore
from llamon_agent.core.errors import ErrorCode
from tests._support.a2a_server import in_another_process

WORKER = "worker-a"
OTHER_WORKER = "worker-b"
SECRET = "s3cr3t-pw"

Opener = Callable[..., Awaitable[Stores]]


@pytest.fixture(autouse=True)
def _isolated_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("LLAMON_HOME", str(tmp_path / "home"))
    monkeypatch.delenv("LLAMON_DATABASE_URL", raising=False)
    monkeypatch.setenv("LLAMON_WORKER_ID", WORKER)


@pytest.fixture
async def opener() -> AsyncIterator[Opener]:
    """``open_stores`` whose results are closed after the test."""
    opened: list[Stores] = []

    async def _open(*args: Any, **kwargs: Any) -> Stores:
        stores = await open_stores(*args, **kwargs)
        opened.append(stores)
        return stores

    yield _open
    for stores in opened:
        await stores.close()


def _options(kind: str, request: pytest.FixtureRequest, tmp_path: Path) -> dict[str, Any]:
    if kind == "postgres":
        return {"kind": "postgres", "dsn": request.getfixturevalue("postgres_dsn")}
    if kind == "sqlite":
        return {"kind": "sqlite", "home": tmp_path / "stores"}
    return {"kind": kind}


@pytest.fixture(params=["memory", "sqlite", "postgres"])
def any_options(request: pytest.FixtureRequest, tmp_path: Path) -> dict[str, Any]:
    return _options(request.param, request, tmp_path)


@pytest.fixture(params=["sqlite", "postgres"])
def persistent_options(request: pytest.FixtureRequest, tmp_path: Path) -> dict[str, Any]:
    return _options(request.param, request, tmp_path)


@pytest.fixture
async def persistent(persistent_options: dict[str, Any], opener: Opener) -> Stores:
    return await opener(**persistent_options)


def _message(text_: str, role: Role, task_id: str = "t", message_id: str = "m") -> Message:
    return Message(
        role=role,
        parts=[Part(root=TextPart(text=text_))],
        task_id=task_id,
        context_id="ctx",
        message_id=message_id,
    )


def _task(
    task_id: str,
    state: TaskState,
    metadata: dict[str, Any] | None = None,
    *,
    with_progress: bool = False,
) -> Task:
    """A task; ``with_progress`` adds an artifact, a history and a status message."""
    status = TaskStatus(state=state, timestamp="2026-11-01T00:00:00+00:00")
    task = Task(id=task_id, context_id="ctx", status=status, metadata=metadata)
    if with_progress:
        task.artifacts = [
            Artifact(artifact_id="a1", parts=[Part(root=TextPart(text="partial report"))])
        ]
        task.history = [_message("please summarise", Role.user, task_id, "m-user")]
        task.status.message = _message("reading sources", Role.agent, task_id, "m-progress")
    return task


def _stamped(worker: str) -> dict[str, Any]:
    return {WORKER_METADATA_KEY: worker}


def _scenario() -> dict[str, Task]:
    """Tasks of every kind reconciliation must tell apart, by id."""
    tasks = [
        _task("mine-working", TaskState.working, _stamped(WORKER), with_progress=True),
        _task("mine-completed", TaskState.completed, _stamped(WORKER)),
        _task("mine-input-required", TaskState.input_required, _stamped(WORKER)),
        _task("other-working", TaskState.working, _stamped(OTHER_WORKER)),
        _task("unstamped-submitted", TaskState.submitted, {"trace": "abc"}),
        _task("unstamped-working", TaskState.working),
    ]
    return {task.id: task for task in tasks}


async def _seed(stores: Stores, tasks: dict[str, Task]) -> None:
    for task in tasks.values():
        await stores.task_store.save(task)


async def _get(stores: Stores, task_id: str) -> Task:
    task = await stores.task_store.get(task_id)
    assert task is not None, task_id
    return task


def _error_parts(task: Task) -> tuple[str, dict[str, Any]]:
    """The TextPart text and DataPart data of a failed task's status message."""
    assert task.status.message is not None
    text_part, data_part = (part.root for part in task.status.message.parts)
    assert isinstance(text_part, TextPart)
    assert isinstance(data_part, DataPart)
    return text_part.text, data_part.data


# --- home, worker identity ---------------------------------------------------------------


def test_llamon_home_follows_env_and_is_created(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("LLAMON_HOME", str(tmp_path / "a" / "b"))
    assert llamon_home() == tmp_path / "a" / "b"
    assert (tmp_path / "a" / "b").is_dir()


def test_llamon_home_defaults_to_dot_llamon(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("LLAMON_HOME")
    monkeypatch.setenv("HOME", str(tmp_path))
    assert llamon_home() == tmp_path / ".llamon"
    assert (tmp_path / ".llamon").is_dir()


def test_worker_id_is_env_else_an_opaque_id_of_the_host(monkeypatch: pytest.MonkeyPatch) -> None:
    assert worker_id() == WORKER
    monkeypatch.delenv("LLAMON_WORKER_ID")
    default = worker_id()
    assert re.fullmatch(r"w-[0-9a-f]{16}", default)
    assert socket.gethostname() not in default
    assert worker_id() == default  # stable: a restarted process finds its tasks


# --- opening each kind -------------------------------------------------------------------


async def test_default_is_sqlite_file_under_llamon_home(tmp_path: Path, opener: Opener) -> None:
    stores = await opener()
    path = tmp_path / "home" / "tasks.db"
    assert stores.kind == "sqlite"
    assert isinstance(stores.task_store, SQLiteTaskStore)
    assert isinstance(stores.push_config_store, SQLitePushConfigStore)
    assert stores.database is not None
    assert stores.engine is None
    assert path.is_file()
    assert stores.description == f"sqlite:{path}"


async def test_home_argument_wins_over_env(tmp_path: Path, opener: Opener) -> None:
    stores = await opener("sqlite", home=tmp_path / "elsewhere")
    assert stores.description == f"sqlite:{tmp_path / 'elsewhere' / 'tasks.db'}"
    assert not (tmp_path / "home" / "tasks.db").exists()


async def test_sqlite_uses_wal_and_a_busy_timeout(tmp_path: Path, opener: Opener) -> None:
    stores = await opener("sqlite", home=tmp_path)
    assert stores.database is not None
    journal, timeout = await stores.database.read(
        lambda connection: (
            connection.execute("PRAGMA journal_mode").fetchone()[0],
            connection.execute("PRAGMA busy_timeout").fetchone()[0],
        )
    )
    assert (journal, timeout) == ("wal", SQLITE_BUSY_TIMEOUT_MS)
    with sqlite3.connect(tmp_path / "tasks.db") as plain:  # WAL is a property of the file
        assert plain.execute("PRAGMA journal_mode").fetchone() == ("wal",)


async def test_memory_has_no_engine(opener: Opener) -> None:
    stores = await opener("memory", push_encryption_key=Fernet.generate_key())
    assert (stores.kind, stores.engine, stores.description) == ("memory", None, "memory")
    assert stores.database is None
    await stores.close()  # a no-op, and safe


async def test_round_trip(any_options: dict[str, Any], opener: Opener) -> None:
    stores = await opener(**any_options)
    task = _task("round-trip", TaskState.working, _stamped(WORKER), with_progress=True)
    await stores.task_store.save(task)
    assert await stores.task_store.get("round-trip") == task
    await stores.task_store.delete("round-trip")
    assert await stores.task_store.get("round-trip") is None

    config = PushNotificationConfig(id="cfg", url="https://hooks.example/a2a", token="tok")
    await stores.push_config_store.set_info("round-trip", config)
    assert await stores.push_config_store.get_info("round-trip") == [config]
    await stores.push_config_store.delete_info("round-trip", "cfg")
    assert await stores.push_config_store.get_info("round-trip") == []


async def test_push_configs_are_encrypted_at_rest(tmp_path: Path, opener: Opener) -> None:
    stores = await opener("sqlite", home=tmp_path, push_encryption_key=Fernet.generate_key())
    config = PushNotificationConfig(id="cfg", url="https://hooks.example/a2a", token="tok")
    await stores.push_config_store.set_info("t1", config)
    with sqlite3.connect(tmp_path / "tasks.db") as plain:
        (raw,) = plain.execute("SELECT config FROM llamon_push_configs").fetchone()
    assert b"hooks.example" not in raw
    assert await stores.push_config_store.get_info("t1") == [config]


async def test_dsn_alone_selects_postgres(postgres_dsn: str, opener: Opener) -> None:
    stores = await opener(dsn=postgres_dsn)
    assert stores.kind == "postgres"
    assert isinstance(stores.task_store, PostgresTaskStore)


async def test_database_url_env_selects_postgres_and_masks_the_password(
    postgres_dsn: str, monkeypatch: pytest.MonkeyPatch, opener: Opener
) -> None:
    password = postgres_dsn.split(":")[2].split("@")[0]
    monkeypatch.setenv("LLAMON_DATABASE_URL", postgres_dsn)
    stores = await opener()
    assert stores.kind == "postgres"
    assert stores.description.startswith("postgres:postgresql+asyncpg://llamon_test_")
    assert ":***@127.0.0.1:5432/test" in stores.description
    assert password not in stores.description


async def test_replicas_can_create_tables_at_the_same_time(postgres_dsn: str) -> None:
    opened = await asyncio.gather(*(open_stores(dsn=postgres_dsn) for _ in range(4)))
    for stores in opened:
        await stores.close()
    assert [stores.kind for stores in opened] == ["postgres"] * 4


async def test_a_second_process_reopens_the_sqlite_file(tmp_path: Path, opener: Opener) -> None:
    first = await open_stores("sqlite", home=tmp_path)
    await first.task_store.save(_task("from-parent", TaskState.working, _stamped(WORKER)))
    await first.close()

    out = await in_another_process(
        tmp_path,
        "task = await stores.task_store.get('from-parent')",
        "print(task.status.state.value)",
        "status = TaskStatus(state=TaskState.completed)",
        "await stores.task_store.save(Task(id='from-child', context_id='c', status=status))",
    )
    assert out.strip() == "working"

    reopened = await opener("sqlite", home=tmp_path)
    assert (await _get(reopened, "from-child")).status.state is TaskState.completed
    assert (await _get(reopened, "from-parent")).status.state is TaskState.working


# --- DSNs and bad input ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("dsn", "expected"),
    [
        ("postgresql://u:p@db:5432/app", "postgresql+asyncpg://u:p@db:5432/app"),
        ("postgres://u:p@db/app", "postgresql+asyncpg://u:p@db/app"),
        ("POSTGRES://u@db/app", "postgresql+asyncpg://u@db/app"),
        ("postgresql+asyncpg://u:p@db/app", "postgresql+asyncpg://u:p@db/app"),
        ("  postgresql://u:p%40ss@db/app  ", "postgresql+asyncpg://u:p%40ss@db/app"),
        ("postgresql://u:p@db/app?sslmode=require", "postgresql+asyncpg://u:p@db/app?ssl=require"),
    ],
)
def test_postgres_dsns_become_asyncpg_urls(dsn: str, expected: str) -> None:
    assert normalize_postgres_dsn(dsn) == expected


@pytest.mark.parametrize(
    ("kwargs", "env_dsn", "expected"),
    [
        ({"kind": "redis"}, None, "unknown store kind 'redis'"),
        ({"kind": "postgres"}, None, "the postgres store needs a DSN"),
        ({"dsn": f"mysql://app:{SECRET}@db/app"}, None, "unsupported DSN scheme 'mysql'"),
        (
            {"kind": "postgres", "dsn": f"postgresql+psycopg://app:{SECRET}@db/app"},
            None,
            "unsupported DSN scheme 'postgresql+psycopg'",
        ),
        ({}, f"sqlite:///tmp/x.db?password={SECRET}", "unsupported DSN scheme 'sqlite'"),
        ({"dsn": f"host=db password={SECRET}"}, None, "must be a URL like"),
        (
            {"kind": "sqlite", "dsn": f"postgresql://app:{SECRET}@db/app"},
            None,
            "only used by the postgres store",
        ),
        (
            {"kind": "sqlite", "memory_limits": MemoryLimits(max_finished=5)},
            None,
            "memory_limits= is only used by the memory store, not by 'sqlite'",
        ),
        (
            {"kind": "sqlite", "push_encryption_key": b"not-a-fernet-key"},
            None,
            "push_encryption_key must be a Fernet key",
        ),
    ],
)
async def test_bad_input_is_a_value_error_without_the_password(
    kwargs: dict[str, Any],
    env_dsn: str | None,
    expected: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    if env_dsn is not None:
        monkeypatch.setenv("LLAMON_DATABASE_URL", env_dsn)
    with pytest.raises(ValueError, match=re.escape(expected)) as caught:
        await open_stores(**kwargs)
    assert SECRET not in str(caught.value)


# --- reconciliation ----------------------------------------------------------------------


@pytest.mark.reason("worker_lost")
async def test_reconcile_ends_this_workers_unfinished_tasks(persistent: Stores) -> None:
    seeded = _scenario()
    await _seed(persistent, seeded)

    ended = await reconcile_orphaned_tasks(persistent)

    assert ended == ["mine-working", "unstamped-submitted", "unstamped-working"]
    failed = await _get(persistent, "mine-working")
    before = seeded["mine-working"]
    assert failed.status.state is TaskState.failed
    assert failed.status.timestamp
    assert failed.artifacts == before.artifacts
    assert failed.history == [*(before.history or []), before.status.message]
    assert failed.metadata == before.metadata
    message = failed.status.message
    assert message is not None
    assert (message.role, message.task_id, message.context_id) == (
        Role.agent,
        "mine-working",
        "ctx",
    )
    display, data = _error_parts(failed)
    assert display == "The worker running this task stopped before it finished."
    assert data["errorCode"] == "UPSTREAM_UNAVAILABLE"
    assert data["errorReason"] == "worker_lost"
    assert data["retriable"] is True

    for task_id in ("unstamped-submitted", "unstamped-working"):
        assert (await _get(persistent, task_id)).status.state is TaskState.failed
    for task_id in ("mine-completed", "mine-input-required", "other-working"):
        assert await _get(persistent, task_id) == seeded[task_id]
    assert await reconcile_orphaned_tasks(persistent) == []


async def test_reconcile_code_reason_and_message_are_configurable(persistent: Stores) -> None:
    await _seed(persistent, {"t": _task("t", TaskState.working, _stamped(WORKER))})

    ended = await reconcile_orphaned_tasks(
        persistent,
        code=ErrorCode.INTERNAL_ERROR,
        reason="deploy_restart",
        retriable=False,
        message="Redeployed while running.",
    )

    assert ended == ["t"]
    display, data = _error_parts(await _get(persistent, "t"))
    assert display == "Redeployed while running."
    assert (data["errorCode"], data["errorReason"], data["retriable"]) == (
        "INTERNAL_ERROR",
        "deploy_restart",
        False,
    )


async def test_reconcile_for_a_named_worker(persistent: Stores) -> None:
    await _seed(persistent, _scenario())
    ended = await reconcile_orphaned_tasks(persistent, worker=OTHER_WORKER)
    assert ended == ["other-working", "unstamped-submitted", "unstamped-working"]
    assert (await _get(persistent, "mine-working")).status.state is TaskState.working


async def test_reconcile_stamped_only_leaves_unstamped_tasks(persistent: Stores) -> None:
    seeded = _scenario()
    await _seed(persistent, seeded)
    ended = await reconcile_orphaned_tasks(persistent, worker=OTHER_WORKER, stamped_only=True)
    assert ended == ["other-working"]
    for task_id in ("unstamped-submitted", "unstamped-working", "mine-working"):
        assert await _get(persistent, task_id) == seeded[task_id]


async def test_reconcile_loads_only_the_orphans(
    persistent: Stores, monkeypatch: pytest.MonkeyPatch
) -> None:
    finished = {f"done-{i:03}": _task(f"done-{i:03}", TaskState.completed) for i in range(40)}
    await _seed(persistent, {**finished, "t": _task("t", TaskState.working, _stamped(WORKER))})
    loaded: list[str] = []
    real_get = persistent.task_store.get

    async def counting_get(task_id: str, context: Any = None) -> Task | None:
        loaded.append(task_id)
        return await real_get(task_id, context)

    monkeypatch.setattr(persistent.task_store, "get", counting_get)
    assert await reconcile_orphaned_tasks(persistent) == ["t"]
    assert loaded == ["t"]


async def test_reconcile_leaves_memory_stores_alone(opener: Opener) -> None:
    stores = await opener("memory")
    task = _task("t", TaskState.working, _stamped(WORKER))
    await stores.task_store.save(task)
    assert await reconcile_orphaned_tasks(stores) == []
    assert await _get(stores, "t") == task
