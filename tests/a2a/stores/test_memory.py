"""The bounded in-memory stores: eviction by count and age, push configs, and over HTTP.

Real stores and real a2a-sdk types; time is a fake clock the tests move by hand.
"""

from __future__ import annotations

import asyncio
import math

import pytest
from a2a.client.errors import A2AClientJSONRPCError
from a2a.server.tasks import TaskStore
from a2a.types import (
    Artifact,
    Part,
    PushNotificationAuthenticationInfo,
    PushNotificationConfig,
    Task,
    TaskQueryParams,
    TaskState,
    TaskStatus,
    TextPart,
)

from llamon_agent.a2a.agent import AgentContext
from llamon_agent.a2a.server import create_app
from llamon_agent.a2a.stores.memory import (
    FINISHED_STATES,
    BoundedMemoryPushConfigStore,
    BoundedMemoryTaskStore,
    MemoryLimits,
)
from tests._support.a2a_server import (
    a2a_client,
    make_card,
    running_server,
    send,
    texts,
    user_message,
)
from tests._support.parts import text_of

UNFINISHED = [
    TaskState.submitted,
    TaskState.working,
    TaskState.input_required,
    TaskState.auth_required,
    TaskState.unknown,
]


class FakeClock:
    """Seconds that pass only when a test says so."""

    def __init__(self, now: float = 1000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def task(task_id: str, state: TaskState = TaskState.completed) -> Task:
    return Task(id=task_id, context_id="ctx", status=TaskStatus(state=state))


def store(
    max_finished: int = 10_000,
    max_finished_age: float | None = None,
    *,
    clock: FakeClock | None = None,
    evicted: list[str] | None = None,
) -> BoundedMemoryTaskStore:
    return BoundedMemoryTaskStore(
        MemoryLimits(max_finished=max_finished, max_finished_age=max_finished_age),
        clock=clock or FakeClock(),
        on_evict=evicted.append if evicted is not None else None,
    )


async def held(tasks: TaskStore, *ids: str) -> list[str]:
    return [task_id for task_id in ids if await tasks.get(task_id) is not None]


# -- MemoryLimits ----------------------------------------------------------------------


def test_limits_defaults() -> None:
    limits = MemoryLimits()
    assert (limits.max_finished, limits.max_finished_age) == (10_000, 3600.0)
    assert BoundedMemoryTaskStore().limits == limits


def test_limits_are_frozen_and_keyword_only() -> None:
    limits = MemoryLimits(max_finished=5)
    with pytest.raises(AttributeError):
        limits.max_finished = 6  # type: ignore[misc]
    with pytest.raises(TypeError):
        MemoryLimits(5)  # type: ignore[call-arg]


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"max_finished": -1}, "max_finished must be an int >= 0, got -1"),
        ({"max_finished": True}, "max_finished must be an int >= 0, got True"),
        ({"max_finished": 2.0}, "max_finished must be an int >= 0, got 2.0"),
        ({"max_finished": "10"}, "max_finished must be an int >= 0, got '10'"),
        ({"max_finished_age": 0}, "max_finished_age must be a finite number of seconds > 0"),
        ({"max_finished_age": -1.5}, "max_finished_age must be a finite number of seconds > 0"),
        ({"max_finished_age": math.inf}, "or None, got inf"),
        ({"max_finished_age": math.nan}, "or None, got nan"),
        ({"max_finished_age": False}, "or None, got False"),
        ({"max_finished_age": "60"}, "or None, got '60'"),
    ],
)
def test_limits_reject_bad_values_naming_field_and_value(
    kwargs: dict[str, object], message: str
) -> None:
    with pytest.raises(ValueError, match="max_finished") as caught:
        MemoryLimits(**kwargs)  # type: ignore[arg-type]
    assert message in str(caught.value)


def test_limits_accept_edge_values() -> None:
    assert MemoryLimits(max_finished=0, max_finished_age=None).max_finished == 0
    assert MemoryLimits(max_finished_age=1).max_finished_age == 1
    assert MemoryLimits(max_finished_age=0.001).max_finished_age == 0.001


# -- task store: basics ----------------------------------------------------------------


