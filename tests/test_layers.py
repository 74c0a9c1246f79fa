"""The layer contract: an import only points down, and importing a part does not load the world.

Layers of ``llamon_agent``, top to bottom (``|``: side by side)::

    cli                                        the ``llamon`` command
    demo | cli_errors | testing | examples     built on the server: the demo, the CLI's
      | lab | catalog                          error lines, the test harness, example agents,
                                               Quality Lab case files, the Agent Catalog
                                               service
    a2a                                        serving (flow and loop adapters included)
    client                                     calling other agents
    mcp                                        MCP tools for the loop
    loop | flow                                the tool loop | flows; neither imports the other
    core                                       the error model and settings
    exceptions                                 every exception (imports only core.codes)
    _extras | _lazy                            leaf utilities (optional-extra messages,
                                               names loaded on first use)

``core.codes`` is a leaf (it imports nothing of the package), so ``exceptions`` may import
it. ``core`` and ``exceptions`` import no transport package (a2a-sdk, mcp, LangGraph,
Starlette, httpx ...). The repository's top-level ``examples/`` is a user of the package,
outside the graph.

Upward imports allowed: only those in ``LAZY_UPWARD``, each inside a function (run on
first use, never at import time), each with its reason. The checker runs on grimp's graph
of every import, function-level ones included; imports under ``TYPE_CHECKING`` are left
out (they never run). The tests at the end add an upward arrow and check the checker sees
it, and start fresh interpreters to pin what importing a part loads.
"""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Final

import grimp
import pytest
from grimp import Layer

import llamon_agent

PACKAGE: Final = "llamon_agent"
SOURCE: Final = Path(llamon_agent.__file__).parent

LAYERS: Final = (
    Layer("cli"),
    Layer("demo", "cli_errors", "testing", "examples", "lab", "catalog", independent=False),
    Layer("a2a"),
    Layer("client"),
    Layer("mcp"),
    Layer("loop", "flow", independent=True),
    Layer("core"),
    Layer("exceptions"),
    Layer("_extras", "_lazy", independent=True),
)

LEAVES: Final = ("llamon_agent.core.codes", "llamon_agent._extras", "llamon_agent._lazy")
"""Modules that import nothing of the package, so any layer may import them."""

LEAF_IMPORTS: Final = frozenset({("llamon_agent.exceptions", "llamon_agent.core.codes")})
"""Imports of a leaf from below its layer: ``exceptions`` names each exception's code."""

LAZY_UPWARD: Final = {
    ("llamon_agent.exceptions", "llamon_agent.core.scrub"): (
        "an exception's envelope is scrubbed when to_dict() is called, so defining the "
        "exceptions loads nothing but core.codes"
    ),
    ("llamon_agent.exceptions", "llamon_agent.core.error_data"): (
        "LlamonApplicationError checks its extras against the error data fields when raised"
    ),
    ("llamon_agent.core.error_data", "llamon_agent.a2a.parts"): (
        "application_error_to_parts builds a2a parts and lives in a2a; it stays importable "
        "from core.errors (public API) and core.error_data (its old home) through this one "
        "module __getattr__"
    ),
    ("llamon_agent.loop", "llamon_agent.a2a.loop_agent"): (
        "LoopAgent, the loop served over A2A, lives in a2a; 'from llamon_agent.loop import "
        "LoopAgent' is public, so the loop package's __getattr__ resolves it on first use"
    ),
}
"""The only upward imports: (importer, imported) -> why. Each must run inside a function."""

TRANSPORTS: Final = (
    "a2a",
    "mcp",
    "langgraph",
    "langchain_core",
    "starlette",
    "sse_starlette",
    "uvicorn",
    "httpx",
    "llamon_agent.a2a",
    "llamon_agent.mcp",
)
"""What ``core`` and ``exceptions`` must not reach, directly or through another module."""

LAZY_PACKAGES: Final = (
    "llamon_agent.a2a",
    "llamon_agent.client",
    "llamon_agent.loop",
    "llamon_agent.mcp",
)
"""Packages whose ``__getattr__`` loads their public names from ``_HOMES`` on first use."""


def build_graph() -> grimp.ImportGraph:
    """Every import in the package, function-level ones included, ``TYPE_CHECKING`` not."""
    return grimp.build_graph(
        PACKAGE, include_external_packages=True, exclude_type_checking_imports=True, cache_dir=None
    )


