"""docs/operations.md, section OpenTelemetry: the SDK example runs (in a fresh interpreter:
a process sets its tracer provider once) and prints what its comment says."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).parents[2]
DOC = (ROOT / "docs" / "operations.md").read_text(encoding="utf-8")
SECTION = DOC.split("## OpenTelemetry", 1)[1].split("\n## ", 1)[0]
BLOCKS = re.findall(r"```python\n(.*?)```", SECTION, flags=re.DOTALL)


def test_the_sdk_example_prints_the_spans_it_says() -> None:
    (block,) = BLOCKS
    expected = [
        line.removeprefix("# ")
        for line in block.splitlines()
        if line.startswith(("# chat ", "# execute_tool "))
    ]
    done = subprocess.run(  # noqa: S603 - our own interpreter and documentation
        [sys.executable, "-c", block], capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == expected
    assert expected == [
        "chat scripted - UNSET",
        "execute_tool stock tool_error ERROR",
        "chat scripted - UNSET",
    ]


def test_the_metric_names_shown_are_the_ones_served() -> None:
    from llamon_agent.core import telemetry

    metrics = SECTION.split("### Metrics", 1)[1].split("\n### ", 1)[0]
    documented = set(re.findall(r"\| `(llamon\.[a-z_.]+)` \|", metrics))
    source = Path(telemetry.__file__).read_text(encoding="utf-8")
    created = set(re.findall(r'create_(?:counter|histogram)\(\s*"([a-z_.]+)"', source))
    assert documented == created
    assert len(created) == 5
