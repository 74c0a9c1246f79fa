"""Every public module declares a sorted, complete __all__."""

from __future__ import annotations

import importlib
import pkgutil

import pytest

import llamon_agent


def _isort_key(name: str) -> tuple[int, str]:
    """Constants, then classes, then functions: the order ruff's RUF022 keeps."""
    kind = 0 if name.isupper() else 1 if name[:1].isupper() else 2
    return (kind, name)


MODULES = sorted(
    info.name
    for info in pkgutil.walk_packages(llamon_agent.__path__, "llamon_agent.")
    if not info.name.rsplit(".", 1)[-1].startswith("_") and not info.ispkg
)


@pytest.mark.parametrize("name", MODULES)
def test_all_is_sorted_and_resolves(name: str) -> None:
    module = importlib.import_module(name)
    exported = getattr(module, "__all__", None)
    assert exported is not None, f"{name} has no __all__"
    assert list(exported) == sorted(exported, key=_isort_key), f"{name}.__all__ is not sorted"
    for attr in exported:
        assert hasattr(module, attr), f"{name}.__all__ names missing {attr}"


def test_package_is_typed() -> None:
    from importlib.resources import files

    assert files("llamon_agent").joinpath("py.typed").is_file()