async def test_get_of_an_unfinished_task_is_a_copy_no_reader_can_change() -> None:
    tasks = store()
    saved = task("a", TaskState.working)
    await tasks.save(saved)
    got = await tasks.get("a")
    assert got == saved
    assert got is not saved  # a second TaskManager (resubscribe) mutates its own copy
    assert got is not None
    got.artifacts = [Artifact(artifact_id="r", parts=[Part(root=TextPart(text="x"))])]
    assert await tasks.get("a") == saved
    assert await tasks.get("nope") is None


async def test_a_finished_task_is_kept_as_a_snapshot() -> None:
    tasks = store()
    saved = task("a", TaskState.completed)
    saved.artifacts = [Artifact(artifact_id="r", parts=[Part(root=TextPart(text="report"))])]
    await tasks.save(saved)
    changed = saved.artifacts[0].parts[0].root
    assert isinstance(changed, TextPart)
    changed.text = "changed after the save"

    first, second = await tasks.get("a"), await tasks.get("a")
    assert first is not None
    assert first is not saved
    assert first is not second  # each get parses its own copy
    assert first == second
    assert first.artifacts is not None
    assert text_of(first.artifacts[0].parts[0]) == "report"


async def test_an_empty_store_is_truthy() -> None:
    # create_app writes ``task_store or InMemoryTaskStore()``: an empty store must survive it.
    assert BoundedMemoryTaskStore()
    assert BoundedMemoryPushConfigStore()
    assert len(BoundedMemoryTaskStore()) == 0


async def test_counts() -> None:
    tasks = store()
    await tasks.save(task("w", TaskState.working))
    await tasks.save(task("c1"))
    await tasks.save(task("c2", TaskState.failed))
    assert (len(tasks), tasks.finished_count, tasks.unfinished_count) == (3, 2, 1)


def test_finished_states_are_a2a_terminal_states() -> None:
    assert {state.value for state in FINISHED_STATES} == {
        "completed",
        "canceled",
        "failed",
        "rejected",
    }


# -- count eviction --------------------------------------------------------------------


async def test_count_eviction_evicts_oldest_finished_first() -> None:
    evicted: list[str] = []
    tasks = store(max_finished=2, evicted=evicted)
    await tasks.save(task("t1", TaskState.working))
    await tasks.save(task("t2", TaskState.working))
    await tasks.save(task("t3", TaskState.working))
    # finish in the order t2, t3, t1: t2 is the oldest finished, though t1 was saved first
    await tasks.save(task("t2"))
    await tasks.save(task("t3", TaskState.canceled))
    await tasks.save(task("t1", TaskState.rejected))
    assert evicted == ["t2"]
    assert await held(tasks, "t1", "t2", "t3") == ["t1", "t3"]
    await tasks.save(task("t4", TaskState.failed))
    assert evicted == ["t2", "t3"]
    assert await held(tasks, "t1", "t3", "t4") == ["t1", "t4"]


async def test_max_finished_zero_forgets_finished_tasks_at_once() -> None:
    evicted: list[str] = []
    tasks = store(max_finished=0, evicted=evicted)
    await tasks.save(task("a", TaskState.working))
    assert await tasks.get("a") is not None
    await tasks.save(task("a"))
    assert await tasks.get("a") is None
    assert evicted == ["a"]
    assert (len(tasks), tasks.finished_count) == (0, 0)


async def test_unfinished_tasks_are_never_evicted_even_far_over_limit_and_old() -> None:
    clock = FakeClock()
    evicted: list[str] = []
    tasks = store(max_finished=1, max_finished_age=10.0, clock=clock, evicted=evicted)
    ids = [f"u{i}" for i in range(50)]
    for i, task_id in enumerate(ids):
        await tasks.save(task(task_id, UNFINISHED[i % len(UNFINISHED)]))
    clock.now += 1_000_000
    for i in range(5):
        await tasks.save(task(f"done{i}"))
        clock.now += 1_000_000
    assert await held(tasks, *ids) == ids
    assert evicted == [f"done{i}" for i in range(5)]
    assert tasks.unfinished_count == 50


# -- age eviction ----------------------------------------------------------------------


async def test_age_eviction_on_save() -> None:
    clock = FakeClock()
    evicted: list[str] = []
    tasks = store(max_finished_age=60.0, clock=clock, evicted=evicted)
    await tasks.save(task("old"))
    clock.now += 30
    await tasks.save(task("young"))
    clock.now += 30.5  # "old" is 60.5 s finished, "young" 30.5 s
    await tasks.save(task("other", TaskState.working))
    assert evicted == ["old"]
    assert tasks.finished_count == 1
    assert len(tasks) == 2


