"""The core install stays small, and a feature whose extra is missing says what to install.

``pip install llamon-agent`` must not pull the OpenAI or Anthropic SDK, LangGraph, MCP or
a PostgreSQL driver; each comes with its extra. The import checks run in a subprocess with
a meta-path finder that makes the optional packages look uninstalled (or, for the
provider SDKs, too old), so they test exactly what a core install sees.
"""

from __future__ import annotations

import importlib.util
import re
import subprocess
import sys
import textwrap
import tomllib
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]

OPTIONAL_DISTRIBUTIONS = {
    "openai": "openai",
    "anthropic": "anthropic",
    "langgraph": "langgraph",
    "langgraph-checkpoint-sqlite": "langgraph",
    "langgraph-checkpoint-postgres": "postgres",
    "mcp": "mcp",
    "asyncpg": "postgres",
    "psycopg": "postgres",
    "sqlalchemy": "postgres",
    "pyjwt": "jwt",
    "opentelemetry-sdk": "otel",
    "prometheus-client": "otel",
    "pyyaml": "lab",
    "redis": "redis",
}
"""Distributions the core must not depend on, and the extra that brings each."""

HIDDEN_MODULES = (
    "openai",
    "anthropic",
    "langgraph",
    "langchain_core",
    "mcp",
    "sqlalchemy",
    "asyncpg",
    "psycopg",
    "psycopg_pool",
    "aiosqlite",
    "jwt",
    "opentelemetry.sdk",
    "prometheus_client",
    "yaml",
    "redis",
)

BLOCKER = """
import importlib.abc
import sys

HIDDEN = {hidden!r}


class Uninstalled(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if any(name == root or name.startswith(root + ".") for root in HIDDEN):
            raise ModuleNotFoundError(f"No module named {{name!r}}", name=name)
        return None


sys.meta_path.insert(0, Uninstalled())
"""


def _requirement(spec: str) -> tuple[str, set[str]]:
    """``'a2a-sdk[http-server]>=0.3'`` -> ``('a2a-sdk', {'http-server'})``."""
    match = re.match(r"\s*([A-Za-z0-9_.\-]+)\s*(?:\[([^\]]*)\])?", spec)
    assert match is not None, spec
    extras = {e.strip() for e in (match.group(2) or "").split(",") if e.strip()}
    return match.group(1).lower().replace("_", "-"), extras


