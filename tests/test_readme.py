"""The README's code runs as written."""

from __future__ import annotations

import re
from pathlib import Path

from a2a.types import TaskState
from starlette.applications import Starlette

from tests._support.a2a_server import a2a_client, running_server, send, texts, user_message

README = (Path(__file__).parents[1] / "README.md").read_text(encoding="utf-8")
BLOCKS = re.findall(r"```python\n(.*?)```", README, flags=re.DOTALL)


def test_readme_starts_with_the_two_commands() -> None:
    commands = re.findall(r"```bash\n(.*?)\n```", README, flags=re.DOTALL)[:2]
    assert commands[0].endswith("llamon demo  # the main job")
    assert commands[1].endswith("# the tests")
    assert README.index("```bash") < README.index("```python")


async def test_serve_example_answers_over_http() -> None:
    block = next(b for b in BLOCKS if "create_app(agent, card)" in b)
    namespace: dict[str, object] = {}
    exec(compile(block, "README.md", "exec"), namespace)  # noqa: S102
    app = namespace["app"]
    assert isinstance(app, Starlette)
    async with running_server(app) as url, a2a_client(url) as client:
        task = await send(client, user_message("hi"))
    assert task.status.state == TaskState.completed
    assert texts(task) == ["You said hi"]


def test_raise_example_compiles() -> None:
    block = next(b for b in BLOCKS if "raise_application_error(" in b)
    compile(block, "README.md", "exec")
