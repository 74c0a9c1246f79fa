"""The Quality Lab as a pytest plugin (registered through the ``pytest11`` entry point).

Run case files as tests::

    pytest --llamon-lab cases/ --llamon-lab-target myagent:agent
    pytest --llamon-lab cases/bookshop.yaml --llamon-lab-url http://127.0.0.1:8000

With no test path on the command line only the cases run; with paths (``pytest tests/
--llamon-lab cases/``) both. Each case becomes one test item
(``cases/bookshop.yaml::bookshop-find-by-author``); a case file that does not load is a
collection error listing every problem. A case that does not pass fails its item with the
case's outcome, the assertions that did not hold, the failure record and the triage
guide's advice. ``--llamon-lab-card`` gives a ``--llamon-lab-target``
its card (``module:attribute`` or a JSON file).

The ``lab`` fixture runs one case from Python::

    def test_orders_are_planned(lab):
        result = lab.run({"mode": "plan", "query": "Order Dune", "expected_target":
                          "order_book"}, target=agent)
        lab.assert_passed(result)

(``await lab.arun(...)`` inside an ``async`` test.) Without ``--llamon-lab`` the plugin adds
only its options and the fixture; nothing else changes in a test run.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from llamon_agent.lab.cases import Case
    from llamon_agent.lab.results import CaseResult

__all__ = ["LabCaseFailed", "LabFixture", "describe_result", "lab"]

_PATHS = "llamon_lab"


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("llamon-lab", "llamon Quality Lab")
    group.addoption(
        "--llamon-lab",
        action="append",
        dest=_PATHS,
        default=[],
        metavar="PATH",
        help="Run the Quality Lab case files in PATH (a file or a directory) as tests.",
    )
    group.addoption(
        "--llamon-lab-target",
        dest="llamon_lab_target",
        metavar="MODULE:ATTR",
        help="The agent the cases run against, in process.",
    )
    group.addoption(
        "--llamon-lab-url",
        dest="llamon_lab_url",
        metavar="URL",
        help="The A2A agent the cases run against, by base URL.",
    )
    group.addoption(
        "--llamon-lab-card",
        dest="llamon_lab_card",
        metavar="MODULE:ATTR",
        help="The card of --llamon-lab-target (module:attribute or a JSON file).",
    )


def pytest_configure(config: pytest.Config) -> None:
    paths: list[str] = config.getoption(_PATHS) or []
    if not paths:
        return
    target = config.getoption("llamon_lab_target")
    url = config.getoption("llamon_lab_url")
    if (target is None) == (url is None):
        raise pytest.UsageError(
            "--llamon-lab needs the agent to run: --llamon-lab-target module:attribute "
            "or --llamon-lab-url URL (exactly one)"
        )
    for raw in paths:
        if not Path(raw).exists():
            raise pytest.UsageError(f"--llamon-lab {raw}: no such file or directory")
    roots = [Path(raw).resolve() for raw in paths]
    # a target or card that does not load is a usage error (exit 4) here, not the same
    # traceback in every case's failure
    _load_target(config)
    config.stash[_CARD] = _load_card(config)
    config.stash[_ROOTS] = roots
    if config.args_source is not pytest.Config.ArgsSource.ARGS:
        config.args[:] = paths  # no test path given: run only the cases
        return
    for raw in paths:
        if raw not in config.args:
            config.args.append(raw)


_ROOTS = pytest.StashKey[list[Path]]()
_AGENT = pytest.StashKey[object]()
_CARD = pytest.StashKey[Any]()


def pytest_collect_file(file_path: Path, parent: pytest.Collector) -> pytest.Collector | None:
    roots = parent.config.stash.get(_ROOTS, None)
    if not roots:
        return None
    from llamon_agent.lab.cases import CASE_FILE_SUFFIXES

    if file_path.suffix not in CASE_FILE_SUFFIXES:
        return None
    resolved = file_path.resolve()
    if not any(resolved == root or root in resolved.parents for root in roots):
        return None
    found: pytest.Collector = LabFile.from_parent(parent, path=file_path)
    return found


class LabFile(pytest.File):
    """A case file: one item per case."""

    def collect(self) -> Iterator[pytest.Item]:
        from llamon_agent.lab.cases import CaseFileError, load_cases

        try:
            cases = load_cases(self.path)
        except CaseFileError as exc:
            raise self.CollectError(str(exc)) from None
        for case in cases:
            yield LabItem.from_parent(self, name=case.label, case=case)


class LabCaseFailed(Exception):
    """A case did not pass; ``result`` is its ``CaseResult``."""

    def __init__(self, result: CaseResult) -> None:
        super().__init__(describe_result(result))
        self.result = result


class LabItem(pytest.Item):
    """One case, run against the agent the command line names."""

    def __init__(self, *, case: Case, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.case = case
        self.extra_keyword_matches.update(case.tags)  # -k selects cases by tag

    def runtest(self) -> None:
        config = self.config
        result = _run_sync(
            self.case,
            target=_load_target(config),
            url=config.getoption("llamon_lab_url"),
            card=config.stash.get(_CARD, None),
        )
        self.user_properties.append(("outcome", result.outcome))
        if not result.passed:
            raise LabCaseFailed(result)

    def repr_failure(
        self,
        excinfo: pytest.ExceptionInfo[BaseException],
        style: Any = None,
    ) -> str:
        if isinstance(excinfo.value, LabCaseFailed):
            return str(excinfo.value)
        return str(super().repr_failure(excinfo, style=style))

    def reportinfo(self) -> tuple[Path, int | None, str]:
        return self.path, None, f"lab case {self.case.label}"


def _load_target(config: pytest.Config) -> object | None:
    spec = config.getoption("llamon_lab_target")
    if spec is None:
        return None
    cached = config.stash.get(_AGENT, None)
    if cached is not None:
        return cached
    from llamon_agent.a2a.serve import load_agent

    try:
        agent = load_agent(spec)
    except ValueError as exc:
        raise pytest.UsageError(str(exc)) from None
    config.stash[_AGENT] = agent
    return agent


def _load_card(config: pytest.Config) -> Any:
    spec = config.getoption("llamon_lab_card")
    if spec is None:
        return None
    from llamon_agent.a2a.serve import load_card

    try:
        return load_card(spec)
    except ValueError as exc:
        raise pytest.UsageError(str(exc)) from None


def describe_result(result: CaseResult) -> str:
    """A case's result as the lines a failing test shows: outcome and message, each
    assertion that did not hold, the failure record, and the triage guide's advice."""
    lines = [f"lab case {result.case}: {result.outcome}"]
    if result.lab_reason:
        lines[0] += f" ({result.lab_reason})"
    if result.message:
        lines.append(f"  {result.message}")
    for item in result.failed_assertions:
        lines.append(
            f"  assertion {item.name}: expected {item.expected!r}, got {item.actual!r}"
            + (f" -- {item.message}" if item.message else "")
        )
    if result.failure is not None:
        record = ", ".join(f"{key}={value}" for key, value in result.failure.items())
        lines.append(f"  failure record: {record}")
    if result.steps:
        steps = ", ".join(
            f"{step.tool}" + ("" if step.ok else f" ({step.reason})") for step in result.steps
        )
        lines.append(f"  steps ({result.event_source}): {steps}")
    if result.triage is not None:
        lines.append(f"  triage -- symptom: {result.triage.get('symptom')}")
        lines.append(f"  triage -- look first: {result.triage.get('lookFirst')}")
        lines.append(f"  triage -- fix: {result.triage.get('fix')}")
    return "\n".join(lines)


