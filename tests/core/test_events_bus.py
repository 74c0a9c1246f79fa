"""EventBus: subscribers behind bounded queues; a slow or failing one changes nothing."""

from __future__ import annotations

import asyncio
import io
import json
from pathlib import Path

import pytest

from llamon_agent.core.events import (
    EventBus,
    RunnerEvent,
    emit,
    event_scope,
    observed,
)
from llamon_agent.loop import ToolRegistry, run_loop
from llamon_agent.loop.scripted import ScriptedModel, tool_call


def lookup(key: str) -> str:
    """Looks a key up."""
    return f"value of {key}"


def _script() -> ScriptedModel:
    return ScriptedModel(
        [
            tool_call("lookup", {"key": "a"}, id="c1"),
            tool_call("lookup", {"key": "b"}, id="c2"),
            tool_call("missing", id="c3"),
            "done",
        ]
    )


async def test_a_blocked_and_a_raising_subscriber_never_stop_the_run() -> None:
    bus = EventBus()
    never = asyncio.Event()
    got: list[RunnerEvent] = []
    all_arrived = asyncio.Event()

    async def blocked(event: RunnerEvent) -> None:
        await never.wait()  # never returns

    def raising(event: RunnerEvent) -> None:
        raise RuntimeError("observer bug")

    def healthy(event: RunnerEvent) -> None:
        got.append(event)
        if event.type == "run.completed":
            all_arrived.set()

    stuck = bus.subscribe(blocked, maxsize=2)
    broken = bus.subscribe(raising)
    bus.subscribe(healthy)

    outcome = await run_loop(_script(), ToolRegistry([lookup]), "go", events=bus)
    assert outcome.status == "completed"
    await asyncio.wait_for(all_arrived.wait(), timeout=5)
    types = [e.type for e in got]
    assert types[0] == "run.started"
    assert types[-1] == "run.completed"
    assert len(types) == 12  # run, 4 model calls, 3 x (step.started + ended), run.completed
    # one taken (blocked on), two waiting, the rest dropped and counted
    assert (stuck.delivered, stuck.pending, stuck.dropped) == (0, 2, 12 - 1 - 2)
    assert bus.dropped == 9
    assert await bus.flush(within=0.2) is False  # flush reports the stuck subscriber

    # the next run is observed the same way
    got.clear()
    all_arrived.clear()
    again = await run_loop(_script(), ToolRegistry([lookup]), "go", events=bus)
    assert again.status == "completed"
    await asyncio.wait_for(all_arrived.wait(), timeout=5)
    assert len(got) == 12
    assert stuck.dropped == 9 + 12
    bus.unsubscribe(stuck)  # cancels its reader
    assert await bus.flush()
    assert broken.failed == 24
    assert broken.delivered == 0
    never.set()


async def test_the_jsonl_subscriber_writes_one_json_object_per_line(tmp_path: Path) -> None:
    bus = EventBus()
    path = tmp_path / "events.jsonl"
    sub = bus.subscribe_jsonl(path)
    stream = io.StringIO()
    bus.subscribe_jsonl(stream)
    outcome = await run_loop(_script(), ToolRegistry([lookup]), "go", events=bus)
    assert await bus.flush()
    bus.unsubscribe(sub)
    lines = path.read_text().splitlines()
    assert lines == stream.getvalue().splitlines()
    rows = [json.loads(line) for line in lines]
    assert [row["type"] for row in rows][:3] == ["run.started", "model.completed", "step.started"]
    assert {row["run_id"] for row in rows} == {outcome.run_id}
    [failed] = [row for row in rows if row["type"] == "step.failed"]
    assert (failed["step_id"], failed["trace_metadata"]["failure_reason"]) == ("c3", "unknown_tool")


async def test_an_on_event_handler_and_a_bus_both_receive_the_run() -> None:
    bus = EventBus()
    queued: list[RunnerEvent] = []
    bus.subscribe(queued.append)
    inline: list[RunnerEvent] = []
    await run_loop(_script(), ToolRegistry([lookup]), "go", on_event=inline.append, events=bus)
    await bus.flush()
    assert queued == inline


