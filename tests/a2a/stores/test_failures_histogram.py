"""``FailureStore.histogram`` on every kind (memory, SQLite, PostgreSQL): failures counted
per errorCode in equal time slices, filtered like ``query``, the range from ``since``/
``until`` or the oldest match, slice edges (start included, end excluded), bad sizes."""

from __future__ import annotations

from datetime import timedelta

import pytest

from llamon_agent.a2a.stores import Stores
from llamon_agent.a2a.stores.failures import FailureQuery, FailureStore, MemoryFailureStore
from tests.a2a.stores.test_failures import NOW, failure, store_kinds

__all__ = ["store_kinds"]  # the fixture, shared with test_failures

HOUR = NOW - timedelta(hours=1)


def _failures(stores: Stores) -> FailureStore:
    assert stores.failures is not None
    return stores.failures


async def _fill(store: FailureStore) -> None:
    # minutes before NOW: slices of 10 minutes over the last hour
    store.record(failure("t1", "timeout", minutes_ago=55))  # slice 0
    store.record(failure("t2", "database_unavailable", minutes_ago=52))  # slice 0
    store.record(failure("t3", "timeout", minutes_ago=31))  # slice 2
    store.record(failure("t4", "invalid_arguments", minutes_ago=30))  # slice 3 (edge)
    store.record(failure("t5", "timeout", minutes_ago=1))  # slice 5
    store.record(failure("t6", "timeout", minutes_ago=90))  # before the range
    await store.flush()


async def test_counts_per_code_in_each_slice(store_kinds: Stores) -> None:
    store = _failures(store_kinds)
    await _fill(store)
    found = await store.histogram(
        FailureQuery(since=HOUR, until=NOW), buckets=6, now=NOW.timestamp()
    )
    assert found.start == HOUR
    assert found.width == 600.0
    assert found.end == NOW
    assert found.counts == [
        {"UPSTREAM_TIMEOUT": 1, "UPSTREAM_UNAVAILABLE": 1},
        {},
        {"UPSTREAM_TIMEOUT": 1},
        {"INVALID_INPUT": 1},
        {},
        {"UPSTREAM_TIMEOUT": 1},
    ]
    assert found.total == 5
    assert found.codes() == ["UPSTREAM_TIMEOUT", "INVALID_INPUT", "UPSTREAM_UNAVAILABLE"]


async def test_filters_apply_and_until_is_excluded(store_kinds: Stores) -> None:
    store = _failures(store_kinds)
    await _fill(store)
    until = NOW - timedelta(minutes=1)  # t5 is exactly at until: left out
    found = await store.histogram(
        FailureQuery(since=HOUR, until=until, code="UPSTREAM_TIMEOUT"), buckets=2
    )
    # 59 minutes in two slices: t1 (55) and t3 (31) in the first; t5 (1) left out
    assert found.counts == [{"UPSTREAM_TIMEOUT": 2}, {}]


async def test_without_since_the_range_starts_at_the_oldest_match(store_kinds: Stores) -> None:
    store = _failures(store_kinds)
    await _fill(store)
    found = await store.histogram(FailureQuery(reason="timeout"), buckets=3, now=NOW.timestamp())
    assert found.start == NOW - timedelta(minutes=90)
    assert found.width == 1800.0
    # t6 (90 minutes ago) | t1 (55), t3 (31) | t5 (1)
    assert found.counts == [
        {"UPSTREAM_TIMEOUT": 1},
        {"UPSTREAM_TIMEOUT": 2},
        {"UPSTREAM_TIMEOUT": 1},
    ]


async def test_nothing_matching_gives_empty_slices_of_the_last_hour(store_kinds: Stores) -> None:
    store = _failures(store_kinds)
    await _fill(store)
    found = await store.histogram(FailureQuery(agent="nobody"), buckets=4, now=NOW.timestamp())
    assert (found.start, found.width, found.counts) == (HOUR, 900.0, [{}, {}, {}, {}])
    assert found.total == 0


@pytest.mark.parametrize("buckets", [0, -1, 1001])
async def test_a_bad_slice_count_names_buckets(buckets: int) -> None:
    with pytest.raises(ValueError, match=r"^buckets must be 1 to 1000, got"):
        await MemoryFailureStore().histogram(buckets=buckets)
