"""``OwnedTaskStore.claim_paused``: the resumed task keeps its owner, as a save does."""

from __future__ import annotations

from a2a.auth.user import User
from a2a.server.context import ServerCallContext
from a2a.types import Task, TaskState, TaskStatus

from llamon_agent.a2a.ownership import OWNER_METADATA_KEY, OwnedTaskStore, owner_of
from llamon_agent.a2a.stores.memory import BoundedMemoryTaskStore


class Named(User):
    def __init__(self, name: str) -> None:
        self.name = name

    @property
    def is_authenticated(self) -> bool:
        return True

    @property
    def user_name(self) -> str:
        return self.name


ALICE = ServerCallContext(user=Named("alice"))
BOB = ServerCallContext(user=Named("bob"))


async def test_a_claimed_task_keeps_its_owner_though_the_caller_read_it_unstamped() -> None:
    inner = BoundedMemoryTaskStore()
    store = OwnedTaskStore(inner)
    paused = Task(id="t", context_id="c", status=TaskStatus(state=TaskState.input_required))
    await store.save(paused, ALICE)
    read = await store.get("t", ALICE)  # what a request works on: the owner stamp stripped
    assert read is not None
    assert read.metadata is None
    resumed = read.model_copy(update={"status": TaskStatus(state=TaskState.working)})

    assert await store.claim_paused(resumed, TaskState.input_required, ALICE) is True
    stored = await inner.get("t")
    assert stored is not None
    assert stored.metadata == {OWNER_METADATA_KEY: owner_of(ALICE)}
    assert stored.status.state == TaskState.working
    assert await store.get("t", ALICE) == resumed
    assert await store.get("t", BOB) is None
    assert await store.claim_paused(resumed, TaskState.input_required, ALICE) is False