def _run(code: str, *, hidden: tuple[str, ...] = HIDDEN_MODULES, prelude: str = "") -> str:
    """Run ``code`` in a fresh interpreter that cannot import ``hidden``; its stdout."""
    script = BLOCKER.format(hidden=hidden) + textwrap.dedent(prelude) + textwrap.dedent(code)
    done = subprocess.run(  # noqa: S603 - our own interpreter and script
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_core_dependencies_exclude_the_optional_packages() -> None:
    core = dict(_requirement(spec) for spec in PYPROJECT["dependencies"])
    assert sorted(set(core) & set(OPTIONAL_DISTRIBUTIONS)) == []
    # a2a-sdk's sqlite/postgresql extras pull SQLAlchemy, aiosqlite and asyncpg
    assert core["a2a-sdk"] == {"http-server"}


def test_each_optional_package_comes_with_its_extra() -> None:
    extras = {
        name: dict(_requirement(spec) for spec in specs)
        for name, specs in PYPROJECT["optional-dependencies"].items()
    }
    for distribution, extra in OPTIONAL_DISTRIBUTIONS.items():
        if distribution == "sqlalchemy":  # through a2a-sdk[postgresql]
            assert "postgresql" in extras["postgres"]["a2a-sdk"]
        elif distribution == "psycopg":  # through the LangGraph PostgreSQL checkpointer
            assert "langgraph-checkpoint-postgres" in extras["postgres"]
        else:
            assert distribution in extras[extra], (distribution, extra)
    features = {
        "langgraph",
        "mcp",
        "openai",
        "anthropic",
        "postgres",
        "jwt",
        "otel",
        "lab",
        "redis",
    }
    assert extras["all"] == {"llamon-agent": features}
    assert extras["dev"]["llamon-agent"] == {"all"}


@pytest.mark.parametrize(
    ("statement", "message"),
    [
        ("import llamon_agent.flow", "llamon_agent.flow needs LangGraph"),
        ("from llamon_agent import GraphBuilder", "llamon_agent.flow needs LangGraph"),
        ("from llamon_agent.loop import build_react_graph", "needs LangGraph"),
        ("from llamon_agent.loop import to_langchain_tools", "needs LangGraph"),
        ("import llamon_agent.mcp", "llamon_agent.mcp needs the MCP SDK"),
        ("import llamon_agent.examples.bookshop", "needs the MCP SDK"),
        ("from llamon_agent.loop.providers import OpenAIChatModel", "needs the OpenAI SDK"),
        (
            "from llamon_agent.loop.providers import AnthropicMessagesModel",
            "needs the Anthropic SDK",
        ),
        (
            "import asyncio\n"
            "from llamon_agent.a2a import open_stores\n"
            "asyncio.run(open_stores('postgres', dsn='postgresql://u:pw@127.0.0.1/db'))",
            "the postgres task store needs the PostgreSQL drivers",
        ),
        (
            "from llamon_agent.client import push_receiver\n"
            "push_receiver('http://127.0.0.1:9/hook', jwt_key={'kty': 'oct', 'k': 'AA'})",
            "verifying signed push notifications needs PyJWT",
        ),
        (
            "from llamon_agent.a2a.server import create_app\n"
            "from llamon_agent.examples.demo_agent import agent, card\n"
            "create_app(agent, card, metrics=True)",
            "the /metrics route needs the OpenTelemetry SDK and prometheus-client",
        ),
        (
            "import pathlib, tempfile\n"
            "from llamon_agent.lab import load_cases\n"
            "path = pathlib.Path(tempfile.mkdtemp()) / 'cases.yaml'\n"
            "path.write_text('mode: plan\\nquery: hi\\n')\n"
            "load_cases(path)",
            "reading YAML case files needs PyYAML",
        ),
        (
            "from llamon_agent.a2a.server import create_app\n"
            "from llamon_agent.examples.demo_agent import agent, card\n"
            "create_app(agent, card, redis_url='redis://127.0.0.1:6379/0')",
            "the Redis event relay needs redis-py",
        ),
    ],
)
def test_a_missing_extra_is_named_in_the_import_error(statement: str, message: str) -> None:
    code = (
        "try:\n"
        + textwrap.indent(statement, "    ")
        + "\nexcept ImportError as exc:\n    print(exc)\nelse:\n    print('imported')\n"
    )
    printed = _run(code).strip()
    assert message in printed, printed
    extra = re.search(r"pip install '(llamon-agent\[\w+\])'$", printed)
    assert extra is not None, printed


def test_the_flow_import_error_is_the_documented_one() -> None:
    code = """
    try:
        import llamon_agent.flow
    except ImportError as exc:
        print(exc)
        print(type(exc.__cause__).__name__, exc.__cause__.name)
    """
    assert _run(code, hidden=("langgraph",)).splitlines() == [
        "llamon_agent.flow needs LangGraph: pip install 'llamon-agent[langgraph]'",
        "ModuleNotFoundError langgraph",
    ]


def test_the_core_serves_without_any_optional_package(tmp_path: Path) -> None:
    """The README's main job (``llamon demo``: SQLite, then memory), the error tables, the
    raise helpers and the native tool loop, with every optional package hidden."""
    code = f"""
    import asyncio
    import os
    import sys

    os.environ["LLAMON_HOME"] = {str(tmp_path)!r}

    import llamon_agent
    import llamon_agent.core.errors
    import llamon_agent.exceptions
    from llamon_agent.a2a import create_app
    from llamon_agent.cli import app
    from llamon_agent.demo import run_demo
    from llamon_agent.loop import ScriptedModel, ToolRegistry, run_loop, tool
    from typer.testing import CliRunner

    for store in ("sqlite", "memory"):
        results = asyncio.run(run_demo(store=store))
        print(store, all(result.expected for result in results))

    @tool
    def add(a: int, b: int) -> int:
        '''Add two numbers.'''
        return a + b

    from llamon_agent.loop import tool_call

    model = ScriptedModel([tool_call("add", {{"a": 1, "b": 2}}), "3"])
    outcome = asyncio.run(run_loop(model, ToolRegistry([add]), "1+2?"))
    print("loop", outcome.status, outcome.answer)
    for command in (["--help"], ["errors"]):
        print(command[0], CliRunner().invoke(app, command).exit_code)
    loaded = sorted(
        name for name in {HIDDEN_MODULES!r} if name in sys.modules and sys.modules[name]
    )
    print("loaded", loaded)
    """
    assert _run(code).splitlines() == [
        "sqlite True",
        "memory True",
        "loop completed 3",
        "--help 0",
        "errors 0",
        "loaded []",
    ]
    assert (tmp_path / "tasks.db").is_file()


# An SDK that is installed but too old: the module imports, the names we use are missing.
OLD_SDK = """
import types

sys.modules[{name!r}] = types.ModuleType({name!r})
"""


@pytest.mark.parametrize(
    ("old", "other"),
    [("openai", "AnthropicMessagesModel"), ("anthropic", "OpenAIChatModel")],
)
def test_an_old_provider_sdk_does_not_break_the_other_adapter(old: str, other: str) -> None:
    other_sdk = "anthropic" if old == "openai" else "openai"
    if importlib.util.find_spec(other_sdk) is None:
        pytest.skip(f"{other_sdk} is not installed (a core install)")
    adapter = {"openai": "OpenAIChatModel", "anthropic": "AnthropicMessagesModel"}[old]
    code = f"""
    import llamon_agent.loop.providers as providers

    model = getattr(providers, {other!r})(model="m", api_key="k")
    print(type(model).__name__)
    try:
        getattr(providers, {adapter!r})
    except ImportError as exc:
        print(exc)
    """
    printed = _run(code, hidden=(), prelude=OLD_SDK.format(name=old)).splitlines()
    label = {"openai": "the OpenAI SDK", "anthropic": "the Anthropic SDK"}[old]
    assert printed == [
        other,
        f"llamon_agent.loop.providers.{old} needs a newer version of {label}: "
        f"pip install -U 'llamon-agent[{old}]'",
    ]


def test_an_unrelated_import_error_passes_unchanged() -> None:
    from llamon_agent._extras import requires_extra

    with (
        pytest.raises(ModuleNotFoundError, match="no_such_module") as raised,
        requires_extra("langgraph", "a feature"),
    ):
        import no_such_module  # type: ignore[import-not-found]  # noqa: F401
    assert raised.value.name == "no_such_module"


def test_llamon_serve_metrics_names_the_missing_extra() -> None:
    code = """
    from typer.testing import CliRunner
    from llamon_agent.cli import app
    from llamon_agent.demo import demo_agent_path

    path = demo_agent_path()
    args = ["serve", "--metrics", "--store", "memory", "--card", f"{path}:card", f"{path}:agent"]
    result = CliRunner().invoke(app, args)
    print(result.exit_code)
    print(result.output.strip())
    """
    assert _run(code).splitlines() == [
        "2",
        "llamon serve: --metrics: the /metrics route needs the OpenTelemetry SDK and "
        "prometheus-client: pip install 'llamon-agent[otel]'",
    ]


def test_llamon_serve_redis_url_names_the_missing_extra() -> None:
    code = """
    from typer.testing import CliRunner
    from llamon_agent.cli import app
    from llamon_agent.demo import demo_agent_path

    path = demo_agent_path()
    args = ["serve", "--redis-url", "redis://127.0.0.1:6379/0", "--store", "memory",
            "--card", f"{path}:card", f"{path}:agent"]
    result = CliRunner().invoke(app, args)
    print(result.exit_code)
    print(result.output.strip())
    """
    assert _run(code).splitlines() == [
        "2",
        "llamon serve: --redis-url: the Redis event relay needs redis-py: "
        "pip install 'llamon-agent[redis]'",
    ]


def test_llamon_lab_check_names_the_missing_extra_for_yaml_files() -> None:
    code = (
        "import pathlib, tempfile\n"
        "from typer.testing import CliRunner\n"
        "from llamon_agent.cli import app\n"
        "folder = pathlib.Path(tempfile.mkdtemp())\n"
        '(folder / \'a.json\').write_text(\'{"mode": "plan", "query": "hi"}\')\n'
        "print(CliRunner().invoke(app, ['lab', 'check', str(folder / 'a.json')]).exit_code)\n"
        "(folder / 'b.yaml').write_text('mode: plan\\nquery: hi\\n')\n"
        "result = CliRunner().invoke(app, ['lab', 'check', str(folder)])\n"
        "print(result.exit_code)\n"
        "print(result.stderr)\n"
    )
    json_ok, exit_code, *stderr = _run(code).splitlines()
    assert (json_ok, exit_code) == ("0", "2")
    assert stderr[0] == (
        "error: reading YAML case files needs PyYAML: pip install 'llamon-agent[lab]'"
    )


def test_the_wheel_ships_the_console_templates_and_static_files(tmp_path: Path) -> None:
    """The web console renders from files inside the package, and the Quality Lab case
    file schema ships with it: the built wheel holds them."""
    root = ROOT
    built = subprocess.run(  # noqa: S603 - pip on our own project
        [sys.executable, "-m", "pip", "wheel", str(root), "--no-deps", "-q", "-w", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert built.returncode == 0, built.stderr[-2000:]
    (wheel,) = tmp_path.glob("llamon_agent-*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    console = root / "src" / "llamon_agent" / "a2a" / "console"
    expected = {
        path.relative_to(root / "src").as_posix()
        for folder in ("templates", "static")
        for path in (console / folder).iterdir()
    }
    assert "llamon_agent/a2a/console/static/htmx.min.js" in expected
    assert "llamon_agent/a2a/console/templates/base.html" in expected
    assert expected <= names, sorted(expected - names)
    # the Quality Lab case file schema
    assert "llamon_agent/lab/case.schema.json" in names