async def test_inside_a_scope_the_loop_emits_to_its_bus_with_the_task_ids() -> None:
    bus = EventBus()
    got: list[RunnerEvent] = []
    bus.subscribe(got.append)
    with event_scope(bus, task_id="task-1", context_id="ctx-1"):
        assert observed()
        await run_loop(_script(), ToolRegistry([lookup]), "go")
        emit("custom.mark", "execute", metadata={"n": 1})
    await bus.flush()
    assert {(e.task_id, e.context_id) for e in got} == {("task-1", "ctx-1")}
    assert got[-1].type == "custom.mark"
    assert not observed()


def test_no_subscriber_means_inactive_and_nothing_built() -> None:
    bus = EventBus()
    assert bus.active is False
    sub = bus.subscribe(lambda event: None)
    assert bus.active is True
    bus.unsubscribe(sub)
    assert bus.active is False
    with event_scope(bus):
        assert observed() is False


def test_a_queue_size_below_one_is_refused() -> None:
    with pytest.raises(ValueError, match="maxsize must be at least 1"):
        EventBus().subscribe(lambda event: None, maxsize=0)


async def test_an_inline_subscriber_is_called_in_publish_and_its_failures_counted() -> None:
    bus = EventBus()
    seen: list[str] = []
    inline = bus.subscribe_inline(lambda event: seen.append(event.type))

    def broken(event: RunnerEvent) -> None:
        raise ValueError("observer bug")

    failing = bus.subscribe_inline(broken)
    bus.publish(RunnerEvent("x.one", "execute"))
    assert seen == ["x.one"]  # before any await
    assert (inline.delivered, failing.failed) == (1, 1)

    async def later(event: RunnerEvent) -> None:
        return None

    with pytest.raises(TypeError, match="plain function"):
        bus.subscribe_inline(later)  # type: ignore[arg-type]


async def test_bus_flush_writes_what_the_jsonl_file_holds(tmp_path: Path) -> None:
    bus = EventBus()
    path = tmp_path / "events.jsonl"
    bus.subscribe_jsonl(path)
    with event_scope(bus, task_id="t-1"):
        for n in range(3):
            emit("custom.mark", "execute", metadata={"n": n})
            await asyncio.sleep(0)  # three bursts
    assert await bus.flush()
    rows = [json.loads(line) for line in path.read_text().splitlines()]
    assert [(row["task_id"], row["trace_metadata"]["n"]) for row in rows] == [
        ("t-1", 0),
        ("t-1", 1),
        ("t-1", 2),
    ]


async def test_a_plain_function_returning_coroutines_is_awaited_in_order() -> None:
    bus = EventBus()
    seen: list[str] = []

    async def collect(event: RunnerEvent) -> None:
        seen.append(event.type)

    sub = bus.subscribe(lambda event: collect(event))
    for n in range(3):
        bus.publish(RunnerEvent(f"x.e{n}", "execute"))
    assert await bus.flush()
    bus.publish(RunnerEvent("x.e3", "execute"))
    assert await bus.flush()
    assert seen == ["x.e0", "x.e1", "x.e2", "x.e3"]
    assert sub.delivered == 4


async def test_publishing_from_a_thread_hands_the_event_to_the_loop() -> None:
    bus = EventBus()
    seen: list[tuple[str, bool]] = []
    loop = asyncio.get_running_loop()

    def on_loop(event: RunnerEvent) -> None:
        try:
            running = asyncio.get_running_loop() is loop
        except RuntimeError:
            running = False
        seen.append((event.type, running))

    bus.subscribe_inline(on_loop)
    bus.publish(RunnerEvent("x.on-loop", "execute"))
    await asyncio.to_thread(bus.publish, RunnerEvent("x.from-thread", "execute"))
    await asyncio.sleep(0)  # the loop callback the thread scheduled
    assert seen == [("x.on-loop", True), ("x.from-thread", True)]
    lonely = EventBus()
    sub = lonely.subscribe_inline(on_loop)
    await asyncio.to_thread(lonely.publish, RunnerEvent("x.nowhere", "execute"))
    assert sub.dropped == 1  # no loop known yet: counted, not delivered
