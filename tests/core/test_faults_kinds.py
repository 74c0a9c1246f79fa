"""``FaultPlan.for_downstream(kinds=)``: a call asks only for the faults it can suffer, and
only the fault it is given is counted as fired."""

from __future__ import annotations

from llamon_agent.core.faults import DownstreamFailed, DownstreamStreamDrop, FaultPlan


def test_kinds_pick_the_fault_a_call_can_suffer() -> None:
    plan = FaultPlan(
        [
            DownstreamStreamDrop(kind="downstream_stream_drop", agent="shop"),
            DownstreamFailed(kind="downstream_failed", agent="shop"),
        ]
    )
    found = plan.for_downstream("shop", kinds={"downstream_failed", "downstream_unavailable"})
    assert found is not None
    assert found.kind == "downstream_failed"
    assert plan.for_downstream("shop", kinds={"downstream_unavailable"}) is None
    assert plan.fired == {"downstream_failed:shop": 1}
    first = plan.for_downstream("http://127.0.0.1:9/", "shop")  # any kind: the first
    assert first is not None
    assert first.kind == "downstream_stream_drop"