def _without_allowed(graph: grimp.ImportGraph) -> grimp.ImportGraph:
    for importer, imported in LAZY_UPWARD.keys() | LEAF_IMPORTS:
        if graph.direct_import_exists(importer=importer, imported=imported):
            graph.remove_import(importer=importer, imported=imported)
    return graph


def layer_violations(graph: grimp.ImportGraph) -> list[str]:
    """Each import that points up (or across ``loop | flow``), as ``importer -> imported``."""
    found = _without_allowed(graph).find_illegal_dependencies_for_layers(
        layers=LAYERS, containers={PACKAGE}
    )
    return sorted(
        f"{head} -> {tail}"
        for dependency in found
        for route in dependency.routes
        for head in route.heads
        for tail in route.tails
    )


def forbidden_chains(graph: grimp.ImportGraph) -> list[str]:
    """Each chain of imports from ``core`` or ``exceptions`` to a transport package."""
    graph = _without_allowed(graph)
    chains: list[str] = []
    for importer in ("llamon_agent.core", "llamon_agent.exceptions"):
        for transport in TRANSPORTS:
            if transport not in graph.modules:
                continue
            chain = graph.find_shortest_chain(
                importer=importer, imported=transport, as_packages=True
            )
            if chain is not None:
                chains.append(" -> ".join(chain))
    return sorted(chains)


def _module_path(module: str) -> Path:
    relative = Path(*module.split(".")[1:])
    package = SOURCE / relative / "__init__.py"
    return package if package.is_file() else (SOURCE / relative).with_suffix(".py")


def import_time_lines(source: str) -> set[int]:
    """Lines of the import statements that run when the module is imported: not inside a
    function, not under ``if TYPE_CHECKING:``."""
    tree = ast.parse(source)
    parents = {child: node for node in ast.walk(tree) for child in ast.iter_child_nodes(node)}
    lines: set[int] = set()
    for node in ast.walk(tree):
        if not isinstance(node, ast.Import | ast.ImportFrom):
            continue
        ancestor = parents.get(node)
        while ancestor is not None:
            if isinstance(ancestor, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda):
                break
            if isinstance(ancestor, ast.If) and "TYPE_CHECKING" in ast.unparse(ancestor.test):
                break
            ancestor = parents.get(ancestor)
        else:
            lines.add(node.lineno)
    return lines


def eager_allowed_imports(graph: grimp.ImportGraph) -> list[str]:
    """Each allowed upward import that runs at import time (it must run in a function)."""
    eager: list[str] = []
    for importer, imported in LAZY_UPWARD:
        eager_lines = import_time_lines(_module_path(importer).read_text(encoding="utf-8"))
        for detail in graph.get_import_details(importer=importer, imported=imported):
            if detail["line_number"] in eager_lines:
                eager.append(f"{importer}:{detail['line_number']} -> {imported}")
    return eager


@pytest.fixture
def graph() -> grimp.ImportGraph:
    return build_graph()


def test_imports_only_point_down(graph: grimp.ImportGraph) -> None:
    assert layer_violations(graph) == []


def test_core_and_exceptions_reach_no_transport(graph: grimp.ImportGraph) -> None:
    assert forbidden_chains(graph) == []


def test_each_allowed_upward_import_exists_and_runs_only_on_first_use(
    graph: grimp.ImportGraph,
) -> None:
    stale = [
        pair
        for pair in LAZY_UPWARD
        if not graph.direct_import_exists(importer=pair[0], imported=pair[1])
    ]
    assert stale == [], "an allowed upward import is gone: drop it from LAZY_UPWARD"
    assert eager_allowed_imports(graph) == []


@pytest.mark.parametrize("leaf", LEAVES)
def test_leaves_import_nothing_of_the_package(graph: grimp.ImportGraph, leaf: str) -> None:
    imported = graph.find_modules_directly_imported_by(leaf)
    assert sorted(name for name in imported if name.startswith(PACKAGE)) == []


@pytest.mark.parametrize("package", LAZY_PACKAGES)
def test_lazy_names_load_from_their_own_package(package: str) -> None:
    # grimp cannot see import_module(name) calls: the table they read is checked here.
    module = __import__(package, fromlist=["_HOMES"])
    homes: dict[str, str] = module._HOMES
    assert sorted(home for home in homes.values() if not home.startswith(package + ".")) == []


