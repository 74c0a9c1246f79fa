"""``llamon serve --metrics`` (a real process): ``GET /metrics`` after a success, two
failures and a stream that failed midway shows each count exactly, and the server still
answers afterwards; without ``--metrics`` there is no such route."""

from __future__ import annotations

from pathlib import Path

import httpx
from a2a.types import TaskState

from tests._support.a2a_server import a2a_client, send, stream, user_message
from tests._support.serve import llamon_serve

AGENT = 'gen_ai_agent_name="llamon-demo"'


async def test_llamon_serve_metrics_counts_what_happened(tmp_path: Path) -> None:
    async with (
        llamon_serve(tmp_path, "--store", "memory", "--metrics") as (_, served),
        httpx.AsyncClient(timeout=10.0) as http,
    ):
        url = served.rstrip("/")
        async with a2a_client(url) as client:
            hello = await send(client, user_message("hello"))
            quota = await send(client, user_message("quota"))
            upstream = await send(client, user_message("upstream"))
        async with a2a_client(url, streaming=True) as streaming:
            events = await stream(streaming, user_message("stream"))
        scraped = await http.get(f"{url}/metrics")
        async with a2a_client(url) as client:
            after = await send(client, user_message("hello again"))
    assert [t.status.state for t in (hello, quota, upstream, after)] == [
        TaskState.completed,
        TaskState.failed,
        TaskState.failed,
        TaskState.completed,
    ]
    assert events[-1][0].status.state == TaskState.failed
    assert scraped.status_code == 200
    lines = scraped.text.splitlines()
    assert sorted(line for line in lines if line.startswith("llamon_tasks_total")) == [
        f'llamon_tasks_total{{{AGENT},llamon_error_code="RATE_LIMITED",'
        'llamon_task_state="failed"} 1.0',
        f'llamon_tasks_total{{{AGENT},llamon_error_code="UPSTREAM_UNAVAILABLE",'
        'llamon_task_state="failed"} 2.0',
        f'llamon_tasks_total{{{AGENT},llamon_task_state="completed"}} 1.0',
    ]
    assert [line for line in lines if line.startswith("llamon_stream_duration_seconds_count")] == [
        f'llamon_stream_duration_seconds_count{{{AGENT},llamon_task_state="failed"}} 1.0'
    ]
    assert sorted(
        line for line in lines if line.startswith("llamon_failure_latency_seconds_count")
    ) == [
        f'llamon_failure_latency_seconds_count{{{AGENT},llamon_error_code="RATE_LIMITED"}} 1.0',
        f"llamon_failure_latency_seconds_count{{{AGENT},"
        'llamon_error_code="UPSTREAM_UNAVAILABLE"} 2.0',
    ]
    for task in (hello, quota, upstream):
        assert task.id not in scraped.text
        assert task.context_id not in scraped.text


async def test_without_the_option_there_is_no_metrics_route(tmp_path: Path) -> None:
    async with (
        llamon_serve(tmp_path, "--store", "memory") as (_, served),
        httpx.AsyncClient(timeout=10.0) as http,
    ):
        url = served.rstrip("/")
        missing = await http.get(f"{url}/metrics")
        healthy = await http.get(f"{url}/healthz")
    assert (missing.status_code, healthy.status_code) == (404, 200)