async def test_age_eviction_on_get_keeps_a_task_exactly_max_age() -> None:
    clock = FakeClock()
    evicted: list[str] = []
    tasks = store(max_finished_age=60.0, clock=clock, evicted=evicted)
    await tasks.save(task("a"))
    clock.now += 60
    assert await tasks.get("a") is not None
    clock.now += 0.001
    assert await tasks.get("a") is None
    assert evicted == ["a"]


async def test_age_eviction_on_get_of_another_id() -> None:
    clock = FakeClock()
    evicted: list[str] = []
    tasks = store(max_finished_age=5.0, clock=clock, evicted=evicted)
    await tasks.save(task("a"))
    await tasks.save(task("b"))
    clock.now += 6
    assert await tasks.get("unknown") is None
    assert sorted(evicted) == ["a", "b"]
    assert len(tasks) == 0


async def test_no_age_limit() -> None:
    clock = FakeClock()
    tasks = store(max_finished_age=None, clock=clock)
    await tasks.save(task("a"))
    clock.now += 1e12
    assert await tasks.get("a") is not None


async def test_resaving_a_finished_task_does_not_make_it_younger() -> None:
    clock = FakeClock()
    evicted: list[str] = []
    tasks = store(max_finished=2, max_finished_age=60.0, clock=clock, evicted=evicted)
    await tasks.save(task("a"))
    clock.now += 10
    await tasks.save(task("b"))
    clock.now += 40
    replacement = task("a", TaskState.failed)  # a reconciliation writes a new object
    await tasks.save(replacement)
    assert await tasks.get("a") == replacement
    # still the oldest finished: a third finished task pushes "a" out, not "b"
    await tasks.save(task("c"))
    assert evicted == ["a"]
    assert await held(tasks, "a", "b", "c") == ["b", "c"]


async def test_resaving_keeps_age_from_first_finish() -> None:
    clock = FakeClock()
    tasks = store(max_finished_age=60.0, clock=clock)
    await tasks.save(task("a"))
    clock.now += 59
    await tasks.save(task("a"))
    clock.now += 2
    assert await tasks.get("a") is None


async def test_a_task_that_becomes_unfinished_leaves_the_finished_set() -> None:
    clock = FakeClock()
    evicted: list[str] = []
    tasks = store(max_finished=1, max_finished_age=60.0, clock=clock, evicted=evicted)
    await tasks.save(task("a"))
    await tasks.save(task("a", TaskState.working))
    assert (tasks.finished_count, tasks.unfinished_count) == (0, 1)
    clock.now += 1000
    await tasks.save(task("b"))
    await tasks.save(task("c"))
    assert evicted == ["b"]
    assert await tasks.get("a") is not None
    # finishing again starts a new age
    await tasks.save(task("a"))
    assert evicted == ["b", "c"]
    clock.now += 59
    assert await tasks.get("a") is not None


# -- delete ----------------------------------------------------------------------------


async def test_delete_finished_and_unfinished() -> None:
    evicted: list[str] = []
    tasks = store(max_finished=1, evicted=evicted)
    await tasks.save(task("w", TaskState.working))
    await tasks.save(task("c"))
    await tasks.delete("w")
    await tasks.delete("c")
    await tasks.delete("never-there")
    assert await held(tasks, "w", "c") == []
    assert (len(tasks), tasks.finished_count, tasks.unfinished_count) == (0, 0, 0)
    # the deleted finished task no longer counts toward the limit, and delete is no eviction
    await tasks.save(task("d"))
    assert await tasks.get("d") is not None
    assert evicted == []


# -- on_evict --------------------------------------------------------------------------


async def test_a_raising_on_evict_is_logged_not_raised(caplog: pytest.LogCaptureFixture) -> None:
    calls: list[str] = []

    def explode(task_id: str) -> None:
        calls.append(task_id)
        raise RuntimeError("listener broke")

    tasks = BoundedMemoryTaskStore(
        MemoryLimits(max_finished=1, max_finished_age=None), on_evict=explode
    )
    for task_id in ("a", "b", "c"):
        await tasks.save(task(task_id))
    assert calls == ["a", "b"]
    assert await held(tasks, "a", "b", "c") == ["c"]
    # (log scrubbing, once installed, folds the traceback into the message)
    errors = [r.getMessage() for r in caplog.records if r.levelname == "ERROR"]
    assert len(errors) == 2
    for task_id, message in zip(("a", "b"), errors, strict=True):
        assert message.startswith(f"task {task_id}: on_evict failed; the task is evicted anyway")


