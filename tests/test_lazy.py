"""``lazy_exports``: a package's public names load their module on first use, once."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest


@pytest.fixture
def package(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    root = tmp_path / "lazypkg"
    root.mkdir()
    (root / "__init__.py").write_text(
        "from llamon_agent._lazy import lazy_exports\n"
        "__all__ = ['Heavy', 'missing_home']\n"
        "_HOMES = {'Heavy': 'lazypkg.heavy'}\n"
        "__getattr__, __dir__ = lazy_exports(__name__, _HOMES, __all__)\n",
        encoding="utf-8",
    )
    (root / "heavy.py").write_text("class Heavy:\n    pass\n", encoding="utf-8")
    monkeypatch.syspath_prepend(str(tmp_path))
    yield "lazypkg"
    for name in [name for name in sys.modules if name.split(".")[0] == "lazypkg"]:
        del sys.modules[name]


def test_a_name_loads_its_module_on_first_use_and_stays(package: str) -> None:
    module = __import__(package)
    assert f"{package}.heavy" not in sys.modules
    heavy = module.Heavy
    assert f"{package}.heavy" in sys.modules
    assert heavy.__module__ == f"{package}.heavy"
    assert vars(module)["Heavy"] is heavy  # kept: the next read is a plain attribute


def test_from_import_works_and_an_unknown_name_is_an_attribute_error(package: str) -> None:
    assert __import__(package, fromlist=["Heavy"]).Heavy.__name__ == "Heavy"
    with pytest.raises(AttributeError, match=rf"module '{package}' has no attribute 'nope'"):
        getattr(__import__(package), "nope")  # noqa: B009 -- the attribute is the test


def test_dir_lists_the_public_names_before_they_load(package: str) -> None:
    module = __import__(package)
    assert {"Heavy", "missing_home"} <= set(dir(module))
    assert f"{package}.heavy" not in sys.modules