# -- the checker can fail ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("importer", "imported"),
    [
        ("llamon_agent.core.codes", "llamon_agent.a2a.agent"),  # core -> a2a
        ("llamon_agent.exceptions", "llamon_agent.core.classify"),  # exceptions -> core
        ("llamon_agent.flow.context", "llamon_agent.loop.runner"),  # across loop | flow
        ("llamon_agent.mcp.loader", "llamon_agent.cli"),  # mcp -> cli
    ],
)
def test_an_upward_arrow_is_reported(
    graph: grimp.ImportGraph, importer: str, imported: str
) -> None:
    graph.add_import(importer=importer, imported=imported, line_number=1, line_contents="")
    assert f"{importer} -> {imported}" in layer_violations(graph)


def test_a_transport_reached_from_core_is_reported(graph: grimp.ImportGraph) -> None:
    graph.add_import(importer="llamon_agent.core.failures", imported="llamon_agent.a2a.server")
    assert any(chain.startswith("llamon_agent.core.failures") for chain in forbidden_chains(graph))


def test_an_allowed_upward_import_at_module_level_is_reported() -> None:
    source = (
        "from typing import TYPE_CHECKING\n"
        "import os\n"  # 2: import time
        "if TYPE_CHECKING:\n"
        "    import a2a\n"  # 4: typing only
        "try:\n"
        "    import json\n"  # 6: import time
        "except ImportError:\n"
        "    pass\n"
        "def lazy():\n"
        "    import sys\n"  # 10: first use
        "class Eager:\n"
        "    import re\n"  # 12: import time
    )
    assert import_time_lines(source) == {1, 2, 6, 12}


# -- importing a part does not load the world -------------------------------------------


def _loaded_by(statement: str) -> set[str]:
    """The modules a fresh interpreter holds after running ``statement``."""
    script = f"import sys\n{statement}\nprint('\\n'.join(sorted(sys.modules)))"
    result = subprocess.run(  # noqa: S603 - our own interpreter and script
        [sys.executable, "-c", script], capture_output=True, text=True, check=True, timeout=120
    )
    return set(result.stdout.split())


def _under(modules: set[str], *prefixes: str) -> Iterator[str]:
    for name in sorted(modules):
        if any(name == prefix or name.startswith(prefix + ".") for prefix in prefixes):
            yield name


def test_the_loop_runner_loads_no_server_and_no_langgraph() -> None:
    loaded = _loaded_by("import llamon_agent.loop.runner")
    assert list(_under(loaded, "llamon_agent.a2a", "a2a", "langgraph", "starlette", "mcp")) == []


def test_the_error_api_loads_no_transport() -> None:
    loaded = _loaded_by("import llamon_agent.core.errors")
    assert (
        list(_under(loaded, "a2a", "mcp", "langgraph", "llamon_agent.a2a", "llamon_agent.mcp"))
        == []
    )


def test_the_agent_protocol_loads_no_server() -> None:
    loaded = _loaded_by("from llamon_agent.a2a import AgentContext, FlowContext")
    assert list(_under(loaded, "starlette", "llamon_agent.a2a.server", "langgraph", "mcp")) == []


def test_the_exceptions_load_only_the_codes() -> None:
    loaded = _loaded_by("import llamon_agent.exceptions")
    assert (
        list(_under(loaded, "pydantic", "llamon_agent.core.scrub", "llamon_agent.core.error_data"))
        == []
    )


# -- every LLAMON_* variable is read in one place ---------------------------------------


_VARIABLE: Final = re.compile(r"LLAMON_[A-Z_]+")


def test_llamon_variables_are_named_only_in_core_settings() -> None:
    named: list[str] = []
    for path in sorted(SOURCE.rglob("*.py")):
        if path == SOURCE / "core" / "settings.py":
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            text = node.value if isinstance(node, ast.Constant) else None
            if (
                isinstance(node, ast.Constant)
                and isinstance(text, str)
                and _VARIABLE.fullmatch(text)
            ):
                named.append(f"{path.relative_to(SOURCE)}:{node.lineno} {text}")
    assert named == []