async def test_on_evict_forgets_push_configs() -> None:
    push = BoundedMemoryPushConfigStore()
    tasks = BoundedMemoryTaskStore(MemoryLimits(max_finished=1), on_evict=push.forget)
    for task_id in ("a", "b"):
        await push.set_info(task_id, PushNotificationConfig(url="https://hook.test/"))
        await tasks.save(task(task_id))
    assert await push.get_info("a") == []
    assert [c.id for c in await push.get_info("b")] == ["b"]
    assert len(push) == 1


# -- bounded memory --------------------------------------------------------------------


async def test_memory_stays_bounded() -> None:
    tasks = store(max_finished=100, max_finished_age=3600.0)
    for i in range(7):
        await tasks.save(task(f"open{i}", TaskState.input_required))
    status = TaskStatus(state=TaskState.completed)
    for i in range(50_000):
        await tasks.save(Task(id=f"t{i}", context_id="ctx", status=status))
        assert len(tasks) <= 107
    assert (tasks.finished_count, tasks.unfinished_count) == (100, 7)
    assert await tasks.get("t49999") is not None
    assert await tasks.get("t49899") is None


# -- push config store -----------------------------------------------------------------


async def test_push_set_without_id_uses_task_id_on_a_copy() -> None:
    push = BoundedMemoryPushConfigStore()
    given = PushNotificationConfig(url="https://hook.test/a", token="t")
    await push.set_info("task-1", given)
    assert given.id is None
    (stored,) = await push.get_info("task-1")
    assert stored is not given
    assert (stored.id, stored.url, stored.token) == ("task-1", "https://hook.test/a", "t")


async def test_push_stored_config_does_not_follow_the_callers_object() -> None:
    push = BoundedMemoryPushConfigStore()
    auth = PushNotificationAuthenticationInfo(schemes=["Bearer"], credentials="c1")
    given = PushNotificationConfig(id="x", url="https://hook.test/", authentication=auth)
    await push.set_info("t", given)
    given.url = "https://changed.test/"
    auth.credentials = "c2"
    (stored,) = await push.get_info("t")
    assert stored.url == "https://hook.test/"
    assert stored.authentication is not None
    assert stored.authentication.credentials == "c1"


async def test_push_replaces_same_id_and_lists_in_insertion_order() -> None:
    push = BoundedMemoryPushConfigStore()
    await push.set_info("t", PushNotificationConfig(id="one", url="https://1.test/"))
    await push.set_info("t", PushNotificationConfig(id="two", url="https://2.test/"))
    await push.set_info("t", PushNotificationConfig(url="https://default.test/"))
    await push.set_info("t", PushNotificationConfig(id="one", url="https://1b.test/"))
    configs = await push.get_info("t")
    assert [(c.id, c.url) for c in configs] == [
        ("one", "https://1b.test/"),
        ("two", "https://2.test/"),
        ("t", "https://default.test/"),
    ]
    assert await push.get_info("other") == []


async def test_push_get_info_returns_a_new_list() -> None:
    push = BoundedMemoryPushConfigStore()
    await push.set_info("t", PushNotificationConfig(url="https://hook.test/"))
    (await push.get_info("t")).clear()
    assert len(await push.get_info("t")) == 1


async def test_push_delete_one_config() -> None:
    push = BoundedMemoryPushConfigStore()
    await push.set_info("t", PushNotificationConfig(id="one", url="https://1.test/"))
    await push.set_info("t", PushNotificationConfig(id="two", url="https://2.test/"))
    await push.delete_info("t", "one")
    await push.delete_info("t", "missing")
    await push.delete_info("no-task", "one")
    assert [c.id for c in await push.get_info("t")] == ["two"]
    await push.delete_info("t", "two")
    assert await push.get_info("t") == []
    assert len(push) == 0


async def test_push_delete_without_config_id_deletes_all_configs_of_the_task() -> None:
    push = BoundedMemoryPushConfigStore()
    await push.set_info("t", PushNotificationConfig(id="one", url="https://1.test/"))
    await push.set_info("t", PushNotificationConfig(id="two", url="https://2.test/"))
    await push.set_info("u", PushNotificationConfig(url="https://u.test/"))
    await push.delete_info("t")
    assert await push.get_info("t") == []
    assert [c.id for c in await push.get_info("u")] == ["u"]
    await push.delete_info("no-task")