def _as_case(case: Case | Mapping[str, Any]) -> Case:
    from llamon_agent.lab.cases import Case

    return case if isinstance(case, Case) else Case.model_validate(dict(case))


async def _run(case: Case, *, target: object | None, url: str | None, **options: Any) -> CaseResult:
    from llamon_agent.lab.runner import Lab

    async with Lab(target, url=url, **options) as lab:
        return await lab.run_case(case)


def _run_sync(case: Case, *, target: object | None, url: str | None, **options: Any) -> CaseResult:
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(_run(case, target=target, url=url, **options))
    raise RuntimeError("an event loop is running here: use 'await lab.arun(...)'")


class LabFixture:
    """What the ``lab`` fixture gives a test: run one case and check its result."""

    def run(
        self,
        case: Case | Mapping[str, Any],
        *,
        target: object | None = None,
        url: str | None = None,
        **options: Any,
    ) -> CaseResult:
        """Run ``case`` (a ``Case`` or its fields as a dict) against ``target`` (in
        process) or ``url``; ``options`` go to ``Lab`` (``card``, ``cleanup_tools`` ...).
        In an ``async`` test use ``arun``."""
        return _run_sync(_as_case(case), target=target, url=url, **options)

    async def arun(
        self,
        case: Case | Mapping[str, Any],
        *,
        target: object | None = None,
        url: str | None = None,
        **options: Any,
    ) -> CaseResult:
        """``run``, awaited."""
        return await _run(_as_case(case), target=target, url=url, **options)

    @staticmethod
    def assert_passed(result: CaseResult) -> None:
        """Raise ``AssertionError`` with ``describe_result`` unless the case passed."""
        if not result.passed:
            raise AssertionError(describe_result(result))


@pytest.fixture
def lab() -> LabFixture:
    """Run Quality Lab cases from a test (see the module docstring)."""
    return LabFixture()