async def test_push_forget() -> None:
    push = BoundedMemoryPushConfigStore()
    await push.set_info("t", PushNotificationConfig(id="one", url="https://1.test/"))
    await push.set_info("t", PushNotificationConfig(id="two", url="https://2.test/"))
    await push.set_info("u", PushNotificationConfig(url="https://u.test/"))
    push.forget("t")
    push.forget("never-there")
    assert await push.get_info("t") == []
    assert len(await push.get_info("u")) == 1


# -- over HTTP -------------------------------------------------------------------------


async def echo(ctx: AgentContext) -> str:
    return f"echo {ctx.text}"


async def test_tasks_get_of_an_evicted_task_is_not_found_over_http() -> None:
    tasks = BoundedMemoryTaskStore(MemoryLimits(max_finished=2))
    app = create_app(echo, make_card(), task_store=tasks)
    async with running_server(app) as url, a2a_client(url) as client:
        sent = [await send(client, user_message(f"m{i}")) for i in range(3)]
        assert [t.status.state for t in sent] == [TaskState.completed] * 3
        with pytest.raises(A2AClientJSONRPCError) as caught:
            await client.get_task(TaskQueryParams(id=sent[0].id))
        third = await client.get_task(TaskQueryParams(id=sent[2].id))
    error = caught.value.error
    assert error.code == -32001
    assert isinstance(error.data, dict)
    assert error.data["errorCode"] == "NOT_FOUND"
    assert third.status.state == TaskState.completed
    assert texts(third) == ["echo m2"]
    assert app.state.llamon_task_store is tasks
    assert (tasks.finished_count, tasks.unfinished_count) == (2, 0)


async def test_a_contexts_last_task_is_found_while_held() -> None:
    tasks = store(max_finished=1)
    await tasks.save(task("first"))
    found = await tasks.task_in_context("ctx")
    assert found is not None
    assert found.id == "first"
    assert await tasks.task_in_context("no-such-context") is None

    other = Task(id="other", context_id="other-ctx", status=TaskStatus(state=TaskState.completed))
    await tasks.save(other)  # evicts "first": its context is no longer found
    assert await tasks.task_in_context("ctx") is None
    assert await tasks.task_in_context("other-ctx") == other


async def test_contexts_of_removed_tasks_are_pruned() -> None:
    tasks = store(max_finished=1)
    for i in range(3000):
        await tasks.save(
            Task(id=f"t{i}", context_id=f"c{i}", status=TaskStatus(state=TaskState.completed))
        )
    assert len(tasks) == 1
    assert len(tasks._context_tasks) <= 2 * len(tasks) + 1024 + 1
    found = await tasks.task_in_context("c2999")
    assert found is not None
    assert found.id == "t2999"


# -- claim_paused ----------------------------------------------------------------------


def resumed(task_id: str, worker: str) -> Task:
    return Task(
        id=task_id,
        context_id="ctx",
        status=TaskStatus(state=TaskState.working),
        metadata={"llamon.worker": worker},
    )


@pytest.mark.parametrize("paused", [TaskState.input_required, TaskState.auth_required])
async def test_of_two_concurrent_claims_on_a_paused_task_exactly_one_saves(
    paused: TaskState,
) -> None:
    tasks = store()
    await tasks.save(task("t", paused))
    won = await asyncio.gather(
        tasks.claim_paused(resumed("t", "a"), paused),
        tasks.claim_paused(resumed("t", "b"), paused),
    )
    assert list(won) == [True, False]
    assert await tasks.get("t") == resumed("t", "a")
    assert (tasks.finished_count, tasks.unfinished_count) == (0, 1)


@pytest.mark.parametrize("state", [TaskState.working, TaskState.auth_required, TaskState.completed])
async def test_a_claim_on_a_task_no_longer_input_required_writes_nothing(
    state: TaskState,
) -> None:
    tasks = store()
    before = task("t", state)
    await tasks.save(before)
    assert await tasks.claim_paused(resumed("t", "a"), TaskState.input_required) is False
    assert await tasks.get("t") == before
    assert await tasks.claim_paused(resumed("unknown", "a"), TaskState.input_required) is False
    assert await tasks.get("unknown") is None
    assert len(tasks) == 1
